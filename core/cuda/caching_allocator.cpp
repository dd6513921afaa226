// The caching allocator's bookkeeping (see caching_allocator.h). No CUDA here: the backend does that.
#include "core/cuda/caching_allocator.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "core/device.h"
#include "core/error.h"
#include "core/format.h"
#include "core/memory_context.h"

namespace brigade::cuda {

// Out-of-memory messages compare sizes that differ by little, hence two decimals; and a handful of
// bytes is spelled out.
std::string format_bytes(size_t bytes) {
  return bytes < 1024 ? std::to_string(bytes) + " bytes" : brigade::format_bytes(double(bytes), 2);
}

size_t CachingAllocator::round_size(size_t bytes) {
  const size_t granule = bytes < kLargeThreshold ? kSmallGranule : kLargeGranule;
  if (bytes == 0) return granule;
  if (bytes > std::numeric_limits<size_t>::max() - granule) return 0;  // no such block: see allocate
  return (bytes + granule - 1) / granule * granule;
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    collect_pending_locked(-1, /*wait=*/true);
  } catch (...) {
    // The GPU is in an error state; the blocks still pending are left to the driver.
  }
  release_cached_locked(-1);
}

void* CachingAllocator::allocate(int device, StreamKey stream, size_t bytes) {
  BRIGADE_CHECK(device >= 0, "caching allocator: invalid device index ", device);
  std::string failure;
  std::shared_ptr<MemoryAccount> account = current_memory_account(MemoryKind::device);  // before the lock
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (void* ptr = allocate_locked(device, stream, bytes, std::move(account), failure)) return ptr;
  }
  // Outside the lock: the context may ask for the allocator's statistics.
  const std::string context = memory_context();
  fail(failure, context.empty() ? std::string() : "\n" + context);
}

void* CachingAllocator::allocate_locked(int device, StreamKey stream, size_t bytes,
                                       std::shared_ptr<MemoryAccount> account, std::string& failure) {
  const size_t size = round_size(bytes);
  if (size == 0) {
    failure = out_of_memory_locked(device, bytes, false);
    return nullptr;
  }
  if (!pending_.empty()) collect_pending_locked(device, /*wait=*/false);

  void* ptr = nullptr;
  size_t block_size = size;
  const PoolId graph_pool = routed_pool_locked(device, stream);
  Pool& pool = cached_[{device, stream, graph_pool}];
  auto fit = pool.lower_bound(size);
  if (fit != pool.end() && fit->first - size <= size / 2) {
    block_size = fit->first;
    ptr = fit->second;
    pool.erase(fit);
  } else {
    if (!over_limit_locked(device, size)) ptr = backend_.raw_alloc(device, size);
    if (ptr == nullptr) {
      // The device (or this process's share of it) is full, but part of it may be our own cache
      // (blocks of other sizes or streams, or blocks still waiting for another stream: wait for those).
      collect_pending_locked(device, /*wait=*/true);
      release_cached_locked(device);
      if (!over_limit_locked(device, size)) ptr = backend_.raw_alloc(device, size);
    }
    if (ptr == nullptr) {
      failure = out_of_memory_locked(device, bytes, over_limit_locked(device, size));
      return nullptr;
    }
    CudaMemoryStats& s = stats_locked(device);
    s.reserved += size;
    s.cuda_mallocs += 1;
  }
  if (account) account->charge(block_size);
  live_[ptr] = Block{device, stream, block_size, {}, graph_pool, std::move(account)};
  CudaMemoryStats& s = stats_locked(device);
  s.allocated += block_size;
  s.peak_allocated = std::max(s.peak_allocated, s.allocated);
  return ptr;
}

bool CachingAllocator::over_limit_locked(int device, size_t size) {
  auto it = limits_.find(device);
  if (it == limits_.end()) {
    // The default's first use on this device: resolve it once (a fraction needs the device's total).
    it = limits_.emplace(device, Limit{default_limit_.resolve(backend_.memory_info(device).second,
                                                              default_limit_source_),
                                       default_limit_source_})
             .first;
  }
  return it->second.bytes > 0 && stats_locked(device).reserved + size > it->second.bytes;
}

void CachingAllocator::set_memory_limit(int device, DeviceMemoryLimit limit, const std::string& source) {
  BRIGADE_CHECK(device >= 0, "caching allocator: invalid device index ", device);
  const size_t total = limit.fraction > 0 ? backend_.memory_info(device).second : 0;  // not under the lock
  std::lock_guard<std::mutex> lock(mutex_);
  limits_[device] = Limit{limit.resolve(total, source), source};
}

void CachingAllocator::set_default_memory_limit(DeviceMemoryLimit limit, const std::string& source) {
  std::lock_guard<std::mutex> lock(mutex_);
  default_limit_ = limit;
  default_limit_source_ = source;
}

size_t CachingAllocator::memory_limit(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  over_limit_locked(device, 0);  // resolves the default
  return limits_.at(device).bytes;
}

void CachingAllocator::free(void* ptr) noexcept {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) {
    // A pointer this allocator never handed out, or freed twice: a bug in the caller. Throwing is
    // not an option in a destructor, and giving it to the backend could corrupt memory; say so.
    std::fprintf(stderr, "brigade: caching allocator: free of unknown pointer %p ignored\n", ptr);
    return;
  }
  Block block = std::move(it->second);
  live_.erase(it);
  stats_locked(block.device).allocated -= block.size;
  if (block.account) {
    block.account->release(block.size);
    block.account.reset();  // a cached block is nobody's
  }
  // Freed while its stream captures: the captured work may use it, so the graph keeps it.
  if (block.pool == 0) block.pool = routed_pool_locked(block.device, block.stream);
  if (block.other_streams.empty()) {
    cache_locked(ptr, block);
    return;
  }
  Pending pending{ptr, std::move(block), {}};
  try {
    for (StreamKey other : pending.block.other_streams)
      pending.events.push_back(backend_.record_event(pending.block.device, other));
    pending_.push_back(std::move(pending));
  } catch (const std::exception& e) {
    // Without the events nobody knows when the other streams are done with the block: keep it out
    // of circulation (it stays reserved) rather than risk handing it out while in use.
    for (void* event : pending.events) backend_.destroy_event(event);
    std::fprintf(stderr, "brigade: caching allocator: block %p retired (%s)\n", ptr, e.what());
  }
}

bool CachingAllocator::record_stream(const void* ptr, StreamKey stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The block that starts at or before ptr, if ptr lies inside it.
  auto it = live_.upper_bound(const_cast<void*>(ptr));
  if (it == live_.begin()) return false;
  --it;
  const char* start = static_cast<const char*>(it->first);
  if (static_cast<const char*>(ptr) >= start + it->second.size) return false;
  Block& block = it->second;
  if (stream != block.stream &&
      std::find(block.other_streams.begin(), block.other_streams.end(), stream) == block.other_streams.end())
    block.other_streams.push_back(stream);
  return true;
}

CudaMemoryStats CachingAllocator::stats(int device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return device >= 0 && size_t(device) < stats_.size() ? stats_[size_t(device)] : CudaMemoryStats{};
}

void CachingAllocator::reset_peak(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device < 0 || size_t(device) >= stats_.size()) return;
  stats_[size_t(device)].peak_allocated = stats_[size_t(device)].allocated;
}

void CachingAllocator::empty_cache() { empty_cache(-1); }

void CachingAllocator::empty_cache(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  collect_pending_locked(device, /*wait=*/false);  // blocks other streams still use stay reserved
  release_cached_locked(device);
}

void CachingAllocator::cache_locked(void* ptr, const Block& block) {
  // In front of equal sizes: the block freed last is reused first, while it may still be in L2.
  Pool& pool = cached_[{block.device, block.stream, block.pool}];
  pool.emplace_hint(pool.lower_bound(block.size), block.size, ptr);
}

void CachingAllocator::collect_pending_locked(int device, bool wait) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    bool done = device < 0 || it->block.device == device;
    for (void* event : it->events) {
      if (!done) break;
      if (wait) backend_.wait_event(event);
      done = backend_.event_done(event);
    }
    if (!done) {
      ++it;
      continue;
    }
    for (void* event : it->events) backend_.destroy_event(event);
    cache_locked(it->ptr, it->block);
    it = pending_.erase(it);
  }
}

void CachingAllocator::release_cached_locked(int device) {
  for (auto it = cached_.begin(); it != cached_.end();) {
    const int pool_device = std::get<0>(it->first);
    const PoolId graph_pool = std::get<2>(it->first);
    // A graph pool's blocks are the graph's until release_graph_pool; and no cudaFree while a
    // stream of the device captures.
    if ((device >= 0 && pool_device != device) || graph_pool != 0 || capturing_on_locked(pool_device)) {
      ++it;
      continue;
    }
    for (auto& [size, ptr] : it->second) {
      backend_.raw_free(pool_device, ptr);
      stats_locked(pool_device).reserved -= size;
    }
    it = cached_.erase(it);
  }
}

CudaMemoryStats& CachingAllocator::stats_locked(int device) {
  if (size_t(device) >= stats_.size()) stats_.resize(size_t(device) + 1);
  return stats_[size_t(device)];
}

std::string CachingAllocator::out_of_memory_locked(int device, size_t bytes, bool over_limit) {
  const CudaMemoryStats& s = stats_locked(device);
  auto [free_bytes, total_bytes] = backend_.memory_info(device);
  size_t in_graphs = 0;
  for (const auto& [key, pool] : cached_)
    if (std::get<0>(key) == device && std::get<2>(key) != 0)
      for (const auto& [size, ptr] : pool) in_graphs += size;
  const auto limit = limits_.find(device);
  std::string limit_text;
  if (limit != limits_.end() && limit->second.bytes > 0)
    limit_text = (over_limit ? "; that would pass this process's limit of " : "; this process's limit is ") +
                 format_bytes(limit->second.bytes) + " (" + limit->second.source + ")";
  std::ostringstream os;
  os << "out of memory on " << Device::cuda(device).str() << ": tried to allocate " << format_bytes(bytes) << "; "
     << format_bytes(s.allocated) << " allocated by tensors, " << format_bytes(s.reserved) << " reserved"
     << (in_graphs == 0 ? std::string() : " (" + format_bytes(in_graphs) + " of it cached for CUDA graphs)") << ", "
     << format_bytes(free_bytes) << " free of " << format_bytes(total_bytes) << limit_text
     << (capturing_on_locked(device)
             ? "; a CUDA graph is being captured on this device, so cached blocks could not be given back"
             : "");
  return os.str();
}

bool CachingAllocator::capturing_on_locked(int device) const {
  for (const auto& [key, pool] : capturing_)
    if (key.first == device) return true;
  return false;
}

CachingAllocator::PoolId CachingAllocator::routed_pool_locked(int device, StreamKey stream) const {
  auto it = capturing_.find({device, stream});
  return it == capturing_.end() ? 0 : it->second;
}

// ---- graph pools ----

CachingAllocator::PoolId CachingAllocator::begin_graph_pool(int device, StreamKey stream, PoolId share) {
  std::lock_guard<std::mutex> lock(mutex_);
  BRIGADE_CHECK(capturing_.count({device, stream}) == 0, "caching allocator: a graph pool is already open for ",
                Device::cuda(device).str(), " stream ", stream, " (one capture per stream at a time)");
  BRIGADE_CHECK(share == 0 || pool_users_.count(share) != 0, "caching allocator: graph pool ", share,
                " does not exist (never made, or released)");
  const PoolId pool = share != 0 ? share : next_pool_++;
  pool_users_[pool] += 1;
  capturing_[{device, stream}] = pool;
  return pool;
}

void CachingAllocator::end_graph_pool(int device, StreamKey stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  capturing_.erase({device, stream});
}

void CachingAllocator::release_graph_pool(PoolId pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto users = pool_users_.find(pool);
  if (users == pool_users_.end()) return;
  if (--users->second > 0) return;
  pool_users_.erase(users);
  for (auto it = capturing_.begin(); it != capturing_.end();)
    it = it->second == pool ? capturing_.erase(it) : std::next(it);
  // Cached blocks rejoin their stream's ordinary cache (the graph's last replay ran on that stream,
  // so stream order keeps the next user behind it); live ones go there when freed.
  for (auto it = cached_.begin(); it != cached_.end();) {
    const auto& [device, stream, graph_pool] = it->first;
    if (graph_pool != pool) {
      ++it;
      continue;
    }
    Pool& ordinary = cached_[{device, stream, PoolId(0)}];
    for (const auto& [size, ptr] : it->second) ordinary.emplace(size, ptr);
    it = cached_.erase(it);
  }
  for (auto& [ptr, block] : live_)
    if (block.pool == pool) block.pool = 0;
  for (Pending& p : pending_)
    if (p.block.pool == pool) p.block.pool = 0;
}

size_t CachingAllocator::graph_pool_bytes(PoolId pool) const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t bytes = 0;
  for (const auto& [key, cached] : cached_)
    if (std::get<2>(key) == pool)
      for (const auto& [size, ptr] : cached) bytes += size;
  for (const auto& [ptr, block] : live_)
    if (block.pool == pool) bytes += block.size;
  for (const Pending& p : pending_)
    if (p.block.pool == pool) bytes += p.block.size;
  return bytes;
}

}  // namespace brigade::cuda
