// Differentiable rotary position embedding. The table (cos, sin) is data, not a parameter: only x
// gets a gradient, the rotation by the opposite angles (ops::rope_backward).
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "kernels/ops.h"

namespace brigade {

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const ops::RopeTable table{cos, sin};
  Tensor y = ops::rope(x, table);
  record("rope", {x}, {y}, [table](const std::vector<Tensor>& g, const std::vector<bool>&) {
    return std::vector<Tensor>{ops::rope_backward(g[0], table)};
  });
  return y;
}

Tensor rope(const Tensor& x, int64_t start, const RopeParams& params) {
  BRIGADE_CHECK(x.dim() == 4, "rope: expected input [B, H, T, D], got ", shape_str(x.shape()));
  const DType table_dtype = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const ops::RopeTable table = ops::rope_table(x.size(3), start, x.size(2), params, table_dtype, x.device());
  return rope(x, table.cos, table.sin);
}

}  // namespace brigade
