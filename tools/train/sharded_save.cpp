#include "sharded_save.h"

#include <filesystem>
#include <set>
#include <system_error>

#include "comm/comm.h"
#include "core/error.h"
#include "core/factory.h"
#include "nn/sharded_checkpoint.h"
#include "optim/optimizer.h"

namespace brigade::train {

namespace fs = std::filesystem;

namespace {

// Messages of the save travel on tags far above the executor's (pipeline/executor.cpp) and the
// forward-only passes' (pipeline/forward.cpp).
constexpr int kNamesTag = (1 << 24) + 16;

// Step 1 on the pipeline's rank 0: the directory exists, and the generation of this save's shards:
// one no file of this step there uses yet (a save of the same step again), so no shard an existing
// index points at is overwritten. The old checkpoint, whatever its step, stays whole until the new
// index replaces it; a crash half-way leaves it as it was.
int prepare_directory(const std::string& dir, int64_t step) {
  std::error_code ec;
  BRIGADE_CHECK(!fs::exists(dir, ec) || fs::is_directory(dir, ec), "save checkpoint ", dir,
                ": a file is in the way (a single-file checkpoint of an older brigade? it still resumes with "
                "--resume; save to another path)");
  fs::create_directory(dir, ec);
  BRIGADE_CHECK(fs::is_directory(dir, ec), "save checkpoint ", dir, ": cannot create the directory: ", ec.message());
  return nn::next_shard_generation(dir, step);
}

// Step 1 between the ranks: which of `mine` this rank writes (a name a lower rank holds too is that
// rank's), and on rank 0, every name's shard.
std::set<std::string> names_to_skip(comm::Communicator& comm, int64_t step, int generation,
                                    const std::vector<std::string>& mine, std::map<std::string, std::string>& where) {
  if (comm.rank() != 0) {
    comm.send(encode_names(mine).to(comm.device()), 0, kNamesTag, comm::Shapes::varying);
    const std::vector<std::string> skip = decode_names(comm.recv(0, kNamesTag + 1, comm::Shapes::varying));
    return {skip.begin(), skip.end()};
  }
  for (const std::string& name : mine) where.emplace(name, nn::shard_name(0, step, generation));
  for (int r = 1; r < comm.size(); ++r) {
    std::vector<std::string> skip;
    for (const std::string& name : decode_names(comm.recv(r, kNamesTag, comm::Shapes::varying)))
      if (!where.emplace(name, nn::shard_name(r, step, generation)).second) skip.push_back(name);
    comm.send(encode_names(skip).to(comm.device()), r, kNamesTag + 1, comm::Shapes::varying);
  }
  return {};
}

// World rank 0's value (as every rank's `value`), on every rank of its pipeline and the replicas.
std::vector<double> from_leader(const pipeline::PipelineGroups* groups, std::vector<double> values, bool sum) {
  if (groups == nullptr) return values;
  Tensor t = from_vector(values, {int64_t(values.size())}, DType::f64, groups->pipeline->device());
  if (sum) groups->pipeline->all_reduce(t);
  else groups->pipeline->broadcast(t, 0);
  if (groups->replicas) groups->replicas->broadcast(t, 0);
  return t.to_vector();
}

}  // namespace

Tensor encode_names(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& n : names) text += n + '\n';
  Tensor t = zeros({int64_t(text.size())}, DType::i32);
  for (size_t i = 0; i < text.size(); ++i) t.data<int32_t>()[i] = int32_t(static_cast<unsigned char>(text[i]));
  return t;
}

std::vector<std::string> decode_names(const Tensor& t) {
  Tensor host = t.to(Device::cpu()).contiguous();
  std::vector<std::string> names(1);
  for (int64_t i = 0; i < host.numel(); ++i) {
    const char c = char(host.data<int32_t>()[i]);
    if (c == '\n') names.emplace_back();
    else names.back() += c;
  }
  names.pop_back();  // after the last '\n'
  return names;
}

void save_sharded(const std::string& dir, int64_t step, const pipeline::PipelineGroups* groups,
                  const ShardContents& mine) {
  const bool writer = groups == nullptr || groups->replica == 0;
  const int rank = groups ? groups->pipeline->rank() : 0, ranks = groups ? groups->pipeline->size() : 1;

  // No rank may still be reading a checkpoint at `dir` (a run resumed from the path it saves to, with
  // no steps left) when rank 0 starts replacing it.
  if (groups) {
    groups->pipeline->barrier();
    if (groups->replicas) groups->replicas->barrier();
  }
  // 1. The directory and who writes what. A failure here is a failure of this rank's part.
  std::string error;
  int generation = 0;
  bool prepared = true;
  if (writer && rank == 0) {
    try {
      generation = prepare_directory(dir, step);
    } catch (const Error& e) {
      error = e.what();
      prepared = false;
    }
  }
  // Every rank writes under rank 0's generation, and none writes when rank 0 could not prepare.
  const std::vector<double> agreed = from_leader(groups, {double(generation), prepared ? 1.0 : 0.0}, false);
  generation = int(agreed[0]);
  const bool go = agreed[1] == 1;
  const std::string shard = nn::shard_name(rank, step, generation);
  const std::string shard_path = (fs::path(dir) / shard).string();
  std::map<std::string, std::string> where;  // on rank 0: parameter -> shard
  std::map<std::string, Tensor> model, optim;
  if (writer) {
    std::vector<std::string> names;
    for (const auto& [name, t] : mine.parameters) names.push_back(name);
    std::set<std::string> skip;
    if (groups) skip = names_to_skip(*groups->pipeline, step, generation, names, where);
    else
      for (const std::string& name : names) where.emplace(name, shard);
    for (const auto& [name, t] : mine.parameters)
      if (!skip.count(name)) model.emplace(name, t);
    for (const auto& [key, t] : mine.optimizer) {
      const std::string parameter = optim::Optimizer::parameter_of_key(key);
      if (parameter.empty() || !skip.count(parameter)) optim.emplace(key, t);
    }
  }
  // 2. This rank's shard (none when it holds no parameters of its own).
  double outcome = 0;  // the shard's bytes; 0: no shard; -1: failed
  if (writer && go && !model.empty() && error.empty()) {
    try {
      nn::save_checkpoint(shard_path, model, optim);
      outcome = double(fs::file_size(shard_path));
    } catch (const Error& e) {
      error = e.what();
    }
  }
  if (!error.empty()) outcome = -1;
  // 3. Every rank's outcome, on every rank.
  std::vector<double> outcomes(size_t(ranks), 0.0);
  outcomes[size_t(rank)] = writer ? outcome : 0.0;
  outcomes = from_leader(groups, outcomes, true);
  for (int r = 0; r < ranks; ++r) {
    if (outcomes[size_t(r)] >= 0) continue;
    if (r == rank && writer)
      fail("save checkpoint ", dir, ": rank ", r, " could not write its shard ", shard_path, ": ", error,
           "; no new index was written, so this save is never resumed from");
    fail("save checkpoint ", dir, ": rank ", r, " could not write its shard ",
         (fs::path(dir) / nn::shard_name(r, step, generation)).string(),
         " (that rank's error says why); no new index was written, so this save is never resumed from");
  }
  // 4. The index, last.
  double indexed = 1;
  nn::ShardedIndex index;
  if (writer && rank == 0) {
    index.metadata = mine.metadata;
    index.parameters = where;
    for (int r = 0; r < ranks; ++r)
      if (outcomes[size_t(r)] > 0) index.shards[nn::shard_name(r, step, generation)] = int64_t(outcomes[size_t(r)]);
    try {
      nn::write_sharded_index(dir, index);
    } catch (const Error& e) {
      error = e.what();
      indexed = 0;
    }
  }
  indexed = from_leader(groups, {indexed}, false)[0];
  BRIGADE_CHECK(indexed == 1, "save checkpoint ", dir, ": ", error.empty() ? "world rank 0 could not write the index" : error);
  if (writer && rank == 0) nn::remove_stale_shards(dir, index);
}

}  // namespace brigade::train
