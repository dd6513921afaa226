// Built without CUDA: no GPUs, ever.
#include "core/device.h"

namespace brigade {

int cuda_device_count() { return 0; }
std::string cuda_unavailable_reason() { return "built without CUDA"; }

}  // namespace brigade
