#!/usr/bin/env bash
# The CPU test suites under the compiler's sanitizers, in two builds of their own (docs/testing.md):
#
#   build-asan  AddressSanitizer + UndefinedBehaviorSanitizer: every CPU test
#   build-tsan  ThreadSanitizer: the threaded suites (comm*, pipeline*, train*)
#
#   bash scripts/sanitize.sh           # both; `asan` or `tsan` for one
#
# CPU only (-Dcuda=disabled: the CUDA runtime is not instrumented; the GPU suites are left out). Each build is
# configured on first use and then only rebuilt. Failures stop nothing: the end is one line per
# configuration, and the exit status is non-zero when a test failed in either. JOBS sets ninja's and
# meson test's parallelism (default: every core); TESTS="comm_gloo train" runs only those of the
# configuration's tests (and builds only what they need), to recheck a change. It takes an hour or more on two cores: run it before a
# release-sized change, not in CI, which runs the same tests unsanitized.
#
# Every instrumented process writes its reports to a file of its own, DIR/sanitizer-reports/<tool>.<pid>,
# not to its stderr: a test that runs processes expected to fail (a rank killed on purpose, its peers
# erroring out) checks their output for the error it wants and would pass over a report there. The
# end lists the reports, and any report fails the run, whichever process made it. The options keep
# what meson test would set (halt on the first error); ThreadSanitizer also exits 66 after a report.
# What ThreadSanitizer reports falsely is suppressed by scripts/tsan-suppressions.txt, each entry
# with why.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
jobs=${JOBS:-$(nproc)}
configs=("$@")
((${#configs[@]} > 0)) || configs=(asan tsan)

summary=()
for config in "${configs[@]}"; do
  case $config in
    asan) sanitize=address,undefined ;;
    tsan) sanitize=thread ;;
    *) echo "sanitize.sh: unknown configuration '$config' (asan or tsan)" >&2; exit 2 ;;
  esac
  dir=build-$config
  echo "== $config: $dir (-Db_sanitize=$sanitize)"
  if [[ ! -f $dir/meson-private/coredata.dat ]]; then
    # debugoptimized: reports name source lines, and asserts stay on.
    meson setup "$dir" -Dcuda=disabled -Db_sanitize="$sanitize" -Dbuildtype=debugoptimized ||
      { summary+=("$config: meson setup FAILED"); continue; }
  fi
  ninja -C "$dir" build.ninja >/dev/null || { summary+=("$config: meson reconfigure FAILED"); continue; }
  # The tests this build runs (the CPU ones; under ThreadSanitizer the threaded ones), and the
  # programs they need: only those are built.
  prefixes=$([[ $config == tsan ]] && echo "comm pipeline train")
  selection=$(meson introspect "$dir" --tests --targets | python3 -c '
import json, os, sys
info, build = json.load(sys.stdin), os.path.abspath(sys.argv[1])
prefixes = tuple(sys.argv[2:])
tests = [t for t in info["tests"] if "gpu" not in t["suite"] and not any(s.endswith(":gpu") for s in t["suite"])
         and (not prefixes or t["name"].startswith(prefixes))]
only = os.environ.get("TESTS", "").split()
tests = [t for t in tests if not only or t["name"] in only]
files = {t["id"]: os.path.relpath(t["filename"][0], build) for t in info["targets"]}
print(" ".join(sorted({files[d] for t in tests for d in t["depends"] if d in files})))
print(" ".join(t["name"] for t in tests))' "$dir" $prefixes) || { summary+=("$config: meson introspect FAILED"); continue; }
  { read -r programs; read -r names; } <<<"$selection"
  [[ -n $names ]] || { summary+=("$config: no test selected (TESTS='${TESTS:-}')"); continue; }
  # shellcheck disable=SC2086  # lists of words
  ninja -C "$dir" -j "$jobs" $programs || { summary+=("$config: build FAILED"); continue; }
  reports=$PWD/$dir/sanitizer-reports
  rm -rf "$reports" && mkdir -p "$reports"
  halt=halt_on_error=1:abort_on_error=1:print_summary=1
  export ASAN_OPTIONS="$halt:log_path=$reports/asan" UBSAN_OPTIONS="$halt:print_stacktrace=1:log_path=$reports/ubsan"
  export TSAN_OPTIONS="suppressions=$PWD/scripts/tsan-suppressions.txt:log_path=$reports/tsan"
  # scripts/test.sh runs them and counts; the GPU suites on the emulator are not this script's.
  # Instrumented programs run several times slower (ThreadSanitizer's 5-15x): each test's timeout
  # is multiplied by 4 (comm_gloo ran past its own under ThreadSanitizer).
  # Its output is shown and kept, to read its last line (a tee to /dev/stderr would truncate the
  # file when this script's output is redirected to one).
  output=$dir/meson-logs/sanitize-output.txt
  # shellcheck disable=SC2086
  BUILD_DIR=$dir BRIGADE_EMULATOR=0 MESON_TESTTHREADS=$jobs bash scripts/test.sh --no-rebuild -t 4 $names |
    tee "$output"
  result=$(tail -1 "$output")
  result=${result:-no summary (see $dir/meson-logs/testlog.txt)}
  found=$(find "$reports" -type f | sort)
  if [[ -n $found ]]; then
    echo "== $config: $(wc -l <<<"$found") processes reported (the reports' summaries; the full text in each file)"
    for file in $found; do echo "$file:" && grep -h '^SUMMARY:' "$file" | sort | uniq -c; done
    result+="; REPORTS in $(wc -l <<<"$found") processes ($reports)"
  fi
  summary+=("$config: $result")
done

echo "---- sanitizers"
printf '%s\n' "${summary[@]}"
# Every line must read "N passed, 0 failed", with no reports.
for line in "${summary[@]}"; do [[ $line == *" passed, 0 failed"* && $line != *REPORTS* ]] || exit 1; done
