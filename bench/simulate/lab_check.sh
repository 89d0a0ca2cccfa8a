#!/usr/bin/env bash
# The simulator against the lab: every configuration this machine can run, each predicted by
# `chexscale simulate` from its one-worker compute profile and the commbench profiles of the
# paths alone, then measured by lab/compare.sh (both systems, every layout of nodes x workers), and
# the errors tabulated.
#
# Usage: bench/simulate/lab_check.sh [options]
#   --archs LIST        models                                        [densenet121,resnet50]
#   --caps LIST         comma list of FABRIC/OVERLAY rate pairs (lab/cluster.sh rates; "-" for
#                       uncapped)                          [-/-,1gbit/250mbit,2gbit/500mbit]
#   --variants LIST     engine variants of lab/compare.sh that the simulator has: naive, overlapped,
#                       fp16, powersgd<R> (PowerSGD of rank R on every timed step; needs
#                       --warmup 3 or more)                           [naive,overlapped,fp16]
#   --layouts LIST      NODESxWORKERS layouts of lab/compare.sh --layouts; a layout with several
#                       workers per node adds the loopback inside a node as the path
#                       "intra-node"; one layout per worker count                      [2x1]
#   --rounds N          lab/compare.sh --rounds N (the systems' order alternating); the
#                       measured images/s is the median of the rounds                   [1]
#   --image-size S --batch B --steps K --warmup W
#                       the bench workload (one thread per worker)          [64, 8, 10, 2]
#   --out DIR           profiles/, lab/ (compare.sh's results), sim/, check.tsv, check.md
#                                                                     [runs/simulate-check]
#   --bin PATH          chexscale binary             [$CHEXSCALE_BIN or build/src/cli/chexscale]
#   --worker-cpu C      fixed-speed workers: the compute profile and every measured worker run
#                       in a CPU cgroup of their own with a quota of C cores (lab/cpu_quota.sh,
#                       lab/compare.sh --worker-cpu), so that a profile taken at one load
#                       predicts runs made at another; the commbench profiles' ranks run at the
#                       same quota (a worker's communication is CPU work in its own process),
#                       the kernel's network path outside, and `simulate --cores-per-worker C`
#                       predicts with that CPU for compute and communication     [no quota]
#   --crowded-profile   each layout of W workers in all gets a compute profile of its own, taken
#                       beside W-1 other one-worker benches of the same model (each in a group
#                       of its own at --worker-cpu), so that what the layout's workers share on
#                       this host (caches, memory bandwidth, the two vCPUs' cores) is in the
#                       profile; without it, one profile of one worker alone serves every layout
#   --comm-max SIZE     the largest allreduce of the commbench profiles (commbench -e; the
#                       simulator extends a profile beyond it along its two largest sizes) [64M]
#   --profiles N        take each compute profile N times back to back and predict from the one
#                       of the median step time (the lower middle one for an even N); all N are
#                       kept as <profile>-p<k>.json                                          [3]
#   --predict-only      measure nothing: predict again from the profiles and tabulate against
#                       the measurements already in --out (a changed simulator on recorded runs;
#                       no root needed)
#   --at-runs-speed     with --predict-only, a diagnostic, not a check: each compute profile is
#                       first scaled to the speed of the measured one-worker runs of its model
#                       and cap (the median step of both systems' 1x1 runs), so the errors are
#                       the model's net of the machine's drift between profile and runs; writes
#                       check-at-runs-speed.{tsv,md}, sim-at-runs-speed/ and
#                       predicted-at-runs-speed/, never check.tsv
#
# For each cap: the lab up with it, `commbench --profile` of float32 and of float16 (what fp16
# sends) over the fabric (node namespaces), over the overlay (pod namespaces) and, for layouts of
# several workers per node, over the loopback of one node (two ranks in it); then for each
# model its one-worker compute profile (`bench --profile` on this host, no network; the median of
# --profiles takes) right before lab/compare.sh measures the variants, because this machine's
# speed drifts over minutes. Each variant's prediction (`simulate --system bare-metal=fabric
# --system kubernetes=overlay --nodes N --workers-per-node W` per layout) is made from those
# profiles only, never from the runs it predicts. check.md holds the table: measured and
# predicted images/s and the error per configuration, the median and the worst absolute error.
# Every option, and what lab/compare.sh will be given (compare.sh --check), is checked before
# anything is measured. Needs root (network namespaces); run it on an otherwise idle machine.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lab="$here/../../lab"
# shellcheck source=lab/lib.sh
. "$lab/lib.sh"
# shellcheck source=lab/cpu_quota.sh
. "$lab/cpu_quota.sh"

archs=densenet121,resnet50 caps="-/-,1gbit/250mbit,2gbit/500mbit" variants=naive,overlapped,fp16
image_size=64 batch=8 steps=10 warmup=2 out=runs/simulate-check bin="${CHEXSCALE_BIN:-}"
predict_only=0 worker_cpu="" layouts=2x1 rounds=1 crowded=0 profiles=3 at_runs=0 comm_max=64M
invocation="bench/simulate/lab_check.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --archs) archs="$2"; shift 2 ;;
    --caps) caps="$2"; shift 2 ;;
    --variants) variants="$2"; shift 2 ;;
    --layouts) layouts="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --image-size) image_size="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --predict-only) predict_only=1; shift ;;
    --at-runs-speed) at_runs=1; shift ;;
    --crowded-profile) crowded=1; shift ;;
    --profiles) profiles="$2"; shift 2 ;;
    --comm-max) comm_max="$2"; shift 2 ;;
    --worker-cpu) worker_cpu="$2"; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) lab_die "unknown option '$1' (see bench/simulate/lab_check.sh --help)" ;;
  esac
done

[[ "$profiles" =~ ^[1-9][0-9]*$ ]] || lab_die "--profiles '$profiles': a count of 1 or more"
# The bytes of a commbench size (16M), or nothing where it is not one.
size_bytes() {
  [[ "$1" =~ ^([1-9][0-9]*)([KMG])$ ]] || return 0
  case "${BASH_REMATCH[2]}" in
    K) echo $((BASH_REMATCH[1] << 10)) ;;
    M) echo $((BASH_REMATCH[1] << 20)) ;;
    G) echo $((BASH_REMATCH[1] << 30)) ;;
  esac
}
# Two sizes at least (64K and 256K): a profile's line needs two points.
comm_max_bytes=$(size_bytes "$comm_max")
if [ -z "$comm_max_bytes" ] || [ "$comm_max_bytes" -lt $((256 << 10)) ]; then
  lab_die "--comm-max '$comm_max': a size in K, M or G of 256K or more, for example 16M"
fi
[ "$at_runs" = 0 ] || [ "$predict_only" = 1 ] ||
  lab_die "--at-runs-speed reads measured runs: use it with --predict-only"
[ "$at_runs" = 0 ] || [ "$crowded" = 0 ] ||
  lab_die "--at-runs-speed scales the one-worker profile: not with --crowded-profile"
# --at-runs-speed writes check<suffix>.{tsv,md}, sim<suffix>/ and predicted<suffix>/ beside a check.
suffix=""
[ "$at_runs" = 0 ] || suffix=-at-runs-speed
[ -n "$bin" ] || bin="$here/../../build/src/cli/chexscale"
[ -x "$bin" ] || lab_die "chexscale binary '$bin' not found: build it or pass --bin / CHEXSCALE_BIN"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
command -v jq >/dev/null || lab_die "'jq' not found (Debian package jq)"
[ "$predict_only" = 1 ] || lab_require_root
[ -z "$worker_cpu" ] || [ "$predict_only" = 1 ] || cpu_quota_init "$worker_cpu"

# The simulate flags of a compare.sh variant; refuses those the simulator does not model here.
sim_flags() {
  case "$1" in
    naive) echo --no-overlap ;;
    overlapped) echo ;;
    fp16) echo --grad-compression fp16 ;;
    powersgd[1-9]*) echo --grad-compression "powersgd:${1#powersgd}" ;;
    *) lab_die "variant '$1': the check runs naive, overlapped, fp16 and powersgd<R>" ;;
  esac
}
IFS=, read -r -a arch_list <<<"$archs"
IFS=, read -r -a cap_list <<<"$caps"
IFS=, read -r -a variant_list <<<"$variants"
for v in "${variant_list[@]}"; do sim_flags "$v" >/dev/null; done
# The element types to profile each path for: float16 only when a variant sends it.
dtypes=(float32)
[[ ",$variants," == *,fp16,* ]] && dtypes+=(float16)
# What lab/compare.sh will be given (the layouts, powersgd<R>'s three warm-up steps, the
# workload's numbers, the rounds), checked by compare.sh itself before anything is measured.
"$lab/compare.sh" --image-size "$image_size" --batch "$batch" --steps "$steps" \
  --warmup "$warmup" --threads 1 --variants "$variants" --layouts "$layouts" --rounds "$rounds" \
  --check >/dev/null || exit 2
IFS=, read -r -a layout_list <<<"$layouts"
paths=(fabric overlay)
for l in "${layout_list[@]}"; do
  [ "${l#*x}" = 1 ] || [[ " ${paths[*]} " == *" intra-node "* ]] || paths+=(intra-node)
done
lab_nodes=2  # commbench over the fabric and overlay needs two nodes; compare.sh takes more
for l in "${layout_list[@]}"; do [ "${l%x*}" -le "$lab_nodes" ] || lab_nodes=${l%x*}; done
for c in "${cap_list[@]}"; do
  [[ "$c" == */* ]] || lab_die "--caps: '$c' is not FABRIC/OVERLAY (use - for uncapped)"
done

mkdir -p "$out"
out="$(cd "$out" && pwd)"
if [ "$predict_only" = 1 ]; then
  [ -d "$out/profiles" ] && [ -d "$out/lab" ] ||
    lab_die "--predict-only: $out holds no profiles/ and lab/ of an earlier check"
else
  mkdir -p "$out/profiles" "$out/lab"
  echo "$invocation" >"$out/README.txt"
fi
mkdir -p "$out/sim$suffix" "$out/logs"
started=$SECONDS
say() { echo "[check $((SECONDS - started))s] $*"; }
workload=(--image-size "$image_size" --batch-size "$batch" --threads 1 --steps "$steps"
  --warmup-steps "$warmup")

on_exit() {
  cpu_quota_cleanup
  [ "$predict_only" = 1 ] || "$lab/cluster.sh" down >/dev/null 2>&1 || true
}
trap on_exit EXIT
[ -z "$CPU_QUOTA_CORES" ] || cpu_quota_create profile
compare_cpu=() sim_cpu=()
[ -z "$worker_cpu" ] || compare_cpu=(--worker-cpu "$worker_cpu") sim_cpu=(--cores-per-worker "$worker_cpu")

# One worker's compute profile of ARCH on this host into FILE (no network), in the workers' clean
# environment (lab_clean_env), with --worker-cpu in the cgroup "profile" at the workers' quota;
# beside OTHERS (default 0) other benches of ARCH, each in a group crowd<i> of its own, started
# first and running three times as many steps as the profiles together. The profile is taken
# --profiles times back to back (FILE-p<k>.json) and FILE is the one of the median step time:
# one short profile lands anywhere in this VM's second-to-second swings.
compute_profile() {
  local arch="$1" file="$2" others="${3:-0}" i k crowd=() taken=()
  for ((i = 1; i <= others; i++)); do
    [ -z "$CPU_QUOTA_CORES" ] || cpu_quota_create "crowd$i"
    cpu_quota_maybe_run "crowd$i" lab_clean_env "$bin" bench --arch "$arch" --image-size "$image_size" \
      --batch-size "$batch" --threads 1 --steps $((3 * steps * profiles)) --warmup-steps "$warmup" \
      --out "${file%.json}-crowd$i" >"${file%.json}-crowd$i.log" 2>&1 &
    crowd+=($!)
  done
  [ "$others" = 0 ] || sleep $((2 + others))  # past their start-up (model build), into their steps
  for ((k = 1; k <= profiles; k++)); do
    local one="${file%.json}-p$k.json"
    cpu_quota_maybe_run profile lab_clean_env "$bin" bench --arch "$arch" "${workload[@]}" \
      --profile "$one" --out "${one%.json}-bench" >"${one%.json}.log" 2>&1 ||
      lab_die "bench --profile $arch failed: $(tail -n 5 "${one%.json}.log")"
    taken+=("$(jq -r '.phases_s.step' "$one") $one")
  done
  for i in "${crowd[@]}"; do kill "$i" 2>/dev/null || true; done
  for i in "${crowd[@]}"; do wait "$i" 2>/dev/null || true; done
  local median
  median=$(printf '%s\n' "${taken[@]}" | sort -g | sed -n "$(((profiles + 1) / 2))p" | cut -d' ' -f2-)
  cp "$median" "$file"
}

# The compute profile that predicts LAYOUT: its own with --crowded-profile, else the one alone.
compute_for_layout() {
  local base="$1" layout="$2"
  local w=$(( ${layout%x*} * ${layout#*x} ))
  if [ "$crowded" = 1 ] && [ "$w" -gt 1 ]; then echo "${base%.json}-w$w.json"; else echo "$base"; fi
}

# commbench of DTYPE over PATH into FILE: fabric (two node namespaces, fabric addresses), overlay
# (two pod namespaces), intra-node (two ranks in node 0's namespace, over its loopback). With
# --worker-cpu each rank runs in a group of its own at the workers' quota (comm-<node>-w<rank>).
port=29700
commbench_path() {
  local path="$1" file="$2" dtype="$3" i ns master launchers=2 per_node=1 pids=()
  port=$((port + 1))
  case "$path" in
    fabric) master=$(lab_fabric_addr 0) ;;
    overlay) master=$(lab_pod_addr 0) ;;
    intra-node) master=127.0.0.1 launchers=1 per_node=2 ;;
  esac
  for ((i = 0; i < launchers; i++)); do
    if [ "$path" = overlay ]; then ns=$(lab_pod_ns "$i"); else ns=$(lab_node_ns "$i"); fi
    local cgroup=() j
    if [ -n "$CPU_QUOTA_CORES" ]; then
      for ((j = 0; j < per_node; j++)); do cpu_quota_create "comm$i-w$j"; done
      cgroup=(--worker-cgroup "$(cpu_quota_dirs "comm$i-w{local_rank}" | paste -sd,)")
    fi
    lab_netns_exec "$ns" env -i PATH="$PATH" HOME=/tmp GLOO_SOCKET_IFNAME="$([ "$path" = intra-node ] && echo lo || echo eth0)" \
      timeout -k 5 300 "$bin" launch --nnodes "$launchers" --node-rank "$i" --master-addr "$master" \
      --master-port "$port" --nproc-per-node "$per_node" "${cgroup[@]}" -- \
      commbench -b 64K -e "$comm_max" -f 4 -n 3 -w 1 \
      --dtype "$dtype" --profile "$file" --profile-path "$path" >"$out/logs/$(basename "$file" .json)-$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || lab_die "commbench over the $path failed (logs in $out/logs)"; done
}

# jq's median of an array of numbers (the mean of the middle two for an even count).
jq_median='def median: sort | if length % 2 == 1 then .[length / 2 | floor]
  else (.[length / 2 - 1] + .[length / 2]) / 2 end;'

# PROFILE scaled to the speed of the measured one-worker runs in LAB_DIR (both systems' 1x1 runs,
# every round) into FILE: its phases, the reducer's passes and the gradients' ready times times
# the runs' median step over the profile's, PowerSGD's rate divided by it (--at-runs-speed); the
# factor in scaled_by. Not in a subshell, so that lab_die ends the check.
scale_to_runs() {
  local profile="$1" lab_dir="$2" file="$3" runs
  mapfile -t runs < <(ls "$lab_dir"/sets/*-single/bench-w1*.json 2>/dev/null)
  [ "${#runs[@]}" -gt 0 ] || lab_die "--at-runs-speed: no one-worker runs in $lab_dir/sets/*-single"
  local k
  k=$(jq -s --slurpfile p "$profile" "$jq_median"' map(.step_time_s.median) | median
    / $p[0].phases_s.step' "${runs[@]}")
  jq --argjson k "$k" '.phases_s |= map_values(. * $k) | .gradient_passes_s |= map_values(. * $k)
    | .parameters |= map(.ready_s *= $k)
    | if .powersgd_flops_per_s then .powersgd_flops_per_s /= $k else . end' "$profile" >"$file"
  scaled_by="$k"
}

# The median images/s of the measured runs of N workers in SET_DIR (one per round).
median_images_per_sec() {
  local files
  mapfile -t files < <(ls "$1/bench-w$2.json" "$1/bench-w$2"-r*.json 2>/dev/null)
  [ "${#files[@]}" -gt 0 ] || lab_die "no measured run of $2 workers in $1"
  jq -s "$jq_median"' map(.images_per_sec) | median' "${files[@]}"
}

echo -e "arch\tcap\tlayout\tsystem\tvariant\tmeasured\tpredicted\terror" >"$out/check$suffix.tsv"
for cap in "${cap_list[@]}"; do
  fabric="${cap%/*}" overlay="${cap#*/}"
  tag="fabric-${fabric/#-/uncapped}_overlay-${overlay/#-/uncapped}"
  rates=(--nodes "$lab_nodes")
  [ "$fabric" = - ] || rates+=(--fabric-rate "$fabric")
  [ "$overlay" = - ] || rates+=(--overlay-rate "$overlay")
  if [ "$predict_only" = 0 ]; then
    say "lab up: $tag"
    "$lab/cluster.sh" up "${rates[@]}" >"$out/logs/cluster-$tag.log" 2>&1
    for path in "${paths[@]}"; do
      for dtype in "${dtypes[@]}"; do
        say "commbench profile over the $path, $dtype ($tag)"
        commbench_path "$path" "$out/profiles/$path-$tag-$dtype.json" "$dtype"
      done
    done
  fi
  compare_rates=()
  [ "$fabric" = - ] || compare_rates+=(--fabric-rate "$fabric")
  [ "$overlay" = - ] || compare_rates+=(--overlay-rate "$overlay")
  for arch in "${arch_list[@]}"; do
    compute="$out/profiles/$arch-$tag.json"
    if [ "$predict_only" = 0 ]; then
      # Right before the runs it predicts: this machine's speed drifts over minutes.
      say "compute profile: $arch ${image_size}px batch $batch, one worker"
      compute_profile "$arch" "$compute"
      if [ "$crowded" = 1 ]; then
        profiled=" "
        for layout in "${layout_list[@]}"; do
          w=$(( ${layout%x*} * ${layout#*x} ))
          [ "$w" -gt 1 ] && [[ "$profiled" != *" $w "* ]] || continue  # 1x2 and 2x1 share one
          profiled+="$w "
          say "compute profile: $arch beside $((w - 1)) other worker(s) (layout $layout)"
          compute_profile "$arch" "$(compute_for_layout "$compute" "$layout")" $((w - 1))
        done
      fi
      say "measured: $arch over $tag (lab/compare.sh, variants $variants)"
      "$lab/compare.sh" --arch "$arch" --image-size "$image_size" --batch "$batch" \
        --steps "$steps" --warmup "$warmup" --threads 1 --variants "$variants" --layouts "$layouts" \
        --rounds "$rounds" \
        "${compare_rates[@]}" "${compare_cpu[@]}" --out "$out/lab/$arch-$tag" --bin "$bin" \
        --keep-cluster \
        >"$out/logs/compare-$arch-$tag.log" 2>&1 ||
        lab_die "lab/compare.sh failed: $(tail -n 5 "$out/logs/compare-$arch-$tag.log")"
    fi
    if [ "$at_runs" = 1 ]; then
      scaled="$out/sim$suffix/profile-$arch-$tag.json"
      scale_to_runs "$compute" "$out/lab/$arch-$tag" "$scaled"
      say "$arch $tag: profile scaled by $scaled_by"
      compute="$scaled"
    fi
    networks=()
    for path in "${paths[@]}"; do
      for dtype in "${dtypes[@]}"; do
        networks+=(--network "$path=$out/profiles/$path-$tag-$dtype.json")
      done
    done
    for v in "${variant_list[@]}"; do
      for layout in "${layout_list[@]}"; do
        ln=${layout%x*} lw=${layout#*x} sim="$out/sim$suffix/$arch-$tag-$v-$layout"
        # shellcheck disable=SC2046
        "$bin" simulate --compute "$(compute_for_layout "$compute" "$layout")" "${networks[@]}" \
          --system bare-metal=fabric --system kubernetes=overlay --nodes "$ln" \
          --workers-per-node "$lw" "${sim_cpu[@]}" $(sim_flags "$v") --no-charts --out "$sim" \
          >"$out/logs/sim-$arch-$tag-$v-$layout.log" 2>&1 ||
          lab_die "simulate failed: $(tail -n 5 "$out/logs/sim-$arch-$tag-$v-$layout.log")"
        for system in bare-metal kubernetes; do
          # The predicted runs, a set per system and variant for `chexscale report` beside the
          # measured ones; a 1x1 layout is predicted for the sets, not counted in the check.
          mkdir -p "$out/predicted$suffix/$arch-$tag/$system-$v"
          cp "$sim/runs/$system/bench-w$((ln * lw)).json" "$out/predicted$suffix/$arch-$tag/$system-$v/"
          [ "$((ln * lw))" -gt 1 ] || continue
          measured=$(median_images_per_sec "$out/lab/$arch-$tag/sets/$system-$v" "$((ln * lw))")
          predicted=$(jq --arg s "$system" --argjson w "$((ln * lw))" \
            '.systems[] | select(.name == $s) | .jobs[] | select(.workers == $w) | .images_per_sec' \
            "$sim/simulate.json")
          echo -e "$arch\t$cap\t$layout\t$system\t$v\t$measured\t$predicted" |
            awk -F'\t' -v OFS='\t' '{ print $0, ($7 - $6) / $6 }' >>"$out/check$suffix.tsv"
        done
      done
    done
    say "$(tail -n +2 "$out/check$suffix.tsv" | awk -F'\t' -v a="$arch" -v c="$cap" '$1 == a && $2 == c { printf "%s %s %s %+.1f%%  ", $3, $4, $5, 100 * $8 }')"
  done
done

# The table, the median and the worst absolute error.
{
  echo "# Simulator vs the lab"
  echo
  echo "Measured by \`$(cat "$out/README.txt")\`; predicted by \`$invocation\` (compute"
  echo "profiles on one worker$([ "$crowded" = 0 ] || echo " beside the layout's other workers"), ${image_size} px, batch $batch, one thread${worker_cpu:+, every worker fixed at $worker_cpu of a core};"
  echo "layouts $layouts (nodes x workers per node); $steps timed steps after $warmup${rounds:+, median of $rounds round(s)})."
  [ "$at_runs" = 0 ] || echo "A diagnostic, not a check: every compute profile scaled to the speed of its measured one-worker runs (--at-runs-speed)."
  echo
  echo "| model | fabric / overlay cap | layout | system | variant | measured images/s | predicted | error |"
  echo "|---|---|---|---|---|---:|---:|---:|"
  tail -n +2 "$out/check$suffix.tsv" | awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %.2f | %.2f | %+.1f %% |\n", $1, $2, $3, $4, $5, $6, $7, 100 * $8 }'
  echo
  tail -n +2 "$out/check$suffix.tsv" | awk -F'\t' '{ e = $8 < 0 ? -$8 : $8; print e }' | sort -g |
    awk '{ a[NR] = $1 } END { m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2;
      printf "%d configurations: median absolute error %.1f %%, worst %.1f %%\n", NR, 100 * m, 100 * a[NR] }'
} >"$out/check$suffix.md"
tail -n 1 "$out/check$suffix.md"
say "done: $out/check$suffix.md"
