#!/usr/bin/env bash
# Usage: bench/train/powersgd_side_by_side.sh CHEXSCALE_BIN OUT_DIR [ARCH] [ROUNDS]: 2 workers on
# loopback (Gloo), chexscale bench against the PyTorch DDP peer (bench/peer/ddp_bench.py), each
# with plain allreduce and with PowerSGD rank 4 (start step 10, so the 11 warm-up steps include
# the plain ones and every timed step compresses), run after run. Prints images/s per run.
# BUCKET_MB (default 1000) for both: DDP's powerSGD_hook on Gloo in Debian's torch 1.13 aborted
# with 25 MiB buckets (gloo 'op.preamble.length <= op.nbytes': the ranks' allreduces out of step);
# with 1000 it runs.
set -euo pipefail
bin=$1 out=$2 arch=${3:-resnet50} rounds=${4:-1} bucket_mb=${BUCKET_MB:-1000}
here=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/peer/openblas_env.sh
. "$here/bench/peer/openblas_env.sh"
use_chexscale_openblas_kernels "$bin"  # the peer multiplies with chexscale's OpenBLAS kernels
mkdir -p "$out"
common=(--arch "$arch" --image-size 64 --batch-size 4 --steps 5 --warmup-steps 11 --threads 1
  --bucket-mb "$bucket_mb")
for r in $(seq 1 "$rounds"); do
  for mode in none powersgd:4; do
    tag=$(echo "$mode" | tr ':' '-')
    OMP_NUM_THREADS=1 "$bin" bench "${common[@]}" --workers 2 --grad-compression "$mode" \
      --powersgd-start-step 10 --out "$out/chexscale-$tag-r$r" > "$out/chexscale-$tag-r$r.log" 2>&1
    c=$(python3 -c "import json; print(json.load(open('$out/chexscale-$tag-r$r/bench-w2.json'))['images_per_sec'])")
    OMP_NUM_THREADS=1 /usr/bin/python3 "$here/bench/peer/ddp_bench.py" --workers 2 "${common[@]}" \
      --grad-compression "$mode" --powersgd-start-step 10 --json "$out/ddp-$tag-r$r.json" \
      > "$out/ddp-$tag-r$r.log" 2>&1
    d=$(python3 -c "import json; print(json.load(open('$out/ddp-$tag-r$r.json'))['images_per_sec'])")
    echo "round $r $arch $mode chexscale $c images/s, ddp $d images/s"
  done
done
