#!/usr/bin/env bash
# How fixed a fixed-speed lab worker is: the median step time of one `chexscale bench` worker in
# a CPU cgroup with a quota of C cores (lab/cpu_quota.sh), alone and then beside N other such
# workers (the rest of a layout: 7 for 2x4) and busy loops outside the quotas, and their ratio;
# the same without quotas for comparison. No network: the workers are independent one-worker
# benches.
#
# Usage: bench/simulate/fixed_speed.sh [options]
#   --worker-cpu C      the quota of each worker, in cores                            [0.4]
#   --arch A --image-size S --batch B --steps K --warmup W
#                       the bench workload (one thread)            [densenet121, 64, 8, 10, 2]
#   --others N          other workers beside the measured one in the loaded run      [1]
#   --loops N           busy loops beside the workers in the loaded run               [2]
#   --no-baseline       skip the runs without quotas
#   --out DIR           bench files and results.tsv                 [runs/fixed-speed]
#   --bin PATH          chexscale binary               [$CHEXSCALE_BIN or build/src/cli/chexscale]
# Needs root (cgroups). results.tsv: mode (quota or none), run (alone or loaded), median step s;
# the last lines print the loaded/alone ratio of each mode.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lab="$here/../../lab"
# shellcheck source=lab/lib.sh
. "$lab/lib.sh"
# shellcheck source=lab/cpu_quota.sh
. "$lab/cpu_quota.sh"

worker_cpu=0.4 arch=densenet121 image_size=64 batch=8 steps=10 warmup=2 loops=2 baseline=1 others=1
out=runs/fixed-speed bin="${CHEXSCALE_BIN:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --worker-cpu) worker_cpu="$2"; shift 2 ;;
    --arch) arch="$2"; shift 2 ;;
    --image-size) image_size="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --loops) loops="$2"; shift 2 ;;
    --others) others="$2"; shift 2 ;;
    --no-baseline) baseline=0; shift ;;
    --out) out="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) lab_die "unknown option '$1' (see bench/simulate/fixed_speed.sh --help)" ;;
  esac
done
[ -n "$bin" ] || bin="$here/../../build/src/cli/chexscale"
[ -x "$bin" ] || lab_die "chexscale binary '$bin' not found: build it or pass --bin / CHEXSCALE_BIN"
command -v jq >/dev/null || lab_die "'jq' not found (Debian package jq)"
[[ "$loops" =~ ^[0-9]+$ ]] || lab_die "--loops must be a whole number, not '$loops'"
[[ "$others" =~ ^[1-9][0-9]*$ ]] || lab_die "--others must be a whole number >= 1, not '$others'"
LAB_PREFIX="${LAB_PREFIX:-chxspeed}"
cpu_quota_init "$worker_cpu"
mkdir -p "$out"
loop_pids=() bg_pids=()
on_exit() {
  stop_others quota
  cpu_quota_cleanup
}
trap on_exit EXIT
for ((i = 0; i <= others; i++)); do cpu_quota_create "w$i"; done

# Sets cmd to the bench command of the workload into DIR with N timed steps.
bench_cmd() {
  cmd=("$bin" bench --arch "$arch" --image-size "$image_size" --batch-size "$batch" --threads 1
    --steps "$2" --warmup-steps "$warmup" --out "$1")
}

median_step() { jq .step_time_s.median "$1/bench.json"; }

# Stops the other workers (started in groups w1..wN, or without one) and the busy loops.
stop_others() {
  local p procs i
  for ((i = 1; i <= others; i++)); do
    procs="$(cpu_quota_dir "$cpu_quota_cpu_root" "w$i")/cgroup.procs"
    if [ "$1" = quota ] && [ -f "$procs" ]; then
      while read -r p; do kill "$p" 2>/dev/null || true; done <"$procs"
    fi
  done
  for p in "${loop_pids[@]}" "${bg_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  loop_pids=() bg_pids=()
}

echo -e "mode\trun\tmedian_step_s" >"$out/results.tsv"
# MODE quota: every worker in its group (w0 measured, w1..wN beside it); MODE none: no quotas.
measure() {
  local mode="$1" i cmd
  local -a run=()
  [ "$mode" = none ] || run=(cpu_quota_run w0)
  bench_cmd "$out/$mode-alone" "$steps"
  "${run[@]}" "${cmd[@]}" >"$out/$mode-alone.log" 2>&1
  echo -e "$mode\talone\t$(median_step "$out/$mode-alone")" >>"$out/results.tsv"
  # The others run three times as many steps, started first, so that they cover the whole run.
  local o
  for ((o = 1; o <= others; o++)); do
    bench_cmd "$out/$mode-other$o" $((3 * steps))
    if [ "$mode" = quota ]; then
      cpu_quota_run "w$o" "${cmd[@]}" >"$out/$mode-other$o.log" 2>&1 &
    else
      "${cmd[@]}" >"$out/$mode-other$o.log" 2>&1 &
    fi
    bg_pids+=($!)
  done
  for ((i = 0; i < loops; i++)); do
    bash -c 'while :; do :; done' &
    loop_pids+=($!)
  done
  sleep $((2 + others))  # past the others' start-up (model build), into their steps
  bench_cmd "$out/$mode-loaded" "$steps"
  "${run[@]}" "${cmd[@]}" >"$out/$mode-loaded.log" 2>&1
  stop_others "$mode"
  echo -e "$mode\tloaded\t$(median_step "$out/$mode-loaded")" >>"$out/results.tsv"
}

measure quota
[ "$baseline" = 0 ] || measure none
cat "$out/results.tsv"
awk -F'\t' 'NR > 1 { t[$1, $2] = $3; m[$1] = 1 }
  END { for (k in m) printf "%s: loaded / alone = %.4f\n", k, t[k, "loaded"] / t[k, "alone"] }' \
  "$out/results.tsv"
