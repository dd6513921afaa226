// Host memory per owner: the CPU side of core/memory_account.h, under the names its callers know.
#pragma once

#include <memory>

#include "core/memory_account.h"

namespace brigade {

using HostMemoryAccount = MemoryAccount;

inline const std::shared_ptr<MemoryAccount>& current_host_memory_account() {
  return current_memory_account(MemoryKind::host);
}

}  // namespace brigade
