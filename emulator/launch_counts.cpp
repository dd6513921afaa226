// The launch counter of runtime.h: every piece of work the host issues to a stream, by name, and
// every wait of the host for the device. Counted where the runtime issues the work (streams.cpp),
// so nothing that reaches the device can escape it — kernels, library calls, copies, graph replays.
#include <map>
#include <mutex>
#include <string>

#include "emulator/launch_counts.h"

namespace brigade::emu {
namespace {

struct Counter {
  std::mutex mutex;
  LaunchCounts counts;
};

Counter& counter() {
  static Counter c;
  return c;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::string launch_name(const std::string& what) {
  // "name<<<(grid), (block), shared>>>" for a kernel; "cublasGemmEx(T, N, ...)",
  // "cudaMemcpyAsync of 64 bytes", "cudaGraphLaunch (12 nodes)" for the rest.
  const size_t kernel_end = what.find("<<<");
  if (kernel_end != std::string::npos) return what.substr(0, kernel_end);
  return what.substr(0, what.find_first_of(" (,"));
}

void count_issued(const std::string& what) {
  const std::string name = launch_name(what);
  Counter& c = counter();
  std::lock_guard<std::mutex> lock(c.mutex);
  LaunchCounts& n = c.counts;
  ++n.by_name[name];
  if (what.find("<<<") != std::string::npos) ++n.kernels;
  else if (starts_with(name, "cublas") || starts_with(name, "cudnn")) ++n.library_calls;
  else if (starts_with(name, "nccl")) ++n.communication;
  else if (starts_with(name, "cudaMemcpy") || starts_with(name, "cudaMemset")) ++n.copies;
  else if (starts_with(name, "cudaGraphLaunch")) ++n.graph_launches;
}

void count_host_sync(const std::string& call) {
  Counter& c = counter();
  std::lock_guard<std::mutex> lock(c.mutex);
  ++c.counts.host_syncs;
  ++c.counts.syncs_by_call[launch_name(call)];
}

LaunchCounts launch_counts() {
  Counter& c = counter();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.counts;
}

void reset_launch_counts() {
  Counter& c = counter();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.counts = LaunchCounts{};
}

uint64_t LaunchCounts::launches() const { return kernels + library_calls + communication + copies + graph_launches; }

}  // namespace brigade::emu
