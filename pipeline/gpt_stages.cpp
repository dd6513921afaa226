#include "pipeline/gpt_stages.h"

#include "core/error.h"

namespace brigade::pipeline {

std::vector<Chunk> rank_chunks(const Layers& layers, const Partition& partition, const Layout& layout, int rank) {
  BRIGADE_CHECK(partition.layers() == int64_t(layers.size()) && partition.stages() == layout.stages(),
                "pipeline: the partition cuts ", partition.layers(), " layers into ", partition.stages(),
                " stages, but the model has ", layers.size(), " layers and the schedule ", layout.stages(),
                " stages (P=", layout.ranks, " x V=", layout.chunks, ")");
  BRIGADE_CHECK(rank >= 0 && rank < layout.ranks, "pipeline: rank ", rank, " is outside 0..", layout.ranks - 1);
  std::vector<Chunk> chunks(size_t(layout.chunks));
  for (int c = 0; c < layout.chunks; ++c) chunks[size_t(c)].layers = stage_layers(layers, partition, layout.stage(rank, c));
  return chunks;
}

GptStages gpt_stages(const nn::GPT& model, const Partition& partition, const Layout& layout, int rank,
                     nn::LayerGrain grain) {
  GptStages out;
  out.chunks = rank_chunks(model.layers(grain), partition, layout, rank);
  out.loss = nn::language_model_loss;
  const int embed_stage = int(partition.stage_of_layer(0));
  const int head_stage = int(partition.stage_of_layer(partition.layers() - 1));
  if (embed_stage != head_stage) {
    out.ties.push_back({"wte", {embed_stage, head_stage}});
    const Tensor& wte = model.embed->wte->weight;  // the head's `wte` is this same tensor
    for (int s : {embed_stage, head_stage})
      if (layout.rank_of(s) == rank) out.chunks[size_t(layout.chunk_of(s))].tied["wte"] = wte;
  }
  return out;
}

}  // namespace brigade::pipeline
