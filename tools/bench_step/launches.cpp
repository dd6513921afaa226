#include "bench_step/launches.h"

#include "core/error.h"
#include "core/format.h"
#include "core/json.h"

#if BRIGADE_CUDA_EMULATOR
#include "emulator/launch_counts.h"
#endif

namespace brigade::bench_step {

#if BRIGADE_CUDA_EMULATOR
bool launches_counted() { return true; }
void start_counting_launches() { emu::reset_launch_counts(); }
StepLaunches launches_per_step(int64_t steps) {
  BRIGADE_CHECK(steps > 0, "launches_per_step: steps must be > 0, got ", steps);
  const emu::LaunchCounts c = emu::launch_counts();
  const double n = double(steps);
  StepLaunches l;
  l.launches = double(c.launches()) / n;
  l.kernels = double(c.kernels) / n;
  l.library_calls = double(c.library_calls) / n;
  l.copies = double(c.copies) / n;
  l.graph_launches = double(c.graph_launches) / n;
  l.host_syncs = double(c.host_syncs) / n;
  for (const auto& [name, count] : c.by_name) l.by_name[name] = double(count) / n;
  return l;
}
#else
bool launches_counted() { return false; }
void start_counting_launches() {}
StepLaunches launches_per_step(int64_t) {
  throw Error("launches_per_step: only the GPU emulator's build counts launches (-Dgpu_emulator=true)");
}
#endif

std::string launches_line(const StepLaunches& l) {
  const auto n = [](double v) { return format_fixed(v, v == double(int64_t(v)) ? 0 : 1); };
  std::string s = "launches per step: " + n(l.launches) + " (" + n(l.kernels) + " kernels, " + n(l.library_calls) +
                  " cuBLAS/cuDNN calls, " + n(l.copies) + " copies";
  if (l.graph_launches > 0) s += ", " + n(l.graph_launches) + " graph launches";
  return s + "), " + n(l.host_syncs) + " host syncs";
}

std::string launches_json(const StepLaunches& l) {
  std::string j = "{\"total\": " + json_number(l.launches) + ", \"kernels\": " + json_number(l.kernels) +
                  ", \"library_calls\": " + json_number(l.library_calls) + ", \"copies\": " + json_number(l.copies) +
                  ", \"graph_launches\": " + json_number(l.graph_launches) +
                  ", \"host_syncs\": " + json_number(l.host_syncs) + ", \"by_name\": {";
  bool first = true;
  for (const auto& [name, count] : l.by_name) {
    j += (first ? "" : ", ") + json_string(name) + ": " + json_number(count);
    first = false;
  }
  return j + "}}";
}

}  // namespace brigade::bench_step
