// How a pipeline's layers are cut into stages, as `brigade train --partition` names the ways
// (pipeline/partition.h holds the cutting itself).
#pragma once

#include <optional>
#include <string>

namespace brigade::pipeline {

enum class PartitionMethod {
  layers,    // by count (partition_uniform)
  params,    // by parameters (partition_by_cost over parameter counts)
  time,      // by time measured once (partition_by_cost over seconds)
  balanced,  // measured time and memory, blocks cut in halves, within a budget (partition_within_memory)
};

inline const char* partition_method_name(PartitionMethod method) {
  switch (method) {
    case PartitionMethod::layers: return "layers";
    case PartitionMethod::params: return "params";
    case PartitionMethod::time: return "time";
    case PartitionMethod::balanced: return "balanced";
  }
  return "?";
}

// The method `name` names, or nullopt.
inline std::optional<PartitionMethod> parse_partition_method(const std::string& name) {
  for (PartitionMethod m : {PartitionMethod::layers, PartitionMethod::params, PartitionMethod::time,
                            PartitionMethod::balanced})
    if (name == partition_method_name(m)) return m;
  return std::nullopt;
}

}  // namespace brigade::pipeline
