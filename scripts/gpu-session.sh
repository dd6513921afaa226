#!/usr/bin/env bash
# Everything the GPU checks, in stages run on a GPU machine, each bounded by a timeout (9 minutes,
# so that one stage fits a remote command with a 10-minute limit); logs and JSON go to $OUT.
# docs/cuda.md ("On a GPU machine") describes it.
#
#   bash scripts/gpu-session.sh build test train       # build, every GPU suite, the main job
#   bash scripts/gpu-session.sh nccl build launch      # NCCL >= 2.30.3 (built if need be), 4 NCCL ranks
#   bash scripts/gpu-session.sh memcheck-ops           # one GPU suite under compute-sanitizer memcheck
#   bash scripts/gpu-session.sh memcheck-core memcheck-comm memcheck-train racecheck
#   bash scripts/gpu-session.sh bench                  # brigade bench kernels + bench pipeline
#   bash scripts/gpu-session.sh nccl build rank-memory # 4 NCCL ranks on one GPU, a quarter each, train a GPT one device cannot
#
# Where building on the GPU machine takes too long, build here, pack the binaries, and run them there
# in one call:
#   bash scripts/gpu-session.sh pack                   # HERE: build/ -> .gpu-bin/ (binaries + Gloo's libraries),
#                                                      #   and shared/'s prebuilt NCCL 2.30.7 -> .gpu-nccl/
#   BUILD_DIR=.gpu-bin bash scripts/gpu-session.sh prebuilt quick step bench   # THERE, carry .gpu-bin and .gpu-nccl
#
# Stages: nccl, build, test, memcheck-{core,ops,comm,train}, racecheck, train, launch, rank-memory, bench,
# and for binaries built elsewhere pack (here), prebuilt, quick, step (in the order given);
# each is sized to fit one 10-minute command. A fresh machine needs `build` first in every command
# (it is quick when the build directory is still there). Logs and JSON go to $OUT (default
# gpu-out/), a few files per stage, and a summary is printed last.
#
# The GPU machine is not a Debian box with packages: there is no Catch2 and no Gloo, and cuDNN and
# NCCL may live in Python wheels. So this script
#   - takes catch.hpp from $CATCH2_DIR/catch2/catch.hpp (default .gpu-carry, an ignored folder the
#     session carries over: mkdir -p .gpu-carry/catch2 && cp /usr/include/catch2/catch.hpp .gpu-carry/catch2/),
#   - builds with Gloo disabled,
#   - finds cuDNN and NCCL wherever they are, gives meson a prefix with lib/ and include/ links to
#     them (-Dextra_cuda_dirs), and puts their directories on LD_LIBRARY_PATH.
# The lent machine gets the files without .git: pass the commit the results belong to,
#   BRIGADE_GIT_COMMIT=$(git describe --always --dirty --abbrev=12) bash scripts/gpu-session.sh bench
# (the bench JSON records it; without it, the commit reads "unknown").
# It changes nothing on the GPU itself: no clocks, modes or resets.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
build_dir=${BUILD_DIR:-build-gpu}
carry=${CATCH2_DIR:-$PWD/.gpu-carry}
summary=()
if [[ -z ${BRIGADE_GIT_COMMIT:-} ]] && git rev-parse --git-dir >/dev/null 2>&1; then
  export BRIGADE_GIT_COMMIT=$(git describe --always --dirty --abbrev=12)
fi
note() { summary+=("$*"); echo "== $*"; }

# ---- where cuDNN and NCCL are ----------------------------------------------------------------------
search_roots="/usr/local /usr/lib /usr/include /opt"
if command -v python3 >/dev/null; then
  search_roots+=" $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)"
fi
# Outside the source tree: meson refuses an include directory inside it given as an absolute path.
shim=${TMPDIR:-/tmp}/brigade-gpu-shim
nccl_built=$PWD/.gpu-nccl  # NCCL built from carried source by the `nccl` stage (kept while the machine is)
rm -rf "$shim" && mkdir -p "$shim/lib" "$shim/include"
lib_dirs=()

# NCCL's version as a code (2.30.7 -> 23007), from the library's own banner: a header found
# elsewhere may belong to another copy.
nccl_code() {
  grep -aoE -m1 'NCCL version [0-9]+\.[0-9]+\.[0-9]+' "$1" 2>/dev/null | head -1 |
    awk '{ split($3, v, "."); print v[1] * 10000 + v[2] * 100 + v[3] }'
}
# The nccl.h of a library: beside it (lib/ and include/ siblings: wheels, the toolkit, our build) or
# the system's (Debian: /usr/lib/<triplet>/ and /usr/include/).
nccl_header_of() {
  local dir
  dir=$(dirname "$1")
  for h in "$dir/../include/nccl.h" /usr/include/nccl.h /usr/local/include/nccl.h; do
    [[ -f $h ]] && { echo "$h"; return; }
  done
}
nccl_name() { echo "$(($1 / 10000)).$(($1 / 100 % 100)).$(($1 % 100))"; }

# cuDNN: the first found. NCCL: the newest of every copy (system, each Python wheel, our own build),
# with the nccl.h that sits beside it (lib/ and include/ are siblings in every layout).
found=$(find $search_roots \( -name "libcudnn.so" -o -name "libcudnn.so.[0-9]*" \) 2>/dev/null | sort | head -1)
if [[ -n $found ]]; then
  ln -sf "$found" "$shim/lib/libcudnn.so"
  lib_dirs+=("$(dirname "$found")")
  header=$(find $search_roots -name cudnn.h 2>/dev/null | head -1)
  # cudnn.h includes its siblings (cudnn_version.h, cudnn_ops.h, ...): link them all.
  [[ -n $header ]] && for h in "$(dirname "$header")"/cudnn*.h; do ln -sf "$h" "$shim/include/"; done
fi
nccl_lib="" nccl_version=0
for lib in $(find $search_roots "$nccl_built" -name "libnccl.so*" ! -name "*.a" 2>/dev/null); do
  code=$(nccl_code "$lib")
  if [[ -n $code && -n $(nccl_header_of "$lib") ]] && ((code > nccl_version)); then
    nccl_lib=$lib nccl_version=$code
  fi
done
if [[ -n $nccl_lib ]]; then
  ln -sf "$nccl_lib" "$shim/lib/libnccl.so"
  ln -sf "$(nccl_header_of "$nccl_lib")" "$shim/include/"
  lib_dirs=("$(dirname "$nccl_lib")" "${lib_dirs[@]}")
fi
# In this order: the chosen NCCL first, so an older libnccl beside cuDNN or the toolkit never wins.
LD_LIBRARY_PATH="$(IFS=:; echo "${lib_dirs[*]}"):/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
# Several ranks on one GPU (the 4-rank pipeline on one lent GPU) need NCCL >= 2.30.3 and this.
export NCCL_MULTI_RANK_GPU_ENABLE=1
nccl_line() {
  if [[ -z $nccl_lib ]]; then echo "nccl: none found"; else echo "nccl: $(nccl_name "$nccl_version") ($nccl_lib)"; fi
}
echo "$(nccl_line)"

# NCCL from source, for sm_90 alone, when the newest copy here cannot put several ranks on one GPU.
# The source comes with the session (no network here): an ignored file, made where the repository
# is, e.g. git -C <nccl clone> archive v2.30.7-1 src makefiles Makefile LICENSE.txt | gzip > .gpu-carry/nccl-src.tar.gz
stage_nccl() {
  if ((nccl_version >= 23003)); then
    note "nccl: $(nccl_name "$nccl_version") already allows several ranks per GPU"
    return 0
  fi
  if [[ ! -f $carry/nccl-src.tar.gz ]]; then
    note "nccl: $(nccl_line), older than 2.30.3, and no $carry/nccl-src.tar.gz to build from (see stage_nccl)"
    return 1
  fi
  local src=$nccl_built-src
  rm -rf "$src" "$src-cuda-include" "$nccl_built" && mkdir -p "$src"
  # Only the kernels comm/nccl.cpp launches (send/recv, broadcast, all-reduce sum, and average = a
  # pre-multiplied sum for floats): 24 generated device files instead of 131, which is what makes
  # the build fit one 10-minute command. BRIGADE_NCCL_ONLY_FUNCS=all builds everything.
  local only=${BRIGADE_NCCL_ONLY_FUNCS-"SendRecv|Broadcast * *|AllReduce Sum * * *|AllReduce PreMulSum * * *"}
  [[ $only == all ]] && only=""
  # The toolkit's include directory without any NCCL headers in it: where a toolkit ships an older
  # NCCL's (this development machine's has 2.28's), they shadow the source's own nccl_device/ and
  # the build fails (NCCL_GIN_MAX_CONNECTIONS undeclared) — seen here, on the CPU machine.
  local cuda_inc=$src-cuda-include f
  mkdir -p "$cuda_inc"
  for f in "${CUDA_HOME:-/usr/local/cuda}"/include/*; do
    [[ $(basename "$f") == nccl* ]] || ln -sf "$f" "$cuda_inc/"
  done
  tar -xzf "$carry/nccl-src.tar.gz" -C "$src" &&
    timeout 540 make -C "$src" -j "$(nproc)" src.build BUILDDIR="$nccl_built" ONLY_FUNCS="$only" CUDA_INC="$cuda_inc" \
      NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$OUT/nccl-build.log" 2>&1
  local rc=$?
  local lib=$nccl_built/lib/libnccl.so
  if ((rc != 0)) || [[ ! -f $lib ]]; then
    note "nccl: building from source FAILED (exit $rc, see nccl-build.log)"
    return 1
  fi
  # Use it from here on: relink the shim, and rebuild so everything loads this one.
  nccl_lib=$lib nccl_version=$(nccl_code "$lib")
  ln -sf "$nccl_lib" "$shim/lib/libnccl.so"
  ln -sf "$nccl_built/include/nccl.h" "$shim/include/"
  export LD_LIBRARY_PATH="$nccl_built/lib:$LD_LIBRARY_PATH"
  note "nccl: built $(nccl_name "$nccl_version") for sm_90 from source"
}

stage_build() {
  if [[ ! -f $carry/catch2/catch.hpp ]]; then
    note "build: FAILED — no $carry/catch2/catch.hpp (carry it; see the top of this script)"
    return 1
  fi
  # A copy of catch.hpp outside the source tree, for the same reason as the shim.
  local catch2=${TMPDIR:-/tmp}/brigade-catch2
  mkdir -p "$catch2/catch2" && cp "$carry/catch2/catch.hpp" "$catch2/catch2/"
  local args=(-Dgloo=disabled -Dcatch2_include="$catch2" -Dextra_cuda_dirs="$shim")
  if [[ -f $build_dir/meson-private/coredata.dat ]]; then
    meson setup --reconfigure "$build_dir" "${args[@]}" >"$OUT/build.log" 2>&1
  else
    meson setup "$build_dir" "${args[@]}" >"$OUT/build.log" 2>&1
  fi || { note "build: meson setup FAILED (see build.log)"; return 1; }
  # NINJA_TARGETS narrows the build to what the GPU stages run (libbrigade.so tools/brigade
  # tests/test_gpu_ops ...): a remote command is short, and the CPU suites are proven elsewhere.
  # shellcheck disable=SC2086
  if ninja -C "$build_dir" ${NINJA_TARGETS:-} >>"$OUT/build.log" 2>&1; then
    note "build: ok ($(grep -E '^ +(cuda|cudnn|nccl) +:' "$OUT/build.log" | tr -s ' ' | tr '\n' ';'))"
  else
    note "build: ninja FAILED (see build.log)"
    return 1
  fi
}

stage_test() {
  # Every GPU suite, in parallel, each capped below the device's 10-minute command limit (-t 0.8 of
  # meson's 600 s), stopping a suite after 10 failures (a sticky CUDA error fails everything after
  # it; the first ones are the story). A missing GPU fails here instead of skipping.
  # --no-rebuild: the build stage built what these need (and only that, under NINJA_TARGETS).
  # TEST_TIMEOUT_MULTIPLIER shortens the cap where less time is left.
  BRIGADE_REQUIRE_GPU=1 meson test -C "$build_dir" --suite gpu --no-rebuild --print-errorlogs \
    -t "${TEST_TIMEOUT_MULTIPLIER:-0.8}" --test-args '--abortx 10' \
    >"$OUT/gpu-tests.log" 2>&1
  local rc=$?
  note "test: exit $rc; $(grep -E '^(Ok|Fail|Skipped|Timeout):' "$OUT/gpu-tests.log" | tr -s ' ' | tr '\n' ' ')"
  cp "$build_dir/meson-logs/testlog.txt" "$OUT/gpu-testlog.txt" 2>/dev/null
}

# memcheck on one GPU suite (core, ops, comm or train), as its own stage: the instrumented kernels
# and one cudaMalloc per tensor make these slow, so each gets a command of its own. "~[oom]" skips the
# test that asks for 16 TiB on purpose — memcheck reports the failed cudaMalloc as an error.
stage_memcheck() {
  local suite=$1 sanitizer api_errors=()
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # NCCL probes which of its kernels exist for this GPU (cudaFuncGetAttributes in
  # ncclInitKernelsForDevice) and ignores cudaErrorNoKernelImageForDevice: two reports per
  # communicator, none of them ours (seen with 2.28.9 on an H200). brigade checks every CUDA return
  # code itself, so for the comm suite memcheck reports memory errors only.
  [[ $suite == comm ]] && api_errors=(--report-api-errors no)
  BRIGADE_REQUIRE_GPU=1 BRIGADE_TEST_EXACT_ALLOCATIONS=1 timeout 540 "$sanitizer" --tool memcheck "${api_errors[@]}" --error-exitcode 1 \
    "$build_dir/tests/test_gpu_$suite" "~[oom]" --abortx 10 >"$OUT/memcheck-$suite.log" 2>&1
  note "memcheck $suite: exit $? ($(grep -m1 -E 'ERROR SUMMARY' "$OUT/memcheck-$suite.log"))"
}

# racecheck on the kernels that share memory between threads.
stage_racecheck() {
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  BRIGADE_REQUIRE_GPU=1 timeout 540 "$sanitizer" --tool racecheck --error-exitcode 1 "$build_dir/tests/test_gpu_ops" \
    "[matmul],[linear],[conv2d],[softmax],[log_softmax],[layer_norm],[rms_norm],[sum],[mean],[max],[argmax],[cross_entropy],[embedding],[adamw]" \
    >"$OUT/racecheck.log" 2>&1
  note "racecheck: exit $? ($(grep -m1 -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/racecheck.log"))"
}

stage_train() {
  {
    echo "\$ brigade train   (the main job: on a GPU, 4 pipeline stages on streams, bf16 compute)"
    "$build_dir/tools/brigade" train --trace none --svg none
    echo "exit $?"
    echo "\$ brigade train --stages 0   (one device)"
    "$build_dir/tools/brigade" train --stages 0 --trace none --svg none
    echo "exit $?"
  } >"$OUT/train.log" 2>&1
  note "train: $(grep -E '^(exit|held-out|bubble)' "$OUT/train.log" | tr '\n' ' ')"
}

# The 4-rank NCCL pipeline: `brigade launch -n 4 -- brigade train --device cuda --stages 4` with
# every schedule, against the CPU run (tests/gpu/test_gpu_launch.cpp). On one GPU it needs the
# `nccl` stage's NCCL (>= 2.30.3).
stage_launch() {
  BRIGADE_REQUIRE_GPU=1 timeout 540 "$build_dir/tests/test_gpu_launch" >"$OUT/launch.log" 2>&1
  local rc=$?
  # The test passes vacuously when four ranks cannot share the GPUs here: say so.
  if grep -q "nothing to run" "$OUT/launch.log"; then
    note "launch: NOT RUN — $(nccl_line), fewer than 4 GPUs (run the nccl stage first)"
    return 1
  fi
  note "launch (4 NCCL ranks, every schedule): exit $rc ($(nccl_line); $(tail -2 "$OUT/launch.log" | tr -s '\n' ' '))"
}

# rank-memory: a GPT that one device cannot train within a quarter of the GPU's memory, trained by
# four pipeline ranks (processes, NCCL) sharing the GPU with a quarter each (issue 31). 40 blocks,
# 2560 wide: 3.15B parameters, ~16 B each for the f32 weights, gradients and AdamW's moments (50 GB,
# more than a quarter of an 80 GB H100 or a 141 GB H200); a stage holds ~11 blocks (~14 GB with the
# bf16 copies), under a quarter of either. The one-device run must fail with the out-of-memory
# message; the launch must train 2 steps and print each rank's predicted and measured device peak.
# Each rank's peak (its own allocations, core/memory_account.h) comes back in the --metrics file;
# rank-memory.json and rank-memory.md are ready for bench/results/ (<gpu>-rank-memory-<date>-<commit>).
# Four ranks on one GPU need NCCL >= 2.30.3 (the nccl stage, or the carried 2.30.7 with binaries built elsewhere:
# BUILD_DIR=.gpu-bin ... prebuilt rank-memory). RANK_MEMORY_MODEL and RANK_MEMORY_LIMIT replace the
# model and the limit: on the emulator (four emulated GPUs, one per rank: its NCCL is 2.28's),
#   OUT=/tmp/rm BUILD_DIR=build-emu BRIGADE_EMULATED_GPUS=4 RANK_MEMORY_MODEL="--layers 4 --embd 256 --heads 4" \
#     RANK_MEMORY_LIMIT=64MiB bash scripts/gpu-session.sh rank-memory
stage_rank_memory() {
  local limit=${RANK_MEMORY_LIMIT:-0.25} cap=${RANK_MEMORY_TIMEOUT:-270} brigade=$build_dir/tools/brigade
  # shellcheck disable=SC2206
  local model=(${RANK_MEMORY_MODEL:---layers 40 --embd 2560 --heads 20})
  local common=(--device cuda --precision bf16 --digits 8 --batch 8 --microbatches 4 --steps 2 --warmup 1
                --log-every 1 --eval 4 --trace none --svg none --threads 4 --memory-limit "$limit" "${model[@]}")
  local log=$OUT/rank-memory.log metrics=$OUT/rank-memory-metrics.jsonl
  rm -f "$metrics"
  {
    echo "\$ brigade train --stages 0 ${common[*]}   (one device: must run out of memory)"
    timeout "$cap" "$brigade" train --stages 0 "${common[@]}"
    echo "exit $?"
  } >"$OUT/rank-memory-one.log" 2>&1
  local one_rc oom
  one_rc=$(tail -1 "$OUT/rank-memory-one.log" | awk '{ print $2 }')
  oom=$(grep -m1 -o "out of memory on cuda:[0-9]*: " "$OUT/rank-memory-one.log")
  {
    echo "\$ brigade launch -n 4 -- brigade train --stages 4 ${common[*]} --metrics $metrics"
    timeout "$cap" "$brigade" launch -n 4 -- "$brigade" train --stages 4 "${common[@]}" --metrics "$metrics" --curves none
    echo "exit $?"
  } >"$log" 2>&1
  local launch_rc
  launch_rc=$(tail -1 "$log" | awk '{ print $2 }')
  local summary
  summary=$(python3 bench/rank_memory_report.py --one "$OUT/rank-memory-one.log" --four "$log" --metrics "$metrics" \
    --limit "$limit" --out "$OUT/rank-memory")
  local verdict=FAILED
  [[ $one_rc != 0 && -n $oom && $launch_rc == 0 ]] && verdict=ok
  note "rank-memory: $verdict; $summary ($(nccl_line))"
  [[ $verdict == ok ]]
}

stage_bench() {
  # --device cuda: where the GPU is missing, say so rather than measure the CPU instead.
  # BENCH_QUICK=1 (little time): the --quick sizes and repeats. Each run is bounded.
  local quick=() cap=${BENCH_TIMEOUT:-540}
  [[ -n ${BENCH_QUICK:-} ]] && quick=(--quick)
  timeout "$cap" "$build_dir/tools/brigade" bench kernels --device cuda "${quick[@]}" --json "$OUT/bench-kernels.json" >"$OUT/bench.log" 2>&1
  local kernels=$?
  # BENCH_PIPELINE_LOCAL=0 leaves out the rank-threads-on-local-communicators run (kept from an
  # earlier version) where there is no time for it.
  local pipeline="not run"
  if [[ ${BENCH_PIPELINE_LOCAL:-1} != 0 ]]; then
    timeout "$cap" "$build_dir/tools/brigade" bench pipeline "${quick[@]}" --json "$OUT/bench-pipeline.json" >>"$OUT/bench.log" 2>&1
    pipeline="exit $?"
  fi
  # Data parallelism over NCCL (2 replicas x 2 stages = 4 ranks, several per GPU: NCCL >= 2.30.3):
  # how much step time starting the all-reduces during the backward saves.
  local dp="not run: $(nccl_line), older than 2.30.3"
  local nccl=$dp
  if ((nccl_version >= 23003)); then
    # Four NCCL ranks, a stage each, every schedule (the Vs included): the pipeline over real NCCL.
    timeout "$cap" "$build_dir/tools/brigade" bench pipeline --transport nccl --stages 4 --microbatches 8 \
      --steps 5 --warmup 2 --json "$OUT/bench-pipeline-nccl.json" >>"$OUT/bench.log" 2>&1
    nccl="exit $? ($(nccl_line))"
    timeout "$cap" "$build_dir/tools/brigade" bench pipeline --transport nccl --replicas 2 --stages 2 --microbatches 8 \
      --schedules 1f1b,interleaved "${quick[@]}" --json "$OUT/bench-pipeline-dp.json" >>"$OUT/bench.log" 2>&1
    dp="exit $? ($(nccl_line))"
  fi
  note "bench: kernels exit $kernels, pipeline (local) $pipeline, pipeline over NCCL $nccl, data-parallel over NCCL $dp"
  # The tuned GEMM's pick per shape (its first sight of the hand-written GEMMs' speed on this GPU),
  # and every candidate it refused because its output disagreed with cuBLAS's.
  while IFS= read -r line; do note "bench: $line"; done < <(grep -e 'tuned picked' -e 'matmul (tuned): not using' "$OUT/bench.log" | sed -e 's/^ *//' -e '/tuned picked/s/ for cuda:.*//')
}

# ---- binaries built here, run there ---------------------------------------------------------------
# pack (run HERE, after `ninja -C build`): the library, the CLI and the GPU test binaries, with the
# non-CUDA libraries they load that the GPU machine's image lacks (Gloo and what Gloo loads), into
# .gpu-bin/ in the build directory's layout (the binaries find libbrigade.so through $ORIGIN/..).
stage_pack() {
  local from=${PACK_FROM:-build} to=.gpu-bin f
  rm -rf "$to" && mkdir -p "$to/tools" "$to/tests" "$to/lib"
  cp "$from/libbrigade.so" "$to/" && cp "$from/tools/brigade" "$to/tools/" || { note "pack: FAILED (no $from/libbrigade.so or tools/brigade)"; return 1; }
  for f in "$from"/tests/test_gpu_*; do [[ -f $f && -x $f ]] && cp "$f" "$to/tests/"; done
  # Gloo and its dependencies: everything libbrigade.so loads from outside the CUDA toolkit and libc.
  ldd "$from/libbrigade.so" | awk '$3 ~ /^\// { print $1, $3 }' |
    grep -vE '^((libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.so|libcud|libcublas|libnccl)' |
    while read -r name path; do cp -L "$path" "$to/lib/$name"; done
  # The tests that run the CLI hold its absolute path on this machine; prebuilt puts a link there.
  echo "$PWD/$from" >"$to/built-from"
  # NCCL >= 2.30.3 for several ranks on one GPU: the prebuilt copy in shared/ (its README), into the
  # folder where this script looks for a built NCCL. The copy in shared/ holds its links as small
  # files naming their targets, so the links are made anew here.
  local prebuilt_nccl=${NCCL_PREBUILT:-../shared/gpu/nccl-2.30.7-sm90} carried="no NCCL carried"
  if [[ -d $prebuilt_nccl/lib ]]; then
    rm -rf "$nccl_built" && mkdir -p "$nccl_built/lib"
    cp -r "$prebuilt_nccl/include" "$nccl_built/" && chmod -R u+w "$nccl_built"
    f=$(ls "$prebuilt_nccl"/lib/libnccl.so.*.*.* | head -1)
    cp "$f" "$nccl_built/lib/"
    ln -s "$(basename "$f")" "$nccl_built/lib/libnccl.so.2" && ln -s libnccl.so.2 "$nccl_built/lib/libnccl.so"
    carried="NCCL $(basename "$f") in $nccl_built"
  fi
  note "pack: $(du -sh "$to" | cut -f1) in $to ($(ls "$to/lib" | tr '\n' ' ')); $carried; carry them: run(carry=[\"$to\", \"$(basename "$nccl_built")\"])"
}

# prebuilt (THERE): use the packed binaries. Every library they need and cannot find is looked for in
# the usual roots (the toolkit, the Python wheels: cuDNN and NCCL live there on the lent machines) and
# its folder put on LD_LIBRARY_PATH; what is still missing fails the stage, naming it.
stage_prebuilt() {
  [[ -f $build_dir/libbrigade.so ]] || { note "prebuilt: no $build_dir/libbrigade.so (BUILD_DIR=.gpu-bin, carry it)"; return 1; }
  export LD_LIBRARY_PATH="$PWD/$build_dir/lib:$LD_LIBRARY_PATH"
  # Tests that run the CLI find it at the build directory's path on the machine that built them.
  [[ -e build ]] || ln -s "$build_dir" build
  local built_from
  built_from=$(cat "$build_dir/built-from" 2>/dev/null)
  if [[ -n $built_from && ! -e $built_from ]]; then
    mkdir -p "$(dirname "$built_from")" && ln -s "$PWD/$build_dir" "$built_from"
  fi
  local missing name found previous=""
  # Until everything resolves, or a round finds nothing new (a library found can need others).
  while :; do
    missing=$(ldd "$build_dir/libbrigade.so" "$build_dir"/tools/brigade "$build_dir"/tests/* 2>/dev/null |
      awk '/not found/ { print $1 }' | sort -u)
    [[ -z $missing || $missing == "$previous" ]] && break
    previous=$missing
    for name in $missing; do
      found=$(find $search_roots /usr/local/cuda*/ -name "$name" 2>/dev/null | head -1)
      [[ -n $found ]] && export LD_LIBRARY_PATH="$(dirname "$found"):$LD_LIBRARY_PATH"
    done
  done
  if [[ -n $missing ]]; then
    note "prebuilt: FAILED — not found: $(echo $missing)"
    return 1
  fi
  note "prebuilt: every library found ($(ldd "$build_dir/libbrigade.so" | awk '/cudnn|nccl|cublas.so|cudart/ { print $3 }' | tr '\n' ' '))"
}

# quick (THERE): every GPU suite, the main job, and compute-sanitizer's memcheck and racecheck on the
# fused attention, all at once (16 cores, one GPU: correctness, not timing), each bounded by
# QUICK_TIMEOUT seconds. The binaries run directly: a packed folder has no meson build around it.
stage_quick() {
  local cap=${QUICK_TIMEOUT:-200} sanitizer pids=() names=() suite i rc failed=()
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  export BRIGADE_REQUIRE_GPU=1
  for suite in core ops comm train graphs gemm_tuner hopper_instructions; do
    [[ -x $build_dir/tests/test_gpu_$suite ]] || continue
    timeout "$cap" "$build_dir/tests/test_gpu_$suite" --abortx 10 >"$OUT/gpu-$suite.log" 2>&1 &
    pids+=($!) names+=("gpu_$suite")
  done
  # The 4-process NCCL launch (every schedule through the CLI) and memcheck on the NCCL suite, where
  # this NCCL can put several ranks on one GPU (the carried 2.30.7: see stage_nccl).
  if ((nccl_version >= 23003)) && [[ -x $build_dir/tests/test_gpu_launch ]]; then
    timeout "$cap" "$build_dir/tests/test_gpu_launch" >"$OUT/launch.log" 2>&1 &
    pids+=($!) names+=("launch")
    BRIGADE_TEST_EXACT_ALLOCATIONS=1 timeout "$cap" "$sanitizer" --tool memcheck --report-api-errors no --error-exitcode 1 \
      "$build_dir/tests/test_gpu_comm" "[nccl]~[pipeline]" --abortx 10 >"$OUT/memcheck-comm.log" 2>&1 &
    pids+=($!) names+=("memcheck-comm")
  fi
  # The job's status is train's, not the echo's.
  { timeout "$cap" "$build_dir/tools/brigade" train --trace none --svg none; rc=$?; echo "exit $rc"; exit $rc; } \
    >"$OUT/train.log" 2>&1 &
  pids+=($!) names+=("train")
  BRIGADE_TEST_EXACT_ALLOCATIONS=1 timeout "$cap" "$sanitizer" --tool memcheck --error-exitcode 1 \
    "$build_dir/tests/test_gpu_ops" "[attention],[matmul],[linear]" --abortx 10 >"$OUT/memcheck-attention.log" 2>&1 &
  pids+=($!) names+=("memcheck")
  timeout "$cap" "$sanitizer" --tool racecheck --error-exitcode 1 \
    "$build_dir/tests/test_gpu_ops" "[attention]" --abortx 10 >"$OUT/racecheck-attention.log" 2>&1 &
  pids+=($!) names+=("racecheck")
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; rc=$?
    ((rc == 0)) || failed+=("${names[$i]}:$rc")
  done
  local counts
  counts=$(grep -h -E '^(test cases|All tests passed)' "$OUT"/gpu-*.log | tr '\n' ';')
  note "quick: ${#pids[@]} runs, failed: ${failed[*]:-none} ($counts $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT"/*check-*.log | tr '\n' ' '))"
  ((${#failed[@]} == 0))
}

# step (THERE): a GPT-2 small training step (bf16 compute), brigade beside PyTorch eager and
# torch.compile (bench/compare_pytorch.py; the image's python3 has PyTorch).
stage_step() {
  timeout "${STEP_TIMEOUT:-240}" python3 bench/compare_pytorch.py --device cuda --precision bf16 --configs "${STEP_CONFIGS:-gpt2}" \
    --compile --rounds "${STEP_ROUNDS:-1}" --steps "${STEP_STEPS:-10}" --warmup "${STEP_WARMUP:-3}" --brigade "$build_dir/tools/brigade" --json "$OUT/step-gpu.json" >"$OUT/step.log" 2>&1
  note "step: exit $? ($(tail -1 "$OUT/step.log"))"
  # GPT-2's step with --matmul tuned (each GEMM shape measured once, the fastest exact one kept),
  # beside the default (cuBLAS) run above: what the hand-written GEMMs are worth on this GPU.
  timeout 120 "$build_dir/tools/brigade" bench step --device cuda --precision bf16 --layers 12 --embd 768 --heads 12 \
    --seq 1024 --batch 8 --vocab 50304 --steps 10 --warmup 3 --matmul tuned --json "$OUT/step-tuned-12x768.json" \
    >"$OUT/step-tuned-12x768.log" 2>&1
  note "step-tuned-12x768: exit $? ($(grep -E '^step time' "$OUT/step-tuned-12x768.log"))"
  # The same step (forward, backward, clipping and AdamW) replayed as one CUDA graph, beside eager, on GPT-2 and on a
  # small model (where launch overhead is a larger share); JSON per run.
  local model graph name
  for model in "--layers 12 --embd 768 --heads 12 --seq 1024 --batch 8 --vocab 50304" \
               "--layers 4 --embd 256 --heads 4 --seq 128 --batch 8 --vocab 50304"; do
    for graph in "" --cuda-graph; do
      name=step-graph$([[ -n $graph ]] && echo -on || echo -off)-$(echo "$model" | awk '{ print $2 "x" $4 }')
      # shellcheck disable=SC2086
      timeout 120 "$build_dir/tools/brigade" bench step --device cuda --precision bf16 $model --steps 30 --warmup 3 \
        $graph --json "$OUT/$name.json" >"$OUT/$name.log" 2>&1
      note "$name: exit $? ($(grep -E '^step time' "$OUT/$name.log"))"
    done
  done
}

# exec (THERE, after prebuilt): a one-off diagnosis, $GPU_EXEC run by bash with the libraries found
# and the carried NCCL first, bounded by EXEC_TIMEOUT seconds; its output in $OUT/exec.log.
stage_exec() {
  timeout "${EXEC_TIMEOUT:-120}" bash -c "${GPU_EXEC:?set GPU_EXEC to the commands to run}" >"$OUT/exec.log" 2>&1
  note "exec: exit $? ($(tail -1 "$OUT/exec.log"))"
}

if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,power.draw --format=csv,noheader 2>&1 | head -2 |
    sed 's/^/gpu: /'
else
  echo "gpu: no nvidia-smi here (the GPU suites will report SKIP)"
fi
stages=("$@")
((${#stages[@]} > 0)) || stages=(build test train)
for stage in "${stages[@]}"; do
  case $stage in
    nccl | build | test | racecheck | train | launch | bench | pack | prebuilt) "stage_$stage" || break ;;
    rank-memory) stage_rank_memory ;;
    quick | step | exec) "stage_$stage" ;;  # a failure here still leaves the later stages worth running
    memcheck-core | memcheck-ops | memcheck-comm | memcheck-train) stage_memcheck "${stage#memcheck-}" ;;
    *) echo "gpu-session: unknown stage '$stage' (nccl, build, test, memcheck-{core,ops,comm,train}, racecheck, train, launch, rank-memory, bench, pack, prebuilt, quick, step, exec)" >&2; exit 2 ;;
  esac
done
echo "---- summary"
printf '%s\n' "${summary[@]}"
