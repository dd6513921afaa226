#include "bench/session.h"

#include "bench/environment.h"

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

std::string dims_text(std::initializer_list<int64_t> dims) {
  std::string out;
  for (int64_t d : dims) out.append(out.empty() ? "" : "x").append(std::to_string(d));
  return out;
}

Session::Session(Device device, bool quick, std::ostream& progress)
    : device_(device), quick_(quick), progress_(progress) {
  timing_.budget_ms = quick ? 100 : 500;
  timing_.min_repeats = quick ? 5 : 10;
  report_.env = describe_environment(device);
  report_.quick = quick;
}

void Session::add_ceiling(const std::string& name, double value, const std::string& unit) {
  report_.ceilings.push_back({name, value, unit});
  progress_ << "ceiling  " << name << ": " << format_number(value, 4) << " " << unit << std::endl;
}

void Session::measure_copy_ceiling() {
  // 1 GiB: far beyond L2, long enough that launch overhead is noise.
  const size_t bytes = quick_ ? (size_t(256) << 20) : (size_t(1) << 30);
  copy_gbps_ = copy_bandwidth(device_, bytes, timing_).value;
  add_ceiling("device-to-device copy (cudaMemcpyAsync " + std::to_string(bytes >> 20) + " MiB)", copy_gbps_, "GB/s");
}

double Session::cublas_tflops(DType dtype, int64_t m, int64_t n, int64_t k) {
  const std::string key = std::string(dtype_name(dtype)) + " " + dims_text({m, n, k});
  auto it = cublas_tflops_.find(key);
  if (it != cublas_tflops_.end()) return it->second;
  const double tflops = cublas_gemm(device_, dtype, m, n, k, false, timing_).value;
  cublas_tflops_[key] = tflops;
  return tflops;
}

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
                           const std::string& baseline, double baseline_tflops) {
  Measurement m = labelled(label);
  m.unit = "TFLOP/s";
  if (time_into(m, run)) {
    m.achieved = flops / (m.time_ms.median * 1e-3) / 1e12;
    if (baseline_tflops > 0) {
      m.baseline = baseline;
      m.percent = 100 * m.achieved / baseline_tflops;
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

bool Session::time_into(Measurement& m, const std::function<void()>& run) {
  try {
    m.time_ms = time_gpu(device_, run, timing_);
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
