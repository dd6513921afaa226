// GEMMs: brigade's matmuls at square sizes and at the GPT-2-small MLP shape a training step runs
// (m tokens x 768 -> 3072), small sizes showing launch, packing and tail effects, large ones the
// inner loop.
//  - a GPU: the three matmul backends against cuBLAS called directly, at the same shape and dtype;
//  - the CPU: its one GEMM (kernels/cpu/matmul.cpp) against the FMA peak (bench/fma_peak.cpp).
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
  };
  static const std::vector<Backend> cpu = {{MatmulBackend::automatic, "matmul", {DType::f32, DType::bf16}}};
  return device.is_cpu() ? cpu : gpu;
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
    for (const Backend& be : backends_for(s.device())) {
      if (std::find(be.dtypes.begin(), be.dtypes.end(), t) == be.dtypes.end()) continue;
      s.throughput({"gemm", be.name, shape, dtype_name(t)}, flops, [&] { ops::matmul(a, b, be.backend); }, baseline,
                   baseline_rate);
    }
  }
}

}  // namespace

void run_gemm_benchmarks(Session& s, const Sizes& sizes) {
  for (int64_t n : sizes.gemm_squares) gemm_shape(s, sizes, n, n, n);
  // GPT-2 small: the MLP's up-projection.
  gemm_shape(s, sizes, sizes.mlp_tokens, 3072, 768);
}

}  // namespace brigade::bench
