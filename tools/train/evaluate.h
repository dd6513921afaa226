// Measuring a model: held-out accuracy on the sort task, and mean loss on validation windows.
//
// Accuracy is by greedy decoding.
//
// The model sees only the unsorted digits and the separator and must write the whole sorted
// sequence itself, one argmax token at a time, each conditioned on its own earlier outputs — the
// honest test (teacher forcing would hand it the correct prefix at every position).
#pragma once

#include <cstdint>

#include "data/token_loader.h"
#include "nn/gpt.h"
#include "sort_task.h"

namespace brigade::train {

struct Accuracy {
  int64_t examples = 0;
  double sequences = 0;  // fraction of examples whose whole sorted output is right
  double tokens = 0;     // fraction of output digits that are right
};

// Decodes held-out examples [0, examples) of `seed`'s stream. Puts the model in eval mode for the
// duration and restores its mode afterwards.
Accuracy evaluate_sorting(nn::GPT& model, const SortTask& task, uint64_t seed, int64_t examples);

// The model's mean next-token loss over windows [0, windows) of `data`, `batch` windows per forward
// pass (each window weighs the same). Eval mode for the duration, as above; nothing is recorded for
// backward.
double mean_loss(nn::GPT& model, const data::TokenLoader& data, int64_t windows, int64_t batch);

}  // namespace brigade::train
