// The CUDA emulator's streams and events: a queue and a worker thread per stream (see streams.h).
//
// Everything lives under one mutex. That keeps the bookkeeping obviously consistent (issue order,
// clocks, completion counts) and costs little: the lock is held for queue operations only, never
// while work runs. Streams are never freed (the pool in core/cuda/stream.cpp never destroys them
// either), so a raw handle stays valid for clocks and messages after cudaStreamDestroy.
#include "emulator/streams.h"

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

// A capture sequence (cudaStreamBeginCapture .. cudaStreamEndCapture): while a stream captures,
// what is issued to it is recorded as graph nodes instead of running.
struct Capture {
  unsigned long long id = 0;
  const StreamState* origin = nullptr;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;  // the thread that began it
  std::string invalidated;  // why the sequence was invalidated; "" while it is valid
  std::shared_ptr<GraphNodes> nodes = std::make_shared<GraphNodes>();
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
  std::shared_ptr<Capture> capture;  // set while the stream captures
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
  // Set when last recorded in a capturing stream: the event then marks a point of that capture
  // sequence, not of any stream's work (host waits on it are errors; see capture_conflict_event).
  std::shared_ptr<Capture> captured;
};

namespace {

struct Engine {
  std::mutex mutex;
  std::condition_variable progress;  // some item completed
  std::vector<StreamState*> streams;  // by id
  std::vector<StreamState*> legacy;   // by device
  Clock host;                         // what the host has seen complete
  std::deque<std::pair<cudaError_t, std::string>> errors;
  std::vector<std::shared_ptr<Capture>> captures;  // the ongoing capture sequences
  unsigned long long next_capture_id = 1;
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
  uint64_t seq = 0;
  Clock clock;
  cudaError_t status = cudaSuccess;  // not issued: why (a capture rule was broken)
  bool captured = false;             // recorded as a graph node instead of issued
};

// ---- capture rules (the CUDA Programming Guide's "Prohibited and Unhandled Operations") ----

// Ends `c` as invalid: further work on its stream fails, and cudaStreamEndCapture returns no graph.
void invalidate(Capture& c, const std::string& why) {
  if (c.invalidated.empty()) c.invalidated = why;
}

// A call that conflicts with capture `c`: invalidates it and reports `code` with the reason.
cudaError_t conflict(Capture& c, cudaError_t code, const std::string& call, const std::string& why) {
  const std::string text = call + ": " + why + " (capture sequence " + std::to_string(c.id) + " of " +
                           c.origin->name + " is invalidated)";
  invalidate(c, text);
  return report_error(code, "CUDA emulator: " + text);
}

// Using the legacy default stream while a blocking stream of its device captures would make it
// depend on the capture: cudaErrorStreamCaptureImplicit, and the capture is invalidated — except
// for a query (`invalidates` false): cudaStreamIsCapturing's documentation says that call reports
// the error and "the blocking stream capture is not invalidated".
cudaError_t legacy_conflict_locked(Engine& e, const StreamState* s, const std::string& call, bool invalidates = true) {
  if (!s->legacy) return cudaSuccess;
  const char* why = "the legacy default stream is unusable while a blocking stream of its device captures";
  for (const std::shared_ptr<Capture>& c : e.captures) {
    if (!c->origin->blocking || c->origin->device != s->device) continue;
    if (invalidates) return conflict(*c, cudaErrorStreamCaptureImplicit, call, why);
    return report_error(cudaErrorStreamCaptureImplicit, "CUDA emulator: " + call + ": " + why +
                                                            " (capture sequence " + std::to_string(c->id) + " of " +
                                                            c->origin->name + " goes on)");
  }
  return cudaSuccess;
}

// Records `item` into the capture of `s` (lock held).
Issued capture_item(StreamState* s, Item item, const std::vector<Access>& accesses) {
  Capture& c = *s->capture;
  Issued issued{s, 0, {}, cudaSuccess, true};
  if (!c.invalidated.empty()) {
    issued.status = report_error(cudaErrorStreamCaptureInvalidated,
                                 "CUDA emulator: " + item.what + " on " + s->name +
                                     ", whose capture sequence was invalidated earlier: " + c.invalidated);
    return issued;
  }
  if (item.work) c.nodes->push_back(GraphNode{item.what, accesses, std::move(item.work)});
  return issued;
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

// Issues `item` and lets it run: on the worker, or (synchronous mode) right here.
// A stream that captures records the item instead (capture_item).
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

cudaError_t enqueue(cudaStream_t stream, std::string what, std::vector<Access> accesses,
                    std::function<std::string()> work) {
  std::string races;
  Item item;
  item.what = std::move(what);
  item.work = std::move(work);
  const Issued issued = submit(stream, std::move(item), accesses, &races);
  if (!races.empty()) report_race(races);
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
  item.what = std::move(what);
  item.work = std::move(work);
  const Issued issued = submit(stream, std::move(item), accesses, &races);
  if (!races.empty()) report_race(races);
  if (issued.status != cudaSuccess) return issued.status;
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

cudaError_t record_event(cudaEvent_t event, cudaStream_t stream) {
  auto* ev = reinterpret_cast<EmulatedEvent*>(event);
  {
    Engine& e = engine();
    std::lock_guard<std::mutex> lock(e.mutex);
    StreamState* s = resolve(e, stream);
    if (s->capture) {  // the event now marks a point of the capture sequence
      ev->mark.reset();
      ev->captured = s->capture;
      return cudaSuccess;
    }
    ev->captured.reset();
  }
  auto mark = std::make_shared<Mark>();
  Item item;
  item.what = "cudaEventRecord";
  item.stamp = mark;
  std::string unused;
  Issued issued = submit(stream, std::move(item), {}, &unused);
  if (issued.status != cudaSuccess) return issued.status;
  mark->stream = issued.stream;
  mark->seq = issued.seq;
  mark->clock = std::move(issued.clock);
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  ev->mark = std::move(mark);  // a later record replaces the point (cudaEventRecord)
  return cudaSuccess;
}

// The event's current point (record_event may replace it from another thread).
static std::shared_ptr<Mark> mark_of(cudaEvent_t event) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  return reinterpret_cast<const EmulatedEvent*>(event)->mark;
}

cudaError_t wait_for_event(cudaStream_t stream, cudaEvent_t event) {
  {
    Engine& e = engine();
    std::lock_guard<std::mutex> lock(e.mutex);
    const auto* ev = reinterpret_cast<const EmulatedEvent*>(event);
    StreamState* s = resolve(e, stream);
    const char* call = "cudaStreamWaitEvent";
    if (ev->captured) {
      Capture& c = *ev->captured;
      if (s->capture == ev->captured) return cudaSuccess;  // one stream: already in order
      if (s->capture)
        return conflict(*s->capture, cudaErrorStreamCaptureMerge, call,
                        "the event was recorded in another capture sequence (" + std::to_string(c.id) + ")");
      // CUDA lets the waiting stream join the capture (a fork); the emulator captures one stream.
      return conflict(c, cudaErrorStreamCaptureUnsupported, call,
                      s->name + " waits for an event recorded in a capture: capturing more than one stream "
                      "is not modelled by the emulator");
    }
    if (s->capture && ev->mark)
      return conflict(*s->capture, cudaErrorStreamCaptureIsolation, call,
                      "the event was recorded outside the capture sequence: a dependency across its boundary");
    if (const cudaError_t c = legacy_conflict_locked(e, s, call); c != cudaSuccess) return c;
  }
  std::shared_ptr<Mark> mark = mark_of(event);
  if (!mark) return cudaSuccess;  // waiting for a never-recorded event is a no-op
  Item item;
  item.what = "cudaStreamWaitEvent";
  item.waits.emplace_back(mark->stream, mark->seq);
  item.after = mark->clock;
  std::string unused;
  return submit(stream, std::move(item), {}, &unused).status;
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

// ---- stream capture ------------------------------------------------------------------------------------

namespace {
// cudaThreadExchangeStreamCaptureMode's per-thread mode.
thread_local cudaStreamCaptureMode thread_capture_mode = cudaStreamCaptureModeGlobal;
}  // namespace

cudaError_t begin_capture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  const char* call = "cudaStreamBeginCapture";
  if (stream == nullptr)
    return report_error(cudaErrorStreamCaptureUnsupported,
                        std::string("CUDA emulator: ") + call + ": the legacy default stream cannot capture");
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed)
    return report_error(cudaErrorInvalidValue, std::string("CUDA emulator: ") + call + ": unknown capture mode " +
                                                   std::to_string(int(mode)));
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  StreamState* s = resolve(e, stream);
  if (s->capture)
    return report_error(cudaErrorInvalidValue,
                        std::string("CUDA emulator: ") + call + ": " + s->name + " is already capturing");
  auto c = std::make_shared<Capture>();
  c->id = e.next_capture_id++;
  c->origin = s;
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  s->capture = c;
  e.captures.push_back(std::move(c));
  return cudaSuccess;
}

cudaError_t end_capture(cudaStream_t stream, std::shared_ptr<const GraphNodes>* nodes) {
  const std::string call = "CUDA emulator: cudaStreamEndCapture: ";
  *nodes = nullptr;
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  StreamState* s = resolve(e, stream);
  if (!s->capture || s->capture->origin != s)
    return report_error(cudaErrorStreamCaptureUnmatched, call + "no capture was begun on " + s->name);
  const std::shared_ptr<Capture> c = s->capture;
  if (c->mode != cudaStreamCaptureModeRelaxed && c->thread != std::this_thread::get_id())
    return report_error(cudaErrorStreamCaptureWrongThread,
                        call + "the capture was begun on another thread (and not in relaxed mode)");
  s->capture.reset();
  e.captures.erase(std::find(e.captures.begin(), e.captures.end(), c));
  if (!c->invalidated.empty())
    return report_error(cudaErrorStreamCaptureInvalidated, call + "the capture was invalidated: " + c->invalidated);
  *nodes = c->nodes;
  return cudaSuccess;
}

cudaStreamCaptureStatus capture_status(cudaStream_t stream, unsigned long long* id) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  const StreamState* s = resolve(e, stream);
  if (!s->capture) return cudaStreamCaptureStatusNone;
  if (id) *id = s->capture->id;
  return s->capture->invalidated.empty() ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusInvalidated;
}

cudaError_t check_legacy_use(cudaStream_t stream, const char* call) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  return legacy_conflict_locked(e, resolve(e, stream), call);
}

cudaError_t check_legacy_query(cudaStream_t stream, const char* call) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  return legacy_conflict_locked(e, resolve(e, stream), call, false);
}

cudaError_t refuse_if_capturing(cudaStream_t stream, const std::string& call, const std::string& why) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  StreamState* s = resolve(e, stream);
  return s->capture ? conflict(*s->capture, cudaErrorStreamCaptureUnsupported, call, why) : cudaSuccess;
}

cudaStreamCaptureMode exchange_capture_mode(cudaStreamCaptureMode mode) {
  std::swap(mode, thread_capture_mode);
  return mode;
}

cudaError_t check_unsafe_call(const char* call) {
  const cudaStreamCaptureMode mine = thread_capture_mode;
  if (mine == cudaStreamCaptureModeRelaxed) return cudaSuccess;
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  for (const std::shared_ptr<Capture>& c : e.captures) {
    const bool own = c->thread == std::this_thread::get_id();
    const bool barred = (own && c->mode != cudaStreamCaptureModeRelaxed) ||
                        (!own && mine == cudaStreamCaptureModeGlobal && c->mode == cudaStreamCaptureModeGlobal);
    if (barred)
      return conflict(*c, cudaErrorStreamCaptureUnsupported, call,
                      std::string("a potentially unsafe call while ") + (own ? "this thread" : "another thread") +
                          " captures (see cudaThreadExchangeStreamCaptureMode)");
  }
  return cudaSuccess;
}

cudaError_t check_stream_wait(cudaStream_t stream, const char* call) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  StreamState* s = resolve(e, stream);
  if (s->capture)
    return conflict(*s->capture, cudaErrorStreamCaptureUnsupported, call,
                    s->name + " is capturing: its work is recorded, not run, so there is nothing to wait for");
  return legacy_conflict_locked(e, s, call);
}

cudaError_t check_device_wait(int device, const char* call) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  for (const std::shared_ptr<Capture>& c : e.captures)
    if (device < 0 || c->origin->device == device)
      return conflict(*c, cudaErrorStreamCaptureUnsupported, call,
                      "waits for every stream of device " + std::to_string(c->origin->device) + ", and " +
                          c->origin->name + " is capturing");
  return cudaSuccess;
}

cudaError_t check_event_wait(cudaEvent_t event, const char* call) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  const auto* ev = reinterpret_cast<const EmulatedEvent*>(event);
  if (!ev->captured) return cudaSuccess;
  const bool ongoing = std::find(e.captures.begin(), e.captures.end(), ev->captured) != e.captures.end();
  const std::string why = "the event was last recorded in a capturing stream: it marks no work that runs";
  if (ongoing) return conflict(*ev->captured, cudaErrorCapturedEvent, call, why);
  return report_error(cudaErrorCapturedEvent, std::string("CUDA emulator: ") + call + ": " + why);
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
