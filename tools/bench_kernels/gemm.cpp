// GEMMs: brigade's three matmul backends against cuBLAS called directly, at the same shape and dtype.
// Square sizes from 1024^3 (where launch and tail effects show) to 8192^3 (where only the inner loop
// matters), and the GPT-2-small MLP shape a training step actually runs.
#include <algorithm>

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

// What each backend is measured in (see MatmulBackend in kernels/ops.h for what each supports).
const Backend kBackends[] = {
    {MatmulBackend::cublas, "matmul cublas", {DType::bf16, DType::f32}},
    {MatmulBackend::tiled, "matmul tiled", {DType::bf16, DType::f32}},
    {MatmulBackend::tensor_core, "matmul tensor_core", {DType::bf16}},
};

void gemm_shape(Session& s, int64_t m, int64_t n, int64_t k) {
  const std::string shape = dims_text({m, n, k});
  const double flops = 2.0 * double(m) * double(n) * double(k);
  for (DType t : {DType::bf16, DType::f32}) {
    const double cublas = s.cublas_tflops(t, m, n, k);
    const std::string baseline = std::string("cuBLAS ") + dtype_name(t) + " " + shape;
    const Tensor a = randn({m, k}, t, s.device()), b = randn({k, n}, t, s.device());
    for (const Backend& be : kBackends) {
      if (std::find(be.dtypes.begin(), be.dtypes.end(), t) == be.dtypes.end()) continue;
      s.throughput({"gemm", be.name, shape, dtype_name(t)}, flops, [&] { ops::matmul(a, b, be.backend); }, baseline,
                   cublas);
    }
  }
}

}  // namespace

void run_gemm_benchmarks(Session& s) {
  const std::vector<int64_t> sizes = s.quick() ? std::vector<int64_t>{1024, 4096}
                                               : std::vector<int64_t>{1024, 2048, 4096, 8192};
  for (int64_t n : sizes) gemm_shape(s, n, n, n);
  // GPT-2 small, batch 16 x 1024 tokens: the MLP's up-projection.
  gemm_shape(s, s.quick() ? 4096 : 16384, 3072, 768);
}

}  // namespace brigade::bench
