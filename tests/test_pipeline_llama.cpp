// A LLaMA-family nn::GPT (RMSNorm, rotary positions, grouped-query attention, SwiGLU; head tied or
// untied) through the pipeline, against the same model on one device: every schedule kind on 2 and 4
// ranks bit for bit (losses and gradients), blocks cut in halves, recomputation, bf16; each rank
// building exactly its own layers' parameters; and greedy decoding with per-stage KV caches equal
// to one device's tokens. The reference runs are pipeline_reference.h's, shared with the GPT-2 suite.
#include <set>

#include "every_schedule.h"
#include "comm/comm.h"
#include "comm/thread_ranks.h"
#include "nn/gpt.h"
#include "pipeline/gpt_decode.h"
#include "pipeline/gpt_stages.h"
#include "pipeline_reference.h"
#include "test_util.h"

using namespace brigade;
using namespace brigade::pipeline;
using namespace test::runtime;
using Catch::Contains;

namespace {

// 3 blocks (5 pipeline layers), 4 query heads sharing 2 kv heads of width 4, LLaMA 3's rope scaling
// (with a context of 16 original positions, one frequency in the smooth band and one scaled down).
nn::GPTConfig tiny_llama(bool tied) {
  nn::GPTConfig c = tiny_gpt();
  c.arch = nn::Arch::llama;
  c.n_embd = 16;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.mlp_hidden = 24;
  c.bias = false;
  c.tie_embeddings = tied;
  c.rope.theta = 500000;
  c.rope.llama3 = RopeLlama3Scaling{.factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                                    .original_max_position_embeddings = 16};
  return c;
}

// Which layer of layers(grain) a parameter belongs to, by its name (the head's stage also holds a tied
// token table: `tied_table_too`).
bool in_layer(const std::string& name, int64_t layer, const nn::GPTConfig& c, nn::LayerGrain grain) {
  const int64_t last = nn::GPT::layer_count(c, grain) - 1;
  if (layer == 0) return name.rfind("embed.", 0) == 0;
  if (layer == last) return name.rfind("head.", 0) == 0 || (c.tie_embeddings && name == "embed.wte.weight");
  if (grain == nn::LayerGrain::block) return name.rfind("blocks." + std::to_string(layer - 1) + ".", 0) == 0;
  const std::string block = "blocks." + std::to_string((layer - 1) / 2) + ".";
  const bool attention = (layer - 1) % 2 == 0;
  for (const char* part : attention ? std::vector<const char*>{"ln1.", "attn."} : std::vector<const char*>{"ln2.", "mlp."})
    if (name.rfind(block + part, 0) == 0) return true;
  return false;
}

int64_t numel_of(const nn::Module& m) {
  int64_t n = 0;
  for (const auto& [name, p] : m.named_parameters()) n += p.numel();
  return n;
}

}  // namespace

TEST_CASE("llama: the parameters are the contract's names and shapes, counted from the config", "[pipeline][llama]") {
  for (bool tied : {true, false}) {
    const nn::GPTConfig c = tiny_llama(tied);
    nn::GPT model(c);
    std::map<std::string, Shape> got;
    for (const auto& [name, p] : model.named_parameters()) got[name] = p.shape();
    std::map<std::string, Shape> want = {{"embed.wte.weight", {11, 16}}, {"head.ln_f.weight", {16}}};
    for (int b = 0; b < 3; ++b) {
      const std::string p = "blocks." + std::to_string(b) + ".";
      want[p + "ln1.weight"] = {16};
      want[p + "attn.q.weight"] = {16, 16};
      want[p + "attn.k.weight"] = {8, 16};  // 2 kv heads of 4
      want[p + "attn.v.weight"] = {8, 16};
      want[p + "attn.o.weight"] = {16, 16};
      want[p + "ln2.weight"] = {16};
      want[p + "mlp.gate.weight"] = {24, 16};
      want[p + "mlp.up.weight"] = {24, 16};
      want[p + "mlp.down.weight"] = {16, 24};
    }
    if (!tied) want["head.lm_head.weight"] = {11, 16};
    INFO((tied ? "tied" : "untied"));
    REQUIRE(got == want);
    REQUIRE(nn::GPT::whole_parameter_count(c) == numel_of(model));
    if (tied) REQUIRE(model.head->wte.same_as(model.embed->wte->weight));
    else REQUIRE_FALSE(model.head->lm_head->weight.same_as(model.embed->wte->weight));
  }
  // Refusals name the values.
  nn::GPTConfig bad = tiny_llama(true);
  bad.n_kv_head = 3;
  REQUIRE_THROWS_WITH(nn::GPT(bad), Contains("n_kv_head=3 must divide n_head=4"));
  bad = tiny_llama(true);
  bad.n_head = 16;  // a head dim of 1
  bad.n_kv_head = 0;
  REQUIRE_THROWS_WITH(nn::GPT(bad), Contains("head dim n_embd / n_head = 16 / 16 = 1 must be even"));
  nn::GPTConfig gpt2 = tiny_gpt();
  gpt2.tie_embeddings = false;
  REQUIRE_THROWS_WITH(nn::GPT(gpt2), Contains("an untied head needs arch llama"));
}

TEST_CASE("llama: each rank builds exactly its layers' parameters, with the whole model's values and counts",
          "[pipeline][llama]") {
  for (bool tied : {true, false}) {
    const nn::GPTConfig c = tiny_llama(tied);
    nn::GPT whole(c);
    const std::map<std::string, Tensor> whole_state = whole.state_dict();
    for (nn::LayerGrain grain : {nn::LayerGrain::block, nn::LayerGrain::half_block}) {
      const int64_t n = nn::GPT::layer_count(c, grain);
      const std::vector<int64_t> counts = nn::GPT::layer_parameter_counts(c, grain);
      REQUIRE(int64_t(counts.size()) == n);
      for (int64_t i = 0; i < n; ++i) {
        INFO((tied ? "tied" : "untied") << ", layer " << i << (grain == nn::LayerGrain::block ? " of blocks" : " of halves"));
        const nn::GPT one(c, grain, {i});
        REQUIRE(numel_of(one) == counts[size_t(i)]);
        REQUIRE(one.layers(grain)[size_t(i)] != nullptr);
      }
      for (int P : {2, 4}) {
        const Layout layout{P, 1};
        const Partition partition = partition_uniform(n, P);
        for (int rank = 0; rank < P; ++rank) {
          INFO((tied ? "tied" : "untied") << ", P=" << P << ", rank " << rank);
          const auto part = gpt_rank_model(c, partition, layout, rank, grain);
          std::set<std::string> held, expected;
          for (const auto& [name, t] : part->state_dict()) {
            held.insert(name);
            REQUIRE(t.to_vector() == whole_state.at(name).to_vector());
          }
          for (const auto& [name, t] : whole_state)
            for (int64_t i : rank_layers(partition, layout, rank))
              if (in_layer(name, i, c, grain)) expected.insert(name);
          REQUIRE(held == expected);
          // A tie only when tied and the two ends are on different stages.
          const GptStages stages = gpt_stages(*part, partition, layout, rank, grain);
          REQUIRE(stages.ties.size() == (tied ? 1u : 0u));
        }
      }
    }
  }
}

TEST_CASE("llama: every schedule on 2 and 4 ranks equals one device, bitwise on the CPU", "[pipeline][llama]") {
  std::vector<test::ScheduleCase> grid;
  for (ScheduleKind kind : {ScheduleKind::naive, ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1})
    for (int P : {2, 4}) grid.push_back({kind, P, 2 * P + 1, 1});
  for (int P : {2, 4}) {
    grid.push_back({ScheduleKind::interleaved, P, 2 * P, 2});
    grid.push_back({ScheduleKind::zb_v, P, 2 * P + 1, 2});
    grid.push_back({ScheduleKind::dualpipev, P, 2 * P, 2});
  }
  for (bool tied : {true, false}) {
    const nn::GPTConfig config = tiny_llama(tied);
    for (const test::ScheduleCase& g : grid) {
      DYNAMIC_SECTION((tied ? "tied " : "untied ") << schedule_name(g.kind) << " P=" << g.P << " M=" << g.M << " V=" << g.V) {
        const Batch batch = make_batch(g.M, uint64_t(g.P * 37 + g.M));
        const Result want = reference(batch, config);
        const Result got = pipelined(g.kind, g.P, g.M, g.V, batch, {}, config, comm::LocalSends::rendezvous);
        require_same(got, want, tolerant_name(g.P * g.V, config));
      }
    }
  }
}

TEST_CASE("llama: half blocks, recomputation and bf16 through the pipeline equal one device", "[pipeline][llama]") {
  const nn::GPTConfig untied = tiny_llama(false);
  SECTION("halves: a llama block's halves are the block's own ops, so they equal the whole-block model bitwise") {
    for (auto [kind, P, M, V] : {std::tuple{ScheduleKind::one_f_one_b, 4, 5, 1}, std::tuple{ScheduleKind::zb_v, 2, 4, 2}}) {
      const Batch batch = make_batch(M, 71);
      const Result want = reference(batch, untied, nn::LayerGrain::block);
      const Partition halves = partition_uniform(nn::GPT::layer_count(untied, nn::LayerGrain::half_block), P * V);
      require_same(pipelined(make_schedule(kind, P, M, V), batch, {}, untied, comm::LocalSends::rendezvous,
                             nn::LayerGrain::half_block, halves),
                   want, "");
    }
  }
  SECTION("recomputation") {
    const Batch batch = make_batch(5, 72);
    require_same(pipelined(ScheduleKind::zb_h1, 4, 5, 1, batch, recomputing(), untied), reference(batch, untied), "");
  }
  SECTION("bf16 compute, f32 master weights") {
    nn::GPTConfig config = tiny_llama(true);
    config.compute_dtype = DType::bf16;
    const Batch batch = make_batch(4, 73);
    require_same(pipelined(ScheduleKind::one_f_one_b, 2, 4, 1, batch, {}, config), reference(batch, config),
                 tolerant_name(2, config));
  }
}

TEST_CASE("llama: greedy decoding through 2 and 3 stages with their own KV caches equals one device's tokens",
          "[pipeline][llama][generate]") {
  for (bool tied : {true, false}) {
    const nn::GPTConfig config = tiny_llama(tied);
    nn::GPT whole(config);
    whole.eval();
    const Tensor prompt = tokens(2, 3, 17, false);
    nn::GenerateOptions cached, uncached, sampled;
    uncached.kv_cache = false;
    sampled.temperature = 1.0;  // samples follow the logits closely: any change of them shows
    sampled.top_k = 5;
    sampled.seed = 3;
    // 3 + 4 tokens stay inside the context of 8 (every step cached); 3 + 9 slide past it.
    for (int64_t new_tokens : {4, 9}) {
      const std::vector<double> reference_tokens = whole.generate(prompt, new_tokens, uncached).to_vector();
      REQUIRE(whole.generate(prompt, new_tokens, cached).to_vector() == reference_tokens);
      for (int P : {2, 3}) {
        INFO((tied ? "tied" : "untied") << ", P=" << P << ", " << new_tokens << " new tokens");
        const Partition partition = decode_partition(config, P);
        auto comms = comm::local_group(P);
        Tensor got;
        REQUIRE(test::all_ok(test::run_ranks(comms, [&](comm::Communicator& comm) {
          auto part = gpt_rank_model(config, partition, Layout{P, 1}, comm.rank());
          part->eval();
          const Tensor out = generate_through_stages(comm, *part, partition, comm.rank() == 0 ? prompt : Tensor(),
                                                     new_tokens, cached);
          if (comm.rank() == 0) got = out;
        })));
        REQUIRE(got.to_vector() == reference_tokens);
        const std::vector<double> sampled_tokens = whole.generate(prompt, new_tokens, sampled).to_vector();
        REQUIRE(test::all_ok(test::run_ranks(comms, [&](comm::Communicator& comm) {
          auto part = gpt_rank_model(config, partition, Layout{P, 1}, comm.rank());
          const Tensor out = generate_through_stages(comm, *part, partition, comm.rank() == 0 ? prompt : Tensor(),
                                                     new_tokens, sampled);
          if (comm.rank() == 0) got = out;
        })));
        REQUIRE(got.to_vector() == sampled_tokens);
      }
    }
  }
  // The logits themselves, step by step: the second stage turns its keys and queries by the positions
  // after the cached ones too (a stage that started its positions at 0 would score other tokens).
  const nn::GPTConfig config = tiny_llama(false);
  nn::GPT whole(config);
  const Tensor sequence = tokens(1, 7, 23, false);
  const Partition two = decode_partition(config, 2);
  auto first = gpt_rank_model(config, two, Layout{2, 1}, 0);
  auto last = gpt_rank_model(config, two, Layout{2, 1}, 1);
  int64_t first_blocks = 0;
  for (int64_t i = 0; i < config.n_layer; ++i) first_blocks += first->block(i) ? 1 : 0;
  nn::KVCache first_cache(first_blocks, config.block_size), last_cache(config.n_layer - first_blocks, config.block_size);
  NoGradGuard no_grad;
  const Tensor want = whole(sequence);  // [1, 7, vocab]
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 3}, {3, 4}, {4, 5}, {5, 7}}) {
    INFO("positions " << begin << ".." << end - 1);
    const Tensor got = last->forward_cached(first->forward_cached(sequence.slice(1, begin, end), first_cache), last_cache);
    test::require_close(got, want.slice(1, begin, end), 1e-5, 1e-6);
  }
  // The cache of a stage holds its blocks' kv heads only: 2, not the 4 query heads.
  REQUIRE(last_cache.layers[0].k.shape() == Shape{1, 2, config.block_size, 4});
}
