// core/: dtypes and 16-bit rounding, devices, shapes, the Tensor's geometry and views, factories,
// the Philox RNG, printing, parallel_for, and the errors for bad input.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/host_memory.h"
#include "test_util.h"

using namespace brigade;

// ---- dtypes and 16-bit floats -------------------------------------------------------------------

TEST_CASE("dtype sizes and names round-trip", "[core][dtype]") {
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64})
    REQUIRE(dtype_from_name(dtype_name(t)) == t);
  REQUIRE(dtype_size(DType::bf16) == 2);
  REQUIRE(dtype_size(DType::i64) == 8);
  REQUIRE_THROWS_WITH(dtype_from_name("f8"), Catch::Contains("unknown dtype 'f8'"));
}

// Independent decoders: a 16-bit pattern's exact value, computed from its fields with ldexp.
static double decode_f16(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  if (exp == 0x1f) v = mant ? NAN : INFINITY;
  return sign ? -v : v;
}
static double decode_bf16(uint16_t b) {
  int sign = b >> 15, exp = (b >> 7) & 0xff, mant = b & 0x7f;
  double v = exp == 0 ? std::ldexp(mant, -133) : std::ldexp(128 + mant, exp - 134);
  if (exp == 0xff) v = mant ? NAN : INFINITY;
  return sign ? -v : v;
}

// Round-to-nearest-even by brute force: the candidate patterns nearest to x, ties to the even one.
template <class Decode>
static uint16_t nearest_pattern(float x, Decode decode, uint16_t max_finite, uint16_t inf) {
  double v = std::abs(double(x));
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  // Binary search over positive finite patterns (monotonic in value).
  uint16_t lo = 0, hi = max_finite;
  while (hi - lo > 1) {
    uint16_t mid = uint16_t((lo + hi) / 2);
    (decode(mid) <= v ? lo : hi) = mid;
  }
  if (v >= decode(max_finite)) {
    // Beyond the largest finite value: rounds to it until halfway to the next power step, then inf.
    double next = 2 * decode(max_finite) - decode(uint16_t(max_finite - 1));
    return uint16_t(sign | (v >= (decode(max_finite) + next) / 2 ? inf : max_finite));
  }
  double dl = v - decode(lo), dh = decode(hi) - v;
  uint16_t pick = dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);
  return uint16_t(sign | pick);
}

TEST_CASE("f16 decodes every pattern exactly", "[core][dtype]") {
  for (uint32_t h = 0; h < 65536; ++h) {
    double expected = decode_f16(uint16_t(h));
    double got = f16::to_float(uint16_t(h));
    if (std::isnan(expected)) REQUIRE(std::isnan(got));
    else REQUIRE(got == expected);
  }
}

TEST_CASE("bf16 and f16 round to nearest, ties to even", "[core][dtype]") {
  Generator gen(7);
  std::vector<float> samples = {0.0f, -0.0f, 1.0f, 1.00390625f /* bf16 tie */, 65504.0f, 65519.0f, 65520.0f,
                                1e-8f, 5.960464477539063e-08f /* smallest f16 subnormal */, 2.98e-08f, 3e38f, -3e38f};
  for (int i = 0; i < 20000; ++i) {
    double u = philox_uniform(3, uint64_t(i));
    double scale = std::ldexp(1.0, int(u * 60) - 30);
    samples.push_back(float(philox_normal(5, uint64_t(i)) * scale));
  }
  // Exact ties for f16: a float halfway between two f16 neighbours.
  samples.push_back(float(1.0 + std::ldexp(1.0, -11)));
  samples.push_back(float(1.0 + 3 * std::ldexp(1.0, -11)));
  for (float x : samples) {
    INFO("x = " << x);
    REQUIRE(bf16(x).bits == nearest_pattern(x, decode_bf16, 0x7f7f, 0x7f80));
    REQUIRE(f16(x).bits == nearest_pattern(x, decode_f16, 0x7bff, 0x7c00));
  }
  REQUIRE(std::isnan(float(bf16(NAN))));
  REQUIRE(std::isnan(float(f16(NAN))));
  REQUIRE(float(f16(INFINITY)) == INFINITY);
}

// ---- devices and shapes ---------------------------------------------------------------------------

TEST_CASE("devices parse and print", "[core][device]") {
  REQUIRE(Device::parse("cpu") == Device::cpu());
  REQUIRE(Device::parse("cuda:3").index == 3);
  REQUIRE(Device::parse("cuda").str() == "cuda:0");
  REQUIRE_THROWS_WITH(Device::parse("tpu"), Catch::Contains("unknown device 'tpu'"));
  REQUIRE_THROWS_WITH(Device::parse("cuda:x"), Catch::Contains("unknown device"));
  REQUIRE(cuda_device_count() >= 0);  // never throws, also without a driver
}

TEST_CASE("shape helpers", "[core][shape]") {
  REQUIRE(shape_str({2, 3}) == "[2, 3]");
  REQUIRE(shape_numel({}) == 1);
  REQUIRE(contiguous_strides({2, 3, 4}) == Strides{12, 4, 1});
  REQUIRE(broadcast_shapes({3, 1}, {1, 4}, "op") == Shape{3, 4});
  REQUIRE(broadcast_shapes({5}, {2, 1}, "op") == Shape{2, 5});
  REQUIRE_THROWS_WITH(broadcast_shapes({2, 3}, {4}, "add"), Catch::Contains("add: shapes [2, 3] and [4] cannot be broadcast"));
  REQUIRE(wrap_dim(-1, 3, "op") == 2);
  REQUIRE_THROWS_WITH(wrap_dim(3, 3, "sum"), Catch::Contains("sum: dim 3 is out of range"));
}

// ---- tensors, factories and views -----------------------------------------------------------------

TEST_CASE("factories fill the values they promise", "[core][tensor]") {
  Tensor z = zeros({2, 3});
  REQUIRE(z.shape() == Shape{2, 3});
  REQUIRE(z.dtype() == DType::f32);
  REQUIRE(z.to_vector() == std::vector<double>(6, 0.0));
  REQUIRE(full({2}, 2.5, DType::f64).to_vector() == std::vector<double>{2.5, 2.5});
  REQUIRE(arange(5).to_vector() == std::vector<double>{0, 1, 2, 3, 4});
  REQUIRE(arange(1, 2, 0.25, DType::f32).to_vector() == std::vector<double>{1, 1.25, 1.5, 1.75});
  REQUIRE(arange(3, 0, -1).to_vector() == std::vector<double>{3, 2, 1});
  Tensor m = tensor({{1, 2, 3}, {4, 5, 6}});
  REQUIRE(m.shape() == Shape{2, 3});
  REQUIRE(m.at({1, 2}) == 6);
  REQUIRE(scalar(4, DType::i32).item() == 4);
  REQUIRE(from_vector(std::vector<int>{1, 2, 3, 4}, {2, 2}, DType::i64).at({1, 0}) == 3);
  REQUIRE_THROWS_WITH(from_vector(std::vector<double>{1, 2, 3}, {2, 2}), Catch::Contains("3 values do not fill shape [2, 2]"));
  REQUIRE_THROWS_WITH(tensor({{1, 2}, {3}}), Catch::Contains("ragged"));
  REQUIRE_THROWS_WITH(empty({2, -1}), Catch::Contains("negative size"));
}

TEST_CASE("item and at check their arguments", "[core][tensor]") {
  Tensor t = tensor({1, 2, 3});
  REQUIRE_THROWS_WITH(t.item(), Catch::Contains("item: tensor with shape [3] has 3 elements"));
  REQUIRE_THROWS_WITH(t.at({3}), Catch::Contains("out of bounds for shape [3]"));
  REQUIRE_THROWS_WITH(t.data<double>(), Catch::Contains("data<f64>(): tensor has dtype f32"));
  REQUIRE_THROWS_WITH(Tensor().numel(), Catch::Contains("undefined tensor"));
}

TEST_CASE("views share storage and only change geometry", "[core][views]") {
  Tensor base = arange(0, 24, 1, DType::f64).reshape({2, 3, 4});
  REQUIRE(base.strides() == Strides{12, 4, 1});

  Tensor t = base.transpose(0, 2);  // [4, 3, 2]
  REQUIRE(t.shape() == Shape{4, 3, 2});
  REQUIRE(t.strides() == Strides{1, 4, 12});
  REQUIRE(!t.is_contiguous());
  REQUIRE(t.storage().same_as(base.storage()));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 2; ++k) REQUIRE(t.at({i, j, k}) == double(k * 12 + j * 4 + i));

  Tensor s = base.slice(2, 1, 4, 2);  // columns 1 and 3
  REQUIRE(s.shape() == Shape{2, 3, 2});
  REQUIRE(s.offset() == 1);
  REQUIRE(s.at({1, 2, 1}) == 12 + 8 + 3);
  REQUIRE(base.slice(0, -1, 100).shape() == Shape{1, 3, 4});  // python-style clamping
  REQUIRE(base.slice(1, 2, 1).shape() == Shape{2, 0, 4});     // empty, not an error

  // Writing through a view is visible in the base.
  ops::fill_(base.select(1, 0), -1.0);
  REQUIRE(base.at({1, 0, 3}) == -1.0);
  REQUIRE(base.at({1, 1, 3}) == 19.0);

  Tensor e = tensor({1, 2, 3}, DType::f64).unsqueeze(0).expand({4, -1});
  REQUIRE(e.shape() == Shape{4, 3});
  REQUIRE(e.strides() == Strides{0, 1});
  REQUIRE(e.at({3, 2}) == 3);

  REQUIRE(base.unsqueeze(-1).shape() == Shape{2, 3, 4, 1});
  REQUIRE(base.unsqueeze(1).squeeze(1).shape() == Shape{2, 3, 4});
  REQUIRE(base.squeeze(0).shape() == Shape{2, 3, 4});  // size 2: unchanged, as in PyTorch
  REQUIRE(base.permute({2, 0, 1}).shape() == Shape{4, 2, 3});
  REQUIRE(base.narrow(2, 1, 2).shape() == Shape{2, 3, 2});
  REQUIRE(base.view({6, -1}).shape() == Shape{6, 4});
}

TEST_CASE("contiguous and reshape copy only when they must", "[core][views]") {
  Tensor base = arange(0, 6, 1, DType::f32).reshape({2, 3});
  REQUIRE(base.contiguous().same_as(base));
  Tensor t = base.transpose(0, 1);
  Tensor c = t.contiguous();
  REQUIRE(c.is_contiguous());
  REQUIRE(!c.storage().same_as(base.storage()));
  REQUIRE(c.to_vector() == std::vector<double>{0, 3, 1, 4, 2, 5});
  REQUIRE(t.reshape({6}).to_vector() == std::vector<double>{0, 3, 1, 4, 2, 5});
  REQUIRE(base.reshape({3, 2}).storage().same_as(base.storage()));
  Tensor cl = base.clone();
  REQUIRE(!cl.storage().same_as(base.storage()));
  REQUIRE(cl.to_vector() == base.to_vector());
}

TEST_CASE("bad view arguments name the shapes involved", "[core][views]") {
  Tensor base = zeros({2, 3});
  REQUIRE_THROWS_WITH(base.view({4, 2}), Catch::Contains("view: shape [4, 2] is invalid for [2, 3] (6 elements)"));
  REQUIRE_THROWS_WITH(base.view({-1, -1}), Catch::Contains("only one dimension can be -1"));
  REQUIRE_THROWS_WITH(base.transpose(0, 1).view({6}), Catch::Contains("view: a tensor with shape [3, 2] and strides [1, 3] cannot be viewed as [6] without copying"));
  REQUIRE_THROWS_WITH(base.expand({4, 3}), Catch::Contains("expand: shape [2, 3] cannot be expanded to [4, 3]"));
  REQUIRE_THROWS_WITH(base.permute({0, 0}), Catch::Contains("permute: dim 0 repeated"));
  REQUIRE_THROWS_WITH(base.permute({0}), Catch::Contains("permute: 1 dims given for a tensor with shape [2, 3]"));
  REQUIRE_THROWS_WITH(base.narrow(1, 2, 2), Catch::Contains("narrow: range [2, 4) is outside dim 1 of size 3"));
  REQUIRE_THROWS_WITH(base.select(0, 2), Catch::Contains("select: index 2 is out of range"));
  REQUIRE_THROWS_WITH(base.slice(5, 0, 1), Catch::Contains("slice: dim 5 is out of range"));
  REQUIRE_THROWS_WITH(make_view(base, {3, 3}, {3, 1}, 0), Catch::Contains("reaches outside a storage of 6 elements"));
  if (!cuda_available()) REQUIRE_THROWS_WITH(base.to(Device::cuda(0)), Catch::Contains("cuda:0"));
}

TEST_CASE("dtype conversion rounds like the scalar conversions", "[core][tensor]") {
  Tensor x = test::random({64}, 11, DType::f32, 100.0);
  Tensor b = x.to(DType::bf16), h = x.to(DType::f16), i = x.to(DType::i32);
  std::vector<double> xv = x.to_vector(), bv = b.to_vector(), hv = h.to_vector(), iv = i.to_vector();
  for (size_t k = 0; k < xv.size(); ++k) {
    REQUIRE(bv[k] == double(float(bf16(float(xv[k])))));
    REQUIRE(hv[k] == double(float(f16(float(xv[k])))));
    REQUIRE(iv[k] == double(int32_t(float(xv[k]))));  // C++ conversion: truncation toward zero
  }
}

TEST_CASE("printing shows shape, dtype, device and truncated values", "[core][tensor]") {
  std::string small = tensor({{1, 2}, {3, 4}}).str();
  REQUIRE(small.find("shape=[2, 2]") != std::string::npos);
  REQUIRE(small.find("dtype=f32") != std::string::npos);
  REQUIRE(small.find("device=cpu") != std::string::npos);
  REQUIRE(small.find("[3, 4]") != std::string::npos);
  std::string big = arange(1000, DType::i64).reshape({100, 10}).str();
  REQUIRE(big.find("...") != std::string::npos);
  REQUIRE(big.find("999") != std::string::npos);
  REQUIRE(big.size() < 600);
  std::ostringstream os;
  os << Tensor();
  REQUIRE(os.str() == "Tensor(undefined)");
}

// ---- random numbers -------------------------------------------------------------------------------

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors", "[core][rng]") {
  using W = std::array<uint32_t, 4>;
  REQUIRE(philox4x32(W{0, 0, 0, 0}, {0, 0}) == W{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  REQUIRE(philox4x32(W{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
          W{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  REQUIRE(philox4x32(W{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
          W{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
  REQUIRE(philox4x32(uint64_t(0x85a308d3243f6a88ull), uint64_t(7)) == philox4x32(W{0x243f6a88, 0x85a308d3, 0, 0}, {7, 0}));
}

TEST_CASE("random tensors are reproducible, continue by offset and look normal/uniform", "[core][rng]") {
  Generator g1(42), g2(42);
  Tensor a = randn({1000}, DType::f64, Device::cpu(), &g1);
  Tensor b1 = randn({400}, DType::f64, Device::cpu(), &g2);
  Tensor b2 = randn({600}, DType::f64, Device::cpu(), &g2);
  std::vector<double> av = a.to_vector(), joined = b1.to_vector(), tail = b2.to_vector();
  joined.insert(joined.end(), tail.begin(), tail.end());
  REQUIRE(av == joined);  // two draws == one draw of the combined size
  REQUIRE(g1.offset == 1000);
  // Element i is a pure function of (seed, offset + i).
  REQUIRE(av[123] == philox_normal(42, 123));

  Generator g3(1);
  std::vector<double> n = randn({200000}, DType::f64, Device::cpu(), &g3).to_vector();
  double mean = 0, sq = 0;
  for (double v : n) mean += v;
  mean /= double(n.size());
  for (double v : n) sq += (v - mean) * (v - mean);
  double stddev = std::sqrt(sq / double(n.size()));
  REQUIRE(std::abs(mean) < 0.01);
  REQUIRE(std::abs(stddev - 1) < 0.01);

  std::vector<double> u = uniform({100000}, -2, 3, DType::f32, Device::cpu(), &g3).to_vector();
  REQUIRE(*std::min_element(u.begin(), u.end()) >= -2);
  REQUIRE(*std::max_element(u.begin(), u.end()) <= 3);
  double umean = 0;
  for (double v : u) umean += v;
  REQUIRE(std::abs(umean / double(u.size()) - 0.5) < 0.02);

  manual_seed(9);
  Tensor d1 = randn({5});
  manual_seed(9);
  REQUIRE(randn({5}).to_vector() == d1.to_vector());
  REQUIRE_THROWS_WITH(randn({2}, DType::i32), Catch::Contains("randn: dtype must be floating point, got i32"));
  REQUIRE_THROWS_WITH(uniform({2}, 1, 1), Catch::Contains("low (1) must be below high (1)"));
}

// ---- parallel_for ---------------------------------------------------------------------------------

TEST_CASE("parallel_for visits every index exactly once, also when nested", "[core][parallel]") {
  const int64_t n = 100003;
  std::vector<std::atomic<int>> hits(n);
  parallel_for(n, 1000, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) hits[size_t(i)]++;
  });
  for (auto& h : hits) REQUIRE(h.load() == 1);

  std::vector<std::atomic<int>> nested(64 * 64);
  parallel_for(64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      parallel_for(64, 1, [&](int64_t b2, int64_t e2) {
        for (int64_t j = b2; j < e2; ++j) nested[size_t(i * 64 + j)]++;
      });
  });
  for (auto& h : nested) REQUIRE(h.load() == 1);
  parallel_for(0, 1, [&](int64_t, int64_t) { FAIL("called for an empty range"); });
}

TEST_CASE("view regroups dims inside contiguous chunks without copying", "[core][views]") {
  Tensor base = arange(0, 24, 1, DType::f64).reshape({4, 6});
  Tensor rows = base.slice(0, 0, 4, 2);  // rows 0 and 2: shape [2, 6], strides [12, 1]
  Tensor v = rows.view({2, 2, 3});
  REQUIRE(v.storage().same_as(base.storage()));
  REQUIRE(v.strides() == Strides{12, 3, 1});
  REQUIRE(v.to_vector() == rows.to_vector());
  REQUIRE_THROWS_WITH(rows.view({-1}), Catch::Contains("cannot be viewed as [12] without copying"));
  REQUIRE(rows.reshape({-1}).to_vector() == rows.to_vector());  // reshape copies instead
}

TEST_CASE("sizes that overflow 64 bits are refused, not wrapped", "[core][tensor]") {
  REQUIRE_THROWS_WITH(zeros({3, 6148914691236517206LL}), Catch::Contains("more elements than fit in 64 bits"));
  REQUIRE_THROWS_WITH(empty({int64_t(1) << 61, 2}, DType::f64), Catch::Contains("more bytes than fit in 64 bits"));
  Tensor t = zeros({4});
  REQUIRE_THROWS_WITH(make_view(t, {3, 3}, {int64_t(1) << 62, 1}, 0), Catch::Contains("overflows 64-bit offsets"));
}

TEST_CASE("in-place ops handle sources that alias the destination", "[core][inplace]") {
  Tensor x = tensor({{1, 2}, {3, 4}}, DType::f64);
  ops::add_(x, x.transpose(0, 1));
  REQUIRE(x.to_vector() == std::vector<double>{2, 5, 5, 8});
  Tensor y = tensor({1, 2, 3, 4, 5}, DType::f64);
  ops::copy_(y.slice(0, 1, 5), y.slice(0, 0, 4));  // shift right by one
  REQUIRE(y.to_vector() == std::vector<double>{1, 1, 2, 3, 4});
  Tensor e = zeros({1}, DType::f64).expand({1000});
  REQUIRE_THROWS_WITH(ops::add_(e, ones({1000}, DType::f64)), Catch::Contains("add_: destination has overlapping elements"));
  REQUIRE_THROWS_WITH(ops::copy_(e, ones({1000}, DType::f64)), Catch::Contains("copy_: destination has overlapping elements"));
  REQUIRE_THROWS_WITH(ops::scale_(e, 2.0), Catch::Contains("scale_: destination has overlapping elements"));
  // Every in-place write bumps the storage's version, seen through any view.
  uint64_t before = y.storage().version();
  ops::fill_(y.slice(0, 0, 2), 0.0);
  REQUIRE(y.storage().version() > before);
}

TEST_CASE("uniform never returns its upper bound, even after rounding to bf16", "[core][rng]") {
  Generator g(3);
  std::vector<double> u = uniform({200000}, 0, 1, DType::bf16, Device::cpu(), &g).to_vector();
  REQUIRE(*std::max_element(u.begin(), u.end()) < 1.0);
  REQUIRE(*std::max_element(u.begin(), u.end()) > 0.99);
}

TEST_CASE("an exception inside parallel_for reaches the caller", "[core][parallel]") {
  REQUIRE_THROWS_WITH(parallel_for(1000, 1, [](int64_t b, int64_t e) {
                        for (int64_t i = b; i < e; ++i)
                          if (i == 777) fail("boom at ", i);
                      }),
                      Catch::Contains("boom at 777"));
  // The pool still works afterwards.
  std::atomic<int64_t> total{0};
  parallel_for(1000, 1, [&](int64_t b, int64_t e) { total += e - b; });
  REQUIRE(total == 1000);
}

TEST_CASE("tensor literals of any rank", "[core][factory]") {
  // A column: once ambiguous between a list of numbers and a list of rows.
  Tensor column = tensor({{1.5}, {-2.0}, {0.5}});
  REQUIRE(column.shape() == Shape{3, 1});
  REQUIRE(column.to_vector() == std::vector<double>{1.5, -2.0, 0.5});
  Tensor cube = tensor({{{1, 2}}, {{3, 4}}}, DType::i64);
  REQUIRE(cube.shape() == Shape{2, 1, 2});
  REQUIRE(cube.dtype() == DType::i64);
  REQUIRE(cube.to_vector() == std::vector<double>{1, 2, 3, 4});
  REQUIRE(tensor({1, 2, 3}).shape() == Shape{3});
  REQUIRE(tensor({{1, 2}, {3, 4}}).to_vector() == std::vector<double>{1, 2, 3, 4});
  REQUIRE(tensor(2.5).shape() == Shape{});
  REQUIRE(tensor(2.5).to_vector() == std::vector<double>{2.5});
  REQUIRE(tensor({}).shape() == Shape{0});
  REQUIRE_THROWS_WITH(tensor({{1, 2}, {3}}), Catch::Contains("ragged literal: element 1 has shape [1] where element 0 has [2]"));
  REQUIRE_THROWS_WITH(tensor({{{1}}, {2}}), Catch::Contains("ragged literal"));
}

TEST_CASE("host memory statistics count what tensors hold, rounded to 64 bytes, and the peak", "[core][memory]") {
  const HostMemoryStats before = host_memory_stats();
  reset_host_peak_memory();
  REQUIRE(host_memory_stats().peak_allocated == before.allocated);
  {
    Tensor a = empty({1000}, DType::f32);  // 4000 bytes -> 4032
    REQUIRE(host_memory_stats().allocated == before.allocated + 4032);
    {
      Tensor b = empty({3}, DType::f64);  // 24 bytes -> 64
      Tensor view = a.slice(0, 10, 20);   // a view allocates nothing
      REQUIRE(host_memory_stats().allocated == before.allocated + 4032 + 64);
    }
    REQUIRE(host_memory_stats().allocated == before.allocated + 4032);
    REQUIRE(host_memory_stats().peak_allocated == before.allocated + 4032 + 64);
  }
  REQUIRE(host_memory_stats().allocated == before.allocated);
  reset_host_peak_memory();
  REQUIRE(host_memory_stats().peak_allocated == before.allocated);
}

// Two ranks as threads of one process: each thread's blocks are charged to its own account, stay
// there when another thread frees them, and parallel_for's workers charge the caller's account.
TEST_CASE("host memory accounts: per thread, until freed by anyone, workers included", "[core][memory]") {
  auto first = std::make_shared<HostMemoryAccount>(), second = std::make_shared<HostMemoryAccount>();
  Tensor handed_over;
  std::thread([&] {
    HostMemoryScope scope(first);
    Tensor kept = empty({1000}, DType::f32);  // 4032 bytes, freed at the end of the thread
    handed_over = empty({16}, DType::f32);    // 64 bytes, freed later by the main thread
    REQUIRE(first->allocated() == 4032 + 64);
  }).join();
  CHECK(first->allocated() == 64);
  CHECK(first->peak() == 4032 + 64);
  std::thread([&] {
    HostMemoryScope scope(second);
    // Each index allocates 6400 bytes on whichever thread runs it; all of it is the caller's. The
    // pause lets a worker claim a chunk before the caller has run them all.
    std::mutex m;
    std::vector<Tensor> made;
    parallel_for(64, 1, [&](int64_t begin, int64_t end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      for (int64_t i = begin; i < end; ++i) {
        Tensor t = empty({1600}, DType::f32);
        std::lock_guard<std::mutex> lock(m);
        made.push_back(t);
      }
    });
    CHECK(second->allocated() == 64 * 6400);
  }).join();
  CHECK(second->allocated() == 0);
  CHECK(second->peak() == 64 * 6400);
  handed_over = Tensor();  // freed here, released from the account that paid for it
  CHECK(first->allocated() == 0);
  first->reset_peak();
  CHECK(first->peak() == 0);
  CHECK(current_host_memory_account() == nullptr);  // no scope on this thread
}
