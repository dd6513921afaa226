// ops (internal): the index scan every op that indexes memory with a tensor's values runs first.
#pragma once

#include <optional>

#include "kernels/index_scan.h"
#include "kernels/ops.h"

namespace brigade::ops {

// Scans `indices` (any integer dtype and layout) against [0, limit), skipping ignore_index, unless
// `earlier` already covers this tensor. The first bad index lands in `bad` (bad.bad_position >= 0)
// for the caller to report in its own words; the result is meaningless then.
CheckedIndices check_indices(const char* op, const Tensor& indices, int64_t limit, std::optional<int64_t> ignore_index,
                             const CheckedIndices* earlier, IndexScan& bad);

}  // namespace brigade::ops
