// GEMMs: brigade's matmuls at square sizes and at the GPT-2-small MLP shape a training step runs
// (m tokens x 768 -> 3072), small sizes showing launch, packing and tail effects, large ones the
// inner loop.
//  - a GPU: the four matmul backends (hopper on sm_90 only) and the tuned one against cuBLAS called
//    directly, at the same shape and dtype; after each tuned row, a line saying which GEMM the tuner
//    picked for it and what it measured for each candidate;
//  - the CPU: its one GEMM (kernels/cpu/matmul.cpp) against the FMA peak (bench/fma_peak.cpp);
// and, on both, the MLP's up-projection as a layer, with the bias and GELU fused into the GEMM's
// epilogue against the same three ops run apart.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "bench_kernels/benchmarks.h"
#include "core/rng.h"
#include "kernels/ops.h"

namespace brigade::bench {
namespace {

using ops::MatmulBackend;

struct Backend {
  MatmulBackend backend;
  const char* name;
  std::vector<DType> dtypes;
};

// The backends a device has, and what each is measured in (see MatmulBackend in kernels/ops.h for
// what each supports). The CPU has one GEMM, whatever the backend asked for.
const std::vector<Backend>& backends_for(Device device) {
  static const std::vector<Backend> gpu = {
      {MatmulBackend::cublas, "matmul cublas", {DType::bf16, DType::f32}},
      {MatmulBackend::tiled, "matmul tiled", {DType::bf16, DType::f32}},
      {MatmulBackend::tensor_core, "matmul tensor_core", {DType::bf16}},
      {MatmulBackend::hopper, "matmul hopper", {DType::bf16}},
      {MatmulBackend::tuned, "matmul tuned", {DType::bf16, DType::f32}},
  };
  static const std::vector<Backend> cpu = {{MatmulBackend::automatic, "matmul", {DType::f32, DType::bf16}}};
  return device.is_cpu() ? cpu : gpu;
}

// After a tuned row: what the tuner measured for the problems the row ran (one per GEMM it calls),
// then forgets them, so that the next row's lines are its own.
void note_tuned_choices(Session& s, const Backend& be, const std::string& row) {
  if (be.backend != MatmulBackend::tuned) return;
  for (const ops::MatmulTuning& t : ops::matmul_tunings()) {
    std::string line = row + ": tuned picked " + ops::matmul_backend_name(t.chosen) + " (";
    for (const auto& [candidate, ms] : t.ms)
      line += std::string(ops::matmul_backend_name(candidate)) + " " + format_number(ms) + " ms, ";
    for (MatmulBackend candidate : t.excluded) line += std::string(ops::matmul_backend_name(candidate)) + " excluded, ";
    line.resize(line.size() - 2);
    s.note(line + ") for " + t.problem);
  }
  ops::clear_matmul_tunings();
}

// What a GEMM of this shape and dtype is compared with, and its rate in the session's flop unit.
std::pair<std::string, double> gemm_baseline(Session& s, [[maybe_unused]] DType t, [[maybe_unused]] int64_t m,
                                             [[maybe_unused]] int64_t n, [[maybe_unused]] int64_t k) {
#if BRIGADE_BENCH_GPU
  if (s.device().is_cuda())
    return {std::string("cuBLAS ") + dtype_name(t) + " " + dims_text({m, n, k}), s.cublas_tflops(t, m, n, k)};
#endif
  return {"FMA peak", s.fma_peak()};
}

void gemm_shape(Session& s, const Sizes& sizes, int64_t m, int64_t n, int64_t k) {
  const std::string shape = dims_text({m, n, k});
  const double flops = 2.0 * double(m) * double(n) * double(k);
  for (DType t : sizes.gemm_dtypes) {
    const auto [baseline, baseline_rate] = gemm_baseline(s, t, m, n, k);
    const Tensor a = randn({m, k}, t, s.device()), b = randn({k, n}, t, s.device());
    // The Hopper GEMM reads B along k (a layer's Wᵀ); given a row-major B it would copy it first.
    const Tensor b_along_k = randn({n, k}, t, s.device()).transpose(0, 1);
    for (const Backend& be : backends_for(s.device())) {
      if (std::find(be.dtypes.begin(), be.dtypes.end(), t) == be.dtypes.end()) continue;
      if (!ops::matmul_backend_available(be.backend, s.device())) continue;
      const Tensor& rhs = be.backend == MatmulBackend::hopper ? b_along_k : b;
      s.throughput({"gemm", be.name, shape, dtype_name(t)}, flops, [&] { ops::matmul(a, rhs, be.backend); }, baseline,
                   baseline_rate);
      note_tuned_choices(s, be, std::string(be.name) + " " + shape + " " + dtype_name(t));
    }
  }
}

// The MLP's up-projection as a layer: x @ W^T + b, then GELU. First the three ops apart (matmul, add,
// gelu: three passes over the [tokens, 3072] output), then ops::linear with the bias and GELU in
// the GEMM's epilogue; both against the GEMM's usual baseline, so the two rows' percentages show what
// the fusion saves on each backend.
void linear_gelu(Session& s, const Sizes& sizes, int64_t m, int64_t n, int64_t k) {
  const std::string shape = dims_text({m, n, k});
  const double flops = 2.0 * double(m) * double(n) * double(k);
  for (DType t : sizes.gemm_dtypes) {
    if (s.device().is_cpu() && t != DType::f32) continue;  // the CPU runs 16-bit layers as the separate ops
    const auto [baseline, baseline_rate] = gemm_baseline(s, t, m, n, k);
    const Tensor x = randn({m, k}, t, s.device()), w = randn({n, k}, t, s.device()), b = randn({n}, t, s.device());
    for (const Backend& be : backends_for(s.device())) {
      if (std::find(be.dtypes.begin(), be.dtypes.end(), t) == be.dtypes.end()) continue;
      if (!ops::matmul_backend_available(be.backend, s.device())) continue;
      const std::string name = "linear+gelu" + std::string(be.name).substr(6);  // "matmul cublas" -> "linear+gelu cublas"
      s.throughput(
          {"gemm", name + " apart", shape, dtype_name(t)}, flops,
          [&] {
            const Tensor pre = ops::binary(ops::BinaryOp::add, ops::matmul(x, w.transpose(0, 1), be.backend), b);
            ops::unary(ops::UnaryOp::gelu, pre);
          },
          baseline, baseline_rate);
      note_tuned_choices(s, be, name + " apart " + shape + " " + dtype_name(t));
      s.throughput({"gemm", name + " fused", shape, dtype_name(t)}, flops,
                   [&] { ops::linear(x, w, b, Activation::gelu, true, be.backend); }, baseline, baseline_rate);
      note_tuned_choices(s, be, name + " fused " + shape + " " + dtype_name(t));
    }
  }
}

}  // namespace

void run_gemm_benchmarks(Session& s, const Sizes& sizes) {
  for (int64_t n : sizes.gemm_squares) gemm_shape(s, sizes, n, n, n);
  // GPT-2 small: the MLP's up-projection, as a GEMM and as a layer with its bias and GELU.
  gemm_shape(s, sizes, sizes.mlp_tokens, 3072, 768);
  linear_gelu(s, sizes, sizes.mlp_tokens, 3072, 768);
}

}  // namespace brigade::bench
