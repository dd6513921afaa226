#include "nn/transformer.h"

#include "autograd/functions.h"

namespace brigade::nn {

TransformerBlock::TransformerBlock(int64_t n_embd, int64_t n_head, const TransformerBlockOptions& o) : arch(o.arch) {
  BRIGADE_CHECK(o.halves.attention || o.halves.mlp, "TransformerBlock: build at least one of its halves");
  const int64_t hidden = o.mlp_hidden > 0 ? o.mlp_hidden : 4 * n_embd;
  if (o.arch == Arch::llama) {
    BRIGADE_CHECK(o.dropout == 0, "TransformerBlock: a llama block has no dropout, got ", o.dropout);
    if (o.halves.attention) {
      rms1 = register_module("ln1", std::make_shared<RMSNorm>(n_embd, RMSNormOptions{.eps = o.norm_eps, .init = o.init.at("ln1")}));
      gqa = register_module("attn", std::make_shared<GroupedQueryAttention>(GroupedQueryAttentionOptions{
                                        .n_embd = n_embd, .n_head = n_head, .n_kv_head = o.n_kv_head,
                                        .qkv_bias = o.bias, .out_bias = o.bias, .rope = o.rope, .init = o.init.at("attn")}));
    }
    if (o.halves.mlp) {
      rms2 = register_module("ln2", std::make_shared<RMSNorm>(n_embd, RMSNormOptions{.eps = o.norm_eps, .init = o.init.at("ln2")}));
      swiglu = register_module("mlp", std::make_shared<SwiGLU>(SwiGLUOptions{.dim = n_embd, .hidden = hidden, .init = o.init.at("mlp")}));
    }
    return;
  }
  if (o.halves.attention) {
    ln1 = register_module("ln1", std::make_shared<LayerNorm>(n_embd, LayerNormOptions{.eps = o.norm_eps, .bias = o.bias, .init = o.init.at("ln1")}));
    attn = register_module("attn", std::make_shared<CausalSelfAttention>(
                                       n_embd, n_head,
                                       AttentionOptions{.dropout = o.dropout, .bias = o.bias, .init = o.init.at("attn")}));
  }
  if (o.halves.mlp) {
    ln2 = register_module("ln2", std::make_shared<LayerNorm>(n_embd, LayerNormOptions{.eps = o.norm_eps, .bias = o.bias, .init = o.init.at("ln2")}));
    mlp = register_module("mlp", std::make_shared<MLP>(n_embd, MLPOptions{.hidden = hidden, .bias = o.bias,
                                                                          .dropout = o.dropout, .init = o.init.at("mlp")}));
  }
}

namespace {

void check_whole(const TransformerBlock& block) {
  BRIGADE_CHECK(block.has_attention() && block.has_mlp(), "TransformerBlock: only its ",
                block.has_attention() ? "attention" : "MLP", " half was built; the whole block cannot run");
}

}  // namespace

// h = x + attn(ln1(x)); out = h + mlp(ln2(h)). In GPT-2's block the first residual add and ln2 are
// one fused kernel each way (LayerNorm::forward_add): the same bits as the two ops, one pass over the
// rows fewer. A llama block runs them as two ops (there is no fused add + RMSNorm), so its halves
// equal it bit for bit both ways.
Tensor TransformerBlock::forward(const Tensor& x) {
  check_whole(*this);
  if (arch == Arch::llama) {
    const Tensor h = x + (*gqa)((*rms1)(x));
    return h + (*swiglu)((*rms2)(h));
  }
  const auto [h, normed] = ln2->forward_add(x, (*attn)((*ln1)(x)));
  return h + (*mlp)(normed);
}

// `past` is where x's tokens sit in the sequence: a llama's rotary positions start there, on
// whichever pipeline stage this block runs.
Tensor TransformerBlock::forward_cached(const Tensor& x, KVCache::Layer& cache, int64_t past, int64_t capacity) {
  check_whole(*this);
  if (arch == Arch::llama) {
    const Tensor h = x + gqa->forward_cached((*rms1)(x), cache, past, capacity);
    return h + (*swiglu)((*rms2)(h));
  }
  const auto [h, normed] = ln2->forward_add(x, attn->forward_cached((*ln1)(x), cache, past, capacity));
  return h + (*mlp)(normed);
}

namespace {

// x + sublayer(norm(x)), holding the block's own modules.
template <class Norm, class Sublayer>
class ResidualHalf : public Module {
 public:
  ResidualHalf(std::string name, std::shared_ptr<Norm> norm, std::shared_ptr<Sublayer> sublayer,
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
  std::shared_ptr<Norm> norm_;
  std::shared_ptr<Sublayer> sublayer_;
};

}  // namespace

std::shared_ptr<Module> TransformerBlock::attention_half() {
  BRIGADE_CHECK(has_attention(), "TransformerBlock::attention_half: this block holds only its MLP half");
  if (arch == Arch::llama)
    return std::make_shared<ResidualHalf<RMSNorm, GroupedQueryAttention>>("BlockAttention", rms1, gqa, compute_dtype());
  return std::make_shared<ResidualHalf<LayerNorm, CausalSelfAttention>>("BlockAttention", ln1, attn, compute_dtype());
}

std::shared_ptr<Module> TransformerBlock::mlp_half() {
  BRIGADE_CHECK(has_mlp(), "TransformerBlock::mlp_half: this block holds only its attention half");
  if (arch == Arch::llama)
    return std::make_shared<ResidualHalf<RMSNorm, SwiGLU>>("BlockMLP", rms2, swiglu, compute_dtype());
  return std::make_shared<ResidualHalf<LayerNorm, MLP>>("BlockMLP", ln2, mlp, compute_dtype());
}

}  // namespace brigade::nn
