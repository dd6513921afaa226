#include "generate/command.h"

#include <chrono>
#include <exception>
#include <ostream>

#include "core/error.h"
#include "core/factory.h"
#include "core/format.h"
#include "generate/options.h"
#include "generate/saved_model.h"
#include "generate/stages.h"
#include "pipeline/gpt_decode.h"
#include "pipeline/gpt_stages.h"
#include "tools/cli/command.h"

namespace brigade::generate_cli {

namespace {

const text::Tokenizer& tokenizer_of(const std::optional<text::Tokenizer>& tokenizer, const GenerateOptions& o) {
  BRIGADE_CHECK(tokenizer.has_value(), "'", o.checkpoint, "' carries no tokenizer: name one with --tokenizer DIR",
                " (or give --prompt-ids and --ids)");
  return *tokenizer;
}

// The prompt as ids [samples, T] on `device`: --prompt-ids as given (each a token of the model's
// `vocab_size`), else --prompt's text encoded; an empty text starts a new document, as every
// document in the training data starts.
Tensor prompt_ids(const GenerateOptions& o, const std::optional<text::Tokenizer>& tokenizer, int64_t vocab_size,
                  Device device) {
  if (o.prompt_ids.empty() || !o.print_ids) tokenizer_of(tokenizer, o);  // before any work, not after
  std::vector<int64_t> prompt = o.prompt_ids;
  for (int64_t id : prompt)
    BRIGADE_CHECK(id < vocab_size, "--prompt-ids: token ", id, " is not in '", o.checkpoint, "''s vocabulary of ",
                  vocab_size);
  if (prompt.empty()) {
    const text::Tokenizer& t = tokenizer_of(tokenizer, o);
    for (text::TokenId id : t.encode(o.prompt)) prompt.push_back(int64_t(id));
    if (prompt.empty()) {
      BRIGADE_CHECK(t.has_eot(), "the tokenizer has no <|endoftext|> to start a new document with: give a --prompt");
      prompt.push_back(t.eot_id());
    }
  }
  std::vector<double> ids;
  for (int64_t s = 0; s < o.samples; ++s)
    for (int64_t id : prompt) ids.push_back(double(id));
  return from_vector(ids, {o.samples, int64_t(prompt.size())}, DType::i64, device);
}

nn::GenerateOptions sampling(const GenerateOptions& o, int64_t vocab) {
  nn::GenerateOptions g;
  g.temperature = o.temperature;
  g.top_k = o.top_k;
  g.seed = o.seed;
  g.vocab_limit = vocab;
  g.kv_cache = !o.no_cache;
  return g;
}

// Each sample of `result` [samples, prompt + tokens] (its text, or with --ids the new tokens' ids),
// then the speed.
void print(const GenerateOptions& o, const std::optional<text::Tokenizer>& tokenizer, const Tensor& result,
           int64_t prompt_length, double seconds, const std::string& where, std::ostream& out) {
  const std::vector<double> ids = result.to_vector();
  const int64_t length = result.size(1);
  for (int64_t s = 0; s < o.samples; ++s) {
    if (o.samples > 1 && !o.print_ids) out << "--- sample " << s + 1 << " ---\n";
    if (o.print_ids) {
      for (int64_t t = prompt_length; t < length; ++t)
        out << (t > prompt_length ? " " : "") << int64_t(ids[size_t(s * length + t)]);
      out << "\n";
      continue;
    }
    std::vector<text::TokenId> tokens;
    // A prompt of just <|endoftext|> is not shown: it is the start of a document, not text.
    const bool new_document = o.prompt.empty() && o.prompt_ids.empty();
    for (int64_t t = new_document ? 1 : 0; t < length; ++t) tokens.push_back(text::TokenId(ids[size_t(s * length + t)]));
    out << tokenizer_of(tokenizer, o).decode(tokens) << "\n";
  }
  out << "--- " << o.samples * o.tokens << " tokens in " << format_fixed(seconds, 2) << " s ("
      << format_fixed(double(o.samples * o.tokens) / seconds, 1) << " tok/s"
      << (o.no_cache ? ", no KV cache" : ", KV cache") << ", " << where << ")\n";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void generate(const GenerateOptions& o, std::ostream& out) {
  const Device device = cli::usable_device(o.device);
  if (o.stages > 0) {
    // Each rank reads the description, builds and loads its own stage; rank 0 prints.
    generate_on_stages(o, device, [&](comm::Communicator& comm) {
      SavedModelInfo info = read_saved_model_info(o.checkpoint, o.tokenizer);
      info.config.device = comm.device();
      const int64_t layers = nn::GPT::layer_count(info.config, nn::LayerGrain::block);
      BRIGADE_CHECK(o.stages <= layers, "--stages ", o.stages, ": '", o.checkpoint, "' holds a GPT of ", layers,
                    " layers (the embedding, ", info.config.n_layer, " blocks and the head), at most one stage each");
      const pipeline::Partition partition = pipeline::decode_partition(info.config, o.stages);
      const auto part = pipeline::gpt_rank_model(info.config, partition, pipeline::Layout{int(o.stages), 1},
                                                 comm.rank());
      load_saved_weights(info, *part);
      part->eval();
      const Tensor idx = prompt_ids(o, info.tokenizer, info.config.vocab_size, comm.device());
      const auto start = std::chrono::steady_clock::now();
      const Tensor result =
          pipeline::generate_through_stages(comm, *part, partition, idx, o.tokens, sampling(o, info.vocab));
      if (comm.rank() == 0)
        print(o, info.tokenizer, result, idx.size(1), seconds_since(start),
              comm.device().str() + ", " + std::to_string(o.stages) + " stages", out);
    });
    return;
  }
  const SavedModel saved = load_saved_model(o.checkpoint, device, o.tokenizer);
  const Tensor idx = prompt_ids(o, saved.tokenizer, saved.model->config().vocab_size, device);
  const auto start = std::chrono::steady_clock::now();
  const Tensor result = saved.model->generate(idx, o.tokens, sampling(o, saved.vocab));
  print(o, saved.tokenizer, result, idx.size(1), seconds_since(start), device.str(), out);
}

}  // namespace

int generate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return cli::run_command(
      "brigade generate", out, err, [&] { return parse_generate_args(args); }, [] { return generate_usage(); },
      [&](const GenerateOptions& options) { generate(options, out); });
}

}  // namespace brigade::generate_cli
