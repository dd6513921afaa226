// What each pipeline layer of a GPT costs, computed from its sizes alone: the planner's model of a
// GPT it has not built (pipeline/analysis/planner.h). Both of nn::GPT's families: what follows is
// GPT-2's; a llama's differences are listed after it.
//
// The layers are nn::GPT::layers(LayerGrain::half_block) — [embedding, attention half 0, MLP half 0,
// ..., head] — the grain `brigade train --partition balanced` cuts. For one micro-batch of b
// sequences of T tokens (n = bT tokens, width C, vocabulary V, H heads) each layer gets
//
//   FLOPs    of its forward (F), input gradient (I) and weight gradient (W). Matmuls only, 2 FLOPs per
//            multiply-add: a linear layer [C_in -> C_out] costs 2n C_in C_out forward, the same again
//            for I (dy W) and for W (dy^T x). Attention's two T x T products (scores, weighted sum)
//            cost 4 b T^2 C forward (counted over the whole square, as tools/train/mfu.h counts them)
//            and twice that in I; they have no weights. The head's logits cost 2 n C V each way.
//            Norms, GELU, softmax and adds are left out: the effective FLOP/s the planner divides by
//            absorbs them (and everything else that keeps a GPU below its peak).
//   bytes    its parameters (counted, not bytes: their dtype is the caller's business), and what it
//            holds per micro-batch: the stash its forward keeps for its backward, what a split
//            backward's I keeps for W besides (`deferred`), and what a backward uses for a moment
//            (`workspace`).
//
// The stash counts the tensors brigade's own layers save today (a = bytes per activation element:
// 4 for f32, 2 for bf16), each an [n, C]-sized tensor unless said otherwise:
//   embedding       the token and position rows it looked up (f32, [n, C] and [T, C]), under bf16
//                   their bf16 copies too, and its output;
//   attention half  ln1's output and its mean and rstd (n f32 each), q|k|v ([n, 3C]), attention's
//                   output and log-sum-exp ([n, H] f32), the projection's output (the residual add
//                   keeps both its operands) and the layer's output: 7 n C a + 8 n + 4 n H;
//   MLP half        ln2's output and statistics, the fc's output before and after GELU ([n, 4C]
//                   each), the projection's output and the layer's output: 11 n C a + 8 n;
//   head            ln_f's output and statistics, and the logits [n, V]; under bf16 the loss
//                   (nn::language_model_loss) keeps an f32 copy of them as well.
// Under bf16 each layer but the embedding also keeps the bf16 copies of its parameters that autocast
// made (2 bytes per parameter): the matmuls' backward reads the weights they multiplied with.
// tests/test_plan.cpp holds this against profile_layer_costs' measurement of a small GPT.
//
// A llama (kv = kv_heads * C / heads, the width of k and v; F = the MLP's hidden width): no position
// table; the attention's projections cost 2n (2C^2 + 2C kv) each way; the SwiGLU MLP's three 2n C F
// each way; an untied head holds lm_head [V, C] instead of a copy of the token table (the same
// count). Its stash, counted the same way:
//   attention half  ln1's output and rstd (n f32), q, k and v, q and k turned, k and v repeated to
//                   every query head when kv < C (2C), the attention's output and log-sum-exp, o's
//                   output and the layer's output: n a (6C + 3kv [+ 2C]) + 4n + 4nH;
//   embedding       the rows it looked up (f32; under bf16 their bf16 copy too), which are its output;
//   MLP half        ln2's output and rstd, gate's and up's outputs ([n, F] each), their gated product
//                   (down's input, [n, F]), down's output and the layer's output: n a (3C + 3F) + 4n;
//   head            ln_f's output and rstd, and the logits (under bf16 their f32 copy too).
// tests/test_plan.cpp holds these against profile_layer_costs too, grouped and not, tied and untied.
//
// `deferred` and `workspace` are estimates, not measured: deferred is the gradient of every output a
// weight gradient multiplies with (each linear layer's and norm's output); workspace is the stash's
// activations again (their gradients, made and freed on the way back) plus one f32 weight gradient
// before it is added to the accumulated one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "nn/arch.h"

namespace brigade::nn {
struct GPTConfig;
}

namespace brigade::pipeline {

// A GPT's sizes (nn::GPTConfig's, with biases): T = context, the tokens of each sequence.
struct GptShape {
  int64_t layers = 12;  // transformer blocks
  int64_t heads = 12;
  int64_t embd = 768;  // C
  int64_t context = 1024;
  int64_t vocab = 50257;
  nn::Arch arch = nn::Arch::gpt2;
  int64_t kv_heads = 0;    // llama: key/value heads (0: heads)
  int64_t mlp_hidden = 0;  // 0: the family's default (nn::mlp_hidden_of)
  bool tied = true;        // llama may untie its head

  // Throws naming the size that is not positive, heads that do not divide embd, or (llama) kv heads
  // that do not divide heads.
  void check() const;
  // 2 * layers + 2: the embedding, two halves per block, the head.
  int64_t pipeline_layers() const { return 2 * layers + 2; }
};

struct LayerEstimate {
  std::string name;         // Module::name() of the layer: GPTEmbedding, BlockAttention, BlockMLP, GPTHead
  double forward = 0;       // FLOPs of one micro-batch's F
  double input_grad = 0;    // ... of its I
  double weight_grad = 0;   // ... of its W
  int64_t parameters = 0;   // the head counts the tied token embedding too (its stage keeps a copy), or lm_head
  int64_t stash = 0;        // bytes one micro-batch's forward keeps for its backward
  int64_t deferred = 0;     // bytes a split backward's I keeps for its W, on top of the stash
  int64_t workspace = 0;    // bytes its backward uses for a moment
  int64_t weight_copies = 0;  // the part of `stash` that is bf16 copies of parameters (0 under f32)
};

// The shape of a GPT built from `config` (its block_size as the context), and the config of one
// (no dropout, f32 weights on the CPU, seed 0) built from `shape`.
GptShape gpt_shape(const nn::GPTConfig& config);
nn::GPTConfig gpt_config(const GptShape& shape);

// The layers of GPT::layers(LayerGrain::half_block), for micro-batches of `sequences` sequences,
// activations in `compute` (f32 or bf16; the parameters are f32 either way).
std::vector<LayerEstimate> estimate_gpt_layers(const GptShape& shape, int64_t sequences, DType compute);

// The model's parameters, the tied matrix once: what nn::GPT::parameter_count() says.
int64_t gpt_parameter_count(const GptShape& shape);

// The tied token embedding's parameters (V x C), which the head's stage holds a copy of; 0 when the
// head is untied (it shares nothing).
inline int64_t tied_parameters(const GptShape& shape) { return shape.tied ? shape.vocab * shape.embd : 0; }

// One activation passed between stages: [sequences, T, C] in `compute`. A gradient has the same size.
int64_t gpt_boundary_bytes(const GptShape& shape, int64_t sequences, DType compute);

}  // namespace brigade::pipeline
