// Parcel: a tensor handed from one thread to another without copying its bytes.
//
// Threads of one process share memory, so passing a tensor between pipeline stages that run as
// threads only needs the Tensor handle. On a GPU that is not quite enough: the producer's kernels
// may still be queued on its stream when the handle changes hands. So the producer records an Event
// at the end of its stream, and the consumer's stream waits for that event (GPU-side; no thread
// blocks) before anything it queues reads the tensor.
//
// Caveat (GPU): the receiver now shares the sender's storage. The caching allocator hands a freed
// block back to the stream that allocated it, so a receiver that frees the tensor while its own
// stream still reads it must first make the allocating stream wait for its work, like any tensor
// used on two streams (core/stream.h).
#pragma once

#include "core/stream.h"
#include "core/tensor.h"

namespace brigade::comm {

struct Parcel {
  Tensor tensor;
  Event ready;  // GPU tensors: marks the end, on the sender's stream, of the work producing `tensor`
};

// On the sender's thread.
Parcel wrap(const Tensor& t);
// On the receiver's thread: orders its current stream after the parcel's event, and moves the tensor
// to `device` when it lives elsewhere (a copy on the receiver's stream).
Tensor unwrap(const Parcel& parcel, Device device);

}  // namespace brigade::comm
