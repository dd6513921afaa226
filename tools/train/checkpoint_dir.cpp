#include "checkpoint_dir.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <system_error>

#include "core/error.h"
#include "nn/sharded_checkpoint.h"

namespace brigade::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLegacySuffix = ".safetensors";

// "step-00000250": a sharded checkpoint's directory; with `legacy`, the single file older builds wrote.
std::string checkpoint_name(int64_t step, bool legacy) {
  char name[48];
  std::snprintf(name, sizeof name, "step-%08lld%s", static_cast<long long>(step), legacy ? kLegacySuffix : "");
  return name;
}

// The step of a checkpoint's name; nothing for any other name. Exact: the name must be what
// checkpoint_name() writes for that step, so "step-7" or a ".tmp" file never count.
std::optional<int64_t> step_of(const std::string& name, bool legacy) {
  const std::string prefix = "step-", suffix = legacy ? kLegacySuffix : "";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  const char* begin = name.data() + prefix.size();
  const char* end = name.data() + name.size() - suffix.size();
  int64_t step = 0;
  auto [stop, ec] = std::from_chars(begin, end, step);
  if (ec != std::errc() || stop != end || step < 0 || checkpoint_name(step, legacy) != name) return std::nullopt;
  return step;
}

}  // namespace

bool is_checkpoint_dir(const std::string& save) {
  if (save.empty()) return false;
  if (save.back() == '/') return true;
  std::error_code ec;
  if (!fs::is_directory(save, ec)) return false;
  // A sharded checkpoint is a directory too, that of `--save PATH` saved before: not a directory of
  // checkpoints. So is what a first save to PATH that was killed half-way leaves: shards or their
  // temporary files ("<shard>.tmp.<pid>.<n>", core/atomic_file.h), no index yet.
  for (const fs::directory_entry& entry : fs::directory_iterator(save, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string written = name.substr(0, name.find(".tmp."));
    if (name == nn::kShardedIndexName || nn::is_shard_name(written)) return false;
  }
  return true;
}

void make_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return;
  fs::path self = fs::path(dir);
  if (self.filename().empty()) self = self.parent_path();  // "runs/" names "runs"
  // Every process of a launched run gets here: another may have created the folder since the check
  // above, so only something there that is not a folder is refused.
  BRIGADE_CHECK(!fs::exists(self, ec) || fs::is_directory(self, ec), "--save ", dir, ": ", self.string(),
                " exists but is not a directory");
  fs::path parent = self.parent_path();
  if (parent.empty()) parent = ".";
  BRIGADE_CHECK(fs::is_directory(parent, ec), "--save ", dir, ": cannot create the checkpoint directory: its parent ",
                parent.string(), " does not exist");
  std::error_code made;
  fs::create_directory(self, made);
  // Another process may have created it a moment ago.
  BRIGADE_CHECK(fs::is_directory(self, ec), "--save ", dir, ": cannot create the checkpoint directory: ",
                made.message());
}

std::string checkpoint_path(const std::string& dir, int64_t step) {
  return (fs::path(dir) / checkpoint_name(step, false)).string();
}

std::string legacy_checkpoint_path(const std::string& dir, int64_t step) {
  return (fs::path(dir) / checkpoint_name(step, true)).string();
}

std::string existing_checkpoint_path(const std::string& dir, int64_t step) {
  std::error_code ec;
  return fs::is_directory(checkpoint_path(dir, step), ec) ? checkpoint_path(dir, step) : legacy_checkpoint_path(dir, step);
}

std::vector<int64_t> checkpoint_steps(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::optional<int64_t> step = entry.is_directory(ec) ? step_of(name, false)
                                  : entry.is_regular_file(ec) ? step_of(name, true)
                                                              : std::nullopt;
    if (step) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end(), std::greater<>());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());  // a step both ways: the directory counts
  return steps;
}

NewestCheckpoint load_newest_checkpoint(const std::string& dir) {
  NewestCheckpoint newest;
  for (int64_t step : checkpoint_steps(dir)) {
    const std::string path = existing_checkpoint_path(dir, step);
    std::error_code ec;
    const bool sharded = fs::is_directory(path, ec);
    try {
      // A sharded one is only checked here (its index, every shard there and whole): each rank then
      // reads its own part. A single file is read whole, as it always was.
      if (sharded) nn::read_sharded_index(path);
      else newest.checkpoint = nn::load_checkpoint(path);
    } catch (const Error& e) {
      newest.warnings.push_back("skipping " + path + ", which cannot be loaded: " + e.what());
      continue;
    }
    newest.step = step;
    newest.sharded = sharded;
    break;
  }
  return newest;
}

void prune_checkpoints(const std::string& dir, int64_t step, int64_t keep) {
  int64_t kept = 0;
  for (int64_t s : checkpoint_steps(dir)) {
    if (s > step) continue;
    // Only a checkpoint that can be resumed counts towards --keep: a directory whose save never
    // wrote its index (killed half-way) is never resumed from, so it must not take a good one's place.
    std::error_code ec;
    const fs::path existing = existing_checkpoint_path(dir, s);
    const bool whole = !fs::is_directory(existing, ec) || fs::exists(existing / nn::kShardedIndexName, ec);
    if (whole && kept++ < keep) continue;
    for (const std::string& path : {checkpoint_path(dir, s), legacy_checkpoint_path(dir, s)}) {
      std::error_code ec;
      fs::remove_all(path, ec);  // a sharded checkpoint goes whole
      BRIGADE_CHECK(!ec, "--save ", dir, ": cannot delete the old checkpoint ", path, ": ", ec.message());
    }
  }
}

}  // namespace brigade::train
