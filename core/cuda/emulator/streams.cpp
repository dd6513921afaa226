// The CUDA emulator's streams and events: a queue and a worker thread per stream (see streams.h).
//
// Everything lives under one mutex. That keeps the bookkeeping obviously consistent (issue order,
// clocks, completion counts) and costs little: the lock is held for queue operations only, never
// while work runs. Streams are never freed (the pool in core/cuda/stream.cpp never destroys them
// either), so a raw handle stays valid for clocks and messages after cudaStreamDestroy.
#include "core/cuda/emulator/streams.h"

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>
#include <thread>

namespace brigade::emu {
namespace {

struct StreamState;

// One piece of work: it waits for other streams' points (events, the legacy stream's implicit
// ordering) and then runs.
struct Item {
  uint64_t seq = 0;
  std::vector<std::pair<const StreamState*, uint64_t>> waits;
  std::string what;
  std::function<std::string()> work;  // empty for a pure wait or an event mark
  std::shared_ptr<struct Mark> stamp;   // an event whose completion time this item records
  Clock after;                          // more that is ordered before it (an event's point)
};

struct StreamState {
  int id = 0;
  int device = 0;
  bool blocking = false;  // ordered with the legacy default stream
  bool legacy = false;
  bool retired = false;
  std::string name;
  std::deque<Item> queue;
  uint64_t issued = 0, completed = 0;
  Clock clock;  // what is ordered before this stream's next item
  bool worker_running = false;
  std::string running;  // what the worker runs or waits for now, for hang reports
  std::condition_variable has_work;
};

// A point of a stream, as an event marks it.
struct Mark {
  const StreamState* stream = nullptr;
  uint64_t seq = 0;
  Clock clock;
  std::chrono::steady_clock::time_point when{};
};

}  // namespace

struct EmulatedEvent {
  int device = 0;
  bool timing = true;
  std::shared_ptr<Mark> mark;  // null until recorded
};

namespace {

struct Engine {
  std::mutex mutex;
  std::condition_variable progress;  // some item completed
  std::vector<StreamState*> streams;  // by id
  std::vector<StreamState*> legacy;   // by device
  Clock host;                         // what the host has seen complete
  std::deque<std::pair<cudaError_t, std::string>> errors;
  const bool synchronous = [] {
    const char* mode = std::getenv("BRIGADE_EMULATOR_STREAMS");
    return mode != nullptr && std::string(mode) == "sync";
  }();
};

Engine& engine() {
  static Engine* e = new Engine;  // never destroyed: workers and exit-time frees may still use it
  return *e;
}

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

StreamState* resolve(Engine& e, cudaStream_t stream) {
  if (stream != nullptr) return reinterpret_cast<StreamState*>(stream);
  const int device = current_device();
  if (e.legacy.size() <= size_t(device)) e.legacy.resize(size_t(device) + 1, nullptr);
  StreamState*& l = e.legacy[size_t(device)];
  if (l == nullptr) l = add_stream(e, device, true, true);
  return l;
}

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

// Where an item went: its stream, its sequence number there, and the clock of that point.
struct Issued {
  StreamState* stream;
  uint64_t seq;
  Clock clock;
};

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

// Issues `item` and lets it run: on the worker, or (synchronous mode) right here.
Issued submit(cudaStream_t stream, Item item, const std::vector<Access>& accesses, std::string* races) {
  Engine& e = engine();
  std::unique_lock<std::mutex> lock(e.mutex);
  StreamState* s = resolve(e, stream);
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

// The host has waited for `s` up to `seq`, whose clock was `clock`: it now knows all that finished.
void host_saw(Engine& e, const Clock& clock) { merge_into(e.host, clock); }

void wait_for_stream_point(Engine& e, std::unique_lock<std::mutex>& lock, StreamState* s, uint64_t seq) {
  ensure_worker(s);
  wait_until(e, lock, "the host, waiting for " + s->name, [&] { return s->completed >= seq; });
}

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

void enqueue(cudaStream_t stream, std::string what, std::vector<Access> accesses, std::function<std::string()> work) {
  std::string races;
  Item item;
  item.what = std::move(what);
  item.work = std::move(work);
  (void)submit(stream, std::move(item), accesses, &races);
  if (!races.empty()) report_race(races);
}

void run_and_wait(cudaStream_t stream, std::string what, std::vector<Access> accesses,
                  std::function<std::string()> work) {
  std::string races;
  Item item;
  item.what = std::move(what);
  item.work = std::move(work);
  const Issued issued = submit(stream, std::move(item), accesses, &races);
  if (!races.empty()) report_race(races);
  Engine& e = engine();
  std::unique_lock<std::mutex> lock(e.mutex);
  wait_for_stream_point(e, lock, issued.stream, issued.seq);
  host_saw(e, issued.clock);
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

// ---- events ------------------------------------------------------------------------------------------

cudaEvent_t make_event(int device, bool timing) {
  auto* event = new EmulatedEvent;
  event->device = device;
  event->timing = timing;
  return reinterpret_cast<cudaEvent_t>(event);
}

// cudaEventDestroy may be called before the event completes; the mark lives on in its item.
void delete_event(cudaEvent_t event) { delete reinterpret_cast<EmulatedEvent*>(event); }

int event_device(cudaEvent_t event) { return reinterpret_cast<const EmulatedEvent*>(event)->device; }

void record_event(cudaEvent_t event, cudaStream_t stream) {
  auto* ev = reinterpret_cast<EmulatedEvent*>(event);
  auto mark = std::make_shared<Mark>();
  Item item;
  item.what = "cudaEventRecord";
  item.stamp = mark;
  std::string unused;
  Issued issued = submit(stream, std::move(item), {}, &unused);
  mark->stream = issued.stream;
  mark->seq = issued.seq;
  mark->clock = std::move(issued.clock);
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  ev->mark = std::move(mark);  // a later record replaces the point (cudaEventRecord)
}

// The event's current point (record_event may replace it from another thread).
static std::shared_ptr<Mark> mark_of(cudaEvent_t event) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  return reinterpret_cast<const EmulatedEvent*>(event)->mark;
}

void wait_for_event(cudaStream_t stream, cudaEvent_t event) {
  std::shared_ptr<Mark> mark = mark_of(event);
  if (!mark) return;  // waiting for a never-recorded event is a no-op
  Item item;
  item.what = "cudaStreamWaitEvent";
  item.waits.emplace_back(mark->stream, mark->seq);
  item.after = mark->clock;
  std::string unused;
  (void)submit(stream, std::move(item), {}, &unused);
}

bool event_done(cudaEvent_t event) {
  std::shared_ptr<Mark> mark = mark_of(event);
  if (!mark) return true;
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  if (mark->stream->completed < mark->seq) return false;
  host_saw(e, mark->clock);
  return true;
}

void synchronize_event(cudaEvent_t event) {
  std::shared_ptr<Mark> mark = mark_of(event);
  if (!mark) return;
  Engine& e = engine();
  std::unique_lock<std::mutex> lock(e.mutex);
  wait_for_stream_point(e, lock, const_cast<StreamState*>(mark->stream), mark->seq);
  host_saw(e, mark->clock);
}

std::string elapsed_ms(cudaEvent_t start, cudaEvent_t end, float* ms) {
  const auto* a = reinterpret_cast<const EmulatedEvent*>(start);
  const auto* b = reinterpret_cast<const EmulatedEvent*>(end);
  if (!a->timing || !b->timing) return "an event was created with cudaEventDisableTiming";
  const std::shared_ptr<Mark> from = mark_of(start), to = mark_of(end);
  if (!from || !to) return "an event was never recorded";
  if (!event_done(start) || !event_done(end)) return "not ready";
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  *ms = std::chrono::duration<float, std::milli>(to->when - from->when).count();
  return "";
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
