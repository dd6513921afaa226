#include "pipeline/analysis/gpt_costs.h"

#include "core/error.h"

namespace brigade::pipeline {

void GptShape::check() const {
  const std::pair<const char*, int64_t> sizes[] = {
      {"layers", layers}, {"heads", heads}, {"embd", embd}, {"context", context}, {"vocab", vocab}};
  for (const auto& [name, value] : sizes)
    BRIGADE_CHECK(value > 0, "GPT shape: ", name, " must be positive, got ", value);
  BRIGADE_CHECK(embd % heads == 0, "GPT shape: ", heads, " heads do not divide embd ", embd);
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

  std::vector<LayerEstimate> out;
  {
    LayerEstimate e{"GPTEmbedding"};
    e.parameters = V * C + T * C;
    // Only its output: the rows it looked up go once added (an add keeps no operands; the tape frees
    // what no backward reads, autograd/tape.h).
    out.push_back(finish(e, n * C * a, n * C * a, /*copies=*/false));
  }
  for (int64_t layer = 0; layer < shape.layers; ++layer) {
    LayerEstimate attention{"BlockAttention"};
    attention.parameters = 4 * C * C + 6 * C;  // ln1 2C, qkv 3C^2 + 3C, proj C^2 + C
    attention.forward = 2 * nd * 4 * Cd * Cd + 4 * double(sequences) * double(T) * double(T) * Cd;
    attention.input_grad = 2 * nd * 4 * Cd * Cd + 8 * double(sequences) * double(T) * double(T) * Cd;
    attention.weight_grad = 2 * nd * 4 * Cd * Cd;
    // ln1's output, q/k/v, the attention's output, the half's output (its input is the last layer's).
    out.push_back(finish(attention, 6 * n * C * a + stats + 4 * n * H, 5 * n * C * a));

    LayerEstimate mlp{"BlockMLP"};
    mlp.parameters = 8 * C * C + 7 * C;  // ln2 2C, fc 4C^2 + 4C, proj 4C^2 + C
    mlp.forward = mlp.input_grad = mlp.weight_grad = 2 * nd * 8 * Cd * Cd;
    // ln2's output, the GELU's input and output, the half's output.
    out.push_back(finish(mlp, 10 * n * C * a + stats, 6 * n * C * a));
  }
  {
    LayerEstimate head{"GPTHead"};
    head.parameters = V * C + 2 * C;  // the tied matrix and ln_f
    head.forward = head.input_grad = head.weight_grad = 2 * nd * Cd * double(V);
    const int64_t logits = n * V * a;  // the loss reads bf16 logits as they are: no f32 copy
    out.push_back(finish(head, n * C * a + stats + logits, n * C * a + n * V * a));
  }
  return out;
}

int64_t gpt_parameter_count(const GptShape& shape) {
  const int64_t C = shape.embd;
  return shape.vocab * C + shape.context * C + shape.layers * (12 * C * C + 13 * C) + 2 * C;
}

int64_t gpt_boundary_bytes(const GptShape& shape, int64_t sequences, DType compute) {
  return sequences * shape.context * shape.embd * int64_t(dtype_size(compute));
}

}  // namespace brigade::pipeline
