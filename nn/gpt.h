// GPT: a decoder-only transformer language model (GPT-2's architecture).
//
//   idx [B, T] token ids
//     -> embed: token embedding wte[idx] + position embedding wpe[0..T-1]   [B, T, C]
//     -> blocks: n_layer TransformerBlocks                                  [B, T, C]
//     -> head: final LayerNorm, then logits = h @ wte^T                     [B, T, vocab_size]
//
// The head reuses the token embedding matrix as its output projection ("weight tying"): the same
// Tensor is registered in both the embedding and the head, so it receives gradient from both uses
// and is listed (and counted, saved and updated) once, as "embed.wte.weight".
//
// For pipeline parallelism the model is also an ordered list of one-tensor-in, one-tensor-out
// modules — layers() = [embed, blocks[0], ..., blocks[n_layer-1], head] — and running them in order
// is exactly forward(). A stage that holds the head but not the embedding still holds the tied
// tensor (as the head's "wte" parameter); keeping the two copies equal is then the pipeline's job.
//
// Weights are a pure function of the config: the constructor draws from Generator(config.seed) in
// construction order — Linear/Embedding weights ~ N(0, 0.02), residual projections (attn.proj and
// mlp.proj) ~ N(0, 0.02 / sqrt(2 * n_layer)), biases 0, norm weights 1.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "nn/activation.h"
#include "nn/embedding.h"
#include "nn/init.h"
#include "nn/kv_cache.h"
#include "nn/module.h"
#include "nn/norm.h"
#include "nn/sequential.h"
#include "nn/transformer.h"

namespace brigade::nn {

// How GPT::generate picks each next token.
// How finely GPT::layers() cuts the model for a pipeline.
enum class LayerGrain { block, half_block };

struct GenerateOptions {
  // 0: greedy, the most likely token. Otherwise a sample from softmax(logits / temperature): below 1
  // sharper, above 1 flatter.
  double temperature = 0;
  int64_t top_k = 0;        // sample only among the k most likely tokens (0: among all)
  int64_t vocab_limit = 0;  // never produce tokens >= this (a padded vocabulary's rows); 0: no limit
  uint64_t seed = 0;        // the samples are a function of (seed, step, row): Philox
  bool kv_cache = true;     // false: run the whole context for every token (the reference)
};

struct GPTConfig {
  int64_t vocab_size = 256;  // token ids are in [0, vocab_size)
  int64_t block_size = 128;  // the longest sequence (T) the position embedding covers
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;  // C; must be divisible by n_head
  double dropout = 0;
  bool bias = true;  // biases in Linear and LayerNorm layers
  DType dtype = DType::f32;  // the parameters' dtype (the master weights under mixed precision)
  // The activations' dtype (Module::set_compute_dtype); unset: the parameters' dtype. bf16 with f32
  // parameters is the usual mixed precision. The weights drawn do not depend on it.
  std::optional<DType> compute_dtype = std::nullopt;
  Device device = Device::cpu();
  uint64_t seed = 0;  // initial weights depend only on the config and this seed
  // Attention as one fused kernel each way (CausalSelfAttention::fused) or as separate ops.
  bool fused_attention = true;
};

// Stage 0 of the layer list: idx [B, T] (i32/i64) -> wte[idx] + wpe[positions], then dropout.
class GPTEmbedding : public Module {
 public:
  GPTEmbedding(int64_t vocab_size, int64_t block_size, int64_t n_embd, double dropout, const Init& init);
  std::string name() const override { return "GPTEmbedding"; }
  Tensor forward(const Tensor& idx) override;
  // The same for tokens at positions [first, first + T) (generation with a KV cache).
  Tensor forward_at(const Tensor& idx, int64_t first);

  const int64_t block_size;
  std::shared_ptr<Embedding> wte;  // token embedding [vocab_size, n_embd]
  std::shared_ptr<Embedding> wpe;  // position embedding [block_size, n_embd]
  std::shared_ptr<Dropout> drop;

 private:
  Tensor positions_;  // 0 .. block_size - 1 on the device last used
};

// Last stage of the layer list: h [B, T, C] -> ln_f -> logits [B, T, vocab_size] = h @ wte^T.
class GPTHead : public Module {
 public:
  // `tied_weight` is the token embedding's weight [vocab_size, n_embd] itself (not a copy).
  GPTHead(int64_t n_embd, bool bias, Tensor tied_weight, const Init& init);
  std::string name() const override { return "GPTHead"; }
  Tensor forward(const Tensor& h) override;

  std::shared_ptr<LayerNorm> ln_f;
  Tensor wte;  // the same Tensor as GPTEmbedding::wte->weight
};

class GPT : public Module {
 public:
  explicit GPT(const GPTConfig& config);

  std::string name() const override { return "GPT"; }
  std::string details() const override;

  // idx [B, T] integer token ids, T <= block_size -> logits [B, T, vocab_size].
  Tensor forward(const Tensor& idx) override;
  // Mean cross-entropy of the next-token predictions: logits(idx) against targets [B, T]; targets
  // equal to -1 are ignored (e.g. prompt positions that need no prediction).
  Tensor loss(const Tensor& idx, const Tensor& targets);
  // Appends max_new_tokens tokens to idx [B, T] (i64 result, on idx's device), each chosen from the
  // logits of the last position (see GenerateOptions: greedy by default), feeding at most the last
  // block_size tokens back in. Runs without recording. With the KV cache each step runs only the
  // new token while the sequence fits block_size; past it, the window slides and every step runs the
  // whole window, exactly as without the cache.
  Tensor generate(const Tensor& idx, int64_t max_new_tokens, const GenerateOptions& options = {});
  // Logits [B, T, vocab_size] of idx [B, T], the tokens after the cache's cache.length positions,
  // which it then holds too. Equals the last T positions of forward() on the whole sequence.
  Tensor forward_cached(const Tensor& idx, KVCache& cache);

  // [embed, blocks 0..n_layer-1, head]: applying them in order equals forward(). With
  // LayerGrain::half_block each block is two layers, its attention half and its MLP half
  // (TransformerBlock::attention_half): finer pieces for a pipeline to balance.
  std::vector<std::shared_ptr<Module>> layers(LayerGrain grain = LayerGrain::block) const;

  const GPTConfig& config() const { return config_; }

  std::shared_ptr<GPTEmbedding> embed;
  std::shared_ptr<Sequential> blocks;  // of TransformerBlock, named "blocks.0", "blocks.1", ...
  std::shared_ptr<GPTHead> head;

 private:
  GPTConfig config_;
};

// The token GPT::generate appends at step `step` (0 for the first new token) to each row, from that
// row's logits [B, V] of the last position (see GenerateOptions), as [B, 1] i64 on `device`. For
// decoding elsewhere (through a pipeline's stages) with exactly generate's choices.
Tensor choose_next_token(const Tensor& logits, const GenerateOptions& options, int64_t step, Device device);

// The loss GPT::loss applies to its logits: mean cross-entropy of logits [B, T, V] against targets
// [B, T], targets equal to -1 ignored; bf16/f16 logits are converted to f32 first (an f32 loss). A pipeline's last stage (which runs the head) uses it as its
// loss function, so pipelined and one-device training compute the same numbers.
Tensor language_model_loss(const Tensor& logits, const Tensor& targets);

}  // namespace brigade::nn
