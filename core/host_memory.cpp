#include "core/host_memory.h"

#include <utility>

namespace brigade {

namespace {
thread_local std::shared_ptr<HostMemoryAccount> t_account;
}  // namespace

const std::shared_ptr<HostMemoryAccount>& current_host_memory_account() { return t_account; }

HostMemoryScope::HostMemoryScope(std::shared_ptr<HostMemoryAccount> account) : previous_(std::move(t_account)) {
  t_account = std::move(account);
}

HostMemoryScope::~HostMemoryScope() { t_account = std::move(previous_); }

}  // namespace brigade
