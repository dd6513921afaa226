// The decoder families nn::GPT builds (nn/gpt.h), in a header of its own so that what only names the
// family (the planner's model shapes, the command line's --arch) need not include the model.
#pragma once

namespace brigade::nn {

// GPT-2 (learned positions, LayerNorm, GELU MLP, multi-head attention, a head tied to the token
// table) or LLaMA (rotary positions, RMSNorm, SwiGLU MLP, grouped-query attention, a head tied or
// untied). nn::GPTConfig::arch chooses it.
enum class Arch { gpt2, llama };

// "gpt2" or "llama".
inline const char* arch_name(Arch arch) { return arch == Arch::llama ? "llama" : "gpt2"; }

}  // namespace brigade::nn
