#include "generate/command.h"

#include <chrono>
#include <exception>
#include <ostream>

#include "core/error.h"
#include "core/factory.h"
#include "core/format.h"
#include "generate/options.h"
#include "generate/saved_model.h"
#include "tools/cli/command.h"

namespace brigade::generate_cli {

namespace {

void generate(const GenerateOptions& o, std::ostream& out) {
  const Device device = cli::usable_device(o.device);
  const SavedModel saved = load_saved_model(o.checkpoint, device, o.tokenizer);
  BRIGADE_CHECK(saved.tokenizer.has_value(), "'", o.checkpoint, "' carries no tokenizer: name one with --tokenizer DIR");
  const text::Tokenizer& tokenizer = *saved.tokenizer;

  // An empty prompt starts a new document, as every document in the training data starts.
  std::vector<text::TokenId> prompt = tokenizer.encode(o.prompt);
  if (prompt.empty()) {
    BRIGADE_CHECK(tokenizer.has_eot(), "the tokenizer has no <|endoftext|> to start a new document with: give a --prompt");
    prompt.push_back(tokenizer.eot_id());
  }
  std::vector<double> ids;
  for (int64_t s = 0; s < o.samples; ++s)
    for (text::TokenId id : prompt) ids.push_back(double(id));
  const Tensor idx = from_vector(ids, {o.samples, int64_t(prompt.size())}, DType::i64, device);

  nn::GenerateOptions g;
  g.temperature = o.temperature;
  g.top_k = o.top_k;
  g.seed = o.seed;
  g.vocab_limit = saved.vocab;
  g.kv_cache = !o.no_cache;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<double> result = saved.model->generate(idx, o.tokens, g).to_vector();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const int64_t length = int64_t(prompt.size()) + o.tokens;
  for (int64_t s = 0; s < o.samples; ++s) {
    if (o.samples > 1) out << "--- sample " << s + 1 << " ---\n";
    std::vector<text::TokenId> tokens;
    // A prompt of just <|endoftext|> is not shown: it is the start of a document, not text.
    for (int64_t t = o.prompt.empty() ? 1 : 0; t < length; ++t) tokens.push_back(text::TokenId(result[size_t(s * length + t)]));
    out << tokenizer.decode(tokens) << "\n";
  }
  out << "--- " << o.samples * o.tokens << " tokens in " << format_fixed(seconds, 2) << " s ("
      << format_fixed(double(o.samples * o.tokens) / seconds, 1) << " tok/s"
      << (o.no_cache ? ", no KV cache" : ", KV cache") << ", " << device.str() << ")\n";
}

}  // namespace

int generate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return cli::run_command(
      "brigade generate", out, err, [&] { return parse_generate_args(args); }, [] { return generate_usage(); },
      [&](const GenerateOptions& options) {
        generate(options, out);
        return 0;
      });
}

}  // namespace brigade::generate_cli
