#include "pipeline/analysis/gpt_costs.h"

#include "core/error.h"
#include "nn/gpt.h"

namespace brigade::pipeline {

void GptShape::check() const {
  const std::pair<const char*, int64_t> sizes[] = {
      {"layers", layers}, {"heads", heads}, {"embd", embd}, {"context", context}, {"vocab", vocab}};
  for (const auto& [name, value] : sizes)
    BRIGADE_CHECK(value > 0, "GPT shape: ", name, " must be positive, got ", value);
  BRIGADE_CHECK(embd % heads == 0, "GPT shape: ", heads, " heads do not divide embd ", embd);
  BRIGADE_CHECK(kv_heads >= 0 && mlp_hidden >= 0, "GPT shape: kv_heads and mlp_hidden must be >= 0, got ", kv_heads,
                " and ", mlp_hidden);
  if (arch == nn::Arch::llama) {
    const int64_t kv = kv_heads == 0 ? heads : kv_heads;
    BRIGADE_CHECK(heads % kv == 0, "GPT shape: ", kv, " kv heads do not divide ", heads, " heads");
  } else {
    BRIGADE_CHECK((kv_heads == 0 || kv_heads == heads) && tied, "GPT shape: a gpt2 has as many kv heads as heads "
                  "and a tied head");
  }
}

GptShape gpt_shape(const nn::GPTConfig& c) {
  GptShape s;
  s.layers = c.n_layer;
  s.heads = c.n_head;
  s.embd = c.n_embd;
  s.context = c.block_size;
  s.vocab = c.vocab_size;
  s.arch = c.arch;
  s.kv_heads = c.n_kv_head;
  s.mlp_hidden = c.mlp_hidden;
  s.tied = c.tie_embeddings;
  return s;
}

nn::GPTConfig gpt_config(const GptShape& s) {
  nn::GPTConfig c;
  c.n_layer = s.layers;
  c.n_head = s.heads;
  c.n_embd = s.embd;
  c.block_size = s.context;
  c.vocab_size = s.vocab;
  c.arch = s.arch;
  c.n_kv_head = s.kv_heads;
  c.mlp_hidden = s.mlp_hidden;
  c.tie_embeddings = s.tied;
  if (s.arch == nn::Arch::llama) c.bias = false;
  return c;
}

std::vector<LayerEstimate> estimate_gpt_layers(const GptShape& shape, int64_t sequences, DType compute) {
  shape.check();
  BRIGADE_CHECK(sequences > 0, "estimate_gpt_layers: a micro-batch needs at least one sequence, got ", sequences);
  BRIGADE_CHECK(compute == DType::f32 || compute == DType::bf16, "estimate_gpt_layers: activations in f32 or bf16, got ",
                dtype_name(compute));
  const bool half = compute == DType::bf16;
  const int64_t a = int64_t(dtype_size(compute));
  const int64_t C = shape.embd, T = shape.context, V = shape.vocab, H = shape.heads;
  const int64_t n = sequences * T;  // tokens
  const double nd = double(n), Cd = double(C);
  const int64_t stats = 2 * n * 4;  // a norm's mean and rstd per row, f32

  // Everything but the stash follows from the parameters and the stash's activation part.
  // `copies`: whether autocast hands its matmuls bf16 copies of its parameters (the embedding only
  // converts the rows it looked up).
  auto finish = [&](LayerEstimate e, int64_t activations, int64_t deferred, bool copies = true) {
    e.weight_copies = half && copies ? 2 * e.parameters : 0;
    e.stash = activations + e.weight_copies;
    e.deferred = deferred;
    e.workspace = activations + 4 * e.parameters;
    return e;
  };

  const bool llama = shape.arch == nn::Arch::llama;
  // The parameters of each layer are nn::GPT's own count (from the config alone).
  const std::vector<int64_t> counts = nn::GPT::layer_parameter_counts(gpt_config(shape), nn::LayerGrain::half_block);
  const int64_t F = nn::mlp_hidden_of(gpt_config(shape));                       // the MLP's hidden width
  const int64_t kv = (shape.kv_heads == 0 ? H : shape.kv_heads) * (C / H);      // k's and v's width
  const double Fd = double(F), kvd = double(kv);
  const double scores = 4 * double(sequences) * double(T) * double(T) * Cd;     // the two T x T products, forward

  std::vector<LayerEstimate> out;
  {
    LayerEstimate e{"GPTEmbedding"};
    e.parameters = counts.front();
    // Only its output: the rows it looked up (and a gpt2's position rows) go once added or cast (an
    // add or a cast keeps no operands; the tape frees what no backward reads, autograd/tape.h).
    out.push_back(finish(e, n * C * a, n * C * a, /*copies=*/false));
  }
  // A llama's norms keep one statistic per row (rstd), not two.
  const int64_t norm_stats = llama ? n * 4 : stats;
  for (int64_t layer = 0; layer < shape.layers; ++layer) {
    LayerEstimate attention{"BlockAttention"};
    attention.parameters = counts[size_t(1 + 2 * layer)];
    // gpt2: qkv and proj, 4C^2 per token; llama: q and o 2C^2, k and v 2C kv.
    const double projections = 2 * nd * (llama ? 2 * Cd * Cd + 2 * Cd * kvd : 4 * Cd * Cd);
    attention.forward = projections + scores;
    attention.input_grad = projections + 2 * scores;
    attention.weight_grad = projections;
    // The norm's output (the projections' one input), the attention's q, k and v, its output, and the
    // heads merged for the output projection (its input is the last layer's; the residual add keeps
    // no operands). A llama's attention reads its k and v after rotation and repeated to every query
    // head — C wide each, whatever the kv heads — and the rotation and the repeat keep nothing: so
    // both families keep 6 C per token.
    const int64_t attention_stash = 6 * n * C * a;
    out.push_back(finish(attention, attention_stash + norm_stats + 4 * n * H, 5 * n * C * a));

    LayerEstimate mlp{"BlockMLP"};
    mlp.parameters = counts[size_t(2 + 2 * layer)];
    // gpt2: fc and proj, 2 C F per token; llama: gate, up and down, 3 C F.
    mlp.forward = mlp.input_grad = mlp.weight_grad = 2 * nd * (llama ? 3 : 2) * Cd * Fd;
    // The norm's output and the half's output, and the hidden width's tensors: gpt2 the GELU's input
    // and output, llama gate, up and their product.
    const int64_t mlp_stash = n * a * (2 * C + (llama ? 3 : 2) * F);
    out.push_back(finish(mlp, mlp_stash + norm_stats, 6 * n * C * a));
  }
  {
    LayerEstimate head{"GPTHead"};
    head.parameters = counts.back();  // ln_f and the tied matrix (or lm_head)
    head.forward = head.input_grad = head.weight_grad = 2 * nd * Cd * double(V);
    const int64_t logits = n * V * a;  // the loss reads bf16 logits as they are: no f32 copy
    out.push_back(finish(head, n * C * a + norm_stats + logits, n * C * a + n * V * a));
  }
  return out;
}

int64_t gpt_parameter_count(const GptShape& shape) { return nn::GPT::whole_parameter_count(gpt_config(shape)); }

int64_t gpt_boundary_bytes(const GptShape& shape, int64_t sequences, DType compute) {
  return sequences * shape.context * shape.embd * int64_t(dtype_size(compute));
}

}  // namespace brigade::pipeline
