#!/usr/bin/env bash
# Installs what kvrank needs on a Debian 12 machine. Idempotent, and quiet when all is there.
#   scripts/setup.sh          build and run kvrank (scripts/demo.sh)
#   scripts/setup.sh --test   also what only the tests need (scripts/test.sh)
#   scripts/setup.sh --train  also PyTorch (only for scripts/train_tiny.py)
#   scripts/setup.sh --format only clang-format (scripts/test.sh format, CI's format job)
set -euo pipefail

# Building the command and the library, and running it.
runtime_packages=(build-essential cmake ninja-build
                  libeigen3-dev libcli11-dev nlohmann-json3-dev libspdlog-dev zlib1g-dev
                  libopenblas-dev libopenblas-openmp-dev libdnnl-dev
                  librsvg2-bin)  # rsvg-convert: PNG and PDF figures
# The test suite: Catch2, the numpy reference, clang for the sanitizer build and the fuzzers, the
# format check, a one-node Slurm (tests/e2e/test_slurm.py), pkg-config (tests/e2e/test_install.py),
# and the packaging step (help2man for the man page, debootstrap for the fresh Debian root).
test_packages=(catch2 python3 python3-numpy pkg-config
               clang clang-format libclang-rt-dev time ccache
               poppler-utils  # pdfinfo and pdftoppm check the PDF figures
               slurm-wlm munge
               python3-jsonschema  # tests/e2e/test_result_schema.py validates against docs/schema/
               help2man debootstrap
               # the Python module (python/, KVRANK_PYTHON) and its tests: pandas, venv and
               # PyTorch (about 1 GB installed; the torch tests are skipped, exit 77, without it)
               pybind11-dev python3-pybind11 python3-pandas python3-torch python3-venv
               # examples/kvrank.ipynb run by python/tests/test_notebook.py
               python3-nbclient python3-ipykernel)

packages=("${runtime_packages[@]}")
case "${1:-}" in
  --test) packages+=("${test_packages[@]}") ;;
  --train) packages+=(python3-torch) ;;
  --format) packages=(clang-format) ;;
esac

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
((${#missing[@]} == 0)) && exit 0

echo "scripts/setup.sh: installing ${missing[*]}" >&2
sudo_cmd=()
[[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
