#!/usr/bin/env bash
# Usage: bench/train/stop_latency.sh CHEXSCALE_BIN OUT_DIR [ROUNDS]: how long `chexscale train`
# under `chexscale launch --nproc-per-node 2` takes from a SIGTERM to the launcher to its exit (75),
# and how many steps the stop loses, for a tiny run (ResNet-18, 32 px, batch 8) and the demo's
# DenseNet-121 step (96 px images, 80 px crops, batch 16). Each round signals at a random moment
# after the third logged step, then resumes the run (--resume auto) and checks that it continues
# at the step after the stop checkpoint. Prints one line per round.
set -euo pipefail
bin=$(realpath "$1") out=$2 rounds=${3:-3}
mkdir -p "$out"
export OMP_NUM_THREADS=1
"$bin" synth --out "$out/data" --images 600 --size 96 --seed 1 >"$out/synth.log" 2>&1
common=(--data "$out/data" --epochs 2 --loader-threads 1 --val-threads 1 --intra-op-threads 1
  --log-every 1)
tiny=(--arch resnet18 --image-size 32 --crop-size 32 --batch-size 8)
demo=(--arch densenet121 --image-size 96 --crop-size 80 --batch-size 16)

now() { date +%s.%N; }
steps_logged() {
  [ -f "$1/metrics.jsonl" ] || { echo 0; return; }
  jq -s '[.[] | select(.type == "step")] | length' "$1/metrics.jsonl" 2>/dev/null || echo 0
}

for r in $(seq 1 "$rounds"); do
  for name in tiny demo; do
    declare -n model=$name
    run=$out/$name-r$r
    "$bin" launch --nproc-per-node 2 -- train "${common[@]}" "${model[@]}" --out "$run" \
      >"$run.log" 2>&1 &
    launcher=$!
    until [ "$(steps_logged "$run")" -ge 3 ]; do sleep 0.05; done
    sleep "0.$((RANDOM % 10))"
    sent=$(now)
    kill -TERM "$launcher"
    status=0
    wait "$launcher" || status=$?
    ended=$(now)
    stop=$(grep -o 'stopping at step [0-9]*' "$run.log" | head -n 1 | grep -o '[0-9]*$')
    trained=$(jq -s '[.[] | select(.type == "step") | .step] | max' "$run/metrics.jsonl")
    "$bin" launch --nproc-per-node 2 -- train "${common[@]}" "${model[@]}" --out "$run" \
      --resume auto --max-steps $((stop + 1)) >"$run.resume.log" 2>&1
    next=$(jq -s '[.[] | select(.type == "step") | .step] | max' "$run/metrics.jsonl")
    echo "$name round $r: exit $status, signal to exit" \
      "$(python3 -c "print(f'{$ended - $sent:.2f}')") s, last step logged $trained," \
      "checkpoint at step $stop, the resumed run's next step $next" \
      "(steps lost: $((trained - stop)))"
  done
done
