// MergeTable: a BPE's ranked merges, and their application to one piece, in GPT-2's order.
//
// GPT-2's bpe() repeats one step until nothing changes: among the adjacent pairs of the piece's
// tokens, take the pair whose merge has the lowest rank, and merge every occurrence of it, left to
// right ("a a a" becomes "aa a"). Only then are the ranks looked at again. (That last point shows only
// with merges listed out of training order; tests/test_text.cpp has the case.)
//
// apply() does exactly that, in one of two ways. A short piece — nearly every piece of real text —
// keeps each adjacent pair's rank in an array and scans it for the lowest: a few dozen cache-friendly
// comparisons per step. A long piece (a DNA sequence, a run of thousands of letters) would make that
// quadratic, so past kLongPiece tokens the occurrences wait in a priority queue ordered by (rank,
// position) over a linked list of the tokens, and all occurrences of the lowest rank are merged
// together before the pairs they create are queued: O(n log n).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

namespace brigade::text {

class MergeTable {
 public:
  using Id = int32_t;
  static constexpr int32_t kNoMerge = std::numeric_limits<int32_t>::max();
  static constexpr size_t kLongPiece = 256;  // tokens; from here on apply() uses the queue

  // Adds the merge of `left` then `right` into `merged`, at rank size() (ranks are 0, 1, ...).
  // Returns false, adding nothing, when the pair already has a merge.
  bool add(Id left, Id right, Id merged);
  size_t size() const { return rules_.size(); }

  // The rank of the merge of `left` then `right`, or kNoMerge.
  int32_t rank_of(Id left, Id right) const;

  // Merges `ids` (one piece's tokens) as GPT-2's bpe() would.
  void apply(std::vector<Id>& ids) const;

 private:
  struct Rule {
    Id left, right, merged;
  };
  void apply_by_scan(std::vector<Id>& ids) const;
  void apply_by_queue(std::vector<Id>& ids) const;

  std::vector<Rule> rules_;                       // by rank
  std::unordered_map<uint64_t, int32_t> ranks_;   // (left << 32 | right) -> rank
};

}  // namespace brigade::text
