#include "core/error.h"
#include "pipeline/stage.h"

namespace brigade::pipeline {

namespace {

thread_local SkipScope* active_scope = nullptr;

std::string join(const std::vector<std::string>& names) {
  if (names.empty()) return "nothing";
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

}  // namespace

SkipScope::SkipScope() : previous_(active_scope) { active_scope = this; }
SkipScope::~SkipScope() { active_scope = previous_; }

void SkipScope::put(const std::string& name, const Tensor& t) {
  BRIGADE_CHECK(t.defined(), "pipeline::stash('", name, "'): the tensor is undefined");
  BRIGADE_CHECK(!stashed_.count(name), "pipeline::stash('", name,
                "'): a tensor is already stashed under this name and was not popped yet");
  stashed_[name] = t;
}

Tensor SkipScope::take(const std::string& name) {
  auto it = stashed_.find(name);
  if (it == stashed_.end()) return {};
  Tensor t = std::move(it->second);
  stashed_.erase(it);
  return t;
}

bool SkipScope::has(const std::string& name) const { return stashed_.count(name) > 0; }

std::vector<std::string> SkipScope::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : stashed_) out.push_back(name);
  return out;
}

void stash(const std::string& name, const Tensor& t) {
  BRIGADE_CHECK(active_scope != nullptr, "pipeline::stash('", name,
                "'): no SkipScope is active on this thread (run the model inside one, or through the pipeline runtime)");
  active_scope->put(name, t);
}

Tensor pop(const std::string& name) {
  BRIGADE_CHECK(active_scope != nullptr, "pipeline::pop('", name,
                "'): no SkipScope is active on this thread (run the model inside one, or through the pipeline runtime)");
  Tensor t = active_scope->take(name);
  BRIGADE_CHECK(t.defined(), "pipeline::pop('", name, "'): nothing is stashed under this name; available: ",
                join(active_scope->names()), " (is the skip declared in the pipeline's options, from the stage that "
                "stashes to the stage that pops?)");
  return t;
}

}  // namespace brigade::pipeline
