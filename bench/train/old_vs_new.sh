#!/usr/bin/env bash
# Usage: bench/train/old_vs_new.sh OLD_BIN NEW_BIN OUT_DIR [ROUNDS]: chexscale bench of two builds,
# run after run (old first in every pair), ResNet-18 64 px batch 8, 1 and 2 workers.
set -euo pipefail
old=$1 new=$2 out=$3 rounds=${4:-3}
mkdir -p "$out"
flags=(bench --arch resnet18 --image-size 64 --batch-size 8 --steps 30 --warmup-steps 3 --threads 1)
for r in $(seq 1 "$rounds"); do
  for w in 1 2; do
    for side in old new; do
      bin=$old; [ $side = new ] && bin=$new
      OMP_NUM_THREADS=1 "$bin" "${flags[@]}" --workers $w --out "$out/$side-r$r-w$w" > "$out/$side-r$r-w$w.log" 2>&1
      ips=$(python3 -c "import json,sys; d=json.load(open('$out/$side-r$r-w$w/bench-w$w.json')); print(d['images_per_sec'])")
      echo "round $r workers $w $side $ips"
    done
  done
done
