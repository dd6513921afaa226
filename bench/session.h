// One run of `brigade bench kernels`: the device (the CPU or a GPU), the timing settings, the ceilings
// measured so far and the report being filled. The benchmark groups (memory-bound kernels, GEMMs,
// convolutions) each add their measurements through it, so every row gets its rate and percentage the
// same way.
#pragma once

#include "bench/gpu.h"

#include <functional>
#include <vector>
#include <map>
#include <ostream>
#include <string>

#include "bench/ceilings.h"
#include "bench/report.h"
#include "bench/timer.h"

namespace brigade::bench {

// What a row is: its group, kernel, shape and dtype (the first four columns of the table).
struct Label {
  std::string group, name, shape, dtype;
};

class Session {
 public:
  Session(Device device, bool quick, std::ostream& progress);

  Device device() const { return device_; }
  bool quick() const { return quick_; }
  Report& report() { return report_; }
  const TimingOptions& timing() const { return timing_; }

  // The rate FLOP counts are reported in: "TFLOP/s" on a GPU, "GFLOP/s" on the CPU (which is a
  // thousand times slower: TFLOP/s would read 0.0x).
  const char* flop_unit() const;

  // The copy bandwidth every memory-bound kernel is compared with (the baseline "copy bandwidth"):
  // device-to-device cudaMemcpyAsync on a GPU, memcpy on brigade's threads on the CPU.
  void measure_copy_ceiling();
  // The CPU only: the FMA peak (bench/fma_peak.cpp) every GEMM and convolution is compared with (the
  // baseline "FMA peak"), in GFLOP/s; fma_peak() is 0 until it was measured.
  void measure_fma_peak();
  double fma_peak() const { return fma_gflops_; }
#if BRIGADE_BENCH_GPU
  // Raw cuBLAS at m x n x k (cached: each shape and dtype is measured once per run).
  double cublas_tflops(DType dtype, int64_t m, int64_t n, int64_t k);
#endif
  void add_ceiling(const std::string& name, double value, const std::string& unit);

  // A measurement that throws (a kernel that fails, a dtype a backend lacks) is recorded with its
  // error and the run goes on: one broken kernel should not hide the numbers of all the others.

  // Times `run` as a memory-bound kernel moving `bytes` per call: GB/s, % of the copy bandwidth.
  void bandwidth(const Label& label, double bytes, const std::function<void()>& run);
  // Times `run` as a kernel doing `flops` per call: flop_unit(), and % of `baseline_rate` (in the same
  // unit; <= 0: none). Returns the rate reached (0 if it failed), for rows that are someone else's
  // baseline.
  double throughput(const Label& label, double flops, const std::function<void()>& run, const std::string& baseline,
                    double baseline_rate);
  // A row for something that failed outside a measurement (setting up a group's inputs, say).
  void record_failure(const Label& label, const std::string& error);
  // A line of progress that is no row (which GEMM the tuned backend picked, say).
  void note(const std::string& line);

 private:
  void add(Measurement m);
  // Times `run` into m.time_ms; on an exception, records it in m.error and returns false.
  bool time_into(Measurement& m, const std::function<void()>& run);

  Device device_;
  bool quick_;
  TimingOptions timing_;
  std::ostream& progress_;
  Report report_;
  double copy_gbps_ = 0;
  double fma_gflops_ = 0;
  std::map<std::string, double> cublas_tflops_;
};

// "4096x4096", "16384x768x3072"
std::string dims_text(const std::vector<int64_t>& dims);

}  // namespace brigade::bench
