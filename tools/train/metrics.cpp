#include "metrics.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json.h"

namespace brigade::train {

namespace {

const char* kind_name(MetricsRecord::Kind kind) {
  return kind == MetricsRecord::Kind::train ? "train" : "validation";
}

// A field that is NaN (not measured) is left out of the line rather than written as null.
void number_field(std::string& line, const char* name, double value) {
  if (std::isnan(value)) return;
  line += ",\"";
  line += name;
  line += "\":" + json_number(value);
}

double optional_number(const Json& object, const char* name) {
  for (const auto& [key, value] : object.members)
    if (key == name) return value.kind == Json::Kind::null ? MetricsRecord::none : value.as_number();
  return MetricsRecord::none;
}

}  // namespace

std::string metrics_line(const MetricsRecord& r) {
  std::string line = "{\"kind\":\"" + std::string(kind_name(r.kind)) + "\",\"step\":" + std::to_string(r.step);
  number_field(line, "loss", r.loss);
  number_field(line, "validation_loss", r.validation_loss);
  number_field(line, "lr", r.lr);
  number_field(line, "tokens_per_second", r.tokens_per_second);
  number_field(line, "mfu", r.mfu);
  if (!r.peak_memory_bytes.empty()) {
    line += ",\"peak_memory_bytes\":[";
    for (size_t i = 0; i < r.peak_memory_bytes.size(); ++i)
      line += (i > 0 ? "," : "") + json_number(r.peak_memory_bytes[i]);
    line += "]";
  }
  number_field(line, "elapsed_s", r.elapsed_s);
  number_field(line, "time", r.time);
  return line + "}";
}

MetricsRecord parse_metrics_line(std::string_view line, const std::string& where) {
  JsonLimits limits;
  limits.context = where;
  limits.document = "metrics record";
  limits.object_root = true;
  const Json json = parse_json(line, limits);
  MetricsRecord r;
  try {
    const std::string& kind = json["kind"].string;
    BRIGADE_CHECK(kind == "train" || kind == "validation", "\"kind\" is '", kind, "', not train or validation");
    r.kind = kind == "train" ? MetricsRecord::Kind::train : MetricsRecord::Kind::validation;
    const Json& step = json["step"];
    BRIGADE_CHECK(step.integer && !step.negative, "\"step\" is not a step number");
    r.step = int64_t(step.magnitude);
    r.loss = optional_number(json, "loss");
    r.validation_loss = optional_number(json, "validation_loss");
    r.lr = optional_number(json, "lr");
    r.tokens_per_second = optional_number(json, "tokens_per_second");
    r.mfu = optional_number(json, "mfu");
    for (const auto& [key, value] : json.members)
      if (key == "peak_memory_bytes")
        for (const Json& bytes : value.items) r.peak_memory_bytes.push_back(bytes.as_number());
    r.elapsed_s = optional_number(json, "elapsed_s");
    r.time = optional_number(json, "time");
  } catch (const Error& e) {
    fail(where, ": not a metrics record: ", e.what());
  }
  return r;
}

std::vector<MetricsRecord> read_metrics(const std::string& path) {
  std::ifstream in(path);
  BRIGADE_CHECK(in, path, ": cannot read the metrics file: ", std::strerror(errno));
  std::vector<MetricsRecord> records;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    // A last line without its newline was cut short (the run died mid-write: a full disk, a lost
    // node): it is no record, and a resumed run drops it rather than refusing to start.
    if (in.eof()) break;
    if (!line.empty()) records.push_back(parse_metrics_line(line, path + " line " + std::to_string(number)));
  }
  return records;
}

MetricsLog::MetricsLog(std::string path, int64_t start_step) : path_(std::move(path)) {
  const std::string who = "--metrics " + path_;
  // A resumed run keeps what the interrupted one wrote up to the checkpoint; a line it wrote after
  // the checkpoint belongs to steps that are now run again.
  std::error_code exists_error;
  if (start_step > 0 && std::filesystem::exists(path_, exists_error)) {
    const std::vector<MetricsRecord> old = read_metrics(path_);
    for (const MetricsRecord& r : old)
      if (r.step <= start_step) records_.push_back(r);
    std::error_code size_error;
    const auto bytes = std::filesystem::file_size(path_, size_error);
    size_t kept_bytes = 0;
    for (const MetricsRecord& r : records_) kept_bytes += metrics_line(r).size() + 1;
    // Rewritten when anything goes: records past the checkpoint, or a last line cut short.
    if (records_.size() < old.size() || size_error || bytes != kept_bytes) {
      std::string kept;
      for (const MetricsRecord& r : records_) kept += metrics_line(r) + "\n";
      write_file_atomically(path_, kept, who);
    }
  } else {
    write_file_atomically(path_, "", who);  // a new run: a new (empty) file, never half of an old one
  }
  file_ = std::fopen(path_.c_str(), "a");
  BRIGADE_CHECK(file_ != nullptr, who, ": cannot append to the file: ", std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

bool MetricsLog::has_validation(int64_t step) const {
  for (const MetricsRecord& r : records_)
    if (r.kind == MetricsRecord::Kind::validation && r.step == step) return true;
  return false;
}

void MetricsLog::append(const MetricsRecord& record) {
  const std::string line = metrics_line(record) + "\n";
  // One fwrite and a flush per record: a reader tailing the file sees whole lines as they come.
  BRIGADE_CHECK(std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fflush(file_) == 0,
                "--metrics ", path_, ": cannot write: ", std::strerror(errno));
  records_.push_back(record);
}

}  // namespace brigade::train
