#include "export/command.h"

#include <ostream>

#include "core/device.h"
#include "generate/saved_model.h"
#include "nn/gpt2_hf.h"
#include "nn/llama_hf.h"
#include "text/tokenizer_files.h"
#include "tools/cli/command.h"

namespace brigade::export_cli {

namespace {

struct ExportOptions {
  std::string checkpoint;                // what to export (required)
  std::string out;                       // the directory to write (required)
  int64_t max_shard_bytes = 5000000000;  // 5GB, save_pretrained's default max_shard_size
  std::string tokenizer;                 // a tokenizer directory to include (wins over the checkpoint's)
};

using ParsedExportArgs = cli::Parsed<ExportOptions>;

using Flag = cli::Flag<ExportOptions>;

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      cli::text_flag("--checkpoint", "PATH",
                     "a `brigade train --data` checkpoint (file or sharded directory), or a Hugging Face model to reshard",
                     &ExportOptions::checkpoint, "required"),
      cli::text_flag("--out", "DIR", "the Hugging Face model directory to write (created if need be)",
                     &ExportOptions::out, "required"),
      {"--max-shard-size", "SIZE", "most tensor bytes per shard (5GB, 500MiB, bytes); all in one: model.safetensors",
       [](ExportOptions& o, const std::string& v) { o.max_shard_bytes = cli::parse_bytes("--max-shard-size", v); },
       [](const ExportOptions&) { return std::string("5GB"); }},
      cli::text_flag("--tokenizer", "DIR", "vocab.json + merges.txt to write beside the weights (else the checkpoint's, if any)",
                     &ExportOptions::tokenizer, "the checkpoint's"),
  };
  return table;
}

ParsedExportArgs parse_export_args(const std::vector<std::string>& args) {
  ParsedExportArgs out;
  cli::parse_flags(args, flags(), out.options, out.help);
  if (!out.help && out.options.checkpoint.empty()) throw cli::UsageError("--checkpoint: required");
  if (!out.help && out.options.out.empty()) throw cli::UsageError("--out: required");
  return out;
}

std::string export_usage() {
  return cli::usage_text(
      "usage: brigade export --checkpoint PATH --out DIR [flags]\n\n"
      "Writes a trained GPT as a Hugging Face model directory, GPT2LMHeadModel or (for a llama)\n"
      "LlamaForCausalLM: config.json, the weights (one model.safetensors, or\n"
      "model-0000i-of-0000n.safetensors shards and model.safetensors.index.json) and the tokenizer's\n"
      "files.\n\nflags:\n",
      flags());
}

void export_model(const ExportOptions& o, std::ostream& out) {
  const generate_cli::SavedModel saved = generate_cli::load_saved_model(o.checkpoint, Device::cpu(), o.tokenizer);
  // The real vocabulary: a padded one's extra rows are never a token, and Hugging Face's models have none.
  // The layout is the model's family: LlamaForCausalLM for a llama, GPT2LMHeadModel for a GPT-2.
  const nn::GPTConfig& c = saved.model->config();
  const bool llama = c.arch == nn::Arch::llama;
  const std::vector<std::string> files =
      llama ? nn::save_hf_llama_dir(*saved.model, o.out, o.max_shard_bytes, saved.vocab)
            : nn::save_hf_gpt2_dir(*saved.model, o.out, o.max_shard_bytes, saved.vocab);
  const std::string tokenizer_files = saved.tokenizer ? text::save_tokenizer(*saved.tokenizer, o.out) : "";
  out << "exported a " << (llama ? "LLaMA" : "GPT-2") << " of " << c.n_layer << " layers, " << c.n_head
      << " heads, width " << c.n_embd << ", context " << c.block_size << ", vocabulary " << saved.vocab << " to "
      << o.out << ":";
  for (const std::string& f : files) out << " " << f;
  if (saved.tokenizer) out << " " << tokenizer_files;
  out << "\n";
}

}  // namespace

int export_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return cli::run_command(
      "brigade export", out, err, [&] { return parse_export_args(args); }, [] { return export_usage(); },
      [&](const ExportOptions& options) { export_model(options, out); });
}

}  // namespace brigade::export_cli
