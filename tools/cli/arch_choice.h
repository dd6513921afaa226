// --arch, read once at the command line into an nn::Arch, and the checks of the decoder flags that go
// with it (--kv-heads, --mlp-hidden, --rope-theta, --untied), for every command that builds a GPT.
#pragma once

#include <string>

#include "core/error.h"
#include "nn/arch.h"
#include "tools/cli/flags.h"

namespace brigade::cli {

// The family `text` names; a UsageError naming `flag` and the families otherwise.
inline nn::Arch parse_arch(const std::string& flag, const std::string& text) {
  for (nn::Arch arch : {nn::Arch::gpt2, nn::Arch::llama})
    if (text == nn::arch_name(arch)) return arch;
  throw UsageError(flag + ": expected gpt2 or llama, got '" + text + "'");
}

}  // namespace brigade::cli
