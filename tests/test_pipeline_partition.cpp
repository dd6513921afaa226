// Partitioning layers into pipeline stages: the balanced split against brute force, uniform and
// parameter-count splits, empty stages, no layer ever dropped, profiling (no timing is asserted),
// and the printed table.
#include <functional>
#include <limits>

#include "nn/gpt.h"
#include "pipeline/partition.h"
#include "test_util.h"

using namespace brigade;
using namespace brigade::pipeline;
using test::error_of;

namespace {

// Every contiguous split of n layers into S non-empty stages (S <= n), as bound vectors.
void all_splits(int64_t n, int64_t S, std::vector<int64_t>& bounds, std::vector<std::vector<int64_t>>& out) {
  const int64_t s = int64_t(bounds.size()) - 1;  // stages placed so far
  if (s == S - 1) {
    bounds.push_back(n);
    out.push_back(bounds);
    bounds.pop_back();
    return;
  }
  for (int64_t next = bounds.back() + 1; next <= n - (S - 1 - s); ++next) {
    bounds.push_back(next);
    all_splits(n, S, bounds, out);
    bounds.pop_back();
  }
}

struct Score {
  double max = 0;
  double squares = 0;
};

Score score(const std::vector<double>& costs, const std::vector<int64_t>& bounds) {
  Score sc;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    double c = 0;
    for (int64_t i = bounds[s]; i < bounds[s + 1]; ++i) c += costs[size_t(i)];
    sc.max = std::max(sc.max, c);
    sc.squares += c * c;
  }
  return sc;
}

// Brute force: the smallest maximum; among those the smallest sum of squares; among those the one
// whose bounds, read from the last stage backwards, are smallest (later stages take more layers).
// `fits`: which splits may be chosen at all (every one by default); empty when none does.
std::vector<int64_t> brute_force(const std::vector<double>& costs, int64_t S,
                                 const std::function<bool(const std::vector<int64_t>&)>& fits = nullptr) {
  std::vector<std::vector<int64_t>> splits;
  std::vector<int64_t> start = {0};
  all_splits(int64_t(costs.size()), S, start, splits);
  std::vector<int64_t> best;
  Score best_score{std::numeric_limits<double>::infinity(), 0};
  for (const auto& b : splits) {
    if (fits && !fits(b)) continue;
    const Score sc = score(costs, b);
    bool better = sc.max < best_score.max || (sc.max == best_score.max && sc.squares < best_score.squares);
    if (!better && sc.max == best_score.max && sc.squares == best_score.squares) {
      better = std::lexicographical_compare(b.rbegin(), b.rend(), best.rbegin(), best.rend());
    }
    if (better) {
      best = b;
      best_score = sc;
    }
  }
  return best;
}

void require_covers_every_layer(const std::vector<int64_t>& bounds, int64_t n, int64_t S) {
  REQUIRE(bounds.size() == size_t(S) + 1);
  REQUIRE(bounds.front() == 0);
  REQUIRE(bounds.back() == n);
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    REQUIRE(bounds[s] <= bounds[s + 1]);
    if (S <= n) REQUIRE(bounds[s] < bounds[s + 1]);  // no empty stage while there are layers enough
  }
}

nn::GPTConfig tiny_gpt() {
  nn::GPTConfig c{.vocab_size = 11, .block_size = 8, .n_layer = 3, .n_head = 2, .n_embd = 16, .seed = 7};
  return c;
}

}  // namespace

TEST_CASE("partition: balance() matches brute force on every small case", "[pipeline]") {
  Generator gen(3);
  for (int64_t n = 1; n <= 9; ++n) {
    for (int64_t S = 1; S <= n; ++S) {
      for (int trial = 0; trial < 12; ++trial) {
        // Small integer costs: many ties, and sums that are exact in floating point.
        std::vector<double> costs;
        for (double u : uniform({n}, 0, 6, DType::f64, Device::cpu(), &gen).to_vector()) costs.push_back(std::floor(u));
        if (trial == 0) costs.assign(size_t(n), 1.0);  // all alike
        INFO("n=" << n << " S=" << S << " trial " << trial);
        const std::vector<int64_t> got = balance(costs, S);
        require_covers_every_layer(got, n, S);
        const std::vector<int64_t> expected = brute_force(costs, S);
        CHECK(score(costs, got).max == score(costs, expected).max);
        CHECK(score(costs, got).squares == score(costs, expected).squares);
        CHECK(got == expected);
      }
    }
  }
  // Real-valued costs: the bottleneck still matches brute force.
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> costs = uniform({8}, 0, 1, DType::f64, Device::cpu(), &gen).to_vector();
    const int64_t S = 1 + trial % 8;
    INFO("trial " << trial);
    CHECK(score(costs, balance(costs, S)).max == Approx(score(costs, brute_force(costs, S)).max).epsilon(1e-12));
  }
}

TEST_CASE("partition: within a memory budget, the best split that fits, against brute force", "[pipeline]") {
  Generator gen(11);
  int infeasible = 0, constrained = 0;
  for (int64_t n = 1; n <= 8; ++n) {
    for (int64_t S = 1; S <= n; ++S) {
      for (int trial = 0; trial < 10; ++trial) {
        auto draw = [&](int64_t count, double hi) {
          std::vector<double> v;
          for (double u : uniform({count}, 0, hi, DType::f64, Device::cpu(), &gen).to_vector()) v.push_back(std::floor(u));
          return v;
        };
        const std::vector<double> costs = draw(n, 6);
        const std::vector<double> fixed = draw(n, 5), stash = draw(n, 4), flight = draw(S, 4);
        std::vector<LayerMemory> memory;
        for (int64_t i = 0; i < n; ++i) memory.push_back({int64_t(fixed[size_t(i)]), int64_t(stash[size_t(i)])});
        MemoryLimit limit;
        for (int64_t s = 0; s < S; ++s) limit.in_flight.push_back(1 + int(flight[size_t(s)]));
        // Budgets from tight (often nothing fits) to loose (time alone decides).
        limit.capacity.assign(size_t(S), int64_t(4 + 6 * trial));
        // The reference: every split, each stage's bytes summed here from the definition.
        auto fits = [&](const std::vector<int64_t>& b) {
          for (int64_t s = 0; s < S; ++s) {
            int64_t bytes = 0;
            for (int64_t i = b[size_t(s)]; i < b[size_t(s) + 1]; ++i)
              bytes += memory[size_t(i)].fixed + limit.in_flight[size_t(s)] * memory[size_t(i)].activations;
            if (bytes > limit.capacity[size_t(s)]) return false;
          }
          return true;
        };
        INFO("n=" << n << " S=" << S << " trial " << trial);
        const std::vector<int64_t> expected = brute_force(costs, S, fits);
        if (expected.empty()) {
          ++infeasible;
          CHECK(error_of([&] { partition_within_memory(costs, memory, limit); }).find("each holding a layer, fits") !=
                std::string::npos);
          continue;
        }
        const Partition got = partition_within_memory(costs, memory, limit, "ms");
        require_covers_every_layer(got.bounds, n, S);
        CHECK(fits(got.bounds));
        CHECK(got.bounds == expected);
        if (got.bounds != balance(costs, S)) ++constrained;  // the budget moved a cut
      }
    }
  }
  // Both kinds of case occurred, so the comparison above tested the constraint, not just balance().
  CHECK(infeasible > 20);
  CHECK(constrained > 10);
}

TEST_CASE("partition: every method keeps every layer exactly once, for many (layers, stages) pairs", "[pipeline]") {
  // Stages > layers included: the spare stages are empty and nothing is dropped or duplicated.
  Generator gen(5);
  for (int64_t n = 1; n <= 40; n += (n < 12 ? 1 : 7)) {
    for (int64_t S = 1; S <= 48; S += (S < 10 ? 1 : 9)) {
      INFO("n=" << n << " S=" << S);
      std::vector<double> costs = uniform({n}, 0, 3, DType::f64, Device::cpu(), &gen).to_vector();
      std::vector<LayerMemory> memory(size_t(n), LayerMemory{1, 1});
      MemoryLimit roomy;
      roomy.in_flight.assign(size_t(S), 2);
      roomy.capacity.assign(size_t(S), 3 * n);
      for (const Partition& p : {partition_uniform(n, S), partition_by_cost(costs, S),
                                 partition_within_memory(costs, memory, roomy)}) {
        require_covers_every_layer(p.bounds, n, S);
        std::vector<int> seen(size_t(n), 0);
        for (int64_t s = 0; s < S; ++s)
          for (int64_t i = p.begin(s); i < p.end(s); ++i) ++seen[size_t(i)];
        for (int64_t i = 0; i < n; ++i) {
          REQUIRE(seen[size_t(i)] == 1);
          REQUIRE(p.begin(p.stage_of_layer(i)) <= i);
          REQUIRE(i < p.end(p.stage_of_layer(i)));
        }
      }
    }
  }
}

TEST_CASE("partition: a per-rank budget becomes per-stage capacities; bad sizes are named", "[pipeline]") {
  const Layout layout{2, 2, Placement::interleaved};  // 4 stages, 2 per rank
  const MemoryLimit limit = memory_limit(layout, {4, 3, 2, 1}, 1000);
  CHECK(limit.capacity == std::vector<int64_t>{500, 500, 500, 500});
  CHECK(limit.bytes(0, {{10, 3}, {20, 5}}, 0, 2) == 30 + 4 * 8);
  CHECK(error_of([&] { memory_limit(layout, {1, 1}, 1000); }).find("2 in-flight counts for 4 stages") !=
        std::string::npos);
  CHECK(error_of([&] { memory_limit(layout, {1, 1, 1, 1}, 0); }).find("must be positive") != std::string::npos);
  CHECK(error_of([&] { partition_within_memory({1, 1}, {{1, -1}, {1, 1}}, limit); }).find("layer 0 has a negative") !=
        std::string::npos);
  // One layer larger than any stage may hold: the error says which and how much.
  const std::string e = error_of([&] { partition_within_memory({1, 1, 1, 1, 1}, {{1, 0}, {900, 0}, {1, 0}, {1, 0}, {1, 0}}, limit); });
  CHECK(e.find("no split of 5 layers into 4 stages, each holding a layer, fits 500 B per stage") != std::string::npos);
  CHECK(e.find("layer 1 alone needs 900 B with 1 in flight") != std::string::npos);
}

TEST_CASE("partition: uniform by layer count, the larger stages last", "[pipeline]") {
  const Partition p = partition_uniform(10, 4);
  CHECK(p.bounds == std::vector<int64_t>{0, 2, 4, 7, 10});
  CHECK(p.cost_name == "layers");
  CHECK(p.max_cost() == 3);
  for (int64_t n = 1; n <= 40; ++n) {
    for (int64_t S = 1; S <= n; ++S) {
      const Partition u = partition_uniform(n, S);
      require_covers_every_layer(u.bounds, n, S);
      for (int64_t s = 0; s < S; ++s) {
        CHECK(u.size(s) >= n / S);
        CHECK(u.size(s) <= (n + S - 1) / S);
        if (s > 0) CHECK(u.size(s) >= u.size(s - 1));
      }
    }
  }
}

TEST_CASE("partition: more stages than layers leaves the first stages empty and drops nothing", "[pipeline]") {
  const Partition p = partition_uniform(3, 5);
  CHECK(p.bounds == std::vector<int64_t>{0, 0, 0, 1, 2, 3});
  CHECK(p.size(0) == 0);
  CHECK(p.size(1) == 0);
  for (int64_t layer = 0; layer < 3; ++layer) CHECK(p.stage_of_layer(layer) == layer + 2);
  const Partition c = partition_by_cost({5, 1, 7}, 8);
  require_covers_every_layer(c.bounds, 3, 8);
  CHECK(c.max_cost() == 7);
  CHECK(error_of([&] { p.stage_of_layer(3); }).find("layer 3 is out of range [0, 3)") != std::string::npos);
}

TEST_CASE("partition: a balanced split of uneven costs", "[pipeline]") {
  // One heavy layer in the middle gets a stage to itself.
  const Partition p = partition_by_cost({1, 1, 1, 9, 1, 1, 1}, 3, "ms");
  CHECK(p.bounds == std::vector<int64_t>{0, 3, 4, 7});
  CHECK(p.max_cost() == 9);
  CHECK(p.cost(0) == 3);
  // Zero-cost layers are fine and never dropped.
  const Partition z = partition_by_cost({0, 0, 0, 0}, 2);
  require_covers_every_layer(z.bounds, 4, 2);
  CHECK(error_of([] { balance({1, -1}, 2); }).find("layer 1 has cost -1") != std::string::npos);
  CHECK(error_of([] { balance({1, NAN}, 2); }).find("finite and non-negative") != std::string::npos);
  CHECK(error_of([] { balance({1, 2}, 0); }).find("must be in [1, 2^20], got 0") != std::string::npos);
  CHECK(error_of([] { balance({}, 2); }).find("no layers") != std::string::npos);
}

TEST_CASE("partition: a GPT by parameter count, chained stage by stage, printed as a table", "[pipeline]") {
  nn::GPT gpt(tiny_gpt());
  const Layers layers = gpt.layers();  // embed, 3 blocks, head
  REQUIRE(layers.size() == 5);
  const Partition p = partition_by_parameters(layers, 3);
  require_covers_every_layer(p.bounds, 5, 3);
  CHECK(p.cost_name == "parameters");
  std::vector<double> params;
  for (const auto& l : layers) params.push_back(double(l->parameter_count()));
  CHECK(p.layer_costs == params);
  CHECK(p.bounds == brute_force(params, 3));

  // Running the stages one after another is the model's forward.
  Tensor idx = tensor({1, 2, 3, 4, 5, 6, 7, 8}, DType::i64).reshape({1, 8});
  Tensor x = idx;
  for (int64_t s = 0; s < p.stages(); ++s) {
    for (const auto& layer : stage_layers(layers, p, s)) x = layer->forward(x);
  }
  test::require_close(x, gpt.forward(idx).to_vector(), 0, 0);

  // Two ranks: stages 0, 2 on rank 0 and stage 1 on rank 1.
  const std::string table = describe_partition(p, layers, 2);
  INFO(table);
  CHECK(table.rfind("stage  rank  layers", 0) == 0);
  CHECK(table.find("parameters  cost (parameters)") != std::string::npos);
  CHECK(table.find("memory\n") != std::string::npos);
  CHECK(table.find("GPTEmbedding") != std::string::npos);
  CHECK(table.find("GPTHead") != std::string::npos);
  CHECK(table.find("largest stage: ") != std::string::npos);
  std::istringstream lines(table);
  std::string header, row0, row1, row2;
  std::getline(lines, header);
  std::getline(lines, row0);
  std::getline(lines, row1);
  std::getline(lines, row2);
  CHECK(row0.rfind("    0     0  ", 0) == 0);
  // Stage 0 holds the embedding (wte 11 x 16, wpe 8 x 16) and a block: f32 parameters, 4 bytes each.
  const int64_t stage0 = layers[0]->parameter_count() + layers[1]->parameter_count();
  CHECK(p.bounds[1] == 2);
  CHECK(row0.find(std::to_string(stage0 / 1000) + "," + std::to_string(stage0 % 1000)) != std::string::npos);
  CHECK(row0.find(std::to_string(stage0 * 4 / 1024) + ".0 KiB") != std::string::npos);
  CHECK(row1.rfind("    1     1  ", 0) == 0);
  CHECK(row2.rfind("    2     0  ", 0) == 0);

  const Partition all_blocks = partition_uniform(5, 1);
  const std::string one_stage = describe_partition(all_blocks, layers);
  CHECK(one_stage.find("    0     0  0-4     GPTEmbedding, TransformerBlock x3, GPTHead") != std::string::npos);
  CHECK(one_stage.find(" 5 (100.0%)  ") != std::string::npos);  // cost (layers): all 5
  CHECK(describe_partition(partition_uniform(5, 7), layers).find("(empty: passes its input on)") != std::string::npos);
  CHECK(error_of([&] { describe_partition(partition_uniform(4, 2), layers); }).find("covers 4 layers, but 5") !=
        std::string::npos);
  CHECK(error_of([&] { stage_layers(layers, p, 3); }).find("stage 3 is out of range") != std::string::npos);

  // ZB-V's layout on 2 ranks: stages 0 and 3 on rank 0, 1 and 2 (the turn) on rank 1.
  const std::string v = describe_partition(partition_uniform(5, 4), layers, Layout{2, 2, Placement::v_shape});
  INFO(v);
  for (const char* row : {"\n    0     0  ", "\n    1     1  ", "\n    2     1  ", "\n    3     0  "})
    CHECK(v.find(row) != std::string::npos);
  CHECK(error_of([&] { describe_partition(partition_uniform(5, 4), layers, Layout{2, 1}); })
            .find("the partition has 4 stages, but the layout 2") != std::string::npos);
}

TEST_CASE("partition: by measured time — one cost per layer, no gradients left behind", "[pipeline]") {
  nn::GPT gpt(tiny_gpt());
  const Layers layers = gpt.layers();
  Tensor idx = tensor({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1, 2, 3, 4, 5}, DType::i64).reshape({2, 8});
  // What the times are is the machine's business; that there is one finite time per layer is ours.
  const std::vector<double> seconds = profile_layers(layers, idx);
  REQUIRE(seconds.size() == layers.size());
  for (double s : seconds) {
    CHECK(std::isfinite(s));
    CHECK(s >= 0);
  }
  for (const Tensor& w : gpt.parameters()) CHECK(!w.grad().defined());
  // The forward is timed inside each forward + backward, so its median can never exceed theirs.
  for (const LayerProfile& l : profile_layer_costs(layers, idx)) {
    CHECK(l.forward_seconds > 0);
    CHECK(l.forward_seconds <= l.seconds);
    CHECK(l.stash_bytes > 0);
  }
  const Partition p = partition_by_time(layers, 2, idx);
  require_covers_every_layer(p.bounds, 5, 2);
  CHECK(p.cost_name == "seconds");
  CHECK(error_of([&] { profile_layers({}, idx); }).find("no layers") != std::string::npos);
  CHECK(error_of([&] { profile_layers(layers, Tensor()); }).find("undefined") != std::string::npos);
  // A layer that cannot take the input says which one failed.
  const Layers reversed(layers.rbegin(), layers.rend());
  CHECK(error_of([&] { profile_layers(reversed, idx); }).find("profile_layers: layer 0 (GPTHead) failed on input") !=
        std::string::npos);
}
