#!/bin/sh
# Loader overhead in training when the data is in shards: data wait as a share of step time.
# Synthesises a ChestX-ray14-layout set, prepares shards, runs `chexscale bench` (DenseNet-121)
# on them with 1 and 2 local workers and a timeline, and prints, for each rank, the data wait of
# the median step (as bench.json reports it) and the total data wait over the total step time of
# all timed steps (from the timeline), with the largest single wait.
# Usage: bench/data/train_wait.sh CHEXSCALE_BIN [WORK_DIR] [SHARD_SIZE] [CROP] [STEPS] [IMAGES]
# (defaults: the demo's 96-pixel images and 80-pixel crops, 30 timed steps, 600 images.)
set -eu
bin=${1:?usage: train_wait.sh CHEXSCALE_BIN [WORK_DIR] [SHARD_SIZE] [CROP] [STEPS] [IMAGES]}
work=${2:-/tmp/chexscale-train-wait}
size=${3:-96}
crop=${4:-80}
steps=${5:-30}
images=${6:-600}
data="$work/data$size"
shards="$work/shards$size"
[ -f "$data/Data_Entry_2017.csv" ] || "$bin" synth --out "$data" --images "$images" --size "$size" --seed 1
[ -f "$shards/manifest.json" ] || "$bin" prepare --data "$data" --out "$shards" --size "$size"
for workers in 1 2; do
  out="$work/runs/s$size-c$crop-w$workers"
  rm -rf "$out"
  "$bin" bench --data "$shards" --arch densenet121 --image-size "$crop" --batch-size 16 \
    --steps "$steps" --warmup-steps 3 --threads 1 --loader-threads 1 --workers "$workers" \
    --out "$out" --timeline "$out/timeline.json" >"$out.log" 2>&1 || { cat "$out.log"; exit 1; }
  /usr/bin/python3 - "$out" "$workers" "$crop" <<'PY'
import collections, glob, json, sys
out, workers, crop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
bench = json.load(open(glob.glob(f"{out}/bench*.json")[0]))
warmup = bench["warmup_steps"]
steps = collections.defaultdict(lambda: collections.defaultdict(dict))
for path in glob.glob(f"{out}/timeline*.json"):
    doc = json.load(open(path))
    for e in doc["traceEvents"] if isinstance(doc, dict) else doc:
        if e.get("cat") == "step" and e["args"]["step"] >= warmup:
            steps[e["pid"]][e["args"]["step"]][e["name"]] = e["dur"]
for rank in sorted(bench["per_rank"], key=lambda r: r["rank"]):
    r = rank["rank"]
    median = rank["breakdown_s"]
    waits = [s["data_wait"] for s in steps[r].values()]
    totals = [sum(s.values()) for s in steps[r].values()]
    print(f"densenet121 {crop}px, {workers} worker(s), rank {r}: median step {median['total']:.3f} s, "
          f"its data wait {median['data_wait'] * 1e3:.2f} ms ({100 * median['data_wait'] / median['total']:.2f} %); "
          f"all {len(waits)} timed steps: data wait {sum(waits) / 1e6:.3f} s of {sum(totals) / 1e6:.1f} s "
          f"({100 * sum(waits) / sum(totals):.2f} %), largest {max(waits) / 1e3:.1f} ms")
PY
done
