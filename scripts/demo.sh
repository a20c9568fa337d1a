#!/usr/bin/env bash
# The main job: set up, build, and analyse the embedded demo models (data/tiny/*, one trained tiny
# language model per attention variant; data/tiny-steps/*, checkpoints of two of them over
# training), printing the table and drawing the README gallery into out/
# (scripts/demo_figures.sh; docs/img/ holds the same figures).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# The demo needs the command only: a new build folder is configured without the tests (their
# packages come with scripts/setup.sh --test); an existing one keeps its choice.
configure=()
[[ -f build/CMakeCache.txt ]] || configure=(-DKVRANK_BUILD_TESTS=OFF)
scripts/build.sh build "${configure[@]}" >&2
mkdir -p out
# In the seed figure's order, with its legend names (LRKV ranks keep the paper's d_h/8 and d_h/2).
build/kvrank analyze data/tiny/mha data/tiny/lrkv-r2 data/tiny/lrkv-r8 data/tiny/mqa data/tiny/mla \
  data/tiny/gqa --label "Standard MHA" --label "LRKV (r=2)" --label "LRKV (r=8)" --label "MQA" \
  --label "MLA" --label "GQA" --with-baseline
scripts/demo_figures.sh build/kvrank out
