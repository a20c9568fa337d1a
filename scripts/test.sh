#!/usr/bin/env bash
# The whole test suite: set up, build, run every test through ctest — once in a release build and
# once with AddressSanitizer + UndefinedBehaviorSanitizer — then run the fuzzers briefly.
#   KVRANK_FUZZ_SECONDS=0 scripts/test.sh   # skip the fuzzing step (default 20 s per target)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "== release build and tests" >&2
scripts/build.sh build
(cd build && ctest --output-on-failure --parallel "$(nproc)")

echo "== ASan + UBSan build and tests" >&2
# -O1 with line tables only: readable sanitizer reports at about half the compile time of -O2 -g.
scripts/build.sh build-asan -DKVRANK_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
   ctest --output-on-failure --parallel "$(nproc)")

seconds=${KVRANK_FUZZ_SECONDS:-20}
if [[ -x scripts/fuzz.sh && "$seconds" != 0 ]]; then
  echo "== fuzzing (${seconds}s per target)" >&2
  scripts/fuzz.sh "$seconds"
fi
