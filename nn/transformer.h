// TransformerBlock: one pre-norm decoder layer, of either family nn::GPT builds.
//
//   x = x + attn(ln1(x))
//   x = x + mlp(ln2(x))
//
// Normalising before each sub-layer (GPT-2's choice, kept by LLaMA) keeps an unnormalised residual
// path from input to output, which is what lets deep stacks train without warm-up tricks.
//
//   Arch::gpt2   ln LayerNorm, attn CausalSelfAttention (one qkv matrix), mlp MLP (GELU)
//   Arch::llama  ln RMSNorm, attn GroupedQueryAttention (rotary, n_kv_head), mlp SwiGLU
//
// One block class holds either family's pieces rather than a LlamaBlock beside it, because the
// shape around the pieces is the same and is what the rest of the system depends on: the two
// residual halves a pipeline cuts (attention_half, mlp_half), the held-halves construction, the
// KV-cache step, and one block type for nn::GPT's block(i), layers() and decoding. The pieces of one
// family stay null in a block of the other; the registered names ("ln1", "attn", "ln2", "mlp") are
// the same, so parameters read "blocks.3.attn.q.weight" in a llama as "blocks.3.attn.qkv.weight" do
// in a GPT-2.
#pragma once

#include <memory>

#include "kernels/params.h"
#include "nn/arch.h"
#include "nn/attention.h"
#include "nn/grouped_attention.h"
#include "nn/init.h"
#include "nn/mlp.h"
#include "nn/module.h"
#include "nn/norm.h"
#include "nn/swiglu.h"

namespace brigade::nn {

// Which halves of a block to build. A pipeline that cuts blocks in two may hold only one half of a
// block (nn::GPT built with some of its half-block layers): the other half's modules are then never
// made, and the parameters that are keep their names ("attn.qkv.weight", "mlp.fc.weight").
struct BlockHalves {
  bool attention = true;  // ln1 and attn
  bool mlp = true;        // ln2 and mlp
};

struct TransformerBlockOptions {
  Arch arch = Arch::gpt2;
  double dropout = 0;  // gpt2 only
  // gpt2: in the norms and the projections. llama: on the attention's q, k, v and o only.
  bool bias = true;
  int64_t n_kv_head = 0;   // llama: key/value heads (0: n_head)
  int64_t mlp_hidden = 0;  // the MLP's hidden width; 0: 4 n_embd
  double norm_eps = 1e-5;
  RopeParams rope = {};    // llama
  // The children are built with init.at("ln1"), init.at("attn"), ...: with a by-name Init
  // (nn/init.h) whose path is the block's full name, each parameter draws from its own stream.
  Init init = {};
  BlockHalves halves = {};
};

class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t n_embd, int64_t n_head, const TransformerBlockOptions& options = {});

  std::string name() const override { return "TransformerBlock"; }
  Tensor forward(const Tensor& x) override;  // [B, T, C] -> [B, T, C]
  // The same block for tokens at positions [past, past + T), with the attention's KV cache
  // (CausalSelfAttention::forward_cached).
  Tensor forward_cached(const Tensor& x, KVCache::Layer& cache, int64_t past, int64_t capacity);

  // The block's two residual halves as layers of their own, so that a pipeline can cut a block in
  // two (GPT::layers(LayerGrain::half_block)): "BlockAttention" is x + attn(ln1(x)), "BlockMLP" is
  // x + mlp(ln2(x)); applied in order they equal forward(). They share this block's modules, so its
  // parameters (and their names in the GPT) stay what they are. The halves run the residual add and
  // ln2 as two ops where forward() fuses them: the same bits forward, a backward that may differ in
  // the last bit where the two paths into the residual are summed.
  // Each needs its half built (see BlockHalves); forward() needs both.
  std::shared_ptr<Module> attention_half();
  std::shared_ptr<Module> mlp_half();

  bool has_attention() const { return attn != nullptr || gqa != nullptr; }
  bool has_mlp() const { return mlp != nullptr || swiglu != nullptr; }

  const Arch arch;
  // Null when their half was not built, or in a block of the other family.
  // gpt2:
  std::shared_ptr<LayerNorm> ln1;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<LayerNorm> ln2;
  std::shared_ptr<MLP> mlp;
  // llama (registered under the same names: "ln1", "attn", "ln2", "mlp"):
  std::shared_ptr<RMSNorm> rms1;
  std::shared_ptr<GroupedQueryAttention> gqa;
  std::shared_ptr<RMSNorm> rms2;
  std::shared_ptr<SwiGLU> swiglu;
};

}  // namespace brigade::nn
