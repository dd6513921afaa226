// Host <-> GPU and GPU <-> GPU copies (see transfer.h).
//
// The GPU's copy engines can only read and write host memory that is pinned (page-locked). Tensors
// live in ordinary pageable memory, so host bytes are staged through pinned buffers: each thread
// owns two of 4 MiB and alternates between them, so the host fills (or drains) one while a copy
// engine works on the other. A buffer records an Event after its copy is queued; before the host
// touches the buffer again it waits for that event.
//
// Small host-to-device copies — a causal mask, an index range, a scalar: every forward makes a few
// — take their own ring of 16 small buffers instead. With one buffer, each such copy would wait
// for the previous one, i.e. for all the work queued before it on the stream: a host stall per
// copy, and in a pipeline a stage that stops queueing work while its GPU stream is still busy.
#include "core/cuda/transfer.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/cuda/capture.h"
#include "core/cuda/check.h"
#include "core/cuda/guard.h"
#include "core/stream.h"

namespace brigade::cuda {
namespace {

constexpr size_t kChunkBytes = size_t(4) << 20;

class StagingBuffer {
 public:
  explicit StagingBuffer(size_t bytes = kChunkBytes) : bytes_(bytes) {}
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;
  ~StagingBuffer() {
    if (host_ == nullptr) return;
    if (done_.defined()) cudaEventSynchronize(static_cast<cudaEvent_t>(done_.raw()));  // errors ignored
    cudaFreeHost(host_);
  }

  // The pinned bytes, once the GPU has finished every copy that used them.
  char* acquire() {
    if (host_ == nullptr) {
      // Portable: usable by copies on every GPU, not only the current one.
      BRIGADE_CUDA_CHECK(cudaHostAlloc(&host_, bytes_, cudaHostAllocPortable));
    }
    if (done_.defined()) done_.synchronize();
    return static_cast<char*>(host_);
  }

  // Notes that the work queued on `stream` so far uses the buffer.
  void used_by(const Stream& stream) {
    // An event belongs to one device; acquire() has waited for the old one, so replacing it is safe.
    if (!done_.defined() || done_device_ != stream.device()) {
      done_ = Event::create(stream.device());
      done_device_ = stream.device();
    }
    done_.record(stream);
  }

 private:
  size_t bytes_;
  void* host_ = nullptr;
  Event done_;
  Device done_device_;
};

StagingBuffer& staging(size_t chunk_index) {
  thread_local StagingBuffer buffers[2];
  return buffers[chunk_index % 2];
}

constexpr size_t kSmallBytes = size_t(64) << 10;
constexpr size_t kSmallSlots = 16;

StagingBuffer& next_small_staging() {
  thread_local std::unique_ptr<StagingBuffer> ring[kSmallSlots];
  thread_local size_t next = 0;
  std::unique_ptr<StagingBuffer>& slot = ring[next++ % kSmallSlots];
  if (!slot) slot = std::make_unique<StagingBuffer>(kSmallBytes);
  return *slot;
}

size_t chunk_count(size_t nbytes) { return (nbytes + kChunkBytes - 1) / kChunkBytes; }

void host_to_device(char* dst, Device device, const char* src, size_t nbytes) {
  const Stream stream = current_stream(device);
  DeviceGuard guard(device.index);
  // The bytes are staged now; a replay would copy whatever the staging buffer holds then.
  refuse_in_capture("a copy from the CPU", static_cast<cudaStream_t>(stream.raw()),
                    "the host's data is read when the copy is issued, not when a replay runs");
  if (nbytes <= kSmallBytes) {
    StagingBuffer& slot = next_small_staging();
    char* pinned = slot.acquire();
    std::memcpy(pinned, src, nbytes);
    BRIGADE_CUDA_CHECK(cudaMemcpyAsync(dst, pinned, nbytes, cudaMemcpyHostToDevice,
                                       static_cast<cudaStream_t>(stream.raw())));
    slot.used_by(stream);
    return;
  }
  for (size_t k = 0; k < chunk_count(nbytes); ++k) {
    const size_t begin = k * kChunkBytes, size = std::min(kChunkBytes, nbytes - begin);
    char* pinned = staging(k).acquire();
    std::memcpy(pinned, src + begin, size);
    BRIGADE_CUDA_CHECK(cudaMemcpyAsync(dst + begin, pinned, size, cudaMemcpyHostToDevice,
                                       static_cast<cudaStream_t>(stream.raw())));
    staging(k).used_by(stream);
  }
}

void device_to_host(char* dst, const char* src, Device device, size_t nbytes) {
  const Stream stream = current_stream(device);
  DeviceGuard guard(device.index);
  refuse_in_capture("a copy to the CPU", static_cast<cudaStream_t>(stream.raw()),
                    "the host waits for it, and a capture runs nothing to wait for");
  const size_t chunks = chunk_count(nbytes);
  // Chunk k is drained on the host while chunk k + 1 is being copied into the other buffer.
  auto drain = [&](size_t k) {
    const size_t begin = k * kChunkBytes, size = std::min(kChunkBytes, nbytes - begin);
    std::memcpy(dst + begin, staging(k).acquire(), size);
  };
  for (size_t k = 0; k < chunks; ++k) {
    const size_t begin = k * kChunkBytes, size = std::min(kChunkBytes, nbytes - begin);
    char* pinned = staging(k).acquire();
    BRIGADE_CUDA_CHECK(cudaMemcpyAsync(pinned, src + begin, size, cudaMemcpyDeviceToHost,
                                       static_cast<cudaStream_t>(stream.raw())));
    staging(k).used_by(stream);
    if (k > 0) drain(k - 1);
  }
  if (chunks > 0) drain(chunks - 1);
}

void device_to_device(char* dst, Device dst_device, const char* src, Device src_device, size_t nbytes) {
  const Stream src_stream = current_stream(src_device), dst_stream = current_stream(dst_device);
  // The copy runs on the destination's stream, after the source's pending work (which may still be
  // writing the source)...
  Event source_ready = Event::create(src_device);
  source_ready.record(src_stream);
  dst_stream.wait(source_ready);
  {
    DeviceGuard guard(dst_device.index);
    BRIGADE_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, nbytes,
                                           static_cast<cudaStream_t>(dst_stream.raw())));
  }
  // ...and the source's stream waits for the copy, so a block freed there is not reused too early.
  Event copied = Event::create(dst_device);
  copied.record(dst_stream);
  src_stream.wait(copied);
}

}  // namespace

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  BRIGADE_CHECK(dst_device != src_device, "copy_bytes: source and destination are both on ", dst_device.str());
  if (dst_device.is_cuda()) check_gpu("copy_", dst_device);
  if (src_device.is_cuda()) check_gpu("copy_", src_device);
  if (nbytes == 0) return;
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  if (src_device.is_cpu()) host_to_device(d, dst_device, s, nbytes);
  else if (dst_device.is_cpu()) device_to_host(d, s, src_device, nbytes);
  else device_to_device(d, dst_device, s, src_device, nbytes);
}

}  // namespace brigade::cuda
