// The caching allocator's bookkeeping, on a fake backend (no GPU needed), and how the CUDA entry
// points behave on a machine without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "brigade.h"
#include "core/cuda/caching_allocator.h"
#include "core/memory_account.h"
#include "core/memory_context.h"
#include "core/memory_limit.h"
#include "core/stream.h"

using namespace brigade;
using brigade::cuda::CachingAllocator;

namespace {

constexpr size_t KiB = size_t(1) << 10, MiB = size_t(1) << 20, GiB = size_t(1) << 30;

// Hands out fake addresses (never dereferenced) from a device of `capacity` bytes, and counts calls.
class FakeBackend final : public cuda::MemoryBackend {
 public:
  explicit FakeBackend(size_t capacity = 64 * GiB) : capacity(capacity) {}

  void* raw_alloc(int device, size_t bytes) override {
    std::lock_guard<std::mutex> lock(mutex);
    if (in_use + bytes > capacity) {
      ++failures;
      return nullptr;
    }
    in_use += bytes;
    ++allocs;
    void* p = reinterpret_cast<void*>(next_address);
    next_address += bytes + 4096;
    live[p] = {device, bytes};
    return p;
  }

  void raw_free(int device, void* ptr) noexcept override {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = live.find(ptr);
    if (it == live.end() || it->second.first != device) {
      ++bad_frees;
      return;
    }
    in_use -= it->second.second;
    live.erase(it);
    ++frees;
  }

  std::pair<size_t, size_t> memory_info(int) override { return {capacity - in_use, capacity}; }

  // Events are flags the test sets (finish_streams) or waits on (wait_event finishes one).
  struct FakeEvent {
    int device;
    const void* stream;
    bool done = false;
  };
  void* record_event(int device, const void* stream) override {
    events.push_back(std::make_unique<FakeEvent>(FakeEvent{device, stream}));
    return events.back().get();
  }
  bool event_done(void* event) override { return static_cast<FakeEvent*>(event)->done; }
  void wait_event(void* event) override {
    static_cast<FakeEvent*>(event)->done = true;
    ++waits;
  }
  void destroy_event(void* event) noexcept override {
    for (auto& e : events)
      if (e.get() == event) e.reset();
  }
  void finish_stream(const void* stream) {
    for (auto& e : events)
      if (e && e->stream == stream) e->done = true;
  }
  size_t live_events() const {
    return size_t(std::count_if(events.begin(), events.end(), [](auto& e) { return e != nullptr; }));
  }

  std::vector<std::unique_ptr<FakeEvent>> events;
  int waits = 0;
  std::mutex mutex;
  size_t capacity;
  size_t in_use = 0;
  int allocs = 0, frees = 0, failures = 0, bad_frees = 0;
  uintptr_t next_address = 0x100000;
  std::map<void*, std::pair<int, size_t>> live;  // ptr -> (device, bytes)
};

// Two distinct stream keys (the allocator only compares them).
int stream_a_tag, stream_b_tag;
const void* const kStreamA = &stream_a_tag;
const void* const kStreamB = &stream_b_tag;

}  // namespace

TEST_CASE("caching allocator: sizes round to 512 B below 1 MiB and to 2 MiB above", "[allocator]") {
  REQUIRE(CachingAllocator::round_size(0) == 512);
  REQUIRE(CachingAllocator::round_size(1) == 512);
  REQUIRE(CachingAllocator::round_size(512) == 512);
  REQUIRE(CachingAllocator::round_size(513) == 1024);
  REQUIRE(CachingAllocator::round_size(MiB - 1) == MiB);
  REQUIRE(CachingAllocator::round_size(MiB) == 2 * MiB);
  REQUIRE(CachingAllocator::round_size(2 * MiB) == 2 * MiB);
  REQUIRE(CachingAllocator::round_size(2 * MiB + 1) == 4 * MiB);
  REQUIRE(CachingAllocator::round_size(size_t(-1)) == 0);  // no block can hold it
}

TEST_CASE("caching allocator: a freed block is reused on its own stream only", "[allocator]") {
  FakeBackend backend;
  CachingAllocator cache(backend);
  void* a = cache.allocate(0, kStreamA, 1000);
  cache.free(a);
  REQUIRE(backend.frees == 0);  // cached, not given back

  SECTION("same stream, same size: the same block, no new raw allocation") {
    REQUIRE(cache.allocate(0, kStreamA, 1000) == a);
    REQUIRE(backend.allocs == 1);
  }
  SECTION("same stream, a size that rounds the same: reused") {
    REQUIRE(cache.allocate(0, kStreamA, 600) == a);  // both round to 1024
    REQUIRE(backend.allocs == 1);
  }
  SECTION("another stream: a new block") {
    void* b = cache.allocate(0, kStreamB, 1000);
    REQUIRE(b != a);
    REQUIRE(backend.allocs == 2);
    // ...and the other stream's cached block is still there for stream A.
    REQUIRE(cache.allocate(0, kStreamA, 1000) == a);
  }
  SECTION("another device: a new block") {
    void* b = cache.allocate(1, kStreamA, 1000);
    REQUIRE(b != a);
    REQUIRE(backend.live[b].first == 1);
  }
}

TEST_CASE("caching allocator: best fit, never more than 50% too big", "[allocator]") {
  FakeBackend backend;
  CachingAllocator cache(backend);
  void* b1k = cache.allocate(0, kStreamA, 1024);
  void* b2k = cache.allocate(0, kStreamA, 2048);
  void* b4k = cache.allocate(0, kStreamA, 4096);
  cache.free(b4k);
  cache.free(b1k);
  cache.free(b2k);
  REQUIRE(backend.allocs == 3);

  REQUIRE(cache.allocate(0, kStreamA, 1500) == b2k);  // 1536 -> the 2048 block (not 4096)
  REQUIRE(cache.allocate(0, kStreamA, 3000) == b4k);  // 3072 -> 4096: 33% bigger, fine
  REQUIRE(cache.allocate(0, kStreamA, 512) != b1k);   // 1024 would be 100% bigger: a new block
  REQUIRE(backend.allocs == 4);
  REQUIRE(cache.allocate(0, kStreamA, 1024) == b1k);
}

TEST_CASE("caching allocator: statistics", "[allocator]") {
  FakeBackend backend;
  CachingAllocator cache(backend);
  REQUIRE(cache.stats(0).allocated == 0);
  REQUIRE(cache.stats(7).reserved == 0);  // a device never used

  void* a = cache.allocate(0, kStreamA, 100);      // 512
  void* b = cache.allocate(0, kStreamA, 3 * MiB);  // 4 MiB
  CudaMemoryStats s = cache.stats(0);
  REQUIRE(s.allocated == 512 + 4 * MiB);
  REQUIRE(s.reserved == 512 + 4 * MiB);
  REQUIRE(s.peak_allocated == s.allocated);
  REQUIRE(s.cuda_mallocs == 2);

  cache.free(b);
  s = cache.stats(0);
  REQUIRE(s.allocated == 512);
  REQUIRE(s.reserved == 512 + 4 * MiB);  // the freed block is still cached
  REQUIRE(s.peak_allocated == 512 + 4 * MiB);

  cache.reset_peak(0);
  REQUIRE(cache.stats(0).peak_allocated == 512);

  void* c = cache.allocate(0, kStreamA, 4 * MiB);  // reuses b's block
  REQUIRE(c == b);
  REQUIRE(cache.stats(0).cuda_mallocs == 2);
  REQUIRE(cache.stats(0).peak_allocated == 512 + 4 * MiB);

  cache.free(c);
  cache.free(a);
  REQUIRE(cache.stats(0).allocated == 0);
  REQUIRE(backend.in_use == 512 + 4 * MiB);
  cache.empty_cache();
  REQUIRE(cache.stats(0).reserved == 0);
  REQUIRE(backend.in_use == 0);
  REQUIRE(backend.frees == 2);
  REQUIRE(backend.bad_frees == 0);
}

TEST_CASE("caching allocator: each block is charged to the account of the thread that asked for it",
          "[allocator][memory]") {
  FakeBackend backend;
  CachingAllocator cache(backend);
  auto first = std::make_shared<MemoryAccount>(), second = std::make_shared<MemoryAccount>();
  void *a = nullptr, *b = nullptr, *c = nullptr;
  std::thread([&] {
    const DeviceMemoryScope charged(first);
    a = cache.allocate(0, kStreamA, 100);      // 512
    b = cache.allocate(0, kStreamA, 5 * MiB);  // 6 MiB
  }).join();
  std::thread([&] {
    const DeviceMemoryScope charged(second);
    c = cache.allocate(0, kStreamB, 1000);  // 1024
  }).join();
  void* nobodys = cache.allocate(0, kStreamA, 512);  // this thread has no account
  // The backend's bytes, outside the allocator's bookkeeping: every block is one raw_alloc.
  REQUIRE(backend.in_use == 512 + 6 * MiB + 1024 + 512);
  CHECK(first->allocated() == 512 + 6 * MiB);
  CHECK(second->allocated() == 1024);
  cache.free(b);  // freed by another thread than the one that asked: still the first's block
  CHECK(first->allocated() == 512);
  CHECK(first->peak() == 512 + 6 * MiB);
  // A cached block reused for a smaller request is charged at its own size.
  std::thread([&] {
    const DeviceMemoryScope charged(second);
    first->reset_peak();
    b = cache.allocate(0, kStreamA, 4 * MiB);  // the cached 6 MiB block: 50% bigger at most
  }).join();
  REQUIRE(backend.allocs == 4);  // no new block
  CHECK(second->allocated() == 1024 + 6 * MiB);
  CHECK(first->peak() == 512);
  for (void* p : {a, b, c, nobodys}) cache.free(p);
  CHECK(first->allocated() == 0);
  CHECK(second->allocated() == 0);
  CHECK(second->peak() == 1024 + 6 * MiB);
}

TEST_CASE("caching allocator: empty_cache keeps blocks in use", "[allocator]") {
  FakeBackend backend;
  CachingAllocator cache(backend);
  void* live = cache.allocate(0, kStreamA, 10 * KiB);
  void* cached = cache.allocate(0, kStreamB, 10 * KiB);
  void* other_device = cache.allocate(1, kStreamA, 10 * KiB);
  cache.free(cached);
  cache.free(other_device);

  cache.empty_cache(1);  // only device 1's cache
  REQUIRE(backend.live.count(other_device) == 0);
  REQUIRE(backend.live.count(cached) == 1);

  cache.empty_cache();
  REQUIRE(backend.live.size() == 1);
  REQUIRE(backend.live.count(live) == 1);
  REQUIRE(cache.stats(0).reserved == 10 * KiB);
  REQUIRE(cache.stats(0).allocated == 10 * KiB);
  cache.free(live);
}

TEST_CASE("caching allocator: out of memory frees the cache, retries once, then explains", "[allocator]") {
  FakeBackend backend(10 * MiB);
  CachingAllocator cache(backend);
  // Fill the device: 4 MiB live on stream A, 6 MiB cached on stream B.
  void* live = cache.allocate(0, kStreamA, 4 * MiB);
  void* cached = cache.allocate(0, kStreamB, 6 * MiB);
  cache.free(cached);
  REQUIRE(backend.in_use == 10 * MiB);

  SECTION("the retry after emptying the cache succeeds") {
    void* p = cache.allocate(0, kStreamA, 5 * MiB);  // 6 MiB: fits once the cached block is gone
    REQUIRE(p != nullptr);
    REQUIRE(backend.failures == 1);
    REQUIRE(backend.frees == 1);
    CudaMemoryStats s = cache.stats(0);
    REQUIRE(s.allocated == 10 * MiB);
    REQUIRE(s.reserved == 10 * MiB);
    cache.free(p);
  }
  SECTION("when even that is not enough, the Error says how memory is used") {
    REQUIRE_THROWS_WITH(cache.allocate(0, kStreamA, GiB),
                        "out of memory on cuda:0: tried to allocate 1.00 GiB; 4.00 MiB allocated by tensors, "
                        "4.00 MiB reserved, 6.00 MiB free of 10.00 MiB");
    REQUIRE(backend.failures == 2);  // the first try, and the retry after emptying the cache
    // The allocator is still consistent and usable.
    REQUIRE(cache.stats(0).allocated == 4 * MiB);
    void* p = cache.allocate(0, kStreamA, 1000);
    cache.free(p);
  }
  SECTION("a size no block can hold fails without asking the backend") {
    REQUIRE_THROWS_WITH(cache.allocate(0, kStreamA, size_t(-1)), Catch::Contains("out of memory on cuda:0"));
    REQUIRE(backend.failures == 0);
  }
  cache.free(live);
}

TEST_CASE("caching allocator: a block used on another stream waits for it after the free", "[allocator]") {
  FakeBackend backend;
  CachingAllocator cache(backend);
  void* p = cache.allocate(0, kStreamA, 4096);
  REQUIRE(cache.record_stream(static_cast<char*>(p) + 100, kStreamB));  // an interior pointer is found
  REQUIRE(cache.record_stream(p, kStreamA));  // its own stream: nothing to do
  cache.free(p);
  REQUIRE(backend.live_events() == 1);  // one event, on stream B
  REQUIRE(cache.stats(0).allocated == 0);
  REQUIRE(cache.stats(0).reserved == 4096);

  SECTION("while stream B has not passed the free, the block is not reused") {
    void* q = cache.allocate(0, kStreamA, 4096);
    REQUIRE(q != p);
    backend.finish_stream(kStreamB);
    void* r = cache.allocate(0, kStreamA, 4096);  // collected on this allocation
    REQUIRE(r == p);
    REQUIRE(backend.live_events() == 0);
    cache.free(q);
    cache.free(r);
  }
  SECTION("empty_cache leaves it alone until then") {
    cache.empty_cache();
    REQUIRE(backend.live.count(p) == 1);
    backend.finish_stream(kStreamB);
    cache.empty_cache();
    REQUIRE(backend.live.count(p) == 0);
  }
  SECTION("out of memory waits for it rather than failing") {
    backend.capacity = backend.in_use;  // full: the only free memory is the pending block
    void* q = cache.allocate(0, kStreamA, 4096);
    REQUIRE(backend.waits == 1);
    REQUIRE(q != nullptr);
    cache.free(q);
  }
  SECTION("a live block is recorded once per stream; unknown pointers are refused") {
    void* q = cache.allocate(0, kStreamA, 100);
    REQUIRE(cache.record_stream(q, kStreamB));
    REQUIRE(cache.record_stream(q, kStreamB));
    int elsewhere = 0;
    REQUIRE_FALSE(cache.record_stream(&elsewhere, kStreamB));
    REQUIRE_FALSE(cache.record_stream(static_cast<char*>(q) + 512, kStreamB));  // one past the block
    cache.free(q);
    REQUIRE(backend.live_events() == 2);  // p's and q's
  }
}

TEST_CASE("caching allocator: a graph pool keeps what a capture used until the graph is released",
          "[allocator][graphs]") {
  FakeBackend backend;
  CachingAllocator cache(backend);
  void* before = cache.allocate(0, kStreamA, 1000);  // made before the capture (a warm-up gradient)
  void* idle = cache.allocate(0, kStreamA, 1000);
  cache.free(idle);  // in the ordinary cache

  const CachingAllocator::PoolId pool = cache.begin_graph_pool(0, kStreamA);
  REQUIRE(pool != 0);
  // The capture does not take ordinary cached blocks: a replay would write into memory that eager
  // work is handed later.
  void* in_capture = cache.allocate(0, kStreamA, 1000);
  CHECK(in_capture != idle);
  void* other_stream = cache.allocate(0, kStreamB, 1000);  // another stream is not routed
  cache.free(in_capture);
  CHECK(cache.allocate(0, kStreamA, 1000) == in_capture);  // reused within the capture (same stream order)
  cache.free(before);  // freed during the capture: the captured work may have used it
  CHECK(cache.allocate(0, kStreamA, 1000) == before);      // so it is the graph's now
  cache.free(before);
  cache.end_graph_pool(0, kStreamA);
  CHECK(cache.graph_pool_bytes(pool) == 2 * 1024);

  // After the capture: eager allocations never get the graph's blocks, and empty_cache keeps them.
  void* eager = cache.allocate(0, kStreamA, 1000);
  CHECK(eager == idle);
  void* eager2 = cache.allocate(0, kStreamA, 1000);
  CHECK(eager2 != before);
  CHECK(eager2 != in_capture);
  cache.free(in_capture);  // a tensor from the capture, dropped after it: still the graph's
  CHECK(cache.graph_pool_bytes(pool) == 2 * 1024);
  const int frees_before = backend.frees;
  cache.empty_cache();
  CHECK(backend.frees == frees_before + 0);  // eager/eager2 are live; the graph's are kept
  CHECK(cache.stats(0).reserved >= 5 * 1024);

  // Released: the blocks serve the stream's ordinary allocations again.
  cache.release_graph_pool(pool);
  CHECK(cache.graph_pool_bytes(pool) == 0);
  std::vector<void*> got{cache.allocate(0, kStreamA, 1000), cache.allocate(0, kStreamA, 1000)};
  std::sort(got.begin(), got.end());
  std::vector<void*> graph_blocks{before, in_capture};
  std::sort(graph_blocks.begin(), graph_blocks.end());
  CHECK(got == graph_blocks);
  CHECK(backend.allocs == 5);  // before, idle, in_capture, other_stream, eager2
  for (void* p : got) cache.free(p);
  cache.free(eager);
  cache.free(eager2);
  cache.free(other_stream);
  cache.empty_cache();
  CHECK(backend.in_use == 0);
}

TEST_CASE("caching allocator: graph pools can be shared, and nothing is given back during a capture",
          "[allocator][graphs]") {
  FakeBackend backend(8 * MiB);
  CachingAllocator cache(backend);
  const CachingAllocator::PoolId first = cache.begin_graph_pool(0, kStreamA);
  void* a = cache.allocate(0, kStreamA, 4 * MiB);
  cache.free(a);
  cache.end_graph_pool(0, kStreamA);
  CHECK_THROWS_WITH(cache.begin_graph_pool(0, kStreamA, first + 100), Catch::Contains("does not exist"));
  // A second capture in the same pool reuses the first's memory (graphs replayed in capture order).
  CHECK(cache.begin_graph_pool(0, kStreamA, first) == first);
  CHECK_THROWS_WITH(cache.begin_graph_pool(0, kStreamA), Catch::Contains("already open"));
  CHECK(cache.allocate(0, kStreamA, 4 * MiB) == a);
  // Out of memory while capturing: the ordinary cache is not emptied (cudaFree is not allowed then).
  void* eager = nullptr;
  {
    cache.end_graph_pool(0, kStreamA);
    eager = cache.allocate(0, kStreamB, 2 * MiB);
    cache.free(eager);  // cached for stream B
    CHECK(cache.begin_graph_pool(0, kStreamA, first) == first);
  }
  CHECK_THROWS_WITH(cache.allocate(0, kStreamA, 4 * MiB), Catch::Contains("a CUDA graph is being captured"));
  CHECK(backend.frees == 0);
  cache.end_graph_pool(0, kStreamA);
  cache.free(a);
  cache.release_graph_pool(first);  // one release per begin_graph_pool: three
  cache.release_graph_pool(first);
  CHECK(cache.graph_pool_bytes(first) == 4 * MiB);  // one user left
  cache.release_graph_pool(first);
  CHECK(cache.graph_pool_bytes(first) == 0);
  cache.empty_cache();
  CHECK(backend.in_use == 0);
}

TEST_CASE("caching allocator: freeing an unknown pointer is ignored, not passed on", "[allocator]") {
  FakeBackend backend;
  CachingAllocator cache(backend);
  int not_from_the_allocator = 0;
  cache.free(&not_from_the_allocator);  // prints a warning
  cache.free(nullptr);
  cache.empty_cache();
  REQUIRE(backend.frees == 0);
  REQUIRE(backend.bad_frees == 0);
}

TEST_CASE("caching allocator: many threads allocating and freeing at once", "[allocator]") {
  FakeBackend backend;
  CachingAllocator cache(backend);
  const int kThreads = 4, kRounds = 5000;
  std::atomic<int> overlaps{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng{uint32_t(t)};
      const void* stream = t % 2 ? kStreamA : kStreamB;
      std::vector<void*> mine;
      for (int i = 0; i < kRounds; ++i) {
        if (mine.size() < 8 && rng() % 3 != 0) {
          mine.push_back(cache.allocate(t % 2, stream, size_t(rng() % (3 * MiB))));
        } else if (!mine.empty()) {
          cache.free(mine.back());
          mine.pop_back();
        }
      }
      // No block is ever handed to two holders at once: every pointer held here is unique.
      std::sort(mine.begin(), mine.end());
      if (std::adjacent_find(mine.begin(), mine.end()) != mine.end()) ++overlaps;
      for (void* p : mine) cache.free(p);
    });
  }
  for (auto& th : threads) th.join();
  REQUIRE(overlaps == 0);
  for (int d = 0; d < 2; ++d) {
    CudaMemoryStats s = cache.stats(d);
    REQUIRE(s.allocated == 0);
    size_t on_device = 0;
    for (auto& [p, info] : backend.live)
      if (info.first == d) on_device += info.second;
    REQUIRE(s.reserved == on_device);
  }
  cache.empty_cache();
  REQUIRE(backend.live.empty());
  REQUIRE(backend.bad_frees == 0);
}

TEST_CASE("format_bytes picks a readable unit", "[allocator]") {
  REQUIRE(cuda::format_bytes(100) == "100 bytes");
  REQUIRE(cuda::format_bytes(1536) == "1.50 KiB");
  REQUIRE(cuda::format_bytes(3 * MiB) == "3.00 MiB");
  REQUIRE(cuda::format_bytes(size_t(1.5 * double(GiB))) == "1.50 GiB");
}

// ---- without a GPU ------------------------------------------------------------------------------

TEST_CASE("without a GPU, CUDA entry points throw clear errors and the CPU keeps working", "[allocator][cuda]") {
  if (cuda_device_count() > 0) {
    SUCCEED("a GPU is present: tests/gpu/test_gpu_core.cpp covers this machine");
    return;
  }
  const Device gpu = Device::cuda(0);
  REQUIRE_THROWS_WITH(Stream::create(gpu), Catch::Contains("Stream::create") && Catch::Contains("not available"));
  REQUIRE_THROWS_WITH(Event::create(gpu), Catch::Contains("Event::create") && Catch::Contains("not available"));
  REQUIRE_THROWS_WITH(current_stream(gpu), Catch::Contains("not available"));
  REQUIRE_THROWS_WITH(device_synchronize(gpu), Catch::Contains("not available"));
  REQUIRE_THROWS_AS(Stream::default_for(gpu), Error);

  Tensor x = tensor({1, 2, 3});
  REQUIRE_THROWS_WITH(x.to(gpu), Catch::Contains("to: cannot copy a tensor to cuda:0"));
  REQUIRE_THROWS_WITH(randn({2}, DType::f32, gpu), Catch::Contains("randn: cuda:0 is not available"));
  REQUIRE_THROWS_AS(empty({2}, DType::f32, gpu), Error);

  REQUIRE(cuda_memory_stats(gpu).allocated == 0);
  REQUIRE(cuda_memory_stats(gpu).cuda_mallocs == 0);
  reset_peak_memory(gpu);
  cuda_empty_cache();

  // Undefined handles are refused, not dereferenced.
  Stream undefined;
  REQUIRE_FALSE(undefined.defined());
  REQUIRE_THROWS_AS(undefined.synchronize(), Error);

  // ...and the CPU path never noticed.
  REQUIRE((x * 2).to_vector() == std::vector<double>{2, 4, 6});
}

TEST_CASE("caching allocator: a memory limit counts reserved bytes, and empties the cache before failing",
          "[allocator][limit]") {
  FakeBackend backend(64 * MiB);
  CachingAllocator cache(backend);
  cache.set_memory_limit(0, DeviceMemoryLimit{10 * MiB, 0});
  REQUIRE(cache.memory_limit(0) == 10 * MiB);
  void* a = cache.allocate(0, kStreamA, 4 * MiB);
  void* b = cache.allocate(0, kStreamB, 4 * MiB);  // 8 MiB reserved: under the limit

  SECTION("past it: the Error has the numbers, and the backend, with room to spare, is not asked") {
    REQUIRE_THROWS_WITH(cache.allocate(0, kStreamA, 3 * MiB),
                        "out of memory on cuda:0: tried to allocate 3.00 MiB; 8.00 MiB allocated by tensors, "
                        "8.00 MiB reserved, 56.00 MiB free of 64.00 MiB; that would pass this process's limit of "
                        "10.00 MiB (set_memory_limit)");
    REQUIRE(backend.allocs == 2);
    REQUIRE(backend.failures == 0);
    REQUIRE(cache.stats(0).reserved == 8 * MiB);
  }
  SECTION("cached blocks count, and are given back when a request would pass the limit") {
    cache.free(b);  // cached on stream B: still reserved
    REQUIRE(cache.stats(0).reserved == 8 * MiB);
    // 6 MiB on stream A cannot reuse B's block; 8 + 6 > 10, but 4 + 6 fits once the cache is gone.
    void* c = cache.allocate(0, kStreamA, 6 * MiB);
    REQUIRE(backend.frees == 1);
    REQUIRE(cache.stats(0).reserved == 10 * MiB);
    REQUIRE(cache.stats(0).allocated == 10 * MiB);
    cache.free(c);
    b = nullptr;
  }
  SECTION("the thread's memory context is appended, read without the allocator's lock") {
    // The context reads the allocator's statistics, as the trainer's does: under the lock it would deadlock.
    const MemoryContextScope context([&] { return "rank 2: in use " + cuda::format_bytes(cache.stats(0).allocated); });
    REQUIRE_THROWS_WITH(cache.allocate(0, kStreamA, 3 * MiB), Catch::EndsWith("(set_memory_limit)\nrank 2: in use 8.00 MiB"));
  }
  SECTION("none() lifts it") {
    cache.set_memory_limit(0, DeviceMemoryLimit{});
    REQUIRE(cache.memory_limit(0) == 0);
    cache.free(cache.allocate(0, kStreamA, 20 * MiB));
  }
  cache.free(a);
  cache.free(b);
}

TEST_CASE("caching allocator: a fraction of the device, and the default for devices without their own",
          "[allocator][limit]") {
  FakeBackend backend(64 * MiB);
  CachingAllocator cache(backend);
  cache.set_default_memory_limit(DeviceMemoryLimit{0, 0.125}, "BRIGADE_CUDA_MEMORY_LIMIT");
  cache.set_memory_limit(0, DeviceMemoryLimit{0, 0.25});
  REQUIRE(cache.memory_limit(0) == 16 * MiB);  // its own: 0.25 of 64 MiB
  REQUIRE(cache.memory_limit(1) == 8 * MiB);   // the default's 0.125
  REQUIRE_THROWS_WITH(cache.allocate(1, kStreamA, 9 * MiB),
                      Catch::EndsWith("limit of 8.00 MiB (BRIGADE_CUDA_MEMORY_LIMIT)"));
  cache.free(cache.allocate(0, kStreamA, 9 * MiB));
}

TEST_CASE("memory limits: sizes, fractions, and bad values named", "[allocator][limit]") {
  auto bytes = [](const char* text) { return parse_memory_limit("X", text).bytes; };
  auto fraction = [](const char* text) { return parse_memory_limit("X", text).fraction; };
  REQUIRE(bytes("12GiB") == 12 * GiB);
  REQUIRE(bytes("512MiB") == 512 * MiB);
  REQUIRE(bytes("1.5GB") == size_t(1500000000));
  REQUIRE(bytes("4096") == 4096);
  REQUIRE(fraction("0.25") == 0.25);
  REQUIRE(fraction("1") == 1.0);
  REQUIRE(parse_memory_limit("X", "0.25").str() == "0.25 of the device");
  REQUIRE(parse_memory_limit("X", "512MiB").str() == "512.00 MiB");
  for (const char* bad : {"", "lots", "0", "-0.5", "1.5", "12 GiB", "0.5GiB0", "nan", "inf", "0B"})
    REQUIRE_THROWS_WITH(parse_memory_limit(kCudaMemoryLimitVariable, bad),
                        std::string("BRIGADE_CUDA_MEMORY_LIMIT: expected a size such as 512MiB, 12GiB or 1.5GB, or a "
                                    "fraction of the device in (0, 1] such as 0.25; got '") + bad + "'");
  // A fraction needs the device's size.
  REQUIRE_THROWS_WITH(DeviceMemoryLimit({0, 0.5}).resolve(0, "X"), Catch::Contains("X: a limit of 0.5 of the device"));
}
