// Tokenizer: byte-level BPE as GPT-2 made it (and LLaMA 3 and Qwen2 use it) — text to token ids and back.
//
// Byte-pair encoding starts from the 256 byte values and a ranked list of merges, each joining two
// tokens into a longer one. encode() cuts the text into pieces (text/pretokenize.h), then within each
// piece starts from its bytes and repeatedly applies the merge of lowest rank among the adjacent
// pairs, at every place it occurs, left to right, until no adjacent pair has a merge
// (text/merge_table.h); the tokens left are its ids. Because the alphabet is the bytes, any input encodes —
// invalid UTF-8 included — and decode() gives back exactly the bytes that were encoded (the text as
// normalised, for a tokenizer that normalises: TokenizerRules::nfc).
//
// Tokens are named by their text in GPT-2's byte alphabet (text/byte_alphabet.h): the token " the"
// is "Ġthe". That is how vocab.json and merges.txt spell them (text/tokenizer_files.h), and what
// this class is built from. Given GPT-2's own files it reproduces GPT-2's encoder exactly.
//
// TokenizerRules carry what Hugging Face's tokenizer.json adds to a vocabulary and merges
// (text/tokenizer_json.h): which pre-tokeniser cuts the text (GPT-2's, LLaMA 3's or Qwen2's,
// text/pretokenize.h), the added tokens found in the text before it is cut (text/added_tokens.h),
// LLaMA 3's ignore_merges and Qwen2's NFC normalisation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "text/added_tokens.h"
#include "text/merge_table.h"
#include "text/pretokenize.h"

namespace brigade::text {

using TokenId = int32_t;

// GPT-2's end-of-text token: separates documents; id 50256 in GPT-2's vocabulary, the last id of
// a vocabulary train_bpe makes.
inline constexpr std::string_view kEndOfText = "<|endoftext|>";

// What encode() does with the text of a special token ("<|endoftext|>") in its input. GPT-2's
// encoder treats it as ordinary text (a few tokens: "<", "|", "end", ...), and so does encode()
// unless told otherwise: text from users should not be able to forge a document boundary.
enum class SpecialText {
  as_text,   // encode it like any other text (the default)
  as_token,  // each occurrence becomes its token (eot_id() for "<|endoftext|>")
};

// How text becomes pieces before BPE, beyond the vocabulary and merges. The defaults are GPT-2's.
struct TokenizerRules {
  SplitPattern split = SplitPattern::gpt2;
  // Tokens found in the text before it is cut (text/added_tokens.h); each one's content is its text
  // in the vocabulary. "<|endoftext|>", when the vocabulary has it, is one (special) whether listed
  // or not.
  std::vector<AddedToken> added;
  // A piece that is itself a token of the vocabulary becomes that token, merges or not (LLaMA 3's
  // tokenizer.json sets this; it can differ from what the merges would make).
  bool ignore_merges = false;
  // The text between added tokens is put in Unicode NFC before it is cut (text/nfc.h; Qwen2's
  // tokenizer.json asks for it). decode() then gives back the normalised text.
  bool nfc = false;
};

// Where a vocabulary and merges came from, so that errors can name the file and line.
struct TokenizerOrigin {
  std::string who = "Tokenizer";         // starts every message, e.g. "load_tokenizer"
  std::string vocab = "the vocabulary";  // e.g. "'gpt2/vocab.json'"
  std::string merges = "the merges";     // e.g. "'gpt2/merges.txt'"
  size_t first_merge_line = 0;           // the line of merge 0 in `merges`; 0: name merges by rank
};

class Tokenizer {
 public:
  // tokens[id] is token id's text in the byte alphabet; merges are in rank order (the first applies
  // first), each two tokens' texts. Throws brigade::Error, naming `origin`'s file and line, when a
  // token is empty or repeated, one of the 256 single-byte tokens is missing, a merge names a token
  // the vocabulary lacks or makes one it lacks, or a merge is repeated.
  // Also when an added token (`rules`) has an id outside the vocabulary or names a token of another text.
  Tokenizer(std::vector<std::string> tokens, const std::vector<std::pair<std::string, std::string>>& merges,
            const TokenizerOrigin& origin = {}, TokenizerRules rules = {});

  // The token ids of `text` (any bytes). SpecialText::as_token throws Error when the tokenizer has
  // no special token at all.
  std::vector<TokenId> encode(std::string_view text, SpecialText special = SpecialText::as_text) const;
  // The bytes the tokens stand for, concatenated. Throws Error naming an id outside the vocabulary.
  std::string decode(const std::vector<TokenId>& ids) const;

  size_t vocab_size() const { return tokens_.size(); }
  // The text of token `id` in the byte alphabet ("Ġthe"); throws Error for an id outside the vocabulary.
  const std::string& token(TokenId id) const;
  // The bytes token `id` stands for (" the"). A token whose text is not spelled in the byte alphabet
  // (an added special token such as "<|im_start|>" would be, but one with other characters is not)
  // stands for its text's own UTF-8 bytes.
  const std::string& token_bytes(TokenId id) const;
  // The id of the token with this text, if there is one.
  std::optional<TokenId> find(std::string_view token_text) const;
  // The id of "<|endoftext|>". Throws Error when the vocabulary has none.
  TokenId eot_id() const;
  bool has_eot() const { return eot_.has_value(); }

  // The merges in rank order, as token ids: the token `left` followed by `right` becomes `merged`.
  struct Merge {
    TokenId left, right, merged;
  };
  const std::vector<Merge>& merges() const { return merges_; }

  SplitPattern split_pattern() const { return split_; }
  // The added tokens, "<|endoftext|>" included when the vocabulary has it.
  const std::vector<AddedToken>& added_tokens() const { return added_.tokens(); }
  bool ignore_merges() const { return ignore_merges_; }
  bool nfc() const { return nfc_; }
  // True when vocab.json and merges.txt say all there is to say about this tokenizer: GPT-2's
  // pre-tokeniser, no added token but "<|endoftext|>", no ignore_merges, no NFC.
  bool is_gpt2_style() const;

 private:
  // BPE within one piece: appends its token ids to `out`.
  void encode_piece(std::string_view piece, std::vector<TokenId>& out) const;
  void encode_ordinary(std::string_view text, std::vector<TokenId>& out) const;

  std::vector<std::string> tokens_;  // id -> text in the byte alphabet
  std::vector<std::string> bytes_;   // id -> the bytes it stands for (an added token's: its content as written)
  std::vector<char> added_id_;       // id -> 1 for an added token (not a BPE vocabulary entry)
  std::unordered_map<std::string, TokenId> ids_;
  std::vector<Merge> merges_;
  MergeTable table_;  // the merges as applied (text/merge_table.h)
  std::array<TokenId, 256> byte_ids_{};
  std::optional<TokenId> eot_;
  SplitPattern split_ = SplitPattern::gpt2;
  AddedTokenMatcher added_;
  bool ignore_merges_ = false;
  bool nfc_ = false;
  // Pieces repeat (" the", " of", ...): their ids are kept, so each is merged once. Shared by copies
  // of this Tokenizer, which have the same merges; guarded by a mutex, so encode() stays const and
  // thread-safe.
  struct PieceCache;
  std::shared_ptr<PieceCache> cache_;
};

}  // namespace brigade::text
