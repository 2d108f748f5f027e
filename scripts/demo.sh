#!/usr/bin/env bash
# The main job, end to end: set up, build the bundled envs, run the bundled local teacher on them,
# select, export, report. Re-running resumes: finished envs, rollouts and verdicts are not redone.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${AREX_DEMO_OUT:-demo}"
CONFIG=(-c configs/demo.yaml)
started=$(date +%s)

bash scripts/setup.sh
step() { echo; echo "[arex demo] $*"; }

step "1/5 build-envs: bundled sources -> $OUT/envs"
# A rejected env is reported (build-report.md) and the rest go on.
arex build-envs envs/* --out "$OUT/envs" "${CONFIG[@]}" || echo "[arex demo] some envs were rejected: see $OUT/envs/build-report.md"

step "2/5 rollout: the local teacher, $OUT/envs -> $OUT/rollouts"
arex rollout --envs "$OUT/envs" --out "$OUT/rollouts" --samples "${AREX_DEMO_SAMPLES:-1}" --concurrency 2 "${CONFIG[@]}"

step "3/5 select: re-grade and keep -> $OUT/selected"
arex select --store "$OUT/rollouts" --envs "$OUT/envs" --out "$OUT/selected" "${CONFIG[@]}"

step "4/5 export: parquet shards + dataset card -> $OUT/dataset"
arex export --selection "$OUT/selected" --envs "$OUT/envs" --out "$OUT/dataset" "${CONFIG[@]}"

step "5/5 report: curves, endings, drops and a page per trajectory -> $OUT/report"
arex report "$OUT/rollouts" --selection "$OUT/selected" --out "$OUT/report"

echo
echo "[arex demo] done in $(( $(date +%s) - started ))s"
echo "[arex demo] shards: $(cd "$OUT/dataset" && ls -d */*.parquet 2>/dev/null | sed "s|^|$OUT/dataset/|" | tr '\n' ' ')"
echo "[arex demo] card:   $OUT/dataset/README.md"
echo "[arex demo] push:   arex push --dataset $OUT/dataset --repo-id <you>/<name>"
echo "[arex demo] report: $OUT/report/report.html"
