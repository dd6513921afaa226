// CUDA kernels: the index scan — same signature as kernels/cpu/indices.h.
//
// Unlike every other CUDA kernel this one waits for its result: the op layer must know whether an
// index is out of range before it may launch a kernel that uses it, and that answer lives on the GPU.
// Only the summary (two integers) crosses to the host.
#pragma once

#include <optional>

#include "core/tensor.h"
#include "kernels/cpu/indices.h"

namespace brigade::cuda {

void scan_indices(IndexScan& result, const Tensor& indices, int64_t limit, std::optional<int64_t> ignore_index);

}  // namespace brigade::cuda
