// The plain types that the kernels share with the API above them: the differentiable functions
// (autograd/functions.h) and the optimizers (optim/) take these, so they include this header and
// not kernels/ops.h. That keeps the raw, non-differentiable kernels (brigade::ops) out of
// <brigade.h>: a user who wants them for a backward of their own includes "kernels/ops.h" by name.
#pragma once

#include <cstdint>
#include <optional>

namespace brigade {

// How a loss over many positions becomes one number. (In namespace brigade rather than ops so that a
// call like cross_entropy(x, t, -100, Reduction::sum) doesn't also find ops::cross_entropy by ADL.)
enum class Reduction { mean, sum };

// What a fused GEMM epilogue applies after the bias (brigade::linear, ops::linear): nothing, or GELU
// (the tanh approximation, as brigade::gelu).
enum class Activation { none, gelu };

// Fused attention's settings (ops::attention, brigade::attention; in namespace brigade for the
// reason Reduction is). Query i of Tq attends to keys j of Tk; with `causal` the queries are the
// last Tq positions of the Tk (past = Tk - Tq, as with a KV cache), so query i sees keys j <= past + i. Dropout zeroes a softmax weight (b, h, i, j) when
// philox_uniform(seed, offset + ((b * H + h) * Tq + i) * Tk + j) < dropout and scales the kept ones
// by 1 / (1 - dropout): the element index of that weight in a contiguous [B, H, Tq, Tk] tensor, so
// the fused op draws exactly the mask that dropout() on the composed weights would.
struct AttentionParams {
  bool causal = true;
  double scale = 0;    // multiplies q k^T; 0 means 1 / sqrt(head dim)
  double dropout = 0;  // in [0, 1)
  uint64_t seed = 0, offset = 0;
};

// Rotary position embedding's settings (ops::rope_table, nn::RotaryEmbedding). Pair i of a head of
// size D turns by the angle position * inv_freq[i], inv_freq[i] = theta^(-2i / D), in Hugging Face's
// "rotate_half" layout: element i pairs with element i + D/2.
// LLaMA 3's frequency scaling (config.json's rope_scaling with rope_type "llama3"): wavelengths
// 2 pi / inv_freq longer than original_max_position_embeddings / low_freq_factor are stretched by
// `factor`, those shorter than original_max_position_embeddings / high_freq_factor are kept, and
// those in between blend the two smoothly. The defaults are LLaMA 3.1's.
struct RopeLlama3Scaling {
  double factor = 8;
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  double original_max_position_embeddings = 8192;
};
struct RopeParams {
  double theta = 10000;  // config.json's rope_theta (LLaMA 2: 10000; LLaMA 3: 500000)
  std::optional<RopeLlama3Scaling> llama3 = std::nullopt;
};

}  // namespace brigade

namespace brigade::ops {

using brigade::AttentionParams;

// AdamW's hyperparameters, declared once: optim::AdamWOptions is this same struct, so what a user
// sets on the optimizer is exactly what the kernel (ops::adamw_step_) receives. They live at the
// kernel level because optim/ builds on kernels/, never the reverse. The defaults are PyTorch's.
// `step` drives the bias correction; the optimizer fills it in per parameter (each counts its own
// updates), so in AdamWOptions it stays at 1.
// The factor cross entropy multiplies its loss and gradient by: `value`, or — when `device_count`
// is set — a mean's 1 / *device_count (0 for a count of 0), read on the device. That is the case
// inside a CUDA graph capture, where the host cannot wait for the index scan's count (and a replay
// must use each batch's own count, not the captured one). The kernel does the host's arithmetic in
// f64, so both give the same bits.
struct LossScale {
  double value = 1;
  const int64_t* device_count = nullptr;
};

struct AdamWParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
  int64_t step = 1;
};


}  // namespace brigade::ops
