// Whether this build measures GPUs: a CUDA backend that is not the CPU emulator. The emulator runs
// the CUDA code on the CPU, so its timings would mean nothing, and it has no cuBLAS to measure
// against; bench/meson.build compiles the GPU timer and ceilings only for real CUDA builds, and every
// use of them sits behind this macro.
#pragma once

#define BRIGADE_BENCH_GPU (BRIGADE_HAVE_CUDA && !BRIGADE_CUDA_EMULATOR)
