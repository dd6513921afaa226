// What `brigade train`'s loop reports between steps (run.cpp): progress lines, validations and
// checkpoints. The loop calls each helper after every step; each decides whether this step is one it
// reports, prints on the leader's stream, and records in --metrics (run_metrics.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <ostream>

#include "mfu.h"
#include "run_metrics.h"
#include "trainer.h"

namespace brigade::train {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t);
// `v` with its sign always shown, as printf's %+.Nf: "+1.5", "-0.3".
std::string signed_fixed(double v, int decimals);

// MFU's two numbers, for language modelling: the model's FLOPs per token and the device's peak. The
// leader alone measures (on the CPU, a GEMM): the other ranks wait for its first validation gather
// meanwhile, so the measurement has the cores to itself. Prints the "mfu: ..." line.
struct MfuBasis {
  double flops_per_token = 0;
  Peak peak;  // flops_per_second 0: no MFU
  double devices = 1;  // the devices the run's ranks share (their peaks add up)
};
MfuBasis measure_mfu_basis(Trainer& trainer, std::ostream& out);

// The progress lines' state: one batch's loss is noisy, so a line shows the mean since the previous
// line; the run's final comparison uses the mean of the last few steps.
struct Progress {
  static constexpr size_t tail_steps = 10;

  Progress(const Trainer& trainer, const MfuBasis& mfu);  // starts the clocks: call just before the loop
  void add(double loss);  // the loss of the step just taken
  double tail_mean() const;

  MfuBasis mfu;
  int64_t start_step = 0;
  int64_t tokens_per_step = 0;
  std::deque<double> tail;
  double window_loss = 0;
  int64_t window_steps = 0;
  Clock::time_point window_start, train_start;
};

// Every --log-every steps and after the last: "step 40/300 loss=... lr=... tok/s=... mfu=... eta=...".
void report_progress(Progress& progress, Trainer& trainer, RunMetrics& metrics, std::ostream& out);

// The validation loss of language modelling (--data with validation shards), every --eval-every steps.
struct Validation {
  bool enabled = false;
  int64_t every = 0;
  double first = 0;  // the first measurement of this run, for "(-12.3% since the first measurement)"
};

// Whether the run validates; if it does, measures the loss once before the first step (every rank
// calls it) and adds it to `summary`. Prints why not when --data has no validation shards.
Validation start_validation(Trainer& trainer, RunMetrics& metrics, TrainSummary& summary, std::ostream& out);

// At every --eval-every-th step and after the last: the validation loss, added to `summary`.
void maybe_validate(const Validation& validation, Trainer& trainer, RunMetrics& metrics, TrainSummary& summary,
                    std::ostream& out);

// A checkpoint of this step into --save (every rank writes its shard); `save_dir`: whether --save is
// a directory of checkpoints, decided once before any rank saved (checkpoint_dir.h).
void save_checkpoint(Trainer& trainer, std::ostream& out, bool save_dir);

// Every --save-every steps, before the last (the run saves at its end anyway).
void maybe_checkpoint(Trainer& trainer, std::ostream& out, bool save_dir);

}  // namespace brigade::train
