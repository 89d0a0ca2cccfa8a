#!/usr/bin/env bash
# How fixed a fixed-speed lab worker is: the step times of one `chexscale bench` worker in a CPU
# cgroup with a quota of C cores (lab/cpu_quota.sh), alone and beside N other such workers (the
# rest of a layout: 7 for 2x4) and busy loops outside the quotas, and their ratio; the same
# without quotas for comparison. No network: the workers are independent one-worker benches.
#
# This machine's speed drifts by 10-30 % over minutes, more than the effect measured, so alone
# and beside are not two runs minutes apart: the measured worker runs once, the others run beside
# it throughout, and every WINDOW seconds they are all stopped (SIGSTOP) or let go on (SIGCONT).
# Each timed step (from the worker's --timeline) falls in a window with the others running
# ("loaded"), one with them stopped ("alone"), or across a switch (not counted); the ratio is
# the median loaded step over the median alone step, windows seconds apart.
#
# Usage: bench/simulate/fixed_speed.sh [options]
#   --worker-cpu C      the quota of each worker, in cores                            [0.4]
#   --arch A --image-size S --batch B --steps K --warmup W
#                       the bench workload (one thread)            [densenet121, 64, 8, 24, 2]
#   --others N          other workers beside the measured one                         [1]
#   --loops N           busy loops beside the workers (stopped and let go with them)  [2]
#   --window S          seconds between switches: a few steps' time                   [10]
#   --pin CPUS          pin every worker to these CPUs (a taskset list, such as 0)
#   --no-baseline       skip the run without quotas
#   --out DIR           bench files and results.tsv                 [runs/fixed-speed]
#   --bin PATH          chexscale binary               [$CHEXSCALE_BIN or build/src/cli/chexscale]
# Needs root (cgroups). results.tsv: mode (quota or none), step, state (alone, loaded or
# switched), step s; the last lines print, per mode, the steps counted and the loaded / alone
# ratio of their medians.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lab="$here/../../lab"
# shellcheck source=lab/lib.sh
. "$lab/lib.sh"
# shellcheck source=lab/cpu_quota.sh
. "$lab/cpu_quota.sh"

worker_cpu=0.4 arch=densenet121 image_size=64 batch=8 steps=24 warmup=2 loops=2 baseline=1 others=1
window=10 pin="" out=runs/fixed-speed bin="${CHEXSCALE_BIN:-}"
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
    --window) window="$2"; shift 2 ;;
    --pin) pin="$2"; shift 2 ;;
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
[[ "$window" =~ ^[1-9][0-9]*$ ]] || lab_die "--window must be a whole number of seconds >= 1, not '$window'"
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || lab_die "--steps must be a whole number >= 1, not '$steps'"
[ -z "$pin" ] || taskset -c "$pin" true 2>/dev/null ||
  lab_die "--pin '$pin': not a CPU list taskset takes here (this machine's CPUs: 0-$(($(nproc) - 1)))"
LAB_PREFIX="${LAB_PREFIX:-chxspeed}"
cpu_quota_init "$worker_cpu"
mkdir -p "$out"
loop_pids=() bg_pids=() switcher_pid="" measured_pid=""
on_exit() {
  local p
  [ -z "$switcher_pid" ] || kill "$switcher_pid" 2>/dev/null || true
  # the measured worker too, when a signal ends the script mid-run (without quotas it is
  # measured_pid; with them, what is in its group w0)
  for p in $measured_pid $(group_pids w0); do end_process "$p"; done
  stop_others quota
  cpu_quota_cleanup
}
trap on_exit EXIT

# The processes in worker group NAME (w0 the measured worker, w1..wN the others); none once it is
# gone.
group_pids() { cat "$(cpu_quota_dir "$cpu_quota_cpu_root" "$1")/cgroup.procs" 2>/dev/null || true; }

# Ends process PID, also when it is stopped.
end_process() {
  kill -CONT "$1" 2>/dev/null || true
  kill "$1" 2>/dev/null || true
}
for ((i = 0; i <= others; i++)); do cpu_quota_create "w$i"; done

# Sets cmd to the bench command of the workload into DIR with N timed steps.
bench_cmd() {
  cmd=()
  [ -z "$pin" ] || cmd=(taskset -c "$pin")
  cmd+=("$bin" bench --arch "$arch" --image-size "$image_size" --batch-size "$batch" --threads 1
    --steps "$2" --warmup-steps "$warmup" --out "$1")
}

# Seconds since boot, the clock of bench's --timeline (steady_clock; /proc/uptime counts the same
# on a machine that never suspends, and the run checks that they agree).
now_s() {
  local up _
  read -r up _ </proc/uptime
  echo "$up"
}

# The processes to stop and let go: the others (in groups w1..wN, or started without one) and the
# busy loops.
others_pids() {
  local i p
  if [ "$1" = quota ]; then
    for ((i = 1; i <= others; i++)); do group_pids "w$i"; done
  fi
  for p in "${bg_pids[@]}" "${loop_pids[@]}"; do echo "$p"; done
}

# Switches the others between running and stopped every $window s, from running, appending
# "seconds state" to FILE at each switch, until killed (it leaves them running).
switcher() {
  local mode="$1" file="$2" state=loaded p sig
  trap 'for p in $(others_pids "$mode"); do kill -CONT "$p" 2>/dev/null || true; done; exit 0' TERM
  echo "$(now_s) loaded" >>"$file"
  while :; do
    sleep "$window"
    if [ "$state" = loaded ]; then state=alone sig=STOP; else state=loaded sig=CONT; fi
    for p in $(others_pids "$mode"); do kill -"$sig" "$p" 2>/dev/null || true; done
    echo "$(now_s) $state" >>"$file"
  done
}

# Stops the other workers (started in groups w1..wN, or without one) and the busy loops.
stop_others() {
  local p
  for p in $(others_pids "$1"); do end_process "$p"; done
  wait 2>/dev/null || true
  loop_pids=() bg_pids=()
}

echo -e "mode\tstep\tstate\tstep_s" >"$out/results.tsv"
# MODE quota: every worker in its group (w0 measured, w1..wN beside it); MODE none: no quotas.
measure() {
  local mode="$1" i o
  local -a run=()
  [ "$mode" = none ] || run=(cpu_quota_run w0)
  # The others run twice as many steps as the measured worker (they are stopped half the time)
  # and are started first, so that they cover its whole run.
  for ((o = 1; o <= others; o++)); do
    bench_cmd "$out/$mode-other$o" $((2 * steps + 2 * warmup))
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
  rm -f "$out/$mode-switches.txt"
  switcher "$mode" "$out/$mode-switches.txt" &
  switcher_pid=$!
  bench_cmd "$out/$mode-measured" "$steps"
  cmd+=(--timeline "$out/$mode-measured/timeline.json")
  # in the background and waited for, so that a signal to the script ends it at once
  "${run[@]}" "${cmd[@]}" >"$out/$mode-measured.log" 2>&1 &
  measured_pid=$!
  wait "$measured_pid" || lab_die "the measured worker failed; see $out/$mode-measured.log"
  measured_pid=""
  kill "$switcher_pid"
  wait "$switcher_pid" 2>/dev/null || true
  switcher_pid=""
  echo "$(now_s) end" >>"$out/$mode-switches.txt"
  stop_others "$mode"
  # Each timed step's span: from its first phase's start to its last phase's end (microseconds).
  jq -r --argjson warmup "$warmup" '[.traceEvents[] | select(.ph == "X" and .cat == "step")]
      | group_by(.args.step)[] | select(.[0].args.step >= $warmup)
      | "\(.[0].args.step) \(map(.ts) | min) \(map(.ts + .dur) | max)"' \
    "$out/$mode-measured/timeline.json" >"$out/$mode-steps.txt"
  [ -s "$out/$mode-steps.txt" ] || lab_die "no timed steps in $out/$mode-measured/timeline.json"
  awk -v mode="$mode" 'NR == FNR { at[++n] = $1; state[n] = $2; next }
    {
      begin = $2 / 1e6; end = $3 / 1e6
      if (begin < at[1] - 1 || end > at[n] + 1) {
        printf "fixed_speed: step %d (%.1f-%.1f s) lies outside the switches (%.1f-%.1f s): the timeline and /proc/uptime disagree\n", $1, begin, end, at[1], at[n] > "/dev/stderr"
        exit 1
      }
      s = "switched"
      for (k = 1; k < n; k++)
        if (begin >= at[k] && end <= at[k + 1]) s = state[k]
      printf "%s\t%d\t%s\t%.6f\n", mode, $1, s, end - begin
    }' "$out/$mode-switches.txt" "$out/$mode-steps.txt" >>"$out/results.tsv" ||
    lab_die "could not place the steps of $mode in its switches ($out/$mode-switches.txt)"
}

measure quota
[ "$baseline" = 0 ] || measure none
cat "$out/results.tsv"
awk -F'\t' 'function median(list, count,   i, j, x) {
      for (i = 1; i <= count; i++) for (j = i + 1; j <= count; j++)
        if (list[j] < list[i]) { x = list[i]; list[i] = list[j]; list[j] = x }
      return count % 2 ? list[(count + 1) / 2] : (list[count / 2] + list[count / 2 + 1]) / 2
    }
  NR > 1 && $3 != "switched" { m[$1] = 1; c = ++count[$1, $3]; v[$1, $3, c] = $4 }
  END {
    for (k in m) {
      na = count[k, "alone"]; nl = count[k, "loaded"]
      if (na == 0 || nl == 0) {
        printf "%s: %d alone and %d loaded steps: too few to compare (more --steps, or a --window of several steps)\n", k, na, nl
        bad = 1; continue
      }
      delete a; delete l
      for (i = 1; i <= na; i++) a[i] = v[k, "alone", i]
      for (i = 1; i <= nl; i++) l[i] = v[k, "loaded", i]
      ma = median(a, na); ml = median(l, nl)
      printf "%s: alone %.3f s (%d steps), loaded %.3f s (%d steps): loaded / alone = %.4f\n", k, ma, na, ml, nl, ml / ma
    }
    exit bad
  }' "$out/results.tsv"
