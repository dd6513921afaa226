// Cutting a model into this rank's chunks — in general, and for a GPT with its tied embedding.
//
//   nn::GPT model(config);                        // every rank builds the whole model from one seed
//   Partition part = partition_uniform(model.layers().size(), layout.stages());
//   GptStages mine = gpt_stages(model, part, layout, comm.rank());
//   Pipeline pipe(groups, schedule, mine.chunks, mine.loss, {.ties = mine.ties});
//
// The layers a rank does not hold are simply never used (for a large model you would build only
// your own; for the models here building all is cheap and keeps the initial weights trivially equal).
#pragma once

#include <vector>

#include "nn/gpt.h"
#include "pipeline/action.h"
#include "pipeline/partition.h"
#include "pipeline/stage.h"

namespace brigade::pipeline {

// Rank `rank`'s V chunks: chunk c holds the layers of global stage layout.stage(rank, c).
std::vector<Chunk> rank_chunks(const Layers& layers, const Partition& partition, const Layout& layout, int rank);

struct GptStages {
  std::vector<Chunk> chunks;
  std::vector<Tie> ties;  // "wte" between the embedding's stage and the head's, when they differ
  LossFn loss;            // nn::language_model_loss
};

// `partition` must cut model.layers(grain); Throws naming the sizes otherwise.
GptStages gpt_stages(const nn::GPT& model, const Partition& partition, const Layout& layout, int rank,
                     nn::LayerGrain grain = nn::LayerGrain::block);

}  // namespace brigade::pipeline
