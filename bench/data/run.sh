#!/bin/sh
# Data-path benchmark, side by side on one core: chexscale (bench_data) and the PyTorch reference
# (torchvision_peer.py) on the same 1024x1024 synthetic X-ray PNGs and their shards.
# Usage: bench/data/run.sh BUILD_DIR [WORK_DIR] [IMAGES]
set -eu
build=${1:?usage: run.sh BUILD_DIR [WORK_DIR] [IMAGES]}
work=${2:-/tmp/chexscale-bench-data}
images=${3:-200}
here=$(cd "$(dirname "$0")" && pwd)
# bench_data synthesises the 1024x1024 PNGs and prepares the shards when they are absent.
ours0=$("$build/bench/data/bench_data" --data "$work/data" --shards "$work/shards" --images "$images" --repeats 1 | tail -1)
peer=$(/usr/bin/python3 "$here/torchvision_peer.py" --data "$work/data" --images "$images")
ours=$("$build/bench/data/bench_data" --data "$work/data" --shards "$work/shards" --images "$images" | tee /dev/stderr | tail -1)
peer2=$(/usr/bin/python3 "$here/torchvision_peer.py" --data "$work/data" --images "$images")
/usr/bin/python3 - "$ours" "$peer" "$peer2" <<'PY'
import json, sys
ours, p1, p2 = (json.loads(a) for a in sys.argv[1:])
peer = max(p1["torchvision_pipeline_per_s"], p2["torchvision_pipeline_per_s"])
pil = max(p1["pil_decode_per_s"], p2["pil_decode_per_s"])
print(f"PIL decode alone                              {pil:10.1f}")
print(f"torchvision pipeline + DataLoader (0 workers) {peer:10.1f}  (best of the runs before and after)")
print(f"chexscale pipeline / torchvision pipeline     {ours['pipeline_per_s'] / peer:10.2f}x")
print(f"chexscale Loader (loose) / torchvision        {ours['loader_loose_per_s'] / peer:10.2f}x")
print(f"chexscale pipeline time / decode time         {ours['pipeline_over_decode_time']:10.2f}x")
if ours["loader_shards_per_s"]:
    print(f"chexscale Loader shards / loose               {ours['loader_shards_per_s'] / ours['loader_loose_per_s']:10.1f}x")
PY
