// The CUDA emulator's stream capture (see streams.h): while a stream captures, what is issued to it
// becomes a graph node, and calls that break the CUDA Programming Guide's rules ("Prohibited and
// Unhandled Operations") or cudaThreadExchangeStreamCaptureMode's return their error and invalidate
// the capture. graphs.cpp launches what a capture recorded.
#include "emulator/streams_internal.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace brigade::emu {
namespace {

// Ends `c` as invalid: further work on its stream fails, and cudaStreamEndCapture returns no graph.
void invalidate(Capture& c, const std::string& why) {
  if (c.invalidated.empty()) c.invalidated = why;
}

}  // namespace

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
cudaError_t legacy_conflict_locked(Engine& e, const StreamState* s, const std::string& call, bool invalidates) {
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

}  // namespace brigade::emu
