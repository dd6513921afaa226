#!/usr/bin/env bash
# Runs the whole test suite (then the GPU suites on the CPU emulator) and ends with one summary line:
#   tests: N passed, N failed, N skipped
# Exits non-zero when a test failed (or the suite could not run). Extra arguments go to
# `meson test`, e.g. `bash scripts/test.sh core autograd` runs two suites.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
build_dir=${BUILD_DIR:-build}
log="$build_dir/meson-logs/testlog.json"

rm -f "$log"  # a stale log from an earlier run must not be counted
meson test -C "$build_dir" --print-errorlogs "$@"
status=$?

# The GPU suites again, on the CPU emulator (emulator/, docs/cuda.md): without a GPU they
# SKIP above, but here every hand-written kernel still runs and is compared with the CPU reference.
# Only on a full run, and only where the CUDA toolkit's headers are; BRIGADE_EMULATOR=0 leaves it out.
emu_dir=${EMU_BUILD_DIR:-build-emu}
emu_log="$emu_dir/meson-logs/testlog.json"
logs=("$log")
if [[ ${BRIGADE_EMULATOR:-1} != 0 && $# -eq 0 && -f /usr/local/cuda/include/cuda_runtime_api.h ]]; then
  echo "== the GPU suites on the CPU emulator ($emu_dir) =="
  rm -f "$emu_log"
  logs+=("$emu_log")
  if [[ ! -f "$emu_dir/meson-private/coredata.dat" ]]; then
    meson setup "$emu_dir" -Dgpu_emulator=true -Dgloo=disabled || status=1
  fi
  # Only what the gpu suite runs is built: the programs meson lists, and the CLI that gpu_launch
  # starts. Tests run only on a fresh build: a failed one leaves no log, which the summary counts as
  # a failure.
  ninja -C "$emu_dir" build.ninja >/dev/null || status=1  # a changed meson.build updates the test list first
  gpu_programs=$(meson introspect "$emu_dir" --tests 2>/dev/null | python3 -c '
import json, os, sys
root = os.path.abspath(sys.argv[1])
names = {os.path.relpath(t["cmd"][0], root) for t in json.load(sys.stdin) if "gpu" in t["suite"] or
         any(s.endswith(":gpu") for s in t["suite"])}
print(" ".join(sorted(n for n in names if not n.startswith(".."))))' "$emu_dir")
  if [[ -n "$gpu_programs" ]] && ninja -C "$emu_dir" $gpu_programs tools/brigade; then
    meson test -C "$emu_dir" --suite gpu --no-rebuild --print-errorlogs || status=1
  else
    status=1
  fi
fi

# testlog.json holds one JSON object per test; meson is Python, so python3 is always here.
# A failed test's name and the end of its output are printed again here, last, because a CI log is
# often read from its tail and meson's own report of the failure is hundreds of lines above.
summary=$(python3 - "${logs[@]}" <<'PY'
import json, os, sys
counts = {"passed": 0, "failed": 0, "skipped": 0}
kind = {"OK": "passed", "EXPECTEDFAIL": "passed", "SKIP": "skipped"}  # everything else is a failure
for path in sys.argv[1:]:
    if not os.path.exists(path):
        counts["failed"] += 1  # a suite that could not run at all
        print(f"FAILED: no test log at {path} (the suite did not build or run)", file=sys.stderr)
        continue
    for line in open(path):
        if not line.strip():
            continue
        test = json.loads(line)
        outcome = kind.get(test["result"], "failed")
        counts[outcome] += 1
        if outcome == "failed":
            output = "\n".join(s for s in (test.get("stdout"), test.get("stderr")) if s)
            tail = "\n".join(output.rstrip().splitlines()[-40:])
            print(f"FAILED: {test['name']} ({test['result']}, {test.get('duration', 0):.1f} s, "
                  f"exit {test.get('returncode')}); the end of its output:\n{tail}\n", file=sys.stderr)
print(counts["passed"], counts["failed"], counts["skipped"])
PY
) || summary="0 0 0"
read -r passed failed skipped <<<"$summary"
echo "tests: $passed passed, $failed failed, $skipped skipped"

if ((failed > 0)); then exit 1; fi
exit "$status"
