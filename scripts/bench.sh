#!/usr/bin/env bash
# Benchmark of SPEC.md §4: `kvrank analyze` on bf16 checkpoints of the reference shapes, next to
#   - the floor: the two float32 SYRKs per layer through the same BLAS (bench/floor.cpp),
#   - a straightforward numpy implementation of §1 (scripts/bench_numpy.py, explicit d×d heads),
# measured in the same run on the same machine. Prints a markdown table. `kvrank analyze` forms the
# Grams of these bf16 weights with the bf16 kernel where it is available (gram_backend.hpp); the
# 2.5B shape also gets a row with it turned off (KVRANK_GRAM_BACKEND=f32).
#
#   scripts/bench.sh            128M, 2.5B and Llama-2-7B shapes (about 15 minutes on 2 cores)
#   scripts/bench.sh --quick    the 128M shape only
#
# Environment: KVRANK_BUILD_DIR (default build), KVRANK_BENCH_THREADS (default: all cores),
# KVRANK_BENCH_TMP (where the checkpoints go; default a fresh temporary folder, removed at the end).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${KVRANK_BUILD_DIR:-$root/build}
threads=${KVRANK_BENCH_THREADS:-$(nproc)}
quick=0
[[ "${1:-}" == "--quick" ]] && quick=1

if [[ ! -x $build/kvrank || ! -x $build/bench/kvrank_bench_floor ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVRANK_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" --target kvrank kvrank_bench_floor >/dev/null
fi
python=python3
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c "import numpy" 2>/dev/null; then python=$candidate; break; fi
done

tmp=${KVRANK_BENCH_TMP:-$(mktemp -d)}
[[ -z ${KVRANK_BENCH_TMP:-} ]] && trap 'rm -rf "$tmp"' EXIT

# name layers d_model heads kv_heads numpy_layers (0 = all, - = skip)
shapes=("128M 12 768 6 6 0")
if ((quick == 0)); then
  shapes+=("2.5B 36 2304 18 18 1" "Llama-2-7B 32 4096 32 32 -")
fi
head_dim=128

echo "kvrank benchmark: $(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg), $threads threads, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >&2
rows=()
for shape in "${shapes[@]}"; do
  read -r name layers d heads kv_heads numpy_layers <<<"$shape"
  ckpt=$tmp/$name
  echo "[$name] writing a bf16 checkpoint" >&2
  "$build/kvrank" -q synth --family llama --layers "$layers" --heads "$heads" --kv-heads "$kv_heads" \
    --head-dim "$head_dim" --d-model "$d" --dtype bf16 -o "$ckpt"

  echo "[$name] kvrank analyze" >&2
  /usr/bin/time -f "%e %M" -o "$tmp/time.txt" "$build/kvrank" -q analyze "$ckpt" --format json \
    --threads "$threads" -o "$tmp/result.json"
  read -r kvrank_s rss_kb <"$tmp/time.txt"

  echo "[$name] floor" >&2
  floor_s=$("$build/bench/kvrank_bench_floor" --layers "$layers" --d "$d" \
    --q-rows $((heads * head_dim)) --k-rows $((kv_heads * head_dim)) --threads "$threads")

  numpy_cell="not run"
  numpy_ratio="—"
  if [[ $numpy_layers != "-" ]]; then
    echo "[$name] numpy" >&2
    numpy_s=$(OPENBLAS_NUM_THREADS=$threads "$python" "$root/scripts/bench_numpy.py" "$ckpt" \
      --max-layers "$numpy_layers" 2>/dev/null)
    numpy_cell=$numpy_s
    ((numpy_layers > 0)) && numpy_cell="≈$numpy_s (from $numpy_layers layer)"
    numpy_ratio=$(awk -v a="$numpy_s" -v b="$kvrank_s" 'BEGIN { printf "%.1f×", a / b }')
  fi
  ratio=$(awk -v a="$kvrank_s" -v b="$floor_s" 'BEGIN { printf "%.2f", a / b }')
  rows+=("| $name ($layers × d $d, $heads heads) | $kvrank_s | $floor_s | $ratio | $numpy_cell | $numpy_ratio | $((rss_kb / 1024)) |")
  echo "${rows[-1]}" >&2
  if [[ $name == 2.5B ]]; then  # the same weights with the bf16 Gram kernel off (gram_backend.hpp)
    echo "[$name] kvrank analyze, KVRANK_GRAM_BACKEND=f32" >&2
    KVRANK_GRAM_BACKEND=f32 /usr/bin/time -f "%e %M" -o "$tmp/time.txt" "$build/kvrank" -q analyze \
      "$ckpt" --format json --threads "$threads" -o "$tmp/result.json"
    read -r f32_s rss_kb <"$tmp/time.txt"
    ratio=$(awk -v a="$f32_s" -v b="$floor_s" 'BEGIN { printf "%.2f", a / b }')
    rows+=("| $name, f32 Grams (KVRANK_GRAM_BACKEND=f32) | $f32_s | $floor_s | $ratio | — | — | $((rss_kb / 1024)) |")
    echo "${rows[-1]}" >&2
  fi
  rm -rf "$ckpt"
done

echo "| shape | kvrank s | floor s | kvrank / floor | numpy s | numpy / kvrank | kvrank peak RSS MB |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
