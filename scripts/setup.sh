#!/usr/bin/env bash
# Installs what kvrank needs on a Debian 12 machine. Idempotent, and quiet when all is there.
#   scripts/setup.sh          build + test dependencies
# The Python module (python/, CMake option KVRANK_PYTHON) builds with Debian's pybind11; its tests
# use pandas, venv and PyTorch (python3-torch, also for scripts/train_tiny.py: about 1 GB
# installed; where it cannot be installed the torch tests are skipped, exit 77).
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config
          libeigen3-dev libcli11-dev nlohmann-json3-dev libspdlog-dev catch2
          libopenblas-dev libopenblas-openmp-dev libdnnl-dev zlib1g-dev python3 python3-numpy
          clang clang-format libclang-rt-14-dev librsvg2-bin time ccache
          slurm-wlm munge  # a one-node Slurm for tests/e2e/test_slurm.py
          pybind11-dev python3-pybind11 python3-pandas python3-torch python3-venv)

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
