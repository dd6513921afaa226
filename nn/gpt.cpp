#include "nn/gpt.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/factory.h"
#include "core/rng.h"
#include "kernels/ops.h"

namespace brigade::nn {

int64_t mlp_hidden_of(const GPTConfig& c) {
  if (c.mlp_hidden > 0) return c.mlp_hidden;
  if (c.arch == Arch::gpt2) return 4 * c.n_embd;
  const int64_t two_thirds = (8 * c.n_embd + 2) / 3;  // 2/3 of 4 n_embd, rounded up
  return (two_thirds + 255) / 256 * 256;
}

// ---- GPTEmbedding ----

GPTEmbedding::GPTEmbedding(int64_t vocab_size, int64_t block, int64_t n_embd, double dropout, const Init& init,
                           EmbeddingKind k)
    : block_size(block), kind(k) {
  wte = register_module("wte", std::make_shared<Embedding>(vocab_size, n_embd, init.at("wte")));
  if (kind == EmbeddingKind::table) return;
  if (kind == EmbeddingKind::tokens_and_positions)
    wpe = register_module("wpe", std::make_shared<Embedding>(block, n_embd, init.at("wpe")));
  drop = register_module("drop", std::make_shared<Dropout>(dropout));
}

Tensor GPTEmbedding::forward(const Tensor& idx) { return forward_at(idx, 0); }

Tensor GPTEmbedding::forward_at(const Tensor& idx, int64_t first) {
  BRIGADE_CHECK(idx.dim() == 2 && is_integral(idx.dtype()), "GPT: expected token ids [B, T] (i32/i64), got ",
                shape_str(idx.shape()), " ", dtype_name(idx.dtype()));
  BRIGADE_CHECK(runs(), "GPTEmbedding: this one holds the token table alone (a model holding the head "
                "but not the embedding), so it cannot embed tokens");
  const int64_t T = idx.size(1);
  BRIGADE_CHECK(first >= 0 && first + T <= block_size, "GPT: sequence length ", T,
                first > 0 ? " after " + std::to_string(first) + " cached positions" : std::string(),
                " exceeds block_size ", block_size);
  if (!wpe) return (*drop)((*wte)(idx));  // a llama: positions are rotary, in every block
  // Every position id, made once per device and sliced: no host-to-device copy per forward (which
  // also keeps the forward capturable into a CUDA graph, where a copy from the CPU is refused). Not
  // a buffer: it is derived data, so it stays out of state_dict and checkpoints.
  if (!positions_.defined() || positions_.device() != idx.device())
    positions_ = arange(0.0, double(block_size), 1, DType::i64, idx.device());
  const Tensor positions = positions_.narrow(0, first, T);
  return (*drop)((*wte)(idx) + (*wpe)(positions));  // [B, T, C] + [T, C] broadcasts
}

// ---- GPTHead ----

GPTHead::GPTHead(const GPTConfig& c, Tensor tied_weight, const Init& init) {
  if (c.arch == Arch::gpt2)
    ln_f = register_module("ln_f", std::make_shared<LayerNorm>(
                                       c.n_embd, LayerNormOptions{.eps = c.norm_eps, .bias = c.bias, .init = init.at("ln_f")}));
  else
    rms_f = register_module("ln_f", std::make_shared<RMSNorm>(c.n_embd, RMSNormOptions{.eps = c.norm_eps, .init = init.at("ln_f")}));
  if (!c.tie_embeddings) {
    lm_head = register_module("lm_head", std::make_shared<Linear>(c.n_embd, c.vocab_size,
                                                                  LinearOptions{.bias = false, .init = init.at("lm_head")}));
    return;
  }
  BRIGADE_CHECK(tied_weight.defined() && tied_weight.dim() == 2 && tied_weight.size(1) == c.n_embd,
                "GPTHead: the tied weight must be [vocab_size, ", c.n_embd, "]");
  wte = register_parameter("wte", tied_weight);
}

Tensor GPTHead::forward(const Tensor& h) {
  const Tensor normed = ln_f ? (*ln_f)(h) : (*rms_f)(h);
  if (lm_head) return (*lm_head)(normed);
  // No separate output matrix: scoring h against every token embedding is the tie.
  return linear(normed, wte, Tensor());
}

// ---- GPT ----

GPT::GPT(const GPTConfig& c) : GPT(c, LayerGrain::block, [&c] {
  std::vector<int64_t> all(size_t(std::max<int64_t>(c.n_layer + 2, 0)));
  for (size_t i = 0; i < all.size(); ++i) all[i] = int64_t(i);
  return all;
}()) {}

GPT::GPT(const GPTConfig& c, LayerGrain grain, const std::vector<int64_t>& held) : config_(c) {
  check_config();
  const int64_t n = layer_count(c, grain), last = n - 1;
  std::vector<bool> mine(size_t(n), false);
  for (int64_t i : held) {
    BRIGADE_CHECK(i >= 0 && i < n, "GPT: layer ", i, " is outside 0..", last, " (", n, " layers of ", details(),
                  grain == LayerGrain::block ? " in blocks)" : " in half blocks)");
    mine[size_t(i)] = true;
  }
  whole_ = std::all_of(mine.begin(), mine.end(), [](bool b) { return b; });

  // Every random parameter draws from the stream of (seed, its full name): the same values whichever
  // layers are built (nn/init.h).
  const Init init = Init::keyed(c.seed, Init{.dtype = c.dtype,
                                             .device = c.device,
                                             .std = 0.02,
                                             .residual_std = 0.02 / std::sqrt(2.0 * double(c.n_layer))});
  // The embedding, or the token table alone for a tied head without it (the tied weight, drawn under
  // the embedding's name: the same bits as the embedding's stage has).
  const bool llama = c.arch == Arch::llama;
  const EmbeddingKind kind = !mine[0]  ? EmbeddingKind::table
                             : llama   ? EmbeddingKind::tokens
                                       : EmbeddingKind::tokens_and_positions;
  if (mine[0] || (mine[size_t(last)] && c.tie_embeddings))
    embed = register_module("embed", std::make_shared<GPTEmbedding>(c.vocab_size, c.block_size, c.n_embd, c.dropout,
                                                                    init.at("embed"), kind));
  blocks = register_module("blocks", std::make_shared<Sequential>());
  block_at_.resize(size_t(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    BlockHalves halves;
    if (grain == LayerGrain::block) {
      halves.attention = halves.mlp = mine[size_t(1 + i)];
    } else {
      halves.attention = mine[size_t(1 + 2 * i)];
      halves.mlp = mine[size_t(2 + 2 * i)];
    }
    if (!halves.attention && !halves.mlp) continue;
    const std::string name = std::to_string(i);
    auto block = std::make_shared<TransformerBlock>(
        c.n_embd, c.n_head,
        TransformerBlockOptions{.arch = c.arch,
                                .dropout = c.dropout,
                                .bias = c.bias,
                                .n_kv_head = c.n_kv_head,
                                .mlp_hidden = mlp_hidden_of(c),
                                .norm_eps = c.norm_eps,
                                .rope = c.rope,
                                .init = init.at("blocks").at(name),
                                .halves = halves});
    if (block->attn) block->attn->fused = c.fused_attention;
    blocks->push_back(name, block);
    block_at_[size_t(i)] = block;
  }
  if (mine[size_t(last)])
    head = register_module("head", std::make_shared<GPTHead>(c, c.tie_embeddings ? embed->wte->weight : Tensor(),
                                                             init.at("head")));
  if (c.compute_dtype) set_compute_dtype(*c.compute_dtype);
}

void GPT::check_config() const {
  const GPTConfig& c = config_;
  BRIGADE_CHECK(c.vocab_size > 0 && c.block_size > 0 && c.n_layer > 0 && c.n_head > 0 && c.n_embd > 0,
                "GPT: vocab_size, block_size, n_layer, n_head and n_embd must be positive, got ", details());
  BRIGADE_CHECK(c.n_embd % c.n_head == 0, "GPT: n_embd=", c.n_embd, " must be divisible by n_head=", c.n_head);
  BRIGADE_CHECK(c.dropout >= 0 && c.dropout < 1, "GPT: dropout must be in [0, 1), got ", c.dropout);
  BRIGADE_CHECK(c.mlp_hidden >= 0 && c.norm_eps > 0, "GPT: mlp_hidden must be >= 0 (0: the family default) and "
                "norm_eps positive, got ", c.mlp_hidden, " and ", c.norm_eps);
  if (c.arch == Arch::gpt2) {
    BRIGADE_CHECK(c.n_kv_head == 0 || c.n_kv_head == c.n_head, "GPT: a gpt2 model has as many key/value heads as "
                  "heads; n_kv_head=", c.n_kv_head, " with n_head=", c.n_head, " needs arch llama");
    BRIGADE_CHECK(c.tie_embeddings, "GPT: a gpt2 model's head is tied to its token embedding; an untied head "
                  "needs arch llama");
    return;
  }
  const int64_t kv = c.n_kv_head == 0 ? c.n_head : c.n_kv_head;
  BRIGADE_CHECK(kv > 0 && c.n_head % kv == 0, "GPT: n_kv_head=", kv, " must divide n_head=", c.n_head);
  BRIGADE_CHECK((c.n_embd / c.n_head) % 2 == 0, "GPT: a llama's head dim n_embd / n_head = ", c.n_embd, " / ",
                c.n_head, " = ", c.n_embd / c.n_head, " must be even (rotary positions turn pairs)");
  BRIGADE_CHECK(c.dropout == 0, "GPT: a llama has no dropout, got ", c.dropout);
}

void GPT::check_whole(const char* what) const {
  BRIGADE_CHECK(whole_, "GPT::", what, ": this model holds only some of its layers (a pipeline rank's); run it "
                "through the pipeline, or build the whole model");
}

int64_t GPT::layer_count(const GPTConfig& c, LayerGrain grain) {
  return grain == LayerGrain::block ? c.n_layer + 2 : 2 * c.n_layer + 2;
}

std::vector<int64_t> GPT::layer_parameter_counts(const GPTConfig& c, LayerGrain grain) {
  const int64_t C = c.n_embd, b = c.bias ? 1 : 0, hidden = mlp_hidden_of(c), V = c.vocab_size;
  int64_t norm = 0, attention = 0, mlp = 0, embedding = 0;
  if (c.arch == Arch::gpt2) {
    norm = C + b * C;                                                  // LayerNorm weight (and bias)
    attention = norm + (3 * C * C + b * 3 * C) + (C * C + b * C);      // ln1, qkv, proj
    mlp = norm + (hidden * C + b * hidden) + (hidden * C + b * C);     // ln2, fc, proj
    embedding = V * C + c.block_size * C;                              // wte, wpe
  } else {
    const int64_t kv = (c.n_kv_head == 0 ? c.n_head : c.n_kv_head) * (C / c.n_head);  // k's (and v's) width
    norm = C;                                                            // RMSNorm weight
    attention = norm + 2 * (C * C + b * C) + 2 * (C * kv + b * kv);      // ln1, q and o, k and v
    mlp = norm + 3 * hidden * C;                                         // ln2, gate, up, down
    embedding = V * C;                                                   // wte
  }
  std::vector<int64_t> out{embedding};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    if (grain == LayerGrain::block) {
      out.push_back(attention + mlp);
    } else {
      out.push_back(attention);
      out.push_back(mlp);
    }
  }
  out.push_back(norm + V * C);  // ln_f and the tied token table, or lm_head
  return out;
}

int64_t GPT::whole_parameter_count(const GPTConfig& c) {
  int64_t total = 0;
  for (int64_t n : layer_parameter_counts(c, LayerGrain::block)) total += n;
  return total - (c.tie_embeddings ? c.vocab_size * c.n_embd : 0);  // the tied table once
}

std::shared_ptr<TransformerBlock> GPT::block(int64_t i) const {
  BRIGADE_CHECK(i >= 0 && i < config_.n_layer, "GPT::block: ", i, " is outside 0..", config_.n_layer - 1);
  return block_at_[size_t(i)];
}

std::string GPT::details() const {
  const GPTConfig& c = config_;
  std::string out = std::string(c.arch == Arch::llama ? arch_name(c.arch) + std::string(", ") : "") + "vocab_size=" + std::to_string(c.vocab_size) + ", block_size=" + std::to_string(c.block_size) +
                    ", n_layer=" + std::to_string(c.n_layer) + ", n_head=" + std::to_string(c.n_head) +
                    ", n_embd=" + std::to_string(c.n_embd);
  if (c.arch == Arch::llama)
    out += ", n_kv_head=" + std::to_string(c.n_kv_head == 0 ? c.n_head : c.n_kv_head) +
           ", mlp_hidden=" + std::to_string(mlp_hidden_of(c)) + (c.tie_embeddings ? ", tied" : ", untied");
  if (!whole_) out += ", some layers only";
  return out;
}

std::vector<std::shared_ptr<Module>> GPT::layers(LayerGrain grain) const {
  std::vector<std::shared_ptr<Module>> out{embed && embed->runs() ? embed : nullptr};
  for (const auto& block : block_at_) {
    const bool attention = block && block->has_attention(), mlp = block && block->has_mlp();
    if (grain == LayerGrain::block) {
      out.push_back(attention && mlp ? block : nullptr);
      continue;
    }
    out.push_back(attention ? block->attention_half() : nullptr);
    out.push_back(mlp ? block->mlp_half() : nullptr);
  }
  out.push_back(head);
  return out;
}

Tensor GPT::forward(const Tensor& idx) {
  check_whole("forward");
  return (*head)((*blocks)((*embed)(idx)));
}

Tensor GPT::loss(const Tensor& idx, const Tensor& targets) {
  BRIGADE_CHECK(targets.defined() && targets.shape() == idx.shape(), "GPT::loss: targets shape ",
                targets.defined() ? shape_str(targets.shape()) : std::string("(undefined)"),
                " differs from idx shape ", shape_str(idx.shape()));
  return language_model_loss((*this)(idx), targets);
}

Tensor language_model_loss(const Tensor& logits, const Tensor& targets) {
  BRIGADE_CHECK(logits.defined() && targets.defined() && logits.dim() == 3 && targets.dim() == 2 &&
                    logits.shape()[0] == targets.shape()[0] && logits.shape()[1] == targets.shape()[1],
                "language_model_loss: expected logits [B, T, V] and targets [B, T], got ",
                logits.defined() ? shape_str(logits.shape()) : std::string("(undefined)"), " and ",
                targets.defined() ? shape_str(targets.shape()) : std::string("(undefined)"));
  const int64_t rows = targets.numel();
  // Under bf16 compute the logits go in as they are: the fused loss reads them in bf16, computes in
  // f32 and returns an f32 loss (kernels/cross_entropy.cpp), so no f32 copy of the [B, T, V] logits
  // is made — the same bits as widening them first.
  return cross_entropy(logits.reshape({rows, logits.shape()[2]}), targets.reshape({rows}), -1);
}

Tensor GPT::forward_cached(const Tensor& x, KVCache& cache) {
  // The blocks this model holds, in order; a stage's part must be one run of whole blocks, so that
  // its output is the next stage's input.
  std::vector<TransformerBlock*> held;
  int64_t first = -1, last = -1;
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    const auto& block = block_at_[size_t(i)];
    if (!block) continue;
    BRIGADE_CHECK(block->has_attention() && block->has_mlp(), "GPT::forward_cached: this model holds half of block ",
                  i, "; a KV cache runs whole blocks (build the stage at LayerGrain::block)");
    BRIGADE_CHECK(last < 0 || i == last + 1, "GPT::forward_cached: this model holds blocks ", last, " and ", i,
                  " but not those between: it runs one run of consecutive layers");
    if (first < 0) first = i;
    last = i;
    held.push_back(block.get());
  }
  const bool embeds = embed && embed->runs();
  BRIGADE_CHECK((!embeds || first <= 0) && (!head || last < 0 || last == config_.n_layer - 1) &&
                    (embeds || head || !held.empty()),
                "GPT::forward_cached: the layers this model holds are not one run of consecutive layers (",
                details(), ")");
  BRIGADE_CHECK(cache.layers.size() == held.size() && cache.capacity == config_.block_size,
                "GPT::forward_cached: a KV cache of ", cache.layers.size(), " layers and ", cache.capacity,
                " positions does not fit this model's ", held.size(), " blocks and ", config_.block_size);
  // What operator() does for forward(): compute in the model's compute dtype.
  std::optional<Autocast> scope;
  if (compute_dtype()) scope.emplace(*compute_dtype());
  const int64_t past = cache.length;
  Tensor h = embeds ? embed->forward_at(x, past) : x;
  for (size_t i = 0; i < held.size(); ++i) h = held[i]->forward_cached(h, cache.layers[i], past, cache.capacity);
  cache.length = past + x.size(1);
  return head ? (*head)(h) : h;
}

Tensor choose_next_token(const Tensor& logits, const GenerateOptions& o, int64_t step, Device device) {
  const int64_t B = logits.size(0), V = o.vocab_limit > 0 ? std::min(o.vocab_limit, logits.size(1)) : logits.size(1);
  const Tensor usable = logits.slice(1, 0, V);
  if (o.temperature <= 0) return argmax(usable, -1, /*keepdim=*/true).to(device);
  const std::vector<double> values = usable.to(Device::cpu()).to(DType::f64).contiguous().to_vector();
  std::vector<double> next(static_cast<size_t>(B));
  std::vector<double> p(static_cast<size_t>(V));
  for (int64_t b = 0; b < B; ++b) {
    const double* row = values.data() + b * V;
    // Top-k: the k-th largest logit is the threshold (ties at it all stay in).
    double threshold = -std::numeric_limits<double>::infinity();
    if (o.top_k > 0 && o.top_k < V) {
      std::vector<double> sorted(row, row + V);
      std::nth_element(sorted.begin(), sorted.begin() + (o.top_k - 1), sorted.end(), std::greater<double>());
      threshold = sorted[size_t(o.top_k - 1)];
    }
    const double top = *std::max_element(row, row + V);
    double total = 0;
    for (int64_t j = 0; j < V; ++j) {
      p[size_t(j)] = row[j] >= threshold ? std::exp((row[j] - top) / o.temperature) : 0.0;
      total += p[size_t(j)];
    }
    // Inverse CDF at one Philox uniform per (step, row): the same tokens on every run and device.
    const double u = philox_uniform(o.seed, uint64_t(step * B + b)) * total;
    double acc = 0;
    int64_t pick = V - 1;
    for (int64_t j = 0; j < V; ++j) {
      acc += p[size_t(j)];
      if (u < acc && p[size_t(j)] > 0) {
        pick = j;
        break;
      }
    }
    while (pick > 0 && p[size_t(pick)] == 0) --pick;  // rounding left u past the last weight
    next[size_t(b)] = double(pick);
  }
  return from_vector(next, {B, 1}, DType::i64, device);
}


Tensor GPT::generate(const Tensor& idx, int64_t max_new_tokens, const GenerateOptions& options) {
  BRIGADE_CHECK(max_new_tokens >= 0, "GPT::generate: max_new_tokens must be non-negative, got ", max_new_tokens);
  BRIGADE_CHECK(options.top_k >= 0 && std::isfinite(options.temperature) && options.temperature >= 0,
                "GPT::generate: top_k must be >= 0 and temperature finite and >= 0, got ", options.top_k, " and ",
                options.temperature);
  BRIGADE_CHECK(idx.dim() == 2 && idx.size(1) >= 1, "GPT::generate: expected a prompt [B, T] with T >= 1, got ",
                shape_str(idx.shape()));
  check_whole("generate");
  NoGradGuard no_grad;
  Tensor out = ops::to_dtype(idx, DType::i64);
  KVCache cache(config_.n_layer, config_.block_size);
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    const int64_t T = out.size(1);
    Tensor last;  // [B, vocab_size]
    if (options.kv_cache && T <= config_.block_size) {
      last = forward_cached(out.slice(1, cache.length, T), cache).select(1, -1);
    } else {
      Tensor context = T > config_.block_size ? out.slice(1, T - config_.block_size, T) : out;
      last = (*this)(context).select(1, -1);
    }
    out = concat({out, choose_next_token(last, options, i, out.device())}, 1);
  }
  return out;
}

}  // namespace brigade::nn
