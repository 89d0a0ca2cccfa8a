#!/usr/bin/env bash
# Usage: bench/train/powersgd_accuracy.sh CHEXSCALE_BIN OUT_DIR [ARCHS] [SEEDS] [MODES]
# PowerSGD's effect on accuracy: the same short synthetic training run (the demo's workload: 600
# synthetic ChestX-ray14 images of 96 px, crop 80, batch 16 per worker, 3 epochs, 2 workers over
# Gloo, Adam at --lr 1e-3) with plain allreduce and with PowerSGD of each rank, for each model and seed.
# Prints one line per run and, per model and mode, the mean over the seeds of the final epoch's
# validation loss and mean AUROC, and their differences from plain allreduce (`none`).
#   ARCHS  comma list                                   [densenet121,resnet50]
#   SEEDS  comma list of training seeds                 [1,2,3]
#   MODES  comma list of --grad-compression values      [none,powersgd:1,powersgd:2,powersgd:4,powersgd:8]
# IMAGES, SIZE, CROP, EPOCHS, BATCH override the workload, START_STEP PowerSGD's
# --powersgd-start-step (default 10, the flag's default), OPTIMIZER (adam) and LR (1e-3) train's
# --optimizer and --lr (SGD takes its default momentum, 0.9). Runs that already have a final epoch
# record in OUT_DIR are kept, so an interrupted study continues where it stopped.
set -euo pipefail
bin=$1 out=$2
archs=${3:-densenet121,resnet50} seeds=${4:-1,2,3}
modes=${5:-none,powersgd:1,powersgd:2,powersgd:4,powersgd:8}
images=${IMAGES:-600} size=${SIZE:-96} crop=${CROP:-80} epochs=${EPOCHS:-3} batch=${BATCH:-16}
start_step=${START_STEP:-10} optimizer=${OPTIMIZER:-adam} lr=${LR:-1e-3}
export OMP_NUM_THREADS=1
mkdir -p "$out"
data="$out/data"
[ -f "$data/Data_Entry_2017.csv" ] ||
  "$bin" synth --out "$data" --images "$images" --size "$size" --seed 1 >"$out/synth.log" 2>&1

final_epoch() { # metrics.jsonl -> "val_loss mean_auroc" of the last epoch record
  jq -rs '[.[] | select(.type == "epoch")] | last | "\(.val_loss) \(.val_auroc.mean)"' "$1"
}

IFS=, read -r -a arch_list <<<"$archs"
IFS=, read -r -a seed_list <<<"$seeds"
IFS=, read -r -a mode_list <<<"$modes"
results="$out/results.tsv"
echo -e "arch\tmode\tseed\tval_loss\tmean_auroc\tseconds" >"$results"
for arch in "${arch_list[@]}"; do
  for seed in "${seed_list[@]}"; do
    for mode in "${mode_list[@]}"; do
      run="$out/runs/$arch-$(echo "$mode" | tr ':' '-')-s$seed"
      if [ ! -f "$run/metrics.jsonl" ] ||
        [ "$(jq -s '[.[] | select(.type == "epoch")] | length' "$run/metrics.jsonl")" != "$epochs" ]; then
        rm -rf "$run"
        mkdir -p "$out/runs"
        start=$SECONDS
        "$bin" launch --nproc-per-node 2 -- train --data "$data" --out "$run" --arch "$arch" \
          --image-size "$size" --crop-size "$crop" --batch-size "$batch" --epochs "$epochs" \
          --optimizer "$optimizer" --lr "$lr" --seed "$seed" --loader-threads 1 --val-threads 1 --intra-op-threads 1 \
          --grad-compression "$mode" --powersgd-start-step "$start_step" >"$run.log" 2>&1 || {
          echo "run $run failed: see $run.log" >&2
          exit 1
        }
        echo "$((SECONDS - start))" >"$run/seconds"
      fi
      read -r loss auroc <<<"$(final_epoch "$run/metrics.jsonl")"
      echo -e "$arch\t$mode\t$seed\t$loss\t$auroc\t$(cat "$run/seconds" 2>/dev/null || echo -)" >>"$results"
      echo "$arch $mode seed $seed: val loss $loss, mean AUROC $auroc"
    done
  done
done

# Per model and mode: means over the seeds, and the differences from `none`.
/usr/bin/python3 - "$results" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
by = {}
for r in rows:
    by.setdefault((r["arch"], r["mode"]), []).append((float(r["val_loss"]), float(r["mean_auroc"])))
print("\n| model | mode | seeds | val loss (mean) | vs none | mean AUROC (mean) | vs none |")
print("|---|---|---|---|---|---|---|")
for (arch, mode), runs in by.items():
    loss = statistics.mean(l for l, _ in runs)
    auroc = statistics.mean(a for _, a in runs)
    base = by.get((arch, "none"))
    if base:
        bl = statistics.mean(l for l, _ in base)
        ba = statistics.mean(a for _, a in base)
        dl, da = f"{100 * (loss - bl) / bl:+.1f} %", f"{auroc - ba:+.4f}"
    else:
        dl = da = "-"
    print(f"| {arch} | {mode} | {len(runs)} | {loss:.4f} | {dl} | {auroc:.4f} | {da} |")
EOF
