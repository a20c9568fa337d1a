#!/usr/bin/env bash
# Configures and builds kvrank into build/ (or $1 with extra CMake arguments after it).
#   scripts/build.sh                      # release build in build/
#   scripts/build.sh build-asan -DKVRANK_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
# Extra -D arguments are applied to an existing build folder too (CMake keeps the cache otherwise).
# ccache is used when installed.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
shift || true
configure=(cmake -S . -B "$build_dir")
command -v ninja >/dev/null && configure+=(-G Ninja)
command -v ccache >/dev/null && configure+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  "${configure[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
elif (($# > 0)); then
  cmake -B "$build_dir" "$@" >/dev/null
fi
cmake --build "$build_dir" --parallel "$(nproc)"
