// The CUDA emulator's streams: a queue and a worker thread per stream (see streams.h). Events are in
// events.cpp, stream capture in stream_capture.cpp.
//
// Everything lives under one mutex. That keeps the bookkeeping obviously consistent (issue order,
// clocks, completion counts) and costs little: the lock is held for queue operations only, never
// while work runs. Streams are never freed (the pool in core/cuda/stream.cpp never destroys them
// either), so a raw handle stays valid for clocks and messages after cudaStreamDestroy.
#include "emulator/streams_internal.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include "emulator/launch_counts.h"

namespace brigade::emu {

Engine& engine() {
  static Engine* e = new Engine;  // never destroyed: workers and exit-time frees may still use it
  return *e;
}

namespace {

void merge_into(Clock& into, const Clock& from) { merge(into, from); }

StreamState* add_stream(Engine& e, int device, bool blocking, bool legacy) {
  auto* s = new StreamState;
  s->id = int(e.streams.size());
  s->device = device;
  s->blocking = blocking;
  s->legacy = legacy;
  s->name = legacy ? "the legacy default stream of device " + std::to_string(device)
                   : "stream " + std::to_string(s->id) + " (device " + std::to_string(device) + ")";
  e.streams.push_back(s);
  return s;
}

}  // namespace

StreamState* resolve(Engine& e, cudaStream_t stream) {
  if (stream != nullptr) return reinterpret_cast<StreamState*>(stream);
  const int device = current_device();
  if (e.legacy.size() <= size_t(device)) e.legacy.resize(size_t(device) + 1, nullptr);
  StreamState*& l = e.legacy[size_t(device)];
  if (l == nullptr) l = add_stream(e, device, true, true);
  return l;
}

namespace {

// How long a host wait may take before the emulator says what every stream is doing (a GPU that
// waits forever shows nothing; here a stuck test at least explains itself in its log).
std::chrono::seconds hang_report_after() {
  static const long seconds = [] {
    const char* env = std::getenv("BRIGADE_EMULATOR_HANG_SECONDS");
    return env ? std::atol(env) : 120L;
  }();
  return std::chrono::seconds(seconds);
}

void report_hang(Engine& e, const std::string& waiter) {
  std::string text = "brigade CUDA emulator: " + waiter + " has waited " +
                     std::to_string(hang_report_after().count()) + " s; the streams:\n";
  for (const StreamState* s : e.streams)
    if (s->completed < s->issued)
      text += "  " + s->name + ": " + std::to_string(s->issued - s->completed) + " item(s) pending, now: " +
              (s->running.empty() ? "(idle worker)" : s->running) + "\n";
  std::fputs(text.c_str(), stderr);
}

// Blocks (with `lock` held on entry and exit) until `done` holds; says what is stuck after a while.
template <class Done>
void wait_until(Engine& e, std::unique_lock<std::mutex>& lock, const std::string& waiter, Done done) {
  const auto report_at = std::chrono::steady_clock::now() + hang_report_after();
  bool reported = false;
  while (!done()) {
    if (reported) {
      e.progress.wait(lock);
    } else if (e.progress.wait_until(lock, report_at) == std::cv_status::timeout && !done()) {
      report_hang(e, waiter);
      reported = true;
    }
  }
}

void run_worker(StreamState* s);

void ensure_worker(StreamState* s) {
  if (s->worker_running || s->queue.empty()) return;
  s->worker_running = true;
  std::thread(run_worker, s).detach();
}

// Runs an item's work outside the lock and marks it complete.
void finish(Engine& e, std::unique_lock<std::mutex>& lock, StreamState* s, Item& item) {
  std::string error;
  if (item.work) {
    lock.unlock();
    try {
      error = item.work();
    } catch (const std::exception& ex) {
      error = ex.what();
    }
    lock.lock();
  }
  if (item.stamp) item.stamp->when = std::chrono::steady_clock::now();
  if (!error.empty()) e.errors.emplace_back(cudaErrorLaunchFailure, "CUDA emulator: " + item.what + ": " + error);
  s->completed = std::max(s->completed, item.seq);
  s->running.clear();
  e.progress.notify_all();
}

void wait_for_points(Engine& e, std::unique_lock<std::mutex>& lock, StreamState* s, const Item& item) {
  for (const auto& [other, seq] : item.waits) {
    if (other->completed >= seq) continue;
    s->running = item.what + " (waiting for " + other->name + " to reach item " + std::to_string(seq) + ")";
    wait_until(e, lock, s->name, [&, other = other, seq = seq] { return other->completed >= seq; });
  }
}

void run_worker(StreamState* s) {
  Engine& e = engine();
  cudaSetDevice(s->device);  // work such as a kernel's pointer checks asks for the current device
  std::unique_lock<std::mutex> lock(e.mutex);
  for (;;) {
    s->has_work.wait(lock, [&] { return !s->queue.empty() || s->retired; });
    if (s->queue.empty()) break;  // retired and drained
    Item item = std::move(s->queue.front());
    s->queue.pop_front();
    wait_for_points(e, lock, s, item);
    s->running = item.what;
    finish(e, lock, s, item);
  }
  s->worker_running = false;
}

// Puts an item at the end of `s` (lock held); `races` gets any race report.
Issued issue(Engine& e, StreamState* s, Item item, const std::vector<Access>& accesses, std::string* races) {
  // The legacy default stream and blocking streams wait for each other (CUDA Runtime API,
  // "Stream synchronization behavior": legacy default stream).
  if (s->legacy) {
    for (StreamState* other : e.streams)
      if (other->blocking && !other->legacy && other->device == s->device && other->issued > other->completed) {
        item.waits.emplace_back(other, other->issued);
        merge_into(s->clock, other->clock);
      }
  } else if (s->blocking) {
    const StreamState* l = resolve(e, nullptr);
    if (l->device == s->device && l->issued > l->completed) {
      item.waits.emplace_back(l, l->issued);
      merge_into(s->clock, l->clock);
    }
  }
  merge_into(s->clock, e.host);  // whatever the host saw finish is ordered before this
  merge_into(s->clock, item.after);
  item.seq = ++s->issued;
  if (s->clock.size() <= size_t(s->id)) s->clock.resize(size_t(s->id) + 1, 0);
  s->clock[size_t(s->id)] = item.seq;
  if (!accesses.empty() && races_checked())
    *races = check_races(s->id, s->name, item.seq, s->clock, item.what, accesses);
  Issued issued{s, item.seq, s->clock};
  s->queue.push_back(std::move(item));
  return issued;
}

}  // namespace

Issued submit(cudaStream_t stream, Item item, const std::vector<Access>& accesses, std::string* races) {
  Engine& e = engine();
  std::unique_lock<std::mutex> lock(e.mutex);
  StreamState* s = resolve(e, stream);
  if (s->capture) return capture_item(s, std::move(item), accesses);
  if (const cudaError_t c = legacy_conflict_locked(e, s, item.what); c != cudaSuccess) return Issued{s, 0, {}, c};
  Issued issued = issue(e, s, std::move(item), accesses, races);
  if (!e.synchronous) {
    ensure_worker(s);
    s->has_work.notify_one();
    return issued;
  }
  Item now = std::move(s->queue.back());
  s->queue.pop_back();
  wait_for_points(e, lock, s, now);
  finish(e, lock, s, now);
  return issued;
}

void host_saw(Engine& e, const Clock& clock) { merge_into(e.host, clock); }

void wait_for_stream_point(Engine& e, std::unique_lock<std::mutex>& lock, StreamState* s, uint64_t seq) {
  ensure_worker(s);
  wait_until(e, lock, "the host, waiting for " + s->name, [&] { return s->completed >= seq; });
}

namespace {

// After fork() only the forking thread exists: workers are restarted on demand in the child, and
// the lock (held across the fork so no worker was mid-update) is released on both sides.
void before_fork() { engine().mutex.lock(); }
void after_fork_parent() { engine().mutex.unlock(); }
void after_fork_child() {
  Engine& e = engine();
  for (StreamState* s : e.streams) {
    s->worker_running = false;
    new (&s->has_work) std::condition_variable();
  }
  new (&e.progress) std::condition_variable();
  e.mutex.unlock();
}
[[maybe_unused]] const bool fork_handlers = (pthread_atfork(before_fork, after_fork_parent, after_fork_child), true);

}  // namespace

// ---- runtime.h -------------------------------------------------------------------------------------

cudaError_t enqueue(cudaStream_t stream, std::string what, std::vector<Access> accesses,
                    std::function<std::string()> work) {
  std::string races;
  Item item;
  item.what = what;
  item.work = std::move(work);
  const Issued issued = submit(stream, std::move(item), accesses, &races);
  if (!races.empty()) report_race(races);
  if (issued.status == cudaSuccess && !issued.captured) count_issued(what);
  return issued.status;
}

cudaError_t run_and_wait(cudaStream_t stream, std::string what, std::vector<Access> accesses,
                         std::function<std::string()> work) {
  {
    // The host cannot wait for work that is only being recorded.
    Engine& e = engine();
    std::lock_guard<std::mutex> lock(e.mutex);
    StreamState* s = resolve(e, stream);
    if (s->capture)
      return conflict(*s->capture, cudaErrorStreamCaptureUnsupported, what,
                      "a call that waits for its own work cannot run on a capturing stream");
  }
  std::string races;
  Item item;
  item.what = what;
  item.work = std::move(work);
  const Issued issued = submit(stream, std::move(item), accesses, &races);
  if (!races.empty()) report_race(races);
  if (issued.status != cudaSuccess) return issued.status;
  count_issued(what);
  count_host_sync(what);
  Engine& e = engine();
  std::unique_lock<std::mutex> lock(e.mutex);
  wait_for_stream_point(e, lock, issued.stream, issued.seq);
  host_saw(e, issued.clock);
  return cudaSuccess;
}

// ---- streams -----------------------------------------------------------------------------------------

cudaStream_t make_stream(int device, bool blocking) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  return reinterpret_cast<cudaStream_t>(add_stream(e, device, blocking, false));
}

void retire_stream(cudaStream_t stream) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  StreamState* s = resolve(e, stream);
  s->retired = true;
  s->has_work.notify_one();
}

int device_of(cudaStream_t stream) {
  return stream ? reinterpret_cast<const StreamState*>(stream)->device : current_device();
}

bool stream_idle(cudaStream_t stream) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  StreamState* s = resolve(e, stream);
  if (s->completed < s->issued) return false;
  host_saw(e, s->clock);
  return true;
}

void synchronize_stream(cudaStream_t stream) {
  Engine& e = engine();
  std::unique_lock<std::mutex> lock(e.mutex);
  StreamState* s = resolve(e, stream);
  const Clock clock = s->clock;
  wait_for_stream_point(e, lock, s, s->issued);
  host_saw(e, clock);
}

void synchronize_device(int device) {
  Engine& e = engine();
  std::unique_lock<std::mutex> lock(e.mutex);
  for (size_t i = 0; i < e.streams.size(); ++i) {  // by index: waiting may let streams be added
    StreamState* s = e.streams[i];
    if (device >= 0 && s->device != device) continue;
    const Clock clock = s->clock;
    wait_for_stream_point(e, lock, s, s->issued);
    host_saw(e, clock);
  }
}

bool take_async_error(cudaError_t* code, std::string* message) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  if (e.errors.empty()) return false;
  *code = e.errors.front().first;
  *message = std::move(e.errors.front().second);
  e.errors.pop_front();
  return true;
}

}  // namespace brigade::emu
