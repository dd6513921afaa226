#include "command.h"

#include <exception>
#include <ostream>

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
  } catch (const std::exception& e) {  // brigade::Error, and the odd std::bad_alloc or filesystem error
    err << "brigade train: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace brigade::train
