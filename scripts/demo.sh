#!/usr/bin/env bash
# `make demo`: the whole job in a few minutes on a laptop -- a synthetic ChestX-ray14-format data
# set, DenseNet-121 trained by 2 local workers through `chexscale launch`, evaluation with the
# per-class AUROC table, and a class activation map. Usage: scripts/demo.sh [BUILD_DIR]
set -euo pipefail

BUILD_DIR=${1:-build}
BIN="$BUILD_DIR/src/cli/chexscale"
[ -x "$BIN" ] || BIN="$BUILD_DIR/chexscale"
if [ ! -x "$BIN" ]; then
  echo "demo: $BUILD_DIR has no chexscale binary; run 'make build' first" >&2
  exit 1
fi
DEMO_DIR=${DEMO_DIR:-demo}
DATA="$DEMO_DIR/data"
RUN="$DEMO_DIR/run"
EVAL="$DEMO_DIR/eval"
# Sizes chosen so that two CPU workers finish in a few minutes and the model clearly learns.
IMAGES=${DEMO_IMAGES:-600}
SIZE=${DEMO_SIZE:-96}
CROP=${DEMO_CROP:-80}
EPOCHS=${DEMO_EPOCHS:-3}
BATCH=${DEMO_BATCH:-16}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

rm -rf "$DEMO_DIR"
mkdir -p "$DEMO_DIR"
start=$(date +%s)

echo "== 1/4 synthetic ChestX-ray14-format data: $IMAGES images of ${SIZE}x${SIZE} -> $DATA"
"$BIN" synth --out "$DATA" --images "$IMAGES" --size "$SIZE" --seed 1

echo "== 2/4 train DenseNet-121 with 2 workers (chexscale launch), $EPOCHS epochs -> $RUN"
"$BIN" launch --nproc-per-node 2 -- train --data "$DATA" --out "$RUN" --arch densenet121 \
  --image-size "$SIZE" --crop-size "$CROP" --batch-size "$BATCH" --epochs "$EPOCHS" \
  --lr 1e-3 --loader-threads 1 --val-threads 1 --log-every 5 --intra-op-threads 1

echo "== 3/4 evaluate the best checkpoint on the test split -> $EVAL"
"$BIN" eval --checkpoint "$RUN/checkpoints/best.json" --data "$DATA" --split test --out "$EVAL"

echo "== 4/4 predict one test image and draw its class activation map"
IMAGE=$(awk -F, 'NR == FNR { test[$1] = 1; next }
  FNR > 1 && ($1 in test) && $2 != "No Finding" { print $1; exit }' \
  "$DATA/test_list.txt" "$DATA/Data_Entry_2017.csv")
"$BIN" predict --checkpoint "$RUN/checkpoints/best.json" --image "$DATA/images/$IMAGE" \
  --cam "$DEMO_DIR/cam.png"
echo "  (ground truth of $IMAGE: $(awk -F, -v img="$IMAGE" '$1 == img { print $2 }' \
  "$DATA/Data_Entry_2017.csv"))"

echo
echo "demo finished in $(( $(date +%s) - start )) s. Where everything is:"
echo "  data set         $DATA (images/, Data_Entry_2017.csv, split lists)"
echo "  training run     $RUN (config.yaml, metrics.jsonl, checkpoints/best.json)"
echo "  evaluation       $EVAL/metrics.json, $EVAL/predictions.csv"
echo "  heat map         $DEMO_DIR/cam.png (the X-ray and its class activation map side by side)"
