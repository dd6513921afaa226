// The CUDA emulator's streams and events (streams.cpp) and its race detector (races.cpp): internal to
// the emulator; runtime.cpp builds the CUDA runtime API on top of them.
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

#include "core/cuda/emulator/runtime.h"

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

// Like enqueue(), then blocks the host until that work has run (a synchronous cudaMemcpy).
void run_and_wait(cudaStream_t stream, std::string what, std::vector<Access> accesses,
                  std::function<std::string()> work);

// ---- events (streams.cpp) ----
struct EmulatedEvent;
cudaEvent_t make_event(int device, bool timing);
void delete_event(cudaEvent_t event);
int event_device(cudaEvent_t event);
void record_event(cudaEvent_t event, cudaStream_t stream);
void wait_for_event(cudaStream_t stream, cudaEvent_t event);
bool event_done(cudaEvent_t event);  // a never-recorded event is done
void synchronize_event(cudaEvent_t event);
// "" and the milliseconds between two completed timing events, or why there are none.
std::string elapsed_ms(cudaEvent_t start, cudaEvent_t end, float* ms);

// ---- errors ----
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

// From runtime.cpp: the start and size of the device or pinned allocation holding `p`, or nullptr.
const void* allocation_start(const void* p, size_t* bytes, int* device);

}  // namespace brigade::emu
