// nn/gpt2_hf.h: GPT-2 weights in the Hugging Face layout, read into an nn::GPT and written back.
#include "test_util.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/safetensors.h"
#include "core/json.h"
#include "core/read_file.h"
#include "nn/gpt2_hf.h"
#include "nn/hf_shards.h"
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
    // (Hugging Face's name, ours): each block's weights, the Conv1D ones (c_attn, c_proj, c_fc)
    // stored transposed, their biases as they are.
    static const std::pair<const char*, const char*> as_is[] = {
        {"ln_1.weight", "ln1.weight"},         {"ln_1.bias", "ln1.bias"},
        {"attn.c_attn.bias", "attn.qkv.bias"}, {"attn.c_proj.bias", "attn.proj.bias"},
        {"ln_2.weight", "ln2.weight"},         {"ln_2.bias", "ln2.bias"},
        {"mlp.c_fc.bias", "mlp.fc.bias"},      {"mlp.c_proj.bias", "mlp.proj.bias"}};
    static const std::pair<const char*, const char*> transposed[] = {
        {"attn.c_attn.weight", "attn.qkv.weight"}, {"attn.c_proj.weight", "attn.proj.weight"},
        {"mlp.c_fc.weight", "mlp.fc.weight"},      {"mlp.c_proj.weight", "mlp.proj.weight"}};
    for (const auto& [theirs, ours] : as_is) hf[h + theirs] = s.at(b + ours);
    for (const auto& [theirs, ours] : transposed) hf[h + theirs] = T(s.at(b + ours));
    // The causal-mask buffer older files carry: not a weight, skipped on reading.
    hf[h + "attn.bias"] = ones({1, 1, model.config().block_size, model.config().block_size});
  }
  hf[prefix + "ln_f.weight"] = s.at("head.ln_f.weight");
  hf[prefix + "ln_f.bias"] = s.at("head.ln_f.bias");
  return hf;
}

// Bit for bit: the same shape, dtype and bytes.
void require_same_bits(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  const Tensor g = got.contiguous(), w = want.contiguous();
  REQUIRE(std::memcmp(g.raw_data(), w.raw_data(), g.nbytes()) == 0);
}

// The bytes of a safetensors file's data area, from the file itself: its size less the 8-byte
// length and the header (the format's layout, core/safetensors.h).
int64_t data_bytes_of(const std::string& path) {
  const std::string bytes = read_file(path, "test");
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header * 256 + uint64_t(static_cast<unsigned char>(bytes[size_t(i)]));
  return int64_t(bytes.size()) - 8 - int64_t(header);
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

TEST_CASE("gpt2_hf: a GPT exported in shards reads back bit for bit; the index maps every tensor once and counts "
          "its bytes", "[checkpoint][gpt2_hf]") {
  TempDir dir("brigade_test_gpt2_hf_shards");
  nn::GPT original(small_config());
  // 4000 bytes: wte alone is 3200, a block's tensors about 12 KB, so many shards.
  const auto written = nn::save_hf_gpt2_dir(original, dir.file("hf"), 4000);
  REQUIRE(written.front() == "config.json");
  REQUIRE(written.back() == "model.safetensors.index.json");
  const int64_t shards = int64_t(written.size()) - 2;
  REQUIRE(shards > 4);
  // The index, parsed as JSON on its own, against the shards read back one by one.
  const std::string hf = dir.file("hf");
  const Json index = parse_json(read_file(hf + "/model.safetensors.index.json", "test"));
  std::map<std::string, std::string> where;  // tensor -> the shard that holds it, from the shards
  int64_t data_bytes = 0;
  for (int64_t i = 1; i <= shards; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05lld-of-%05lld.safetensors", (long long)i, (long long)shards);
    REQUIRE(written[size_t(i)] == name);
    const auto shard = load_safetensors(hf + "/" + name);
    REQUIRE(shard.metadata.at("format") == "pt");
    int64_t bytes = 0;
    for (const auto& [tensor, t] : shard.tensors) {
      REQUIRE(where.emplace(tensor, name).second);  // in one shard only
      bytes += int64_t(t.nbytes());
    }
    REQUIRE(bytes == data_bytes_of(hf + "/" + name));
    // At most the maximum, unless one tensor alone is larger.
    REQUIRE((bytes <= 4000 || shard.tensors.size() == 1));
    data_bytes += bytes;
  }
  REQUIRE(index["metadata"]["total_size"].as_number() == double(data_bytes));
  const Json& map = index["weight_map"];
  REQUIRE(map.members.size() == where.size());
  for (const auto& [tensor, shard] : map.members) {
    INFO(tensor);
    REQUIRE(where.count(tensor));
    REQUIRE(shard.string == where.at(tensor));
  }
  // The shards together are the single-file export, tensor for tensor.
  nn::save_hf_gpt2(original, dir.file("single.safetensors"));
  const auto single = load_safetensors(dir.file("single.safetensors")).tensors;
  REQUIRE(single.size() == where.size());
  for (const auto& [tensor, shard] : where) {
    INFO(tensor);
    require_same_bits(load_safetensors(hf + "/" + shard).tensors.at(tensor), single.at(tensor));
  }
  // config.json: the fields transformers needs beyond GPT-2's defaults.
  const Json config = parse_json(read_file(hf + "/config.json", "test"));
  REQUIRE(config["model_type"].string == "gpt2");
  REQUIRE(config["architectures"][0].string == "GPT2LMHeadModel");
  REQUIRE(config["n_layer"].as_number() == 2);
  REQUIRE(config["n_head"].as_number() == 2);
  REQUIRE(config["n_embd"].as_number() == 16);
  REQUIRE(config["n_positions"].as_number() == 16);
  REQUIRE(config["vocab_size"].as_number() == 50);
  // Read back, by the directory or by the index's path: the original's weights, bit for bit.
  REQUIRE(nn::hf_index_path(hf) == hf + "/model.safetensors.index.json");
  REQUIRE(nn::hf_index_path(hf + "/model.safetensors.index.json") == hf + "/model.safetensors.index.json");
  REQUIRE(nn::hf_index_path(dir.file("single.safetensors")).empty());
  nn::GPTConfig other_seed = small_config();
  other_seed.seed = 99;
  nn::GPT loaded(other_seed);
  nn::load_hf_gpt2_sharded(loaded, nn::hf_index_path(hf));
  for (const auto& [name, t] : original.state_dict()) {
    INFO(name);
    require_same_bits(loaded.state_dict().at(name), t);
  }
  // A large maximum: one model.safetensors and no index, and the shards of before are gone.
  const auto one = nn::save_hf_gpt2_dir(original, hf, int64_t(1) << 30);
  REQUIRE(one == std::vector<std::string>{"config.json", "model.safetensors"});
  std::set<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(hf)) left.insert(e.path().filename().string());
  REQUIRE(left == std::set<std::string>{"config.json", "model.safetensors"});
}

TEST_CASE("gpt2_hf: a sharded export that fails leaves no index; a missing shard or tensor is named", "[checkpoint][gpt2_hf]") {
  TempDir dir("brigade_test_gpt2_hf_shards");
  nn::GPT model(small_config());
  const std::string hf = dir.file("hf"), index = hf + "/model.safetensors.index.json";
  // The disk fills while the first shard is written: the index, written last, is not there.
  testing::fail_next_save_after(100);
  REQUIRE_THROWS(nn::save_hf_gpt2_dir(model, hf, 4000));
  testing::fail_next_save_after(-1);
  REQUIRE(nn::hf_index_path(hf).empty());
  REQUIRE(!std::filesystem::exists(index));
  const auto written = nn::save_hf_gpt2_dir(model, hf, 4000);
  nn::GPT loaded(small_config());
  // A tensor the weight map leaves out.
  const std::string text = read_file(index, "test");
  const std::string entry = "\"h.1.mlp.c_fc.bias\": ";
  const size_t at = text.find(entry);
  REQUIRE(at != std::string::npos);
  const size_t end = text.find('\n', at);
  std::string dropped = text.substr(0, at) + text.substr(end + 1);
  std::ofstream(index, std::ios::trunc) << dropped;
  REQUIRE_THROWS_WITH(nn::load_hf_gpt2_sharded(loaded, index),
                      Catch::Contains(index) && Catch::Contains("no tensor 'h.1.mlp.c_fc.bias'"));
  nn::GPT part(small_config(), nn::LayerGrain::block, {0, 1});  // a pipeline rank's: it does not hold h.1
  REQUIRE_THROWS_WITH(nn::load_hf_gpt2_sharded(part, index), Catch::Contains("no tensor 'h.1.mlp.c_fc.bias'"));
  std::ofstream(index, std::ios::trunc) << text;
  REQUIRE_NOTHROW(nn::load_hf_gpt2_sharded(loaded, index));
  // A shard the index names that is not there.
  const std::string gone = hf + "/" + written[2];
  std::filesystem::remove(gone);
  REQUIRE_THROWS_WITH(nn::load_hf_gpt2_sharded(loaded, index), Catch::Contains(index) && Catch::Contains(gone) &&
                                                                   Catch::Contains("missing"));
}

TEST_CASE("gpt2_hf: a pipeline rank's part reads only the shards of its own layers", "[checkpoint][gpt2_hf]") {
  TempDir dir("brigade_test_gpt2_hf_shards");
  nn::GPT original(small_config());
  const std::string hf = dir.file("hf"), index = hf + "/model.safetensors.index.json";
  nn::save_hf_gpt2_dir(original, hf, 4000);
  // Every shard that holds only block 1's tensors is overwritten with garbage: reading it would fail.
  const Json map = parse_json(read_file(index, "test"))["weight_map"];
  std::map<std::string, bool> only_block1;
  for (const auto& [tensor, shard] : map.members) {
    const bool mine = tensor.starts_with("h.1.");
    only_block1.emplace(shard.string, true).first->second &= mine;
  }
  int spoiled = 0;
  for (const auto& [shard, only] : only_block1)
    if (only) {
      std::ofstream(hf + "/" + shard, std::ios::trunc) << "not a safetensors file";
      ++spoiled;
    }
  REQUIRE(spoiled > 0);
  // The first rank of two: the embedding and block 0.
  nn::GPTConfig other_seed = small_config();
  other_seed.seed = 99;
  nn::GPT part(other_seed, nn::LayerGrain::block, {0, 1});
  nn::load_hf_gpt2_sharded(part, index);
  const auto whole = original.state_dict();
  for (const auto& [name, t] : part.state_dict()) {
    INFO(name);
    require_same_bits(t, whole.at(name));
  }
  // The whole model needs them, and says which file it could not read.
  nn::GPT all(other_seed);
  REQUIRE_THROWS_WITH(nn::load_hf_gpt2_sharded(all, index), Catch::Contains(hf + "/model-"));
}

TEST_CASE("gpt2_hf: a pipeline rank's part of a single Hugging Face file equals the whole model's there",
          "[checkpoint][gpt2_hf]") {
  // One file read as an index of one shard (hf_single_file_index: its header alone), so a rank reads
  // only its own layers' bytes, as from shards.
  TempDir dir("brigade_test_gpt2_hf_single_part");
  nn::GPT original(small_config());
  const std::string file = dir.file("model.safetensors");
  nn::save_hf_gpt2(original, file);
  const nn::HfIndex index = nn::hf_single_file_index(file);
  REQUIRE(index.weight_map.count("wte.weight") == 1);
  REQUIRE(index.weight_map.at("wte.weight") == "model.safetensors");
  nn::GPTConfig other_seed = small_config();
  other_seed.seed = 99;
  const int64_t last = nn::GPT::layer_count(small_config(), nn::LayerGrain::block) - 1;
  nn::GPT part(other_seed, nn::LayerGrain::block, {last - 1, last});  // the last block and the head
  nn::load_hf_gpt2_indexed(part, index);
  const auto whole = original.state_dict();
  for (const auto& [name, t] : part.state_dict()) {
    INFO(name);
    require_same_bits(t, whole.at(name));
  }
}
