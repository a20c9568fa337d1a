#!/usr/bin/env bash
# Benchmark of `kvrank plan` on a 7B-shaped checkpoint (docs/plan.md, "Cost"): Llama-2-7B's
# attention geometry (32 layers, 32 heads of 128, d 4096), bf16, written by `kvrank synth`, planned
# to 8 KV heads (both objectives) and to 16 (32 heads cannot be enumerated: local search with
# restarts). Prints the wall time, CPU time and peak RSS of each run. Not a timed test: the
# machine's load sets the numbers.
#
#   scripts/bench_plan.sh [LAYERS]     (default 32; e.g. 2 for a quick per-layer estimate)
# Environment: KVRANK_BUILD_DIR (default build), KVRANK_BENCH_TMP (default a fresh temporary
# folder, removed at the end; the checkpoint takes ~4.3 GB at 32 layers).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KVRANK_BUILD_DIR:-$root/build}
layers=${1:-32}
tmp=${KVRANK_BENCH_TMP:-$(mktemp -d)}
[[ -n ${KVRANK_BENCH_TMP:-} ]] || trap 'rm -rf "$tmp"' EXIT
ckpt=$tmp/llama7b-shape
"$build/kvrank" -q synth --layers "$layers" --heads 32 --head-dim 128 --d-model 4096 \
  --dtype bf16 --redundancy 0.3 -o "$ckpt"
echo "| plan | layers | wall s | CPU s (user + sys) | peak RSS MB |"
echo "|---|---|---|---|---|"
for args in "--kv-heads 8" "--kv-heads 16" "--kv-heads 8 --objective merge"; do
  # shellcheck disable=SC2086
  stats=$( { /usr/bin/time -f "%e %U %S %M" "$build/kvrank" -q plan "$ckpt" $args --rope rotate_half \
    --format json -o "$tmp/plan.json"; } 2>&1 | tail -1)
  read -r wall user sys rss <<<"$stats"
  echo "| $args | $layers | $wall | $user + $sys | $((rss / 1024)) |"
done
