#!/usr/bin/env bash
# The main job: set up, build, and analyse the embedded demo models (data/tiny/*, one trained tiny
# language model per attention variant), printing the table and drawing the figure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build >/dev/null
mkdir -p out
build/kvrank analyze data/tiny/* --with-baseline
build/kvrank analyze data/tiny/* --with-baseline --similarity --format json -o out/tiny.json
build/kvrank plot out/tiny.json -o out/effective-rank.svg --title "Tiny models, one per attention variant"
echo "wrote out/tiny.json and out/effective-rank.svg" >&2
