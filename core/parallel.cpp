#include "core/parallel.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <utility>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "core/host_memory.h"

namespace brigade {
namespace {

// A fixed pool. run() hands every worker the same job; each worker claims chunk indices from an
// atomic-free counter under the mutex (chunks are coarse, so the lock is cheap).
class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 0; i + 1 < threads; ++i) workers_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int size() const { return int(workers_.size()) + 1; }

  // Runs chunk(i) for i in [0, chunks) on the pool and the calling thread; returns when all are done.
  // An exception from any chunk is rethrown here, after every chunk has finished (so no worker is
  // still using the caller's stack).
  void run(int64_t chunks, const std::function<void(int64_t)>& chunk) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &chunk;
      total_ = chunks;
      next_ = 0;
      done_ = 0;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    work();
    std::unique_lock<std::mutex> lock(mu_);
    finished_.wait(lock, [&] { return done_ == total_; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      work();
    }
  }
  void work() {
    for (;;) {
      int64_t i;
      const std::function<void(int64_t)>* job;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (job_ == nullptr || next_ >= total_) return;
        i = next_++;
        job = job_;
      }
      std::exception_ptr error;
      try {
        (*job)(i);
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (error && !error_) error_ = error;
      if (++done_ == total_) finished_.notify_all();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, finished_;
  const std::function<void(int64_t)>* job_ = nullptr;
  std::exception_ptr error_;
  int64_t total_ = 0, next_ = 0, done_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

int default_threads() {
  if (const char* env = std::getenv("BRIGADE_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n >= 1) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

thread_local bool t_inside_parallel = false;  // nested calls run serially (and never re-lock)
std::mutex g_pool_owner;  // held by the one parallel_for that currently uses the pool
int g_threads = default_threads();

Pool& pool() {
  static Pool p(g_threads);
  return p;
}

}  // namespace

int num_threads() { return g_threads; }

void set_num_threads(int n) { g_threads = std::max(1, n); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int threads = std::min<int>(g_threads, pool().size());
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
  if (chunks <= 1 || t_inside_parallel) {
    body(0, n);
    return;
  }
  std::unique_lock<std::mutex> owner(g_pool_owner, std::try_to_lock);
  if (!owner.owns_lock()) {
    body(0, n);
    return;
  }
  int64_t per = (n + chunks - 1) / chunks;
  // What the workers allocate belongs to the caller's account (core/host_memory.h), as if it ran here.
  const std::shared_ptr<HostMemoryAccount> account = current_host_memory_account();
  pool().run(chunks, [&](int64_t c) {
    const HostMemoryScope charged_to_caller(account);
    int64_t begin = c * per, end = std::min(n, begin + per);
    struct InsideGuard {  // restores the flag even when body throws
      bool was = t_inside_parallel;
      InsideGuard() { t_inside_parallel = true; }
      ~InsideGuard() { t_inside_parallel = was; }
    } inside;
    if (begin < end) body(begin, end);
  });
}

}  // namespace brigade
