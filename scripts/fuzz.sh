#!/usr/bin/env bash
# Builds the reader fuzzers (libFuzzer + ASan + UBSan, clang) in build-fuzz and runs each one.
#   scripts/fuzz.sh [SECONDS]    seconds per target (default 30)
# Seeds come from fuzz/corpus/<target>/ (read only); new inputs go to build-fuzz/corpus/<target>/,
# crash reproducers to build-fuzz/crash-*. Exits non-zero when a fuzzer finds a bug.
set -euo pipefail

seconds=${1:-30}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
targets=(fuzz_safetensors fuzz_npy fuzz_npz fuzz_gguf fuzz_json fuzz_result_json fuzz_layout fuzz_plot
  fuzz_merge fuzz_hf_cache)

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DKVRANK_FUZZ=ON -DKVRANK_BUILD_TESTS=OFF >/dev/null
ninja -C "$build" -j2 "${targets[@]}"

for target in "${targets[@]}"; do
  mkdir -p "$build/corpus/$target"
  echo "== $target: ${seconds}s"
  "$build/fuzz/$target" "$build/corpus/$target" "$root/fuzz/corpus/$target" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -artifact_prefix="$build/crash-$target-" -print_final_stats=1 2>&1 | tail -n 12
done
