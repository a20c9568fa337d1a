#!/usr/bin/env bash
# Installs what kvrank needs on a Debian 12 machine. Idempotent, and quiet when all is there.
#   scripts/setup.sh          build + test dependencies
#   scripts/setup.sh --train  also PyTorch (only for scripts/train_tiny.py)
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config
          libeigen3-dev libcli11-dev nlohmann-json3-dev libspdlog-dev catch2
          libopenblas-dev libopenblas-openmp-dev libdnnl-dev zlib1g-dev python3 python3-numpy
          clang clang-format libclang-rt-14-dev librsvg2-bin poppler-utils time ccache
          slurm-wlm munge)  # a one-node Slurm for tests/e2e/test_slurm.py
[[ "${1:-}" == "--train" ]] && packages+=(python3-torch)

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
