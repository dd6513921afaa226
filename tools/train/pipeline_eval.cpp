#include "pipeline_eval.h"

#include "core/error.h"
#include "evaluate.h"
#include "kernels/ops.h"

namespace brigade::train {

std::vector<Tensor> pipeline_generate(pipeline::Pipeline& pipe, const std::vector<Tensor>& prompts, int64_t new_tokens,
                                      int64_t block_size, const nn::GenerateOptions& options) {
  BRIGADE_CHECK(!prompts.empty() && new_tokens >= 0 && block_size >= 1, "pipeline_generate: ", prompts.size(),
                " prompts, ", new_tokens, " new tokens, block size ", block_size,
                "; needs a prompt, new_tokens >= 0 and block_size >= 1");
  std::vector<Tensor> out;
  for (const Tensor& p : prompts) {
    BRIGADE_CHECK(p.dim() == 2 && p.size(1) >= 1, "pipeline_generate: expected prompts [B, T] with T >= 1, got ",
                  shape_str(p.shape()));
    out.push_back(ops::to_dtype(p, DType::i64));
  }
  const int M = int(out.size());
  for (int64_t step = 0; step < new_tokens; ++step) {
    std::vector<Tensor> contexts;
    for (const Tensor& seq : out) {
      const int64_t T = seq.size(1);
      contexts.push_back(T > block_size ? seq.slice(1, T - block_size, T) : seq);
    }
    // Only the last position's logits leave the last stage.
    const std::vector<Tensor> last =
        pipe.forward_outputs(M, contexts, [](const Tensor& logits) { return logits.select(1, -1); });
    for (int m = 0; m < M; ++m) {
      Tensor& seq = out[size_t(m)];
      seq = ops::concat({seq, nn::choose_next_token(last[size_t(m)], options, step, seq.device())}, 1);
    }
  }
  return out;
}

double pipeline_mean_loss(pipeline::Pipeline& pipe, const data::TokenLoader& data, int64_t windows, int64_t batch,
                          Device device) {
  const std::vector<data::TokenBatch> batches = loss_batches(data, windows, batch);
  std::vector<Tensor> inputs, targets;
  for (const data::TokenBatch& b : batches) {
    inputs.push_back(b.inputs.to(device));
    targets.push_back(b.targets.to(device));
  }
  return mean_over_windows(pipe.forward_losses(int(batches.size()), inputs, targets), batches);
}

}  // namespace brigade::train
