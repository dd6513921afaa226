// nn/gpt2_hf.h: GPT-2 weights in the Hugging Face layout, read into an nn::GPT and written back.
#include "test_util.h"

#include <fstream>

#include "core/safetensors.h"
#include "nn/gpt2_hf.h"
#include "temp_dir.h"

using namespace brigade;
using test::TempDir;

namespace {

nn::GPTConfig small_config(int64_t layers = 2) {
  nn::GPTConfig c;
  c.vocab_size = 50;
  c.block_size = 16;
  c.n_layer = layers;
  c.n_head = 2;
  c.n_embd = 768 / 48;  // 16
  c.seed = 3;
  return c;
}

// The test's own writer of the Hugging Face layout, spelled out name by name from the layout's
// documentation (not through nn/gpt2_hf.cpp's table): Conv1D weights are the transposes.
std::map<std::string, Tensor> hf_layout_by_hand(const nn::GPT& model, const std::string& prefix) {
  auto s = model.state_dict();
  auto T = [](const Tensor& w) { return w.transpose(0, 1).contiguous(); };
  std::map<std::string, Tensor> hf;
  hf[prefix + "wte.weight"] = s.at("embed.wte.weight");
  hf[prefix + "wpe.weight"] = s.at("embed.wpe.weight");
  for (int64_t i = 0; i < model.config().n_layer; ++i) {
    const std::string h = prefix + "h." + std::to_string(i) + ".", b = "blocks." + std::to_string(i) + ".";
    hf[h + "ln_1.weight"] = s.at(b + "ln1.weight");
    hf[h + "ln_1.bias"] = s.at(b + "ln1.bias");
    hf[h + "attn.c_attn.weight"] = T(s.at(b + "attn.qkv.weight"));
    hf[h + "attn.c_attn.bias"] = s.at(b + "attn.qkv.bias");
    hf[h + "attn.c_proj.weight"] = T(s.at(b + "attn.proj.weight"));
    hf[h + "attn.c_proj.bias"] = s.at(b + "attn.proj.bias");
    hf[h + "ln_2.weight"] = s.at(b + "ln2.weight");
    hf[h + "ln_2.bias"] = s.at(b + "ln2.bias");
    hf[h + "mlp.c_fc.weight"] = T(s.at(b + "mlp.fc.weight"));
    hf[h + "mlp.c_fc.bias"] = s.at(b + "mlp.fc.bias");
    hf[h + "mlp.c_proj.weight"] = T(s.at(b + "mlp.proj.weight"));
    hf[h + "mlp.c_proj.bias"] = s.at(b + "mlp.proj.bias");
    // The causal-mask buffer older files carry: not a weight, skipped on reading.
    hf[h + "attn.bias"] = ones({1, 1, model.config().block_size, model.config().block_size});
  }
  hf[prefix + "ln_f.weight"] = s.at("head.ln_f.weight");
  hf[prefix + "ln_f.bias"] = s.at("head.ln_f.bias");
  return hf;
}

Tensor some_tokens(int64_t B, int64_t T, int64_t vocab) {
  std::vector<double> ids;
  for (int64_t i = 0; i < B * T; ++i) ids.push_back(double((i * 7 + 3) % vocab));
  return from_vector(ids, {B, T}, DType::i64);
}

}  // namespace

TEST_CASE("gpt2_hf: a Hugging Face-layout file built by the test loads into a GPT with equal logits",
          "[checkpoint][gpt2_hf]") {
  TempDir dir("brigade_test_gpt2_hf");
  nn::GPT original(small_config());
  {  // a config.json beside the file, as Hugging Face writes it, gives the head count
    std::ofstream(dir.file("config.json")) << R"({"model_type": "gpt2", "n_head": 2, "n_layer": 2})";
  }
  for (const std::string prefix : {"", "transformer."}) {
    INFO("prefix '" << prefix << "'");
    save_safetensors(dir.file("model.safetensors"), hf_layout_by_hand(original, prefix), {{"format", "pt"}});
    REQUIRE(nn::is_hf_gpt2(load_safetensors(dir.file("model.safetensors")).tensors));
    REQUIRE(!nn::is_hf_gpt2(original.state_dict()));
    const nn::GPTConfig c = nn::hf_gpt2_config(dir.file("model.safetensors"));
    REQUIRE(c.n_layer == 2);
    REQUIRE(c.n_head == 2);
    REQUIRE(c.n_embd == 16);
    REQUIRE(c.block_size == 16);
    REQUIRE(c.vocab_size == 50);
    nn::GPTConfig other_seed = small_config();
    other_seed.seed = 99;
    nn::GPT loaded(other_seed);
    nn::load_hf_gpt2(loaded, dir.file("model.safetensors"));
    const Tensor idx = some_tokens(2, 16, 50);
    test::require_equal(loaded.forward(idx), original.forward(idx));
  }
  // Writing it back gives the test's own layout, tensor for tensor (the mask buffers apart).
  nn::save_hf_gpt2(original, dir.file("ours.safetensors"));
  const auto ours = load_safetensors(dir.file("ours.safetensors"));
  REQUIRE(ours.metadata.at("format") == "pt");
  auto by_hand = hf_layout_by_hand(original, "");
  std::erase_if(by_hand, [](const auto& entry) { return entry.first.ends_with(".attn.bias"); });
  REQUIRE(ours.tensors.size() == by_hand.size());
  for (auto& [name, t] : by_hand) {
    INFO(name);
    test::require_equal(ours.tensors.at(name), t);
  }
}

TEST_CASE("gpt2_hf: Conv1D weights are transposed — a hand-built 1-layer case computes x @ W + b",
          "[checkpoint][gpt2_hf]") {
  // Every tensor of a 1-layer, width-4 GPT-2 with distinct values; c_attn.weight[i][j] = i * 100 + j,
  // so a transpose (or a missed one) shows in which value lands where.
  const int64_t C = 4, V = 6, Tctx = 3;
  std::map<std::string, Tensor> hf;
  auto filled = [](Shape shape, double base) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<double> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(base + 0.01 * double(i));
    return from_vector(v, shape, DType::f32);
  };
  std::vector<double> attn;
  for (int64_t i = 0; i < C; ++i)
    for (int64_t j = 0; j < 3 * C; ++j) attn.push_back(double(i * 100 + j));
  hf["wte.weight"] = filled({V, C}, 1);
  hf["wpe.weight"] = filled({Tctx, C}, 2);
  hf["h.0.ln_1.weight"] = filled({C}, 3);
  hf["h.0.ln_1.bias"] = filled({C}, 4);
  hf["h.0.attn.c_attn.weight"] = from_vector(attn, {C, 3 * C}, DType::f32);
  hf["h.0.attn.c_attn.bias"] = filled({3 * C}, 5);
  hf["h.0.attn.c_proj.weight"] = filled({C, C}, 6);
  hf["h.0.attn.c_proj.bias"] = filled({C}, 7);
  hf["h.0.ln_2.weight"] = filled({C}, 8);
  hf["h.0.ln_2.bias"] = filled({C}, 9);
  hf["h.0.mlp.c_fc.weight"] = filled({C, 4 * C}, 10);
  hf["h.0.mlp.c_fc.bias"] = filled({4 * C}, 11);
  hf["h.0.mlp.c_proj.weight"] = filled({4 * C, C}, 12);
  hf["h.0.mlp.c_proj.bias"] = filled({C}, 13);
  hf["ln_f.weight"] = filled({C}, 14);
  hf["ln_f.bias"] = filled({C}, 15);
  nn::GPTConfig c;
  c.vocab_size = V + 2;  // padded: two zero rows appended
  c.block_size = Tctx;
  c.n_layer = 1;
  c.n_head = 1;
  c.n_embd = C;
  const auto ours = nn::state_dict_from_hf_gpt2(hf, c, "hand-built");
  const Tensor qkv = ours.at("blocks.0.attn.qkv.weight");  // [3C, C]: row j is output feature j
  REQUIRE(qkv.shape() == Shape{3 * C, C});
  for (int64_t j = 0; j < 3 * C; ++j)
    for (int64_t i = 0; i < C; ++i) REQUIRE(qkv.data<float>()[j * C + i] == float(i * 100 + j));
  // Linear(x) = x @ W^T + b with our W equals Conv1D(x) = x @ W_hf + b, checked in f64 by hand.
  nn::GPT model(c);
  model.load_state_dict(ours);
  const std::vector<double> x = {0.5, -1.0, 2.0, 0.25};
  auto block = std::dynamic_pointer_cast<nn::TransformerBlock>((*model.blocks)[0]);
  const Tensor y = (*block->attn->qkv)(from_vector(x, {1, C}, DType::f32));
  for (int64_t j = 0; j < 3 * C; ++j) {
    double want = hf["h.0.attn.c_attn.bias"].data<float>()[j];
    for (int64_t i = 0; i < C; ++i) want += x[size_t(i)] * double(i * 100 + j);
    REQUIRE(y.data<float>()[j] == Approx(want).epsilon(1e-6));
  }
  const Tensor wte = ours.at("embed.wte.weight");
  REQUIRE(wte.shape() == Shape{V + 2, C});
  for (int64_t k = 0; k < 2 * C; ++k) REQUIRE(wte.data<float>()[V * C + k] == 0.0f);
  // And back: the padding rows cut, the Conv1D layout restored.
  const auto back = nn::hf_gpt2_from_state_dict(ours, 1, V);
  for (auto& [name, t] : hf) {
    INFO(name);
    test::require_equal(back.at(name), t);
  }
}

TEST_CASE("gpt2_hf: files that are not a GPT-2 this model can hold are refused, naming the file and tensor",
          "[checkpoint][gpt2_hf]") {
  TempDir dir("brigade_test_gpt2_hf");
  nn::GPT model(small_config(1));
  auto hf = hf_layout_by_hand(model, "");
  auto missing = hf;
  missing.erase("h.0.mlp.c_fc.bias");
  REQUIRE_THROWS_WITH(nn::state_dict_from_hf_gpt2(missing, small_config(1), "f.safetensors"),
                      Catch::Contains("f.safetensors") && Catch::Contains("no tensor 'h.0.mlp.c_fc.bias'"));
  auto extra = hf;
  extra["h.0.attn.c_attn.lora"] = zeros({2});
  REQUIRE_THROWS_WITH(nn::state_dict_from_hf_gpt2(extra, small_config(1), "f.safetensors"),
                      Catch::Contains("'h.0.attn.c_attn.lora'"));
  auto untied = hf;
  untied["lm_head.weight"] = zeros(hf.at("wte.weight").shape());
  REQUIRE_THROWS_WITH(nn::state_dict_from_hf_gpt2(untied, small_config(1), "f.safetensors"),
                      Catch::Contains("lm_head.weight differs from wte.weight"));
  auto tied = hf;
  tied["lm_head.weight"] = hf.at("wte.weight").clone();
  REQUIRE_NOTHROW(nn::state_dict_from_hf_gpt2(tied, small_config(1), "f.safetensors"));
  // Width 16 is none of GPT-2's: without a config.json the head count is unknown.
  save_safetensors(dir.file("model.safetensors"), hf);
  REQUIRE_THROWS_WITH(nn::hf_gpt2_config(dir.file("model.safetensors")),
                      Catch::Contains("no config.json") && Catch::Contains("width 16"));
  // A model of another size.
  std::ofstream(dir.file("config.json")) << R"({"n_head": 2})";
  nn::GPT bigger(small_config(2));
  REQUIRE_THROWS_WITH(nn::load_hf_gpt2(bigger, dir.file("model.safetensors")),
                      Catch::Contains("holds a GPT-2 of 1 layers"));
}
