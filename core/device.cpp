#include "core/device.h"

#include "core/error.h"

namespace brigade {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    std::string num = text.substr(5);
    bool digits = !num.empty() && num.size() < 6 && num.find_first_not_of("0123456789") == std::string::npos;
    if (digits) return cuda(std::stoi(num));
  }
  fail("unknown device '", text, "' (expected cpu, cuda or cuda:N)");
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

bool cuda_available() { return cuda_device_count() > 0; }

}  // namespace brigade
