// The peak memory of a GPT training step (forward, loss, backward, AdamW) against the least such a
// step must hold, written out here from the model's shape alone, independently of the floor `brigade
// bench step` prints (tools/bench_step/memory_floor.h): a tiny GPT-2 (2 blocks, 128 wide, 64 tokens,
// vocabulary 512) with fused attention. Used by tests/test_step_memory.cpp (the CPU, f32) and
// tests/gpu/test_gpu_step_memory.cpp (a GPU, bf16 with f32 master weights, as GPT-2 small is
// benchmarked). Every tensor of this model is under 1 MiB, so the GPU allocator rounds each to 512
// bytes only (the host allocator to 64).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "autograd/tape.h"
#include "core/factory.h"
#include "core/rng.h"
#include "core/storage.h"
#include "core/stream.h"
#include "kernels/ops.h"
#include "nn/gpt.h"
#include "optim/adamw.h"
#include "cli/gpt_flags.h"      // tools/cli/
#include "cli/matmul_choice.h"  // tools/cli/

namespace brigade::test {

struct TinyGPT {
  int64_t layers = 2, embd = 128, heads = 4, seq = 64, batch = 8, vocab = 512;
};

// The parameters of a GPT-2 of this shape: wte (tied to the head), wpe, per block ln1, qkv, proj,
// ln2, fc, proj (weights and biases), ln_f.
inline size_t gpt2_parameters(const TinyGPT& g) {
  const size_t C = size_t(g.embd), V = size_t(g.vocab), T = size_t(g.seq);
  const size_t block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C);
  return V * C + T * C + size_t(g.layers) * block + 2 * C;
}

// The floor, term by term (docs/autograd.md, "What a step holds at its peak"): the larger of the
// start of the backward and AdamW's update. `compute` is the activations' dtype; weights are f32.
inline size_t step_floor_bytes(const TinyGPT& g, DType compute) {
  const size_t C = size_t(g.embd), N = size_t(g.batch * g.seq), V = size_t(g.vocab), T = size_t(g.seq);
  const size_t e = dtype_size(compute), P = gpt2_parameters(g);
  const size_t weights = 4 * P, adam = 8 * P;
  const size_t copies = compute == DType::f32 ? 0 : e * (P - T * C);  // every parameter but wpe is cast
  const size_t tokens = 2 * N * 8;                                    // ids and targets, i64
  // Per block: ln1 in/out, q k v, attention out, ln2 in/out, GELU in/out, plus f32 statistics: two
  // LayerNorms' mean and rstd, the attention's logsumexp per head and row.
  const size_t block = e * N * C * (1 + 1 + 3 + 1 + 1 + 1 + 4 + 4) + 4 * (4 * N + size_t(g.heads) * N);
  const size_t head = e * N * C * 2 + 4 * 2 * N;      // ln_f in/out and statistics
  const size_t loss = e * N * V + 4 * N + e * N * V;  // the logits, their logsumexp, their gradient
  const size_t backward_start = weights + adam + copies + tokens + size_t(g.layers) * block + head + loss;
  const size_t optimizer_step = 16 * P;  // weights, gradients, m, v
  return std::max(backward_start, optimizer_step);
}

// The allocator's peak over one step on `device`, after a first step made AdamW's state.
// `parameters` receives the model's count.
inline size_t step_peak(const TinyGPT& g, Device device, DType compute, int64_t* parameters) {
  // brigade's own GEMM, not cuBLAS: the 32 MiB workspace cuBLAS is handed for every call would be
  // most of this tiny model's peak (`brigade bench step` counts it as a term of its own).
  const cli::ScopedMatmulBackend gemm(ops::MatmulBackend::tiled);
  nn::GPTConfig c = cli::gpt_config(
      {.layers = g.layers, .heads = g.heads, .embd = g.embd, .vocab = g.vocab, .context = g.seq}, device, compute, 5);
  c.fused_attention = true;
  nn::GPT model(c);
  *parameters = model.parameter_count();
  optim::AdamW optimizer(model.named_parameters(), optim::AdamWOptions{.lr = 1e-3});
  Generator gen(5);
  const auto tokens = [&] {
    return ops::to_dtype(uniform({g.batch, g.seq}, 0, double(g.vocab) - 0.5, DType::f32, Device::cpu(), &gen),
                         DType::i64)
        .to(device);
  };
  const Tensor idx = tokens(), targets = tokens();
  const auto step = [&] {
    optimizer.zero_grad();
    Tape tape;
    const Tensor loss = tape.record([&] { return model.loss(idx, targets); });
    tape.backward(loss);
    optimizer.step();
    if (device.is_cuda()) device_synchronize(device);
  };
  step();
  if (device.is_cuda()) reset_peak_memory(device);
  else reset_host_peak_memory();
  step();
  return device.is_cuda() ? cuda_memory_stats(device).peak_allocated : host_memory_stats().peak_allocated;
}

// The check both tests make: the step on `device` in `compute` peaks within 1.15x of the floor, and
// not under it (a peak under the floor would mean it counts something a step need not hold).
inline void require_step_near_floor(Device device, DType compute) {
  const TinyGPT g;
  int64_t parameters = 0;
  const size_t floor = step_floor_bytes(g, compute);
  const size_t peak = step_peak(g, device, compute, &parameters);
  REQUIRE(size_t(parameters) == gpt2_parameters(g));  // the floor counts the model's parameters
  INFO("peak " << peak << " bytes, floor " << floor << " bytes, ratio " << double(peak) / double(floor));
  CHECK(double(peak) <= 1.15 * double(floor));
  CHECK(peak >= floor);
}

}  // namespace brigade::test
