// The CUDA emulator's device and pinned memory: allocations, copies and memsets, and the pointer
// checks built on knowing every allocation (see runtime.cpp for the runtime as a whole).
//
// Device and pinned allocations are remembered, so a copy whose direction does not match its pointers
// (a host pointer passed as device memory, or the reverse) fails with a message, and so does a kernel
// given a host pointer (emulator/simt.h checks its arguments).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "emulator/runtime.h"
#include "emulator/runtime_internal.h"
#include "emulator/simt.h"
#include "emulator/streams.h"

namespace brigade::emu {

size_t memory_per_device() {
  static const size_t bytes = [] {
    const char* env = std::getenv("BRIGADE_EMULATED_GPU_MEMORY");
    return env ? size_t(std::strtoull(env, nullptr, 10)) : size_t(16) << 30;
  }();
  return bytes;
}

namespace {

enum class Kind { device, pinned };

struct Allocation {
  size_t bytes;
  Kind kind;
  int device;
};

struct Memory {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> blocks;  // by start address
  std::map<int, size_t> used;              // device -> bytes
};

Memory& memory() {
  static Memory* m = new Memory;  // never destroyed: frees may come from static destructors
  return *m;
}

// The allocation holding [p, p + bytes), if any. With bytes == 0, p may also be one past the end
// (a kernel's `end` pointer).
const Allocation* find(const void* p, size_t bytes) {
  Memory& m = memory();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = m.blocks.upper_bound(a);
  if (it != m.blocks.begin()) {
    --it;
    if (a + bytes <= it->first + it->second.bytes) return &it->second;
  }
  return nullptr;
}

void* allocate(size_t bytes) { return std::aligned_alloc(256, std::max<size_t>(256, (bytes + 255) / 256 * 256)); }

// The direction a pointer pair must have for `kind`; "" when it matches.
std::string check_copy(const char* call, void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (count == 0) return "";
  std::lock_guard<std::mutex> lock(memory().mutex);
  const Allocation* d = find(dst, count);
  const Allocation* s = find(src, count);
  const bool dst_device = d && d->kind == Kind::device, src_device = s && s->kind == Kind::device;
  auto where = [](bool device) { return device ? "device memory" : "host memory"; };
  bool want_dst = false, want_src = false;
  switch (kind) {
    case cudaMemcpyHostToHost: want_dst = false; want_src = false; break;
    case cudaMemcpyHostToDevice: want_dst = true; want_src = false; break;
    case cudaMemcpyDeviceToHost: want_dst = false; want_src = true; break;
    case cudaMemcpyDeviceToDevice: want_dst = true; want_src = true; break;
    default: return "";  // cudaMemcpyDefault: any direction
  }
  // A device range must lie inside one allocation; a host range is anything else.
  if (want_dst != dst_device || want_src != src_device) {
    return std::string(call) + " of " + std::to_string(count) + " bytes: the kind says " + where(want_src) + " to " +
           where(want_dst) + ", but the source is " + where(src_device) + " and the destination is " +
           where(dst_device) + " (or a device range runs past its allocation)";
  }
  return "";
}

}  // namespace

std::string check_kernel_pointer(const char* kernel, int index, const void* pointer) {
  if (!pointer) return "";
  std::lock_guard<std::mutex> lock(memory().mutex);
  const Allocation* a = find(pointer, 0);
  if (!a)
    return std::string(kernel) + ": argument " + std::to_string(index) +
           " points to host memory, which a GPU kernel cannot read (use device or pinned memory)";
  if (a->kind == Kind::device && a->device != the_device)  // brigade enables no peer access
    return std::string(kernel) + ": argument " + std::to_string(index) + " points to memory of device " +
           std::to_string(a->device) + ", but the kernel runs on device " + std::to_string(the_device);
  return "";
}

const void* allocation_start(const void* p, size_t* bytes, int* device) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = m.blocks.upper_bound(a);
  if (it == m.blocks.begin()) return nullptr;
  --it;
  if (a >= it->first + it->second.bytes) return nullptr;
  *bytes = it->second.bytes;
  *device = it->second.kind == Kind::device ? it->second.device : -1;
  return reinterpret_cast<const void*>(it->first);
}

std::string check_device_range(const std::string& what, const void* pointer, size_t bytes, int device,
                               bool pinned_ok) {
  std::lock_guard<std::mutex> lock(memory().mutex);
  const Allocation* a = find(pointer, bytes);
  if (!a)
    return what + ": " + std::to_string(bytes) + " bytes at " + std::to_string(reinterpret_cast<uintptr_t>(pointer)) +
           " are not inside one device allocation (host memory, freed memory, or past an allocation's end)";
  if (a->kind == Kind::pinned) return pinned_ok ? "" : what + ": the pointer is pinned host memory, not device memory";
  if (a->device != device)
    return what + ": the pointer is memory of device " + std::to_string(a->device) + ", but the work runs on device " +
           std::to_string(device);
  return "";
}

std::string check_global_range(const std::string& what, const void* pointer, size_t bytes) {
  std::lock_guard<std::mutex> lock(memory().mutex);
  if (find(pointer, bytes)) return "";
  return what + ": " + std::to_string(bytes) + " bytes at " + std::to_string(reinterpret_cast<uintptr_t>(pointer)) +
         " are not inside one allocation (past an allocation's end, freed memory, or host memory)";
}

}  // namespace brigade::emu

using namespace brigade::emu;

// ---- memory -----------------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** p, size_t bytes) {
  // Not a stream operation, so a capture does not see it: barred during one unless relaxed.
  if (const cudaError_t e = check_unsafe_call("cudaMalloc"); e != cudaSuccess) return e;
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  size_t& used = m.used[the_device];
  if (bytes > memory_per_device() - used) {
    *p = nullptr;
    return fail(cudaErrorMemoryAllocation, "out of memory: " + std::to_string(bytes) + " bytes asked, " +
                                               std::to_string(used) + " of " + std::to_string(memory_per_device()) +
                                               " in use on emulated device " + std::to_string(the_device));
  }
  *p = allocate(bytes);
  if (!*p) return fail(cudaErrorMemoryAllocation, "the host could not back a device allocation");
  bytes = std::max<size_t>(bytes, 1);  // counted as released: a zero-byte allocation holds one byte
  used += bytes;
  m.blocks[reinterpret_cast<uintptr_t>(*p)] = Allocation{bytes, Kind::device, the_device};
  return cudaSuccess;
}

namespace {
cudaError_t release(void* p, Kind kind, const char* call) {
  if (!p) return cudaSuccess;
  // It waits for every device, which no capture allows (whatever the thread's mode).
  if (const cudaError_t e = check_unsafe_call(call); e != cudaSuccess) return e;
  if (const cudaError_t e = check_device_wait(-1, call); e != cudaSuccess) return e;
  // cudaFree and cudaFreeHost synchronise first: no queued work may still use the memory.
  synchronize_device(-1);
  {
    Memory& m = memory();
    std::lock_guard<std::mutex> lock(m.mutex);
    auto it = m.blocks.find(reinterpret_cast<uintptr_t>(p));
    if (it == m.blocks.end() || it->second.kind != kind)
      return fail(cudaErrorInvalidValue, std::string(call) + ": not the start of a live " +
                                             (kind == Kind::device ? "device" : "pinned") + " allocation");
    if (kind == Kind::device) m.used[it->second.device] -= it->second.bytes;
    m.blocks.erase(it);
  }
  forget_allocation(p);
  std::free(p);
  return synchronised();
}

cudaError_t pinned(void** p, size_t bytes) {
  if (const cudaError_t e = check_unsafe_call("cudaMallocHost"); e != cudaSuccess) return e;
  *p = allocate(bytes);
  if (!*p) return fail(cudaErrorMemoryAllocation, "pinned allocation failed");
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.blocks[reinterpret_cast<uintptr_t>(*p)] = Allocation{std::max<size_t>(bytes, 1), Kind::pinned, -1};
  return cudaSuccess;
}

bool is_pageable(const void* p) {
  std::lock_guard<std::mutex> lock(memory().mutex);
  return find(p, 0) == nullptr;
}

std::string copy_name(const char* call, size_t count) { return std::string(call) + " of " + std::to_string(count) + " bytes"; }

// A copy on `stream`, synchronous with the host or not as the CUDA Runtime API's "API
// synchronization behavior" section describes for cudaMemcpyAsync:
//   - from pageable host memory: the source is staged before the call returns (the caller may
//     reuse it at once); the transfer itself is queued;
//   - to pageable host memory: the call returns once the copy is done;
//   - device or pinned memory on both sides: queued, the host does not wait.
// `wait` makes it synchronous outright (cudaMemcpy).
cudaError_t copy(const char* call, void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                 cudaStream_t stream, bool wait) {
  const std::string problem = check_copy(call, dst, src, count, kind);
  if (!problem.empty()) return fail(cudaErrorInvalidValue, "CUDA emulator: " + problem);
  if (count == 0) return cudaSuccess;
  if (wait) {  // a synchronous call on the legacy stream
    if (const cudaError_t e = check_unsafe_call(call); e != cudaSuccess) return e;
  }
  const bool from_pageable = is_pageable(src), to_pageable = is_pageable(dst);
  // Pageable memory is staged (or waited for) now, at the call: a graph replaying the copy would
  // use what the host held at capture time. The emulator refuses it in a capture.
  if (from_pageable || to_pageable) {
    const cudaError_t e = refuse_if_capturing(stream, copy_name(call, count),
                                              "pageable host memory cannot be copied inside a capture (pinned can)");
    if (e != cudaSuccess) return e;
  }
  std::vector<Access> accesses;
  if (!from_pageable) accesses.push_back({src, false});
  if (!to_pageable) accesses.push_back({dst, true});
  std::function<std::string()> work;
  if (from_pageable) {
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + count);
    work = [dst, staged] {
      std::memcpy(dst, staged->data(), staged->size());
      return std::string();
    };
  } else {
    work = [dst, src, count] {
      std::memmove(dst, src, count);
      return std::string();
    };
  }
  if (wait || to_pageable) {
    const cudaError_t e = run_and_wait(stream, copy_name(call, count), std::move(accesses), std::move(work));
    return e != cudaSuccess ? e : synchronised();
  }
  return enqueue(stream, copy_name(call, count), std::move(accesses), std::move(work));
}

cudaError_t set(const char* call, void* p, int value, size_t count, cudaStream_t stream, bool wait) {
  if (count == 0) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(memory().mutex);
    const Allocation* a = find(p, count);
    if (!a || a->kind != Kind::device)
      return fail(cudaErrorInvalidValue, std::string("CUDA emulator: ") + call + " of " + std::to_string(count) +
                                             " bytes outside device memory");
  }
  auto work = [p, value, count] {
    std::memset(p, value, count);
    return std::string();
  };
  if (wait) {
    if (const cudaError_t e = check_unsafe_call(call); e != cudaSuccess) return e;
    const cudaError_t e = run_and_wait(stream, copy_name(call, count), {{p, true}}, work);
    return e != cudaSuccess ? e : synchronised();
  }
  return enqueue(stream, copy_name(call, count), {{p, true}}, work);
}
}  // namespace

cudaError_t cudaFree(void* p) { return release(p, Kind::device, "cudaFree"); }
cudaError_t cudaMallocHost(void** p, size_t bytes) { return pinned(p, bytes); }
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned) { return pinned(p, bytes); }
cudaError_t cudaFreeHost(void* p) { return release(p, Kind::pinned, "cudaFreeHost"); }

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  std::lock_guard<std::mutex> lock(memory().mutex);
  *total = memory_per_device();
  *free = *total - memory().used[the_device];
  return cudaSuccess;
}

// cudaMemcpy and cudaMemset run on the legacy default stream and return once done.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return copy("cudaMemcpy", dst, src, count, kind, nullptr, true);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  return copy("cudaMemcpyAsync", dst, src, count, kind, stream, false);
}
cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t count,
                                cudaStream_t stream) {
  if (dst_device < 0 || dst_device >= device_count() || src_device < 0 || src_device >= device_count())
    return fail(cudaErrorInvalidDevice, "cudaMemcpyPeerAsync: no such device");
  return copy("cudaMemcpyPeerAsync", dst, src, count, cudaMemcpyDeviceToDevice, stream, false);
}
cudaError_t cudaMemset(void* p, int value, size_t count) { return set("cudaMemset", p, value, count, nullptr, true); }
cudaError_t cudaMemsetAsync(void* p, int value, size_t count, cudaStream_t stream) {
  return set("cudaMemsetAsync", p, value, count, stream, false);
}
