// A tiny LLaMA in Hugging Face's layout, made by the test itself, and its logits computed in f64 by
// plain loops written from transformers' LlamaForCausalLM (not from brigade's code): embedding,
// RMSNorm, q/k/v projections, rotary positions in the "rotate_half" layout with LLaMA 3's frequency
// scaling, causal softmax attention with each key/value head shared by n_head / n_kv_head query
// heads, SwiGLU, the final norm and the head. The reference for tests/test_llama_hf.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace test {

struct TinyLlama {
  int64_t vocab = 37, hidden = 32, heads = 4, kv_heads = 2, intermediate = 48, layers = 2, context = 32;
  double eps = 0.05;  // large, so that reading it wrong changes the logits
  double theta = 10000;
  bool llama3 = true;  // rope_scaling {"rope_type": "llama3", ...} with these:
  double factor = 8, low_freq_factor = 1, high_freq_factor = 4, original_context = 64;
  bool tied = false;
  bool attention_bias = false;
  bool o_bias = true;  // with attention_bias: false as qwen2 (biases on q, k, v only)
  int64_t head_dim() const { return hidden / heads; }
};

struct Weight {
  std::vector<int64_t> shape;
  std::vector<double> values;  // already rounded to f32: what the file holds
};
using Weights = std::map<std::string, Weight>;  // Hugging Face names

// splitmix64: a seeded generator the test owns, so the weights are the same everywhere.
inline double uniform(uint64_t& state, double scale) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return scale * (double(z >> 11) / double(uint64_t(1) << 53) * 2 - 1);
}

// Every tensor LlamaForCausalLM of `m` has, named as transformers names them, with random values
// (norm weights around 1, so a swapped norm shows).
inline Weights make_weights(const TinyLlama& m, uint64_t seed) {
  uint64_t state = seed;
  Weights w;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, double center, double scale) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    Weight t{shape, {}};
    for (int64_t i = 0; i < n; ++i) t.values.push_back(double(float(center + uniform(state, scale))));
    w[name] = t;
  };
  const int64_t C = m.hidden, q = m.heads * m.head_dim(), kv = m.kv_heads * m.head_dim(), I = m.intermediate;
  add("model.embed_tokens.weight", {m.vocab, C}, 0, 1);
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {C}, 1, 0.3);
    add(p + "self_attn.q_proj.weight", {q, C}, 0, 0.3);
    add(p + "self_attn.k_proj.weight", {kv, C}, 0, 0.3);
    add(p + "self_attn.v_proj.weight", {kv, C}, 0, 0.3);
    add(p + "self_attn.o_proj.weight", {C, q}, 0, 0.3);
    if (m.attention_bias) {
      add(p + "self_attn.q_proj.bias", {q}, 0, 0.3);
      add(p + "self_attn.k_proj.bias", {kv}, 0, 0.3);
      add(p + "self_attn.v_proj.bias", {kv}, 0, 0.3);
      if (m.o_bias) add(p + "self_attn.o_proj.bias", {C}, 0, 0.3);
    }
    add(p + "post_attention_layernorm.weight", {C}, 1, 0.3);
    add(p + "mlp.gate_proj.weight", {I, C}, 0, 0.3);
    add(p + "mlp.up_proj.weight", {I, C}, 0, 0.3);
    add(p + "mlp.down_proj.weight", {C, I}, 0, 0.3);
  }
  add("model.norm.weight", {C}, 1, 0.3);
  if (!m.tied) add("lm_head.weight", {m.vocab, C}, 0, 0.3);
  return w;
}

// y = x W^T (+ b): torch.nn.Linear.
inline std::vector<double> linear(const Weights& w, const std::string& name, const std::vector<double>& x) {
  const Weight& W = w.at(name + ".weight");
  const int64_t out = W.shape[0], in = W.shape[1];
  auto b = w.find(name + ".bias");
  std::vector<double> y(size_t(out), 0);
  for (int64_t o = 0; o < out; ++o) {
    double s = b == w.end() ? 0 : b->second.values[size_t(o)];
    for (int64_t i = 0; i < in; ++i) s += W.values[size_t(o * in + i)] * x[size_t(i)];
    y[size_t(o)] = s;
  }
  return y;
}

// LlamaRMSNorm: x / sqrt(mean(x^2) + eps) * weight.
inline std::vector<double> rms_norm(const Weights& w, const std::string& name, const std::vector<double>& x,
                                    double eps) {
  double ms = 0;
  for (double v : x) ms += v * v;
  ms /= double(x.size());
  const std::vector<double>& g = w.at(name).values;
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] / std::sqrt(ms + eps) * g[i];
  return y;
}

// inv_freq of transformers' default rope, then _compute_llama3_parameters: long wavelengths divided
// by factor, short ones kept, those between blended.
inline std::vector<double> inv_freq(const TinyLlama& m) {
  const int64_t D = m.head_dim();
  const double pi = std::acos(-1.0);
  std::vector<double> f;
  for (int64_t i = 0; i < D; i += 2) f.push_back(1.0 / std::pow(m.theta, double(i) / double(D)));
  if (!m.llama3) return f;
  const double low_wavelen = m.original_context / m.low_freq_factor;
  const double high_wavelen = m.original_context / m.high_freq_factor;
  for (double& v : f) {
    const double wavelen = 2 * pi / v;
    if (wavelen > low_wavelen) {
      v = v / m.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (m.original_context / wavelen - m.low_freq_factor) / (m.high_freq_factor - m.low_freq_factor);
      v = (1 - smooth) * v / m.factor + smooth * v;
    }
  }
  return f;
}

// apply_rotary_pos_emb on one head's vector at `pos`: x cos + rotate_half(x) sin, where rotate_half
// is [-x2, x1] for the halves x1, x2, and cos/sin repeat the D/2 frequencies twice.
inline void rotate(std::vector<double>& x, int64_t offset, int64_t D, int64_t pos, const std::vector<double>& freq) {
  std::vector<double> out(static_cast<size_t>(D));
  for (int64_t i = 0; i < D; ++i) {
    const double angle = double(pos) * freq[size_t(i % (D / 2))];
    const double rotated = i < D / 2 ? -x[size_t(offset + i + D / 2)] : x[size_t(offset + i - D / 2)];
    out[size_t(i)] = x[size_t(offset + i)] * std::cos(angle) + rotated * std::sin(angle);
  }
  for (int64_t i = 0; i < D; ++i) x[size_t(offset + i)] = out[size_t(i)];
}

// Logits [T][vocab] of `tokens`.
inline std::vector<std::vector<double>> reference_logits(const TinyLlama& m, const Weights& w,
                                                         const std::vector<int64_t>& tokens) {
  const int64_t T = int64_t(tokens.size()), C = m.hidden, D = m.head_dim(), group = m.heads / m.kv_heads;
  const std::vector<double> freq = inv_freq(m);
  std::vector<std::vector<double>> h;
  for (int64_t t : tokens) {
    const auto& e = w.at("model.embed_tokens.weight").values;
    h.emplace_back(e.begin() + t * C, e.begin() + (t + 1) * C);
  }
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    std::vector<std::vector<double>> q, k, v;
    for (int64_t t = 0; t < T; ++t) {
      const std::vector<double> x = rms_norm(w, p + "input_layernorm.weight", h[size_t(t)], m.eps);
      q.push_back(linear(w, p + "self_attn.q_proj", x));
      k.push_back(linear(w, p + "self_attn.k_proj", x));
      v.push_back(linear(w, p + "self_attn.v_proj", x));
      for (int64_t hh = 0; hh < m.heads; ++hh) rotate(q.back(), hh * D, D, t, freq);
      for (int64_t hh = 0; hh < m.kv_heads; ++hh) rotate(k.back(), hh * D, D, t, freq);
    }
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> attended(size_t(m.heads * D), 0);
      for (int64_t hh = 0; hh < m.heads; ++hh) {
        const int64_t kvh = hh / group;  // repeat_kv: kv head j serves query heads j*group .. j*group+group-1
        std::vector<double> score;
        double top = -1e300;
        for (int64_t s = 0; s <= t; ++s) {
          double dot = 0;
          for (int64_t i = 0; i < D; ++i) dot += q[size_t(t)][size_t(hh * D + i)] * k[size_t(s)][size_t(kvh * D + i)];
          score.push_back(dot / std::sqrt(double(D)));
          top = std::max(top, score.back());
        }
        double total = 0;
        for (double& s : score) total += (s = std::exp(s - top));
        for (int64_t s = 0; s <= t; ++s)
          for (int64_t i = 0; i < D; ++i)
            attended[size_t(hh * D + i)] += score[size_t(s)] / total * v[size_t(s)][size_t(kvh * D + i)];
      }
      const std::vector<double> o = linear(w, p + "self_attn.o_proj", attended);
      for (int64_t c = 0; c < C; ++c) h[size_t(t)][size_t(c)] += o[size_t(c)];
      const std::vector<double> x = rms_norm(w, p + "post_attention_layernorm.weight", h[size_t(t)], m.eps);
      const std::vector<double> gate = linear(w, p + "mlp.gate_proj", x), up = linear(w, p + "mlp.up_proj", x);
      std::vector<double> act(gate.size());
      for (size_t i = 0; i < gate.size(); ++i) act[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];  // silu(gate) * up
      const std::vector<double> down = linear(w, p + "mlp.down_proj", act);
      for (int64_t c = 0; c < C; ++c) h[size_t(t)][size_t(c)] += down[size_t(c)];
    }
  }
  std::vector<std::vector<double>> logits;
  const std::string head = m.tied ? "model.embed_tokens" : "lm_head";
  for (int64_t t = 0; t < T; ++t)
    logits.push_back(linear(w, head, rms_norm(w, "model.norm.weight", h[size_t(t)], m.eps)));
  return logits;
}

// Greedy continuation: `n` tokens, each the argmax of the reference's last logits over the whole
// sequence so far (no cache).
inline std::vector<int64_t> reference_greedy(const TinyLlama& m, const Weights& w, std::vector<int64_t> tokens,
                                             int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<double> last = reference_logits(m, w, tokens).back();
    int64_t best = 0;
    for (int64_t j = 1; j < int64_t(last.size()); ++j)
      if (last[size_t(j)] > last[size_t(best)]) best = j;
    out.push_back(best);
    tokens.push_back(best);
  }
  return out;
}

}  // namespace test
