#!/usr/bin/env bash
# Builds the fuzzers (libFuzzer + ASan + UBSan, clang) in build-fuzz and runs each one. The
# targets are the files fuzz/fuzz_*.cpp (fuzz/CMakeLists.txt reads the same folder); they link
# the layer libraries, instrumented (KVRANK_FUZZ in the top-level CMakeLists.txt). As many run at
# once as the machine has cores.
#   scripts/fuzz.sh [SECONDS [BUILD]]   seconds per target (default 30); BUILD: a build folder
#                                       configured with -DKVRANK_FUZZ=ON (clang) to reuse, as the
#                                       sanitizer step of scripts/test.sh does (default build-fuzz)
# Seeds come from fuzz/corpus/<target>/ (read only); new inputs go to build-fuzz/corpus/<target>/,
# crash reproducers to build-fuzz/crash-*. Exits non-zero when a fuzzer finds a bug.
set -euo pipefail

seconds=${1:-30}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${2:-$root/build-fuzz}")
targets=()
for source in "$root"/fuzz/fuzz_*.cpp; do
  name=${source##*/}
  targets+=("${name%.cpp}")
done

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ -DKVRANK_FUZZ=ON -DKVRANK_BUILD_TESTS=OFF \
    -DKVRANK_USE_OPENBLAS=OFF -DKVRANK_USE_OPENMP=OFF -DKVRANK_USE_DNNL=OFF >/dev/null
elif ! grep -q '^KVRANK_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
  echo "scripts/fuzz.sh: $build is not configured with -DKVRANK_FUZZ=ON" >&2
  exit 2
fi
ninja -C "$build" -j2 "${targets[@]}"

# One fuzzer is one process on one core: they run nproc at a time, each for SECONDS, with its
# output kept apart and its summary printed when its batch ends.
at_once=$(nproc)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
fuzz_target() {
  local target=$1
  mkdir -p "$build/corpus/$target"
  "$build/fuzz/$target" "$build/corpus/$target" "$root/fuzz/corpus/$target" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -artifact_prefix="$build/crash-$target-" -print_final_stats=1 >"$logs/$target.log" 2>&1
}
failed=()
for ((first = 0; first < ${#targets[@]}; first += at_once)); do
  batch=("${targets[@]:first:at_once}")
  pids=()
  for target in "${batch[@]}"; do
    fuzz_target "$target" &
    pids+=($!)
  done
  for i in "${!batch[@]}"; do
    status=0
    wait "${pids[$i]}" || status=$?
    echo "== ${batch[$i]}: ${seconds}s"
    tail -n 12 "$logs/${batch[$i]}.log"
    ((status == 0)) || failed+=("${batch[$i]}")
  done
done
if ((${#failed[@]} > 0)); then
  echo "scripts/fuzz.sh: found a bug: ${failed[*]} (reproducers: $build/crash-*)" >&2
  exit 1
fi
