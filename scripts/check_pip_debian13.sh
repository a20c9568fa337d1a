#!/usr/bin/env bash
# Proves `pip install .` on a fresh Debian 13 (scripts/test.sh pip runs it; as root, or with sudo):
#   1. a minimal Debian 13 (trixie) root (debootstrap --variant=minbase) in <work>/root, with
#      Debian's own build backends and libraries: python3-venv, python3-scikit-build-core,
#      python3-pybind11, numpy 2, PyTorch, pandas, nbclient + ipykernel, the compiler and the -dev
#      libraries of scripts/setup.sh. Kept for the next run while the package list is the same
#      (KVRANK_FRESH_ROOT=1 makes a new one); CI's cold machine always makes it.
#   2. the working tree (tracked and untracked files, not ignored ones) copied to /src in the root
#   3. a fresh venv (--system-site-packages: Debian's numpy, torch, pandas) and
#      `pip install --no-build-isolation --no-index /src`: scikit-build-core builds the module
#      and the command with CMake; nothing is downloaded
#   4. in that venv, from a folder outside /src (so `import kvrank` is the installed package):
#      `kvrank` is on PATH, and the Python tests (python/tests/test_*.py, but test_install.py,
#      which is about the CMake install) run against it — the module's numbers against the
#      command's, the numpy reference's and the CLI's figures, torch state dicts, the example
#      notebook
#   5. `kvrank analyze data/tiny/*` in the root gives the build tree's numbers (to 1e-9: Debian
#      13's OpenBLAS 0.3.29 may differ from Debian 12's in the last digits)
#   scripts/check_pip_debian13.sh [build]      (the build folder holds build/kvrank and the work)
#   scripts/check_pip_debian13.sh --root-only [build]   step 1 alone (scripts/test.sh runs it in
#                                               the background while the other steps compile)
set -euo pipefail
cd "$(dirname "$0")/.."
root_only=false
if [[ ${1:-} == --root-only ]]; then root_only=true; shift; fi
build_dir=${1:-build}
work=$build_dir/pip-check
root=$work/root
suite=trixie
# What the root holds besides minbase (scripts/setup.sh's runtime packages, Debian 13's names).
packages=(build-essential cmake ninja-build ccache python3-dev
          libeigen3-dev libcli11-dev nlohmann-json3-dev libspdlog-dev zlib1g-dev
          libopenblas-dev libopenblas-openmp-dev libdnnl-dev librsvg2-bin
          python3-venv python3-pip python3-scikit-build-core python3-pybind11 pybind11-dev
          python3-numpy python3-pandas python3-torch python3-nbclient python3-ipykernel)

as_root=()
[[ $(id -u) -ne 0 ]] && as_root=(sudo)
blas_settings=()
while IFS= read -r setting; do blas_settings+=("$setting"); done < <(env | grep -E '^(OPENBLAS|OMP|KVRANK)_' || true)
in_root() {
  "${as_root[@]}" chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LANG=C.UTF-8 "${blas_settings[@]}" "$@"
}
fail() { echo "scripts/check_pip_debian13.sh: $*" >&2; exit 1; }

# The Debian archive this machine's apt already uses (CI's containers have their own), else
# deb.debian.org.
debian_mirror() {
  local uri
  uri=$(apt-get indextargets --format '$(REPO_URI)' 'Created-By: Packages' 2>/dev/null |
        grep -m1 -E '/debian/$' || true)
  echo "${uri:-http://deb.debian.org/debian/}"
}

mounted=()
unmount_all() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do "${as_root[@]}" umount "${mounted[i]}" || true; done
  mounted=()
}
trap unmount_all EXIT
# /proc and /dev inside the root: PyTorch, the notebook's kernel (zmq) and OpenMP read them.
mount_system() {
  mountpoint -q "$root/proc" || { "${as_root[@]}" mount -t proc proc "$root/proc" && mounted+=("$root/proc"); }
  mountpoint -q "$root/dev" || { "${as_root[@]}" mount --bind /dev "$root/dev" && mounted+=("$root/dev"); }
}

fresh_root() {
  local stamp wanted
  wanted="$suite ${packages[*]}"
  stamp=$root/etc/kvrank-pip-check
  if [[ -z ${KVRANK_FRESH_ROOT:-} && -f $stamp && "$(cat "$stamp")" == "$wanted" ]]; then
    echo "-- the Debian 13 root of an earlier run ($root; KVRANK_FRESH_ROOT=1 makes a new one)" >&2
    return
  fi
  local mirror
  mirror=$(debian_mirror)
  # A run killed before its trap leaves /proc and /dev mounted: never delete through them.
  for mount in "$root/dev" "$root/proc"; do
    if mountpoint -q "$mount"; then "${as_root[@]}" umount "$mount"; fi
  done
  "${as_root[@]}" rm -rf --one-file-system "$root"
  mkdir -p "$work"
  echo "-- debootstrap $suite from $mirror" >&2
  "${as_root[@]}" debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    fail "debootstrap failed; see $work/debootstrap.log"
  "${as_root[@]}" cp /etc/resolv.conf "$root/etc/resolv.conf"
  echo "-- apt install (${#packages[@]} packages and their dependencies, PyTorch among them)" >&2
  in_root apt-get update -qq
  in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${packages[@]}" >"$work/apt.log" 2>&1 || fail "apt install failed; see $work/apt.log"
  in_root apt-get clean
  echo "$wanted" | "${as_root[@]}" tee "$stamp" >/dev/null
}

copy_source() {
  echo "-- the working tree to /src" >&2
  "${as_root[@]}" rm -rf "$root/src"
  "${as_root[@]}" mkdir -p "$root/src"
  git ls-files -z --cached --others --exclude-standard |
    tar --null -T - --ignore-failed-read -cf - 2>/dev/null | "${as_root[@]}" tar -xf - -C "$root/src"
}

pip_install() {
  echo "-- python3 -m venv --system-site-packages /venv; pip install --no-build-isolation /src" >&2
  in_root rm -rf /venv
  in_root python3 -m venv --system-site-packages /venv
  # ccache's folder stays in the root (a later run of a kept root compiles what changed only).
  in_root env CCACHE_DIR=/var/cache/ccache CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    CMAKE_ARGS="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache" \
    /venv/bin/pip install --no-build-isolation --no-index /src >"$work/pip.log" 2>&1 ||
    fail "pip install failed; see $work/pip.log"
  in_root /venv/bin/pip show kvrank | grep -E '^(Name|Version|Location):' >&2
}

python_tests() {
  echo "-- the Python tests in the venv, against the kvrank on its PATH" >&2
  local venv_path=/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin test failed=0
  in_root env PATH=$venv_path sh -c 'cd / && command -v kvrank && python -c "
import kvrank, sys
assert kvrank.__file__.startswith(\"/venv/\"), kvrank.__file__
print(\"import kvrank\", kvrank.__version__, \"from\", kvrank.__file__)"' >&2 ||
    fail "kvrank is not on the venv's PATH, or import kvrank does not load the installed package"
  for test in python/tests/test_*.py; do
    local name status=0 started=$SECONDS
    name=$(basename "$test" .py)
    [[ $name == test_install ]] && continue
    in_root env PATH=$venv_path PYDEVD_DISABLE_FILE_VALIDATION=1 \
      sh -c "cd /tmp && python /src/$test /venv/bin/kvrank" >"$work/$name.log" 2>&1 || status=$?
    if ((status == 0)); then
      echo "   $name: ok ($((SECONDS - started)) s)" >&2
    else
      echo "   $name: FAILED (exit $status; see $work/$name.log)" >&2
      failed=1
    fi
  done
  ((failed == 0)) || fail "Python tests failed in the Debian 13 venv"
}

same_numbers() {
  echo "-- kvrank analyze data/tiny/* on PATH in the root and in the build tree" >&2
  local models=()
  for model in data/tiny/*/; do models+=("${model%/}"); done
  "$build_dir/kvrank" analyze "${models[@]}" --format json -q -o "$work/build-tree.json"
  in_root env PATH=/venv/bin:/usr/bin:/bin sh -c 'cd /src && exec kvrank "$@"' kvrank \
    analyze "${models[@]}" --format json -q -o /tmp/pip.json
  "${as_root[@]}" cp "$root/tmp/pip.json" "$work/pip.json"
  python3 - "$work/build-tree.json" "$work/pip.json" <<'CHECK' || fail "the pip-installed kvrank's numbers differ from the build tree's"
import json, math, sys
want, got = (json.load(open(path))["models"] for path in sys.argv[1:])
assert [m["label"] for m in got] == [m["label"] for m in want]
for w, g in zip(want, got):
    for wl, gl in zip(w["layers"], g["layers"], strict=True):
        for key in ("erank", "erank_centered", "mean_similarity"):
            assert math.isclose(wl[key], gl[key], rel_tol=1e-9, abs_tol=1e-12), (w["label"], key)
print(f"the pip-installed kvrank gives the build tree's numbers ({len(got)} models)")
CHECK
}

start=$SECONDS
if $root_only; then
  fresh_root
  echo "scripts/check_pip_debian13.sh: the root is ready after $((SECONDS - start)) s" >&2
  exit 0
fi
[[ -x $build_dir/kvrank ]] || fail "no $build_dir/kvrank; build first (scripts/build.sh $build_dir)"
fresh_root
echo "   root ready after $((SECONDS - start)) s" >&2
mount_system
copy_source
pip_install
echo "   installed after $((SECONDS - start)) s" >&2
python_tests
same_numbers
unmount_all
echo "scripts/check_pip_debian13.sh: $((SECONDS - start)) s" >&2
