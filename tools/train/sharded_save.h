// Saving a training checkpoint as a sharded directory (nn/sharded_checkpoint.h): every pipeline rank
// writes the parameters it holds in parallel, and nothing is gathered anywhere.
//
// The protocol, every rank of every replica taking part (only replica 0 writes; replicas hold the
// same values):
//   1. the pipeline's rank 0 prepares the directory, then learns every rank's parameter names (names
//      only, a few KB) and tells each rank which of its names a lower rank writes: a tied weight
//      (the embedding, on the first and the last stage) is stored once;
//   2. each rank writes its shard through core/atomic_file.h (a temporary name, then a rename);
//   3. an all-reduce of every rank's outcome (a bounded wait, as every comm call is): when a rank
//      failed, the save fails on every rank, naming that rank, and no index is written;
//   4. world rank 0 writes index.json (atomically), the commit of the whole checkpoint, and tells
//      every rank whether that worked; then it removes shards of older saves to the same path.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "pipeline/runtime.h"

namespace brigade::train {

struct ShardContents {
  std::map<std::string, Tensor> parameters;  // this rank's, by full name
  std::map<std::string, Tensor> optimizer;   // their optimizer state ("<kind>.<name>", "step", "lr")
  std::map<std::string, std::string> metadata;  // the index's (world rank 0's is the one written)
};

// Writes the checkpoint of `step` as the directory `dir` (its parent must exist). `groups` is null
// for a one-device run. Throws Error on every rank when any rank's part failed.
void save_sharded(const std::string& dir, int64_t step, const pipeline::PipelineGroups* groups,
                  const ShardContents& mine);

// A list of names as an i32 tensor of characters, '\n'-separated (the transports move tensors only).
Tensor encode_names(const std::vector<std::string>& names);
std::vector<std::string> decode_names(const Tensor& t);

}  // namespace brigade::train
