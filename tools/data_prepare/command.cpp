#include "data_prepare/command.h"

#include <exception>
#include <ostream>

#include "data_prepare/options.h"
#include "data_prepare/prepare.h"

namespace brigade::data_cli {

int data_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedPrepareArgs parsed;
  try {
    parsed = parse_data_args(args);
  } catch (const UsageError& e) {
    err << "brigade data: " << e.what() << "\n\n" << data_usage();
    return 2;
  }
  if (parsed.help) {
    out << data_usage();
    return 0;
  }
  try {
    prepare(parsed.options, out);
  } catch (const std::exception& e) {
    err << "brigade data prepare: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace brigade::data_cli
