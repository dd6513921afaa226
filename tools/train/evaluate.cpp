#include "evaluate.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/factory.h"

namespace brigade::train {

Accuracy evaluate_sorting(nn::GPT& model, const SortTask& task, uint64_t seed, int64_t examples) {
  const bool was_training = model.is_training();
  model.eval();
  const int64_t D = task.digits();
  const int64_t prompt_length = D + 1;  // the digits and the separator
  const int64_t chunk = 256;            // examples decoded together (bounds the activations' memory)

  int64_t right_sequences = 0, right_tokens = 0;
  for (int64_t first = 0; first < examples; first += chunk) {
    const int64_t count = std::min(chunk, examples - first);
    std::vector<double> prompts;
    std::vector<std::vector<int64_t>> truth;
    for (int64_t b = 0; b < count; ++b) {
      std::vector<int64_t> seq = task.example(seed, Split::held_out, uint64_t(first + b));
      prompts.insert(prompts.end(), seq.begin(), seq.begin() + prompt_length);
      truth.emplace_back(seq.begin() + prompt_length, seq.end());
    }
    // The prompts go where the model is (generate's embedding wants its ids on the weight's device).
    Tensor out = model.generate(from_vector(prompts, {count, prompt_length}, DType::i64, model.config().device), D);
    std::vector<double> decoded = out.slice(1, prompt_length, prompt_length + D).to_vector();
    for (int64_t b = 0; b < count; ++b) {
      int64_t right = 0;
      for (int64_t i = 0; i < D; ++i) right += int64_t(decoded[size_t(b * D + i)]) == truth[size_t(b)][size_t(i)];
      right_tokens += right;
      right_sequences += right == D;
    }
  }
  model.train(was_training);
  return {examples, double(right_sequences) / double(examples), double(right_tokens) / double(examples * D)};
}

double mean_loss(nn::GPT& model, const data::TokenLoader& data, int64_t windows, int64_t batch) {
  BRIGADE_CHECK(windows >= 1 && batch >= 1, "mean_loss: need at least one window and a batch of at least one, got ",
                windows, " and ", batch);
  const bool was_training = model.is_training();
  model.eval();
  const Device device = model.config().device;
  double total = 0;
  for (int64_t first = 0; first < windows; first += batch) {
    const int64_t rows = std::min(batch, windows - first);
    const data::TokenBatch b = data.batch(first, rows);
    total += model.loss(b.inputs.to(device), b.targets.to(device)).item() * double(rows);
  }
  model.train(was_training);
  return total / double(windows);
}

}  // namespace brigade::train
