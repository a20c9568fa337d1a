#!/usr/bin/env bash
# Configures and builds kvrank into build/ (or $1 with extra CMake arguments after it).
#   scripts/build.sh                      # release build in build/
#   scripts/build.sh build-asan -DKVRANK_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
shift || true
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
fi
cmake --build "$build_dir" --parallel "$(nproc)"
