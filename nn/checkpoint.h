// Training checkpoints: a model's state_dict, an optimizer's state_dict and string metadata (the
// step, the data position, the config...) in one safetensors file, written atomically.
//
// Keys in the file are "model.<name>" and "optim.<name>", so the file stays readable by any
// safetensors tool; the metadata gets one reserved entry, "brigade.checkpoint" (the layout version).
//
//   save_checkpoint("run/ckpt.safetensors", model.state_dict(), opt.state_dict(), {{"step", "1200"}});
//   Checkpoint c = load_checkpoint("run/ckpt.safetensors");
//   model.load_state_dict(c.model); opt.load_state_dict(c.optimizer);
//   int64_t step = std::stoll(c.metadata.at("step"));
//
// Plain maps in, plain maps out: this file knows nothing about Module or Optimizer.
#pragma once

#include <map>
#include <string>

#include "core/safetensors.h"
#include "core/tensor.h"

namespace brigade::nn {

struct Checkpoint {
  std::map<std::string, Tensor> model;
  std::map<std::string, Tensor> optimizer;
  std::map<std::string, std::string> metadata;  // without the reserved "brigade.checkpoint" entry
};

// Writes the checkpoint atomically (see save_safetensors): an existing file at `path` is replaced
// only once the new one is completely on disk. Metadata keys starting with "brigade." are reserved.
void save_checkpoint(const std::string& path, const std::map<std::string, Tensor>& model_state,
                     const std::map<std::string, Tensor>& optimizer_state,
                     const std::map<std::string, std::string>& metadata = {});

// Reads a checkpoint written by save_checkpoint, or a sharded one (a directory: nn/sharded_checkpoint.h)
// whole; throws Error for anything else or anything damaged.
Checkpoint load_checkpoint(const std::string& path);
// The same for a file already read (`path` for the messages): for callers that first look at a file
// to tell a checkpoint from another kind of safetensors file (Hugging Face weights, nn/gpt2_hf.h).
Checkpoint checkpoint_from(Safetensors file, const std::string& path);

}  // namespace brigade::nn
