#include "nn/hf_shards.h"

#include <cstdio>
#include <filesystem>
#include <set>
#include <system_error>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json.h"
#include "core/read_file.h"
#include "core/safetensors.h"

namespace brigade::nn {

namespace fs = std::filesystem;

namespace {

// "model-00002-of-00003.safetensors": shard `i` (from 1) of `n`, Hugging Face's spelling.
std::string shard_file(int64_t i, int64_t n) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05lld-of-%05lld.safetensors", static_cast<long long>(i),
                static_cast<long long>(n));
  return name;
}

bool is_shard_file(const std::string& name) {
  long long i = 0, n = 0;
  char end = 0;
  return std::sscanf(name.c_str(), "model-%5lld-of-%5lld.safetensor%c", &i, &n, &end) == 3 && end == 's' &&
         shard_file(i, n) == name;
}

}  // namespace

std::string hf_index_path(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path index = fs::path(path) / kHfIndexName;
    return fs::is_regular_file(index, ec) ? index.string() : "";
  }
  return fs::path(path).filename() == kHfIndexName && fs::is_regular_file(path, ec) ? path : "";
}

HfIndex hf_single_file_index(const std::string& path) {
  HfIndex index;
  index.path = path;
  index.dir = fs::path(path).parent_path().string();
  const std::string file = fs::path(path).filename().string();
  load_safetensors(path, [&](const std::string& name) {  // the header alone: no tensor is wanted
    index.weight_map[name] = file;
    return false;
  });
  return index;
}

HfIndex read_hf_index(const std::string& index_path) {
  HfIndex index;
  index.path = index_path;
  index.dir = fs::path(index_path).parent_path().string();
  JsonLimits limits;
  limits.context = "Hugging Face index " + index_path;
  limits.object_root = true;
  const Json root = parse_json(read_file(index_path, "read_hf_index"), limits);
  auto member = [&](const Json& object, const std::string& key, Json::Kind kind, const char* what) -> const Json& {
    for (const auto& [k, v] : object.members)
      if (k == key) {
        BRIGADE_CHECK(v.kind == kind, limits.context, ": '", what, "' is not ", kind == Json::Kind::object ? "an object" : "a number");
        return v;
      }
    fail(limits.context, ": no '", what, "'");
  };
  const Json& total = member(member(root, "metadata", Json::Kind::object, "metadata"), "total_size",
                             Json::Kind::number, "metadata.total_size");
  BRIGADE_CHECK(total.integer && !total.negative, limits.context, ": metadata.total_size is not a byte count");
  index.total_size = int64_t(total.magnitude);
  const Json& map = member(root, "weight_map", Json::Kind::object, "weight_map");
  for (const auto& [tensor, shard] : map.members) {
    BRIGADE_CHECK(shard.kind == Json::Kind::string, limits.context, ": weight_map entry '", tensor,
                  "' is not a file name");
    // Plain names only: an index must not send a reader outside its directory.
    BRIGADE_CHECK(!shard.string.empty() && shard.string.find('/') == std::string::npos && shard.string != "..",
                  limits.context, ": weight_map entry '", tensor, "' names '", shard.string,
                  "', not a file in the index's directory");
    index.weight_map[tensor] = shard.string;
  }
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : index.weight_map) shards.insert(shard);
  std::error_code ec;
  for (const std::string& shard : shards) {
    const fs::path file = fs::path(index.dir) / shard;
    BRIGADE_CHECK(fs::is_regular_file(file, ec), limits.context, ": shard ", file.string(),
                  " is missing (the index names it)");
  }
  return index;
}

std::map<std::string, Tensor> load_hf_shards(const HfIndex& index,
                                             const std::function<bool(const std::string&)>& wanted) {
  std::map<std::string, std::set<std::string>> by_shard;
  for (const auto& [tensor, shard] : index.weight_map)
    if (!wanted || wanted(tensor)) by_shard[shard].insert(tensor);
  std::map<std::string, Tensor> out;
  for (const auto& [shard, names] : by_shard) {
    const std::string path = (fs::path(index.dir) / shard).string();
    Safetensors part = load_safetensors(path, [&names](const std::string& n) { return names.count(n) > 0; });
    for (const std::string& name : names) {
      auto it = part.tensors.find(name);
      BRIGADE_CHECK(it != part.tensors.end(), "Hugging Face index ", index.path, ": puts '", name, "' in ", path,
                    ", which does not hold it");
      out.emplace(name, std::move(it->second));
    }
  }
  return out;
}

std::vector<std::string> save_hf_shards(const std::string& dir, const std::vector<std::pair<std::string, Tensor>>& tensors,
                                        int64_t max_shard_bytes, const std::map<std::string, std::string>& metadata) {
  BRIGADE_CHECK(max_shard_bytes > 0, "save_hf_shards ", dir, ": the maximum shard size must be positive");
  // Greedy, in order: a shard takes tensors until the next would take it past the maximum.
  std::vector<std::map<std::string, Tensor>> shards;
  int64_t filled = 0, total = 0;
  for (const auto& [name, t] : tensors) {
    const int64_t bytes = int64_t(t.nbytes());
    if (shards.empty() || (filled > 0 && filled + bytes > max_shard_bytes)) {
      shards.emplace_back();
      filled = 0;
    }
    BRIGADE_CHECK(shards.back().emplace(name, t).second, "save_hf_shards ", dir, ": tensor '", name, "' given twice");
    filled += bytes;
    total += bytes;
  }
  std::vector<std::string> written;
  std::set<std::string> keep;
  const int64_t n = int64_t(shards.size());
  if (n <= 1) {
    save_safetensors((fs::path(dir) / kHfSingleName).string(), shards.empty() ? std::map<std::string, Tensor>{} : shards[0],
                     metadata);
    written.push_back(kHfSingleName);
  } else {
    // An older export's index goes first: its shards are about to be overwritten, and a directory
    // without an index is plainly unfinished where one with a stale index would be a mixed model.
    std::error_code ec;
    fs::remove(fs::path(dir) / kHfIndexName, ec);
    std::string map_json;
    for (int64_t i = 0; i < n; ++i) {
      const std::string name = shard_file(i + 1, n);
      save_safetensors((fs::path(dir) / name).string(), shards[size_t(i)], metadata);
      written.push_back(name);
    }
    // The weight map sorted by tensor name, as Hugging Face writes it.
    std::map<std::string, std::string> weight_map;
    for (int64_t i = 0; i < n; ++i)
      for (const auto& [name, t] : shards[size_t(i)]) weight_map[name] = written[size_t(i)];
    for (const auto& [name, shard] : weight_map)
      map_json += (map_json.empty() ? "\n    " : ",\n    ") + json_string(name) + ": " + json_string(shard);
    const std::string text = "{\n  \"metadata\": {\n    \"total_size\": " + std::to_string(total) +
                             "\n  },\n  \"weight_map\": {" + map_json + "\n  }\n}\n";
    // Last: the index is what makes the shards a model.
    write_file_atomically((fs::path(dir) / kHfIndexName).string(), text, "save_hf_shards " + dir);
    written.push_back(kHfIndexName);
  }
  keep.insert(written.begin(), written.end());
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool ours = is_shard_file(name) || name == kHfSingleName || name == kHfIndexName;
    if (ours && !keep.count(name) && entry.is_regular_file(ec)) fs::remove(entry.path(), ec);
  }
  return written;
}

}  // namespace brigade::nn
