#include "evaluate.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/factory.h"

namespace brigade::train {

Accuracy evaluate_sorting(const Decoder& decode, Device device, const SortTask& task, uint64_t seed,
                          int64_t examples) {
  const int64_t D = task.digits();
  const int64_t prompt_length = D + 1;  // the digits and the separator
  const int64_t chunk = 256;            // examples decoded together (bounds the activations' memory)

  std::vector<Tensor> prompts;
  std::vector<std::vector<int64_t>> truth;
  for (int64_t first = 0; first < examples; first += chunk) {
    const int64_t count = std::min(chunk, examples - first);
    std::vector<double> ids;
    for (int64_t b = 0; b < count; ++b) {
      std::vector<int64_t> seq = task.example(seed, Split::held_out, uint64_t(first + b));
      ids.insert(ids.end(), seq.begin(), seq.begin() + prompt_length);
      truth.emplace_back(seq.begin() + prompt_length, seq.end());
    }
    // The prompts go where the model is (generate's embedding wants its ids on the weight's device).
    prompts.push_back(from_vector(ids, {count, prompt_length}, DType::i64, device));
  }
  const std::vector<Tensor> outputs = decode(prompts, D);
  BRIGADE_CHECK(outputs.size() == prompts.size(), "evaluate_sorting: ", prompts.size(), " prompts but ",
                outputs.size(), " continuations");
  int64_t right_sequences = 0, right_tokens = 0, example = 0;
  for (const Tensor& out : outputs) {
    const int64_t count = out.size(0);
    std::vector<double> decoded = out.slice(1, prompt_length, prompt_length + D).to_vector();
    for (int64_t b = 0; b < count; ++b, ++example) {
      int64_t right = 0;
      for (int64_t i = 0; i < D; ++i) right += int64_t(decoded[size_t(b * D + i)]) == truth[size_t(example)][size_t(i)];
      right_tokens += right;
      right_sequences += right == D;
    }
  }
  return {examples, double(right_sequences) / double(examples), double(right_tokens) / double(examples * D)};
}

Accuracy evaluate_sorting(nn::GPT& model, const SortTask& task, uint64_t seed, int64_t examples) {
  nn::EvalScope eval(model);
  auto one_device = [&](const std::vector<Tensor>& prompts, int64_t new_tokens) {
    std::vector<Tensor> out;
    for (const Tensor& p : prompts) out.push_back(model.generate(p, new_tokens));
    return out;
  };
  return evaluate_sorting(one_device, model.config().device, task, seed, examples);
}

std::vector<data::TokenBatch> loss_batches(const data::TokenLoader& data, int64_t windows, int64_t batch) {
  BRIGADE_CHECK(windows >= 1 && batch >= 1, "mean_loss: need at least one window and a batch of at least one, got ",
                windows, " and ", batch);
  std::vector<data::TokenBatch> out;
  for (int64_t first = 0; first < windows; first += batch) out.push_back(data.batch(first, std::min(batch, windows - first)));
  return out;
}

double mean_over_windows(const std::vector<double>& batch_losses, const std::vector<data::TokenBatch>& batches) {
  BRIGADE_CHECK(batch_losses.size() == batches.size() && !batches.empty(), "mean_loss: ", batch_losses.size(),
                " losses for ", batches.size(), " batches");
  double total = 0;
  int64_t windows = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    const int64_t rows = batches[i].inputs.size(0);
    total += batch_losses[i] * double(rows);
    windows += rows;
  }
  return total / double(windows);
}

double mean_loss(nn::GPT& model, const data::TokenLoader& data, int64_t windows, int64_t batch) {
  const std::vector<data::TokenBatch> batches = loss_batches(data, windows, batch);
  nn::EvalScope eval(model);
  const Device device = model.config().device;
  std::vector<double> losses;
  for (const data::TokenBatch& b : batches) losses.push_back(model.loss(b.inputs.to(device), b.targets.to(device)).item());
  return mean_over_windows(losses, batches);
}

}  // namespace brigade::train
