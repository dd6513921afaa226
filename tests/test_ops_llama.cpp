// Tests for the ops of LLaMA-style blocks: rotary position embedding (ops::rope_frequencies,
// ops::rope_table, ops::rope and its backward, brigade::rope) and SwiGLU's gate (ops::swiglu,
// brigade::swiglu). References are f64 loops written here from the formulas (HF's rotate_half
// layout, silu(g) * u), finite differences (gradcheck), and properties a rotation must have.
#include <cmath>
#include <numbers>

#include "test_util.h"

using namespace brigade;
using Catch::Contains;
using test::leaf;
using test::random;
using test::require_close;
using test::require_gradcheck;

namespace {

// theta^(-2i/D), no scaling: the plain rotary frequencies.
double plain_frequency(double theta, int64_t i, int64_t D) { return 1.0 / std::pow(theta, double(2 * i) / double(D)); }

// rope of x [B, H, T, D] at positions [start, start + T), written from the rotate_half definition:
// y = x * cos(angle) + rotate_half(x) * sin(angle), rotate_half(x) = [-x2, x1], with each angle
// repeated over both halves, as Hugging Face's LLaMA builds it.
std::vector<double> rope_reference(const Tensor& x, int64_t start, const std::vector<double>& inv_freq) {
  const std::vector<double> v = ops::contiguous(x).to_vector();
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), D = x.size(3), half = D / 2;
  std::vector<double> y(v.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const size_t row = size_t(((b * H + h) * T + t) * D);
        for (int64_t d = 0; d < D; ++d) {
          const double angle = double(start + t) * inv_freq[size_t(d % half)];
          const double rotated = d < half ? -v[row + size_t(d + half)] : v[row + size_t(d - half)];
          y[row + size_t(d)] = v[row + size_t(d)] * std::cos(angle) + rotated * std::sin(angle);
        }
      }
  return y;
}

std::vector<double> plain_frequencies(double theta, int64_t D) {
  std::vector<double> f;
  for (int64_t i = 0; i < D / 2; ++i) f.push_back(plain_frequency(theta, i, D));
  return f;
}

}  // namespace

TEST_CASE("rope: f64 matches the rotate_half formula, any strides, any start", "[rope]") {
  const Tensor x = random({2, 3, 5, 8}, 11);
  for (int64_t start : {0, 7, 4093}) {
    for (double theta : {10000.0, 500000.0}) {
      INFO("start " << start << ", theta " << theta);
      const RopeParams p{.theta = theta};
      const std::vector<double> expected = rope_reference(x, start, plain_frequencies(theta, 8));
      require_close(rope(x, start, p), expected, 1e-12, 1e-12);
      // q as the attention module makes it: a [B, T, H, D] projection seen as [B, H, T, D].
      const Tensor x_view = ops::contiguous(x.transpose(1, 2)).transpose(1, 2);
      require_close(rope(x_view, start, p), expected, 1e-12, 1e-12);
      require_close(rope(test::strided(x), start, p), expected, 1e-12, 1e-12);
    }
  }
  // f32 and bf16 inputs: the same rotation, rounded (the table in f32).
  const std::vector<double> expected = rope_reference(x, 3, plain_frequencies(10000, 8));
  require_close(rope(ops::to_dtype(x, DType::f32), 3), expected, 1e-5, 1e-5);
  require_close(rope(ops::to_dtype(x, DType::bf16), 3), expected, 3e-2, 1e-2);
}

TEST_CASE("rope: a rotation — norms kept, q.k depends only on the distance, backward inverts", "[rope]") {
  const Tensor q = random({1, 1, 1, 16}, 21), k = random({1, 1, 1, 16}, 22);
  const RopeParams p{.theta = 10000};
  const auto dot = [](const Tensor& a, const Tensor& b) {
    const std::vector<double> x = a.to_vector(), y = b.to_vector();
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
    return s;
  };
  // Query at m and key at n score the same as at m + 40 and n + 40.
  const double near = dot(rope(q, 9, p), rope(k, 4, p)), far = dot(rope(q, 49, p), rope(k, 44, p));
  REQUIRE(std::abs(near - far) < 1e-12);
  REQUIRE(std::abs(dot(rope(q, 9, p), rope(q, 9, p)) - dot(q, q)) < 1e-12);
  REQUIRE(std::abs(near - dot(q, k)) > 1e-3);  // and it does turn them
  const Tensor x = random({2, 2, 6, 8}, 23);
  const ops::RopeTable table = ops::rope_table(8, 5, 6, p, DType::f64, Device::cpu());
  require_close(ops::rope_backward(ops::rope(x, table), table), x, 1e-12, 1e-12);
}

TEST_CASE("rope: gradients (gradcheck in f64)", "[rope][grad]") {
  const RopeParams llama3{.theta = 500000, .llama3 = RopeLlama3Scaling{.original_max_position_embeddings = 64}};
  require_gradcheck([](const std::vector<Tensor>& in) { return rope(in[0], 3); }, {leaf(random({2, 3, 4, 6}, 31))});
  require_gradcheck([&](const std::vector<Tensor>& in) { return rope(in[0].transpose(1, 2), 100, llama3); },
                    {leaf(random({2, 4, 3, 8}, 32))});
  require_gradcheck([](const std::vector<Tensor>& in) { return rope(in[0], 0); }, {test::strided_leaf(random({1, 2, 3, 4}, 33))});
}

TEST_CASE("rope: llama3 frequency scaling keeps fast pairs, stretches slow ones, blends between", "[rope]") {
  const int64_t D = 128;
  const RopeLlama3Scaling s{.factor = 8, .low_freq_factor = 1, .high_freq_factor = 4, .original_max_position_embeddings = 8192};
  const std::vector<double> scaled = ops::rope_frequencies(D, {.theta = 500000, .llama3 = s});
  const std::vector<double> plain = ops::rope_frequencies(D, {.theta = 500000});
  int kept = 0, stretched = 0, blended = 0;
  for (int64_t i = 0; i < D / 2; ++i) {
    const double f = plain_frequency(500000, i, D), wavelength = 2 * std::numbers::pi / f;
    REQUIRE(plain[size_t(i)] == Approx(f).epsilon(1e-14));
    INFO("pair " << i << ", wavelength " << wavelength);
    if (wavelength < 8192.0 / 4) {  // shorter than 2048 positions: local order, untouched
      REQUIRE(scaled[size_t(i)] == Approx(f).epsilon(1e-14));
      ++kept;
    } else if (wavelength > 8192.0 / 1) {  // longer than the original context: stretched 8x
      REQUIRE(scaled[size_t(i)] == Approx(f / 8).epsilon(1e-14));
      ++stretched;
    } else {  // between: linear in 8192 / wavelength from f / 8 (at 1) to f (at 4)
      const double w = (8192.0 / wavelength - 1) / 3;
      REQUIRE(scaled[size_t(i)] == Approx(f / 8 + w * (f - f / 8)).epsilon(1e-12));
      REQUIRE(scaled[size_t(i)] < f);
      REQUIRE(scaled[size_t(i)] > f / 8);
      ++blended;
    }
  }
  REQUIRE(kept > 0);
  REQUIRE(stretched > 0);
  REQUIRE(blended > 0);
  // And the op turns by them.
  const Tensor x = random({1, 2, 3, D}, 41);
  require_close(rope(x, 1000, {.theta = 500000, .llama3 = s}), rope_reference(x, 1000, scaled), 1e-12, 1e-12);
}

TEST_CASE("rope: the table is made in f64 and rounded once", "[rope]") {
  // At position 300000 an angle computed in f32 is off by up to half an f32 ulp of 3e5 (~0.016):
  // the f32 table must instead be cos/sin of the exact angle, rounded.
  const ops::RopeTable t32 = ops::rope_table(4, 300000, 2, {}, DType::f32, Device::cpu());
  const std::vector<double> c = t32.cos.to_vector(), s = t32.sin.to_vector();
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t i = 0; i < 2; ++i) {
      const double angle = double(300000 + t) * plain_frequency(10000, i, 4);
      REQUIRE(c[size_t(t * 2 + i)] == double(float(std::cos(angle))));
      REQUIRE(s[size_t(t * 2 + i)] == double(float(std::sin(angle))));
    }
}

TEST_CASE("rope: bad inputs", "[rope][errors]") {
  REQUIRE_THROWS_WITH(rope(zeros({1, 2, 3, 5}), 0), Contains("rope: head_dim must be positive and even, got 5"));
  REQUIRE_THROWS_WITH(rope(zeros({2, 3, 4}), 0), Contains("rope: expected input [B, H, T, D], got [2, 3, 4]"));
  const ops::RopeTable t = ops::rope_table(4, 0, 3, {}, DType::f32, Device::cpu());
  REQUIRE_THROWS_WITH(ops::rope(zeros({1, 1, 2, 4}), t), Contains("must be f32 [2, 2] on cpu, got f32 [3, 2] on cpu"));
  REQUIRE_THROWS_WITH(ops::rope(zeros({1, 1, 3, 4}, DType::f64), t), Contains("must be f64 [3, 2]"));
  REQUIRE_THROWS_WITH(ops::rope_frequencies(4, {.theta = 10000, .llama3 = RopeLlama3Scaling{.low_freq_factor = 4}}),
                      Contains("low_freq_factor=4, high_freq_factor=4"));
}

TEST_CASE("swiglu: silu(gate) * up against f64 loops; gradcheck", "[swiglu]") {
  const Tensor g = random({3, 7}, 51, DType::f64, 3.0), u = random({3, 7}, 52);
  std::vector<double> expected;
  const std::vector<double> gv = g.to_vector(), uv = u.to_vector();
  for (size_t i = 0; i < gv.size(); ++i) expected.push_back(gv[i] / (1 + std::exp(-gv[i])) * uv[i]);
  require_close(swiglu(g, u), expected, 1e-14, 1e-14);
  require_close(swiglu(test::transposed(g), test::strided(u)), expected, 1e-14, 1e-14);
  require_close(swiglu(ops::to_dtype(g, DType::f32), ops::to_dtype(u, DType::f32)), expected, 1e-5, 1e-5);
  require_close(swiglu(ops::to_dtype(g, DType::bf16), ops::to_dtype(u, DType::bf16)), expected, 5e-2, 2e-2);
  require_gradcheck([](const std::vector<Tensor>& in) { return swiglu(in[0], in[1]); },
                    {leaf(random({4, 5}, 53, DType::f64, 3.0)), leaf(random({4, 5}, 54))});
  require_gradcheck([](const std::vector<Tensor>& in) { return swiglu(in[0], in[1]); },
                    {test::strided_leaf(random({2, 3}, 55)), leaf(random({2, 3}, 56))});
}

TEST_CASE("swiglu: bad inputs", "[swiglu][errors]") {
  REQUIRE_THROWS_WITH(swiglu(zeros({2, 3}), zeros({3, 2})), Contains("swiglu: gate [2, 3] and up [3, 2] must have one shape"));
  REQUIRE_THROWS_WITH(swiglu(zeros({2, 3}), zeros({2, 3}, DType::f64)), Contains("swiglu: dtypes differ: f32 and f64"));
}
