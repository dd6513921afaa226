#include "bench/environment.h"

#include <cctype>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "bench/commit.h"
#include "bench/cpu_info.h"
#include "core/parallel.h"

#if BRIGADE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace brigade::bench {

std::string cuda_version_text(int version) {
  if (version <= 0) return "unknown";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string nvidia_driver_version(const std::string& proc_text) {
  const std::string marker = "Kernel Module";
  const size_t at = proc_text.find(marker);
  if (at == std::string::npos) return "";
  // The first word that looks like a version: the open module's line has words in between
  // ("... Open Kernel Module for x86_64  580.159.04  Release Build ...", seen on an H200).
  std::istringstream rest(proc_text.substr(at + marker.size(), proc_text.find('\n', at) - at - marker.size()));
  for (std::string word; rest >> word;) {
    const bool version_like = std::isdigit(static_cast<unsigned char>(word[0])) && word.find('.') != std::string::npos &&
                              word.find_first_not_of("0123456789.") == std::string::npos;
    if (version_like) return word;
  }
  return "";
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

Environment describe_environment(Device device) {
  Environment e;
  e.date = utc_timestamp();
  // Built from a copy without .git (a lent GPU machine gets the files, not the history), the build
  // knows no commit: BRIGADE_GIT_COMMIT in the environment then says which one it was.
  const char* given = std::getenv("BRIGADE_GIT_COMMIT");
  e.git_commit = given != nullptr && *given != '\0' ? given : BRIGADE_GIT_COMMIT;
  e.device = device.str();
  if (device.is_cpu()) {
    const CpuInfo cpu = describe_cpu();
    e.cpu_name = cpu.name;
    e.cpu_logical_cores = cpu.logical_cores;
    e.cpu_threads = num_threads();
    e.cpu_llc_mib = double(cpu.llc_bytes) / double(1 << 20);
    return e;
  }
  std::ifstream proc("/proc/driver/nvidia/version");
  if (proc) {
    std::stringstream text;
    text << proc.rdbuf();
    e.driver_version = nvidia_driver_version(text.str());
  }
#if BRIGADE_HAVE_CUDA
  // Each query may fail on a machine without a driver; what is unknown stays empty.
  int version = 0;
  if (cudaRuntimeGetVersion(&version) == cudaSuccess) e.runtime_version = cuda_version_text(version);
  if (cudaDriverGetVersion(&version) == cudaSuccess) e.driver_cuda_version = cuda_version_text(version);
  cudaDeviceProp prop{};
  if (device.is_cuda() && cudaGetDeviceProperties(&prop, device.index) == cudaSuccess) {
    e.gpu_name = prop.name;
    e.compute_capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    e.sm_count = prop.multiProcessorCount;
    e.memory_gib = double(prop.totalGlobalMem) / double(1ull << 30);
    e.l2_mib = double(prop.l2CacheSize) / double(1 << 20);
  }
  cudaGetLastError();  // clear any error a failed query left behind
#endif
  return e;
}

}  // namespace brigade::bench
