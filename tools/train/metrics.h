// `brigade train --metrics FILE`: what the run measures, kept in a file a cluster user can watch,
// copy and plot — one JSON object per line (JSON Lines), one line per progress line and per
// validation, each flushed as it is written:
//
//   {"kind":"train","step":100,"loss":2.3456,"lr":0.00297,"tokens_per_second":41234,"mfu":0.312,
//    "peak_memory_bytes":[123456789,98765432],"elapsed_s":12.5,"time":1795900000.25}
//   {"kind":"validation","step":100,"validation_loss":2.4012,"peak_memory_bytes":[...],...}
//
// "mfu" only where the run knows the device's peak (language modelling); "peak_memory_bytes" has one
// entry per pipeline rank (one for a run without a pipeline): the most that rank has held since its
// model was built — host memory on the CPU, on a GPU the device memory the caching allocator charged to
// that rank (core/memory_account.h: ranks that are threads of one process each have their own). "elapsed_s" is
// seconds since this process started the run, "time" the wall clock (Unix seconds).
//
// A resumed run continues the file: the lines of steps past the checkpoint it resumes from are
// dropped first (the file is rewritten atomically), so the file reads as one run.
#pragma once

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::train {

struct MetricsRecord {
  enum class Kind { train, validation };
  static constexpr double none = std::numeric_limits<double>::quiet_NaN();

  Kind kind = Kind::train;
  int64_t step = 0;
  double loss = none;             // train: the mean training loss since the previous line
  double validation_loss = none;  // validation
  double lr = none;               // train
  double tokens_per_second = none;
  double mfu = none;              // train, when known
  std::vector<double> peak_memory_bytes;
  double elapsed_s = none;
  double time = none;
};

// One line of the file, without its newline.
std::string metrics_line(const MetricsRecord& record);

// The record `line` holds. Throws Error naming `where` ("m.jsonl line 3") when it is not one.
MetricsRecord parse_metrics_line(std::string_view line, const std::string& where);

// Every record of the file at `path`, in order. Throws Error naming the file (and the line) when it
// cannot be read or a line is not a record.
std::vector<MetricsRecord> read_metrics(const std::string& path);

// The file a run appends to. Only the run's leader opens one.
class MetricsLog {
 public:
  // Opens `path` for a run that starts at `start_step`: records of later steps (left by the run that
  // was interrupted after the checkpoint this one resumes from) are dropped, the file rewritten
  // atomically when that removes any; a run from step 0 starts a new file (a file left by an earlier
  // run is replaced). Throws Error naming the path and --metrics when it cannot.
  MetricsLog(std::string path, int64_t start_step);
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  ~MetricsLog();

  // Appends the record's line and flushes it to the file, so a reader sees it now.
  void append(const MetricsRecord& record);

  // The file's records: the ones kept from before, then those appended.
  const std::vector<MetricsRecord>& records() const { return records_; }
  // Whether the file already has a validation record of `step` (a resumed run does not measure it twice).
  bool has_validation(int64_t step) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<MetricsRecord> records_;
  std::FILE* file_ = nullptr;
};

}  // namespace brigade::train
