#include "pipeline/gpt_decode.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/factory.h"
#include "kernels/ops.h"

namespace brigade::pipeline {

namespace {

// Hidden states forward, tokens back to the first stage: two channels, so neither waits behind the other.
constexpr int kHiddenTag = 0;
constexpr int kTokenTag = 1;

// That `part` holds exactly stage `stage` of `partition`: its layers, and no other (a stage holding
// more would still be a whole model's memory on one rank).
void check_part(const nn::GPT& part, const Partition& partition, int stage) {
  const std::vector<std::shared_ptr<nn::Module>> layers = part.layers(nn::LayerGrain::block);
  BRIGADE_CHECK(int64_t(layers.size()) == partition.layers(), "generate_through_stages: the partition cuts ",
                partition.layers(), " layers, but the model has ", layers.size());
  for (int64_t i = 0; i < int64_t(layers.size()); ++i) {
    const bool mine = partition.stage_of_layer(i) == stage;
    BRIGADE_CHECK(mine == (layers[size_t(i)] != nullptr), "generate_through_stages: rank ", stage, " holds stage ",
                  stage, " (layers ", partition.begin(stage), "..", partition.end(stage) - 1, ") but its model ",
                  mine ? "lacks" : "also holds", " layer ", i, " (built for another rank?)");
  }
}

}  // namespace

Partition decode_partition(const nn::GPTConfig& config, int64_t stages) {
  const int64_t layers = nn::GPT::layer_count(config, nn::LayerGrain::block);
  BRIGADE_CHECK(stages >= 1 && stages <= layers, "decode_partition: ", stages, " stages for a GPT of ", layers,
                " layers (the embedding, ", config.n_layer, " blocks and the head): between 1 and ", layers,
                " stages, each at least one layer");
  return partition_uniform(layers, stages);
}

Tensor generate_through_stages(comm::Communicator& comm, nn::GPT& part, const Partition& partition,
                               const Tensor& prompt, int64_t new_tokens, const nn::GenerateOptions& options) {
  const int P = comm.size(), rank = comm.rank();
  const bool first = rank == 0, last = rank == P - 1;
  const nn::GPTConfig& config = part.config();
  try {
    BRIGADE_CHECK(partition.stages() == P, "generate_through_stages: ", partition.stages(), " stages on ", P,
                  " ranks; one stage per rank");
    check_part(part, partition, rank);
    BRIGADE_CHECK(new_tokens >= 0 && options.top_k >= 0 && std::isfinite(options.temperature) && options.temperature >= 0,
                  "generate_through_stages: new_tokens and top_k must be >= 0 and temperature finite and >= 0, got ", new_tokens,
                  ", ", options.top_k, " and ", options.temperature);
    if (first)
      BRIGADE_CHECK(prompt.defined() && prompt.dim() == 2 && prompt.size(1) >= 1,
                    "generate_through_stages: expected a prompt [B, T] with T >= 1 on rank 0, got ",
                    prompt.defined() ? shape_str(prompt.shape()) : std::string("none"));
    // Every stage takes the same path at every step (cached, or the whole window once past the
    // context), so each needs the prompt's length.
    Tensor prompt_length = first ? from_vector(std::vector<double>{double(prompt.size(1))}, {1}, DType::i64, comm.device())
                                 : zeros({1}, DType::i64, comm.device());
    comm.broadcast(prompt_length, 0);
    int64_t length = int64_t(prompt_length.to_vector()[0]);

    NoGradGuard no_grad;
    const Device device = config.device;
    Tensor out = first ? ops::to_dtype(prompt, DType::i64) : Tensor();
    std::vector<std::shared_ptr<nn::Module>> layers;  // this stage's, in order
    for (const auto& layer : part.layers(nn::LayerGrain::block))
      if (layer) layers.push_back(layer);
    int64_t blocks = 0;
    for (int64_t i = 0; i < config.n_layer; ++i) blocks += part.block(i) ? 1 : 0;
    nn::KVCache cache(blocks, config.block_size);
    const int64_t window = config.block_size;
    for (int64_t step = 0; step < new_tokens; ++step, ++length) {
      const bool cached = options.kv_cache && length <= window;
      Tensor x;
      if (first) x = cached ? out.slice(1, cache.length, length) : out.slice(1, std::max<int64_t>(0, length - window), length);
      else x = comm.recv(rank - 1, kHiddenTag, comm::Shapes::varying).to(device);
      Tensor y = x;
      if (cached) {
        y = part.forward_cached(x, cache);
      } else {
        for (const auto& layer : layers) y = (*layer)(y);
      }
      if (!last) {
        comm.send(y.to(comm.device()), rank + 1, kHiddenTag, comm::Shapes::varying);
      } else {
        const Tensor next = nn::choose_next_token(y.select(1, -1), options, step, comm.device());
        if (first) out = ops::concat({out, next.to(out.device())}, 1);
        else comm.send(next, 0, kTokenTag);
      }
      if (first && !last) out = ops::concat({out, comm.recv(P - 1, kTokenTag).to(out.device())}, 1);
    }
    return out;
  } catch (const std::exception& e) {
    comm.abort("generation: rank " + std::to_string(rank) + " failed: " + e.what());
    throw;
  }
}

}  // namespace brigade::pipeline
