#include "pipeline/gpt_stages.h"

#include "core/error.h"

namespace brigade::pipeline {

namespace {

void check_cut(int64_t layers, const Partition& partition, const Layout& layout, int rank) {
  BRIGADE_CHECK(partition.layers() == layers && partition.stages() == layout.stages(), "pipeline: the partition cuts ",
                partition.layers(), " layers into ", partition.stages(), " stages, but the model has ", layers,
                " layers and the schedule ", layout.stages(), " stages (P=", layout.ranks, " x V=", layout.chunks, ")");
  BRIGADE_CHECK(rank >= 0 && rank < layout.ranks, "pipeline: rank ", rank, " is outside 0..", layout.ranks - 1);
}

}  // namespace

std::vector<Chunk> rank_chunks(const Layers& layers, const Partition& partition, const Layout& layout, int rank) {
  check_cut(int64_t(layers.size()), partition, layout, rank);
  std::vector<Chunk> chunks(size_t(layout.chunks));
  for (int c = 0; c < layout.chunks; ++c) {
    const int stage = layout.stage(rank, c);
    for (int64_t i = partition.begin(stage); i < partition.end(stage); ++i)
      BRIGADE_CHECK(layers[size_t(i)] != nullptr, "pipeline: rank ", rank, " holds stage ", stage, ", which has layer ",
                    i, ", but the model it was given does not hold that layer (built for another rank or layout?)");
    chunks[size_t(c)].layers = stage_layers(layers, partition, stage);
  }
  return chunks;
}

std::vector<int64_t> rank_layers(const Partition& partition, const Layout& layout, int rank) {
  check_cut(partition.layers(), partition, layout, rank);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < partition.layers(); ++i)
    if (layout.rank_of(int(partition.stage_of_layer(i))) == rank) out.push_back(i);
  return out;
}

std::vector<Chunk> build_rank_chunks(const std::vector<LayerFactory>& factories, const Partition& partition,
                                     const Layout& layout, int rank) {
  Layers layers(factories.size());
  check_cut(int64_t(factories.size()), partition, layout, rank);
  for (int64_t i : rank_layers(partition, layout, rank)) {
    BRIGADE_CHECK(factories[size_t(i)] != nullptr, "build_rank_chunks: the factory of layer ", i, " is empty");
    layers[size_t(i)] = factories[size_t(i)]();
    BRIGADE_CHECK(layers[size_t(i)] != nullptr, "build_rank_chunks: the factory of layer ", i, " made no module");
  }
  return rank_chunks(layers, partition, layout, rank);
}

std::shared_ptr<nn::GPT> gpt_rank_model(const nn::GPTConfig& config, const Partition& partition, const Layout& layout,
                                        int rank, nn::LayerGrain grain) {
  check_cut(nn::GPT::layer_count(config, grain), partition, layout, rank);
  return std::make_shared<nn::GPT>(config, grain, rank_layers(partition, layout, rank));
}

GptStages gpt_stages(const nn::GPT& model, const Partition& partition, const Layout& layout, int rank,
                     nn::LayerGrain grain) {
  GptStages out;
  out.chunks = rank_chunks(model.layers(grain), partition, layout, rank);
  out.loss = nn::language_model_loss;
  const int embed_stage = int(partition.stage_of_layer(0));
  const int head_stage = int(partition.stage_of_layer(partition.layers() - 1));
  // An untied head (a llama's lm_head) shares nothing with the embedding: no tie to keep.
  if (model.config().tie_embeddings && embed_stage != head_stage) {
    out.ties.push_back({"wte", {embed_stage, head_stage}});
    for (int s : {embed_stage, head_stage}) {
      if (layout.rank_of(s) != rank) continue;
      // The head's `wte` is this same tensor; a rank holding the head without the embedding holds
      // the token table alone for it (nn::GPT), drawn as the embedding's stage draws it.
      out.chunks[size_t(layout.chunk_of(s))].tied["wte"] = model.embed->wte->weight;
    }
  }
  return out;
}

}  // namespace brigade::pipeline
