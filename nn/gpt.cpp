#include "nn/gpt.h"

#include <cmath>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/factory.h"
#include "kernels/ops.h"

namespace brigade::nn {

// ---- GPTEmbedding ----

GPTEmbedding::GPTEmbedding(int64_t vocab_size, int64_t block, int64_t n_embd, double dropout, const Init& init)
    : block_size(block) {
  wte = register_module("wte", std::make_shared<Embedding>(vocab_size, n_embd, init));
  wpe = register_module("wpe", std::make_shared<Embedding>(block, n_embd, init));
  drop = register_module("drop", std::make_shared<Dropout>(dropout));
}

Tensor GPTEmbedding::forward(const Tensor& idx) {
  BRIGADE_CHECK(idx.dim() == 2 && is_integral(idx.dtype()), "GPT: expected token ids [B, T] (i32/i64), got ",
                shape_str(idx.shape()), " ", dtype_name(idx.dtype()));
  const int64_t T = idx.size(1);
  BRIGADE_CHECK(T <= block_size, "GPT: sequence length ", T, " exceeds block_size ", block_size);
  Tensor positions = arange(T, DType::i64, idx.device());
  return (*drop)((*wte)(idx) + (*wpe)(positions));  // [B, T, C] + [T, C] broadcasts
}

// ---- GPTHead ----

GPTHead::GPTHead(int64_t n_embd, bool bias, Tensor tied_weight, const Init& init) {
  BRIGADE_CHECK(tied_weight.defined() && tied_weight.dim() == 2 && tied_weight.size(1) == n_embd,
                "GPTHead: the tied weight must be [vocab_size, ", n_embd, "]");
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(n_embd, 1e-5, true, bias, init));
  // Registered here too so a pipeline stage holding only the head still sees (and trains) it.
  wte = register_parameter("wte", tied_weight);
}

Tensor GPTHead::forward(const Tensor& h) {
  // No separate output matrix: scoring h against every token embedding is the tie.
  return linear((*ln_f)(h), wte, Tensor());
}

// ---- GPT ----

GPT::GPT(const GPTConfig& c) : config_(c) {
  BRIGADE_CHECK(c.vocab_size > 0 && c.block_size > 0 && c.n_layer > 0 && c.n_head > 0 && c.n_embd > 0,
                "GPT: vocab_size, block_size, n_layer, n_head and n_embd must be positive, got ", details());
  BRIGADE_CHECK(c.n_embd % c.n_head == 0, "GPT: n_embd=", c.n_embd, " must be divisible by n_head=", c.n_head);
  BRIGADE_CHECK(c.dropout >= 0 && c.dropout < 1, "GPT: dropout must be in [0, 1), got ", c.dropout);

  Generator gen(c.seed);
  Init init{.dtype = c.dtype,
            .device = c.device,
            .generator = &gen,
            .std = 0.02,
            .residual_std = 0.02 / std::sqrt(2.0 * double(c.n_layer))};
  embed = register_module("embed", std::make_shared<GPTEmbedding>(c.vocab_size, c.block_size, c.n_embd, c.dropout, init));
  blocks = register_module("blocks", std::make_shared<Sequential>());
  for (int64_t i = 0; i < c.n_layer; ++i)
    blocks->push_back(std::make_shared<TransformerBlock>(c.n_embd, c.n_head, c.dropout, c.bias, init));
  head = register_module("head", std::make_shared<GPTHead>(c.n_embd, c.bias, embed->wte->weight, init));
  if (c.compute_dtype) set_compute_dtype(*c.compute_dtype);
}

std::string GPT::details() const {
  const GPTConfig& c = config_;
  return "vocab_size=" + std::to_string(c.vocab_size) + ", block_size=" + std::to_string(c.block_size) +
         ", n_layer=" + std::to_string(c.n_layer) + ", n_head=" + std::to_string(c.n_head) +
         ", n_embd=" + std::to_string(c.n_embd);
}

std::vector<std::shared_ptr<Module>> GPT::layers() const {
  std::vector<std::shared_ptr<Module>> out{embed};
  out.insert(out.end(), blocks->layers().begin(), blocks->layers().end());
  out.push_back(head);
  return out;
}

Tensor GPT::forward(const Tensor& idx) { return (*head)((*blocks)((*embed)(idx))); }

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
  // Under bf16 compute the loss is taken in f32: the kernel accumulates in f32 either way, but a bf16
  // result would keep 3 significant digits of the loss and of each logit's gradient.
  const Tensor scores = is_half(logits.dtype()) ? to_dtype(logits, DType::f32) : logits;
  return cross_entropy(scores.reshape({rows, logits.shape()[2]}), targets.reshape({rows}), -1);
}

Tensor GPT::generate(const Tensor& idx, int64_t max_new_tokens) {
  BRIGADE_CHECK(max_new_tokens >= 0, "GPT::generate: max_new_tokens must be non-negative, got ", max_new_tokens);
  NoGradGuard no_grad;
  Tensor out = ops::to_dtype(idx, DType::i64);
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    const int64_t T = out.size(1);
    Tensor context = T > config_.block_size ? out.slice(1, T - config_.block_size, T) : out;
    Tensor last = (*this)(context).select(1, -1);                // [B, vocab_size]
    Tensor next = argmax(last, -1, /*keepdim=*/true);             // [B, 1] i64
    out = concat({out, next}, 1);
  }
  return out;
}

}  // namespace brigade::nn
