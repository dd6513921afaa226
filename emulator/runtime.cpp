// The CUDA emulator's runtime: the part of the CUDA runtime API brigade calls, on host memory.
//
// A -Dgpu_emulator=true build links this file instead of libcudart (the declarations still come
// from the toolkit's cuda_runtime_api.h, so every signature is checked against the real one).
//
//   - Devices: BRIGADE_EMULATED_GPUS of them (default 1), each with BRIGADE_EMULATED_GPU_MEMORY
//     bytes (default 16 GiB) counted against cudaMalloc, so out-of-memory paths run.
//   - Streams and events (streams.cpp, events.cpp): each stream runs its work in order on a worker thread of
//     its own, concurrently with the host and the other streams; copies, memsets and kernels are
//     synchronous or asynchronous exactly where the runtime API's "API synchronization behavior"
//     says so. A race detector (races.cpp) reports work on one stream that touches an allocation
//     unordered work of another stream writes.
//   - Memory (memory.cpp): device and pinned allocations are remembered, so copies, memsets and kernel
//     arguments are checked against them.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "emulator/launch_counts.h"
#include "emulator/runtime.h"
#include "emulator/runtime_internal.h"
#include "emulator/simt.h"
#include "emulator/streams.h"

namespace brigade::emu {

int device_count() {
  static const int count = [] {
    const char* env = std::getenv("BRIGADE_EMULATED_GPUS");
    return env ? std::max(0, std::atoi(env)) : 1;
  }();
  return count;
}

thread_local int the_device = 0;

namespace {

thread_local cudaError_t last_error = cudaSuccess;
// The emulator's own, more precise text for the last error it raised on this thread; it outlives
// cudaGetLastError so that a check which reads the code first can still print it.
thread_local cudaError_t message_code = cudaSuccess;
thread_local const char* last_message = nullptr;

// Messages are kept for the life of the process, like the runtime's static strings, so a pointer
// from cudaGetErrorString stays valid after later errors.
const char* keep(const std::string& message) {
  static std::mutex mutex;
  static auto* kept = new std::set<std::string>;
  std::lock_guard<std::mutex> lock(mutex);
  return kept->insert(message).first->c_str();
}

}  // namespace

cudaError_t fail(cudaError_t code, const std::string& message) {
  last_error = message_code = code;
  last_message = keep(message);
  return code;
}

namespace {

const char* message_for(cudaError_t code) {
  if (code == message_code && last_message) return last_message;
  return nullptr;
}

// An error of work that already ran (a kernel fault found on a stream's worker) becomes this
// thread's last error when a call that reports such errors comes along; returns it.
cudaError_t collect_async_error() {
  cudaError_t code;
  std::string message;
  if (take_async_error(&code, &message)) return fail(code, message);
  return cudaSuccess;
}

}  // namespace

cudaError_t synchronised() {
  const cudaError_t e = collect_async_error();
  if (e != cudaSuccess) last_error = cudaSuccess;  // returned here, so not again by cudaGetLastError
  return e;
}

std::string check_launch_stream(const char* kernel, cudaStream_t stream) {
  if (!stream) return "";  // the legacy default stream is the current device's
  const int device = device_of(stream);
  if (device == the_device) return "";
  return std::string(kernel) + ": launched on a stream of device " + std::to_string(device) +
         " while the current device is " + std::to_string(the_device);
}

void record_launch_error(cudaError_t code, const std::string& what) { fail(code, "CUDA emulator: " + what); }

int current_device() { return the_device; }

int stream_device(cudaStream_t stream) { return device_of(stream); }

cudaError_t report_error(cudaError_t code, const std::string& text) { return fail(code, text); }

void report_race(const std::string& text) {
  std::fprintf(stderr, "brigade CUDA emulator: %s\n", text.c_str());
  fail(cudaErrorLaunchFailure, "CUDA emulator: " + text);
}

}  // namespace brigade::emu

using namespace brigade::emu;

// ---- devices and versions ---------------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
  *count = device_count();
  return device_count() > 0 ? cudaSuccess : fail(cudaErrorNoDevice, "no emulated GPUs (BRIGADE_EMULATED_GPUS=0)");
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= device_count())
    return fail(cudaErrorInvalidDevice, "cudaSetDevice(" + std::to_string(device) + "): the emulator has " +
                                            std::to_string(device_count()) + " device(s)");
  the_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = the_device;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

// Only the dynamic shared memory limit is modelled (a launch's size is checked against the GPU's
// 227 KiB either way; the emulator does not track the attribute per kernel).
cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (func == nullptr) return fail(cudaErrorInvalidDeviceFunction, "cudaFuncSetAttribute: a null function");
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
    return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: the emulator does not model attribute " + std::to_string(int(attr)));
  if (value < 0 || value > 227 * 1024)
    return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: " + std::to_string(value) +
                                           " bytes of dynamic shared memory (an sm_90 block has at most 227 KiB)");
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice, "cudaDeviceGetAttribute: no such device");
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = 132; return cudaSuccess;  // an H200's
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
    case cudaDevAttrWarpSize: *value = 32; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    default: return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: the emulator does not model attribute " +
                                                    std::to_string(int(attr)));
  }
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties: no such device");
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name), "brigade CUDA emulator (CPU)");
  prop->totalGlobalMem = memory_per_device();
  prop->multiProcessorCount = 132;
  prop->major = 9;
  prop->minor = 0;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->l2CacheSize = 50 * 1024 * 1024;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (const cudaError_t e = check_device_wait(the_device, "cudaDeviceSynchronize"); e != cudaSuccess) return e;
  count_host_sync("cudaDeviceSynchronize");
  synchronize_device(the_device);
  return synchronised();
}

// ---- errors -----------------------------------------------------------------------------------------

cudaError_t cudaGetLastError() {
  if (last_error == cudaSuccess) collect_async_error();
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  if (last_error == cudaSuccess) collect_async_error();
  return last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureMerge: return "cudaErrorStreamCaptureMerge";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureUnjoined: return "cudaErrorStreamCaptureUnjoined";
    case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorCapturedEvent: return "cudaErrorCapturedEvent";
    case cudaErrorStreamCaptureWrongThread: return "cudaErrorStreamCaptureWrongThread";
    default: return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  if (const char* m = message_for(error)) return m;
  return cudaGetErrorName(error);
}

// ---- streams and events (streams.cpp, events.cpp) ----------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  *stream = make_stream(the_device, (flags & cudaStreamNonBlocking) == 0);
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: the legacy default stream");
  retire_stream(stream);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (const cudaError_t e = check_stream_wait(stream, "cudaStreamSynchronize"); e != cudaSuccess) return e;
  count_host_sync("cudaStreamSynchronize");
  synchronize_stream(stream);
  return synchronised();
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (const cudaError_t e = check_stream_wait(stream, "cudaStreamQuery"); e != cudaSuccess) return e;
  if (!stream_idle(stream)) return cudaErrorNotReady;
  return synchronised();
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  if (!event) return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: a null event");
  return wait_for_event(stream, event);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  *event = make_event(the_device, (flags & cudaEventDisableTiming) == 0);
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy: a null event");
  delete_event(event);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: a null event");
  const int stream_device = device_of(stream);
  if (stream_device != event_device(event))
    return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: an event of device " +
                                                    std::to_string(event_device(event)) +
                                                    " recorded on a stream of device " + std::to_string(stream_device));
  return record_event(event, stream);
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (const cudaError_t e = check_event_wait(event, "cudaEventQuery"); e != cudaSuccess) return e;
  if (!event_done(event)) return cudaErrorNotReady;
  return synchronised();
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (const cudaError_t e = check_event_wait(event, "cudaEventSynchronize"); e != cudaSuccess) return e;
  count_host_sync("cudaEventSynchronize");
  synchronize_event(event);
  return synchronised();
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  const std::string problem = elapsed_ms(start, end, ms);
  if (problem == "not ready") return cudaErrorNotReady;
  if (!problem.empty()) return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: " + problem);
  return cudaSuccess;
}
