// A run's --metrics file (metrics.h) and its loss curves (loss_curve.h), as the training loop feeds
// them: every rank calls record() at the same steps (each rank's peak memory is gathered to all), the
// leader alone writes the file and, at the end, the curves.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <ostream>
#include <vector>

#include "core/memory_account.h"
#include "metrics.h"
#include "pipeline/runtime.h"
#include "trainer.h"

namespace brigade::train {

// `mine` from every rank of the pipeline, in rank order, on every rank (a collective: all ranks call
// it). Just {mine} without a pipeline.
std::vector<double> gather_per_rank(Trainer& trainer, const pipeline::PipelineGroups* groups, double mine);

class RunMetrics {
 public:
  using Clock = std::chrono::steady_clock;

  // Does nothing unless --metrics is given. `memory`: this rank's account of the run's device (host
  // memory on the CPU, GPU memory on a GPU: core/memory_account.h).
  RunMetrics(Trainer& trainer, const pipeline::PipelineGroups* groups, const MemoryAccount& memory,
             Clock::time_point run_start);
  bool enabled() const { return enabled_; }

  // Adds the peak memory of every rank, the elapsed and wall-clock time, and writes the record (the
  // leader). Every rank calls it, at the same steps. A validation the file already holds is not
  // written again: a resumed run measures its checkpoint's step again, and the run that saved the
  // checkpoint wrote that step's validation before saving.
  void record(MetricsRecord record);
  // The account's peak is about to restart (the last step measures its own): keep what it held.
  void keep_peak();

  // The leader draws the loss curves of the whole file to --curves and says where.
  void finish(std::ostream& out);

 private:
  Trainer& trainer_;
  const pipeline::PipelineGroups* groups_;
  const MemoryAccount& memory_;
  Clock::time_point run_start_;
  bool enabled_ = false;
  double kept_peak_ = 0;
  std::unique_ptr<MetricsLog> log_;  // the leader's
};

}  // namespace brigade::train
