// The text `brigade train` prints around its loop (run.cpp): the header (task, model, optimizer,
// pipeline, partition, run), where a resumed run continues from, and at the end the loss comparison,
// the held-out accuracy, a sample, the tuned GEMMs, the pipeline's timeline report and the time taken.
// The leader's stream is the one that shows; every rank calls what gathers from the others.
#pragma once

#include <ostream>
#include <vector>

#include "loop_reports.h"
#include "trainer.h"

namespace brigade::train {

void print_header(Trainer& trainer, std::ostream& out);
void print_resume(const Trainer& trainer, std::ostream& out);

// The pipeline's last step: bubble measured and simulated, each stage's costs, memory measured against
// predicted (`measured_peaks`, per rank; empty: not measured), the trace and the timeline SVG.
void report_timeline(Trainer& trainer, std::ostream& out, const std::vector<double>& measured_peaks);

// The lines after training: "loss: ... -> ...", the sort task's accuracy, a sample of the language
// model, the tuned GEMMs and "time: ...". `summary` has the run's losses and accuracy.
void print_summary(Trainer& trainer, const Progress& progress, const TrainSummary& summary, Clock::time_point run_start,
                   double train_seconds, std::ostream& out);

}  // namespace brigade::train
