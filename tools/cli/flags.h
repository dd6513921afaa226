// The flag table and the command-line loop shared by every `brigade` command.
//
// Each command describes its flags as one table (name, placeholder, help, how to set, how to show
// the default) that both parses and prints --help. This header holds the table row and the loop
// that walks the arguments, so the commands can't drift apart in how they read `--flag value`,
// `--flag=value`, switches and -h/--help, or in the messages they give.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <sstream>
#include <functional>
#include <stdexcept>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/memory_limit.h"

namespace brigade::cli {

// A bad command line: the command prints the message and the usage, and exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws the UsageError "<flag>: <why>", the form every complaint about a flag takes.
[[noreturn]] inline void bad_flag(const std::string& flag, const std::string& why) {
  throw UsageError(flag + ": " + why);
}

// One row of a command's flag table: how to read the value into Options and how to show the default.
template <class Options>
struct Flag {
  std::string name;   // "--steps"
  std::string value;  // placeholder in the usage text, e.g. "N"; empty for a switch that takes no value
  std::string help;
  std::function<void(Options&, const std::string&)> set;
  std::function<std::string(const Options&)> get;  // the default, for --help
};

// What a command's parser returns (cli::run_command takes it): the options, and whether -h/--help was
// given (print the usage and do nothing else). One template, so every command reads it the same way.
template <class Options>
struct Parsed {
  Options options;
  bool help = false;
};

// A row that stores its value as given in a string field of Options. Its --help default is `shown`
// when given ("required", "the checkpoint's"), else the field's own default, "none" when empty.
template <class Options>
Flag<Options> text_flag(std::string name, std::string value, std::string help, std::string Options::*field,
                        std::optional<std::string> shown = std::nullopt) {
  std::function<std::string(const Options&)> get;
  if (shown) get = [text = *shown](const Options&) { return text; };
  else get = [field](const Options& o) { return (o.*field).empty() ? std::string("none") : o.*field; };
  return {std::move(name), std::move(value), std::move(help),
          [field](Options& o, const std::string& v) { o.*field = v; }, std::move(get)};
}

// What a command does with operands (arguments that are not flags).
enum class Operands {
  anywhere,     // among the flags (`brigade tokenizer train --vocab 500 a.txt b.txt`)
  end_of_flags  // the first one ends the flags: it and everything after are passed on as they are
                // (`brigade launch -n 2 prog --steps 3`: --steps is the program's)
};

// Whether `arg` asks for the usage: -h or --help.
inline bool is_help(const std::string& arg) { return arg == "--help" || arg == "-h"; }

// Applies `args` to `options` through `flags`. Accepts `--flag value` and `--flag=value`; a flag
// whose placeholder is empty is a switch and takes no value. Sets `help` for -h/--help (and keeps
// going, so a bad flag is still reported). Throws UsageError naming the flag.
//
// A command that takes operands besides flags (`brigade tokenizer train ... FILES`) passes
// `positional`: every argument that is not a flag (does not start with "--", and is no row's name:
// a row may be named "-n") is appended to it, as `operands` says, and so is everything after a lone "--" (for an
// operand that does start with "--"). Without it, such an argument is an error.
template <class Options>
void parse_flags(const std::vector<std::string>& args, const std::vector<Flag<Options>>& flags, Options& options,
                 bool& help, std::vector<std::string>* positional = nullptr, Operands operands = Operands::anywhere) {
  auto is_row = [&](const std::string& arg) {
    return std::any_of(flags.begin(), flags.end(), [&](const Flag<Options>& f) { return f.name == arg; });
  };
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (is_help(arg)) {
      help = true;
      continue;
    }
    if (positional && arg == "--") {
      positional->insert(positional->end(), args.begin() + long(i) + 1, args.end());
      return;
    }
    if (arg.rfind("--", 0) != 0 && !is_row(arg)) {
      if (!positional) throw UsageError("unexpected argument '" + arg + "'");
      if (operands == Operands::end_of_flags) {
        positional->insert(positional->end(), args.begin() + long(i), args.end());
        return;
      }
      positional->push_back(arg);
      continue;
    }
    std::string value;
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    const Flag<Options>* flag = nullptr;
    for (const Flag<Options>& f : flags) {
      if (f.name == arg) flag = &f;
    }
    if (!flag) throw UsageError("unknown flag '" + arg + "'");
    if (flag->value.empty()) {
      if (has_value) throw UsageError(arg + ": takes no value");
    } else if (!has_value) {
      if (i + 1 >= args.size()) throw UsageError(arg + ": missing value (" + flag->value + ")");
      value = args[++i];
    }
    flag->set(options, value);
  }
}

// Whether `args` set flag `name` ("--stages 4" or "--stages=4"), for flags that conflict with each
// other whatever their values (a default and a value given explicitly look the same once parsed).
inline bool flag_given(const std::vector<std::string>& args, const std::string& name) {
  return std::any_of(args.begin(), args.end(),
                     [&](const std::string& a) { return a == name || a.rfind(name + "=", 0) == 0; });
}

// The "flags:" part of a usage text: one line per flag — its name and placeholder, its help, its
// default in brackets — then -h/--help, the help texts lined up in one column.
template <class Options>
std::string flag_lines(const std::vector<Flag<Options>>& flags) {
  auto spelling = [](const Flag<Options>& f) { return f.name + (f.value.empty() ? "" : " " + f.value); };
  size_t width = 18;
  for (const Flag<Options>& f : flags) width = std::max(width, spelling(f).size());
  const Options defaults{};
  std::string text;
  auto line = [&](const std::string& left, const std::string& right) {
    text += "  " + left + std::string(width + 2 - left.size(), ' ') + right + "\n";
  };
  for (const Flag<Options>& f : flags) line(spelling(f), f.help + " [" + f.get(defaults) + "]");
  line("-h, --help", "show this help");
  return text;
}

// A number as --help shows it in a flag's default (how a stream prints it: "0.001", "1e-05").
inline std::string show_number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// A command's usage text: `intro` (the usage line, what the command does, examples, ending in
// "flags:\n"), then the flag lines.
template <class Options>
std::string usage_text(const std::string& intro, const std::vector<Flag<Options>>& flags) {
  return intro + flag_lines(flags);
}

// The number `text` for `flag`, checked against [min, max]; throws UsageError naming the flag
// ("--temperature: expected a number >= 0, got 'x'", "--val-fraction: expected a number in [0, 0.5], ...").
inline double parse_number(const std::string& flag, const std::string& text, double min,
                           double max = std::numeric_limits<double>::infinity()) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < min || v > max) {
    std::ostringstream range;
    if (std::isinf(max)) range << ">= " << min;
    else range << "in [" << min << ", " << max << "]";
    throw UsageError(flag + ": expected a number " + range.str() + ", got '" + text + "'");
  }
  return v;
}

// The whole number `text` for `flag`, checked against [min, max]; throws UsageError naming the flag
// ("--steps: must be at least 1, got 0").
inline int64_t parse_int(const std::string& flag, const std::string& text, int64_t min,
                         int64_t max = std::numeric_limits<int64_t>::max()) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    throw UsageError(flag + ": expected a whole number, got '" + text + "'");
  if (max == std::numeric_limits<int64_t>::max() && v < min)
    throw UsageError(flag + ": must be at least " + std::to_string(min) + ", got " + text);
  if (v < min || v > max)
    throw UsageError(flag + ": must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + text);
  return v;
}

// A size in bytes for `flag`: a number with an optional unit, B, KiB, MiB, GiB, TiB (powers of 1024)
// or KB, MB, GB, TB (powers of 1000), e.g. "80GiB", "1.5GB", "4096". At least one byte; throws
// UsageError naming the flag otherwise.
inline int64_t parse_bytes(const std::string& flag, const std::string& text) {
  const std::optional<double> bytes = parse_byte_size(text);
  if (!bytes || *bytes < 1 || *bytes > 9e18)
    throw UsageError(flag + ": expected a size such as 512MiB, 80GiB, 1.5GB or a number of bytes, got '" + text + "'");
  return int64_t(*bytes);
}

}  // namespace brigade::cli
