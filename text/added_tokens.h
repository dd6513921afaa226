// Added tokens: tokens that encode() finds in the text itself, before it is pre-tokenised.
//
// Hugging Face's tokenizer.json lists them under "added_tokens": the special tokens of a chat or
// document format ("<|begin_of_text|>", "<|im_start|>"), and sometimes ordinary ones. Wherever one's
// text occurs in the input it becomes that token's id, and the text on either side is encoded on its
// own. Where several start at the same place the longest wins, and the first place wins over later
// ones — Hugging Face's leftmost-longest match. GPT-2's "<|endoftext|>" is one, special.
//
// Special tokens are matched only when the caller asks (SpecialText::as_token, text/tokenizer.h):
// text from users should not be able to forge a document boundary or a chat turn.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::text {

struct AddedToken {
  int32_t id = 0;
  std::string content;   // the text it stands for, and is found as
  bool special = false;  // matched only when special tokens are asked for
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  struct Match {
    size_t at = std::string_view::npos;  // npos: none
    size_t length = 0;
    int32_t id = -1;
  };
  // The first added token in `text` at or after byte `from` (special ones too when `with_special`).
  Match find(std::string_view text, size_t from, bool with_special) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool has_special() const { return has_special_; }

 private:
  std::vector<AddedToken> tokens_;
  // The tokens starting with each byte, as indexes into tokens_, longest first: most positions of a
  // text start no added token, and are passed over after one look-up.
  std::array<std::vector<uint32_t>, 256> by_first_byte_;
  bool has_special_ = false;
};

}  // namespace brigade::text
