#!/usr/bin/env bash
# The benchmark of docs/performance.md: `kvrank analyze` on checkpoints of the reference shapes,
# next to
#   - the limit (bench/limit.cpp): the multiply-adds no method can skip — one symmetric Gram of the
#     query rows and one of the key rows per layer, each counted as half a square product — at the
#     GEMM rate this machine reaches with the kernel the weights' type allows (bf16: oneDNN's bf16
#     matmul; f16 and f32: the faster of OpenBLAS's SGEMM and oneDNN's float32 matmul, see
#     docs/performance.md), the rate measured in the same run; for MLA the float32 GEMM rate times
#     its contraction's multiply-adds (for DeepSeek-V3's qk 65 G a layer: the coordinates 42.5 G,
#     the M_h products 15.3 G — their rope rows 64 wide (src/metric/latent_order.hpp) — and the
#     H × H SYRK 7.3 G; 72 G before the rope rows were narrowed),
#   - the float32 floor of earlier rounds: the two float32 SYRKs per layer through the same BLAS
#     (bench/floor.cpp) — for MLA the Grams of the two latent bases (q_a rows and kv_a rows),
#   - a straightforward numpy implementation of the metric (scripts/bench_numpy.py, explicit d×d
#     heads), on the small shapes,
#   - a layer after the first (the first also pays start-up and fresh pages) against the limit's
#     share of a layer,
# all measured in the same run on the same machine, in rounds of one run of each, so that the ratios
# hold even when the machine is shared (absolute seconds do not). kvrank runs with --threads T and with
# 1 thread (against the limit at T and at 1 thread); peak RSS is given for one layer and for all
# layers (it must not grow with layers).
# Prints a markdown table on stdout (each row naming the kernels `kvrank -v` reports and the path
# of ⟨A_i, A_j⟩), progress on stderr.
# `kvrank analyze` forms the Grams of bf16 weights with the bf16 kernel where it is available
# (gram_backend.hpp); the 2.5B shape also gets a row with it turned off (KVRANK_GRAM_BACKEND=f32).
# With KVRANK_BENCH_CORETYPE=NAME every shape also gets a row for kvrank with OPENBLAS_CORETYPE=NAME,
# e.g. `env -u OPENBLAS_CORETYPE KVRANK_BENCH_CORETYPE=SkylakeX scripts/bench.sh` puts the default
# (generic kernels where OpenBLAS does not know the CPU) and the right kernels side by side.
#
#   scripts/bench.sh                 every shape below (about 40 min on 2 cores)
#   scripts/bench.sh --quick         the 128M and DeepSeek-V3 shapes
#   scripts/bench.sh --shape "A B"   the named shapes (128M, 2.5B, Llama-2-7B, 8B-GQA, 70B-layers,
#                                    2.5B-f16, 2.5B-f32, DeepSeek-V3)
#   KVRANK_BENCH_LAYERS=4 KVRANK_BENCH_REPEAT=1 scripts/bench.sh --shape 8B-GQA
#                                    a development run: at most 4 layers of each shape, one run
#
# Environment: KVRANK_BUILD_DIR (default build), KVRANK_BENCH_THREADS (default: all cores),
# KVRANK_BENCH_REPEAT (rounds: each measurement runs once a round, its fastest is kept; default 3),
# KVRANK_BENCH_LAYERS (at most this many layers of each shape; the limit counts the same layers),
# KVRANK_BENCH_NUMPY=0 (skip numpy, minutes a run on the 2.5B shape),
# KVRANK_BENCH_TMP (where the checkpoints go; default a fresh temporary folder, removed at the end).
# OPENBLAS_CORETYPE reaches kvrank, the floor and numpy alike (the first line names the kernels):
# set it where OpenBLAS does not recognise the CPU (docs/performance.md).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${KVRANK_BUILD_DIR:-$root/build}
threads=${KVRANK_BENCH_THREADS:-$(nproc)}
repeat=${KVRANK_BENCH_REPEAT:-3}
only=""
case "${1:-}" in
  --quick) only="128M DeepSeek-V3" ;;
  --shape) only=${2:?--shape needs a name} ;;
  "") ;;
  *) echo "usage: scripts/bench.sh [--quick | --shape \"NAME...\"]" >&2; exit 2 ;;
esac
max_layers=${KVRANK_BENCH_LAYERS:-0}

if [[ ! -x $build/kvrank || ! -x $build/bench/kvrank_bench_floor || ! -x $build/bench/kvrank_bench_limit ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVRANK_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" --target kvrank kvrank_bench_floor kvrank_bench_limit >/dev/null
fi
python=python3
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c "import numpy" 2>/dev/null; then python=$candidate; break; fi
done

tmp=${KVRANK_BENCH_TMP:-$(mktemp -d)}
[[ -z ${KVRANK_BENCH_TMP:-} ]] && trap 'rm -rf "$tmp"' EXIT

# name | layers | numpy layers (0 = all, - = skip) | floor flags | synth flags | contraction G-MACs
# per layer (- = the pairwise path: the Grams are the work) | weight type | the limit's kernel (f16
# weights are not bf16-exact, and this oneDNN has no f16 kernel on AVX512-BF16 CPUs: their Grams
# are float32, so is their limit)
shapes=(
  "128M|12|0|--d 768 --q-rows 768 --k-rows 768|--family llama --heads 6 --kv-heads 6 --head-dim 128 --d-model 768|-|bf16|bf16"
  "2.5B|36|1|--d 2304 --q-rows 2304 --k-rows 2304|--family llama --heads 18 --kv-heads 18 --head-dim 128 --d-model 2304|-|bf16|bf16"
  "Llama-2-7B|32|-|--d 4096 --q-rows 4096 --k-rows 4096|--family llama --heads 32 --kv-heads 32 --head-dim 128 --d-model 4096|-|bf16|bf16"
  "8B-GQA|32|-|--d 4096 --q-rows 4096 --k-rows 1024|--family llama --heads 32 --kv-heads 8 --head-dim 128 --d-model 4096|-|bf16|bf16"
  "70B-layers|2|-|--d 8192 --q-rows 8192 --k-rows 1024|--family llama --heads 64 --kv-heads 8 --head-dim 128 --d-model 8192|-|bf16|bf16"
  "2.5B-f16|8|-|--d 2304 --q-rows 2304 --k-rows 2304|--family llama --heads 18 --kv-heads 18 --head-dim 128 --d-model 2304|-|f16|f32"
  "2.5B-f32|8|-|--d 2304 --q-rows 2304 --k-rows 2304|--family llama --heads 18 --kv-heads 18 --head-dim 128 --d-model 2304|-|f32|f32"
  "DeepSeek-V3|2|-|--d 7168 --q-rows 1536 --k-rows 576|--family deepseek_v2 --heads 128 --d-model 7168 --q-lora-rank 1536 --kv-lora-rank 512 --nope-dim 128 --rope-dim 64 --v-head-dim 128|65|bf16|f32"
)

# Every measurement of a shape runs once per round, the rounds one after the other, and the fastest
# run of each is kept: a slow minute on a shared machine then slows one run of each measurement, not
# every run of one of them (with kvrank's runs and the limit's minutes apart, a ratio was seen to
# move by 15 % and a table to take longer than its JSON run). By name: best (seconds), cpu (the
# fewest CPU seconds, user + system, of a run), rss (the largest peak RSS, MB), rate and library
# (the limit's G-MAC/s and what ran it, from its fastest run).
declare -A best cpu rss rate library

# Whether $1 < $2 (decimals).
less() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# keep NAME SECONDS: best[NAME] becomes SECONDS if it is faster (true then).
keep() {
  if [[ -z ${best[$1]:-} ]] || less "$2" "${best[$1]}"; then best[$1]=$2; return 0; fi
  return 1
}

# Reads the checkpoint's files into the page cache, untimed, before each kvrank run: this VM's
# kernel pages out file pages left alone for about a minute (DAMON's reclaim), and a run that read
# part of its checkpoint from the disk timed the disk, not the compute the limit measures.
warm() { cat "$ckpt"/* >/dev/null; }

# One run of "$@" under /usr/bin/time, as measurement NAME: seconds to the millisecond (time's own
# %e has 10 ms steps: a tenth of the 128M run). On one thread CPU seconds do not count the time the
# process waited for a core, so on a machine shared with other jobs they are the 1-thread number to
# compare with the limit (whose rate is the fastest of 5 short runs, each likely to have had its
# core).
timed() {
  local name=$1 start_ns end_ns kb cpu_s
  shift
  warm
  start_ns=$(date +%s%N)
  /usr/bin/time -f "%M %U %S" -o "$tmp/time.txt" "$@"
  end_ns=$(date +%s%N)
  read -r kb cpu_s < <(tail -1 "$tmp/time.txt" | awk '{ printf "%d %.2f\n", $1, $2 + $3 }')
  keep "$name" "$(awk -v a="$start_ns" -v b="$end_ns" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')" || true
  if [[ -z ${cpu[$name]:-} ]] || less "$cpu_s" "${cpu[$name]}"; then cpu[$name]=$cpu_s; fi
  if ((kb / 1024 > ${rss[$name]:-0})); then rss[$name]=$((kb / 1024)); fi
}

# One run of the limit (bench/limit.cpp) as measurement NAME. The flags: the floor's, or
# --gemm-gmacs G for MLA's contraction.
limit() {
  local name=$1 seconds measured_rate ran_on
  shift
  read -r seconds measured_rate ran_on < <("$build/bench/kvrank_bench_limit" "$@")
  if keep "$name" "$seconds"; then rate[$name]=$measured_rate library[$name]=$ran_on; fi
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# The kernels `kvrank analyze "$@"` runs, for the last column: its -v products line, shortened,
# and the line naming what forms the Grams of this model's weights (bf16 or float32).
kernels() {
  local log products grams
  log=$("$build/kvrank" -v analyze "$@" --layers 0 --format json -o "$tmp/kernels.json" 2>&1)
  products=$(sed -nE 's/.*products: .*, ([^ ,]+) kernels; (.*)/\1; \2/p; s/.*products: (.*)/\1/p' \
    <<<"$log" | head -1)
  grams=$(sed -nE 's/.* weights: (.*)/\1/p' <<<"$log" | head -1)
  echo "$products${grams:+; $grams}"
}

echo "kvrank benchmark: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $threads threads, best of $repeat, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $("$build/bench/kvrank_bench_floor" --blas-info)" >&2
rows=()
for shape in "${shapes[@]}"; do
  IFS='|' read -r name layers numpy_layers floor_flags synth_flags contraction_gmacs dtype kernel <<<"$shape"
  [[ -n $only && " $only " != *" $name "* ]] && continue
  ((max_layers > 0 && layers > max_layers)) && layers=$max_layers
  ckpt=$tmp/$name
  echo "[$name] writing a $dtype checkpoint ($layers layers)" >&2
  # shellcheck disable=SC2086
  "$build/kvrank" -q synth $synth_flags --layers "$layers" --dtype "$dtype" -o "$ckpt"
  analyze=("$build/kvrank" -q analyze "$ckpt" --format json -o "$tmp/result.json")
  # The path of ⟨A_i, A_j⟩ (docs/performance.md), named before the kernels in the last column.
  path="pairwise (SYRK Grams)"
  [[ $contraction_gmacs == - ]] || path="latent contraction (TRMM, GEMM, SYRK)"

  # shellcheck disable=SC2206
  limit_flags=(--layers "$layers" $floor_flags)
  [[ $contraction_gmacs == - ]] || limit_flags=(--gemm-gmacs $((contraction_gmacs * layers)))
  # No bf16 kernel here (no oneDNN, no AVX512-BF16): kvrank's Grams are float32, so is the limit.
  [[ $("$build/bench/kvrank_bench_limit" --rate "$kernel" --gemm-gmacs 1) == "- - -" ]] && kernel=f32
  table=("$build/kvrank" -q analyze "$ckpt" --format table -o "$tmp/result.txt")
  best=() cpu=() rss=() rate=() library=()
  for ((round = 1; round <= repeat; round++)); do
    echo "[$name] round $round of $repeat: kvrank (JSON, table), the limit, the floor" >&2
    timed kvrank "${analyze[@]}" --threads "$threads"
    limit limit --rate "$kernel" "${limit_flags[@]}" --threads "$threads"
    timed kvrank_1 "${analyze[@]}" --threads 1
    limit limit_1 --rate "$kernel" "${limit_flags[@]}" --threads 1
    timed one_layer "${analyze[@]}" --threads "$threads" --layers 0
    # A table (or CSV) holds no per-head ranks, so analyze skips their eigenproblems (diversity.hpp).
    timed table "${table[@]}" --threads "$threads"
    timed table_1 "${table[@]}" --threads 1
    # shellcheck disable=SC2086
    keep floor "$("$build/bench/kvrank_bench_floor" --layers "$layers" $floor_flags --threads "$threads")" || true
  done
  kvrank_s=${best[kvrank]} rss_all=${rss[kvrank]}
  kvrank_1=${best[kvrank_1]} kvrank_cpu1=${cpu[kvrank_1]}
  rss_one=${rss[one_layer]} one_layer_s=${best[one_layer]}
  table_s=${best[table]} table_1=${best[table_1]} table_cpu1=${cpu[table_1]}
  floor_s=${best[floor]} limit_s=${best[limit]} limit_1=${best[limit_1]}
  limit_cell="$limit_s ($kernel on ${library[limit]}, ${rate[limit]} G/s)"

  numpy_cell="not run"
  numpy_ratio="—"
  [[ ${KVRANK_BENCH_NUMPY:-1} == 0 ]] && numpy_layers=-
  if [[ $numpy_layers != "-" ]]; then
    echo "[$name] numpy" >&2
    # The fastest of $repeat runs, like kvrank's (one run of it varies by ±25 %).
    for ((run = 0; run < repeat; run++)); do
      keep numpy "$(OPENBLAS_NUM_THREADS=$threads "$python" "$root/scripts/bench_numpy.py" "$ckpt" \
        --max-layers "$numpy_layers" 2>/dev/null)" || true
    done
    numpy_s=${best[numpy]}
    numpy_cell=$numpy_s
    ((numpy_layers > 0)) && numpy_cell="≈$numpy_s (from $numpy_layers layer)"
    numpy_ratio="$(ratio "$numpy_s" "$kvrank_s")×"
  fi
  per_layer=$(awk -v a="$kvrank_s" -v l="$layers" 'BEGIN { printf "%.2f", a / l }')
  # The first layer also pays start-up and fresh pages; the ones after it reuse the freed memory
  # (heap.hpp), so a long model's layers cost what the second one does.
  steady_cell="—"
  if ((layers > 1)); then
    steady=$(awk -v a="$kvrank_s" -v b="$one_layer_s" -v l="$layers" 'BEGIN { printf "%.3f", (a - b) / (l - 1) }')
    steady_cell="$steady s, $(ratio "$steady" "$(awk -v a="$limit_s" -v l="$layers" 'BEGIN { print a / l }')")×"
  fi
  kernels_used=$(kernels "$ckpt")
  rows+=("| $name, $dtype ($layers layers) | $kvrank_s ($per_layer/layer) | $limit_cell | **$(ratio "$kvrank_s" "$limit_s")** | $floor_s | $(ratio "$kvrank_s" "$floor_s") | $kvrank_1 | $limit_1 | $(ratio "$kvrank_1" "$limit_1") | $kvrank_cpu1, $(ratio "$kvrank_cpu1" "$limit_1") | $(ratio "$kvrank_1" "$kvrank_s")× | $steady_cell | $numpy_cell | $numpy_ratio | $rss_one / $rss_all | $path; $kernels_used |")
  table_numpy="—"
  [[ $numpy_layers == "-" ]] || table_numpy="$(ratio "$numpy_s" "$table_s")×"
  rows+=("| $name, table output (no per-head ranks) | $table_s | $limit_s | **$(ratio "$table_s" "$limit_s")** | $floor_s | $(ratio "$table_s" "$floor_s") | $table_1 | $limit_1 | $(ratio "$table_1" "$limit_1") | $table_cpu1, $(ratio "$table_cpu1" "$limit_1") | $(ratio "$table_1" "$table_s")× | — | — | $table_numpy | — | $path; $kernels_used |")
  # Progress only: the row itself is printed once, in the table on stdout.
  echo "[$name] $kvrank_s s, $(ratio "$kvrank_s" "$limit_s")× the limit, $(ratio "$kvrank_s" "$floor_s")× the f32 floor" >&2
  if [[ -n ${KVRANK_BENCH_CORETYPE:-} ]]; then  # the same run on the kernels OpenBLAS is told to use
    echo "[$name] kvrank analyze, OPENBLAS_CORETYPE=$KVRANK_BENCH_CORETYPE" >&2
    for ((round = 0; round < repeat; round++)); do
      OPENBLAS_CORETYPE=$KVRANK_BENCH_CORETYPE timed coretype "${analyze[@]}" --threads "$threads"
    done
    seconds=${best[coretype]}
    rows+=("| $name, OPENBLAS_CORETYPE=$KVRANK_BENCH_CORETYPE | $seconds | $limit_s | $(ratio "$seconds" "$limit_s") | $floor_s | $(ratio "$seconds" "$floor_s") | — | — | — | — | — | — | — | — | ${rss[coretype]} MB | $path; $(OPENBLAS_CORETYPE=$KVRANK_BENCH_CORETYPE kernels "$ckpt") |")
  fi
  if [[ $name == 2.5B ]]; then  # the same weights with the bf16 Gram kernel off (gram_backend.hpp)
    echo "[$name] kvrank analyze, KVRANK_GRAM_BACKEND=f32" >&2
    KVRANK_GRAM_BACKEND=f32 /usr/bin/time -f "%e %M" -o "$tmp/time.txt" "$build/kvrank" -q analyze \
      "$ckpt" --format json --threads "$threads" -o "$tmp/result.json"
    read -r f32_s f32_rss_kb <"$tmp/time.txt"
    rows+=("| $name, f32 Grams (KVRANK_GRAM_BACKEND=f32) | $f32_s | $limit_s | $(ratio "$f32_s" "$limit_s") | $floor_s | $(ratio "$f32_s" "$floor_s") | — | — | — | — | — | — | — | — | $((f32_rss_kb / 1024)) MB | $path; $(KVRANK_GRAM_BACKEND=f32 kernels "$ckpt") |")
  fi
  rm -rf "$ckpt"
done

echo "| shape | kvrank s, $threads thr | limit s, $threads thr (kernel, rate) | kvrank / limit | f32 floor s | kvrank / floor | kvrank s, 1 thr | limit s, 1 thr | kvrank / limit | kvrank CPU s, 1 thr; / limit | speed-up | a layer after the first, $threads thr; / the limit's layer | numpy s | numpy / kvrank | peak RSS MB, 1 layer / all | kernels |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
printf '%s\n' "${rows[@]}"
