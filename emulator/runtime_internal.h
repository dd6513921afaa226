// What the emulated CUDA runtime's two files share: runtime.cpp (devices, errors, the stream and
// event calls) and memory.cpp (allocations, copies, memsets). Internal to them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace brigade::emu {

// BRIGADE_EMULATED_GPUS (default 1) and BRIGADE_EMULATED_GPU_MEMORY (default 16 GiB), read once.
int device_count();
size_t memory_per_device();

extern thread_local int the_device;  // cudaSetDevice's, per host thread

// Sets the calling thread's last error, with the emulator's own text for it, and returns `code`.
cudaError_t fail(cudaError_t code, const std::string& message);
// What a synchronising call returns: an error of earlier asynchronous work, else success.
cudaError_t synchronised();

}  // namespace brigade::emu
