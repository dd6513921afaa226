#include "text/tokenizer_json.h"

#include <map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "core/read_file.h"

namespace brigade::text {

namespace {

constexpr const char* kWho = "load_tokenizer";

// The file's name, the part being read, and the checks on it.
struct Reader {
  std::string file;  // "load_tokenizer: 'dir/tokenizer.json'"

  template <class... Args>
  [[noreturn]] void refuse(const std::string& part, const Args&... args) const {
    fail(file, ": ", part, " ", args...);
  }
  // The member `key` of `object`, or nullptr when it is missing.
  static const Json* member(const Json& object, const std::string& key) {
    for (const auto& [k, v] : object.members)
      if (k == key) return &v;
    return nullptr;
  }
  static bool is_null(const Json* v) { return v == nullptr || v->kind == Json::Kind::null; }
  const Json& object(const Json* v, const std::string& part) const {
    if (v == nullptr || v->kind != Json::Kind::object) refuse(part, "must be an object");
    return *v;
  }
  const std::string& string(const Json* v, const std::string& part) const {
    if (v == nullptr || v->kind != Json::Kind::string) refuse(part, "must be a string");
    return v->string;
  }
  // A boolean member, `otherwise` when missing.
  bool flag(const Json& object, const std::string& key, const std::string& part, bool otherwise) const {
    const Json* v = member(object, key);
    if (v == nullptr) return otherwise;
    if (v->kind != Json::Kind::boolean) refuse(part + "." + key, "must be true or false");
    return v->boolean;
  }
  int64_t id(const Json* v, const std::string& part) const {
    if (v == nullptr || v->kind != Json::Kind::number || !v->integer || v->negative || v->magnitude > (1u << 30))
      refuse(part, "must be a token id (a whole number from 0)");
    return int64_t(v->magnitude);
  }
  std::string type(const Json& v, const std::string& part) const {
    return string(member(object(&v, part), "type"), part + ".type");
  }
};

void read_model(const Reader& r, const Json& root, std::map<int64_t, std::string>& tokens,
                std::vector<std::pair<std::string, std::string>>& merges, TokenizerRules& rules) {
  const Json& model = r.object(Reader::member(root, "model"), "model");
  const std::string type = r.string(Reader::member(model, "type"), "model.type");
  if (type != "BPE")
    r.refuse("model.type", "is \"", type,
             "\": only byte-level BPE models (\"BPE\") are read, not Unigram, WordPiece or WordLevel");
  if (!Reader::is_null(Reader::member(model, "dropout")))
    r.refuse("model.dropout", "is set: BPE with dropout encodes at random; brigade reads it only without");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const Json* v = Reader::member(model, key);
    if (!Reader::is_null(v) && !(v->kind == Json::Kind::string && v->string.empty()))
      r.refuse(std::string("model.") + key, "is set: that is not byte-level BPE");
  }
  if (r.flag(model, "byte_fallback", "model", false))
    r.refuse("model.byte_fallback", "is true: a SentencePiece-style BPE (LLaMA 2's), not byte-level BPE");
  rules.ignore_merges = r.flag(model, "ignore_merges", "model", false);

  for (const auto& [text, id] : r.object(Reader::member(model, "vocab"), "model.vocab").members) {
    const int64_t i = r.id(&id, "model.vocab: the token " + json_string(text) + "'s id");
    const auto [it, inserted] = tokens.emplace(i, text);
    if (!inserted)
      r.refuse("model.vocab:", "the tokens ", json_string(it->second), " and ", json_string(text), " both have id ", i);
  }

  const Json* list = Reader::member(model, "merges");
  if (list == nullptr || list->kind != Json::Kind::array) r.refuse("model.merges", "must be an array");
  merges.reserve(list->items.size());
  for (size_t rank = 0; rank < list->items.size(); ++rank) {
    const Json& m = list->items[rank];
    const std::string part = "model.merges[" + std::to_string(rank) + "]";
    if (m.kind == Json::Kind::string) {  // "left right": a byte-level token never holds a space
      const size_t space = m.string.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == m.string.size() ||
          m.string.find(' ', space + 1) != std::string::npos)
        r.refuse(part, "must be two tokens separated by one space, got ", json_string(m.string));
      merges.emplace_back(m.string.substr(0, space), m.string.substr(space + 1));
    } else if (m.kind == Json::Kind::array && m.items.size() == 2) {
      merges.emplace_back(r.string(&m.items[0], part + "[0]"), r.string(&m.items[1], part + "[1]"));
    } else {
      r.refuse(part, "must be \"left right\" or [\"left\", \"right\"]");
    }
  }
}

void read_added_tokens(const Reader& r, const Json& root, std::map<int64_t, std::string>& tokens, TokenizerRules& rules) {
  const Json* list = Reader::member(root, "added_tokens");
  if (Reader::is_null(list)) return;
  if (list->kind != Json::Kind::array) r.refuse("added_tokens", "must be an array");
  for (size_t i = 0; i < list->items.size(); ++i) {
    const std::string part = "added_tokens[" + std::to_string(i) + "]";
    const Json& t = r.object(&list->items[i], part);
    AddedToken added;
    added.id = int32_t(r.id(Reader::member(t, "id"), part + ".id"));
    added.content = r.string(Reader::member(t, "content"), part + ".content");
    if (added.content.empty()) r.refuse(part + ".content", "is empty");
    added.special = r.flag(t, "special", part, false);
    for (const char* key : {"lstrip", "rstrip", "single_word"})
      if (r.flag(t, key, part, false))
        r.refuse(part, "(", json_string(added.content), ") sets ", key, ", which brigade does not implement");
    const auto [it, inserted] = tokens.emplace(added.id, added.content);
    if (!inserted && it->second != added.content)
      r.refuse(part, "gives id ", added.id, " to ", json_string(added.content), ", but model.vocab gives it to ",
               json_string(it->second));
    rules.added.push_back(std::move(added));
  }
}

// ByteLevel's settings: add_prefix_space would put a space before every text, which brigade does not.
bool byte_level_uses_regex(const Reader& r, const Json& b, const std::string& part) {
  if (r.flag(b, "add_prefix_space", part, true))
    r.refuse(part + ".add_prefix_space", "is true: brigade encodes text as given, without a space put before it");
  return r.flag(b, "use_regex", part, true);
}

SplitPattern read_pre_tokenizer(const Reader& r, const Json& root) {
  const Json* pre = Reader::member(root, "pre_tokenizer");
  if (Reader::is_null(pre)) r.refuse("pre_tokenizer", "is missing: a byte-level BPE needs ByteLevel");
  const std::string type = r.type(*pre, "pre_tokenizer");
  if (type == "ByteLevel") {
    if (!byte_level_uses_regex(r, *pre, "pre_tokenizer"))
      r.refuse("pre_tokenizer", "is ByteLevel with use_regex false alone: the text would not be split at all");
    return SplitPattern::gpt2;
  }
  if (type != "Sequence")
    r.refuse("pre_tokenizer", "is ", type, ": brigade reads ByteLevel, or a Sequence of Split and ByteLevel");
  const Json* list = Reader::member(*pre, "pretokenizers");
  if (list == nullptr || list->kind != Json::Kind::array || list->items.size() != 2)
    r.refuse("pre_tokenizer.pretokenizers", "must be two: a Split, then a ByteLevel with use_regex false");
  const Json& split = list->items[0];
  const std::string part = "pre_tokenizer.pretokenizers[0]";
  if (r.type(split, part) != "Split") r.refuse(part, "is ", r.type(split, part), ", not a Split");
  const Json& pattern = r.object(Reader::member(split, "pattern"), part + ".pattern");
  const std::string& regex = r.string(Reader::member(pattern, "Regex"), part + ".pattern.Regex");
  const std::optional<SplitPattern> known = split_pattern_named(regex);
  if (!known)
    r.refuse(part + ".pattern", "is the regex ", json_string(regex), ", which brigade does not implement (it knows ",
             "GPT-2's, LLaMA 3's and Qwen2's, see text/pretokenize.h)");
  const std::string behavior = r.string(Reader::member(split, "behavior"), part + ".behavior");
  if (behavior != "Isolated") r.refuse(part + ".behavior", "is ", behavior, ": brigade implements \"Isolated\"");
  if (r.flag(split, "invert", part, false)) r.refuse(part + ".invert", "is true");
  const std::string byte_part = "pre_tokenizer.pretokenizers[1]";
  if (r.type(list->items[1], byte_part) != "ByteLevel" || byte_level_uses_regex(r, list->items[1], byte_part))
    r.refuse(byte_part, "must be a ByteLevel with use_regex false");
  return *known;
}

}  // namespace

Tokenizer parse_tokenizer_json(std::string_view text, const std::string& name) {
  const Reader r{std::string(kWho) + ": '" + name + "'"};
  JsonLimits limits;
  limits.context = r.file;
  limits.document = "tokenizer.json";
  limits.object_root = true;
  const Json root = parse_json(text, limits);

  TokenizerRules rules;
  if (const Json* normalizer = Reader::member(root, "normalizer"); !Reader::is_null(normalizer)) {
    const std::string type = r.type(*normalizer, "normalizer");
    if (type != "NFC")
      r.refuse("normalizer", "is ", type, ": brigade implements only NFC, and encoding without the normalizer would ",
               "give other ids");
    rules.nfc = true;
  }
  const Json* decoder = Reader::member(root, "decoder");
  if (Reader::is_null(decoder) || r.type(*decoder, "decoder") != "ByteLevel")
    r.refuse("decoder", "must be ByteLevel (a byte-level BPE's)");

  std::map<int64_t, std::string> by_id;
  std::vector<std::pair<std::string, std::string>> merges;
  read_model(r, root, by_id, merges, rules);
  read_added_tokens(r, root, by_id, rules);
  rules.split = read_pre_tokenizer(r, root);

  std::vector<std::string> tokens;
  tokens.reserve(by_id.size());
  for (const auto& [id, text] : by_id) {
    if (id != int64_t(tokens.size()))
      r.refuse("model.vocab", "and added_tokens have no token with id ", tokens.size(), " (the ids must be 0 to ",
               by_id.size() - 1, ", each once)");
    tokens.push_back(text);
  }
  TokenizerOrigin origin;
  origin.who = kWho;
  origin.vocab = "'" + name + "'";
  origin.merges = "'" + name + "' (model.merges)";
  return Tokenizer(std::move(tokens), merges, origin, std::move(rules));
}

Tokenizer load_tokenizer_json(const std::string& path) { return parse_tokenizer_json(read_file(path, kWho), path); }

std::string tokenizer_json(const Tokenizer& t) {
  const auto byte_level = [](bool use_regex) {
    return std::string(R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": )") +
           (use_regex ? "true}" : "false}");
  };
  std::string out = "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [";
  for (size_t i = 0; i < t.added_tokens().size(); ++i) {
    const AddedToken& a = t.added_tokens()[i];
    out += std::string(i ? ",\n" : "\n") + "    {\"id\": " + std::to_string(a.id) + ", \"content\": " +
           json_string(a.content) + R"(, "single_word": false, "lstrip": false, "rstrip": false, "normalized": )" +
           (a.special ? "false" : "true") + ", \"special\": " + (a.special ? "true}" : "false}");
  }
  out += std::string("\n  ],\n  \"normalizer\": ") + (t.nfc() ? R"({"type": "NFC"})" : "null") + ",\n  \"pre_tokenizer\": ";
  if (t.split_pattern() == SplitPattern::gpt2) {
    out += byte_level(true);
  } else {
    out += R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": )" +
           json_string(split_pattern_regex(t.split_pattern())) + R"(}, "behavior": "Isolated", "invert": false}, )" +
           byte_level(false) + "]}";
  }
  out += ",\n  \"post_processor\": null,\n  \"decoder\": " + byte_level(true) + ",\n";
  out += R"(  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, )"
         R"("end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": )";
  out += std::string(t.ignore_merges() ? "true" : "false") + ",\n    \"vocab\": {";
  for (size_t id = 0; id < t.vocab_size(); ++id)
    out += std::string(id ? ",\n" : "\n") + "      " + json_string(t.token(TokenId(id))) + ": " + std::to_string(id);
  out += "\n    },\n    \"merges\": [";
  for (size_t i = 0; i < t.merges().size(); ++i) {
    const Tokenizer::Merge& m = t.merges()[i];
    out += std::string(i ? ",\n" : "\n") + "      [" + json_string(t.token(m.left)) + ", " +
           json_string(t.token(m.right)) + "]";
  }
  return out + "\n    ]\n  }\n}\n";
}

}  // namespace brigade::text
