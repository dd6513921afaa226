// Schedule files in PyTorch's CSV format (see schedule_csv.h): reading — cells to actions, the
// stages' ranks to a placement, the counts of each piece of work — and writing.
#include "pipeline/schedule_csv.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "core/atomic_file.h"
#include "core/error.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline/slots.h"

namespace brigade::pipeline {

namespace {

// Far beyond any real schedule, so a typo cannot allocate gigabytes (as generators.cpp bounds them).
constexpr int kMaxIndex = 1 << 20;
constexpr long long kMaxActions = 10'000'000;

// One action as the file writes it: "3W1".
std::string cell_text(const Action& a, int rank, const Layout& layout) {
  const char* letter = a.kind == ActionKind::forward          ? "F"
                       : a.kind == ActionKind::backward       ? "B"
                       : a.kind == ActionKind::backward_input ? "I"
                                                              : "W";
  return std::to_string(layout.stage(rank, a.chunk)) + letter + std::to_string(a.microbatch);
}

// "schedule file 'zbv.csv', row 2 (rank 1), cell 4 ('1I0')"
std::string place(const std::string& path, int rank, int cell, const std::string& text) {
  std::ostringstream os;
  os << "schedule file '" << path << "', row " << rank + 1 << " (rank " << rank << "), cell " << cell << " ('" << text
     << "')";
  return os.str();
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// A cell's action: its global stage, kind and micro-batch.
struct CellAction {
  int stage = 0;
  ActionKind kind = ActionKind::forward;
  int microbatch = 0;
  bool overlapped = false;  // the F of an overlapped pair
  int cell = 0;             // 1-based, in its row
  std::string text;
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Reads digits from text[i...]; -1 when there are none; fails past kMaxIndex.
int read_index(const std::string& text, size_t& i, const std::string& where, const char* what) {
  const size_t start = i;
  long long v = 0;
  for (; i < text.size() && is_digit(text[i]); ++i) v = std::min<long long>(v * 10 + (text[i] - '0'), kMaxIndex + 1);
  if (v > kMaxIndex) fail(where, ": ", what, " ", text.substr(start, i - start), " is too large (at most ", kMaxIndex, ")");
  return i == start ? -1 : int(v);
}

CellAction parse_cell(const std::string& text, const std::string& where) {
  const std::string expected = "expected <stage><F|B|I|W><micro-batch>, such as 0F0 or 3W1";
  if (text.empty()) fail(where, ": an empty action inside an overlapped pair; ", expected);
  if (text.front() == '(') fail(where, ": a composite action inside a composite one; ", expected);
  CellAction out;
  out.text = text;
  size_t i = 0;
  out.stage = read_index(text, i, where, "stage");
  if (out.stage < 0) fail(where, ": no stage index; ", expected);
  const size_t name_start = i;
  while (i < text.size() && ((text[i] >= 'A' && text[i] <= 'Z') || text[i] == '_')) ++i;
  const std::string name = text.substr(name_start, i - name_start);
  out.microbatch = read_index(text, i, where, "micro-batch");
  if (i != text.size()) fail(where, ": unexpected '", text.substr(i), "'; ", expected);
  if (name == "F") out.kind = ActionKind::forward;
  else if (name == "B") out.kind = ActionKind::backward;
  else if (name == "I") out.kind = ActionKind::backward_input;
  else if (name == "W") out.kind = ActionKind::backward_weight;
  else if (name == "SEND_F" || name == "RECV_F" || name == "SEND_B" || name == "RECV_B")
    fail(where, ": ", name, " is a message (PyTorch's compute_comms format); brigade reads the compute-only format "
         "(dump it with _dump_csv(..., format=\"compute_only\")) and places the messages itself");
  else if (name == "UNSHARD" || name == "RESHARD" || name == "REDUCE_GRAD")
    fail(where, ": ", name, " is FSDP / data-parallel bookkeeping (PyTorch's compute_comms format), which brigade's "
         "runtime does on its own; dump the schedule with _dump_csv(..., format=\"compute_only\")");
  else
    fail(where, ": unknown action '", name, "'; ", expected);
  if (out.microbatch < 0) fail(where, ": no micro-batch index; ", expected);
  return out;
}

// A cell's actions: one, or an overlapped pair "(<F>;<B or I>)OVERLAP_F_B", whose F is marked
// overlapped.
std::vector<CellAction> parse_cell_actions(const std::string& text, const std::string& where) {
  if (text.front() != '(') return {parse_cell(text, where)};
  const std::string kind = ")OVERLAP_F_B";
  const size_t close = text.find(')');
  const size_t semicolon = text.find(';');
  if (close == std::string::npos || text.substr(close) != kind || semicolon == std::string::npos || semicolon > close)
    fail(where, ": expected an overlapped pair such as (0F1;3B0)OVERLAP_F_B (PyTorch's DualPipeV cells)");
  CellAction forward = parse_cell(trim(text.substr(1, semicolon - 1)), where);
  CellAction backward = parse_cell(trim(text.substr(semicolon + 1, close - semicolon - 1)), where);
  if (forward.kind != ActionKind::forward ||
      (backward.kind != ActionKind::backward && backward.kind != ActionKind::backward_input))
    fail(where, ": an overlapped pair is a forward, then a backward (B or I), such as (0F1;3B0)OVERLAP_F_B");
  forward.overlapped = true;
  forward.text = backward.text = text;
  return {forward, backward};
}

// The rows of a CSV text: lines (\n or \r\n) split at commas, cells trimmed and unquoted; trailing
// empty lines dropped (a file ends with a newline).
std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  size_t start = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;  // a UTF-8 byte-order mark
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<std::string> cells;
    std::stringstream in(line);
    for (std::string cell; std::getline(in, cell, ',');) {
      cell = trim(cell);
      if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"') cell = trim(cell.substr(1, cell.size() - 2));
      cells.push_back(cell);
    }
    rows.push_back(std::move(cells));
    start = end + 1;
  }
  while (!rows.empty() && std::all_of(rows.back().begin(), rows.back().end(), [](const std::string& c) { return c.empty(); }))
    rows.pop_back();
  return rows;
}

// Where the rows put the stages, as text: "rank 0: 0 3; rank 1: 1 2".
std::string stages_by_rank(const std::vector<int>& home, int ranks) {
  std::ostringstream os;
  for (int r = 0; r < ranks; ++r) {
    os << (r ? "; " : "") << "rank " << r << ":";
    for (size_t s = 0; s < home.size(); ++s)
      if (home[s] == r) os << " " << s;
  }
  return os.str();
}

}  // namespace

ScheduleFile parse_schedule_csv(const std::string& text, const std::string& path) {
  const std::vector<std::vector<std::string>> rows = csv_rows(text);
  const std::string file = "schedule file '" + path + "'";
  BRIGADE_CHECK(!rows.empty(), file, ": no rows (one row of actions per rank)");
  const int P = int(rows.size());

  // Every cell's action, and the rank each stage is on (where it was first seen).
  std::vector<std::vector<CellAction>> ranks(static_cast<size_t>(P));
  std::map<int, std::pair<int, const CellAction*>> home;  // stage -> (rank, its first cell)
  long long total = 0;
  for (int r = 0; r < P; ++r) {
    const auto& row = rows[size_t(r)];
    for (size_t c = 0; c < row.size(); ++c) {
      if (row[c].empty()) continue;  // an idle slot
      BRIGADE_CHECK(++total <= kMaxActions, file, ": more than ", kMaxActions, " actions");
      for (CellAction& a : parse_cell_actions(row[c], place(path, r, int(c) + 1, row[c]))) {
        a.cell = int(c) + 1;
        ranks[size_t(r)].push_back(a);
      }
    }
    BRIGADE_CHECK(!ranks[size_t(r)].empty(), file, ", row ", r + 1, " (rank ", r,
                  "): no actions; every rank must run the stages it holds (a row per rank, rank 0 first)");
  }
  for (int r = 0; r < P; ++r) {
    for (const CellAction& a : ranks[size_t(r)]) {
      auto [it, fresh] = home.insert({a.stage, {r, &a}});
      if (!fresh && it->second.first != r) {
        const auto& [other, first] = it->second;
        fail(place(path, r, a.cell, a.text), ": stage ", a.stage, " is also on rank ", other, " (row ", other + 1,
             ", cell ", first->cell, " '", first->text, "'); a stage lives on one rank");
      }
    }
  }

  // The placement: which of brigade's layouts puts every stage where the rows do.
  const int S = home.rbegin()->first + 1;
  for (int s = 0; s < S; ++s)
    BRIGADE_CHECK(home.count(s), file, ": stage ", s, " appears in no row, but the file uses stages up to ", S - 1,
                  " (every stage 0..S-1 must run)");
  std::vector<int> rank_of(static_cast<size_t>(S));
  for (const auto& [stage, where] : home) rank_of[size_t(stage)] = where.first;
  BRIGADE_CHECK(S % P == 0, file, ": ", S, " stages on ", P, " ranks (rows); every rank must hold the same number "
                "of stages (", stages_by_rank(rank_of, P), ")");
  const int V = S / P;
  Layout layout{P, V, Placement::interleaved};
  auto fits = [&](const Layout& l) {
    for (int s = 0; s < S; ++s)
      if (l.rank_of(s) != rank_of[size_t(s)]) return false;
    return true;
  };
  if (!fits(layout)) {
    layout.placement = Placement::v_shape;
    BRIGADE_CHECK(fits(layout), file, ": the rows put the stages on the ranks as ", stages_by_rank(rank_of, P),
                  " — neither the interleaved placement (stage s on rank s % P) nor the V (rank r holds stage r "
                  "going down and 2P-1-r coming back up, and so on for more chunks); brigade runs those two");
  }

  // Every piece of work once: F, and B or I + W, for every (stage, micro-batch).
  int M = 0;
  for (const auto& list : ranks)
    for (const CellAction& a : list) M = std::max(M, a.microbatch + 1);
  std::map<std::tuple<int, int, ActionKind>, std::vector<const CellAction*>> done;
  for (const auto& list : ranks)
    for (const CellAction& a : list) done[{a.stage, a.microbatch, a.kind}].push_back(&a);
  for (int s = 0; s < S; ++s) {
    const int r = rank_of[size_t(s)];
    const std::string holder = file + ", row " + std::to_string(r + 1) + " (rank " + std::to_string(r) + ")";
    for (int m = 0; m < M; ++m) {
      auto cells = [&](ActionKind k) -> const std::vector<const CellAction*>& {
        static const std::vector<const CellAction*> none;
        auto it = done.find({s, m, k});
        return it == done.end() ? none : it->second;
      };
      auto listed = [](const std::vector<const CellAction*>& v) {
        std::string out;
        for (const CellAction* a : v) {
          if (!out.empty()) out += " and ";
          out += std::to_string(a->cell) + " ('" + a->text + "')";
        }
        return out;
      };
      const auto &f = cells(ActionKind::forward), &b = cells(ActionKind::backward),
                 &i = cells(ActionKind::backward_input), &w = cells(ActionKind::backward_weight);
      const std::string work = " micro-batch " + std::to_string(m) + " on stage " + std::to_string(s);
      const std::string why_m = " (micro-batches 0.." + std::to_string(M - 1) + ": the file's largest is " +
                                std::to_string(M - 1) + ")";
      BRIGADE_CHECK(!f.empty(), holder, ": never runs F of", work, why_m);
      BRIGADE_CHECK(f.size() == 1, holder, ": runs F of", work, " twice, in cells ", listed(f));
      BRIGADE_CHECK(b.size() + i.size() <= 1, holder, ": runs the backward of", work, " more than once, in cells ",
                    listed(b), b.empty() || i.empty() ? "" : " and ", listed(i));
      BRIGADE_CHECK(!b.empty() || !i.empty(), holder, ": never runs B (or I and W) of", work, why_m);
      BRIGADE_CHECK(w.size() <= 1, holder, ": runs W of", work, " twice, in cells ", listed(w));
      BRIGADE_CHECK(b.empty() || w.empty(), holder, ": runs W of", work, " in cell ", listed(w), " after a whole B in cell ",
                    listed(b), " (B already computes the weight gradients)");
      BRIGADE_CHECK(i.empty() || !w.empty(), holder, ": runs I of", work, " in cell ", listed(i),
                    " but never its W (the weight gradients)");
    }
  }

  ScheduleFile out;
  out.path = path;
  out.schedule.name = path;
  out.schedule.layout = layout;
  out.schedule.microbatches = M;
  out.schedule.actions.resize(size_t(P));
  out.cells.resize(size_t(P));
  for (int r = 0; r < P; ++r)
    for (const CellAction& a : ranks[size_t(r)]) {
      out.schedule.actions[size_t(r)].push_back({a.kind, a.microbatch, layout.chunk_of(a.stage), a.overlapped});
      out.cells[size_t(r)].push_back(a.cell);
    }
  return out;
}

ScheduleFile read_schedule_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BRIGADE_CHECK(in.good(), "schedule file '", path, "': cannot open it");
  std::ostringstream text;
  text << in.rdbuf();
  BRIGADE_CHECK(!in.bad(), "schedule file '", path, "': cannot read it");
  return parse_schedule_csv(text.str(), path);
}

Schedule schedule_from_file(const ScheduleFile& file) {
  const Schedule& s = file.schedule;
  Schedule with_messages;
  try {
    with_messages = add_communication(s, MessagePlacement::lock_step);
  } catch (const StuckOrder& e) {
    std::ostringstream why;
    why << "schedule file '" << file.path << "' (P=" << s.ranks() << ", M=" << s.microbatches << ", V=" << s.chunks()
        << ") can never finish: each rank below waits for an input that is computed only later in some row, or "
           "never (a dependency cycle, or an action before its input):";
    for (const StuckOrder::Wait& w : e.stuck) {
      const Action& a = s.actions[size_t(w.rank)][w.step];
      why << "\n  row " << w.rank + 1 << " (rank " << w.rank << "), cell " << file.cells[size_t(w.rank)][w.step]
          << " ('" << cell_text(a, w.rank, s.layout) << "') waits for " << w.input;
    }
    throw Error(why.str());
  }
  try {
    simulate(with_messages);  // every dependency and message, as for a generated schedule
  } catch (const ScheduleError& e) {
    fail("schedule file '", file.path, "': ", e.what());
  }
  return with_messages;
}

std::string schedule_csv(const Schedule& schedule) {
  std::string out;
  for (int r = 0; r < schedule.ranks(); ++r) {
    const auto& list = schedule.actions.at(size_t(r));
    bool first = true;
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (!is_compute(a.kind)) continue;
      if (!first) out += ',';
      first = false;
      if (a.overlapped) {  // the pair, as PyTorch writes it
        // Messages may sit between the two halves (lock-step puts a pair's messages around it);
        // another compute action may not.
        size_t next = i + 1;
        while (next < list.size() && !is_compute(list[next].kind)) ++next;
        BRIGADE_CHECK(next < list.size() && (list[next].kind == ActionKind::backward ||
                                             list[next].kind == ActionKind::backward_input),
                      "schedule_csv: schedule '", schedule.name, "', rank ", r, ", step ", i, ": ",
                      describe(a, r, schedule.layout), " is marked overlapped but no backward follows it");
        out += '(';
        out += cell_text(a, r, schedule.layout);
        out += ';';
        out += cell_text(list[next], r, schedule.layout);
        out += ")OVERLAP_F_B";
        i = next;
      } else {
        out += cell_text(a, r, schedule.layout);
      }
    }
    out += "\r\n";
  }
  return out;
}

void write_schedule_csv(const std::string& path, const Schedule& schedule) {
  write_file_atomically(path, schedule_csv(schedule), "write_schedule_csv");
}

}  // namespace brigade::pipeline
