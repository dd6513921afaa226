#include "text/merge_table.h"

#include <algorithm>
#include <queue>

namespace brigade::text {

namespace {

uint64_t pair_key(int32_t left, int32_t right) { return uint64_t(uint32_t(left)) << 32 | uint32_t(right); }

}  // namespace

bool MergeTable::add(Id left, Id right, Id merged) {
  if (!ranks_.emplace(pair_key(left, right), int32_t(rules_.size())).second) return false;
  rules_.push_back({left, right, merged});
  return true;
}

int32_t MergeTable::rank_of(Id left, Id right) const {
  const auto it = ranks_.find(pair_key(left, right));
  return it == ranks_.end() ? kNoMerge : it->second;
}

void MergeTable::apply(std::vector<Id>& ids) const {
  if (ids.size() < 2) return;
  if (ids.size() < kLongPiece) {
    apply_by_scan(ids);
  } else {
    apply_by_queue(ids);
  }
}

void MergeTable::apply_by_scan(std::vector<Id>& ids) const {
  // ranks[i]: the rank of the merge of ids[i] and ids[i + 1]. A rank names one pair, so the places
  // where ranks[i] is the lowest rank are exactly that pair's occurrences.
  size_t n = ids.size();
  std::vector<int32_t> ranks(n, kNoMerge);
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = rank_of(ids[i], ids[i + 1]);
  while (true) {
    int32_t best = kNoMerge;
    for (size_t i = 0; i + 1 < n; ++i) best = std::min(best, ranks[i]);
    if (best == kNoMerge) break;
    const Id merged = rules_[size_t(best)].merged;
    // Every occurrence, left to right, compacted in place. A pair's rank is kept where neither token
    // changed; next to a merged token it is looked up again, once the token after it is known.
    size_t w = 0;
    bool previous_merged = false;
    for (size_t i = 0; i < n; ++i) {
      const bool merge_here = i + 1 < n && ranks[i] == best;
      const int32_t carried = ranks[i];
      ids[w] = merge_here ? merged : ids[i];
      if (merge_here) ++i;
      if (w > 0 && (previous_merged || merge_here)) ranks[w - 1] = rank_of(ids[w - 1], ids[w]);
      ranks[w] = carried;  // right unless this token or the next one merged, which is fixed then
      previous_merged = merge_here;
      ++w;
    }
    n = w;
    ranks[n - 1] = kNoMerge;
  }
  ids.resize(n);
}

void MergeTable::apply_by_queue(std::vector<Id>& ids) const {
  // The tokens as a linked list over their first positions (a merged token keeps its left one's);
  // a merged-away token's next is kGone. Positions only grow along the list, so ordering the queue
  // by (rank, position) visits a rank's occurrences left to right.
  constexpr int32_t kEnd = -1, kGone = -2;
  const int32_t n = int32_t(ids.size());
  std::vector<int32_t> next(ids.size()), prev(ids.size());
  for (int32_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : kEnd;
    prev[i] = i - 1;
  }
  struct Occurrence {
    int32_t rank, position;
    bool operator>(const Occurrence& o) const { return rank != o.rank ? rank > o.rank : position > o.position; }
  };
  std::priority_queue<Occurrence, std::vector<Occurrence>, std::greater<Occurrence>> queue;
  auto queue_pair_at = [&](int32_t p) {
    if (p < 0 || next[p] < 0) return;
    const int32_t rank = rank_of(ids[p], ids[next[p]]);
    if (rank != kNoMerge) queue.push({rank, p});
  };
  for (int32_t i = 0; i + 1 < n; ++i) queue_pair_at(i);

  std::vector<int32_t> batch, merged_at;
  while (!queue.empty()) {
    const int32_t rank = queue.top().rank;
    batch.clear();
    while (!queue.empty() && queue.top().rank == rank) {
      batch.push_back(queue.top().position);
      queue.pop();
    }
    const Rule& rule = rules_[rank];
    merged_at.clear();
    for (const int32_t p : batch) {
      // Entries go stale when a neighbour merges: check the pair is still there. In "a a a" the
      // entry at the second 'a' finds it merged away by the first.
      const int32_t q = next[p];
      if (q < 0 || ids[p] != rule.left || ids[q] != rule.right) continue;
      ids[p] = rule.merged;
      next[p] = next[q];
      if (next[q] >= 0) prev[next[q]] = p;
      next[q] = kGone;
      merged_at.push_back(p);
    }
    // Only now the pairs the merges made: the next step looks at all ranks again.
    for (const int32_t p : merged_at) {
      queue_pair_at(prev[p]);
      queue_pair_at(p);
    }
  }
  size_t w = 0;
  for (int32_t p = 0; p >= 0; p = next[p]) ids[w++] = ids[p];
  ids.resize(w);
}

}  // namespace brigade::text
