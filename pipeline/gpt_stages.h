// Cutting a model into this rank's chunks — in general, and for a GPT with its tied embedding. Each
// rank builds only the layers its stages hold:
//
//   // A GPT: this rank's part of it (nn::GPT built with only the layers of its stages).
//   Partition part = partition_uniform(nn::GPT::layer_count(config, grain), layout.stages());
//   std::shared_ptr<nn::GPT> model = gpt_rank_model(config, part, layout, comm.rank(), grain);
//   GptStages mine = gpt_stages(*model, part, layout, comm.rank(), grain);
//   Pipeline pipe(groups, schedule, mine.chunks, mine.loss, {.ties = mine.ties});
//
//   // A model of your own: one factory per layer; a rank calls only those of its own layers.
//   const nn::Init init = nn::Init::keyed(seed);  // each parameter drawn by its name: "0.weight", ...
//   std::vector<LayerFactory> factories = {[=] { return std::make_shared<nn::Linear>(4, 16, nn::LinearOptions{.init = init.at("0")}); }};
//   Pipeline pipe(groups, schedule, build_rank_chunks(factories, part, layout, comm.rank()), loss);
//
// The layers a rank does not hold are never built. That the ranks' layers together start as one
// model would is up to how the layers draw their weights: nn::GPT draws each parameter by name
// (nn/init.h's Init::keyed), so every layout starts from the whole model's bits; a factory should do
// the same (build its layer with a by-name Init whose path is the layer's name), or at least not
// depend on what other factories drew (a Generator of its own per factory).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "nn/gpt.h"
#include "pipeline/action.h"
#include "pipeline/partition.h"
#include "pipeline/stage.h"

namespace brigade::pipeline {

// Rank `rank`'s V chunks: chunk c holds the layers of global stage layout.stage(rank, c). `layers` may
// have nullptr where another rank's layers are (a model holding only its own: nn::GPT::layers of a
// partial GPT); a null layer in one of this rank's stages is an error naming it.
std::vector<Chunk> rank_chunks(const Layers& layers, const Partition& partition, const Layout& layout, int rank);

// The indices of the layers rank `rank` holds (its chunks' stages'), ascending.
std::vector<int64_t> rank_layers(const Partition& partition, const Layout& layout, int rank);

// Makes one layer. Called only on the rank that holds it, once.
using LayerFactory = std::function<std::shared_ptr<nn::Module>()>;

// rank_chunks for layers not built yet: `factories[i]` makes layer i, and only this rank's layers
// are made (the others' factories are never called). `partition` cuts factories.size() layers.
std::vector<Chunk> build_rank_chunks(const std::vector<LayerFactory>& factories, const Partition& partition,
                                     const Layout& layout, int rank);

struct GptStages {
  std::vector<Chunk> chunks;
  // "wte" between the embedding's stage and the head's, when they differ and the head is tied
  // (config.tie_embeddings); none for an untied head.
  std::vector<Tie> ties;
  LossFn loss;            // nn::language_model_loss
};

// A GPT holding only rank `rank`'s layers of model.layers(grain) as `partition` cuts them (its
// parameters keep the whole model's names and values: nn/gpt.h). Throws naming the sizes when the
// partition does not cut layer_count(config, grain) layers.
std::shared_ptr<nn::GPT> gpt_rank_model(const nn::GPTConfig& config, const Partition& partition, const Layout& layout,
                                        int rank, nn::LayerGrain grain = nn::LayerGrain::block);

// `partition` must cut model.layers(grain); throws naming the sizes otherwise. `model` is the whole
// GPT or one holding at least this rank's layers (gpt_rank_model).
GptStages gpt_stages(const nn::GPT& model, const Partition& partition, const Layout& layout, int rank,
                     nn::LayerGrain grain = nn::LayerGrain::block);

}  // namespace brigade::pipeline
