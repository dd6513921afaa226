// The emulated cuDNN's library context: versions, status strings, the thread's last error text, and
// handles bound to a device and a stream.
//
// Models (cuDNN API reference, cudnn_graph library): cudnnGetVersion, cudnnGetErrorString,
// cudnnGetLastErrorString, cudnnCreate/cudnnDestroy, cudnnSetStream/cudnnGetStream. A handle belongs
// to the device that was current when it was created, and its calls queue their work on its stream.
// Does not model: cudnnQueryRuntimeError (deprecated), cudnnGetProperty, callbacks, logging
// (CUDNN_LOGLEVEL_DBG), and cuDNN's per-handle internal workspace.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "emulator/cudnn_emulated.h"
#include "emulator/runtime.h"

namespace brigade::emu::dnn {
namespace {

thread_local std::string last_error;  // cudnnGetLastErrorString's, per host thread like cuDNN's

}  // namespace

cudnnStatus_t fail(cudnnStatus_t status, const std::string& message) {
  last_error = "cuDNN emulator: " + message;
  return status;
}

}  // namespace brigade::emu::dnn

using namespace brigade::emu;

// ---- versions and errors ----------------------------------------------------------------------------

// API reference, cudnn_graph library, "cudnnGetVersion()": the version of the library, which the
// emulation takes from the headers it was compiled with (CUDNN_VERSION), so a version check against
// the header passes.
size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

// API reference, cudnn_graph library, "cudnnGetErrorString()": the status's name; for a code it does
// not know, a fixed string rather than a null pointer.
const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
#define BRIGADE_CUDNN_STATUS(name) \
  case name: return #name;
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_SUCCESS)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_NOT_INITIALIZED)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_DEPRECATED)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_BAD_PARAM)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_NOT_SUPPORTED)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_INTERNAL_ERROR)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_EXECUTION_FAILED)
    BRIGADE_CUDNN_STATUS(CUDNN_STATUS_INVALID_VALUE)
#undef BRIGADE_CUDNN_STATUS
    default: return "CUDNN_STATUS_UNKNOWN (not a status the emulated cuDNN returns)";
  }
}

// API reference, cudnn_graph library, "cudnnGetLastErrorString()": the thread's most recent error
// text, truncated to max_size - 1 characters. The emulation clears it once read, so a later failure
// that records no text of its own is never reported with an older call's account.
void cudnnGetLastErrorString(char* message, size_t max_size) {
  if (!message || max_size == 0) return;
  std::string& text = brigade::emu::dnn::last_error;
  const size_t n = std::min(text.size(), max_size - 1);
  std::memcpy(message, text.data(), n);
  message[n] = '\0';
  text.clear();
}

// ---- handles ------------------------------------------------------------------------------------------

// API reference, cudnn_graph library, "cudnnCreate()": a context on the current device. Fails with
// CUDNN_STATUS_NOT_INITIALIZED where the CUDA runtime has no device, and
// CUDNN_STATUS_BAD_PARAM_NULL_POINTER for a null `handle`.
cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  if (!handle) return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreate: handle is NULL");
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();  // the runtime's own error is reported as cuDNN's, not left pending
    return dnn::fail(CUDNN_STATUS_NOT_INITIALIZED, "cudnnCreate: the CUDA runtime reports no device");
  }
  *handle = new cudnnContext{current_device(), nullptr};
  return CUDNN_STATUS_SUCCESS;
}

// API reference, cudnn_graph library, "cudnnDestroy()". Work already queued keeps running: it holds
// copies of everything it needs, not the handle.
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  if (!handle) return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnDestroy: handle is NULL");
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}

// API reference, cudnn_graph library, "cudnnSetStream()": later calls on the handle run on `stream`
// (nullptr: the legacy default stream). A stream of another device than the handle's cannot run the
// handle's work: CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH.
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  if (!handle) return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnSetStream: handle is NULL");
  if (stream && stream_device(stream) != handle->device)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH,
                     "cudnnSetStream: the stream belongs to device " + std::to_string(stream_device(stream)) +
                         ", the handle to device " + std::to_string(handle->device));
  handle->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

// API reference, cudnn_graph library, "cudnnGetStream()".
cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* stream) {
  if (!handle || !stream)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnGetStream: handle or streamId is NULL");
  *stream = handle->stream;
  return CUDNN_STATUS_SUCCESS;
}
