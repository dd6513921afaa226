#include "nn/sharded_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json.h"
#include "core/read_file.h"
#include "optim/optimizer.h"
#include "core/safetensors.h"

namespace brigade::nn {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "brigade-sharded-checkpoint";
constexpr int kVersion = 1;

std::string index_path(const std::string& dir) { return (fs::path(dir) / kShardedIndexName).string(); }

template <class Value, class Write>
std::string json_object(const std::map<std::string, Value>& map, Write write) {
  std::string text = "{";
  for (const auto& [key, value] : map) text += (text.size() > 1 ? ",\n    " : "\n    ") + json_string(key) + ": " + write(value);
  return text + (map.empty() ? "}" : "\n  }");
}

// The members of `object`, each checked to be of `kind`.
const std::vector<std::pair<std::string, Json>>& members(const Json& root, const std::string& key, Json::Kind kind,
                                                         const std::string& context) {
  const Json& object = root[key];
  BRIGADE_CHECK(object.kind == Json::Kind::object, context, ": '", key, "' must be an object");
  for (const auto& [name, value] : object.members)
    BRIGADE_CHECK(value.kind == kind, context, ": '", key, "' entry '", name, "' has the wrong type");
  return object.members;
}

}  // namespace

std::string shard_name(int rank, int64_t step, int generation) {
  char name[80];
  if (generation == 0)
    std::snprintf(name, sizeof name, "rank-%05d-step-%08lld.safetensors", rank, static_cast<long long>(step));
  else
    std::snprintf(name, sizeof name, "rank-%05d-step-%08lld.g%d.safetensors", rank, static_cast<long long>(step),
                  generation);
  return name;
}

bool parse_shard_name(const std::string& name, int* rank, int64_t* step, int* generation) {
  int r = 0, g = 0;
  long long s = 0;
  char end = 0;
  const bool with_generation =
      std::sscanf(name.c_str(), "rank-%5d-step-%8lld.g%d.safetensor%c", &r, &s, &g, &end) == 4 && end == 's';
  if (!with_generation) {
    g = 0;
    end = 0;
    if (std::sscanf(name.c_str(), "rank-%5d-step-%8lld.safetensor%c", &r, &s, &end) != 3 || end != 's') return false;
  }
  if (r < 0 || s < 0 || g < 0 || shard_name(r, s, g) != name) return false;
  if (rank) *rank = r;
  if (step) *step = s;
  if (generation) *generation = g;
  return true;
}

bool is_shard_name(const std::string& name) { return parse_shard_name(name, nullptr, nullptr, nullptr); }

int next_shard_generation(const std::string& dir, int64_t step) {
  int next = 0;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    int64_t s = 0;
    int g = 0;
    if (entry.is_regular_file(ec) && parse_shard_name(entry.path().filename().string(), nullptr, &s, &g) && s == step)
      next = std::max(next, g + 1);
  }
  return next;
}

void remove_stale_shards(const std::string& dir, const ShardedIndex& index) {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file(ec) && is_shard_name(name) && !index.shards.count(name)) fs::remove(entry.path(), ec);
  }
}

void write_sharded_index(const std::string& dir, const ShardedIndex& index) {
  std::string text = "{\n  \"format\": " + json_string(kFormat) + ",\n  \"version\": " + std::to_string(kVersion);
  text += ",\n  \"metadata\": " + json_object(index.metadata, [](const std::string& v) { return json_string(v); });
  text += ",\n  \"shards\": " + json_object(index.shards, [](int64_t v) { return std::to_string(v); });
  text += ",\n  \"parameters\": " + json_object(index.parameters, [](const std::string& v) { return json_string(v); });
  text += "\n}\n";
  write_file_atomically(index_path(dir), text, "save checkpoint " + dir);
}

ShardedIndex read_sharded_index(const std::string& dir) {
  const std::string path = index_path(dir);
  std::error_code ec;
  BRIGADE_CHECK(fs::is_regular_file(path, ec), "checkpoint ", dir, ": no ", kShardedIndexName,
                " (a save that did not finish: the index is written last)");
  JsonLimits limits;
  limits.context = "checkpoint index " + path;
  const Json root = parse_json(read_file(path, "checkpoint index"), limits);
  BRIGADE_CHECK(root.kind == Json::Kind::object, limits.context, ": not a JSON object");
  BRIGADE_CHECK(root["format"].kind == Json::Kind::string && root["format"].string == kFormat, limits.context,
                ": not a brigade checkpoint index (\"format\" is not \"", kFormat, "\")");
  BRIGADE_CHECK(root["version"].as_number() == kVersion, limits.context, ": index version ",
                root["version"].as_number(), "; this build reads version ", kVersion);
  ShardedIndex index;
  for (const auto& [key, value] : members(root, "metadata", Json::Kind::string, limits.context))
    index.metadata[key] = value.string;
  for (const auto& [name, bytes] : members(root, "shards", Json::Kind::number, limits.context)) {
    BRIGADE_CHECK(name.find('/') == std::string::npos && name != ".." && bytes.integer && !bytes.negative,
                  limits.context, ": bad shard entry '", name, "'");
    index.shards[name] = int64_t(bytes.magnitude);
  }
  for (const auto& [param, shard] : members(root, "parameters", Json::Kind::string, limits.context)) {
    BRIGADE_CHECK(index.shards.count(shard.string), limits.context, ": parameter '", param, "' is in shard '",
                  shard.string, "', which the index does not list");
    index.parameters[param] = shard.string;
  }
  for (const auto& [name, bytes] : index.shards) {
    const fs::path shard = fs::path(dir) / name;
    const uintmax_t size = fs::file_size(shard, ec);
    BRIGADE_CHECK(!ec, "checkpoint ", dir, ": shard ", shard.string(), " is missing (", ec.message(), ")");
    BRIGADE_CHECK(int64_t(size) == bytes, "checkpoint ", dir, ": shard ", shard.string(), " is ", size,
                  " bytes, but the index recorded ", bytes, " (truncated or overwritten)");
  }
  return index;
}

Checkpoint load_checkpoint_part(const std::string& file, const std::set<std::string>& params, bool optimizer) {
  // A tensor is wanted when it is one of `params` or their optimizer state ("optim.<kind>.<name>"),
  // or the optimizer's own step count and learning rate.
  auto needed = [&params, optimizer](const std::string& tensor) {
    if (tensor.rfind("model.", 0) == 0) return params.count(tensor.substr(6)) > 0;
    if (!optimizer || tensor.rfind("optim.", 0) != 0) return false;
    const std::string key = tensor.substr(6);
    const std::string parameter = optim::Optimizer::parameter_of_key(key);
    return parameter.empty() ? (key == "step" || key == "lr") : params.count(parameter) > 0;
  };
  return checkpoint_from(load_safetensors(file, needed), file);
}

Checkpoint load_sharded_checkpoint(const std::string& dir, const ShardedIndex& index,
                                   const std::set<std::string>* wanted, bool optimizer) {
  // Which parameters to read from which shard.
  std::map<std::string, std::set<std::string>> by_shard;
  if (wanted == nullptr) {
    for (const auto& [param, shard] : index.parameters) by_shard[shard].insert(param);
  } else {
    for (const std::string& param : *wanted) {
      auto it = index.parameters.find(param);
      BRIGADE_CHECK(it != index.parameters.end(), "checkpoint ", dir, ": no parameter '", param,
                    "' in its index (a checkpoint of another model?)");
      by_shard[it->second].insert(param);
    }
  }
  Checkpoint out;
  out.metadata = index.metadata;
  for (const auto& [shard, params] : by_shard) {
    const std::string path = (fs::path(dir) / shard).string();
    Checkpoint part = load_checkpoint_part(path, params, optimizer);
    for (const std::string& param : params)
      BRIGADE_CHECK(part.model.count(param), "checkpoint ", dir, ": the index puts '", param, "' in ", path,
                    ", which does not hold it");
    out.model.merge(part.model);
    out.optimizer.merge(part.optimizer);  // "step" and "lr" are the same in every shard: the first stays
  }
  return out;
}

}  // namespace brigade::nn
