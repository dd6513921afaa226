// The tuned matmul backend (kernels/cuda/gemm_tuner.h): it returns the bits of the backend it chose,
// measures each problem key once, refuses a candidate whose output disagrees with cuBLAS's, and
// measures nothing inside a CUDA graph capture. Timing on the emulator means nothing, so the cases
// that depend on who wins inject a timer; the shapes are tiny, the emulator is slow.
// Run by tests/gpu_main.cpp, which skips without a GPU (and in a build without CUDA, where this file
// is empty: the tuner's hooks live in the CUDA code).
#include <catch2/catch.hpp>

#if BRIGADE_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <thread>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/cuda_graph.h"
#include "core/factory.h"
#include "core/rng.h"
#include "kernels/cuda/gemm_tuner.h"
#include "kernels/ops.h"

using namespace brigade;
using Catch::Contains;
using ops::MatmulBackend;

namespace {

const Device kGpu = Device::cuda(0);

Tensor random(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return uniform(shape, -1.0, 1.0, DType::f32, Device::cpu(), &gen).to(dtype).to(kGpu);
}

std::vector<double> bits(const Tensor& t) { return t.to(Device::cpu()).to_vector(); }

// A fresh cache and the given hooks for one test, with every size tuned (the emulator runs only
// small shapes, all below the default threshold) unless the hooks say otherwise; the defaults again
// afterwards.
struct TunerScope {
  explicit TunerScope(cuda::GemmTunerTestHooks hooks = {}) {
    if (hooks.min_flops < 0) hooks.min_flops = 0;
    ops::clear_matmul_tunings();
    cuda::set_gemm_tuner_test_hooks(std::move(hooks));
  }
  ~TunerScope() {
    cuda::set_gemm_tuner_test_hooks({});
    ops::clear_matmul_tunings();
  }
};

// A timer under which the backends listed are the fastest, in that order (the others tie behind
// them); it runs nothing.
cuda::GemmTimer ranking(std::vector<MatmulBackend> order) {
  return [order](MatmulBackend backend, const std::function<void()>&) {
    for (size_t i = 0; i < order.size(); ++i)
      if (order[i] == backend) return double(i + 1);
    return 100.0;
  };
}

// Captures std::cerr for a scope (the tuner's warnings go there).
struct CaptureCerr {
  std::ostringstream text;
  std::streambuf* previous = std::cerr.rdbuf(text.rdbuf());
  ~CaptureCerr() { std::cerr.rdbuf(previous); }
};

// The candidates a 16-bit call gets here: cuBLAS, tensor_core, and hopper where the device runs it.
std::vector<MatmulBackend> half_candidates() {
  std::vector<MatmulBackend> list = {MatmulBackend::cublas, MatmulBackend::tensor_core};
  if (ops::matmul_backend_available(MatmulBackend::hopper, kGpu)) list.push_back(MatmulBackend::hopper);
  return list;
}

struct Product {
  const char* what;
  Tensor a, b;
};

// Sizes that are no multiple of any backend's tiles, a transposed A with a linear layer's Wᵀ as B,
// and a batch with B broadcast.
std::vector<Product> products(DType t) {
  return {{"[37, 72] @ [72, 45]", random({37, 72}, t, 1), random({72, 45}, t, 2)},
          {"[72, 37]ᵀ @ [45, 72]ᵀ", random({72, 37}, t, 3).transpose(0, 1), random({45, 72}, t, 4).transpose(0, 1)},
          {"[2, 19, 40] @ [40, 23]", random({2, 19, 40}, t, 5), random({40, 23}, t, 6)}};
}

struct Linear {
  Tensor x, w, bias;
};
Linear linear_inputs(DType t) { return {random({2, 33, 72}, t, 7), random({45, 72}, t, 8), random({45}, t, 9)}; }

// Every other element that is not an integer one bf16 ulp (2⁻⁷ of it) bigger: what a GEMM that sums
// in another order might return on real data. Integers stay: on the tuner's synthetic operands, whose
// products are integers, such a GEMM agrees exactly with cuBLAS, as a correct one must. (On the
// emulator cuBLAS, tiled, tensor_core and hopper all sum 16-bit products in order, in f32, to the
// same bf16 bits.)
void nudge(const Tensor& t) {
  std::vector<double> v = t.to(Device::cpu()).to_vector();
  for (size_t i = 0; i < v.size(); i += 2)
    if (v[i] != std::nearbyint(v[i])) v[i] *= 1.0 + 1.0 / 128;
  ops::copy_(t, from_vector(v, t.shape(), t.dtype(), t.device()));
}

// The default candidates and one that rounds differently from cuBLAS, as "tiled": for f32 the tiled
// GEMM itself (its f32 bits differ from cuBLAS's, on the emulator too: it uses fused multiply-adds,
// the emulated cuBLAS rounds each product); for 16-bit dtypes, whose products are exact, cuBLAS nudged.
std::vector<cuda::GemmCandidate> with_different_rounding(const cuda::GemmCall& call) {
  std::vector<cuda::GemmCandidate> list = cuda::default_gemm_candidates(call);
  list.push_back({MatmulBackend::tiled, [](const cuda::GemmCall& c) {
                    if (c.out.dtype() == DType::f32) return cuda::run_gemm(c, MatmulBackend::tiled);
                    cuda::run_gemm(c, MatmulBackend::cublas);
                    nudge(c.out);
                    if (c.pre.defined()) nudge(c.pre);
                  }});
  return list;
}

}  // namespace

TEST_CASE("tuned returns the bits of the backend it chose, for matmul and linear", "[tuner]") {
  for (DType t : {DType::bf16, DType::f32}) {
    // The default candidates (f32: cuBLAS alone) and one more that rounds differently from cuBLAS:
    // with it winning, returning any other candidate's output fails the checks below.
    std::vector<MatmulBackend> candidates = t == DType::f32 ? std::vector<MatmulBackend>{MatmulBackend::cublas}
                                                            : half_candidates();
    candidates.push_back(MatmulBackend::tiled);
    for (MatmulBackend winner : candidates) {
      cuda::GemmTunerTestHooks hooks;
      hooks.timer = ranking({winner});
      hooks.candidates = with_different_rounding;
      TunerScope scope(hooks);
      INFO(dtype_name(t) << ", " << ops::matmul_backend_name(winner) << " fastest");
      const bool nudged = winner == MatmulBackend::tiled && t != DType::f32;
      for (const Product& p : products(t)) {
        INFO(p.what);
        const Tensor tuned = ops::matmul(p.a, p.b, MatmulBackend::tuned);
        REQUIRE(!ops::matmul_tunings().empty());
        CHECK(ops::matmul_tunings().back().chosen == winner);
        CHECK(ops::matmul_tunings().back().excluded.empty());
        const Tensor direct = ops::matmul(p.a, p.b, nudged ? MatmulBackend::cublas : winner);
        if (nudged) nudge(direct);
        CHECK(bits(tuned) == bits(direct));
      }
      // A linear layer with bias and GELU, pre kept: both outputs are the winner's.
      const Linear l = linear_inputs(t);
      const ops::LinearOutput tuned = ops::linear(l.x, l.w, l.bias, Activation::gelu, true, MatmulBackend::tuned);
      const ops::LinearOutput direct =
          ops::linear(l.x, l.w, l.bias, Activation::gelu, true, nudged ? MatmulBackend::cublas : winner);
      if (nudged) nudge(direct.y), nudge(direct.pre);
      CHECK(ops::matmul_tunings().back().chosen == winner);
      CHECK(ops::matmul_tunings().back().problem.find("epilogue bias gelu pre") != std::string::npos);
      CHECK(bits(tuned.y) == bits(direct.y));
      CHECK(bits(tuned.pre) == bits(direct.pre));
    }
  }
}

// The test above sees a wrong output only where the candidates differ: the extra one must differ from
// cuBLAS on every input it uses.
TEST_CASE("the tuner tests' extra candidate rounds differently from cuBLAS", "[tuner]") {
  for (DType t : {DType::bf16, DType::f32}) {
    INFO(dtype_name(t));
    for (const Product& p : products(t)) {
      INFO(p.what);
      const Tensor cublas = ops::matmul(p.a, p.b, MatmulBackend::cublas);
      const Tensor other = t == DType::f32 ? ops::matmul(p.a, p.b, MatmulBackend::tiled) : ops::clone(cublas);
      if (t != DType::f32) nudge(other);
      CHECK(bits(other) != bits(cublas));
    }
    const Linear l = linear_inputs(t);
    if (t == DType::f32)
      CHECK(bits(ops::linear(l.x, l.w, l.bias, Activation::gelu, true, MatmulBackend::tiled).pre) !=
            bits(ops::linear(l.x, l.w, l.bias, Activation::gelu, true, MatmulBackend::cublas).pre));
  }
}

TEST_CASE("tuned measures each problem key once", "[tuner]") {
  cuda::GemmTunerTestHooks hooks;
  hooks.timer = ranking({MatmulBackend::tensor_core});
  TunerScope scope(hooks);
  const int64_t before = ops::matmul_tuning_count();
  const Tensor a = random({20, 24}, DType::bf16, 10), b = random({24, 12}, DType::bf16, 11);
  ops::matmul(a, b, MatmulBackend::tuned);
  CHECK(ops::matmul_tuning_count() == before + 1);
  // The same key (other tensors, same shapes, dtypes and layouts): the cached choice, no measuring.
  const Tensor again = ops::matmul(random({20, 24}, DType::bf16, 12), random({24, 12}, DType::bf16, 13),
                                   MatmulBackend::tuned);
  CHECK(ops::matmul_tuning_count() == before + 1);
  CHECK(ops::matmul_tunings().size() == 1);
  // Another shape, another layout, an epilogue, another dtype: each a key of its own.
  ops::matmul(random({21, 24}, DType::bf16, 14), b, MatmulBackend::tuned);
  CHECK(ops::matmul_tuning_count() == before + 2);
  ops::matmul(a, random({12, 24}, DType::bf16, 15).transpose(0, 1), MatmulBackend::tuned);
  CHECK(ops::matmul_tuning_count() == before + 3);
  ops::linear(a, random({12, 24}, DType::bf16, 15), random({12}, DType::bf16, 16), Activation::none, false,
              MatmulBackend::tuned);
  CHECK(ops::matmul_tuning_count() == before + 4);
  ops::matmul(a.to(DType::f16), b.to(DType::f16), MatmulBackend::tuned);
  CHECK(ops::matmul_tuning_count() == before + 5);
  // f32 has nothing to choose from: cuBLAS, unmeasured.
  const Tensor af = a.to(DType::f32), bf = b.to(DType::f32);
  CHECK(bits(ops::matmul(af, bf, MatmulBackend::tuned)) == bits(ops::matmul(af, bf, MatmulBackend::cublas)));
  CHECK(ops::matmul_tuning_count() == before + 5);
  CHECK(ops::matmul_tunings().size() == 5);
  // Forgetting: the first key is measured again.
  ops::clear_matmul_tunings();
  ops::matmul(a, b, MatmulBackend::tuned);
  CHECK(ops::matmul_tuning_count() == before + 6);
  CHECK(ops::matmul_tunings().size() == 1);
}

TEST_CASE("tuned refuses a fast candidate whose output disagrees with cuBLAS, once per key", "[tuner]") {
  // "tiled" here is a GEMM that gets 1 in 4 elements 25% wrong, and is the fastest.
  cuda::GemmTunerTestHooks hooks;
  hooks.candidates = [](const cuda::GemmCall& call) {
    std::vector<cuda::GemmCandidate> list = cuda::default_gemm_candidates(call);
    list.push_back({MatmulBackend::tiled, [](const cuda::GemmCall& c) {
                      cuda::run_gemm(c, MatmulBackend::tiled);
                      ops::scale_(make_view(c.out, {(c.out.numel() + 3) / 4}, {4}, c.out.offset()), 1.25);
                    }});
    return list;
  };
  hooks.timer = ranking({MatmulBackend::tiled, MatmulBackend::tensor_core});
  TunerScope scope(hooks);
  const Tensor a = random({29, 40}, DType::bf16, 20), b = random({40, 31}, DType::bf16, 21);
  CaptureCerr err;
  const Tensor y = ops::matmul(a, b, MatmulBackend::tuned);
  REQUIRE(ops::matmul_tunings().size() == 1);
  const ops::MatmulTuning t = ops::matmul_tunings().front();
  CHECK(t.chosen == MatmulBackend::tensor_core);
  CHECK(t.excluded == std::vector<MatmulBackend>{MatmulBackend::tiled});
  CHECK(bits(y) == bits(ops::matmul(a, b, MatmulBackend::tensor_core)));
  const std::string warning = err.text.str();
  CHECK_THAT(warning, Contains("not using tiled for cuda:0 bf16->bf16 [29, 31] = [29, 40] @ [40, 31]"));
  CHECK_THAT(warning, Contains("worst difference"));
  CHECK(std::count(warning.begin(), warning.end(), '\n') == 1);
  // The key is settled: no second warning, no second tuning.
  ops::matmul(a, b, MatmulBackend::tuned);
  CHECK(err.text.str() == warning);
}

// A candidate that is "tiled" and the fastest, running `wrong`; the default candidates besides.
cuda::GemmTunerTestHooks with_wrong_fastest(std::function<void(const cuda::GemmCall&)> wrong) {
  cuda::GemmTunerTestHooks hooks;
  hooks.candidates = [wrong](const cuda::GemmCall& call) {
    std::vector<cuda::GemmCandidate> list = cuda::default_gemm_candidates(call);
    list.push_back({MatmulBackend::tiled, wrong});
    return list;
  };
  hooks.timer = ranking({MatmulBackend::tiled, MatmulBackend::tensor_core});
  return hooks;
}

// Tunes a @ b (or the linear layer) under `hooks` and returns what was excluded.
std::vector<MatmulBackend> excluded_for(const Tensor& a, const Tensor& b, const cuda::GemmTunerTestHooks& hooks) {
  TunerScope scope(hooks);
  CaptureCerr err;
  ops::matmul(a, b, MatmulBackend::tuned);
  REQUIRE(ops::matmul_tunings().size() == 1);
  return ops::matmul_tunings().front().excluded;
}

TEST_CASE("tuned refuses a candidate that leaves part of the output unwritten", "[tuner]") {
  // The candidates share the check's output buffer: without the NaN fill before each run, the rows
  // this one skips would still hold the previous candidate's correct values.
  const auto first_half_rows = [](const cuda::GemmCall& c) {
    const int64_t half = c.out.size(0) / 2;
    cuda::run_gemm({c.out.narrow(0, 0, half), c.a.narrow(0, 0, half), c.b, Tensor(), Tensor(), Activation::none},
                   MatmulBackend::cublas);
  };
  const Tensor a = random({32, 48}, DType::bf16, 50), b = random({48, 24}, DType::bf16, 51);
  CHECK(excluded_for(a, b, with_wrong_fastest(first_half_rows)) == std::vector<MatmulBackend>{MatmulBackend::tiled});
}

TEST_CASE("tuned refuses a candidate that drops the last tenth of k", "[tuner]") {
  const auto short_k = [](const cuda::GemmCall& c) {
    const int64_t k = c.a.size(-1) * 9 / 10;
    cuda::run_gemm({c.out, c.a.narrow(1, 0, k), c.b.narrow(0, 0, k), Tensor(), Tensor(), Activation::none},
                   MatmulBackend::cublas);
  };
  // Zero operands: every GEMM agrees on them, so only a check on other data can see the difference.
  const Tensor a = random({16, 512}, DType::bf16, 52), b = random({512, 16}, DType::bf16, 53);
  ops::scale_(a, 0.0);
  CHECK(excluded_for(a, b, with_wrong_fastest(short_k)) == std::vector<MatmulBackend>{MatmulBackend::tiled});
}

TEST_CASE("tuned refuses a candidate one ulp off in one element", "[tuner]") {
  const auto one_ulp = [](const cuda::GemmCall& c) {
    cuda::run_gemm(c, MatmulBackend::cublas);
    const Tensor last = make_view(c.out, {1}, {1}, c.out.offset() + c.out.numel() - 1);
    const double v = last.to(Device::cpu()).to_vector()[0];
    const double ulp = v == 0 ? std::ldexp(1.0, -133) : std::ldexp(1.0, std::ilogb(v) - 7);  // bf16: 8 bits
    ops::copy_(last, from_vector({v + ulp}, {1}, c.out.dtype(), c.out.device()));
  };
  const Tensor a = random({16, 64}, DType::bf16, 54), b = random({64, 16}, DType::bf16, 55);
  CHECK(excluded_for(a, b, with_wrong_fastest(one_ulp)) == std::vector<MatmulBackend>{MatmulBackend::tiled});
}

TEST_CASE("cuBLAS, tensor_core and hopper pass the exact check, with and without an epilogue", "[tuner]") {
  cuda::GemmTunerTestHooks hooks;
  hooks.timer = ranking({MatmulBackend::tensor_core});
  TunerScope scope(hooks);
  // k = 4096: the synthetic sums (entries in [-2, 2]) spread about ±128, so a few percent of the 64 x 64
  // pass 256, where bf16 stops holding every integer: where the product and the bias are rounded
  // matters there (two roundings, kernels/cuda/epilogue.cuh). At k = 512 on 24 x 40 none did, and a
  // reference with one rounding passed here but refused both GEMMs on an H200 at GPT-2's shapes.
  const Tensor x = random({64, 4096}, DType::bf16, 56), w = random({64, 4096}, DType::bf16, 57);
  const Tensor bias = random({64}, DType::bf16, 58);
  ops::matmul(x, w.transpose(0, 1), MatmulBackend::tuned);
  ops::linear(x, w, bias, Activation::none, false, MatmulBackend::tuned);
  ops::linear(x, w, bias, Activation::gelu, false, MatmulBackend::tuned);
  ops::linear(x, w, bias, Activation::gelu, true, MatmulBackend::tuned);
  ops::matmul(x.to(DType::f16), w.to(DType::f16).transpose(0, 1), MatmulBackend::tuned);
  REQUIRE(ops::matmul_tunings().size() == 5);
  for (const ops::MatmulTuning& t : ops::matmul_tunings()) {
    INFO(t.problem);
    CHECK(t.excluded.empty());
    CHECK(t.ms.size() == half_candidates().size());
  }
}

TEST_CASE("tuned passes on a candidate that faults the GPU instead of excluding it", "[tuner]") {
  cuda::GemmTunerTestHooks hooks = with_wrong_fastest([](const cuda::GemmCall&) {
    fail("CUDA error: kernel launch returned cudaErrorIllegalAddress (an illegal memory access)");
  });
  TunerScope scope(hooks);
  const Tensor a = random({9, 16}, DType::bf16, 59), b = random({16, 7}, DType::bf16, 60);
  CHECK_THROWS_WITH(ops::matmul(a, b, MatmulBackend::tuned), Contains("cudaErrorIllegalAddress"));
  CHECK(ops::matmul_tunings().empty());
}

TEST_CASE("tuned runs cuBLAS, uncached, when tuning runs out of memory", "[tuner]") {
  cuda::GemmTunerTestHooks hooks = with_wrong_fastest([](const cuda::GemmCall&) {
    fail("out of memory on cuda:0: tried to allocate 1.0 GiB");  // the caching allocator's words
  });
  TunerScope scope(hooks);
  const Tensor a = random({9, 16}, DType::bf16, 71), b = random({16, 7}, DType::bf16, 72);
  CaptureCerr err;
  CHECK(bits(ops::matmul(a, b, MatmulBackend::tuned)) == bits(ops::matmul(a, b, MatmulBackend::cublas)));
  CHECK(ops::matmul_tunings().empty());
  const std::string text = err.text.str();
  CHECK_THAT(text, Contains("no memory to tune"));
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);
}

TEST_CASE("tuned keys hold every stride of a and b", "[tuner]") {
  cuda::GemmTunerTestHooks hooks;
  hooks.timer = ranking({MatmulBackend::tensor_core});
  TunerScope scope(hooks);
  const int64_t before = ops::matmul_tuning_count();
  const Tensor b = random({24, 16}, DType::bf16, 61);
  // The same shape, layout class and alignment; rows 24 or 32 apart.
  ops::matmul(random({20, 24}, DType::bf16, 62), b, MatmulBackend::tuned);
  ops::matmul(random({20, 32}, DType::bf16, 63).narrow(1, 0, 24), b, MatmulBackend::tuned);
  CHECK(ops::matmul_tuning_count() == before + 2);
}

TEST_CASE("hopper reads in place only what a tensor map describes", "[tuner]") {
  // Rows 8 elements apart but 16 long (overlapping): aligned, contiguous along k, yet no tensor map.
  const Tensor storage = random({200}, DType::bf16, 64);
  const Tensor overlapping = make_view(storage, {8, 16}, {8, 1}, 0);
  CHECK(!cuda::reads_in_place(overlapping, false, MatmulBackend::hopper));
  CHECK(cuda::reads_in_place(make_view(storage, {8, 16}, {16, 1}, 0), false, MatmulBackend::hopper));
  const Tensor b = random({16, 8}, DType::bf16, 65);
  CHECK(bits(ops::matmul(overlapping, b, MatmulBackend::hopper)) ==
        bits(ops::matmul(overlapping, b, MatmulBackend::cublas)));
}

TEST_CASE("tuning is serialised per device: two threads on one key tune it once", "[tuner]") {
  cuda::GemmTunerTestHooks hooks;
  hooks.timer = ranking({MatmulBackend::tensor_core});
  TunerScope scope(hooks);
  const int64_t before = ops::matmul_tuning_count();
  const Tensor a = random({20, 24}, DType::bf16, 66), b = random({24, 12}, DType::bf16, 67);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) threads.emplace_back([&] { ops::matmul(a, b, MatmulBackend::tuned); });
  for (std::thread& t : threads) t.join();
  CHECK(ops::matmul_tuning_count() == before + 1);
}

TEST_CASE("tuned leaves small problems and keys past the cap to cuBLAS, uncached", "[tuner]") {
  const Tensor a = random({20, 24}, DType::bf16, 68), b = random({24, 12}, DType::bf16, 69);
  const std::vector<double> cublas = bits(ops::matmul(a, b, MatmulBackend::cublas));
  {
    cuda::GemmTunerTestHooks hooks;
    hooks.timer = ranking({MatmulBackend::tensor_core});
    hooks.min_flops = 2.0 * 20 * 12 * 24 + 1;  // one flop more than this product
    TunerScope scope(hooks);
    CHECK(bits(ops::matmul(a, b, MatmulBackend::tuned)) == cublas);
    CHECK(ops::matmul_tunings().empty());
  }
  {
    cuda::GemmTunerTestHooks hooks;
    hooks.timer = ranking({MatmulBackend::tensor_core});
    hooks.max_keys = 1;
    TunerScope scope(hooks);
    ops::matmul(random({21, 24}, DType::bf16, 70), b, MatmulBackend::tuned);
    CHECK(ops::matmul_tunings().size() == 1);
    CHECK(bits(ops::matmul(a, b, MatmulBackend::tuned)) == cublas);
    CHECK(ops::matmul_tunings().size() == 1);
  }
}

TEST_CASE("tuned refuses a candidate that throws and keeps going", "[tuner]") {
  cuda::GemmTunerTestHooks hooks;
  hooks.candidates = [](const cuda::GemmCall& call) {
    std::vector<cuda::GemmCandidate> list = cuda::default_gemm_candidates(call);
    list.push_back({MatmulBackend::tiled, [](const cuda::GemmCall&) { fail("a kernel that cannot launch"); }});
    return list;
  };
  hooks.timer = ranking({MatmulBackend::tiled, MatmulBackend::cublas});
  TunerScope scope(hooks);
  const Tensor a = random({9, 16}, DType::bf16, 22), b = random({16, 7}, DType::bf16, 23);
  CaptureCerr err;
  const Tensor y = ops::matmul(a, b, MatmulBackend::tuned);
  CHECK(ops::matmul_tunings().front().chosen == MatmulBackend::cublas);
  CHECK(bits(y) == bits(ops::matmul(a, b, MatmulBackend::cublas)));
  CHECK_THAT(err.text.str(), Contains("it failed: a kernel that cannot launch"));
}

TEST_CASE("tuned measures nothing inside a CUDA graph capture", "[tuner]") {
  cuda::GemmTunerTestHooks hooks;
  hooks.timer = ranking({MatmulBackend::tensor_core});
  TunerScope scope(hooks);
  const Tensor a = random({18, 40}, DType::bf16, 30), b = random({40, 22}, DType::bf16, 31);
  const std::vector<double> cublas = bits(ops::matmul(a, b, MatmulBackend::cublas));  // eager first: cuBLAS's handle
  const int64_t before = ops::matmul_tuning_count();

  // A new key in a capture: cuBLAS, not measured, not cached.
  CudaGraph graph;
  Tensor y;
  graph.capture(kGpu, [&] { y = ops::matmul(a, b, MatmulBackend::tuned); });
  graph.replay();
  CHECK(bits(y) == cublas);
  CHECK(ops::matmul_tuning_count() == before);
  CHECK(ops::matmul_tunings().empty());

  // A key tuned eagerly: the capture records the cached choice.
  ops::matmul(a, b, MatmulBackend::tuned);
  REQUIRE(ops::matmul_tunings().size() == 1);
  REQUIRE(ops::matmul_tunings().front().chosen == MatmulBackend::tensor_core);
  CudaGraph cached;
  Tensor z;
  cached.capture(kGpu, [&] { z = ops::matmul(a, b, MatmulBackend::tuned); });
  cached.replay();
  CHECK(bits(z) == bits(ops::matmul(a, b, MatmulBackend::tensor_core)));
  CHECK(ops::matmul_tuning_count() == before + 1);
}

TEST_CASE("tuned with the real timer picks a candidate that agrees, and reports what it measured", "[tuner]") {
  TunerScope scope;
  const Tensor x = random({24, 40}, DType::bf16, 40), w = random({20, 40}, DType::bf16, 41);
  const ops::LinearOutput y = ops::linear(x, w, Tensor(), Activation::gelu, false, MatmulBackend::tuned);
  REQUIRE(ops::matmul_tunings().size() == 1);
  const ops::MatmulTuning t = ops::matmul_tunings().front();
  CHECK(t.excluded.empty());
  CHECK(t.ms.size() == half_candidates().size());
  for (const auto& [backend, ms] : t.ms) CHECK(ms > 0);
  CHECK(bits(y.y) == bits(ops::linear(x, w, Tensor(), Activation::gelu, false, t.chosen).y));
}

#endif  // BRIGADE_HAVE_CUDA
