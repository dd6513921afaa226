#include "pipeline/partition.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/format.h"

namespace brigade::pipeline {

double Partition::cost(int64_t stage) const {
  double sum = 0;
  for (int64_t i = begin(stage); i < end(stage); ++i) sum += layer_costs.at(size_t(i));
  return sum;
}

double Partition::max_cost() const {
  double worst = 0;
  for (int64_t s = 0; s < stages(); ++s) worst = std::max(worst, cost(s));
  return worst;
}

int64_t Partition::stage_of_layer(int64_t layer) const {
  BRIGADE_CHECK(layer >= 0 && layer < layers(), "Partition::stage_of_layer: layer ", layer, " is out of range [0, ",
                layers(), ")");
  // The last stage whose range starts at or before the layer (skipping empty stages).
  const auto it = std::upper_bound(bounds.begin(), bounds.end(), layer);
  return int64_t(it - bounds.begin()) - 1;
}

namespace {

void check_split_arguments(const std::vector<double>& costs, int64_t stages) {
  const int64_t n = int64_t(costs.size());
  BRIGADE_CHECK(n >= 1, "partition: there are no layers to split into ", stages, " stages");
  BRIGADE_CHECK(stages >= 1 && stages <= (int64_t(1) << 20),
                "partition: the number of stages must be in [1, 2^20], got ", stages);
  for (int64_t i = 0; i < n; ++i) {
    BRIGADE_CHECK(std::isfinite(costs[size_t(i)]) && costs[size_t(i)] >= 0, "partition: layer ", i, " has cost ",
                  costs[size_t(i)], "; costs must be finite and non-negative");
  }
}

// May stage s hold layers [begin, end)? (Every range when there is no memory limit.)
using Allowed = std::function<bool(int64_t stage, int64_t begin, int64_t end)>;

// balance() under `allowed`: the two passes below skip every range a stage may not hold. Returns
// no bounds when no split fits.
std::vector<int64_t> balance_where(const std::vector<double>& costs, int64_t stages, const Allowed& allowed) {
  const int64_t n = int64_t(costs.size());
  std::vector<int64_t> bounds(size_t(stages) + 1, 0);
  if (stages >= n) {  // one layer per stage; the spare stages come first and stay empty
    for (int64_t s = 0; s <= stages; ++s) bounds[size_t(s)] = std::max<int64_t>(0, s - (stages - n));
    for (int64_t s = 0; s < stages; ++s)
      if (!allowed(s, bounds[size_t(s)], bounds[size_t(s) + 1])) return {};
    return bounds;
  }

  std::vector<double> prefix(size_t(n) + 1, 0.0);
  for (int64_t i = 0; i < n; ++i) prefix[size_t(i) + 1] = prefix[size_t(i)] + costs[size_t(i)];
  auto sum = [&](int64_t j, int64_t i) { return prefix[size_t(i)] - prefix[size_t(j)]; };
  const double inf = std::numeric_limits<double>::infinity();
  auto at = [&](std::vector<double>& table, int64_t s, int64_t i) -> double& {
    return table[size_t(s) * size_t(n + 1) + size_t(i)];
  };

  // Pass 1: worst[s][i] = the smallest possible maximum when the first i layers form s non-empty
  // stages. Stage s (1-based) covers layers [j, i) for some j >= s - 1.
  std::vector<double> worst(size_t(stages + 1) * size_t(n + 1), inf);
  for (int64_t i = 1; i <= n; ++i)
    if (allowed(0, 0, i)) at(worst, 1, i) = sum(0, i);
  for (int64_t s = 2; s <= stages; ++s) {
    for (int64_t i = s; i <= n; ++i) {
      double best = inf;
      for (int64_t j = s - 1; j < i; ++j)
        if (allowed(s - 1, j, i)) best = std::min(best, std::max(at(worst, s - 1, j), sum(j, i)));
      at(worst, s, i) = best;
    }
  }
  const double limit = at(worst, stages, n);
  if (limit == inf) return {};

  // Pass 2: among splits whose every stage costs at most `limit`, the smallest sum of squares.
  // (The stage sums are computed by the same expression as in pass 1, so the optimal split of pass 1
  // passes the test exactly.) Ties go to the smallest j, i.e. the later stage takes more layers.
  std::vector<double> squares(size_t(stages + 1) * size_t(n + 1), inf);
  std::vector<int64_t> choice(size_t(stages + 1) * size_t(n + 1), -1);
  for (int64_t i = 1; i <= n; ++i) {
    if (sum(0, i) <= limit && allowed(0, 0, i)) at(squares, 1, i) = sum(0, i) * sum(0, i);
    choice[size_t(n + 1) + size_t(i)] = 0;
  }
  for (int64_t s = 2; s <= stages; ++s) {
    for (int64_t i = s; i <= n; ++i) {
      double best = inf;
      int64_t best_j = -1;
      for (int64_t j = s - 1; j < i; ++j) {
        const double c = sum(j, i);
        if (c > limit || at(squares, s - 1, j) == inf || !allowed(s - 1, j, i)) continue;
        const double value = at(squares, s - 1, j) + c * c;
        if (value < best - 1e-12 * std::max(1.0, std::abs(best == inf ? value : best))) {
          best = value;
          best_j = j;
        }
      }
      at(squares, s, i) = best;
      choice[size_t(s) * size_t(n + 1) + size_t(i)] = best_j;
    }
  }
  bounds[size_t(stages)] = n;
  for (int64_t s = stages; s >= 1; --s) {
    const int64_t j = choice[size_t(s) * size_t(n + 1) + size_t(bounds[size_t(s)])];
    BRIGADE_CHECK(j >= 0, "partition: internal error: no split found");  // unreachable: pass 1 found one
    bounds[size_t(s) - 1] = j;
  }
  return bounds;
}

}  // namespace

std::vector<int64_t> balance(const std::vector<double>& costs, int64_t stages) {
  check_split_arguments(costs, stages);
  return balance_where(costs, stages, [](int64_t, int64_t, int64_t) { return true; });
}

int64_t MemoryLimit::bytes(int64_t stage, const std::vector<LayerMemory>& layers, int64_t begin, int64_t end) const {
  int64_t fixed = 0, stash = 0;
  for (int64_t i = begin; i < end; ++i) {
    fixed += layers.at(size_t(i)).fixed;
    stash += layers.at(size_t(i)).activations;
  }
  return fixed + int64_t(in_flight.at(size_t(stage))) * stash;
}

MemoryLimit memory_limit(const Layout& layout, const std::vector<int>& in_flight, int64_t bytes_per_rank) {
  BRIGADE_CHECK(int64_t(in_flight.size()) == layout.stages(), "partition: ", in_flight.size(),
                " in-flight counts for ", layout.stages(), " stages (P=", layout.ranks, " x V=", layout.chunks, ")");
  BRIGADE_CHECK(bytes_per_rank > 0, "partition: the memory budget per rank must be positive, got ", bytes_per_rank,
                " bytes");
  MemoryLimit limit;
  limit.in_flight = in_flight;
  limit.capacity.assign(in_flight.size(), bytes_per_rank / layout.chunks);
  return limit;
}

Partition partition_within_memory(const std::vector<double>& costs, const std::vector<LayerMemory>& memory,
                                  const MemoryLimit& limit, const std::string& cost_name) {
  const int64_t stages = int64_t(limit.capacity.size());
  check_split_arguments(costs, stages);
  BRIGADE_CHECK(memory.size() == costs.size(), "partition: ", costs.size(), " layer costs but ", memory.size(),
                " layer memory sizes");
  BRIGADE_CHECK(limit.in_flight.size() == limit.capacity.size(), "partition: ", limit.in_flight.size(),
                " in-flight counts for ", limit.capacity.size(), " stage capacities");
  for (size_t i = 0; i < memory.size(); ++i)
    BRIGADE_CHECK(memory[i].fixed >= 0 && memory[i].activations >= 0, "partition: layer ", i,
                  " has a negative memory size (", memory[i].fixed, " fixed, ", memory[i].activations,
                  " activation bytes)");
  // Prefix sums keep the search O(S n^2): MemoryLimit::bytes, range by range, in O(1).
  std::vector<int64_t> fixed(memory.size() + 1, 0), stash(memory.size() + 1, 0);
  for (size_t i = 0; i < memory.size(); ++i) {
    fixed[i + 1] = fixed[i] + memory[i].fixed;
    stash[i + 1] = stash[i] + memory[i].activations;
  }
  Partition p;
  p.bounds = balance_where(costs, stages, [&](int64_t s, int64_t begin, int64_t end) {
    const int64_t held = fixed[size_t(end)] - fixed[size_t(begin)] +
                         int64_t(limit.in_flight[size_t(s)]) * (stash[size_t(end)] - stash[size_t(begin)]);
    return held <= limit.capacity[size_t(s)];
  });
  if (p.bounds.empty()) {
    // No split fits. Name the layer that needs the most where it would be cheapest (its own stage
    // with the fewest micro-batches in flight), so the user sees what to change.
    const int fewest = *std::min_element(limit.in_flight.begin(), limit.in_flight.end());
    size_t largest = 0;
    int64_t largest_bytes = -1;
    for (size_t i = 0; i < memory.size(); ++i) {
      const int64_t b = memory[i].fixed + int64_t(fewest) * memory[i].activations;
      if (b > largest_bytes) largest_bytes = b, largest = i;
    }
    std::string in_flight;
    for (int m : limit.in_flight) in_flight += (in_flight.empty() ? "" : ", ") + std::to_string(m);
    fail("partition: no split of ", costs.size(), " layers into ", stages, " stages, each holding a layer, fits ",
         format_bytes(double(limit.capacity[0])), " per stage (micro-batches in flight per stage: ", in_flight,
         "); layer ", largest, " alone needs ", format_bytes(double(largest_bytes)), " with ", fewest,
         " in flight. Raise the budget, use more stages, or recompute");
  }
  p.layer_costs = costs;
  p.cost_name = cost_name;
  return p;
}

Partition partition_by_cost(const std::vector<double>& costs, int64_t stages, const std::string& cost_name) {
  Partition p;
  p.bounds = balance(costs, stages);
  p.layer_costs = costs;
  p.cost_name = cost_name;
  return p;
}

Partition partition_uniform(int64_t num_layers, int64_t stages) {
  BRIGADE_CHECK(num_layers >= 1, "partition_uniform: there are no layers to split into ", stages, " stages");
  return partition_by_cost(std::vector<double>(size_t(num_layers), 1.0), stages, "layers");
}

Partition partition_by_parameters(const Layers& layers, int64_t stages) {
  std::vector<double> costs;
  for (size_t i = 0; i < layers.size(); ++i) {
    BRIGADE_CHECK(layers[i] != nullptr, "partition_by_parameters: layer ", i, " is null");
    costs.push_back(double(layers[i]->parameter_count()));
  }
  return partition_by_cost(costs, stages, "parameters");
}

Partition partition_by_time(const Layers& layers, int64_t stages, const Tensor& sample_input) {
  return partition_by_cost(profile_layers(layers, sample_input), stages, "seconds");
}

Layers stage_layers(const Layers& layers, const Partition& partition, int64_t stage) {
  BRIGADE_CHECK(partition.layers() == int64_t(layers.size()), "stage_layers: the partition covers ", partition.layers(),
                " layers, but ", layers.size(), " were given");
  BRIGADE_CHECK(stage >= 0 && stage < partition.stages(), "stage_layers: stage ", stage, " is out of range [0, ",
                partition.stages(), ")");
  return Layers(layers.begin() + partition.begin(stage), layers.begin() + partition.end(stage));
}

namespace {

// Whole numbers (layer and parameter counts) with thousands separators, others to 4 digits.
std::string cost_text(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15) return with_commas(int64_t(v));
  return format_significant(v, 4);
}

// "GPTEmbedding, TransformerBlock x3, GPTHead"
std::string layer_names(const Layers& layers, int64_t begin, int64_t end) {
  std::string out;
  for (int64_t i = begin; i < end;) {
    const std::string name = layers[size_t(i)]->name();
    int64_t j = i;
    while (j < end && layers[size_t(j)]->name() == name) ++j;
    if (!out.empty()) out += ", ";
    out += name;
    if (j - i > 1) out += " x" + std::to_string(j - i);
    i = j;
  }
  return out.empty() ? "(empty: passes its input on)" : out;
}

// The table, with each stage's rank from `rank_of`.
std::string partition_table(const Partition& partition, const Layers& layers,
                            const std::function<int64_t(int64_t)>& rank_of) {
  BRIGADE_CHECK(partition.layers() == int64_t(layers.size()), "describe_partition: the partition covers ",
                partition.layers(), " layers, but ", layers.size(), " were given");
  double total = 0;
  for (double c : partition.layer_costs) total += c;

  struct Row {
    std::string stage, rank, range, names, params, cost, memory;
  };
  std::vector<Row> rows = {
      {"stage", "rank", "layers", "", "parameters", "cost (" + partition.cost_name + ")", "memory"}};
  for (int64_t s = 0; s < partition.stages(); ++s) {
    int64_t params = 0;
    double bytes = 0;
    for (int64_t i = partition.begin(s); i < partition.end(s); ++i) {
      params += layers[size_t(i)]->parameter_count();
      for (const Tensor& t : layers[size_t(i)]->parameters()) bytes += double(t.nbytes());
      for (const Tensor& t : layers[size_t(i)]->buffers()) bytes += double(t.nbytes());
    }
    std::ostringstream cost;
    cost << cost_text(partition.cost(s));
    if (total > 0) cost << " (" << format_fixed(100.0 * partition.cost(s) / total, 1) << "%)";
    std::string range = partition.size(s) == 0 ? "-"
                        : partition.size(s) == 1
                            ? std::to_string(partition.begin(s))
                            : std::to_string(partition.begin(s)) + "-" + std::to_string(partition.end(s) - 1);
    rows.push_back({std::to_string(s), std::to_string(rank_of(s)), range,
                    layer_names(layers, partition.begin(s), partition.end(s)), with_commas(params), cost.str(),
                    format_bytes(bytes)});
  }

  std::vector<size_t> width(7, 0);
  for (const Row& row : rows) {
    const std::string* cells[] = {&row.stage, &row.rank, &row.range, &row.names, &row.params, &row.cost, &row.memory};
    for (size_t c = 0; c < 7; ++c) width[c] = std::max(width[c], cells[c]->size());
  }
  std::ostringstream os;
  for (const Row& row : rows) {
    const std::string* cells[] = {&row.stage, &row.rank, &row.range, &row.names, &row.params, &row.cost, &row.memory};
    std::string line;
    for (size_t c = 0; c < 7; ++c) {
      const std::string& text = *cells[c];
      const std::string fill(width[c] - text.size(), ' ');
      const bool left_aligned = c == 2 || c == 3;
      line += left_aligned ? text + fill : fill + text;
      line += c + 1 < 7 ? "  " : "";
    }
    line.erase(line.find_last_not_of(' ') + 1);
    os << line << "\n";
  }
  os << "largest stage: " << cost_text(partition.max_cost()) << " " << partition.cost_name
     << " (the pipeline runs at the pace of its slowest stage)\n"
     << "memory: parameters and buffers; training adds gradients and optimizer state\n";
  return os.str();
}

}  // namespace

std::string describe_partition(const Partition& partition, const Layers& layers, int64_t ranks) {
  if (ranks <= 0) ranks = partition.stages();
  return partition_table(partition, layers, [ranks](int64_t s) { return s % ranks; });
}

std::string describe_partition(const Partition& partition, const Layers& layers, const Layout& layout) {
  BRIGADE_CHECK(partition.stages() == layout.stages(), "describe_partition: the partition has ", partition.stages(),
                " stages, but the layout ", layout.stages(), " (P=", layout.ranks, " x V=", layout.chunks, ")");
  return partition_table(partition, layers, [&layout](int64_t s) { return int64_t(layout.rank_of(int(s))); });
}

}  // namespace brigade::pipeline
