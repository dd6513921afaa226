#include "bench_kernels/command.h"

#include "bench/report.h"
#include "core/atomic_file.h"
#include "core/device.h"
#include "core/error.h"

// The GPU benchmarks need a real GPU: the CPU emulator's timings would mean nothing.
#define BRIGADE_BENCH_GPU (BRIGADE_HAVE_CUDA && !BRIGADE_CUDA_EMULATOR)

#if BRIGADE_BENCH_GPU
#include "bench_kernels/benchmarks.h"
#endif

namespace brigade::bench {
namespace {

const char* kUsage =
    "usage: brigade bench kernels [--json FILE] [--quick]\n"
    "\n"
    "Measures this GPU's ceilings (device-to-device copy bandwidth, cuBLAS bf16/f32 GEMM at 4096^3 and\n"
    "8192^3), then brigade's kernels against them: memory-bound kernels in GB/s and % of the copy\n"
    "bandwidth, the three matmul backends in TFLOP/s and % of cuBLAS, the direct convolution as % of\n"
    "cuDNN. Prints a table; --json also writes the results with the GPU, driver, CUDA version, date\n"
    "and commit (see bench/results/README.md).\n"
    "\n"
    "  --json FILE   write the report as JSON to FILE\n"
    "  --quick       fewer sizes and repeats (a smoke run)\n";

#if BRIGADE_BENCH_GPU
Report run_all(bool quick, std::ostream& progress) {
  Session s(Device::cuda(0), quick, progress);
  s.measure_copy_ceiling();
  for (int64_t n : {4096, 8192}) {
    for (DType t : {DType::bf16, DType::f32}) {
      const std::string size = std::to_string(n);
      s.add_ceiling(std::string("cuBLAS ") + dtype_name(t) + " GEMM " + size + "^3", s.cublas_tflops(t, n, n, n),
                    "TFLOP/s");
    }
  }
  // What ops::set_allow_tf32(true) would buy f32 matmuls (brigade leaves it off: f32 means f32).
  if (!quick) {
    const double tf32 = cublas_gemm(s.device(), DType::f32, 8192, 8192, 8192, true, TimingOptions{}).value;
    s.add_ceiling("cuBLAS f32 GEMM 8192^3 with TF32 (opt-in)", tf32, "TFLOP/s");
  }
  // A group that throws outside a measurement (while making its inputs) is reported, and the next
  // group still runs.
  const std::pair<const char*, void (*)(Session&)> groups[] = {
      {"memory", run_memory_benchmarks}, {"gemm", run_gemm_benchmarks}, {"conv", run_conv_benchmarks}};
  for (const auto& [name, run] : groups) {
    try {
      run(s);
    } catch (const std::exception& e) {
      s.record_failure({name, "(the rest of the group)", "", ""}, e.what());
    }
  }
  return s.report();
}

size_t count_failures(const Report& report) {
  size_t n = 0;
  for (const Measurement& m : report.results) n += !m.error.empty();
  return n;
}
#endif

}  // namespace

std::optional<KernelsOptions> parse_kernels_options(const std::vector<std::string>& args, std::string& error) {
  KernelsOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "--json") {
      if (i + 1 >= args.size() || args[i + 1].empty() || args[i + 1].rfind("--", 0) == 0) {
        error = "--json needs a file name";
        return std::nullopt;
      }
      o.json_path = args[++i];
    } else if (a.rfind("--json=", 0) == 0 && a.size() > 7) {
      o.json_path = a.substr(7);
    } else {
      error = "unknown argument '" + a + "'";
      return std::nullopt;
    }
  }
  return o;
}

int kernels_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string error;
  const std::optional<KernelsOptions> options = parse_kernels_options(args, error);
  if (!options) {
    err << "brigade bench kernels: " << error << "\n\n" << kUsage;
    return 2;
  }
  if (options->help) {
    out << kUsage;
    return 0;
  }
#if BRIGADE_CUDA_EMULATOR
  out << "brigade bench kernels: this build runs CUDA kernels on the CPU emulator (-Dgpu_emulator=true), "
         "whose timings mean nothing: build with nvcc on a GPU machine.\n";
  return 0;
#endif
  if (cuda_device_count() == 0) {
#if BRIGADE_HAVE_CUDA
    out << "brigade bench kernels: no GPU found (no device or no CUDA driver): nothing to measure.\n";
#else
    out << "brigade bench kernels: this build has no CUDA backend (configured with -Dcuda=disabled or without "
           "nvcc): nothing to measure.\n";
#endif
    return 0;
  }
#if BRIGADE_BENCH_GPU
  try {
    const Report report = run_all(options->quick, err);
    out << "\n" << report_text(report);
    if (!options->json_path.empty()) {
      // A reader (or a committed results file being replaced) never sees half a report; a failure
      // throws and is reported below.
      write_file_atomically(options->json_path, report_json(report), "--json");
      out << "\nwrote " << options->json_path << "\n";
    }
    if (const size_t failed = count_failures(report)) {
      err << "brigade bench kernels: " << failed << " measurement(s) failed (marked FAILED above)\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    err << "brigade bench kernels: " << e.what() << "\n";
    return 1;
  }
#else
  return 0;
#endif
}

}  // namespace brigade::bench
