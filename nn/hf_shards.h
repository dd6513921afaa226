// Hugging Face's sharded safetensors layout: a model too large for one file, as
// `save_pretrained(..., max_shard_size=...)` writes it.
//
//   model-00001-of-00003.safetensors     ordinary safetensors files (core/safetensors.h), each a
//   model-00002-of-00003.safetensors       share of the tensors, none larger than the maximum shard
//   model-00003-of-00003.safetensors       size unless one tensor alone is
//   model.safetensors.index.json         {"metadata": {"total_size": <bytes of all tensor data>},
//                                         "weight_map": {"<tensor name>": "<shard file>", ...}}
//
// A model that fits in one shard is written as one `model.safetensors` and no index, as Hugging
// Face does. Nothing here knows a model: names in, tensors out (nn/gpt2_hf_dir.h is GPT-2's use).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace brigade::nn {

inline constexpr const char* kHfIndexName = "model.safetensors.index.json";
inline constexpr const char* kHfSingleName = "model.safetensors";

// The index's path when `path` is a directory holding model.safetensors.index.json, or that file
// itself; "" for anything else (a single safetensors file, a brigade checkpoint directory).
std::string hf_index_path(const std::string& path);

struct HfIndex {
  std::string path;                               // of the index file, for messages
  std::string dir;                                // where the shards are
  int64_t total_size = 0;                         // metadata.total_size
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name
};

// Reads and checks an index: its JSON, that every shard it names is a plain file name and exists.
// Throws Error naming the index (and the shard that is missing).
HfIndex read_hf_index(const std::string& index_path);

// One safetensors file as an index of one shard: every tensor in its header (read without the data)
// maps to it. So a reader that takes some tensors of a sharded model takes them of a single file too.
HfIndex hf_single_file_index(const std::string& path);

// The tensors of the weight map that `wanted` accepts (all when null), reading only the shards that
// hold them and, in each, only those tensors. Throws naming the index, the shard and the tensor when
// a shard does not hold what the index says it does.
std::map<std::string, Tensor> load_hf_shards(const HfIndex& index,
                                             const std::function<bool(const std::string&)>& wanted = nullptr);

// Writes `tensors`, in that order, into `dir` (which must exist): greedily filled shards of at most
// `max_shard_bytes` of tensor data each (a tensor larger than that alone in its own), every shard
// atomically, then the index last, so that a directory whose index is there is complete (an older
// export's index is removed before the first shard is written). One shard
// is written as model.safetensors without an index. Files of an earlier export to `dir` that the
// new one does not use (other shard names, the single file or the index) are removed afterwards.
// Returns the files written, in order.
std::vector<std::string> save_hf_shards(const std::string& dir, const std::vector<std::pair<std::string, Tensor>>& tensors,
                                        int64_t max_shard_bytes, const std::map<std::string, std::string>& metadata);

}  // namespace brigade::nn
