// The compute order of each schedule: everything that distinguishes one schedule from another.
// (Messages are added afterwards by add_communication, in schedule.cpp.)
#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "pipeline/schedule.h"

namespace brigade::pipeline {

namespace {

// Each (micro-batch, stage) takes at most three compute actions (F, I, W), plus its messages; this
// bound keeps a typo such as M=100000000 from allocating gigabytes.
constexpr long long kMaxComputeActions = 10'000'000;

Schedule empty_schedule(const char* name, int ranks, int microbatches, int chunks,
                        Placement placement = Placement::interleaved) {
  BRIGADE_CHECK(ranks >= 1 && microbatches >= 1 && chunks >= 1, "pipeline schedule ", name,
                ": needs at least one rank, micro-batch and chunk, got P=", ranks, ", M=", microbatches,
                ", V=", chunks);
  BRIGADE_CHECK(3.0 * ranks * microbatches * chunks <= double(kMaxComputeActions), "pipeline schedule ", name,
                ": P=", ranks, ", M=", microbatches, ", V=", chunks, " is too large (more than ", kMaxComputeActions,
                " actions)");
  Schedule s;
  s.name = name;
  s.layout = Layout{ranks, chunks, placement};
  s.microbatches = microbatches;
  s.actions.resize(size_t(ranks));
  return s;
}

}  // namespace

Schedule forward_only_order(const Layout& layout, int microbatches) {
  Schedule s = empty_schedule("forward", layout.ranks, microbatches, layout.chunks, layout.placement);
  for (int r = 0; r < layout.ranks; ++r) {
    std::vector<std::pair<int, Action>> timed;  // (m + stage, F): sorted, the rank's order
    for (int m = 0; m < microbatches; ++m)
      for (int c = 0; c < layout.chunks; ++c) timed.emplace_back(m + layout.stage(r, c), F(m, c));
    std::stable_sort(timed.begin(), timed.end(), [&](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first < b.first;
      return layout.stage(r, a.second.chunk) < layout.stage(r, b.second.chunk);
    });
    for (const auto& [t, a] : timed) s.actions[size_t(r)].push_back(a);
  }
  return s;
}

// Micro-batch m goes all the way down and back up before m + 1 starts: only one rank is ever busy.
Schedule naive_order(int ranks, int microbatches) {
  Schedule s = empty_schedule("naive", ranks, microbatches, 1);
  for (auto& list : s.actions) {
    for (int m = 0; m < microbatches; ++m) {
      list.push_back(F(m));
      list.push_back(B(m));
    }
  }
  return s;
}

// GPipe: every forward, then every backward (in the same order, so the last stage can start the
// backward of micro-batch 0 as soon as its last forward is done). Each stage stashes all M.
Schedule gpipe_order(int ranks, int microbatches) {
  Schedule s = empty_schedule("gpipe", ranks, microbatches, 1);
  for (auto& list : s.actions) {
    for (int m = 0; m < microbatches; ++m) list.push_back(F(m));
    for (int m = 0; m < microbatches; ++m) list.push_back(B(m));
  }
  return s;
}

// 1F1B (PipeDream-Flush, Megatron's default): rank r runs P - r - 1 forwards to fill the pipe,
// then alternates one forward and one backward, then drains the remaining backwards. Same bubble as
// GPipe, but at most P - r micro-batches are stashed at once instead of M.
Schedule one_f_one_b_order(int ranks, int microbatches) {
  Schedule s = empty_schedule("1f1b", ranks, microbatches, 1);
  for (int r = 0; r < ranks; ++r) {
    auto& list = s.actions[size_t(r)];
    const int warmup = std::min(ranks - r - 1, microbatches);
    for (int m = 0; m < warmup; ++m) list.push_back(F(m));
    for (int i = 0; i + warmup < microbatches; ++i) {
      list.push_back(F(i + warmup));
      list.push_back(B(i));
    }
    for (int m = std::max(microbatches - warmup, 0); m < microbatches; ++m) list.push_back(B(m));
  }
  return s;
}

// Interleaved 1F1B (Narayanan et al. 2021, Megatron-LM). Every rank walks the same sequence of
// "virtual micro-batches": groups of P micro-batches through chunk 0, the same group through chunk 1,
// ..., then the next group. The k-th forward is micro-batch (k / (P*V)) * P + k % P on chunk
// (k / P) % V; the k-th backward is the same micro-batch on the chunks in reverse order. Warm-up is
// longer than 1F1B's — 2(P - r - 1) + (V - 1)P forwards — because a micro-batch now passes every
// rank V times before its first backward can start. The bubble shrinks V-fold, at the price of
// V times as many messages.
Schedule interleaved_order(int ranks, int microbatches, int chunks) {
  Schedule s = empty_schedule("interleaved", ranks, microbatches, chunks);
  BRIGADE_CHECK(chunks >= 2, "pipeline schedule interleaved: needs at least 2 chunks per rank, got V=", chunks,
                " (P=", ranks, ", M=", microbatches, "); with one chunk it is 1f1b");
  BRIGADE_CHECK(microbatches % ranks == 0,
                "pipeline schedule interleaved: the number of micro-batches "
                "must be a multiple of the number of ranks (Megatron's rule: micro-batches go round in groups of P), "
                "got P=",
                ranks, ", M=", microbatches, ", V=", chunks);
  const int total = microbatches * chunks;
  auto microbatch_of = [&](int k) { return (k / (ranks * chunks)) * ranks + k % ranks; };
  auto forward = [&](int k) { return F(microbatch_of(k), (k / ranks) % chunks); };
  auto backward = [&](int k) { return B(microbatch_of(k), chunks - 1 - (k / ranks) % chunks); };
  for (int r = 0; r < ranks; ++r) {
    auto& list = s.actions[size_t(r)];
    const int warmup = std::min(2 * (ranks - r - 1) + (chunks - 1) * ranks, total);
    for (int k = 0; k < warmup; ++k) list.push_back(forward(k));
    for (int i = 0; i + warmup < total; ++i) {
      list.push_back(forward(i + warmup));
      list.push_back(backward(i));
    }
    for (int k = total - warmup; k < total; ++k) list.push_back(backward(k));
  }
  return s;
}

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", 2023): B split into I (input gradient: on the
// critical path, the previous stage waits for it) and W (weight gradient: needed only by the optimizer
// step). Rank r starts with P - r forwards (as many as 1F1B runs before its first backward), then
// repeats I(k), W(k - r), F(k + P - r): it holds back its last r weight gradients and runs them at
// the end, exactly where 1F1B's cool-down leaves it waiting for gradients. A micro-batch's stash
// lives until its W, so every rank holds at most P micro-batches — rank 0's peak under 1F1B, i.e.
// the same peak memory per GPU. The idle time per rank drops from 3(P-1) to P-1 time units
// (F = I = W = 1, M >= P).
Schedule zb_h1_order(int ranks, int microbatches) {
  Schedule s = empty_schedule("zb-h1", ranks, microbatches, 1);
  for (int r = 0; r < ranks; ++r) {
    auto& list = s.actions[size_t(r)];
    const int warmup = std::min(ranks - r, microbatches);
    for (int m = 0; m < warmup; ++m) list.push_back(F(m));
    for (int k = 0; k < microbatches; ++k) {
      list.push_back(I(k));
      if (k - r >= 0) list.push_back(W(k - r));
      if (k + warmup < microbatches) list.push_back(F(k + warmup));
    }
    for (int m = std::max(microbatches - r, 0); m < microbatches; ++m) list.push_back(W(m));
  }
  return s;
}

// ZB-V (Qi et al., "Pipeline Parallelism with Controllable Memory", 2024, section 6; PyTorch's
// ScheduleZBVZeroBubble): two chunks per rank in a V (pipeline/action.h) — chunk 0 is stage r on the
// way down, chunk 1 stage 2P-1-r on the way back up — and B split into I and W as in zb-h1. On each
// rank every (chunk, kind) pair runs its micro-batches in order 0, 1, 2, ...; the schedule is only how
// the rank interleaves those six streams:
//
//   warm-up    2(P-r)-1 F on chunk 0 (the first micro-batch is on its way to the turn at rank P-1);
//              then r times F1 F0 (chunk 1's first forwards come back up while chunk 0 keeps
//              feeding); then P-r times F1 I1 W1 (the first backwards start at the top of the V)
//   steady     F0 I0 W0 F1 I1 W1 until both chunks have forwarded every micro-batch (F0 dropped
//              once chunk 0 has none left)
//   cool-down  r times I0 I1 (the input gradients others wait for, weights held back); then P-r
//              times I0 W0; then the held-back W of chunk 1, then of chunk 0
//
// A rank's stash peaks at 2P (micro-batch, chunk) pairs; a chunk is half a 1f1b stage, so that is
// 1f1b's peak memory (P whole-stage stashes on rank 0). With F = I = W = 1 per chunk and M >= 2P,
// rank r starts at time r (its first input needs r forwards) and then never waits: it ends at 6M + r,
// and the bubble, (P-1)/(6M+P-1), is that unavoidable stagger alone (docs/pipeline.md). With fewer
// micro-batches the pattern is built for 2P-1 and the actions of micro-batches that do not exist
// are left out: correct, not bubble-free.
Schedule zb_v_order(int ranks, int microbatches) {
  Schedule s = empty_schedule("zb-v", ranks, microbatches, 2, Placement::v_shape);
  const int n = std::max(microbatches, 2 * ranks - 1);
  for (int r = 0; r < ranks; ++r) {
    auto& list = s.actions[size_t(r)];
    int next[3][2] = {};  // [F, I, W][chunk]: the next micro-batch of each stream
    auto run = [&](ActionKind kind, int stream, int chunk) {
      const int m = next[stream][chunk]++;
      if (m < microbatches) list.push_back({kind, m, chunk});
    };
    auto f = [&](int chunk) { run(ActionKind::forward, 0, chunk); };
    auto i = [&](int chunk) { run(ActionKind::backward_input, 1, chunk); };
    auto w = [&](int chunk) { run(ActionKind::backward_weight, 2, chunk); };

    for (int k = 0; k < 2 * (ranks - r) - 1; ++k) f(0);
    for (int k = 0; k < r; ++k) f(1), f(0);
    for (int k = 0; k < ranks - r; ++k) f(1), i(1), w(1);
    while (next[0][1] < next[0][0] || next[0][0] < n) {
      if (next[0][0] < n) f(0);
      i(0), w(0), f(1), i(1), w(1);
    }
    for (int k = 0; k < r; ++k) i(0), i(1);
    for (int k = 0; k < ranks - r; ++k) i(0), w(0);
    while (next[2][1] < n) w(1);
    while (next[2][0] < n) w(0);
  }
  return s;
}

// DualPipeV (DeepSeek-V3's DualPipe folded into a V, as in deepseek-ai/DualPipe and PyTorch's
// ScheduleDualPipeV): zb-v's placement, and in the steady state each forward is paired with a
// backward of the other chunk — an overlapped F&B (Action::overlapped) — so that on hardware one's
// communication (MoE all-to-all) hides behind the other's compute. Backwards are mostly whole B;
// the warm-up and the drain split some into I and W to fill gaps. On rank r, with chunk 0 = stage r
// and chunk 1 = stage 2P-1-r, each stream (F per chunk, backward per chunk) runs its micro-batches in
// order, and W's run oldest first:
//
//   1  2(P-r-1) x F0                  fill the way down
//   2  r+1 x F0 F1                    the first micro-batches turn round
//   3  P-r-1 x I1 W F1                zero-bubble style while the pipe fills
//   4  M-2P+r+1 x (F0&B1) (F1&B0)     the overlapped steady state (the last rank's very first F0
//                                     and B1 unpaired, as PyTorch's generator has them; with pairs
//                                     run back to back the simulated makespan is the same either way)
//   5  P-r-1 x B1 (F1&B0)
//   6  r+1 x B1 B0                    the drain; from halfway, backwards split into I (W later)
//   7  P-r-1 x W B0
//   8  r+1 x W
//
// Needs M >= 2P (every rank's steady state non-negative). Checked by the simulator over a grid
// (tests/test_pipeline_schedule.cpp), like every generator here.
Schedule dualpipev_order(int ranks, int microbatches) {
  Schedule s = empty_schedule("dualpipev", ranks, microbatches, 2, Placement::v_shape);
  BRIGADE_CHECK(microbatches >= 2 * ranks, "pipeline schedule dualpipev: needs at least as many micro-batches as "
                "stages (M >= 2P), got P=", ranks, ", M=", microbatches, ", V=2");
  for (int r = 0; r < ranks; ++r) {
    auto& list = s.actions[size_t(r)];
    int forwards[2] = {}, backwards[2] = {};
    std::vector<Action> held;  // W's of the I's run so far, oldest first
    auto f = [&](int chunk) { list.push_back(F(forwards[chunk]++, chunk)); };
    auto b = [&](int chunk, bool split) {
      const int m = backwards[chunk]++;
      list.push_back(split ? I(m, chunk) : B(m, chunk));
      if (split) held.push_back(W(m, chunk));
    };
    auto w = [&] {
      if (held.empty()) return;
      list.push_back(held.front());
      held.erase(held.begin());
    };
    auto pair = [&](int forward_chunk) {  // F on one chunk beside a whole B on the other
      f(forward_chunk);
      list.back().overlapped = true;
      b(1 - forward_chunk, false);
    };
    const int P = ranks;
    for (int k = 0; k < 2 * (P - r - 1); ++k) f(0);
    for (int k = 0; k < r + 1; ++k) f(0), f(1);
    for (int k = 0; k < P - r - 1; ++k) b(1, true), w(), f(1);
    for (int k = 0; k < microbatches - 2 * P + r + 1; ++k) {
      if (k == 0 && r == P - 1) {
        f(0), b(1, false);
      } else {
        pair(0);
      }
      pair(1);
    }
    for (int k = 0; k < P - r - 1; ++k) b(1, false), pair(1);
    bool split = false;
    for (int k = 0; k < r + 1; ++k) {
      if (k == (r + 1) / 2 && r % 2 == 1) split = true;
      b(1, split);
      if (k == (r + 1) / 2 && r % 2 == 0) split = true;
      b(0, split);
    }
    for (int k = 0; k < P - r - 1; ++k) w(), b(0, split);
    for (int k = 0; k < r + 1; ++k) w();
  }
  return s;
}

}  // namespace brigade::pipeline
