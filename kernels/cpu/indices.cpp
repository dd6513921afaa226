// CPU reference: the index scan. One pass in order, so the first bad index is simply the first one met.
#include "kernels/cpu/kernels.h"

namespace brigade::cpu {

void scan_indices(IndexScan& result, const Tensor& indices, int64_t limit, std::optional<int64_t> ignore_index) {
  result = IndexScan{};
  const int64_t* p = indices.data<int64_t>();
  for (int64_t i = 0; i < indices.numel(); ++i) {
    if (ignore_index && p[i] == *ignore_index) continue;
    ++result.counted;
    if ((p[i] < 0 || p[i] >= limit) && result.bad_position < 0) {
      result.bad_position = i;
      result.bad_value = p[i];
    }
  }
}

}  // namespace brigade::cpu
