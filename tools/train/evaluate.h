// Measuring a model: held-out accuracy on the sort task, and mean loss on validation windows.
//
// Accuracy is by greedy decoding.
//
// The model sees only the unsorted digits and the separator and must write the whole sorted
// sequence itself, one argmax token at a time, each conditioned on its own earlier outputs — the
// honest test (teacher forcing would hand it the correct prefix at every position).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "data/token_loader.h"
#include "nn/gpt.h"
#include "sort_task.h"

namespace brigade::train {

struct Accuracy {
  int64_t examples = 0;
  double sequences = 0;  // fraction of examples whose whole sorted output is right
  double tokens = 0;     // fraction of output digits that are right
};

// Greedy continuations: for each prompt [B, T] (i64, on the model's device), the prompt followed by
// `new_tokens` tokens, as GPT::generate writes them. One device calls generate on each prompt; a
// pipeline decodes all of them together through its stages (pipeline_eval.h).
using Decoder = std::function<std::vector<Tensor>(const std::vector<Tensor>& prompts, int64_t new_tokens)>;

// Decodes held-out examples [0, examples) of `seed`'s stream, in prompts of up to 256 examples
// (bounds the activations' memory), with `decode`.
Accuracy evaluate_sorting(const Decoder& decode, Device device, const SortTask& task, uint64_t seed,
                          int64_t examples);
// The same on one device. Puts the model in eval mode for the duration and restores its mode
// afterwards.
Accuracy evaluate_sorting(nn::GPT& model, const SortTask& task, uint64_t seed, int64_t examples);

// The model's mean next-token loss over windows [0, windows) of `data`, `batch` windows per forward
// pass (each window weighs the same). Eval mode for the duration, as above; nothing is recorded for
// backward.
double mean_loss(nn::GPT& model, const data::TokenLoader& data, int64_t windows, int64_t batch);
// The batches mean_loss runs: windows [0, windows) in consecutive batches of `batch` (the last may be
// shorter).
std::vector<data::TokenBatch> loss_batches(const data::TokenLoader& data, int64_t windows, int64_t batch);
// How mean_loss combines the batches' mean losses: sum over batches, in order, of loss * rows, over
// windows. A pipeline combining the same batches' losses gets the same bits.
double mean_over_windows(const std::vector<double>& batch_losses, const std::vector<data::TokenBatch>& batches);

}  // namespace brigade::train
