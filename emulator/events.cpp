// The CUDA emulator's events: an event marks a point of a stream's queue (see streams.h), which other
// streams may wait for and the host may synchronise with.
#include "emulator/streams_internal.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace brigade::emu {

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

}  // namespace brigade::emu
