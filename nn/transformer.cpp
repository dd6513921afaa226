#include "nn/transformer.h"

#include "autograd/functions.h"

namespace brigade::nn {

TransformerBlock::TransformerBlock(int64_t n_embd, int64_t n_head, const TransformerBlockOptions& o) {
  BRIGADE_CHECK(o.halves.attention || o.halves.mlp, "TransformerBlock: build at least one of its halves");
  if (o.halves.attention) {
    ln1 = register_module("ln1", std::make_shared<LayerNorm>(n_embd, LayerNormOptions{.bias = o.bias, .init = o.init.at("ln1")}));
    attn = register_module("attn", std::make_shared<CausalSelfAttention>(
                                       n_embd, n_head,
                                       AttentionOptions{.dropout = o.dropout, .bias = o.bias, .init = o.init.at("attn")}));
  }
  if (o.halves.mlp) {
    ln2 = register_module("ln2", std::make_shared<LayerNorm>(n_embd, LayerNormOptions{.bias = o.bias, .init = o.init.at("ln2")}));
    mlp = register_module("mlp", std::make_shared<MLP>(n_embd, MLPOptions{.hidden = 4 * n_embd, .bias = o.bias,
                                                                          .dropout = o.dropout, .init = o.init.at("mlp")}));
  }
}

namespace {

void check_whole(const TransformerBlock& block) {
  BRIGADE_CHECK(block.has_attention() && block.has_mlp(), "TransformerBlock: only its ",
                block.has_attention() ? "attention" : "MLP", " half was built; the whole block cannot run");
}

}  // namespace

// h = x + attn(ln1(x)); out = h + mlp(ln2(h)). The first residual add and ln2 are one fused kernel
// each way (LayerNorm::forward_add): the same bits as the two ops, one pass over the rows fewer.
Tensor TransformerBlock::forward(const Tensor& x) {
  check_whole(*this);
  const auto [h, normed] = ln2->forward_add(x, (*attn)((*ln1)(x)));
  return h + (*mlp)(normed);
}

Tensor TransformerBlock::forward_cached(const Tensor& x, KVCache::Layer& cache, int64_t past, int64_t capacity) {
  check_whole(*this);
  const auto [h, normed] = ln2->forward_add(x, attn->forward_cached((*ln1)(x), cache, past, capacity));
  return h + (*mlp)(normed);
}

namespace {

// x + sublayer(norm(x)), holding the block's own modules.
template <class Sublayer>
class ResidualHalf : public Module {
 public:
  ResidualHalf(std::string name, std::shared_ptr<LayerNorm> norm, std::shared_ptr<Sublayer> sublayer,
               std::optional<DType> compute_dtype)
      : name_(std::move(name)) {
    norm_ = register_module("norm", std::move(norm));
    sublayer_ = register_module("sublayer", std::move(sublayer));
    if (compute_dtype) set_compute_dtype(*compute_dtype);
  }
  std::string name() const override { return name_; }
  Tensor forward(const Tensor& x) override { return x + (*sublayer_)((*norm_)(x)); }

 private:
  std::string name_;
  std::shared_ptr<LayerNorm> norm_;
  std::shared_ptr<Sublayer> sublayer_;
};

}  // namespace

std::shared_ptr<Module> TransformerBlock::attention_half() {
  BRIGADE_CHECK(has_attention(), "TransformerBlock::attention_half: this block holds only its MLP half");
  return std::make_shared<ResidualHalf<CausalSelfAttention>>("BlockAttention", ln1, attn, compute_dtype());
}

std::shared_ptr<Module> TransformerBlock::mlp_half() {
  BRIGADE_CHECK(has_mlp(), "TransformerBlock::mlp_half: this block holds only its attention half");
  return std::make_shared<ResidualHalf<MLP>>("BlockMLP", ln2, mlp, compute_dtype());
}

}  // namespace brigade::nn
