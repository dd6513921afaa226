#include "pipeline/analysis/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include "core/format.h"
#include "pipeline/analysis/memory.h"
#include "pipeline/analysis/plan_memory.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline/partition.h"

namespace brigade::pipeline {

namespace {

// A bound and a simulated time are sums of the same costs taken in another order: they may differ in
// the last bits, so a bound prunes only when it is clearly above.
constexpr double kRoundoff = 1e-9;

std::vector<int> divisors(int64_t n) {
  std::vector<int> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(int(d));
  return out;
}

void check_spec(const PlanSpec& spec) {
  spec.model.check();
  const Hardware& h = spec.hardware;
  BRIGADE_CHECK(h.devices >= 1, "plan: the number of devices must be at least 1, got ", h.devices);
  BRIGADE_CHECK(h.memory > 0, "plan: the memory per device must be positive, got ", h.memory, " bytes");
  BRIGADE_CHECK(std::isfinite(h.flops) && h.flops > 0, "plan: the FLOP/s per device must be positive, got ", h.flops);
  BRIGADE_CHECK(std::isfinite(h.bandwidth) && h.bandwidth > 0, "plan: the link bandwidth must be positive, got ",
                h.bandwidth, " bytes/s");
  BRIGADE_CHECK(std::isfinite(h.latency) && h.latency >= 0, "plan: the link latency must be non-negative, got ",
                h.latency, " s");
  BRIGADE_CHECK(spec.batch >= 1, "plan: the batch must hold at least one sequence, got ", spec.batch);
  BRIGADE_CHECK(!spec.schedules.empty(), "plan: no schedules to try");
  BRIGADE_CHECK(!spec.recompute.empty(), "plan: no recomputation setting to try");
  BRIGADE_CHECK(spec.compute == DType::f32 || spec.compute == DType::bf16, "plan: activations in f32 or bf16, got ",
                dtype_name(spec.compute));
}

int kind_index(ScheduleKind kind) {
  const auto& kinds = all_schedule_kinds();
  return int(std::find(kinds.begin(), kinds.end(), kind) - kinds.begin());
}

// A schedule and how many micro-batches each of its stages stashes at once: shared by every
// candidate with the same (schedule, P, M, V), whatever its costs.
struct Scheduled {
  Schedule schedule;
  std::vector<int> in_flight;
};

// The planner's working state for one spec: caches of what candidates share.
class Planner {
 public:
  explicit Planner(const PlanSpec& spec) : spec_(spec) { check_spec(spec); }

  int64_t sequences(const Candidate& c) const { return spec_.batch / (int64_t(c.replicas) * c.microbatches); }

  // Before the split is known: every rank's compute averaged, a bound on the busiest one's.
  double average_bound(const Candidate& c) {
    const std::vector<double> seconds = layer_seconds(c);
    return c.microbatches * std::accumulate(seconds.begin(), seconds.end(), 0.0) / c.stages;
  }

  Evaluation prepare(const Candidate& c);
  void simulate_step(Evaluation& e);
  int64_t least_memory(const Candidate& c);
  int64_t least_memory_bound(const Candidate& c);

 private:
  const std::vector<LayerEstimate>& layers(int64_t sequences) {
    auto it = layers_.find(sequences);
    if (it == layers_.end())
      it = layers_.emplace(sequences, estimate_gpt_layers(spec_.model, sequences, spec_.compute)).first;
    return it->second;
  }

  const Scheduled& scheduled(const Candidate& c) {
    const auto key = std::make_tuple(kind_index(c.schedule), c.stages, c.microbatches, c.chunks);
    auto it = schedules_.find(key);
    if (it == schedules_.end()) {
      Scheduled s;
      s.schedule = make_schedule(c.schedule, c.stages, c.microbatches, c.chunks);
      // Stash counts follow from each rank's order alone: unit costs give the same ones.
      s.in_flight = simulate(s.schedule).peak_activations;
      it = schedules_.emplace(key, std::move(s)).first;
    }
    return it->second;
  }

  PlannedPipeline pipeline_of(const Candidate& c) {
    PlannedPipeline p;
    p.shape = spec_.model;
    p.layers = layers(sequences(c));
    p.layout = scheduled(c).schedule.layout;
    p.recompute = c.recompute;
    p.split_backward = scheduled(c).schedule.split_backward();
    p.boundary = gpt_boundary_bytes(spec_.model, sequences(c), spec_.compute);
    p.input_bytes = sequences(c) * spec_.model.context * 8;  // i64 token ids
    p.batch_bytes = 2 * (spec_.batch / c.replicas) * spec_.model.context * 8;  // ids and targets
    return p;
  }

  // Each layer's F + I + W in seconds; recomputation runs its forward once more in the backward.
  std::vector<double> layer_seconds(const Candidate& c) {
    std::vector<double> out;
    for (const LayerEstimate& l : layers(sequences(c)))
      out.push_back((l.forward * (c.recompute ? 2 : 1) + l.input_grad + l.weight_grad) / spec_.hardware.flops);
    return out;
  }

  // From a SEND of an activation (or a gradient) until its receiver has it.
  double message_seconds(const Candidate& c) {
    const Hardware& h = spec_.hardware;
    return double(gpt_boundary_bytes(spec_.model, sequences(c), spec_.compute)) / h.bandwidth + h.latency;
  }

  std::vector<StageCost> stage_costs(const Candidate& c, const std::vector<int64_t>& bounds) {
    const std::vector<LayerEstimate>& estimates = layers(sequences(c));
    const double rate = spec_.hardware.flops;
    std::vector<StageCost> out(bounds.size() - 1, StageCost{0, 0, 0});
    for (size_t s = 0; s + 1 < bounds.size(); ++s) {
      for (int64_t i = bounds[s]; i < bounds[s + 1]; ++i) {
        const LayerEstimate& l = estimates[size_t(i)];
        out[s].forward += l.forward / rate;
        out[s].backward += (l.input_grad + (c.recompute ? l.forward : 0)) / rate;
        out[s].weight += l.weight_grad / rate;
      }
    }
    return out;
  }

  // Seconds of gradient reduction (brigade's runtime on NCCL, pipeline/runtime.h): each stage's ring
  // all-reduce across the replicas, 2 (D-1)/D x its gradient bytes / bandwidth + 2 (D-1) latencies,
  // starts once its last backward is done, one after another on the rank's link; the tied embedding is
  // summed between the embedding's rank and the head's (when they differ) at the end of the step.
  struct Reductions {
    std::vector<double> stage;  // per global stage: across the replicas
    std::vector<double> tie;    // per rank
  };
  Reductions reductions(const Candidate& c, const Layout& layout, const MemoryModel& model) {
    const Hardware& h = spec_.hardware;
    Reductions out;
    out.stage.assign(size_t(layout.stages()), 0.0);
    out.tie.assign(size_t(c.stages), 0.0);
    const int first = layout.rank_of(0), last = layout.rank_of(layout.stages() - 1);
    if (first != last) {
      const double tie = double(tied_parameters(spec_.model) * kParameterBytes) / h.bandwidth + h.latency;
      out.tie[size_t(first)] += tie;
      out.tie[size_t(last)] += tie;
    }
    if (c.replicas > 1) {
      const double D = c.replicas;
      for (int s = 0; s < layout.stages(); ++s)
        out.stage[size_t(s)] =
            2 * (D - 1) / D * double(model.stages[size_t(s)].gradients) / h.bandwidth + 2 * (D - 1) * h.latency;
    }
    return out;
  }

  PlanSpec spec_;
  std::map<int64_t, std::vector<LayerEstimate>> layers_;
  std::map<std::tuple<int, int, int, int>, Scheduled> schedules_;
};

Evaluation Planner::prepare(const Candidate& c) {
  Evaluation e;
  e.candidate = c;
  e.sequences = sequences(c);
  const Scheduled& s = scheduled(c);
  const PlannedPipeline p = pipeline_of(c);
  const std::vector<double> seconds = layer_seconds(c);
  const int64_t memory = spec_.hardware.memory;
  const int64_t overhead = memory_overhead(p, s.in_flight);
  Partition split;
  if (overhead >= memory) {
    e.fit = Fit::no_split;
    e.problem = "every rank holds " + format_bytes(double(overhead)) + " besides its layers";
  } else {
    try {
      split = partition_within_memory(seconds, layer_memory(p), memory_limit(p.layout, s.in_flight, memory - overhead),
                                      "seconds");
    } catch (const Error&) {
      e.fit = Fit::no_split;
      e.problem = "no split of the layers fits";
    }
  }
  // Out of memory: the fastest split regardless, so that its time can still be simulated.
  if (!e.fits()) split = partition_by_cost(seconds, p.layout.stages(), "seconds");
  e.bounds = split.bounds;

  const MemoryModel model = memory_model(p, e.bounds);
  for (const RankMemory& m : predict_memory(s.schedule, model)) e.peak_per_rank.push_back(m.peak);
  const auto worst = std::max_element(e.peak_per_rank.begin(), e.peak_per_rank.end());
  e.peak = *worst;
  if (e.fits() && e.peak > memory) {
    e.fit = Fit::over_memory;
    e.problem = "rank " + std::to_string(worst - e.peak_per_rank.begin()) + " would hold " + format_bytes(double(e.peak));
  }

  // A rank starts no sooner than the first micro-batch's forward has come through the stages before
  // its first (its first action is a forward, which needs its input), computes for at least its busy
  // time, and then still reduces the chunk its last backward belonged to (at least the cheapest) and
  // the tie.
  const Reductions reduce = reductions(c, p.layout, model);
  const std::vector<StageCost> costs = stage_costs(c, e.bounds);
  const double hop = message_seconds(c);
  std::vector<double> reached(costs.size(), 0.0);  // when stage s could first start, at the earliest
  for (size_t s = 1; s < costs.size(); ++s) {
    const bool message = p.layout.rank_of(int(s) - 1) != p.layout.rank_of(int(s));
    reached[s] = reached[s - 1] + costs[s - 1].forward + (message ? hop : 0);
  }
  for (int r = 0; r < c.stages; ++r) {
    double busy = 0, start = std::numeric_limits<double>::infinity(), total = reduce.tie[size_t(r)],
           cheapest = std::numeric_limits<double>::infinity();
    for (int chunk = 0; chunk < c.chunks; ++chunk) {
      const int s = p.layout.stage(r, chunk);
      busy += costs[size_t(s)].forward + costs[size_t(s)].backward + costs[size_t(s)].weight;
      start = std::min(start, reached[size_t(s)]);
      total += reduce.stage[size_t(s)];
      cheapest = std::min(cheapest, reduce.stage[size_t(s)]);
    }
    e.reductions.push_back(total);
    e.lower_bound = std::max(e.lower_bound, start + c.microbatches * busy + cheapest + reduce.tie[size_t(r)]);
  }
  e.all_reduce = *std::max_element(e.reductions.begin(), e.reductions.end());
  return e;
}

void Planner::simulate_step(Evaluation& e) {
  const Candidate& c = e.candidate;
  const Scheduled& s = scheduled(c);
  Costs costs;
  costs.stages = stage_costs(c, e.bounds);
  costs.communication = message_seconds(c);
  const SimulationResult result = simulate(s.schedule, costs);
  e.simulated = true;
  e.pipeline = result.makespan;
  e.bubble = result.bubble_fraction;
  const Reductions reduce = reductions(c, s.schedule.layout, memory_model(pipeline_of(c), e.bounds));
  e.step = 0;
  for (int r = 0; r < c.stages; ++r) {
    // When each chunk's weights are final (its last B or W), and when the rank's compute ends.
    std::vector<std::pair<double, int>> final_at(size_t(c.chunks), {0.0, 0});
    double end = 0;
    for (const TimedAction& a : result.timeline[size_t(r)]) {
      end = std::max(end, a.end);
      if (a.action.kind == ActionKind::backward || a.action.kind == ActionKind::backward_weight)
        final_at[size_t(a.action.chunk)] = {a.end, a.action.chunk};
    }
    std::sort(final_at.begin(), final_at.end());
    double link = 0;  // when the rank's link is free again
    for (const auto& [at, chunk] : final_at)
      link = std::max(link, at) + reduce.stage[size_t(s.schedule.layout.stage(r, chunk))];
    e.step = std::max(e.step, std::max(link, end) + reduce.tie[size_t(r)]);
  }
}

int64_t Planner::least_memory(const Candidate& c) {
  const Scheduled& s = scheduled(c);
  const PlannedPipeline p = pipeline_of(c);
  const std::vector<double> seconds = layer_seconds(c);
  const std::vector<LayerMemory> memory = layer_memory(p);
  auto fits_in = [&](int64_t budget) {
    try {
      partition_within_memory(seconds, memory, memory_limit(p.layout, s.in_flight, budget), "seconds");
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  // A budget that holds every layer on every stage fits; bisect down to the least that does.
  int64_t all = 0;
  const int most = *std::max_element(s.in_flight.begin(), s.in_flight.end());
  for (const LayerMemory& m : memory) all += m.fixed + most * m.activations;
  int64_t low = 0, high = int64_t(c.chunks) * (all + 1);
  while (high - low > 1) {
    const int64_t mid = low + (high - low) / 2;
    (fits_in(mid) ? high : low) = mid;
  }
  return memory_overhead(p, s.in_flight) + high;
}

int64_t Planner::least_memory_bound(const Candidate& c) {
  const Scheduled& s = scheduled(c);
  const PlannedPipeline p = pipeline_of(c);
  const int fewest = *std::min_element(s.in_flight.begin(), s.in_flight.end());
  // The stage holding a layer holds at least that layer; the fullest stage at least the average.
  int64_t largest = 0, total = 0;
  for (const LayerMemory& m : layer_memory(p)) {
    largest = std::max(largest, m.fixed + fewest * m.activations);
    total += m.fixed + fewest * m.activations;
  }
  const int64_t S = p.layout.stages();
  return memory_overhead(p, s.in_flight) + int64_t(c.chunks) * std::max(largest, (total + S - 1) / S);
}

// Candidates in the order of a lower bound, cheapest first (stable: ties keep plan_candidates' order).
template <class Bound>
std::vector<size_t> order_by(const std::vector<Candidate>& candidates, Bound bound, std::vector<double>& bounds) {
  bounds.clear();
  for (const Candidate& c : candidates) bounds.push_back(double(bound(c)));
  std::vector<size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bounds[a] < bounds[b]; });
  return order;
}

int64_t least_memory_with(Planner& planner, const std::vector<Candidate>& candidates, Candidate* which) {
  std::vector<double> bounds;
  const std::vector<size_t> order =
      order_by(candidates, [&](const Candidate& c) { return planner.least_memory_bound(c); }, bounds);
  int64_t best = std::numeric_limits<int64_t>::max();
  for (size_t i : order) {
    if (bounds[i] >= double(best)) break;  // neither this one nor any after it can need less
    const int64_t need = planner.least_memory(candidates[i]);
    if (need < best) {
      best = need;
      if (which) *which = candidates[i];
    }
  }
  return best;
}

}  // namespace

std::string Candidate::describe() const {
  return std::string(schedule_name(schedule)) + " P=" + std::to_string(stages) + " V=" + std::to_string(chunks) +
         " M=" + std::to_string(microbatches) + " D=" + std::to_string(replicas) + (recompute ? " recompute" : "");
}

std::vector<Candidate> plan_candidates(const PlanSpec& spec) {
  check_spec(spec);
  const int64_t layers = spec.model.pipeline_layers();
  // With one stage every schedule is each micro-batch's F then B on one device; 1f1b keeps one stash.
  std::vector<ScheduleKind> one_stage;
  for (ScheduleKind kind : {ScheduleKind::one_f_one_b, ScheduleKind::zb_h1, ScheduleKind::naive, ScheduleKind::gpipe})
    if (std::find(spec.schedules.begin(), spec.schedules.end(), kind) != spec.schedules.end() && one_stage.empty())
      one_stage.push_back(kind);

  std::vector<Candidate> out;
  for (int P : divisors(spec.hardware.devices)) {
    const int D = spec.hardware.devices / P;
    if (spec.batch % D != 0 || P > layers) continue;
    for (int M : divisors(spec.batch / D)) {
      for (ScheduleKind kind : P == 1 ? one_stage : spec.schedules) {
        std::vector<int> chunks = {default_chunks(kind)};
        if (kind == ScheduleKind::interleaved) {
          chunks.clear();
          for (int V = 2; V <= spec.max_chunks; ++V) chunks.push_back(V);
          if (M % P != 0) continue;  // Megatron's rule: micro-batches go round the ranks in groups of P
        }
        // The V schedules: dualpipev needs M >= 2P, and so does zb-v on NCCL (pipeline/runtime.cpp).
        if (placement_of(kind) == Placement::v_shape && M < 2 * P) continue;
        for (int V : chunks) {
          if (int64_t(P) * V > layers) continue;
          for (bool recompute : spec.recompute) out.push_back({kind, P, V, M, D, recompute});
        }
      }
    }
  }
  return out;
}

Evaluation evaluate(const PlanSpec& spec, const Candidate& candidate) {
  Planner planner(spec);
  Evaluation e = planner.prepare(candidate);
  planner.simulate_step(e);
  return e;
}

bool ranks_before(const Evaluation& a, const Evaluation& b) {
  if (a.fits() != b.fits()) return a.fits();
  if (a.step != b.step) return a.step < b.step;
  if (a.peak != b.peak) return a.peak < b.peak;
  const Candidate &x = a.candidate, &y = b.candidate;
  return std::make_tuple(x.stages, kind_index(x.schedule), x.chunks, x.microbatches, x.recompute) <
         std::make_tuple(y.stages, kind_index(y.schedule), y.chunks, y.microbatches, y.recompute);
}

Plan plan(const PlanSpec& spec, int top) {
  BRIGADE_CHECK(top >= 1, "plan: asked for the best ", top, " configurations; at least 1");
  Planner planner(spec);
  const std::vector<Candidate> candidates = plan_candidates(spec);
  BRIGADE_CHECK(!candidates.empty(), "plan: no configuration of ", spec.hardware.devices, " devices splits a batch of ",
                spec.batch, " sequences into equal replicas and micro-batches; use a batch that is a multiple of the "
                "device count");
  Plan result;
  result.candidates = int64_t(candidates.size());
  std::vector<double> bounds;
  const std::vector<size_t> order =
      order_by(candidates, [&](const Candidate& c) { return planner.average_bound(c); }, bounds);
  // The k-th best step so far: what a candidate must beat to enter the top k.
  auto to_beat = [&] {
    return int(result.best.size()) < top ? std::numeric_limits<double>::infinity()
                                          : result.best.back().step * (1 + kRoundoff);
  };
  for (size_t k = 0; k < order.size(); ++k) {
    if (bounds[order[k]] > to_beat()) {  // and so are all after it
      result.pruned += int64_t(order.size() - k);
      break;
    }
    Evaluation e = planner.prepare(candidates[order[k]]);
    if (!e.fits()) {
      ++result.out_of_memory;
      continue;
    }
    if (e.lower_bound > to_beat()) {
      ++result.pruned;
      continue;
    }
    planner.simulate_step(e);
    ++result.simulated;
    result.best.insert(std::upper_bound(result.best.begin(), result.best.end(), e, ranks_before), e);
    if (int(result.best.size()) > top) result.best.pop_back();
  }
  if (result.best.empty()) {
    Candidate which;
    const int64_t needed = least_memory_with(planner, candidates, &which);
    throw NoPlanError("no configuration fits in " + format_bytes(double(spec.hardware.memory)) +
                          " per device; the least any needs is " + format_bytes(double(needed)) + " (" +
                          which.describe() + ")",
                      needed, which);
  }
  return result;
}

int64_t least_memory_needed(const PlanSpec& spec, Candidate* candidate) {
  Planner planner(spec);
  return least_memory_with(planner, plan_candidates(spec), candidate);
}

FewestDevices fewest_devices(const PlanSpec& spec, int most) {
  for (int n = 1; n <= most; ++n) {
    PlanSpec on_n = spec;
    on_n.hardware.devices = n;
    if (plan_candidates(on_n).empty()) continue;  // e.g. a batch no replica count of n divides
    FewestDevices found;
    found.needed = least_memory_needed(on_n, &found.candidate);
    if (found.needed <= spec.hardware.memory) {
      found.devices = n;
      return found;
    }
  }
  return {};
}

}  // namespace brigade::pipeline
