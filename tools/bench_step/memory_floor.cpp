#include "bench_step/memory_floor.h"

#include "core/error.h"

namespace brigade::bench_step {

MemoryFloor step_memory_floor(const StepShape& s) {
  BRIGADE_CHECK(s.layers > 0 && s.embd > 0 && s.heads > 0 && s.seq > 0 && s.batch > 0 && s.vocab > 0 &&
                    s.parameters > 0 && s.block >= s.seq,
                "step_memory_floor: every size must be positive and seq ", s.seq, " at most block ", s.block);
  const size_t e = dtype_size(s.compute), f32 = 4, i64 = 8;
  const size_t N = size_t(s.batch * s.seq), C = size_t(s.embd), V = size_t(s.vocab), P = size_t(s.parameters);
  const size_t rows_f32 = N * f32;  // one f32 statistic per row (a LayerNorm's mean or rstd, a logsumexp)
  MemoryFloor f;
  auto add = [&](std::string what, size_t bytes) {
    f.backward_start.push_back({std::move(what), bytes});
    f.backward_start_bytes += bytes;
  };
  add("weights (f32)", P * f32);
  add("AdamW m and v (f32)", 2 * P * f32);
  add("parameter gradients (none yet: zero_grad frees them)", 0);
  // Autocast casts every parameter a linear or LayerNorm reads; the position table is read by the
  // embedding, which converts its output rows instead.
  if (s.compute != DType::f32) add("bf16 weight copies (all but the position table)", (P - size_t(s.block) * C) * e);
  add("tokens and targets (i64)", 2 * N * i64);
  // One block: what its backward reads. The LayerNorms' inputs and outputs (the latter are the next
  // GEMM's input), q, k and v (the qkv GEMM's output), the attention's output and logsumexp, the MLP's
  // widest pair (the GELU's input and output, four times the width), and two LayerNorms' statistics.
  const size_t block = N * C * e * (1 + 1 + 3 + 1 + 1 + 1 + 4 + 4) + size_t(s.batch * s.heads * s.seq) * f32 +
                       4 * rows_f32;
  add("activations, " + std::to_string(s.layers) + " blocks x (LN inputs and outputs 4NC, qkv 3NC, attention "
      "output NC and logsumexp, GELU input and output 8NC, LN statistics)", size_t(s.layers) * block);
  add("final LayerNorm input, output and statistics", 2 * N * C * e + 2 * rows_f32);
  add("the logits' gradient (the loss's backward's output) and the loss's logsumexp", N * V * e + rows_f32);
  // The loss's backward reads the logits; the head's GEMM, next, needs a cuBLAS workspace: the peak
  // holds whichever is larger.
  if (s.gemm_workspace > N * V * e) add("a cuBLAS workspace, for the head's GEMM once the logits are read", s.gemm_workspace);
  else add("logits (compute dtype)", N * V * e);
  f.optimizer_step_bytes = 4 * P * f32;
  return f;
}

}  // namespace brigade::bench_step
