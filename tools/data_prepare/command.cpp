#include "data_prepare/command.h"

#include "data_prepare/options.h"
#include "data_prepare/prepare.h"
#include "tools/cli/command.h"

namespace brigade::data_cli {

int data_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return cli::run_command(
      "brigade data prepare", out, err, [&] { return parse_data_args(args); }, [] { return data_usage(); },
      [&](const PrepareOptions& options) { prepare(options, out); });
}

}  // namespace brigade::data_cli
