#!/usr/bin/env bash
# One worker, chexscale bench against the PyTorch peer (bench/peer/ddp_bench.py), run after run
# in alternating rounds so both see the same machine: images/s per architecture and --amp mode.
#
# Usage: bench/train/single_worker.sh [BUILD_DIR] [OUT_DIR]        (defaults: build, runs/single)
# Environment (defaults): ARCHS ("resnet18 densenet121"), AMPS ("off bf16"), ROUNDS (2),
#   IMAGE_SIZE (128), BATCH (8), STEPS (16), WARMUP (2), THREADS (1), PYTHON (/usr/bin/python3).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$here/build}"
out="${2:-$here/runs/single}"
bin="$build/src/cli/chexscale"
[ -x "$bin" ] || { echo "single_worker.sh: no chexscale binary at $bin" >&2; exit 2; }
# shellcheck source=bench/peer/openblas_env.sh
. "$here/bench/peer/openblas_env.sh"
use_chexscale_openblas_kernels "$bin"  # the peer multiplies with chexscale's OpenBLAS kernels
mkdir -p "$out"
common=(--image-size "${IMAGE_SIZE:-128}" --batch-size "${BATCH:-8}" --steps "${STEPS:-16}"
  --warmup-steps "${WARMUP:-2}" --threads "${THREADS:-1}")
# "| chexscale | PyTorch | ratio |" cells of one configuration.
cells() {
  "${PYTHON:-/usr/bin/python3}" - "$1" "$2" <<'PYEOF'
import json, sys
c, p = (json.load(open(f))["images_per_sec"] for f in sys.argv[1:3])
print(f"{c:.2f} | {p:.2f} | {c / p:.3f}")
PYEOF
}
echo "| round | arch | amp | chexscale img/s | PyTorch img/s | ratio |"
echo "|---|---|---|---|---|---|"
for round in $(seq "${ROUNDS:-2}"); do
  for amp in ${AMPS:-off bf16}; do
    for arch in ${ARCHS:-resnet18 densenet121}; do
      stem="$out/r$round-$arch-$amp"
      "$bin" bench --arch "$arch" --amp "$amp" "${common[@]}" --json "$stem-chexscale.json" \
        >"$stem-chexscale.log" 2>&1
      "${PYTHON:-/usr/bin/python3}" "$here/bench/peer/ddp_bench.py" --arch "$arch" --amp "$amp" \
        "${common[@]}" --json "$stem-pytorch.json" >"$stem-pytorch.log" 2>&1
      echo "| $round | $arch | $amp | $(cells "$stem-chexscale.json" "$stem-pytorch.json") |"
    done
  done
done
