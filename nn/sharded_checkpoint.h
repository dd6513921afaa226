// Sharded checkpoints: one checkpoint as a directory of safetensors shards and an index, so that
// every pipeline rank writes (and later reads) only its own parameters and no rank ever holds the
// whole model's state.
//
//   run/step-00000500/
//     rank-00000-step-00000500.safetensors   a checkpoint file (nn/checkpoint.h) of the parameters that
//     rank-00001-step-00000500.safetensors     rank wrote: "model.<name>", "optim.<kind>.<name>", and
//                                              "optim.step", "optim.lr"
//     index.json    written last: {"format": "brigade-sharded-checkpoint", "version": 1,
//                     "metadata": {"step": "500", ...},
//                     "shards": {"rank-00000-step-00000500.safetensors": 123456, ...},     <- bytes
//                     "parameters": {"blocks.0.attn.qkv.weight": "rank-00000-step-00000500.safetensors", ...}}
//
// Everything is keyed by the parameters' full names, never by stage or position, so a checkpoint
// written under one pipeline layout loads under any other. The index is the commit record: a
// directory without one, or whose shards are missing or not the size the index recorded, is not a
// checkpoint (read_sharded_index throws saying which file).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "nn/checkpoint.h"

namespace brigade::nn {

inline constexpr const char* kShardedIndexName = "index.json";

// "rank-00003-step-00000500.safetensors": the shard the pipeline's rank 3 writes at step 500. The
// step is in the name so that a save over an older checkpoint in the same directory (--save PATH
// again and again) never overwrites a shard the old index still points at: the old checkpoint stays
// whole until the new index replaces the old one. A save of a step whose shards are already there (a
// run resumed at its last step and saved again) takes the next generation,
// "rank-00003-step-00000500.g1.safetensors", for the same reason.
std::string shard_name(int rank, int64_t step, int generation = 0);
// The parts of a shard's name; false when `name` is not one (any out-pointer may be null).
bool parse_shard_name(const std::string& name, int* rank, int64_t* step, int* generation);
// The generation a new save of `step` into `dir` uses: one past every shard of that step there (0: none).
int next_shard_generation(const std::string& dir, int64_t step);

struct ShardedIndex {
  std::map<std::string, std::string> metadata;
  std::map<std::string, int64_t> shards;          // file name in the directory -> its size in bytes
  std::map<std::string, std::string> parameters;  // parameter name -> the shard that holds it
};

// Whether `name` is of that form (what remove_stale_shards may delete).
bool is_shard_name(const std::string& name);

// Deletes the shards in `dir` that `index` does not list (those of older saves to the same path).
void remove_stale_shards(const std::string& dir, const ShardedIndex& index);

// Writes DIR/index.json atomically (core/atomic_file.h).
void write_sharded_index(const std::string& dir, const ShardedIndex& index);

// Reads DIR/index.json and checks that every shard it lists is there with the recorded size (a stat,
// no data read). Throws Error naming the file when the index is missing or malformed, or a shard is
// missing or truncated.
ShardedIndex read_sharded_index(const std::string& dir);

// The parameters named in `wanted` (every parameter when null) with their optimizer state and the
// index's metadata, reading only the shards that hold them and, in those, only their tensors. Throws
// naming the directory when a wanted parameter is not in the checkpoint.
// From one safetensors file (a shard, or an older build's single-file checkpoint): only the
// parameters `params` names, their optimizer state and the optimizer's own step count and learning
// rate, with the file's metadata. What a pipeline rank reads of a checkpoint: its own part.
// `optimizer` false reads the parameters alone (generation needs no optimizer state).
Checkpoint load_checkpoint_part(const std::string& file, const std::set<std::string>& params, bool optimizer = true);

Checkpoint load_sharded_checkpoint(const std::string& dir, const ShardedIndex& index,
                                   const std::set<std::string>* wanted = nullptr, bool optimizer = true);

}  // namespace brigade::nn
