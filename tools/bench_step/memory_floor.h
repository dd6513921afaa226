// The least memory a GPT training step (forward, loss, backward, AdamW) must hold at its peak, term
// by term from the model's shape — the yardstick `brigade bench step` sets the allocator's measured
// peak against (docs/autograd.md, "What a step holds at its peak").
//
// The peak of a step that frees each activation once its backward has used it comes at the start of
// the backward, when the loss's backward runs: every activation the backward will read is alive, the
// logits and their gradient side by side, and no parameter gradient exists yet (zero_grad frees
// them). From there on each block's backward frees 16·B·T·C activations (32·B·T·C bytes in bf16,
// 64 in f32) and adds 12·C² f32 gradients (48·C² bytes): the memory falls while B·T > 1.5·C in bf16
// (0.75·C in f32), true of every model benchmarked here. The other candidate is AdamW's update,
// where weights, gradients and both moments are alive at once; the floor is the larger of the two.
// A cuBLAS workspace takes the logits' place when it is the larger (negligible at GPT-2 small, most
// of a tiny model's step).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace brigade::bench_step {

struct StepShape {
  int64_t layers = 0, embd = 0, heads = 0, seq = 0, batch = 0, vocab = 0;
  int64_t block = 0;       // the position table's rows (the model's context)
  int64_t parameters = 0;  // every parameter once (the token table is tied to the head)
  DType compute = DType::f32;  // bf16: f32 master weights, bf16 activations and weight copies
  // What the GEMM library holds while a call runs: brigade hands cuBLAS a 32 MiB workspace from the
  // caching allocator for every call (kernels/cuda/gemm_cublas.cpp); 0 for brigade's own GEMMs.
  size_t gemm_workspace = 0;
};

struct MemoryTerm {
  std::string what;
  size_t bytes = 0;
};

struct MemoryFloor {
  std::vector<MemoryTerm> backward_start;  // what the start of the backward holds, term by term
  size_t backward_start_bytes = 0;
  size_t optimizer_step_bytes = 0;         // weights, gradients, AdamW's m and v
  size_t bytes() const { return backward_start_bytes > optimizer_step_bytes ? backward_start_bytes : optimizer_step_bytes; }
};

MemoryFloor step_memory_floor(const StepShape& shape);

}  // namespace brigade::bench_step
