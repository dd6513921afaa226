// `brigade train --init-from` a Hugging Face model: the model is the one the files describe. Its
// architecture (family, sizes, epsilon, rotary settings, tie, biases, vocabulary, positions) comes
// from config.json and the weights' shapes (nn::hf_model_config), so that a user names the model
// once; a model flag given as well must agree with the file.
#pragma once

#include <string>
#include <vector>

#include "options.h"

namespace brigade::train {

// When o.init_from names a Hugging Face model (nn::find_hf_model), sets o's model settings from it:
// layers, heads, embd, the decoder flags (epsilon, rope scaling and biases too) and model_vocab;
// context when neither --context nor --model is in `args`; and vocab, for a --data directory without
// a tokenizer, when --vocab is not. Refuses, as a UsageError naming the flag, its value, the file and
// the file's value: a model flag in `args` (or a --model preset's value) that disagrees with the
// file, a --vocab larger than the file's, a --context longer than a GPT-2's learned positions. A
// brigade checkpoint leaves o as it is (its weights must fit the flags, as before).
void take_init_from_model(const std::vector<std::string>& args, TrainOptions& o);

}  // namespace brigade::train
