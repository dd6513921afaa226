// What the CUDA emulator's runtime offers the emulated libraries (cuBLAS, cuDNN, NCCL) and the
// kernel launcher: queuing work on a stream, and checking device pointers.
//
// Everything a GPU does happens on a stream. A library call such as cublasGemmEx validates its
// arguments on the host (a bad one returns the library's error code at once, as the real library
// does), then queues the computation with enqueue(): it runs after everything issued to the stream
// before it, and errors found while it runs are reported by the next synchronising call, exactly as
// a kernel fault is on a GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

namespace brigade::emu {

// Memory that queued work reads or writes. `pointer` lies inside the allocation it touches; the race
// detector (emulator/races.cpp) works at allocation granularity, so the extent is the
// allocation's.
struct Access {
  const void* pointer;
  bool write;
  bool in_struct = false;  // found inside a structure argument (for the report)
};

// Queues `work` on `stream` (nullptr: the legacy default stream of the current device) behind
// everything issued there before. `what` names the work in error and race reports
// ("gemm_kernel<<<(4,1,1), (256,1,1), 0>>>", "cublasGemmStridedBatchedEx"). `work` returns "" or
// what went wrong; an error is kept and returned (cudaErrorLaunchFailure, with the text) by the next
// call that synchronises with the stream, and by cudaGetLastError.
// On a capturing stream the work is recorded into the capture's graph instead (streams.h); the
// result is cudaSuccess, or the error (also the thread's last error) when the capture was
// invalidated or the call breaks a capture rule.
cudaError_t enqueue(cudaStream_t stream, std::string what, std::vector<Access> accesses,
                    std::function<std::string()> work);

// Lazy module loading (module_loading.cpp): where CUDA_MODULE_LOADING is not EAGER, the first launch
// of `kernel` on the device of `stream` waits on the host until that device's streams are idle.
void load_on_first_launch(const char* kernel, cudaStream_t stream);

// The calling thread's current device (cudaSetDevice), and the device a stream belongs to (the
// current device for the legacy default stream, nullptr).
int current_device();
int stream_device(cudaStream_t stream);

// "" when [pointer, pointer + bytes) lies inside one live device allocation of `device` (or inside
// pinned host memory, when `pinned_ok`); otherwise why not, starting with `what`.
std::string check_device_range(const std::string& what, const void* pointer, size_t bytes, int device,
                               bool pinned_ok = false);
// "" when [pointer, pointer + bytes) lies inside one live allocation (device or pinned, of any
// device): what compute-sanitizer's memcheck asks of every global access a kernel makes.
std::string check_global_range(const std::string& what, const void* pointer, size_t bytes);

}  // namespace brigade::emu
