#!/bin/sh
# Data-path benchmark, side by side on one core: chexscale (bench_data) and the PyTorch reference
# (torchvision_peer.py) on the same 1024x1024 synthetic X-ray PNGs and their shards. Rates per
# second of wall time and per second of process CPU time (the per-core cost, which other
# processes on a shared machine disturb much less).
# Usage: bench/data/run.sh BUILD_DIR [WORK_DIR] [IMAGES]
set -eu
build=${1:?usage: run.sh BUILD_DIR [WORK_DIR] [IMAGES]}
work=${2:-/tmp/chexscale-bench-data}
images=${3:-200}
here=$(cd "$(dirname "$0")" && pwd)
# Interleaved: ours, peer, ours, peer; each side's best rate of its two runs is compared, so
# that a burst of load on a shared machine does not favour either side.
# bench_data synthesises the 1024x1024 PNGs and prepares the shards when they are absent.
ours1=$("$build/bench/micro/data/bench_data" --data "$work/data" --shards "$work/shards" --images "$images" | tee /dev/stderr | tail -1)
peer1=$(/usr/bin/python3 "$here/torchvision_peer.py" --data "$work/data" --images "$images")
ours2=$("$build/bench/micro/data/bench_data" --data "$work/data" --shards "$work/shards" --images "$images" | tee /dev/stderr | tail -1)
peer2=$(/usr/bin/python3 "$here/torchvision_peer.py" --data "$work/data" --images "$images")
/usr/bin/python3 - "$ours1" "$ours2" "$peer1" "$peer2" <<'PY'
import json, sys
o1, o2, p1, p2 = (json.loads(a) for a in sys.argv[1:])
best = lambda a, b, k: max(a[k], b[k])
rows = [  # label, ours (wall, CPU), peer (wall, CPU): best of the two runs of each side
    ("PNG decode alone: chexscale / PIL", "decode", "pil_decode"),
    ("PNG -> 224 tensor: chexscale / torchvision", "pipeline", "torchvision_pipeline"),
    ("JPEG decode alone: chexscale / PIL", "jpeg_decode", "pil_jpeg_decode"),
    ("JPEG -> 224 tensor: chexscale / torchvision", "jpeg_pipeline", "torchvision_jpeg_pipeline"),
]
print("one core, best of 2 interleaved runs each      wall images/s      CPU images/s")
for name, k in [("chexscale decode (fast path + libspng)", "decode"),
                ("chexscale decode, libspng only", "spng_decode"),
                ("chexscale PNG -> 224 tensor", "pipeline"),
                ("chexscale JPEG decode (full size)", "jpeg_decode"),
                ("chexscale JPEG -> 224 tensor", "jpeg_pipeline")]:
    print(f"{name:<46} {best(o1, o2, k + '_per_s'):10.1f} {best(o1, o2, k + '_per_cpu_s'):17.1f}")
for name, k in [("PIL decode alone", "pil_decode"),
                ("torchvision pipeline + DataLoader (0 workers)", "torchvision_pipeline"),
                ("PIL JPEG decode alone", "pil_jpeg_decode"),
                ("torchvision JPEG pipeline + DataLoader", "torchvision_jpeg_pipeline")]:
    print(f"{name:<46} {best(p1, p2, k + '_per_s'):10.1f} {best(p1, p2, k + '_per_cpu_s'):17.1f}")
for name, k in [("chexscale Loader, loose PNGs, 1 thread", "loader_loose"),
                ("chexscale Loader, shards, 1 thread", "loader_shards")]:
    print(f"{name:<46} {best(o1, o2, k + '_per_s'):10.1f}")
print("ratios                                              wall               CPU")
for name, ours, peer in rows:
    wall = best(o1, o2, ours + "_per_s") / best(p1, p2, peer + "_per_s")
    cpu = best(o1, o2, ours + "_per_cpu_s") / best(p1, p2, peer + "_per_cpu_s")
    print(f"{name:<46} {wall:9.2f}x {cpu:16.2f}x")
wall = best(o1, o2, "decode_per_s") / best(o1, o2, "spng_decode_per_s")
cpu = best(o1, o2, "decode_per_cpu_s") / best(o1, o2, "spng_decode_per_cpu_s")
print(f"{'chexscale decode / libspng-only decode':<46} {wall:9.2f}x {cpu:16.2f}x")
# Ratios between two of our own measurements are taken within each run.
print(f"{'chexscale pipeline time / decode time':<46} "
      f"{o1['pipeline_over_decode_time']:.2f}x {o2['pipeline_over_decode_time']:.2f}x (each run)   "
      f"{o1['pipeline_over_decode_cpu_time']:.2f}x {o2['pipeline_over_decode_cpu_time']:.2f}x")
print(f"{'chexscale JPEG pipeline time / decode time':<46} "
      f"{o1['jpeg_pipeline_over_decode_cpu_time']:.2f}x {o2['jpeg_pipeline_over_decode_cpu_time']:.2f}x (each run, CPU)")
print(f"{'chexscale Loader shards / loose':<46} "
      f"{o1['loader_shards_per_s'] / o1['loader_loose_per_s']:.1f}x "
      f"{o2['loader_shards_per_s'] / o2['loader_loose_per_s']:.1f}x (each run)")
PY
