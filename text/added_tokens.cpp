#include "text/added_tokens.h"

#include <algorithm>

namespace brigade::text {

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    has_special_ = has_special_ || tokens_[i].special;
    if (!tokens_[i].content.empty()) by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  }
  for (std::vector<uint32_t>& candidates : by_first_byte_)
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](uint32_t a, uint32_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
}

AddedTokenMatcher::Match AddedTokenMatcher::find(std::string_view text, size_t from, bool with_special) const {
  if (tokens_.empty()) return {};
  for (size_t at = from; at < text.size(); ++at) {
    for (const uint32_t i : by_first_byte_[static_cast<unsigned char>(text[at])]) {
      const AddedToken& t = tokens_[i];
      if ((with_special || !t.special) && text.substr(at, t.content.size()) == t.content)
        return {at, t.content.size(), t.id};
    }
  }
  return {};
}

}  // namespace brigade::text
