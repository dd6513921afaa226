// Model FLOPs utilisation (MFU): the fraction of the device's peak arithmetic a training run turns
// into model arithmetic.
//
// The model FLOPs of one token of training, forward and backward, are counted as in PaLM (Chowdhery
// et al. 2022, appendix B):
//
//   6 N  +  12 L C T
//
// N: the parameters every token multiplies through — all of them except the position embedding, which
// is only looked up (the tied token embedding counts, as the head's matmul). 2 FLOPs per
// multiply-add, times 3 for forward + backward (the backward does two matmuls per forward one).
// 12 L C T: attention's two T x T matmuls per layer (scores and the weighted sum), likewise times 6,
// for L layers of width C over a context of T. Work the implementation does on top — recomputation,
// softmax, norms — is not counted: MFU measures the model's FLOPs, not the hardware's.
//
// The peak is the dense (no sparsity) throughput the vendor lists for the dtype, from the table in
// mfu.cpp — or on the CPU, where no table fits every machine, a GEMM measured at the start of the run
// with brigade's own kernel, the threads of the run, f32 (also for --precision bf16: the CPU kernels
// widen 16-bit data to f32 and compute there).
#pragma once

#include <cstdint>
#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "nn/gpt.h"

namespace brigade::train {

// 6 N + 12 L C T for `model` with context T = config.block_size.
double training_flops_per_token(const nn::GPT& model);

struct Peak {
  double flops_per_second = 0;  // 0: unknown (no MFU printed)
  std::string source;           // "NVIDIA H100 80GB HBM3, bf16 dense (table)", "measured f32 GEMM 512^3"
};

// The peak for computing in `dtype` on `device`: the table for a GPU it knows, a measured GEMM on the
// CPU (takes a few tens of milliseconds).
Peak device_peak(Device device, DType dtype);

// The table's entry for a GPU name and dtype (0 when it has none); exposed for tests.
double table_peak(const std::string& gpu_name, DType dtype);

}  // namespace brigade::train
