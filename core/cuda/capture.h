// Stream capture, as the rest of brigade's CUDA code needs it (CUDA-only .cpp/.cu files).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace brigade::cuda {

bool is_capturing(cudaStream_t stream);

// Throws when `stream` is capturing a CUDA graph: `op` cannot be replayed correctly (`why` says
// what a replay would get wrong), so it must run outside the graph.
void refuse_in_capture(const char* op, cudaStream_t stream, const char* why);

// Lets this thread make a call that a capture would otherwise forbid (cudaMalloc: the caching
// allocator's new blocks belong to the graph's pool, which is exactly what a replay needs), for
// the guard's scope: cudaThreadExchangeStreamCaptureMode in the push-pop style its docs suggest.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode();
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode previous_;
};

// The caching allocator's graph pools (core/cuda/caching_allocator.h), for core/cuda/graph.cpp.
uint64_t begin_graph_pool(int device, cudaStream_t stream);
void end_graph_pool(int device, cudaStream_t stream);
void release_graph_pool(uint64_t pool);
size_t graph_pool_bytes(uint64_t pool);

}  // namespace brigade::cuda
