#include "text/tokenizer.h"

#include <limits>
#include <mutex>

#include "core/error.h"
#include "core/json.h"
#include "core/utf8.h"
#include "text/byte_alphabet.h"
#include "text/nfc.h"
#include "text/pretokenize.h"

namespace brigade::text {

namespace {

// A token's text quoted for an error message, escapes and all.
std::string quoted(const std::string& token) { return json_string(token); }

}  // namespace

struct Tokenizer::PieceCache {
  // Bounded, so that encoding an endless stream of distinct pieces cannot take all memory: when full
  // it starts again, and the frequent pieces come back at once. Long pieces are rare repeats and are
  // not kept at all.
  static constexpr size_t kMaxEntries = 1 << 18;
  static constexpr size_t kMaxPieceBytes = 64;

  std::mutex mutex;
  std::unordered_map<std::string, std::vector<TokenId>> ids;
};

Tokenizer::Tokenizer(std::vector<std::string> tokens, const std::vector<std::pair<std::string, std::string>>& merges,
                     const TokenizerOrigin& origin, TokenizerRules rules)
    : tokens_(std::move(tokens)),
      split_(rules.split),
      ignore_merges_(rules.ignore_merges),
      nfc_(rules.nfc),
      cache_(std::make_shared<PieceCache>()) {
  BRIGADE_CHECK(tokens_.size() <= size_t(std::numeric_limits<TokenId>::max()), origin.who, ": ", origin.vocab,
                " has ", tokens_.size(), " tokens, more than token ids can number");
  bytes_.reserve(tokens_.size());
  for (size_t id = 0; id < tokens_.size(); ++id) {
    const std::string& text = tokens_[id];
    BRIGADE_CHECK(!text.empty(), origin.who, ": ", origin.vocab, ": token ", id, " is the empty string");
    BRIGADE_CHECK(is_utf8(text), origin.who, ": ", origin.vocab, ": token ", id, " is not valid UTF-8");
    const auto [it, inserted] = ids_.emplace(text, TokenId(id));
    BRIGADE_CHECK(inserted, origin.who, ": ", origin.vocab, ": tokens ", it->second, " and ", id, " are both ",
                  quoted(text));
    std::optional<std::string> bytes = symbols_to_bytes(text);
    bytes_.push_back(bytes ? std::move(*bytes) : text);
  }
  // Every byte needs its token, or some input could not be encoded at all.
  for (int b = 0; b < 256; ++b) {
    const std::string symbol = bytes_to_symbols(std::string(1, char(b)));
    const auto it = ids_.find(symbol);
    BRIGADE_CHECK(it != ids_.end(), origin.who, ": ", origin.vocab, " has no token for the byte ", b, " (", quoted(symbol),
                  "): a byte-level vocabulary needs all 256");
    byte_ids_[size_t(b)] = it->second;
  }
  if (const auto it = ids_.find(std::string(kEndOfText)); it != ids_.end()) eot_ = it->second;

  bool eot_listed = false;
  for (const AddedToken& t : rules.added) {
    BRIGADE_CHECK(t.id >= 0 && size_t(t.id) < tokens_.size(), origin.who, ": ", origin.vocab, ": the added token ",
                  quoted(t.content), " has id ", t.id, ", outside the vocabulary's ", tokens_.size(), " tokens");
    BRIGADE_CHECK(tokens_[size_t(t.id)] == t.content, origin.who, ": ", origin.vocab, ": the added token ",
                  quoted(t.content), " has id ", t.id, ", which is the token ", quoted(tokens_[size_t(t.id)]));
    eot_listed = eot_listed || t.content == kEndOfText;
    // An added token's content is text as written, not in the byte alphabet: "é" stands for its two
    // UTF-8 bytes, not for the byte 0xE9 its symbol would spell.
    bytes_[size_t(t.id)] = t.content;
    if (added_id_.empty()) added_id_.assign(tokens_.size(), 0);
    added_id_[size_t(t.id)] = 1;
  }
  if (eot_ && !eot_listed) rules.added.push_back({*eot_, std::string(kEndOfText), /*special=*/true});
  added_ = AddedTokenMatcher(std::move(rules.added));

  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    auto where = [&] {
      return origin.first_merge_line > 0 ? origin.merges + " line " + std::to_string(origin.first_merge_line + rank)
                                         : origin.merges + ", merge " + std::to_string(rank);
    };
    auto id_of = [&](const std::string& text, const char* what) {
      const auto it = ids_.find(text);
      BRIGADE_CHECK(it != ids_.end(), origin.who, ": ", where(), ": the merge ", quoted(left), " ", quoted(right), " ",
                    what, " ", quoted(text), ", which is not in ", origin.vocab);
      return it->second;
    };
    const Merge m{id_of(left, "joins"), id_of(right, "joins"), id_of(left + right, "makes")};
    const int32_t earlier = table_.rank_of(m.left, m.right);
    BRIGADE_CHECK(table_.add(m.left, m.right, m.merged), origin.who, ": ", where(), ": the merge ", quoted(left), " ",
                  quoted(right), " repeats merge ", earlier, " (each pair of tokens merges at one rank)");
    merges_.push_back(m);
  }
}

void Tokenizer::encode_piece(std::string_view piece, std::vector<TokenId>& out) const {
  if (ignore_merges_) {
    // Hugging Face looks the piece up in the BPE vocabulary only: an added token is matched before
    // pre-tokenisation or not at all.
    const auto it = ids_.find(bytes_to_symbols(piece));
    if (it != ids_.end() && (added_id_.empty() || !added_id_[size_t(it->second)])) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<TokenId> ids(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) ids[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
  table_.apply(ids);
  out.insert(out.end(), ids.begin(), ids.end());
}

void Tokenizer::encode_ordinary(std::string_view text, std::vector<TokenId>& out) const {
  PieceCache& cache = *cache_;
  for (size_t start = 0; start < text.size();) {
    const size_t end = next_piece_end(text, start, split_);
    const std::string_view piece = text.substr(start, end - start);
    start = end;
    if (piece.size() == 1) {  // a single byte needs no merging, nor the cache
      out.push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
      continue;
    }
    const bool cacheable = piece.size() <= PieceCache::kMaxPieceBytes;
    std::string key;
    if (cacheable) {
      key.assign(piece);
      std::lock_guard<std::mutex> lock(cache.mutex);
      if (const auto it = cache.ids.find(key); it != cache.ids.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    const size_t first = out.size();
    encode_piece(piece, out);
    if (cacheable) {
      std::lock_guard<std::mutex> lock(cache.mutex);
      if (cache.ids.size() >= PieceCache::kMaxEntries) cache.ids.clear();
      cache.ids.emplace(std::move(key), std::vector<TokenId>(out.begin() + long(first), out.end()));
    }
  }
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, SpecialText special) const {
  const bool with_special = special == SpecialText::as_token;
  BRIGADE_CHECK(!with_special || added_.has_special(), "Tokenizer: the vocabulary has no ", kEndOfText,
                " token (nor any other special token)");
  std::vector<TokenId> out;
  out.reserve(text.size() / 3);
  // The text between added tokens is encoded on its own: an added token also ends a piece.
  for (size_t start = 0;;) {
    const AddedTokenMatcher::Match m = added_.find(text, start, with_special);
    const std::string_view between =
        text.substr(start, m.at == std::string_view::npos ? std::string_view::npos : m.at - start);
    if (nfc_) encode_ordinary(text::nfc(between), out);
    else encode_ordinary(between, out);
    if (m.at == std::string_view::npos) break;
    out.push_back(m.id);
    start = m.at + m.length;
  }
  return out;
}

bool Tokenizer::is_gpt2_style() const {
  if (split_ != SplitPattern::gpt2 || ignore_merges_ || nfc_) return false;
  for (const AddedToken& t : added_.tokens())
    if (t.content != kEndOfText || !t.special) return false;
  return true;
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += token_bytes(ids[i]);
  return out;
}

const std::string& Tokenizer::token(TokenId id) const {
  BRIGADE_CHECK(id >= 0 && size_t(id) < tokens_.size(), "Tokenizer: no token has id ", id, " (the vocabulary has ",
                tokens_.size(), " tokens, ids 0 to ", tokens_.size() - 1, ")");
  return tokens_[size_t(id)];
}

const std::string& Tokenizer::token_bytes(TokenId id) const {
  token(id);  // the range check
  return bytes_[size_t(id)];
}

std::optional<TokenId> Tokenizer::find(std::string_view token_text) const {
  const auto it = ids_.find(std::string(token_text));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

TokenId Tokenizer::eot_id() const {
  BRIGADE_CHECK(eot_.has_value(), "Tokenizer: the vocabulary has no ", kEndOfText, " token");
  return *eot_;
}

}  // namespace brigade::text
