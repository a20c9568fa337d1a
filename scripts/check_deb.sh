#!/usr/bin/env bash
# Proves the .deb on a fresh system (scripts/test.sh package runs it; as root, or with sudo):
#   1. cpack in the build folder: kvrank_<version>_amd64.deb and kvrank-dev_<version>_amd64.deb
#   2. a fresh minimal Debian 12 root (debootstrap --variant=minbase) in <build>/deb-check/root,
#      from the Debian mirror this machine's apt already uses (its sources.list or .sources files)
#   3. apt installs kvrank_*.deb there, resolving its Depends (from dpkg-shlibdeps); kvrank-dev's
#      Depends must resolve too (apt --simulate: it would pull a compiler's worth of packages)
#   4. `kvrank analyze data/tiny/*` inside the root must write the build tree's JSON byte for byte
#   5. examples/erank builds against the files of kvrank-dev (unpacked here: its Depends, the
#      compiler and the libraries, are this build machine's) and gives the command's numbers
#   scripts/check_deb.sh [build]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
work=$build_dir/deb-check
root=$work/root
suite=bookworm  # Debian 12, the system the packages are built on and for

as_root=()
[[ $(id -u) -ne 0 ]] && as_root=(sudo)
# The BLAS and OpenMP settings of this environment go along (OPENBLAS_CORETYPE picks the kernels,
# and with them the last digits): both runs must compute the same way.
blas_settings=()
while IFS= read -r setting; do blas_settings+=("$setting"); done < <(env | grep -E '^(OPENBLAS|OMP|KVRANK)_' || true)
in_root() {
  "${as_root[@]}" chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${blas_settings[@]}" "$@"
}
fail() { echo "scripts/check_deb.sh: $*" >&2; exit 1; }

# The URI of the first enabled "deb" source of $suite in this machine's apt configuration, in
# either format: one-line ("deb [options] URI SUITE COMPONENTS...") or deb822 paragraphs
# ("Types: deb", "URIs: ...", "Suites: ...", optionally "Enabled: no").
debian_mirror() {
  local files=()
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -f $file ]] && files+=("$file")
  done
  ((${#files[@]} > 0)) || return 0
  awk -v suite="$suite" '
    function flush() {
      if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && enabled !~ /^no$/) {
        split(uris, first, " "); print first[1]; found = 1; exit
      }
      types = uris = suites = enabled = ""
    }
    FNR == 1 { flush() }
    FILENAME ~ /\.sources$/ {
      if ($0 ~ /^[ \t]*$/) { flush(); next }
      if ($0 ~ /^#/) next
      field = tolower($1); value = $0; sub(/^[^:]*:[ \t]*/, "", value)
      if (field == "types:") types = value
      else if (field == "uris:") uris = value
      else if (field == "suites:") suites = value
      else if (field == "enabled:") enabled = tolower(value)
      next
    }
    $1 == "deb" {
      i = 2
      if ($i ~ /^\[/) { while ($i !~ /\]$/ && i < NF) i++; i++ }
      if ($(i + 1) == suite) { print $i; found = 1; exit }
    }
    END { if (!found) flush() }' "${files[@]}"
}

package() {
  echo "-- cpack" >&2
  rm -rf "$build_dir/packages"
  (cd "$build_dir" && cpack -G DEB >/dev/null)
  runtime_deb=$(echo "$build_dir"/packages/kvrank_*_amd64.deb)
  development_deb=$(echo "$build_dir"/packages/kvrank-dev_*_amd64.deb)
  [[ -f $runtime_deb && -f $development_deb ]] || fail "cpack made no kvrank_*/kvrank-dev_* .deb"
  dpkg-deb --contents "$runtime_deb" | grep -q '/usr/share/man/man1/kvrank.1.gz$' ||
    fail "$runtime_deb has no man page (is help2man installed?)"
  echo "$(basename "$runtime_deb"): Depends: $(dpkg-deb --field "$runtime_deb" Depends)" >&2
}

fresh_root() {
  local mirror
  mirror=$(debian_mirror)
  [[ -n $mirror ]] || fail "no 'deb' source for $suite in /etc/apt/sources.list*; nothing to debootstrap from"
  "${as_root[@]}" rm -rf "$root"
  mkdir -p "$work"
  echo "-- debootstrap $suite from $mirror" >&2
  "${as_root[@]}" debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    fail "debootstrap failed; see $work/debootstrap.log"
  "${as_root[@]}" cp /etc/resolv.conf "$root/etc/resolv.conf"
}

install_in_root() {
  echo "-- apt install ./$(basename "$runtime_deb") in the fresh root" >&2
  "${as_root[@]}" mkdir -p "$root/tmp/debs"
  "${as_root[@]}" cp "$runtime_deb" "$development_deb" "$root/tmp/debs/"
  in_root apt-get update -qq
  in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "/tmp/debs/$(basename "$runtime_deb")" >"$work/apt.log" || fail "apt install failed; see $work/apt.log"
  in_root apt-get install --simulate -qq "/tmp/debs/$(basename "$development_deb")" >>"$work/apt.log" ||
    fail "kvrank-dev's Depends do not resolve; see $work/apt.log"
}

# The same command in the build tree and in the root, from a folder holding data/tiny, so the
# paths in the JSON are the same too.
same_results() {
  echo "-- kvrank analyze data/tiny/* in the root and in the build tree" >&2
  local models=()
  for model in data/tiny/*/; do models+=("${model%/}"); done
  local analyze=(analyze "${models[@]}" --format json -q -o)
  "$build_dir/kvrank" "${analyze[@]}" "$work/build-tree.json"
  "${as_root[@]}" mkdir -p "$root/tmp/check/data"
  "${as_root[@]}" cp -r data/tiny "$root/tmp/check/data/"
  in_root sh -c 'cd /tmp/check && exec kvrank "$@"' kvrank "${analyze[@]}" fresh-root.json
  "${as_root[@]}" cp "$root/tmp/check/fresh-root.json" "$work/fresh-root.json"
  cmp "$work/build-tree.json" "$work/fresh-root.json" ||
    fail "the installed kvrank's JSON differs from the build tree's (diff $work/build-tree.json $work/fresh-root.json)"
  echo "the installed .deb gives the build tree's results byte for byte (${#models[@]} models)" >&2
}

# The consumer example against kvrank-dev's own files: its kvrankConfig.cmake, headers and library
# as the package installs them (under usr/ of the unpacked tree, as under /usr).
development_package_builds_the_example() {
  echo "-- examples/erank against the unpacked $(basename "$development_deb")" >&2
  local unpacked=$work/dev consumer=$work/erank
  rm -rf "$unpacked" "$consumer"
  mkdir -p "$unpacked"
  dpkg-deb -x "$development_deb" "$unpacked"
  dpkg-deb -x "$runtime_deb" "$unpacked"
  cmake -S examples/erank -B "$consumer" -DCMAKE_PREFIX_PATH="$(realpath "$unpacked")/usr" \
    -DCMAKE_BUILD_TYPE=Release >"$work/erank.log" 2>&1 &&
    cmake --build "$consumer" >>"$work/erank.log" 2>&1 ||
    fail "examples/erank does not build against kvrank-dev; see $work/erank.log"
  "$consumer/erank" data/tiny/mha >"$work/erank.txt"
  "$build_dir/kvrank" analyze data/tiny/mha --format json -q -o "$work/mha.json"
  python3 - "$work/erank.txt" "$work/mha.json" <<'CHECK' || fail "examples/erank's numbers differ from kvrank's"
import json, sys
printed = [line.split() for line in open(sys.argv[1])]
layers = json.load(open(sys.argv[2]))["models"][0]["layers"]
assert [int(p[0]) for p in printed] == [l["layer"] for l in layers], printed
assert all(abs(float(p[1]) - l["erank"]) <= 1e-8 * l["erank"] for p, l in zip(printed, layers))
CHECK
  echo "examples/erank built against kvrank-dev gives the command's numbers" >&2
}

[[ -x $build_dir/kvrank ]] || fail "no $build_dir/kvrank; build first (scripts/build.sh $build_dir)"
start=$SECONDS
package
development_package_builds_the_example
fresh_root
install_in_root
same_results
"${as_root[@]}" rm -rf "$root"  # kept when a check failed, to look inside
echo "scripts/check_deb.sh: $((SECONDS - start)) s" >&2
