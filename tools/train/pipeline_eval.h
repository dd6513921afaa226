// Evaluation through a pipeline's stages, never assembling the model on one rank: the forward-only
// pass (Pipeline::forward_losses / forward_outputs, docs/pipeline.md) under the trainer's measures.
//
// Every rank of the pipeline calls these, with the same arguments (each rank builds the same
// prompts and batches from the seeded data; only stage 0's rank feeds them in), and every rank gets
// the same result: the last stage's outputs are broadcast to all of them, so every rank picks the
// same next token and no further message is needed.
#pragma once

#include <cstdint>
#include <vector>

#include "data/token_loader.h"
#include "nn/gpt.h"
#include "pipeline/runtime.h"

namespace brigade::train {

// GPT::generate through the stages: each prompt [B, T] (i64) followed by `new_tokens` tokens chosen
// as generate chooses them (nn::choose_next_token, from the last position's logits; `options`'
// kv_cache is ignored). Each new token is one forward-only pass with every prompt a micro-batch:
// the whole sequence so far, its last `block_size` tokens once longer — no KV cache, which the
// short sequences evaluated here do not miss. The tokens equal one device's generate on the same
// weights (tests/test_train_eval.cpp).
std::vector<Tensor> pipeline_generate(pipeline::Pipeline& pipe, const std::vector<Tensor>& prompts, int64_t new_tokens,
                                      int64_t block_size, const nn::GenerateOptions& options = {});

// mean_loss (evaluate.h) through the stages: mean_loss's batches, each a micro-batch of one
// forward-only pass, combined as mean_loss combines them — the same bits on the CPU.
double pipeline_mean_loss(pipeline::Pipeline& pipe, const data::TokenLoader& data, int64_t windows, int64_t batch,
                          Device device);

}  // namespace brigade::train
