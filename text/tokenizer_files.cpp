#include "text/tokenizer_files.h"

#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json.h"
#include "core/read_file.h"
#include "text/tokenizer_json.h"

namespace brigade::text {

namespace {

constexpr const char* kWho = "load_tokenizer";
constexpr std::string_view kMergesHeader = "#version: 0.2";

std::string quoted_path(const std::string& path) { return "'" + path + "'"; }

// vocab.json: token text -> id, the ids 0 .. N-1 each once. Returns the texts in id order.
std::vector<std::string> parse_vocab(std::string_view text, const std::string& name) {
  JsonLimits limits;
  limits.context = std::string(kWho) + ": " + quoted_path(name);
  limits.document = "vocabulary";
  limits.max_depth = 2;  // the object and its values
  limits.object_root = true;
  limits.literals = false;
  limits.fractions = false;
  const Json root = parse_json(text, limits);

  const size_t n = root.members.size();
  std::vector<std::string> tokens(n);
  std::vector<bool> taken(n, false);
  for (const auto& [token, id] : root.members) {
    const std::string where = limits.context + ": the token " + json_string(token);
    BRIGADE_CHECK(id.kind == Json::Kind::number, where, " has an id that is not a number");
    BRIGADE_CHECK(!id.negative && id.magnitude < n, where, " has id ", id.negative ? "-" : "", id.magnitude, ", but ",
                  n, " tokens take the ids 0 to ", n - 1);
    BRIGADE_CHECK(!taken[id.magnitude], where, " and the token ", json_string(tokens[id.magnitude]),
                  " both have id ", id.magnitude);
    taken[id.magnitude] = true;
    tokens[id.magnitude] = token;
  }
  return tokens;  // n ids, each taken once: none is missing
}

// merges.txt: the header, then "left right" per line.
std::vector<std::pair<std::string, std::string>> parse_merges(std::string_view text, const std::string& name) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    // A line ending of "\r\n" (the file went through Windows): '\r' is never part of a token, whose
    // text spells that byte 'č'.
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  const std::string where = std::string(kWho) + ": " + quoted_path(name);
  BRIGADE_CHECK(!lines.empty() && lines[0].substr(0, 8) == "#version", where, " line 1: expected the header '",
                kMergesHeader, "', got '", lines.empty() ? std::string_view() : lines[0], "'");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(lines.size() - 1);
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const size_t space = line.find(' ');
    BRIGADE_CHECK(space != std::string_view::npos && space > 0 && space + 1 < line.size() &&
                      line.find(' ', space + 1) == std::string_view::npos,
                  where, " line ", i + 1, ": expected two tokens separated by one space, got ",
                  json_string(std::string(line)));
    merges.emplace_back(std::string(line.substr(0, space)), std::string(line.substr(space + 1)));
  }
  return merges;
}

}  // namespace

Tokenizer parse_tokenizer(std::string_view vocab, std::string_view merges, const std::string& vocab_name,
                          const std::string& merges_name) {
  TokenizerOrigin origin;
  origin.who = kWho;
  origin.vocab = quoted_path(vocab_name);
  origin.merges = quoted_path(merges_name);
  origin.first_merge_line = 2;
  return Tokenizer(parse_vocab(vocab, vocab_name), parse_merges(merges, merges_name), origin);
}

Tokenizer load_tokenizer(const std::string& vocab_path, const std::string& merges_path) {
  return parse_tokenizer(read_file(vocab_path, kWho), read_file(merges_path, kWho), vocab_path, merges_path);
}

bool has_tokenizer(const std::string& dir) {
  const std::filesystem::path d(dir);
  std::error_code error;
  return std::filesystem::exists(d / "tokenizer.json", error) || std::filesystem::exists(d / "vocab.json", error) ||
         std::filesystem::exists(d / "encoder.json", error);
}

Tokenizer load_tokenizer(const std::string& dir) {
  const std::filesystem::path d(dir);
  if (std::filesystem::exists(d / "tokenizer.json")) return load_tokenizer_json(d / "tokenizer.json");
  if (std::filesystem::exists(d / "vocab.json")) return load_tokenizer(d / "vocab.json", d / "merges.txt");
  if (std::filesystem::exists(d / "encoder.json")) return load_tokenizer(d / "encoder.json", d / "vocab.bpe");
  fail(kWho, ": ", quoted_path(dir),
       " holds no tokenizer.json, nor vocab.json and merges.txt, nor GPT-2's encoder.json and vocab.bpe");
}

std::string vocab_json(const Tokenizer& tokenizer) {
  std::string out = "{\n";
  for (size_t id = 0; id < tokenizer.vocab_size(); ++id) {
    out += "  " + json_string(tokenizer.token(TokenId(id))) + ": " + std::to_string(id);
    out += id + 1 < tokenizer.vocab_size() ? ",\n" : "\n";
  }
  return out + "}\n";
}

std::string merges_txt(const Tokenizer& tokenizer) {
  std::string out = std::string(kMergesHeader) + "\n";
  for (const Tokenizer::Merge& m : tokenizer.merges())
    out += tokenizer.token(m.left) + " " + tokenizer.token(m.right) + "\n";
  return out;
}

std::string save_tokenizer(const Tokenizer& tokenizer, const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  BRIGADE_CHECK(!error, "save_tokenizer: cannot create the directory '", dir, "': ", error.message());
  const std::filesystem::path d(dir);
  const bool gpt2_files = tokenizer.is_gpt2_style();
  if (gpt2_files) {
    write_file_atomically(d / "vocab.json", vocab_json(tokenizer), "save_tokenizer");
    write_file_atomically(d / "merges.txt", merges_txt(tokenizer), "save_tokenizer");
  } else {
    write_file_atomically(d / "tokenizer.json", tokenizer_json(tokenizer), "save_tokenizer");
  }
  // load_tokenizer reads tokenizer.json first: one left by an earlier save would win over these.
  for (const char* stale : gpt2_files ? std::vector<const char*>{"tokenizer.json"}
                                      : std::vector<const char*>{"vocab.json", "merges.txt"}) {
    std::filesystem::remove(d / stale, error);
    BRIGADE_CHECK(!error, "save_tokenizer: cannot remove the stale '", (d / stale).string(), "': ", error.message());
  }
  return gpt2_files ? "vocab.json, merges.txt" : "tokenizer.json";
}

void add_tokenizer_metadata(const Tokenizer& tokenizer, std::map<std::string, std::string>& metadata) {
  if (tokenizer.is_gpt2_style()) {
    metadata["tokenizer.vocab_json"] = vocab_json(tokenizer);
    metadata["tokenizer.merges_txt"] = merges_txt(tokenizer);
  } else {
    metadata["tokenizer.json"] = tokenizer_json(tokenizer);
  }
}

std::optional<Tokenizer> tokenizer_from_metadata(const std::map<std::string, std::string>& metadata,
                                                 const std::string& path) {
  if (const auto it = metadata.find("tokenizer.json"); it != metadata.end())
    return parse_tokenizer_json(it->second, path + " (tokenizer.json)");
  if (metadata.count("tokenizer.vocab_json") && metadata.count("tokenizer.merges_txt"))
    return parse_tokenizer(metadata.at("tokenizer.vocab_json"), metadata.at("tokenizer.merges_txt"),
                           path + " (tokenizer.vocab_json)", path + " (tokenizer.merges_txt)");
  return std::nullopt;
}

}  // namespace brigade::text
