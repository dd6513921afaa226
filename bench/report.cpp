#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "core/json.h"

namespace brigade::bench {

std::string format_table(const std::vector<Column>& columns, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) width[c] = columns[c].name.size();
  for (size_t r = 0; r < rows.size(); ++r) {
    BRIGADE_CHECK(rows[r].size() == columns.size(), "format_table: row ", r, " has ", rows[r].size(),
                  " cells for ", columns.size(), " columns");
    for (size_t c = 0; c < columns.size(); ++c) width[c] = std::max(width[c], rows[r][c].size());
  }
  std::ostringstream os;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < columns.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      if (c > 0) text += "  ";
      text += columns[c].align_right ? pad + cells[c] : cells[c] + pad;
    }
    text.erase(text.find_last_not_of(' ') + 1);  // no trailing blanks
    os << text << "\n";
  };
  std::vector<std::string> names, dashes;
  for (size_t c = 0; c < columns.size(); ++c) {
    names.push_back(columns[c].name);
    dashes.push_back(std::string(width[c], '-'));
  }
  line(names);
  line(dashes);
  for (const auto& row : rows) line(row);
  return os.str();
}

std::string format_number(double value, int digits) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return "0";
  char buffer[64];
  const int magnitude = int(std::floor(std::log10(std::abs(value))));
  if (magnitude < -4 || magnitude > 15) {
    std::snprintf(buffer, sizeof(buffer), "%.*e", std::max(0, digits - 1), value);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.*f", std::max(0, digits - 1 - magnitude), value);
  }
  return buffer;
}

namespace {

std::string percent_text(const Measurement& m) {
  if (!m.error.empty()) return "FAILED: " + m.error;
  if (m.percent < 0 || m.baseline.empty()) return "";
  return format_number(m.percent, 3) + "% of " + m.baseline;
}

bool is_cpu_run(const Environment& e) { return e.device == "cpu"; }

// The lines that describe the machine: the CPU's for a CPU run, the GPU's and its driver's otherwise.
std::string machine_text(const Environment& e) {
  std::ostringstream os;
  if (is_cpu_run(e)) {
    os << "  CPU      " << e.cpu_name << " (" << e.cpu_logical_cores << " logical cores, brigade uses "
       << e.cpu_threads << " threads, last-level cache " << format_number(e.cpu_llc_mib) << " MiB)\n";
  } else {
    os << "  GPU      " << e.gpu_name << " (sm_" << e.compute_capability << ", " << e.sm_count << " SMs, "
       << format_number(e.memory_gib) << " GiB, L2 " << format_number(e.l2_mib) << " MiB)\n"
       << "  driver   " << (e.driver_version.empty() ? "unknown" : e.driver_version) << " (CUDA "
       << e.driver_cuda_version << "), runtime CUDA " << e.runtime_version << "\n";
  }
  return os.str();
}

}  // namespace

std::string report_text(const Report& report) {
  const Environment& e = report.env;
  std::ostringstream os;
  os << "brigade bench kernels" << (is_cpu_run(e) ? " on the CPU" : "") << (report.quick ? " (quick)" : "") << "\n"
     << machine_text(e) << "  commit   " << e.git_commit << ", " << e.date << "\n\n";

  std::vector<std::vector<std::string>> ceilings;
  for (const Ceiling& c : report.ceilings) ceilings.push_back({c.name, format_number(c.value, 4), c.unit});
  os << "Ceilings measured on this " << (is_cpu_run(e) ? "CPU" : "GPU") << "\n"
     << format_table({{"ceiling"}, {"value", true}, {"unit"}}, ceilings) << "\n";

  std::vector<std::vector<std::string>> rows;
  for (const Measurement& m : report.results) {
    const bool ran = m.error.empty();
    rows.push_back({m.group, m.name, m.shape, m.dtype, ran ? format_number(m.time_ms.median, 3) : "-",
                    ran ? format_number(m.achieved, 3) + " " + m.unit : "-", percent_text(m)});
  }
  os << format_table({{"group"}, {"kernel"}, {"shape"}, {"dtype"}, {"median ms", true}, {"achieved", true},
                      {"relative to"}},
                     rows);
  return os.str();
}

std::string environment_json(const Environment& e, const std::string& indent) {
  std::ostringstream os;
  os << indent << "\"date\": " << json_string(e.date) << ",\n"
     << indent << "\"git_commit\": " << json_string(e.git_commit) << ",\n"
     << indent << "\"device\": " << json_string(e.device) << ",\n"
     << indent << "\"cpu\": {\"name\": " << json_string(e.cpu_name) << ", \"logical_cores\": " << e.cpu_logical_cores
     << ", \"threads\": " << e.cpu_threads << ", \"llc_mib\": " << json_number(e.cpu_llc_mib) << "},\n"
     << indent << "\"gpu\": {\"name\": " << json_string(e.gpu_name)
     << ", \"compute_capability\": " << json_string(e.compute_capability) << ", \"sm_count\": " << e.sm_count
     << ", \"memory_gib\": " << json_number(e.memory_gib) << ", \"l2_mib\": " << json_number(e.l2_mib) << "},\n"
     << indent << "\"driver_version\": " << json_string(e.driver_version) << ",\n"
     << indent << "\"driver_cuda_version\": " << json_string(e.driver_cuda_version) << ",\n"
     << indent << "\"cuda_runtime_version\": " << json_string(e.runtime_version) << ",\n";
  return os.str();
}

std::string report_json(const Report& report) {
  const Environment& e = report.env;
  std::ostringstream os;
  os << "{\n"
     << "  \"benchmark\": \"brigade bench kernels\",\n"
     << "  \"quick\": " << (report.quick ? "true" : "false") << ",\n"
     << environment_json(e, "  ") << "  \"ceilings\": [";
  for (size_t i = 0; i < report.ceilings.size(); ++i) {
    const Ceiling& c = report.ceilings[i];
    os << (i ? "," : "") << "\n    {\"name\": " << json_string(c.name) << ", \"value\": " << json_number(c.value)
       << ", \"unit\": " << json_string(c.unit) << "}";
  }
  os << (report.ceilings.empty() ? "" : "\n  ") << "],\n  \"results\": [";
  for (size_t i = 0; i < report.results.size(); ++i) {
    const Measurement& m = report.results[i];
    os << (i ? "," : "") << "\n    {\"group\": " << json_string(m.group) << ", \"name\": " << json_string(m.name)
       << ", \"shape\": " << json_string(m.shape) << ", \"dtype\": " << json_string(m.dtype)
       << ", \"median_ms\": " << json_number(m.time_ms.median) << ", \"min_ms\": " << json_number(m.time_ms.min)
       << ", \"max_ms\": " << json_number(m.time_ms.max) << ", \"repeats\": " << m.time_ms.count
       << ", \"achieved\": " << json_number(m.achieved) << ", \"unit\": " << json_string(m.unit)
       << ", \"baseline\": " << json_string(m.baseline)
       << ", \"percent_of_baseline\": " << (m.percent < 0 ? "null" : json_number(m.percent));
    if (!m.error.empty()) os << ", \"error\": " << json_string(m.error);
    os << "}";
  }
  os << (report.results.empty() ? "" : "\n  ") << "]\n}\n";
  return os.str();
}

}  // namespace brigade::bench
