// What the CUDA emulator's stream files share: streams.cpp (the queues, their workers, issuing work),
// events.cpp and stream_capture.cpp. Internal to them; streams.h is what the rest of the emulator
// sees. Everything here lives under Engine::mutex (streams.cpp says why).
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "emulator/streams.h"

namespace brigade::emu {

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

struct EmulatedEvent {
  int device = 0;
  bool timing = true;
  std::shared_ptr<Mark> mark;  // null until recorded
  // Set when last recorded in a capturing stream: the event then marks a point of that capture
  // sequence, not of any stream's work (host waits on it are errors; see capture_conflict_event).
  std::shared_ptr<Capture> captured;
};

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

// Where an item went: its stream, its sequence number there, and the clock of that point.
struct Issued {
  StreamState* stream;
  uint64_t seq = 0;
  Clock clock;
  cudaError_t status = cudaSuccess;  // not issued: why (a capture rule was broken)
  bool captured = false;             // recorded as a graph node instead of issued
};

Engine& engine();
// The state behind a handle; nullptr is the current device's legacy default stream, made on first use.
StreamState* resolve(Engine& e, cudaStream_t stream);
// Issues `item` and lets it run: on the worker, or (synchronous mode) right here.
// A stream that captures records the item instead (capture_item).
Issued submit(cudaStream_t stream, Item item, const std::vector<Access>& accesses, std::string* races);
// The host has waited for `s` up to `seq`, whose clock was `clock`: it now knows all that finished.
void host_saw(Engine& e, const Clock& clock);
// Blocks the host (with `lock` held on entry and exit) until `s` has run item `seq`.
void wait_for_stream_point(Engine& e, std::unique_lock<std::mutex>& lock, StreamState* s, uint64_t seq);

// ---- capture rules (stream_capture.cpp) ----
// A call that conflicts with capture `c`: invalidates it and reports `code` with the reason.
cudaError_t conflict(Capture& c, cudaError_t code, const std::string& call, const std::string& why);
// Using the legacy default stream while a blocking stream of its device captures (lock held): see
// stream_capture.cpp. `invalidates` false for a query, which leaves the capture valid.
cudaError_t legacy_conflict_locked(Engine& e, const StreamState* s, const std::string& call, bool invalidates = true);
// Records `item` into the capture of `s` (lock held).
Issued capture_item(StreamState* s, Item item, const std::vector<Access>& accesses);

}  // namespace brigade::emu
