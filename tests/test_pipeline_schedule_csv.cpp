// Schedule files in PyTorch's CSV format: every built-in schedule survives a write and a read
// unchanged; a file written by hand as PyTorch's _dump_csv writes it reads as the schedule it is;
// malformed files are refused with the file, row and cell named; writing is atomic; and
// `brigade simulate --schedule-file / --write-schedule`. (That a file's schedule trains exactly as
// one device does is in test_pipeline_runtime.cpp.)
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline/schedule.h"
#include "pipeline/schedule_csv.h"
#include "cli_run.h"
#include "temp_dir.h"
#include "test_util.h"
#include "tools/simulate/command.h"

using namespace brigade;
using namespace brigade::pipeline;
using Catch::Contains;
using test::error_of;

namespace {

std::vector<std::vector<Action>> compute_only(const Schedule& s) {
  std::vector<std::vector<Action>> out(s.actions.size());
  for (size_t r = 0; r < s.actions.size(); ++r)
    for (const Action& a : s.actions[r])
      if (is_compute(a.kind)) out[r].push_back(a);
  return out;
}

// The error parsing `text` (as file "f.csv") gives, after checking it runs: "(no error)" when fine.
std::string file_error(const std::string& text) {
  return error_of([&] { schedule_from_file(parse_schedule_csv(text, "f.csv")); });
}

}  // namespace

TEST_CASE("schedule file: every built-in schedule written and read back is the same schedule", "[pipeline]") {
  int checked = 0;
  for (ScheduleKind kind : all_schedule_kinds()) {
    for (int P = 1; P <= 5; ++P) {
      for (int M : {1, 2, P, 2 * P, 2 * P + 1, 9}) {
        for (int V : {1, 2, 3}) {
          Schedule s;
          try {
            s = make_schedule(kind, P, M, V);
          } catch (const Error&) {
            continue;  // refused configurations: tested with the schedules
          }
          INFO(schedule_name(kind) << " P=" << P << " M=" << M << " V=" << V);
          ++checked;
          const std::string text = schedule_csv(s);
          const ScheduleFile back = parse_schedule_csv(text, "roundtrip.csv");
          REQUIRE(back.schedule.layout == s.layout);  // the placement is read off the rows
          REQUIRE(back.schedule.microbatches == M);
          REQUIRE(back.schedule.actions == compute_only(s));
          REQUIRE(schedule_csv(back.schedule) == text);
          // With its messages the file runs; zb-v's own messages are lock-step already: identical.
          const Schedule runnable = schedule_from_file(back);
          REQUIRE_NOTHROW(simulate(runnable));
          if (kind == ScheduleKind::zb_v) REQUIRE(runnable.actions == s.actions);
        }
      }
    }
  }
  REQUIRE(checked > 100);

  // Through a file: written atomically (nothing but the file is left in the directory).
  test::TempDir dir;
  const Schedule zbv = make_schedule(ScheduleKind::zb_v, 3, 7);
  write_schedule_csv(dir.file("zbv.csv"), zbv);
  CHECK(dir.entries() == std::vector<std::string>{"zbv.csv"});
  const ScheduleFile read = read_schedule_csv(dir.file("zbv.csv"));
  CHECK(read.path == dir.file("zbv.csv"));
  CHECK(read.schedule.actions == compute_only(zbv));
  CHECK(read.schedule.layout == Layout{3, 2, Placement::v_shape});
  CHECK_THAT(error_of([&] { write_schedule_csv(dir.file("no/such/dir.csv"), zbv); }),
             Contains("write_schedule_csv") && Contains("no/such/dir.csv"));
  CHECK(dir.entries() == std::vector<std::string>{"zbv.csv"});  // a failed write leaves nothing behind
  CHECK_THAT(error_of([&] { read_schedule_csv(dir.file("missing.csv")); }),
             Contains("schedule file '" + dir.file("missing.csv") + "': cannot open it"));
}

TEST_CASE("schedule file: PyTorch's own format, idle cells and CRLF included, as written by hand", "[pipeline]") {
  // ScheduleZBVZeroBubble for 2 ranks and 4 micro-batches as _dump_csv writes it: rank 1's row starts
  // with an idle cell, and Python's csv module ends lines with \r\n. Rank 0 holds stages 0 and 3,
  // rank 1 stages 1 and 2: the V.
  const std::string zbv =
      "0F0,0F1,0F2,3F0,3I0,3W0,3F1,3I1,3W1,0F3,0I0,0W0,3F2,3I2,3W2,0I1,0W1,3F3,3I3,3W3,0I2,0W2,0I3,0W3\r\n"
      ",1F0,2F0,1F1,2F1,2I0,2W0,1F2,1I0,1W0,2F2,2I1,2W1,1F3,1I1,1W1,2F3,2I2,2W2,1I2,2I3,1I3,1W2,2W3,1W3\r\n";
  const ScheduleFile f = parse_schedule_csv(zbv, "zbv.csv");
  CHECK(f.schedule.name == "zbv.csv");
  CHECK(f.schedule.layout == Layout{2, 2, Placement::v_shape});
  CHECK(f.schedule.microbatches == 4);
  REQUIRE(f.schedule.actions[1].size() == 24);
  CHECK(f.schedule.actions[1][0] == F(0, 0));  // stage 1 = rank 1's chunk 0
  CHECK(f.schedule.actions[1][1] == F(0, 1));  // stage 2 = its chunk 1: the turn
  CHECK(f.cells[1][0] == 2);                   // after the idle cell
  CHECK(f.schedule.actions[0][3] == F(0, 1));  // stage 3 = rank 0's chunk 1
  CHECK(f.schedule.actions == zb_v_order(2, 4).actions);
  const SimulationResult r = simulate(schedule_from_file(f));
  CHECK(r.makespan == 25);  // 6M + P - 1

  // DualPipeV as PyTorch writes it: overlapped pairs are one cell each.
  const std::string dualpipev =
      "0F0,0F1,0F2,3F0,3I0,3W0,3F1,(0F3;3B1)OVERLAP_F_B,(3F2;0B0)OVERLAP_F_B,3B2,(3F3;0B1)OVERLAP_F_B,3B3,0I2,0W2,"
      "0I3,0W3\r\n"
      "1F0,2F0,1F1,2F1,1F2,2B0,(2F2;1B0)OVERLAP_F_B,(1F3;2B1)OVERLAP_F_B,(2F3;1B1)OVERLAP_F_B,2B2,1B2,2I3,1I3,2W3,"
      "1W3\r\n";
  const ScheduleFile d = parse_schedule_csv(dualpipev, "dualpipev.csv");
  CHECK(d.schedule.actions == dualpipev_order(2, 4).actions);
  CHECK(d.cells[0][7] == 8);  // both halves of a pair come from one cell
  CHECK(d.cells[0][8] == 8);
  CHECK(schedule_csv(d.schedule) == dualpipev);

  // 1F1B with whole backwards, and a Megatron-interleaved schedule: stage s on rank s % P.
  const ScheduleFile one = parse_schedule_csv("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n", "1f1b.csv");
  CHECK(one.schedule.layout == Layout{2, 1});
  CHECK(one.schedule.actions == one_f_one_b_order(2, 2).actions);
  const ScheduleFile inter = parse_schedule_csv(schedule_csv(make_schedule(ScheduleKind::interleaved, 2, 4, 2)), "i.csv");
  CHECK(inter.schedule.layout == Layout{2, 2, Placement::interleaved});
  // Blank lines at the end, spaces around cells and quoted cells are what other CSV writers make.
  CHECK(parse_schedule_csv(" 0F0 , \"0B0\" \n\n\n", "spaces.csv").schedule.actions ==
        std::vector<std::vector<Action>>{{F(0), B(0)}});
}

TEST_CASE("schedule file: malformed files name the file, the row and the cell", "[pipeline]") {
  const std::string ok = "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n";
  REQUIRE(file_error(ok) == "(no error)");
  // Rank 1 may forward micro-batch 1 before 0: both arrive in lock-step exchanges before it needs them.
  REQUIRE(file_error("0F0,0F1,0B0,0B1\n1F1,1B1,1F0,1B0\n") == "(no error)");
  // Cells that are not actions.
  CHECK_THAT(file_error("0F0,0X0,0B0\n"),
             Contains("schedule file 'f.csv', row 1 (rank 0), cell 2 ('0X0'): unknown action 'X'"));
  CHECK_THAT(file_error("0F0,F0\n"), Contains("row 1 (rank 0), cell 2 ('F0'): no stage index"));
  CHECK_THAT(file_error("0F0,0B\n"), Contains("cell 2 ('0B'): no micro-batch index"));
  CHECK_THAT(file_error("0F0x\n"), Contains("cell 1 ('0F0x'): unexpected 'x'"));
  CHECK_THAT(file_error("0F0,0B0\n1F0,1SEND_F0\n"),
             Contains("row 2 (rank 1), cell 2 ('1SEND_F0'): SEND_F is a message (PyTorch's compute_comms format)"));
  CHECK_THAT(file_error("0UNSHARD,0F0,0B0\n"), Contains("cell 1 ('0UNSHARD'): UNSHARD is FSDP"));
  CHECK_THAT(file_error("0F0,(0B0;0F1)OVERLAP_F_B,0B1\n"),
             Contains("cell 2 ('(0B0;0F1)OVERLAP_F_B'): an overlapped pair is a forward, then a backward"));
  CHECK_THAT(file_error("0F0,(0F1;0B0)OVERLAP,0B1\n"), Contains("cell 2 ('(0F1;0B0)OVERLAP'): expected an overlapped pair"));
  CHECK_THAT(file_error("0F0,(0F1;(0B0;0F1)OVERLAP_F_B)OVERLAP_F_B\n"), Contains("cell 2"));
  CHECK_THAT(file_error("0F0,(;0B0)OVERLAP_F_B\n"), Contains("cell 2 ('(;0B0)OVERLAP_F_B'): an empty action"));
  CHECK_THAT(file_error("0REDUCE_GRAD,0F0,0B0\n"), Contains("format=\"compute_only\""));
  CHECK_THAT(file_error("0F99999999\n"), Contains("micro-batch 99999999 is too large (at most 1048576)"));
  // Where the stages live.
  CHECK_THAT(file_error("0F0,1F0,0B0,1B0\n1F1\n"),
             Contains("row 2 (rank 1), cell 1 ('1F1'): stage 1 is also on rank 0 (row 1, cell 2 '1F0'); a stage "
                      "lives on one rank"));
  CHECK_THAT(file_error("0F0,0B0\n2F0,2B0\n"), Contains("stage 1 appears in no row"));
  CHECK_THAT(file_error("0F0,0B0,2F0,2B0\n1F0,1B0\n"),
             Contains("3 stages on 2 ranks (rows); every rank must hold the same number of stages (rank 0: 0 2; "
                      "rank 1: 1)"));
  CHECK_THAT(file_error("0F0,1F0,1B0,0B0\n2F0,3F0,3B0,2B0\n"),
             Contains("the rows put the stages on the ranks as rank 0: 0 1; rank 1: 2 3 — neither the interleaved "
                      "placement"));
  CHECK_THAT(file_error("0F0,0B0\n\n1F0,1B0\n"), Contains("row 2 (rank 1): no actions"));
  CHECK_THAT(file_error("\n\n"), Contains("schedule file 'f.csv': no rows"));
  // Missing and repeated work.
  CHECK_THAT(file_error("0F0,0F1,0B0,0B1\n1F0,1B0,1B1\n"),
             Contains("schedule file 'f.csv', row 2 (rank 1): never runs F of micro-batch 1 on stage 1 (micro-batches "
                      "0..1: the file's largest is 1)"));
  CHECK_THAT(file_error("0F0,0F1,0B0\n1F0,1B0,1F1,1B1\n"), Contains("row 1 (rank 0): never runs B (or I and W) of micro-batch 1"));
  CHECK_THAT(file_error("0F0,0F0,0B0\n"), Contains("runs F of micro-batch 0 on stage 0 twice, in cells 1 ('0F0') and 2 ('0F0')"));
  CHECK_THAT(file_error("0F0,0I0\n"), Contains("runs I of micro-batch 0 on stage 0 in cell 2 ('0I0') but never its W"));
  CHECK_THAT(file_error("0F0,0B0,0W0\n"), Contains("runs W of micro-batch 0 on stage 0 in cell 3 ('0W0') after a whole B"));
  CHECK_THAT(file_error("0F0,0B0,0I0,0W0\n"), Contains("runs the backward of micro-batch 0 on stage 0 more than once"));
  // Orders that can never finish: an action before its input, and two ranks waiting for each other.
  CHECK_THAT(file_error("0F0,0W0,0I0\n"),
             Contains("schedule file 'f.csv' (P=1, M=1, V=1) can never finish") &&
                 Contains("row 1 (rank 0), cell 2 ('0W0') waits for I of micro-batch 0 on stage 0 (rank 0)"));
  const std::string cycle = file_error("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n");
  CHECK_THAT(cycle, Contains("can never finish"));
  CHECK_THAT(cycle, Contains("row 1 (rank 0), cell 2 ('0B0') waits for B or I of micro-batch 0 on stage 1 (rank 1)"));
  CHECK_THAT(cycle, Contains("row 2 (rank 1), cell 1 ('1F1') waits for F of micro-batch 1 on stage 0 (rank 0)"));
}

TEST_CASE("brigade simulate --schedule-file and --write-schedule", "[pipeline][cli]") {
  auto run = [](const std::vector<std::string>& args, std::string* err_text = nullptr) {
    return test::run_cli(brigade::simulate_cli::simulate_command, args, err_text);
  };
  test::TempDir dir;
  const std::string path = dir.file("zbv.csv");
  {
    const auto [status, text] = run({"--schedule", "zb-v", "--stages", "4", "--microbatches", "8", "--write-schedule", path});
    INFO(text);
    REQUIRE(status == 0);
    CHECK_THAT(text, Contains("schedule written to " + path + " (PyTorch's CSV format)"));
    CHECK(dir.entries() == std::vector<std::string>{"zbv.csv"});
    std::ifstream in(path, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    CHECK(bytes.str() == schedule_csv(make_schedule(ScheduleKind::zb_v, 4, 8)));
  }
  {
    // Read back: the same schedule, so the same report (P, M and V from the file).
    const auto [status, text] = run({"--schedule-file", path});
    INFO(text);
    REQUIRE(status == 0);
    CHECK_THAT(text, Contains("schedule: file " + path + ", 4 ranks, 8 micro-batches, 2 chunks per rank (8 stages)"));
    CHECK_THAT(text, Contains("bubble fraction: 0.0588\n"));
    CHECK_THAT(text, Contains("peak stashed activations per rank: 8 8 8 8\n"));
  }
  std::string err;
  CHECK(run({"--schedule-file", path, "--stages", "4"}, &err).first == 2);
  CHECK_THAT(err, Contains("--schedule-file: the file gives the schedule, its ranks, micro-batches and chunks; drop "
                           "--stages"));
  CHECK(run({"--schedule-file=" + path, "--schedule=1f1b"}, &err).first == 2);
  CHECK_THAT(err, Contains("drop --schedule"));
  const std::string broken = dir.file("broken.csv");
  {
    std::ofstream out(broken);
    out << "0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n";  // rank 0 waits for G0, rank 1 for A1: a cycle
  }
  CHECK(run({"--schedule-file", broken}, &err).first == 1);
  CHECK_THAT(err, Contains("brigade simulate: schedule file '" + broken + "' (P=2, M=2, V=1) can never finish"));
  CHECK(run({"--schedule-file", dir.file("none.csv")}, &err).first == 1);
  CHECK_THAT(err, Contains("cannot open it"));
  CHECK(run({"--help"}).second.find("--schedule-file FILE") != std::string::npos);
}
