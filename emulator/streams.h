// The CUDA emulator's streams (streams.cpp), events (events.cpp), stream capture (stream_capture.cpp)
// and race detector (races.cpp): internal to the emulator; runtime.cpp builds the CUDA runtime API on
// top of them.
//
// A stream is a queue with its own worker thread: work runs in issue order, concurrently with the
// host and with other streams, as on a GPU. An event marks a point in a stream's queue. Waiting for
// an event (cudaStreamWaitEvent) puts a wait into another stream's queue; synchronising calls block
// the host until the marked work has run. BRIGADE_EMULATOR_STREAMS=sync runs every piece of work
// on the issuing thread instead, at once (for debugging: a fault then stops in the caller's stack).
//
// Alongside, at issue time, every stream, event and the host carry a vector clock (races.cpp), so
// work that touches an allocation which unordered work of another stream writes (or reads, when
// this work writes) is reported whether or not the two happened to overlap this time.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "emulator/runtime.h"

namespace brigade::emu {

// ---- streams (streams.cpp) ----
// The legacy default stream (nullptr) of the current device is made on first use; a blocking stream
// (cudaStreamDefault) is ordered with it both ways, a non-blocking one is not.
cudaStream_t make_stream(int device, bool blocking);
// cudaStreamDestroy: work already queued still runs; the handle must not be used again.
void retire_stream(cudaStream_t stream);
int device_of(cudaStream_t stream);  // the current device for nullptr
bool stream_idle(cudaStream_t stream);
void synchronize_stream(cudaStream_t stream);
void synchronize_device(int device);  // every stream of `device`; -1: of every device

// Like enqueue(), then blocks the host until that work has run (a synchronous cudaMemcpy). On a
// capturing stream it fails (cudaErrorStreamCaptureUnsupported) and invalidates the capture.
cudaError_t run_and_wait(cudaStream_t stream, std::string what, std::vector<Access> accesses,
                         std::function<std::string()> work);

// ---- events (events.cpp) ----
struct EmulatedEvent;
cudaEvent_t make_event(int device, bool timing);
void delete_event(cudaEvent_t event);
int event_device(cudaEvent_t event);
// Both may fail by the capture rules below (the error is reported and returned).
cudaError_t record_event(cudaEvent_t event, cudaStream_t stream);
cudaError_t wait_for_event(cudaStream_t stream, cudaEvent_t event);
bool event_done(cudaEvent_t event);  // a never-recorded event is done
void synchronize_event(cudaEvent_t event);
// "" and the milliseconds between two completed timing events, or why there are none.
std::string elapsed_ms(cudaEvent_t start, cudaEvent_t end, float* ms);

// ---- stream capture (stream_capture.cpp): what CUDA graphs are made of ----
// While a stream captures, everything issued to it (kernels, library calls, async copies and
// memsets) becomes a node of the capture's graph instead of running; cudaStreamEndCapture hands the
// nodes over, and graphs.cpp launches them as one piece of work. One stream per capture sequence:
// a second stream joining it through an event (a fork, which CUDA allows) is refused as not
// modelled. The rules are the CUDA Programming Guide's ("Prohibited and Unhandled Operations") and
// cudaThreadExchangeStreamCaptureMode's; a call that breaks one returns its error code and
// invalidates the capture, so cudaStreamEndCapture then returns no graph.
struct GraphNode {
  std::string what;
  std::vector<Access> accesses;
  std::function<std::string()> work;
};
using GraphNodes = std::vector<GraphNode>;

cudaError_t begin_capture(cudaStream_t stream, cudaStreamCaptureMode mode);
// The captured nodes (nullptr with an error when the capture was invalidated or not begun here).
cudaError_t end_capture(cudaStream_t stream, std::shared_ptr<const GraphNodes>* nodes);
cudaStreamCaptureStatus capture_status(cudaStream_t stream, unsigned long long* id);
cudaStreamCaptureMode exchange_capture_mode(cudaStreamCaptureMode mode);  // returns the old one
// cudaSuccess, or the error a call breaking a capture rule gets (reported and returned):
cudaError_t check_unsafe_call(const char* call);  // cudaMalloc and friends, by the thread's mode
cudaError_t check_stream_wait(cudaStream_t stream, const char* call);  // synchronise/query a stream
cudaError_t check_device_wait(int device, const char* call);  // every stream of a device (-1: all)
cudaError_t check_event_wait(cudaEvent_t event, const char* call);  // synchronise/query an event
cudaError_t check_legacy_use(cudaStream_t stream, const char* call);  // work for the legacy stream
cudaError_t check_legacy_query(cudaStream_t stream, const char* call);  // the same error, capture untouched
cudaError_t refuse_if_capturing(cudaStream_t stream, const std::string& call, const std::string& why);

// ---- errors ----
// Sets the calling thread's last error (as any failing runtime call does) and returns `code`.
cudaError_t report_error(cudaError_t code, const std::string& text);
// Reports races found at issue: the calling thread's next cudaGetLastError returns them
// (cudaErrorLaunchFailure), and they are printed at once (runtime.cpp).
void report_race(const std::string& text);
// Errors of work that ran on a worker:
// The oldest unreported one, taken (a GPU reports an asynchronous fault once, at a later call).
bool take_async_error(cudaError_t* code, std::string* message);

// ---- the race detector (races.cpp) ----
// Streams, events and the host hold one clock each; streams.cpp calls these under its lock.
using Clock = std::vector<uint64_t>;  // per stream id: how much of that stream is ordered before
void merge(Clock& into, const Clock& from);
// Work `what` is issued as item `seq` of stream `stream_id` with clock `clock` (which already
// includes itself). Returns "" or a description of every race it has with earlier work.
std::string check_races(int stream_id, const std::string& stream_name, uint64_t seq, const Clock& clock,
                        const std::string& what, const std::vector<Access>& accesses);
// The history of an allocation ends with it (cudaFree synchronises the device first).
void forget_allocation(const void* start);
bool races_checked();  // BRIGADE_EMULATOR_RACES=0 turns the detector off

// From memory.cpp: the start and size of the device or pinned allocation holding `p`, or nullptr.
const void* allocation_start(const void* p, size_t* bytes, int* device);

}  // namespace brigade::emu
