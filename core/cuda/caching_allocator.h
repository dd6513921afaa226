// The caching allocator: why a framework does not call cudaMalloc for every tensor.
//
// cudaMalloc and cudaFree are slow (cudaFree also waits for the whole GPU to go idle), and a training
// step creates and drops thousands of tensors of the same few sizes. So a freed block is not given
// back; it is kept in a cache and handed to the next request of a fitting size, at the cost of a map
// lookup. Only when a request finds nothing does the allocator ask the backend for new memory.
//
// The rules, all visible in this class:
//  - Sizes are rounded up: to 512 bytes below 1 MiB, to 2 MiB from there on. Requests of nearby
//    sizes then share blocks, and large ones match the 2 MiB pages GPU memory is mapped in anyway.
//  - A free block is cached per (device, stream) and reused only by allocations on that same stream.
//    Work on one stream runs in order, so the next user of the block cannot start before the last
//    kernel that used it has finished — no synchronisation needed.
//  - A block also used on other streams must say so: record_stream(ptr, stream). When it is freed,
//    an event is recorded on each of those streams, and the block returns to the cache only once
//    they have all passed it. Otherwise cross-stream use is the caller's business (make the
//    allocating stream wait for the other before the block is freed).
//  - Reuse is best fit: the smallest cached block that is big enough, and at most 50% bigger (so a
//    huge cached block is not tied up by a tiny tensor). Blocks are never split.
//  - When the backend runs out of memory, every cached block of that device is given back and the
//    request retried once; if it still fails, the Error says how memory is used, and what the
//    thread's memory context (core/memory_context.h) says it holds.
//  - A process may be given a limit per device (set_memory_limit: ranks sharing one GPU each take a
//    share). It counts reserved bytes, cached blocks included: a request that would take them past
//    the limit is treated as the backend running out — the cache is given back, and if the request
//    still does not fit, it fails.
//  - CUDA graphs get pools of their own. A graph replays its kernels with the addresses they were
//    captured with, so every block the captured work touched must stay reserved for the graph —
//    also once the tensors that held it are gone. While a stream captures (begin_graph_pool), its
//    allocations come from a private pool, blocks it frees return there (also blocks this stream
//    allocated before the capture: captured work may use them), and they are reused only by that capture or
//    by later captures sharing the pool. end_graph_pool stops the routing; release_graph_pool, when
//    the graph is destroyed, gives the pool's blocks back to the stream's ordinary cache. Cached
//    blocks of a pool are never returned to the backend, and nothing is while a capture is under
//    way (cudaFree waits for the device, which a capture forbids).
//  - Each block handed out is charged to the calling thread's device memory account, if it has one
//    (DeviceMemoryScope, core/memory_account.h), at the block's size, until it is freed: ranks that
//    are threads of one process share the device and its counters here, and their accounts tell
//    each rank's own bytes and peak apart. The block keeps the account; the lookup is one
//    thread-local read, outside the lock.
//
// The bookkeeping is plain C++ over a small MemoryBackend interface: the CUDA backend
// (core/cuda/cuda_allocator.cpp) implements it with cudaMalloc/cudaFree, and
// tests/test_caching_allocator.cpp with host memory, so every rule above is tested without a GPU.
// All methods are thread-safe (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/memory_account.h"
#include "core/memory_limit.h"
#include "core/stream.h"

namespace brigade::cuda {

// Where the bytes come from.
class MemoryBackend {
 public:
  virtual ~MemoryBackend() = default;
  // `bytes` of memory on `device`, or nullptr when the device is out of memory (other failures throw).
  virtual void* raw_alloc(int device, size_t bytes) = 0;
  // Gives back memory from raw_alloc. Called from destructors, so it must not throw.
  virtual void raw_free(int device, void* ptr) noexcept = 0;
  // {free, total} bytes of the device, for the out-of-memory message ({0, 0} if unknown).
  virtual std::pair<size_t, size_t> memory_info(int device) = 0;

  // Events, for blocks used on several streams: a marker at the current end of `stream`...
  virtual void* record_event(int device, const void* stream) = 0;
  // ...whether the stream has passed it (without waiting), waiting for it, and disposing of it.
  virtual bool event_done(void* event) = 0;
  virtual void wait_event(void* event) = 0;
  virtual void destroy_event(void* event) noexcept = 0;
};

class CachingAllocator {
 public:
  using StreamKey = const void*;  // the cudaStream_t an allocation is made for

  static constexpr size_t kSmallGranule = 512;
  static constexpr size_t kLargeThreshold = size_t(1) << 20;  // 1 MiB
  static constexpr size_t kLargeGranule = size_t(2) << 20;    // 2 MiB

  explicit CachingAllocator(MemoryBackend& backend) : backend_(backend) {}
  // Gives the cached blocks back; blocks still in use are left to the backend.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The block size a request of `bytes` gets (at least one granule, also for 0 bytes).
  static size_t round_size(size_t bytes);

  // A block of at least `bytes` on `device`, for use on `stream`. Throws Error when out of memory.
  // Charged to the calling thread's device memory account, if any.
  void* allocate(int device, StreamKey stream, size_t bytes);
  // Returns a block from allocate() to the cache of the stream it was allocated for (once the other
  // streams recorded for it have passed this point).
  void free(void* ptr) noexcept;
  // Notes that the live block containing `ptr` is also used by work on `stream`. Returns false when
  // no live block contains `ptr`.
  bool record_stream(const void* ptr, StreamKey stream);

  // ---- graph pools (see the rules above) ----
  using PoolId = uint64_t;  // 0: the ordinary cache
  // Routes (device, stream)'s allocations and frees into a new pool, or into `share` (a pool from
  // earlier, still unreleased): graphs captured one after another on one stream may share memory
  // when they are replayed in the order they were captured. Returns the pool.
  PoolId begin_graph_pool(int device, StreamKey stream, PoolId share = 0);
  void end_graph_pool(int device, StreamKey stream);  // the pool's blocks stay reserved
  void release_graph_pool(PoolId pool);               // its graphs are gone; call once per begin
  size_t graph_pool_bytes(PoolId pool) const;         // bytes of blocks the pool owns (cached or live)

  // ---- the per-process limit ----
  // At most `limit` reserved bytes on `device` from now on (a fraction is of the backend's total for
  // the device); none() lifts it. Blocks already reserved stay, even above it. `source` names where
  // the limit came from, for the out-of-memory message (e.g. "--memory-limit").
  void set_memory_limit(int device, DeviceMemoryLimit limit, const std::string& source = "set_memory_limit");
  // The limit of every device that has not been given its own, applied at its first allocation (the
  // CUDA backend passes BRIGADE_CUDA_MEMORY_LIMIT here).
  void set_default_memory_limit(DeviceMemoryLimit limit, const std::string& source);
  size_t memory_limit(int device);  // in bytes, resolved; 0: none

  CudaMemoryStats stats(int device) const;
  void reset_peak(int device);  // peak_allocated = allocated
  void empty_cache();           // gives every cached block of every device back to the backend
  void empty_cache(int device);

 private:
  struct Block {
    int device = 0;
    StreamKey stream = nullptr;
    size_t size = 0;
    std::vector<StreamKey> other_streams;  // from record_stream
    PoolId pool = 0;                       // the graph pool owning it, or 0
    std::shared_ptr<MemoryAccount> account;  // charged with `size` while the block is live, or null
  };
  // A freed block waiting for the other streams that used it (one event each).
  struct Pending {
    void* ptr = nullptr;
    Block block;
    std::vector<void*> events;
  };
  using Pool = std::multimap<size_t, void*>;  // cached blocks by size: lower_bound is best fit
  using CacheKey = std::tuple<int, StreamKey, PoolId>;  // (device, stream, graph pool or 0)

  void cache_locked(void* ptr, const Block& block);
  void collect_pending_locked(int device, bool wait);  // caches pending blocks whose events passed
  void release_cached_locked(int device);              // device -1: all devices
  CudaMemoryStats& stats_locked(int device);
  // Why allocate(device, bytes) failed: how memory is used, and the limit when there is one.
  std::string out_of_memory_locked(int device, size_t bytes, bool over_limit);
  void* allocate_locked(int device, StreamKey stream, size_t bytes, std::shared_ptr<MemoryAccount> account,
                        std::string& failure);
  bool over_limit_locked(int device, size_t size);  // would reserving `size` more pass the limit?
  PoolId routed_pool_locked(int device, StreamKey stream) const;  // the capturing pool, or 0
  bool capturing_on_locked(int device) const;

  MemoryBackend& backend_;
  mutable std::mutex mutex_;
  std::map<CacheKey, Pool> cached_;  // free blocks per (device, stream, pool)
  std::map<void*, Block> live_;  // blocks handed out, by address (ordered: record_stream finds interiors)
  std::vector<Pending> pending_;
  std::vector<CudaMemoryStats> stats_;  // per device
  std::map<std::pair<int, StreamKey>, PoolId> capturing_;  // streams routed into a graph pool
  std::map<PoolId, int> pool_users_;  // live graph pools: how many begin_graph_pool calls hold each
  PoolId next_pool_ = 1;
  struct Limit {
    size_t bytes = 0;
    std::string source;
  };
  std::map<int, Limit> limits_;      // per device, resolved
  DeviceMemoryLimit default_limit_;        // for the devices not in limits_, at their first allocation
  std::string default_limit_source_;
};

// "1.50 GiB", "512.00 KiB", "100 bytes" — for memory messages.
std::string format_bytes(size_t bytes);

}  // namespace brigade::cuda
