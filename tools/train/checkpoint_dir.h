// A checkpoint directory (`brigade train --save DIR/`): one file per saved step, the newest few kept.
//
//   runs/sort/step-00000250.safetensors
//   runs/sort/step-00000500.safetensors
//
// Only names of exactly this form are checkpoints. The temporary file of a save that was killed
// half-way (save_safetensors writes through core/atomic_file.h: "<name>.tmp.<pid>.<n>", renamed
// when complete) never matches, so it is neither resumed from nor deleted. This file knows names and
// files; whether a checkpoint fits the run is the trainer's business.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/checkpoint.h"

namespace brigade::train {

// Whether --save names a directory: an existing one, or any path that ends with '/'.
bool is_checkpoint_dir(const std::string& save);

// Creates `dir` when it is missing (only its last component: the parent must exist). Throws Error
// naming the path when the parent is missing or `dir` exists but is not a directory.
void make_checkpoint_dir(const std::string& dir);

// "DIR/step-00000250.safetensors": the step zero-padded to 8 digits, so names sort like steps.
std::string checkpoint_path(const std::string& dir, int64_t step);

// The steps of the checkpoints in `dir`, newest first; empty when it holds none or does not exist.
std::vector<int64_t> checkpoint_steps(const std::string& dir);

// The newest checkpoint in `dir` that loads. Damaged ones (truncated, corrupt) are passed over, each
// with a warning that names the file and the reason.
struct NewestCheckpoint {
  int64_t step = -1;  // -1: none loads
  nn::Checkpoint checkpoint;
  std::vector<std::string> warnings;
};
NewestCheckpoint load_newest_checkpoint(const std::string& dir);

// After the checkpoint of `step` is written: deletes all but the `keep` newest checkpoints at or
// before `step` (so never the one just written). Later ones — a damaged file resume passed over —
// stay until this run overwrites them: a file that failed to read once may read fine later.
void prune_checkpoints(const std::string& dir, int64_t step, int64_t keep);

}  // namespace brigade::train
