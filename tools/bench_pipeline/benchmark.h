// The benchmark itself: every schedule run for real, measured, and set against the simulator and
// against the same model unpipelined. report.h turns the result into a table and JSON.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "bench/report.h"
#include "bench/stats.h"
#include "bench_pipeline/analysis.h"
#include "bench_pipeline/options.h"

namespace brigade::bench_pipeline {

// One rank under one schedule: medians over the timed steps of shares of the step's makespan.
struct RankResult {
  double compute = 0;   // busy: F/B/I/W
  double exchange = 0;  // exposed comm: inside exchanges (analysis.h)
  double hidden = 0;    // of the exchange time, the share another rank computed through (NaN: none)
  int peak_stashed = 0;
};

struct ScheduleResult {
  std::string name;
  std::string skipped;  // why it did not run (e.g. interleaved with M % P != 0); empty when it ran
  int ranks = 0, microbatches = 0, chunks = 0;

  std::vector<double> step_seconds;  // per timed step (the slowest rank)
  bench::Summary step;               // of step_seconds
  double tokens_per_second = 0;      // tokens per step / median step
  double speedup = 0;                // unpipelined median step / this median step

  std::vector<double> bubbles;            // Trace::measured_bubble per timed step
  double bubble = 0;                      // their median
  double makespan = 0;                    // median traced makespan, seconds (barrier to last action)
  ActionCosts costs;                      // mean F/B/I/W seconds over the timed steps
  double predicted_bubble = 0;            // simulate() with `costs`
  double predicted_makespan = 0;          // seconds
  double unit_bubble = 0;                 // simulate() with F = I = W = 1 (B = 2)
  double unit_makespan = 0;               // in those units
  std::vector<double> unit_busy;          // per rank, in those units

  std::vector<RankResult> ranks_detail;
  double exposed_comm = 0;  // median over steps of the ranks' mean exchange share
  double hidden_comm = 0;   // median over steps of (sum of hidden time / sum of exchange time); NaN: none
  double loss = 0;          // the last step's (equal to the unpipelined loss up to rounding)

  // Data parallelism (--replicas R > 1): the same schedule on R x P ranks, its gradient all-reduces
  // started during the backward (PipelineOptions::overlap_reduce) and all at the end of the step.
  bench::Summary dp_overlapped, dp_at_end;  // step seconds
  double dp_saved = 0;         // 1 - overlapped / at_end, of the medians (NaN without replicas)
  int dp_reductions = 0;       // all-reduces per step, summed over the ranks
  int dp_started_early = 0;    // of those, started before the step's end when overlapped
  std::vector<std::string> files;  // written to --trace-dir
};

struct BenchResult {
  BenchOptions options;  // resolved: every default filled in
  bench::Environment env;
  std::string device_name;  // the GPU's name, or the CPU's model name
  int cpu_threads = 0;      // hardware threads of this machine
  int kernel_threads = 0;   // threads brigade's CPU kernels may use (BRIGADE_NUM_THREADS)
  int64_t parameters = 0;   // of the whole GPT
  int64_t tokens_per_step = 0;

  std::vector<double> unpipelined_seconds;
  bench::Summary unpipelined_step;
  double unpipelined_tokens_per_second = 0;
  double unpipelined_loss = 0;

  std::vector<ScheduleResult> schedules;  // in the order asked for
};

// Runs everything `options` (already resolved) asks for; says what it is doing on `progress`.
// Writes the trace files when options.trace_dir is set. Throws an Error when a run fails.
BenchResult run_benchmark(const BenchOptions& options, std::ostream& progress);

}  // namespace brigade::bench_pipeline
