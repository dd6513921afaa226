// CUDA's module loading: lazy (the default on Linux since CUDA 12.2) or eager (CUDA_MODULE_LOADING=EAGER,
// read once, when CUDA starts in a process).
//
// Why brigade cares. Under lazy loading the first launch of a kernel loads it, and loading may wait for
// the whole context to be idle (CUDA Programming Guide, "Lazy Loading": potential hazards of concurrent
// execution). NCCL's kernels wait on the GPU for their peers. When a peer is another rank of this same
// process on the same GPU, its host thread may be the one loading a kernel, waiting for the context to go
// idle, which waits for the NCCL kernel, which waits for that thread: nothing moves. Seen on an H200
// (NCCL 2.30.7, three ranks on one GPU in one process): a receive of the first exchange timed out; the
// same run under CUDA_MODULE_LOADING=EAGER passed. The CUDA emulator models it (docs/cuda.md).
#pragma once

#include <cstdlib>

namespace brigade::cuda {

enum class ModuleLoading { eager, lazy };

// What this process's CUDA does, from the driver (cuModuleGetLoadingMode, reached through the runtime
// without linking libcuda). Starts CUDA if it has not started. CUDA builds only.
ModuleLoading module_loading();

// Asks for eager loading in this process unless the user chose (CUDA_MODULE_LOADING already set):
// effective only before CUDA starts here, so call it first thing, before anything touches a GPU —
// `brigade launch` (for its ranks), the commands that put several NCCL ranks in one process, the GPU
// test programs. Needs no CUDA: it only sets the variable.
inline void prefer_eager_module_loading() { setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/0); }

}  // namespace brigade::cuda
