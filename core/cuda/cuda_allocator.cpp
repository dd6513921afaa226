// The CUDA side of the caching allocator: a MemoryBackend on cudaMalloc/cudaFree, the Allocator that
// Storage uses for GPU tensors, and the memory statistics of core/stream.h.
//
// It is installed when the library loads (a static initialiser below). That touches no CUDA API, so
// the library still loads and runs CPU code on machines with no GPU or no driver; asking it for GPU
// memory there throws an Error that says so.
#include <cuda_runtime.h>

#include <cstdlib>
#include <memory>
#include <mutex>

#include "core/cuda/caching_allocator.h"
#include "core/cuda/capture.h"
#include "core/cuda/check.h"
#include "core/cuda/current.h"
#include "core/cuda/guard.h"
#include "core/device_memory.h"
#include "core/memory_limit.h"
#include "core/storage.h"
#include "core/stream.h"
#include "core/tensor.h"

namespace brigade::cuda {
namespace {

class CudaBackend final : public MemoryBackend {
 public:
  void* raw_alloc(int device, size_t bytes) override {
    DeviceGuard guard(device);
    void* ptr = nullptr;
    // Allowed while a stream captures: the block joins the graph's pool, and it must exist before
    // the first replay — which a cudaMalloc now guarantees (see core/cuda/capture.h).
    RelaxedCaptureMode relaxed;
    cudaError_t err = cudaMalloc(&ptr, bytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky, but clear it so the next unrelated check does not report it
      return nullptr;
    }
    BRIGADE_CUDA_CHECK(err);
    return ptr;
  }

  void raw_free(int device, void* ptr) noexcept override {
    // cudaFree waits until the GPU no longer uses the memory. Errors are ignored: this runs in
    // destructors, and at process exit the runtime may already be unloading.
    int previous = -1;
    cudaGetDevice(&previous);
    cudaSetDevice(device);
    cudaFree(ptr);
    if (previous >= 0) cudaSetDevice(previous);
  }

  std::pair<size_t, size_t> memory_info(int device) override {
    size_t free_bytes = 0, total_bytes = 0;
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess || cudaSetDevice(device) != cudaSuccess ||
        cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)
      free_bytes = total_bytes = 0;
    cudaGetLastError();
    if (previous >= 0) cudaSetDevice(previous);
    return {free_bytes, total_bytes};
  }

  void* record_event(int device, const void* stream) override {
    DeviceGuard guard(device);
    cudaEvent_t event = nullptr;
    BRIGADE_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    cudaError_t err = cudaEventRecord(event, static_cast<cudaStream_t>(const_cast<void*>(stream)));
    if (err != cudaSuccess) cudaEventDestroy(event);
    BRIGADE_CUDA_CHECK(err);
    return event;
  }

  bool event_done(void* event) override {
    cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (err == cudaErrorNotReady) return false;
    BRIGADE_CUDA_CHECK(err);
    return true;
  }

  void wait_event(void* event) override { BRIGADE_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event))); }

  void destroy_event(void* event) noexcept override { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }
};

// Storage's view of it: the block goes to the tensor's device and is cached for that device's current
// stream (stream_for also makes the device current).
class CudaCachingAllocator final : public Allocator {
 public:
  std::shared_ptr<void> allocate(size_t nbytes, Device where) override {
    BRIGADE_CHECK(device_count() > 0, "cannot allocate ", format_bytes(nbytes),
                  " on a GPU: no GPU is available (no device, or no CUDA driver)");
    BRIGADE_CHECK(where.index >= 0 && where.index < device_count(), "cannot allocate on ", where.str(), ": only ",
                  device_count(), " GPU(s) are visible");
    const int device = where.index;
    // At the first allocation rather than when the library loads: a bad value is then an Error the
    // caller sees (and again at every allocation, until it is fixed).
    std::call_once(read_environment, [this] {
      const char* text = std::getenv(kCudaMemoryLimitVariable);
      if (text != nullptr && *text != '\0')
        cache.set_default_memory_limit(parse_memory_limit(kCudaMemoryLimitVariable, text), kCudaMemoryLimitVariable);
    });
    cudaStream_t stream = stream_for(where);
    void* ptr = cache.allocate(device, stream, nbytes);
    // If the shared_ptr's control block cannot be allocated, it calls the deleter itself.
    return std::shared_ptr<void>(ptr, [this](void* p) { cache.free(p); });
  }

  CudaBackend backend;
  CachingAllocator cache{backend};
  std::once_flag read_environment;
};

// Never destroyed: tensors held by static objects may be freed after this file's statics are gone.
CudaCachingAllocator& instance() {
  static auto* allocator = new CudaCachingAllocator();
  return *allocator;
}

[[maybe_unused]] const bool installed = [] {
  set_cuda_allocator(&instance());
  return true;
}();

}  // namespace
}  // namespace brigade::cuda

namespace brigade {

CudaMemoryStats cuda_memory_stats(Device device) {
  BRIGADE_CHECK(device.is_cuda(), "cuda_memory_stats: ", device.str(), " is not a GPU");
  return cuda::instance().cache.stats(device.index);
}

void reset_peak_memory(Device device) {
  BRIGADE_CHECK(device.is_cuda(), "reset_peak_memory: ", device.str(), " is not a GPU");
  cuda::instance().cache.reset_peak(device.index);
}

void cuda_empty_cache() { cuda::instance().cache.empty_cache(); }

size_t cuda_runtime_bytes_in_use(Device device) {
  BRIGADE_CHECK(device.is_cuda(), "cuda_runtime_bytes_in_use: ", device.str(), " is not a GPU");
  cuda::DeviceGuard guard(device.index);
  size_t free_bytes = 0, total_bytes = 0;
  BRIGADE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return total_bytes - free_bytes;
}

void set_cuda_memory_limit(Device device, const DeviceMemoryLimit& limit, const std::string& source) {
  BRIGADE_CHECK(device.is_cuda(), source, ": ", device.str(), " is not a GPU (the limit is for GPU memory)");
  BRIGADE_CHECK(device.index < cuda::device_count(), source, ": ", device.str(), " does not exist: ",
                cuda::device_count(), " GPU(s) are visible");
  cuda::instance().cache.set_memory_limit(device.index, limit, source);
}

size_t cuda_memory_limit(Device device) {
  BRIGADE_CHECK(device.is_cuda(), "cuda_memory_limit: ", device.str(), " is not a GPU");
  return cuda::instance().cache.memory_limit(device.index);
}

namespace cuda {
uint64_t begin_graph_pool(int device, cudaStream_t stream) { return instance().cache.begin_graph_pool(device, stream); }
void end_graph_pool(int device, cudaStream_t stream) { instance().cache.end_graph_pool(device, stream); }
void release_graph_pool(uint64_t pool) { instance().cache.release_graph_pool(pool); }
size_t graph_pool_bytes(uint64_t pool) { return instance().cache.graph_pool_bytes(pool); }
}  // namespace cuda

void record_stream(const Tensor& t, const Stream& stream) {
  BRIGADE_CHECK(t.defined() && t.device().is_cuda(), "record_stream: expected a GPU tensor, got ",
                t.defined() ? t.device().str() : std::string("an undefined tensor"));
  BRIGADE_CHECK(stream.defined(), "record_stream: the stream is undefined");
  BRIGADE_CHECK(stream.device() == t.device(), "record_stream: the tensor is on ", t.device().str(),
                " but the stream on ", stream.device().str());
  // False when the storage did not come from this allocator (a test allocator installed in front of
  // it hands out interiors of its blocks, which are still found): nothing to track then.
  cuda::instance().cache.record_stream(t.storage().data(), stream.raw());
}

}  // namespace brigade
