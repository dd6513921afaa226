// A checkpoint directory (`brigade train --save DIR/`): one sharded checkpoint (a directory of
// shards and an index, nn/sharded_checkpoint.h) per saved step, the newest few kept.
//
//   runs/sort/step-00000250/                 index.json, rank-00000-step-00000250.safetensors, ...
//   runs/sort/step-00000500/
//   runs/sort/step-00000125.safetensors      a single-file checkpoint of an older build: still read
//
// Only names of exactly these forms are checkpoints. The temporary file of a save that was killed
// half-way (core/atomic_file.h: "<name>.tmp.<pid>.<n>", renamed when complete) never matches, so it
// is neither resumed from nor deleted; a step directory whose index is missing (the index is written
// last) or whose shards are missing or truncated is passed over with a warning. This file knows
// names and files; whether a checkpoint fits the run is the trainer's business.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/checkpoint.h"

namespace brigade::train {

// Whether --save names a directory of checkpoints: any path that ends with '/', or an existing
// directory that is not itself a sharded checkpoint (holds no index.json and no shard).
bool is_checkpoint_dir(const std::string& save);

// Creates `dir` when it is missing (only its last component: the parent must exist). Throws Error
// naming the path when the parent is missing or `dir` exists but is not a directory.
void make_checkpoint_dir(const std::string& dir);

// "DIR/step-00000250": where a save of that step goes; the step zero-padded to 8 digits, so names
// sort like steps.
std::string checkpoint_path(const std::string& dir, int64_t step);
// "DIR/step-00000250.safetensors": the single file an older build saved.
std::string legacy_checkpoint_path(const std::string& dir, int64_t step);
// The step's checkpoint that is there: the directory when there is one, else the single file.
std::string existing_checkpoint_path(const std::string& dir, int64_t step);

// The steps of the checkpoints in `dir`, newest first; empty when it holds none or does not exist.
std::vector<int64_t> checkpoint_steps(const std::string& dir);

// The newest checkpoint in `dir` that loads. Damaged ones (truncated, corrupt, a sharded one without
// its index or with a shard missing or cut short) are passed over, each with a warning that names
// the file and the reason. A sharded one is checked, not read (each rank reads its own part).
struct NewestCheckpoint {
  int64_t step = -1;  // -1: none loads
  bool sharded = false;       // existing_checkpoint_path(dir, step) is a directory
  nn::Checkpoint checkpoint;  // a single-file one's contents
  std::vector<std::string> warnings;
};
NewestCheckpoint load_newest_checkpoint(const std::string& dir);

// After the checkpoint of `step` is written: deletes all but the `keep` newest checkpoints at or
// before `step` (so never the one just written), directories whole; a directory without its index (a
// save killed half-way) counts for none of the `keep` and goes too. Later ones — a damaged file resume passed over —
// stay until this run overwrites them: a file that failed to read once may read fine later.
void prune_checkpoints(const std::string& dir, int64_t step, int64_t keep);

}  // namespace brigade::train
