// Launches per training step for `brigade bench step`: how many kernels, library calls and copies
// the host issues per step, and how often it waits for the device. The numbers come from the GPU
// emulator's counter (emulator/launch_counts.h), which sees every launch; a build for a real GPU
// has no counter, and there a step captured whole as a CUDA graph (--cuda-graph) gives the count
// as the graph's operations instead.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace brigade::bench_step {

struct StepLaunches {
  double launches = 0;  // everything issued: kernels + library calls + copies + graph launches
  double kernels = 0, library_calls = 0, copies = 0, graph_launches = 0;
  double host_syncs = 0;
  std::map<std::string, double> by_name;  // kernel or call name -> launches per step
};

// Whether this build counts launches (the emulator's).
bool launches_counted();
// Starts counting from zero.
void start_counting_launches();
// What was counted since start_counting_launches(), divided by `steps`.
StepLaunches launches_per_step(int64_t steps);

// "launches per step: 212 (180 kernels, 30 cuBLAS/cuDNN calls, 2 copies), 1 host sync".
std::string launches_line(const StepLaunches& l);
// {"total": .., "kernels": .., ..., "by_name": {..}} for the JSON report.
std::string launches_json(const StepLaunches& l);

}  // namespace brigade::bench_step
