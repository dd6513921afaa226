// GPT: a decoder-only transformer language model, of two families (GPTConfig::arch).
//
//   GPT-2 (Arch::gpt2):
//   idx [B, T] token ids
//     -> embed: token embedding wte[idx] + position embedding wpe[0..T-1]   [B, T, C]
//     -> blocks: n_layer TransformerBlocks                                  [B, T, C]
//     -> head: final LayerNorm, then logits = h @ wte^T                     [B, T, vocab_size]
//
//   LLaMA (Arch::llama): embed is wte[idx] alone (positions are rotary, applied to q and k inside
//   every block's attention); blocks are RMSNorm -> grouped-query attention -> RMSNorm -> SwiGLU
//   (nn/transformer.h); head is a final RMSNorm, then h @ wte^T when tied or h @ lm_head^T when not.
//
// A tied head reuses the token embedding matrix as its output projection: the same Tensor is
// registered in both the embedding and the head, so it receives gradient from both uses and is
// listed (and counted, saved and updated) once, as "embed.wte.weight". An untied llama head has its
// own "head.lm_head.weight" and shares nothing with the embedding.
//
// For pipeline parallelism the model is also an ordered list of one-tensor-in, one-tensor-out
// modules — layers() = [embed, blocks[0], ..., blocks[n_layer-1], head] — and running them in order
// is exactly forward(). A stage that holds the head but not the embedding still holds the tied
// tensor (as the head's "wte" parameter); keeping the two copies equal is then the pipeline's job.
//
// A GPT can be built with only some of those layers (the constructor that takes a list of layer
// indices): what a pipeline rank holds. Layers it does not hold are never made — no modules, no
// tensors — and those it holds keep the whole model's names ("blocks.3.attn.qkv.weight"), so
// state dicts, checkpoints and optimizer state line up by name with the whole model's. Such a model
// is run through a pipeline (its layers()), not by forward(). When it holds a tied head but not the
// embedding, its `embed` is the token table alone (EmbeddingKind::table), so the tied weight is
// listed as "embed.wte.weight" there too.
//
// Weights are a pure function of (config.seed, each parameter's name): every random parameter draws
// from its own Philox stream, keyed by the seed and its full name (nn::Init::keyed, nn/init.h) —
// Linear/Embedding weights ~ N(0, 0.02), residual projections (attn.proj and mlp.proj; a llama's
// attn.o and mlp.down) ~
// N(0, 0.02 / sqrt(2 * n_layer)), biases 0, norm weights 1. So a model holding some layers starts
// from exactly the values the whole model has in those layers, whatever else was built, and every
// pipeline layout starts from the same bits as one device.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "kernels/params.h"
#include "nn/activation.h"
#include "nn/embedding.h"
#include "nn/init.h"
#include "nn/kv_cache.h"
#include "nn/module.h"
#include "nn/norm.h"
#include "nn/sequential.h"
#include "nn/transformer.h"

namespace brigade::nn {

// How finely GPT::layers() cuts the model for a pipeline.
enum class LayerGrain { block, half_block };

// How GPT::generate picks each next token.
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
  Arch arch = Arch::gpt2;  // nn/arch.h
  int64_t vocab_size = 256;  // token ids are in [0, vocab_size)
  int64_t block_size = 128;  // the longest sequence (T) the position embedding covers
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;  // C; must be divisible by n_head (llama: into an even head dim, for rope)
  double dropout = 0;
  // gpt2: biases in Linear and LayerNorm layers. llama: biases on the attention's q, k, v and o
  // projections (Hugging Face's attention_bias); a llama never has MLP or norm biases.
  bool bias = true;
  int64_t n_kv_head = 0;       // llama: key/value heads, dividing n_head; 0 means n_head
  int64_t mlp_hidden = 0;      // the MLP's hidden width; 0 means the family default (mlp_hidden_of)
  double norm_eps = 1e-5;      // LayerNorm (gpt2) or RMSNorm (llama) epsilon
  RopeParams rope = {};        // llama: theta and LLaMA 3's frequency scaling (kernels/params.h)
  bool tie_embeddings = true;  // llama may untie: the head then has its own lm_head weight
  DType dtype = DType::f32;  // the parameters' dtype (the master weights under mixed precision)
  // The activations' dtype (Module::set_compute_dtype); unset: the parameters' dtype. bf16 with f32
  // parameters is the usual mixed precision. The weights drawn do not depend on it.
  std::optional<DType> compute_dtype = std::nullopt;
  Device device = Device::cpu();
  uint64_t seed = 0;  // initial weights depend only on the config and this seed
  // Attention as one fused kernel each way (CausalSelfAttention::fused) or as separate ops.
  bool fused_attention = true;
};

// The MLP's hidden width: mlp_hidden when set, else GPT-2's 4 n_embd, or LLaMA's 2/3 of that
// rounded up to a multiple of 256 (Meta's rule: 4096 -> 11008).
int64_t mlp_hidden_of(const GPTConfig& config);

// What a GPTEmbedding is built as.
enum class EmbeddingKind {
  tokens_and_positions,  // GPT-2: wte[idx] + wpe[positions]
  tokens,                // LLaMA: wte[idx] (positions are rotary, in the attention)
  table,                 // the token table alone, for a tied head's stage: it does not run
};

// Stage 0 of the layer list: idx [B, T] (i32/i64) -> wte[idx] (+ wpe[positions]), then dropout.
class GPTEmbedding : public Module {
 public:
  // Children are built with init.at("wte") and init.at("wpe"). EmbeddingKind::table builds the token
  // table alone (wpe and drop stay null, forward refuses to run): what a model holding a tied head
  // but not the embedding keeps for the tied weight.
  GPTEmbedding(int64_t vocab_size, int64_t block_size, int64_t n_embd, double dropout, const Init& init,
               EmbeddingKind kind = EmbeddingKind::tokens_and_positions);
  std::string name() const override { return "GPTEmbedding"; }
  Tensor forward(const Tensor& idx) override;
  // The same for tokens at positions [first, first + T) (generation with a KV cache).
  Tensor forward_at(const Tensor& idx, int64_t first);

  // Whether this embedding embeds tokens (is a layer of the model), rather than keeping the table.
  bool runs() const { return kind != EmbeddingKind::table; }

  const int64_t block_size;
  const EmbeddingKind kind;
  std::shared_ptr<Embedding> wte;  // token embedding [vocab_size, n_embd]
  std::shared_ptr<Embedding> wpe;  // position embedding [block_size, n_embd]; null unless tokens_and_positions
  std::shared_ptr<Dropout> drop;

 private:
  Tensor positions_;  // 0 .. block_size - 1 on the device last used
};

// Last stage of the layer list: h [B, T, C] -> ln_f -> logits [B, T, vocab_size] = h @ wte^T (or,
// untied, h @ lm_head^T).
class GPTHead : public Module {
 public:
  // The config's family: a LayerNorm or RMSNorm ln_f (init.at("ln_f")). Tied when
  // config.tie_embeddings: `tied_weight` is then the token embedding's weight [vocab_size, n_embd]
  // itself (not a copy). Untied: its own lm_head (init.at("lm_head"), no bias).
  GPTHead(const GPTConfig& config, Tensor tied_weight, const Init& init);
  std::string name() const override { return "GPTHead"; }
  Tensor forward(const Tensor& h) override;

  std::shared_ptr<LayerNorm> ln_f;  // gpt2
  std::shared_ptr<RMSNorm> rms_f;   // llama, registered as "ln_f"
  Tensor wte;                       // the same Tensor as GPTEmbedding::wte->weight; undefined untied
  std::shared_ptr<Linear> lm_head;  // untied only: [vocab_size, n_embd]
};

class GPT : public Module {
 public:
  // The whole model.
  explicit GPT(const GPTConfig& config);
  // Only the layers `held` of layers(grain) (indices in that numbering, any order, repeats allowed;
  // checked against layer_count), with the values the whole model has there. Empty: nothing at all.
  GPT(const GPTConfig& config, LayerGrain grain, const std::vector<int64_t>& held);

  // How many layers layers(grain) lists: n_layer + 2, or 2 n_layer + 2 in halves.
  static int64_t layer_count(const GPTConfig& config, LayerGrain grain);
  // Parameter elements of each layer of layers(grain) (a tied head counts the token embedding, which
  // its stage holds a copy of; an untied one its lm_head), from the config alone: what a model
  // holding that layer adds.
  static std::vector<int64_t> layer_parameter_counts(const GPTConfig& config, LayerGrain grain);
  // Elements of the whole model's parameters (a tied weight once), from the config alone.
  static int64_t whole_parameter_count(const GPTConfig& config);

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
  // A model holding one run of consecutive layers (a pipeline stage's, at LayerGrain::block) runs
  // just those: its input is idx when it holds the embedding, else the previous stage's hidden
  // state [B, T, C]; its output the logits when it holds the head, else the hidden state. Its cache
  // has one layer per block it holds (in order), so a stage keeps only its own blocks' keys and values.
  Tensor forward_cached(const Tensor& x, KVCache& cache);

  // [embed, blocks 0..n_layer-1, head]: applying them in order equals forward(). With
  // LayerGrain::half_block each block is two layers, its attention half and its MLP half
  // (TransformerBlock::attention_half): finer pieces for a pipeline to balance. A model holding only
  // some layers lists every index all the same, with nullptr where it does not hold that layer (a
  // block counts as held when both its halves are).
  std::vector<std::shared_ptr<Module>> layers(LayerGrain grain = LayerGrain::block) const;

  const GPTConfig& config() const { return config_; }
  // Every layer built (the first constructor, or a list that covers them all).
  bool is_whole() const { return whole_; }
  // Block i, or null where this model holds none of it.
  std::shared_ptr<TransformerBlock> block(int64_t i) const;

  // Null where not held (the second constructor); `embed` is the token table alone when a tied head
  // is held without the embedding.
  std::shared_ptr<GPTEmbedding> embed;
  std::shared_ptr<Sequential> blocks;  // of TransformerBlock, named "blocks.0", "blocks.1", ... (the held ones)
  std::shared_ptr<GPTHead> head;

 private:
  void check_config() const;
  void check_whole(const char* what) const;
  GPTConfig config_;
  bool whole_ = true;
  std::vector<std::shared_ptr<TransformerBlock>> block_at_;  // n_layer entries, null where not held
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
