// Moving bytes between the host and GPUs, or between two GPUs (the cross-device half of ops::copy_).
// Plain C++ declarations, callable from .cpp files in a CUDA build.
#pragma once

#include <cstddef>

#include "core/device.h"

namespace brigade::cuda {

// Copies `nbytes` from `src` (memory of `src_device`) to `dst` (memory of `dst_device`); the devices
// differ and at least one is a GPU. Ordered after earlier work on the current streams of the GPUs
// involved, and before later work on them:
//  - host -> GPU: returns once the host bytes have been read (copied into a pinned staging buffer),
//    so the caller may reuse them; the GPU side completes asynchronously on the current stream.
//  - GPU -> host: returns when the host bytes are written (it waits for the GPU).
//  - GPU -> GPU: asynchronous on the destination's current stream; the source's current stream waits
//    for the copy, so the source block is not reused before it has been read.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);

}  // namespace brigade::cuda
