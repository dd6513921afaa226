#include "core/memory_account.h"

#include <utility>

namespace brigade {

namespace {
thread_local std::shared_ptr<MemoryAccount> t_accounts[2];  // by MemoryKind
std::shared_ptr<MemoryAccount>& slot(MemoryKind kind) { return t_accounts[kind == MemoryKind::host ? 0 : 1]; }
}  // namespace

const std::shared_ptr<MemoryAccount>& current_memory_account(MemoryKind kind) { return slot(kind); }

MemoryAccountScope::MemoryAccountScope(MemoryKind kind, std::shared_ptr<MemoryAccount> account)
    : kind_(kind), previous_(std::move(slot(kind))) {
  slot(kind) = std::move(account);
}

MemoryAccountScope::~MemoryAccountScope() { slot(kind_) = std::move(previous_); }

}  // namespace brigade
