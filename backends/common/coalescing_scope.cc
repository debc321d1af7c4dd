#include "backends/common/coalescing_scope.h"

namespace lockd {
namespace {

thread_local CoalescingScope* current_scope = nullptr;

}  // namespace

CoalescingScope::CoalescingScope() {
  if (current_scope == nullptr) {
    current_scope = this;
    outermost_ = true;
  }
}

CoalescingScope::~CoalescingScope() {
  if (!outermost_) return;
  // Closed before sending: what Send() starts is not held back again.
  current_scope = nullptr;
  for (auto& [key, pending] : pending_) pending->Send();
}

CoalescingScope* CoalescingScope::Current() { return current_scope; }

CoalescingScope::Pending* CoalescingScope::Find(const void* key) const {
  for (const auto& [k, pending] : pending_) {
    if (k == key) return pending.get();
  }
  return nullptr;
}

CoalescingScope::Pending* CoalescingScope::Add(const void* key, std::unique_ptr<Pending> pending) {
  pending_.emplace_back(key, std::move(pending));
  return pending_.back().second.get();
}

}  // namespace lockd
