// Text for the language-model tests: sentences from a small grammar, which a tiny GPT picks up in a
// few dozen steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"

namespace test {

// Text with structure a tiny model picks up in a few dozen steps: sentences drawn from a small
// grammar, as bytes (token = byte, vocabulary 256 — no tokenizer needed).
inline std::vector<uint32_t> grammar_text(size_t bytes, uint64_t seed) {
  const std::vector<std::string> subjects = {"the cat", "a dog", "my friend", "the old man", "every bird"};
  const std::vector<std::string> verbs = {" sees ", " likes ", " follows ", " finds "};
  const std::vector<std::string> objects = {"the ball.", "a red box.", "the garden.", "some bread."};
  std::vector<uint32_t> out;
  for (uint64_t i = 0; out.size() < bytes; ++i) {
    const auto r = brigade::philox4x32(i, seed);
    const std::string s = subjects[r[0] % subjects.size()] + verbs[r[1] % verbs.size()] +
                          objects[r[2] % objects.size()] + "\n";
    for (unsigned char c : s) out.push_back(c);
  }
  out.resize(bytes);
  return out;
}

}  // namespace test
