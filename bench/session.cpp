#include "bench/session.h"

#include <algorithm>

#include "bench/cpu_info.h"
#include "bench/environment.h"
#include "core/error.h"
#include "core/parallel.h"

namespace brigade::bench {
namespace {

Measurement labelled(const Label& label) {
  Measurement m;
  m.group = label.group;
  m.name = label.name;
  m.shape = label.shape;
  m.dtype = label.dtype;
  return m;
}

}  // namespace

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string out;
  for (int64_t d : dims) out.append(out.empty() ? "" : "x").append(std::to_string(d));
  return out;
}

Session::Session(Device device, bool quick, std::ostream& progress)
    : device_(device), quick_(quick), progress_(progress) {
  if (device.is_cpu()) {
    // The CPU has less lazy set-up to warm (no handles or plans: the allocator and fresh pages), and
    // runs ~100x slower than a GPU: fewer, longer repeats, whose median is as stable.
    timing_.warmup = 1;
    timing_.budget_ms = quick ? 30 : 250;
    timing_.min_repeats = quick ? 3 : 5;
    timing_.max_repeats = 100;
  } else {
    timing_.budget_ms = quick ? 100 : 500;
    timing_.min_repeats = quick ? 5 : 10;
  }
  report_.env = describe_environment(device);
  report_.quick = quick;
}

const char* Session::flop_unit() const { return device_.is_cpu() ? "GFLOP/s" : "TFLOP/s"; }

void Session::add_ceiling(const std::string& name, double value, const std::string& unit) {
  report_.ceilings.push_back({name, value, unit});
  progress_ << "ceiling  " << name << ": " << format_number(value, 4) << " " << unit << std::endl;
}

void Session::measure_copy_ceiling() {
  if (device_.is_cpu()) {
    // At least 8 times the last-level cache (4 for --quick), so almost every byte comes from memory.
    const size_t llc = describe_cpu().llc_bytes;
    const size_t bytes = quick_ ? std::max(4 * llc, size_t(128) << 20) : std::max(8 * llc, size_t(256) << 20);
    copy_gbps_ = cpu_copy_bandwidth(bytes, timing_).value;
    add_ceiling("copy bandwidth: memcpy of " + std::to_string(bytes >> 20) + " MiB on " +
                    std::to_string(num_threads()) + " threads",
                copy_gbps_, "GB/s");
    return;
  }
#if BRIGADE_BENCH_GPU
  // 1 GiB: far beyond L2, long enough that launch overhead is noise.
  const size_t bytes = quick_ ? (size_t(256) << 20) : (size_t(1) << 30);
  copy_gbps_ = copy_bandwidth(device_, bytes, timing_).value;
  add_ceiling("device-to-device copy (cudaMemcpyAsync " + std::to_string(bytes >> 20) + " MiB)", copy_gbps_, "GB/s");
#else
  throw Error("measure_copy_ceiling: cannot measure " + device_.str() + ": this build has no CUDA backend");
#endif
}

void Session::measure_fma_peak() {
  BRIGADE_CHECK(device_.is_cpu(), "measure_fma_peak: the FMA peak is the CPU's ceiling, not ", device_.str(), "'s");
  fma_gflops_ = cpu_fma_peak(timing_).value;
  add_ceiling("FMA peak: " + cpu_fma_peak_kind() + " on " + std::to_string(num_threads()) + " threads", fma_gflops_,
              "GFLOP/s");
}

#if BRIGADE_BENCH_GPU
double Session::cublas_tflops(DType dtype, int64_t m, int64_t n, int64_t k) {
  const std::string key = std::string(dtype_name(dtype)) + " " + dims_text({m, n, k});
  auto it = cublas_tflops_.find(key);
  if (it != cublas_tflops_.end()) return it->second;
  const double tflops = cublas_gemm(device_, dtype, m, n, k, false, timing_).value;
  cublas_tflops_[key] = tflops;
  return tflops;
}
#endif

void Session::bandwidth(const Label& label, double bytes, const std::function<void()>& run) {
  Measurement m = labelled(label);
  m.unit = "GB/s";
  if (time_into(m, run)) {
    m.achieved = bytes / (m.time_ms.median * 1e-3) / 1e9;
    if (copy_gbps_ > 0) {
      m.baseline = "copy bandwidth";
      m.percent = 100 * m.achieved / copy_gbps_;
    }
  }
  add(std::move(m));
}

double Session::throughput(const Label& label, double flops, const std::function<void()>& run,
                           const std::string& baseline, double baseline_rate) {
  Measurement m = labelled(label);
  m.unit = flop_unit();
  if (time_into(m, run)) {
    const double flops_per_unit = device_.is_cpu() ? 1e9 : 1e12;
    m.achieved = flops / (m.time_ms.median * 1e-3) / flops_per_unit;
    if (baseline_rate > 0) {
      m.baseline = baseline;
      m.percent = 100 * m.achieved / baseline_rate;
    }
  }
  const double achieved = m.achieved;
  add(std::move(m));
  return achieved;
}

void Session::record_failure(const Label& label, const std::string& error) {
  Measurement m = labelled(label);
  m.error = error;
  add(std::move(m));
}

void Session::note(const std::string& line) { progress_ << "  " << line << std::endl; }

bool Session::time_into(Measurement& m, const std::function<void()>& run) {
  try {
    m.time_ms = time_on(device_, run, timing_);
    return true;
  } catch (const std::exception& e) {
    m.error = e.what();
    return false;
  }
}

void Session::add(Measurement m) {
  progress_ << m.group << "  " << m.name << "  " << m.shape << "  " << m.dtype << ": ";
  if (m.error.empty())
    progress_ << format_number(m.time_ms.median) << " ms, " << format_number(m.achieved) << " " << m.unit;
  else
    progress_ << "FAILED: " << m.error;
  progress_ << std::endl;
  report_.results.push_back(std::move(m));
}

}  // namespace brigade::bench
