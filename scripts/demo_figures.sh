#!/usr/bin/env bash
# Draws the README gallery (docs/img/) from the embedded demo models: the figures scripts/demo.sh
# shows. Usage: scripts/demo_figures.sh [KVRANK [OUT]]   (defaults: build/kvrank, out)
#   OUT/tiny.json                the six tiny models, --repr qk,k, with similarity matrices
#   OUT/effective-rank.svg       one panel per representation (qk: the paper's metric; k: the cache)
#   OUT/effective-rank.pdf       the same for a paper: full text width (7 in), 9 pt text
#   OUT/heatmap-mqa-layer3.svg   MQA's head-by-head similarity in layer 3
#   OUT/training.json            the checkpoints of data/tiny-steps (two runs), --repr qk,k
#   OUT/training-erank.svg       effective rank against training step, one line per layer
#   OUT/training-heatmap.svg     the same as layers × steps maps
#   OUT/plan-mha.json            `kvrank plan` of data/tiny/mha to 4 KV heads (the default: refit)
#   OUT/plan-mha.svg             its figure: the objective's error and erank_qk per layer
set -euo pipefail
cd "$(dirname "$0")/.."
kvrank=${1:-build/kvrank}
out=${2:-out}
mkdir -p "$out"
# In the seed figure's order, with its legend names (LRKV ranks keep the paper's d_h/8 and d_h/2).
models=(data/tiny/mha data/tiny/lrkv-r2 data/tiny/lrkv-r8 data/tiny/mqa data/tiny/mla data/tiny/gqa)
labels=(--label "Standard MHA" --label "LRKV (r=2)" --label "LRKV (r=8)" --label "MQA" --label "MLA"
        --label "GQA")
"$kvrank" analyze "${models[@]}" "${labels[@]}" --repr qk,k --with-baseline --similarity \
  --format json -o "$out/tiny.json" -q
"$kvrank" plot "$out/tiny.json=Tiny models" -o "$out/effective-rank.svg" --cols 2 --share-y
"$kvrank" plot "$out/tiny.json=Tiny models" -o "$out/effective-rank.pdf" --size page --share-y
"$kvrank" plot "$out/tiny.json" --heatmap 3 --model "MQA" -o "$out/heatmap-mqa-layer3.svg"
"$kvrank" analyze data/tiny-steps/*/checkpoint-*/ --repr qk,k --format json \
  -o "$out/training.json" -q
"$kvrank" plot "$out/training.json" --over-steps layers --cols 2 --legend right \
  -o "$out/training-erank.svg" --title "Effective rank over training"
"$kvrank" plot "$out/training.json" --over-steps heatmap --cols 2 -o "$out/training-heatmap.svg"
"$kvrank" plan data/tiny/mha --kv-heads 4 --format json -o "$out/plan-mha.json" -q
"$kvrank" plot "$out/plan-mha.json" -o "$out/plan-mha.svg" \
  --title "data/tiny/mha → 4 KV heads (refit)"
echo "wrote $out/: tiny.json, effective-rank.svg, effective-rank.pdf, heatmap-mqa-layer3.svg," \
  "training.json, training-erank.svg, training-heatmap.svg, plan-mha.json, plan-mha.svg" >&2
