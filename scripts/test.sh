#!/usr/bin/env bash
# The whole test suite, as CI runs it (.github/workflows/ci.yml runs the same steps as a matrix):
#   format    clang-format --dry-run --Werror over every C++ file (first: it takes seconds)
#   release   GCC, OpenBLAS, OpenMP, -Werror, the Python module: build and every test through ctest
#   package   the .deb packages of the release build, installed in a fresh Debian 12 root
#             (debootstrap) where kvrank must give the release build's JSON byte for byte
#   sanitize  clang, ASan + UBSan, -Werror, no OpenBLAS and no OpenMP — so Eigen's own products and
#             the serial paths are built and tested too — then the fuzzers briefly
#   pip       `pip install .` (pyproject.toml) in a venv of a fresh Debian 13 root (debootstrap,
#             Debian's scikit-build-core, pybind11, numpy 2, PyTorch): the Python tests there, and
#             `kvrank` on the venv's PATH gives the release build's numbers
#   scripts/test.sh                         # all of it, in that order
#   scripts/test.sh format release          # some steps
#   KVRANK_FUZZ_SECONDS=0 scripts/test.sh   # skip fuzzing (default 10 s per target: CI stays under 30 min)
set -euo pipefail
cd "$(dirname "$0")/.."
# The format check alone needs clang-format only (CI's format job), every other step the test
# packages.
if [[ "$*" == format ]]; then scripts/setup.sh --format; else scripts/setup.sh --test; fi

format() {
  echo "== format check" >&2
  find include src apps tests fuzz bench examples python -name "*.[ch]pp" ! -name catch.hpp -print0 |
    xargs -0 clang-format --dry-run --Werror
}

release() {
  echo "== release build (GCC, OpenBLAS, OpenMP, the Python module) and tests" >&2
  scripts/build.sh build -DKVRANK_WERROR=ON -DKVRANK_BUILD_TESTS=ON -DKVRANK_PYTHON=ON
  (cd build && ctest --output-on-failure --parallel "$(nproc)")
}

package() {
  echo "== .deb packages, installed and run in a fresh Debian 12 root" >&2
  scripts/build.sh build -DKVRANK_WERROR=ON -DKVRANK_BUILD_TESTS=ON
  scripts/check_deb.sh build
}

sanitize() {
  echo "== clang + ASan + UBSan build without OpenBLAS and OpenMP, and tests" >&2
  # A folder of its own: the compiler is chosen when a build folder is first configured.
  # -O1 with line tables only: readable sanitizer reports at about half the compile time of -O2 -g.
  # KVRANK_FUZZ: the libFuzzer targets are built here too, on the same instrumented libraries (one
  # compile of the library for the sanitizer tests and the fuzzers alike).
  CXX=clang++ scripts/build.sh build-asan-clang -DKVRANK_SANITIZE=ON -DKVRANK_FUZZ=ON \
    -DKVRANK_WERROR=ON -DKVRANK_USE_OPENBLAS=OFF -DKVRANK_USE_OPENMP=OFF \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1"
  (cd build-asan-clang && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure --parallel "$(nproc)")
  local seconds=${KVRANK_FUZZ_SECONDS:-10}
  if [[ -x scripts/fuzz.sh && "$seconds" != 0 ]]; then
    echo "== fuzzing (${seconds}s per target)" >&2
    scripts/fuzz.sh "$seconds" build-asan-clang
  fi
}

# The pip step's Debian 13 root is mostly downloading and unpacking packages (about 8 minutes
# from a cold machine): it is made in the background while the other steps compile, and the pip
# step waits for it.
pip_root_log=build/pip-root.log
start_pip_root() {
  mkdir -p build
  scripts/check_pip_debian13.sh --root-only build >"$pip_root_log" 2>&1 &
  pip_root_pid=$!
}

pip() {
  echo "== pip install . in a venv of a fresh Debian 13 root, and the Python tests there" >&2
  if [[ -n ${pip_root_pid:-} ]]; then
    wait "$pip_root_pid" || { cat "$pip_root_log" >&2; exit 1; }
    cat "$pip_root_log" >&2
  fi
  scripts/build.sh build -DKVRANK_WERROR=ON -DKVRANK_BUILD_TESTS=ON
  scripts/check_pip_debian13.sh build
}

steps=("$@")
((${#steps[@]} > 0)) || steps=(format release package sanitize pip)
for step in "${steps[@]}"; do [[ $step == pip ]] && start_pip_root; done
for step in "${steps[@]}"; do
  case $step in
    format | release | package | sanitize | pip)
      started=$SECONDS
      "$step"
      echo "== $step took $((SECONDS - started)) s" >&2 ;;
    *) echo "scripts/test.sh: unknown step '$step' (expected format, release, package, sanitize, pip)" >&2
       exit 2 ;;
  esac
done
