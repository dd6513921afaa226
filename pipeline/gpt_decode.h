// Generation through a GPT's pipeline stages, one stage per rank, each with the KV cache of its own
// blocks only: what `brigade generate --stages P` runs, so a model larger than one device writes text
// without any rank holding the whole of it.
//
//   rank 0 (embedding, blocks 0..1) --hidden [B, T, C]--> rank 1 (blocks 2..3) --> ... --> rank P-1
//      ^                                                                                  (head: logits,
//      '------------------------------- the chosen token [B, 1] --------------------------- choice)
//
// Each step mirrors nn::GPT::generate exactly: the prompt first, then one token at a time through
// every stage's cache while the sequence fits the context; past it every stage runs the last
// block_size positions without its cache, as one device does. The last stage picks the token with
// nn::choose_next_token (the same logits, step and seed), so the tokens equal one device's token for
// token, greedy or sampled. Hidden states and tokens travel by the Communicator's point-to-point calls
// (their shapes with them); the only other message is the prompt's length, broadcast at the start.
#pragma once

#include <cstdint>

#include "comm/communicator.h"
#include "nn/gpt.h"
#include "pipeline/partition.h"

namespace brigade::pipeline {

// The cut `brigade generate --stages P` uses: layers(LayerGrain::block) of `config` (the embedding,
// each block, the head) into P stages of consecutive layers, stage s on rank s. Throws naming the
// sizes when P is below 1 or above the number of layers.
Partition decode_partition(const nn::GPTConfig& config, int64_t stages);

// Every rank of `comm` calls it at once, with `part` holding exactly its stage of `partition` (rank
// r: stage r; pipeline::gpt_rank_model with one chunk per rank builds it). `prompt` [B, T] (integer
// ids) matters on rank 0 only. Returns, on rank 0, the prompt followed by `new_tokens` tokens [B, T +
// new_tokens] (i64, on `prompt`'s device); an undefined tensor on the other ranks. A rank that fails
// aborts `comm`, so the others fail promptly too (every wait is bounded by comm's timeout).
Tensor generate_through_stages(comm::Communicator& comm, nn::GPT& part, const Partition& partition,
                               const Tensor& prompt, int64_t new_tokens, const nn::GenerateOptions& options = {});

}  // namespace brigade::pipeline
