#include "command.h"

#include <ostream>

#include "core/error.h"
#include "options.h"
#include "trainer.h"

namespace brigade::train {

int train_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedTrainArgs parsed;
  try {
    parsed = parse_train_args(args);
  } catch (const UsageError& e) {
    err << "brigade train: " << e.what() << "\n\n" << train_usage();
    return 2;
  }
  if (parsed.help) {
    out << train_usage();
    return 0;
  }
  try {
    run_training(parsed.options, out);
  } catch (const Error& e) {
    err << "brigade train: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace brigade::train
