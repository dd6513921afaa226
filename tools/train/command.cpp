#include "command.h"

#include <exception>
#include <ostream>

#include "options.h"
#include "tools/cli/command.h"
#include "trainer.h"

namespace brigade::train {

int train_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return cli::run_command(
      "brigade train", out, err, [&] { return parse_train_args(args); }, [] { return train_usage(); },
      [&](const TrainOptions& options) { run_training(options, out); });
}

}  // namespace brigade::train
