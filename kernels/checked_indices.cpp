// ops: scanning index tensors once. Forward ops scan their indices (embedding rows, cross-entropy
// targets) before any kernel uses them; the matching backward gets the forward's CheckedIndices and
// scans again only if it was handed a different tensor or the same one written since. On a GPU each
// scan ends with the host waiting for the device, so this halves those waits in a training step; and
// indices that came from the host (token ids, targets) are scanned there, with no wait at all.
#include "kernels/checked_indices.h"

#include "core/cuda_graph.h"

#include "kernels/cpu/kernels.h"
#include "kernels/dispatch.h"
#if BRIGADE_HAVE_CUDA
#include "kernels/cuda/kernels.h"
#endif

namespace brigade::ops {

bool CheckedIndices::covers(const Tensor& t, int64_t bound, std::optional<int64_t> ignore) const {
  // The same view of the same storage, with no in-place write since (writes bump the version).
  return source.defined() && t.defined() && t.storage().same_as(source_storage) && t.offset() == source.offset() &&
         t.shape() == source.shape() && t.strides() == source.strides() && t.dtype() == source.dtype() &&
         t.storage().version() == source_version && bound == limit && ignore == ignore_index;
}

CheckedIndices check_indices(const char* op, const Tensor& indices, int64_t limit, std::optional<int64_t> ignore_index,
                             const CheckedIndices* earlier, IndexScan& bad) {
  bad = IndexScan{};
  // A count the host learnt outside a capture must not be baked into one (each replay has its own).
  const bool reusable = earlier != nullptr && !(earlier->counted >= 0 && is_capturing(indices.device()));
  if (reusable && earlier->covers(indices, limit, ignore_index)) return *earlier;
  CheckedIndices checked;
  checked.source = indices;
  checked.source_storage = indices.storage();
  checked.source_version = indices.storage().version();
  checked.indices = contiguous(to_dtype(indices, DType::i64));
  checked.limit = limit;
  checked.ignore_index = ignore_index;
  // Inside a CUDA graph capture the mirror holds capture-time values, not a replay's: scan on the device.
  if (Tensor host = indices.host_mirror(); host.defined() && !is_capturing(indices.device())) {
    // The same values on the host (Storage::host_mirror): scan them there, without waiting for the GPU.
    cpu::scan_indices(bad, contiguous(to_dtype(host, DType::i64)), limit, ignore_index);
  } else {
    BRIGADE_DISPATCH(op, checked.indices, scan_indices(bad, checked.indices, limit, ignore_index));
  }
  checked.counted = bad.counted;
  checked.counted_on_device = bad.device_counts;
  return checked;
}

}  // namespace brigade::ops
