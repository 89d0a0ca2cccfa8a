#!/usr/bin/env bash
# Bare metal vs Kubernetes in the emulated cluster: the same `chexscale bench` run both ways, then
# `chexscale report` on the result sets.
#
#   "bare-metal": `chexscale launch` in every node namespace over the fabric addresses.
#   "kubernetes": the pods of `chexscale k8s render` (the Indexed Job's container command, args and
#                 env, JOB_COMPLETION_INDEX set, the Service DNS names resolving to pod addresses)
#                 in every pod namespace, over the VXLAN overlay: as bare processes, or with
#                 --pods containers as containers of the image (security context, volumes and
#                 limits of the pod spec; lab/pod_containers.sh) joined to the pod namespaces.
#
# Usage: lab/compare.sh [options]
#   --nodes N             nodes of one worker each: the layout Nx1                   [2]
#   --layouts LIST        comma list of NODESxWORKERS layouts (the article's Figure 1:
#                         1x1,1x2,1x3,1x4,2x4), each run on both systems: NODES node
#                         namespaces, `chexscale launch --nproc-per-node WORKERS` in each on bare
#                         metal, one pod per node holding its WORKERS workers on Kubernetes; the
#                         workers of a node talk over its loopback. 1x1 is the single-worker run
#                         (always made); every layout needs its own worker count  [--nodes's]
#   --arch A --image-size S --batch B --steps K --warmup W --threads T
#                         the bench workload          [resnet18, 64, 8, 10, 2, 1]
#   --variants LIST       comma list of engine variants, each run on both systems:
#                         naive (--no-overlap), overlapped (the default engine: allreduces
#                         overlapping backward), fp16 (overlapped + fp16 gradients), bucket<MB>
#                         (overlapped + --bucket-mb MB), powersgd<R> (overlapped + PowerSGD of
#                         rank R, compressing from the last
#                         warm-up step on: --powersgd-start-step W-1), noshm (--no-shared-memory:
#                         a node's workers allreduce over Gloo's loopback instead of node shared
#                         memory; only layouts of one node use shared memory), A+B combines them
#                         (fp16+bucket5),
#                         hostnet (pods on the host network: the node namespaces; first
#                         variant's engine; k8s only); at least one engine variant
#                                                           [naive,overlapped,fp16,hostnet]
#   --pods MODE           how the Kubernetes sets run their pods: processes (bare processes in
#                         the pod namespaces) or containers (`podman run --network ns:...` of the
#                         image; needs podman or docker and the image)              [processes]
#   --image TAG           the pods' image in containers mode     [the renderer's, chexscale:<version>]
#   --fabric-rate R --overlay-rate R   bandwidth caps (see lab/cluster.sh)  [uncapped]
#   --out DIR             results, logs, manifests and the report           [runs/lab-compare]
#   --bin PATH            chexscale binary                [$CHEXSCALE_BIN or build/src/cli/chexscale]
#   --run-timeout S       limit for one bench run                                [600]
#   --rounds N            measure everything N times, alternating the systems' order between
#                         rounds (bare metal first in odd rounds, Kubernetes first in even ones:
#                         B K, K B, B K, ...) so that drift of the machine cancels; every round's
#                         bench file is kept (sets/<set>/bench-w<N>-r<K>.json) and the report
#                         gives medians and the per-round gaps, median and range; an
#                         even N balances the order (each system first equally often)  [1]
#   --peer                also run the PyTorch DDP peer (bench/peer/ddp_bench.py, one rank per
#                         node) on both systems: sets bare-metal/pytorch-ddp, kubernetes/pytorch-ddp
#   --peer-variants LIST  the engine variants the peer runs (DDP's own bucket_cap_mb, fp16_compress_hook
#                         and powerSGD_hook; not naive): overlapped is set <system>/pytorch-ddp,
#                         any other V <system>/pytorch-ddp-V                       [overlapped]
#   --worker-cpu C        run every worker as a fixed-speed device: each worker (its threads,
#                         Gloo's too; each peer rank) in a CPU cgroup of its own,
#                         node<i>-w<local rank> (`launch --worker-cgroup`), with a quota of C
#                         cores (0.4 = 40 % of one core) and the highest weight, so a worker's
#                         speed does not depend on how many others run; node i's launcher in
#                         node<i> at the same quota; the kernel's network path stays outside
#                         (lab/cpu_quota.sh). Needs --pods processes              [no quota]
#   --keep-cluster        leave the lab up afterwards (default: take it down)
#   --check               check the options (layouts, variants, peer variants, rounds, pods mode)
#                         and exit: no lab, nothing measured, no root needed
# Needs root (network namespaces); LAB_PREFIX selects the lab (default chxlab). Every option is
# checked before the lab is made.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lab/lib.sh
. "$here/lib.sh"
# shellcheck source=lab/pods.sh
. "$here/pods.sh"
# shellcheck source=lab/cpu.sh
. "$here/cpu.sh"
# shellcheck source=lab/cpu_quota.sh
. "$here/cpu_quota.sh"

nodes=2 arch=resnet18 image_size=64 batch=8 steps=10 warmup=2 threads=1
variants="naive,overlapped,fp16,hostnet" fabric_rate="" overlay_rate="" pods=processes image=""
out="runs/lab-compare" bin="${CHEXSCALE_BIN:-}" run_timeout=600 keep_cluster=0 peer=0 rounds=1
peer_variants=overlapped worker_cpu="" layouts="" nodes_given=0 check_only=0
invocation="lab/compare.sh $*"  # for README.txt; the option loop below consumes "$@"
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes="$2" nodes_given=1; shift 2 ;;
    --layouts) layouts="$2"; shift 2 ;;
    --arch) arch="$2"; shift 2 ;;
    --image-size) image_size="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --variants) variants="$2"; shift 2 ;;
    --pods) pods="$2"; shift 2 ;;
    --image) image="$2"; shift 2 ;;
    --fabric-rate) fabric_rate="$2"; shift 2 ;;
    --overlay-rate) overlay_rate="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --run-timeout) run_timeout="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --worker-cpu) worker_cpu="$2"; shift 2 ;;
    --keep-cluster) keep_cluster=1; shift ;;
    --check) check_only=1; shift ;;
    --peer) peer=1; shift ;;
    --peer-variants) peer_variants="$2"; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) lab_die "unknown option '$1' (see lab/compare.sh --help)" ;;
  esac
done

# Bench options of an engine variant; "+" combines variants (fp16+bucket5).
variant_flags() {
  local part parts engine_flags=()
  IFS=+ read -r -a parts <<<"$1"
  for part in "${parts[@]}"; do
    case "$part" in
      naive) engine_flags+=(--no-overlap) ;;
      overlapped) ;;
      noshm) engine_flags+=(--no-shared-memory) ;;
      fp16) engine_flags+=(--grad-compression fp16) ;;
      bucket[0-9]*) engine_flags+=(--bucket-mb "${part#bucket}") ;;
      powersgd[0-9]*)
        [ "$warmup" -ge 3 ] || lab_die "variant '$part' needs --warmup 3 or more (DDP's powerSGD_hook starts at step 2 at the earliest)"
        engine_flags+=(--grad-compression "powersgd:${part#powersgd}" --powersgd-start-step $((warmup - 1))) ;;
      *) lab_die "unknown variant '$part' (naive, overlapped, noshm, fp16, bucket<MB>, powersgd<R>, A+B, hostnet)" ;;
    esac
  done
  echo "${engine_flags[*]}"
}

# The layouts: NODESxWORKERS, parsed into layout_nodes/layout_workers (1x1 left out: the single
# run); the lab gets the most nodes any layout has.
[ -z "$layouts" ] || [ "$nodes_given" = 0 ] ||
  lab_die "give --nodes and --layouts, not both (--nodes N is --layouts Nx1)"
[ -n "$layouts" ] || layouts="${nodes}x1"
[[ "$nodes" =~ ^[1-9][0-9]*$ ]] || lab_die "--nodes must be a whole number >= 1, not '$nodes'"
layout_nodes=() layout_workers=() nodes=1 seen_counts=" "
IFS=, read -r -a layout_list <<<"$layouts"
for l in "${layout_list[@]}"; do
  [[ "$l" =~ ^([1-9][0-9]*)x([1-9][0-9]*)$ ]] ||
    lab_die "--layouts: '$l' is not NODESxWORKERS (for example 2x4: two nodes of four workers)"
  ln=${BASH_REMATCH[1]} lw=${BASH_REMATCH[2]}
  [ "$((ln * lw))" -gt 1 ] || continue
  [[ "$seen_counts" != *" $((ln * lw)) "* ]] ||
    lab_die "--layouts: two layouts with $((ln * lw)) workers ('$layouts'); the result sets hold one run per worker count"
  seen_counts+="$((ln * lw)) "
  layout_nodes+=("$ln") layout_workers+=("$lw")
  [ "$ln" -le "$nodes" ] || nodes=$ln
done
[ "${#layout_nodes[@]}" -gt 0 ] || lab_die "--layouts '$layouts': no layout of two or more workers"
[ -z "$worker_cpu" ] || [ "$pods" = processes ] ||
  lab_die "--worker-cpu needs --pods processes (a container engine puts its containers in cgroups of its own)"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || lab_die "--rounds must be a whole number >= 1, not '$rounds'"
case "$pods" in
  processes) [ -z "$image" ] || lab_die "--image needs --pods containers" ;;
  containers) ;;
  *) lab_die "--pods must be processes or containers, not '$pods'" ;;
esac
for opt in image-size:$image_size batch:$batch steps:$steps threads:$threads; do
  [[ "${opt#*:}" =~ ^[1-9][0-9]*$ ]] || lab_die "--${opt%%:*} must be a whole number >= 1, not '${opt#*:}'"
done
[[ "$warmup" =~ ^[0-9]+$ ]] || lab_die "--warmup must be a whole number, not '$warmup'"
IFS=, read -r -a variant_list <<<"$variants"
IFS=, read -r -a peer_variant_list <<<"$peer_variants"
for v in "${peer_variant_list[@]}"; do
  [[ "$v" != *naive* && "$v" != *noshm* && "$v" != hostnet ]] || lab_die "--peer-variants: the peer has no '$v' (DDP always overlaps and allreduces over Gloo; hostnet is not an engine)"
  variant_flags "$v" >/dev/null
done
first_engine=""
for v in "${variant_list[@]}"; do
  [ "$v" = hostnet ] && continue
  variant_flags "$v" >/dev/null
  [ -n "$first_engine" ] || first_engine="$v"
done
[ -n "$first_engine" ] ||
  lab_die "--variants '$variants' has no engine variant (naive, overlapped, ...): hostnet runs the first one's engine and is compared with its bare-metal set"
if [ "$check_only" = 1 ]; then
  echo "lab/compare.sh: options valid (layouts $layouts; variants $variants; rounds $rounds); no lab made"
  exit 0
fi
if [ "$pods" = containers ]; then
  # shellcheck source=lab/pod_containers.sh
  . "$here/pod_containers.sh" || lab_die "--pods containers needs a container engine (podman or docker)"
  export POD_CONTAINERS_PREFIX="${LAB_PREFIX}-"
fi
[ -n "$bin" ] || bin="$here/../build/src/cli/chexscale"
[ -x "$bin" ] || lab_die "chexscale binary '$bin' not found: build it or pass --bin / CHEXSCALE_BIN"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
if [ "$peer" = 1 ]; then
  # shellcheck source=bench/peer/openblas_env.sh
  . "$here/../bench/peer/openblas_env.sh"
  use_chexscale_openblas_kernels "$bin"  # the peer multiplies with chexscale's OpenBLAS kernels
fi
command -v yq >/dev/null || lab_die "'yq' not found (Debian package yq): needed to read rendered manifests"
command -v jq >/dev/null || lab_die "'jq' not found (Debian package jq)"
if [ "$pods" = containers ]; then
  pod_image="${image:-$("$bin" k8s render -- bench | yq -r 'select(.kind == "Job") | .spec.template.spec.containers[0].image')}"
  "$CONTAINER_ENGINE" image inspect "$pod_image" >/dev/null 2>&1 ||
    lab_die "--pods containers: no image $pod_image here (make image, or pass --image)"
fi
lab_require_root
[ -z "$worker_cpu" ] || cpu_quota_init "$worker_cpu"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
mkdir -p "$out/sets" "$out/logs" "$out/manifests" "$out/runs"
commands_log="$out/commands.txt"
: >"$commands_log"
echo -e "run\tnode\tfabric_tx_bytes\toverlay_tx_bytes" >"$out/traffic.tsv"
[ -z "$worker_cpu" ] || echo -e "run\tgroup\tquota_cores\tcpu_s\tthrottled_periods" >"$out/quota.tsv"
port=29600
started=$SECONDS
round=1

# Suffix of the current round's run tags and bench files: "" when measuring once, else -r<K>.
round_suffix() { if [ "$rounds" -gt 1 ]; then echo "-r$round"; fi; }

# The systems in the order the current round runs them: bare metal first in odd rounds,
# Kubernetes first in even ones (A B, B A, A B, ...).
round_order() { if [ $((round % 2)) -eq 1 ]; then echo bare-metal kubernetes; else echo kubernetes bare-metal; fi; }

say() { echo "[lab $((SECONDS - started))s] $*"; }

# The worker command both systems run: `chexscale bench` with the workload and LABEL, OUT_DIR.
bench_args() {
  local label="$1" out_dir="$2" flags="$3"
  # shellcheck disable=SC2086
  echo bench --arch "$arch" --image-size "$image_size" --batch-size "$batch" --steps "$steps" \
    --warmup-steps "$warmup" --threads "$threads" --label "$label" --out "$out_dir" $flags
}

# Waits for background jobs PIDS; on any failure prints the tails of LOGS and fails.
wait_all() {
  local -n pids_ref=$1 logs_ref=$2
  local i rc=0 failed=()
  for i in "${!pids_ref[@]}"; do
    if ! wait "${pids_ref[$i]}"; then
      rc=1
      failed+=("${logs_ref[$i]}")
    fi
  done
  if [ "$rc" -ne 0 ]; then
    for f in "${failed[@]}"; do
      echo "---- $f (last lines)" >&2
      tail -n 15 "$f" >&2
    done
    lab_die "a run failed; logs in $out/logs"
  fi
}

# Starts a command in the background with its output in LOG; records pid and log for wait_all.
spawn() {
  local log="$1"
  shift
  "$@" >"$log" 2>&1 &
  pids+=($!)
  logs+=("$log")
}

# Bytes node I's eth0 (fabric) and flannel.1 (overlay) have sent so far: "ETH0 FLANNEL".
tx_bytes() {
  local ns
  ns=$(lab_node_ns "$1")
  echo "$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes)" \
    "$(ip netns exec "$ns" cat /sys/class/net/flannel.1/statistics/tx_bytes)"
}

# The CPU groups of node I in a run of W workers per node: its launcher's, then its workers'.
node_groups() {
  local j
  echo "node$1"
  for ((j = 0; j < $2; j++)); do echo "node$1-w$j"; done
}

# The value of `launch --worker-cgroup` for node I's workers.
worker_cgroup_flag() { cpu_quota_dirs "node$1-w{local_rank}" | paste -sd,; }

# Appends each of node I's groups' quota use in run TAG to quota.tsv: CPU seconds and throttled
# periods since start_run.
record_quota() {
  local tag="$1" i="$2" g cpu_s throttled
  for g in $(node_groups "$i" "$workers_per_node"); do
    read -r cpu_s throttled <<<"${quota_before[$g]}"
    cpu_s=$(awk -v a="$cpu_s" -v b="$(cpu_quota_usage_s "$g")" 'BEGIN { printf "%.3f", b - a }')
    throttled=$(($(cpu_quota_throttled "$g") - throttled))
    echo -e "$tag\t$g\t$worker_cpu\t$cpu_s\t$throttled" >>"$out/quota.tsv"
  done
}

# Runs the started jobs to the end, stops the CPU sampler, then records per node how many bytes
# each run sent over the fabric and through the overlay (proof of the path a run took) in
# traffic.tsv, and with --worker-cpu the CPU seconds node i's cgroup used and the periods it was
# held at its quota in quota.tsv.
finish_run() {
  local tag="$1" n="$2" i
  wait_all pids logs
  cpu_sampler_stop
  for ((i = 0; i < n; i++)); do
    read -r eth_after vx_after <<<"$(tx_bytes "$i")"
    echo -e "$tag\t$i\t$((eth_after - ${eth_before[$i]}))\t$((vx_after - ${vx_before[$i]}))" >>"$out/traffic.tsv"
    [ -z "$worker_cpu" ] || record_quota "$tag" "$i"
  done
}

# Prepares a run on N nodes of W workers each whose files go to RUN_DIR: the CPU groups (with
# --worker-cpu), traffic counters, a fresh port, and the CPU sampler (RUN_DIR/cpu-samples.tsv;
# the run's processes are those with MATCH, by default RUN_DIR, in their command line; see
# lab/cpu.sh). Sets workers_per_node and, with --worker-cpu, cgroup_flag[i] (node i's
# --worker-cgroup value).
declare -A quota_before
start_run() {
  local n="$1" w="$2" run_dir="$3" match="${4:-$3}" i g
  pids=() logs=() eth_before=() vx_before=() quota_before=() cgroup_flag=()
  workers_per_node=$w
  for ((i = 0; i < n; i++)); do
    read -r "eth_before[$i]" "vx_before[$i]" <<<"$(tx_bytes "$i")"
    [ -n "$worker_cpu" ] || continue
    cgroup_flag[i]=$(worker_cgroup_flag "$i")
    for g in $(node_groups "$i" "$w"); do
      cpu_quota_create "$g"
      quota_before[$g]="$(cpu_quota_usage_s "$g") $(cpu_quota_throttled "$g")"
    done
  done
  port=$((port + 1))
  mkdir -p "$run_dir"
  cpu_sampler_start "$run_dir/cpu-samples.tsv" "$match"
}

# bare metal: `chexscale launch --nproc-per-node W` on each of N nodes (node namespaces, fabric
# addresses).
run_bare_metal() {
  local label="$1" n="$2" w="$3" flags="$4" tag run_dir i
  tag="$(echo "$label" | tr / -)-w$((n * w))$(round_suffix)"
  run_dir="$out/runs/$tag"
  rm -rf "$run_dir"
  start_run "$n" "$w" "$run_dir"
  for ((i = 0; i < n; i++)); do
    local cgroup=()
    [ -z "$worker_cpu" ] || cgroup=(--worker-cgroup "${cgroup_flag[$i]}")
    # shellcheck disable=SC2046,SC2207
    local cmd=("$bin" launch --nnodes "$n" --node-rank "$i" --master-addr "$(lab_fabric_addr 0)"
      --master-port "$port" --nproc-per-node "$w" "${cgroup[@]}" --
      $(bench_args "$label" "$run_dir" "$flags"))
    echo "[$(lab_node_ns "$i")] ${cmd[*]}" >>"$commands_log"
    spawn "$out/logs/$tag-node$i.log" cpu_quota_maybe_run "node$i" \
      lab_netns_exec "$(lab_node_ns "$i")" env -i PATH="$PATH" HOME=/tmp \
      timeout -k 10 "$run_timeout" "${cmd[@]}"
  done
  finish_run "$tag" "$n"
  collect "$run_dir" "$label" "$((n * w))" "$tag"
}

# kubernetes: render the job, then run each pod's container as the kubelet would: as a bare
# process in the pod's namespace, or (--pods containers) as a container of the image joined to
# it, whose output volume is the claim "output" at /runs/<tag>, the host folder
# pods/<tag>/pvc/output (group-writable by the pod's fsGroup, as the kubelet does).
run_kubernetes() {
  local label="$1" n="$2" w="$3" flags="$4" host_network="$5" tag run_dir pod_out root manifest
  local job i ns
  tag="$(echo "$label" | tr / -)-w$((n * w))$(round_suffix)"
  manifest="$out/manifests/$tag.yaml"
  job="chx-$(echo "$tag" | tr -c 'a-z0-9\n' '-' | cut -c1-40)"
  if [ "$pods" = containers ]; then
    root="$out/pods/$tag"
    run_dir="$root/pvc/output"
    pod_out="/runs/$tag"
    rm -rf "$root"
    mkdir -p "$run_dir"
    chgrp 1000 "$run_dir" && chmod 2775 "$run_dir"
  else
    run_dir="$out/runs/$tag"
    pod_out="$run_dir"
    rm -rf "$run_dir"
  fi
  start_run "$n" "$w" "$run_dir" "$pod_out"
  # Containers: the image renders its own Job, so manifest and program are of one version.
  local render=("$bin" k8s render)
  [ "$pods" = processes ] || render=("$CONTAINER_ENGINE" run --rm "${ENGINE_RUN_FLAGS[@]}"
    --network none --user 1000:1000 "$pod_image" k8s render --image "$pod_image"
    --output-pvc output --output-mount "$pod_out")
  render+=(--job-name "$job" --nnodes "$n" --nproc-per-node "$w" --master-port "$port"
    --gloo-socket-ifname eth0)
  [ "$host_network" = 1 ] && render+=(--host-network)
  local bench
  read -r -a bench <<<"$(bench_args "$label" "$pod_out" "$flags")"
  render+=(-- "${bench[@]}")
  echo "${render[*]} > $manifest" >>"$commands_log"
  "${render[@]}" >"$manifest"
  if [ "$pods" = containers ]; then
    pod_containers_check "$manifest" || lab_die "$manifest cannot run as containers"
  else
    pods_resolve_service "$manifest" "$n" "$host_network"
  fi
  for ((i = 0; i < n; i++)); do
    if [ "$host_network" = 1 ]; then ns=$(lab_node_ns "$i"); else ns=$(lab_pod_ns "$i"); fi
    if [ "$pods" = containers ]; then
      spawn "$out/logs/$tag-pod$i.log" pods_run_container "$manifest" "$i" "$n" "$ns" \
        "$host_network" "$root" "$run_timeout" "$commands_log"
    else
      # The pod's launcher takes --worker-cgroup from its environment (CHEXSCALE_<OPTION>).
      POD_EXTRA_ENV=()
      [ -z "$worker_cpu" ] || POD_EXTRA_ENV=(CHEXSCALE_WORKER_CGROUP="${cgroup_flag[$i]}")
      spawn "$out/logs/$tag-pod$i.log" cpu_quota_maybe_run "node$i" pods_run "$manifest" "$i" \
        "$ns" "$host_network" "$bin" "$run_timeout" "$commands_log"
    fi
  done
  POD_EXTRA_ENV=()
  finish_run "$tag" "$n"
  collect "$run_dir" "$label" "$((n * w))" "$tag"
}

# The PyTorch DDP peer, W ranks per node on N nodes with torchrun's environment: over the fabric
# from the node namespaces (bare-metal) or over the overlay from the pod namespaces (kubernetes).
run_peer() {
  local label="$1" n="$2" w="$3" system="$4" flags="$5" tag run_dir master ns i j rank
  tag="$(echo "$label" | tr / -)-w$((n * w))$(round_suffix)"
  run_dir="$out/runs/$tag"
  rm -rf "$run_dir"
  start_run "$n" "$w" "$run_dir"
  if [ "$system" = kubernetes ]; then master=$(lab_pod_addr 0); else master=$(lab_fabric_addr 0); fi
  for ((rank = 0; rank < n * w; rank++)); do
    i=$((rank / w)) j=$((rank % w))
    if [ "$system" = kubernetes ]; then ns=$(lab_pod_ns "$i"); else ns=$(lab_node_ns "$i"); fi
    local cmd=(/usr/bin/python3 "$here/../bench/peer/ddp_bench.py" --arch "$arch"
      --image-size "$image_size" --batch-size "$batch" --steps "$steps" --warmup-steps "$warmup"
      --threads "$threads" --label "$label" --json "$run_dir/bench.json")
    # shellcheck disable=SC2206
    cmd+=($flags)
    echo "[$ns] RANK=$rank LOCAL_RANK=$j LOCAL_WORLD_SIZE=$w WORLD_SIZE=$((n * w)) MASTER_ADDR=$master MASTER_PORT=$port${OPENBLAS_CORETYPE:+ OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE} ${cmd[*]}" >>"$commands_log"
    spawn "$out/logs/$tag-rank$rank.log" cpu_quota_maybe_run "node$i-w$j" lab_netns_exec "$ns" env -i \
      PATH="$PATH" HOME=/tmp RANK="$rank" LOCAL_RANK="$j" LOCAL_WORLD_SIZE="$w" WORLD_SIZE="$((n * w))" \
      MASTER_ADDR="$master" MASTER_PORT="$port" \
      GLOO_SOCKET_IFNAME=eth0 ${OPENBLAS_CORETYPE:+OPENBLAS_CORETYPE="$OPENBLAS_CORETYPE"} \
      timeout -k 10 "$run_timeout" "${cmd[@]}"
  done
  finish_run "$tag" "$n"
  collect "$run_dir" "$label" "$((n * w))" "$tag"
}

# Moves a run's bench.json into its result set as bench-w<N>.json (bench-w<N>-r<K>.json in rounds),
# with its CPU accounting beside it as cpu-w<N>.json (cpu-w<N>-r<K>.json): the timed window ends
# at bench.json's mtime (written right after the timed steps) and lasts its elapsed_s.
collect() {
  local run_dir="$1" label="$2" n="$3" tag="$4" set_dir file
  set_dir="$out/sets/$(echo "$label" | tr / -)"
  file="$set_dir/bench-w$n$(round_suffix).json"
  [ -f "$run_dir/bench.json" ] || lab_die "$run_dir/bench.json was not written (see $out/logs)"
  mkdir -p "$set_dir"
  cp "$run_dir/bench.json" "$file"
  cpu_account "$run_dir/cpu-samples.tsv" "$tag" "$(stat -c %.9Y "$run_dir/bench.json")" \
    "$(jq -r .elapsed_s "$run_dir/bench.json")" >"$set_dir/cpu-w$n$(round_suffix).json" ||
    lab_die "no CPU accounting for $tag (samples in $run_dir/cpu-samples.tsv)"
  say "$label, $n worker(s)$([ "$rounds" -gt 1 ] && echo ", round $round"): $(jq -r '"\(.images_per_sec | . * 100 | round / 100) images/s, step \(.step_time_s.median | . * 1000 | round) ms, exposed comm \(if .breakdown_s then (.breakdown_s.comm_exposed * 1000 | round | tostring) + " ms" else "not measured (peer)" end)"' "$file")"
}

# The single-worker run has no network, so it is run once per system (and round) and shared by
# its variants.
copy_single() {
  local from="$1" to="$2"
  mkdir -p "$out/sets/$(echo "$to" | tr / -)"
  cp "$out/sets/$(echo "$from" | tr / -)"/{bench,cpu}-w1*.json "$out/sets/$(echo "$to" | tr / -)/"
}

# Runs the engine variant V on N nodes of W workers on both systems, in this round's order;
# "single" is the 1-worker run without engine flags.
run_both() {
  local v="$1" n="$2" w="$3" flags="$4" system
  for system in $(round_order); do
    if [ "$system" = bare-metal ]; then
      run_bare_metal "bare-metal/$v" "$n" "$w" "$flags"
    else
      run_kubernetes "kubernetes/$v" "$n" "$w" "$flags" 0
    fi
  done
}

cluster_args=(--nodes "$nodes")
[ -n "$fabric_rate" ] && cluster_args+=(--fabric-rate "$fabric_rate")
[ -n "$overlay_rate" ] && cluster_args+=(--overlay-rate "$overlay_rate")
"$here/cluster.sh" up "${cluster_args[@]}"
"$here/cluster.sh" status >"$out/cluster-status.txt" || lab_die "the lab is not healthy: $(cat "$out/cluster-status.txt")"
# On exit (also on failure): stop a CPU sampler still running, take the lab down unless kept.
on_exit() {
  cpu_sampler_stop
  cpu_quota_cleanup
  [ "$keep_cluster" = 1 ] || "$here/cluster.sh" down >/dev/null 2>&1 || true
}
trap on_exit EXIT
echo "$invocation" >"$out/README.txt"
{
  echo "layouts=$layouts nodes=$nodes arch=$arch image_size=$image_size batch=$batch steps=$steps warmup=$warmup threads=$threads"
  echo "variants=$variants fabric_rate=${fabric_rate:-uncapped} overlay_rate=${overlay_rate:-uncapped} rounds=$rounds"
  echo "pods=$pods${pod_image:+ image=$pod_image} worker_cpu=${worker_cpu:-unlimited}"
} >>"$out/README.txt"

# The peer's result set of engine variant V.
peer_set() { if [ "$1" = overlapped ]; then echo pytorch-ddp; else echo "pytorch-ddp-$1"; fi; }

for ((round = 1; round <= rounds; round++)); do
  [ "$rounds" -gt 1 ] && say "round $round of $rounds: $(round_order | sed 's/ / first, then /')"
  say "single worker, both systems (${arch} ${image_size}px, batch ${batch})"
  run_both single 1 1 ""
  for v in "${variant_list[@]}"; do
    for k in "${!layout_nodes[@]}"; do
      ln=${layout_nodes[$k]} lw=${layout_workers[$k]}
      if [ "$v" = hostnet ]; then
        say "variant hostnet, ${ln}x${lw}: pods on the host network, engine as '$first_engine'"
        run_kubernetes "kubernetes/hostnet" "$ln" "$lw" "$(variant_flags "$first_engine")" 1
        continue
      fi
      say "variant $v, ${ln}x${lw}: $(variant_flags "$v")"
      run_both "$v" "$ln" "$lw" "$(variant_flags "$v")"
    done
  done
  if [ "$peer" = 1 ]; then
    say "PyTorch DDP peer (bench/peer/ddp_bench.py), both systems"
    for system in $(round_order); do
      run_peer "$system/pytorch-ddp" 1 1 "$system" ""
      for v in "${peer_variant_list[@]}"; do
        for k in "${!layout_nodes[@]}"; do
          run_peer "$system/$(peer_set "$v")" "${layout_nodes[$k]}" "${layout_workers[$k]}" \
            "$system" "$(variant_flags "$v")"
        done
      done
    done
  fi
done

# How the report names a set, so that a reader sees at a glance which path the gradients took and
# which engine sent them: NETWORK/ENGINE, shown as "bare metal · fabric · overlapped allreduce".
# The folders keep the short names (sets/bare-metal-overlapped).
network_title() {
  case "$1" in
    bare-metal) echo "bare metal · fabric" ;;
    kubernetes) echo "Kubernetes · flannel overlay" ;;
    hostnet) echo "Kubernetes · host network" ;;
  esac
}
engine_title() {
  local part parts title=""
  IFS=+ read -r -a parts <<<"$1"
  for part in "${parts[@]}"; do
    [ -z "$title" ] || title+=" + "
    case "$part" in
      naive) title+="naive allreduce" ;;
      overlapped) title+="overlapped allreduce" ;;
      noshm) title+="allreduce over loopback, not shared memory" ;;
      fp16) title+="fp16 gradients" ;;
      bucket*) title+="${part#bucket} MiB buckets" ;;
      powersgd*) title+="PowerSGD rank ${part#powersgd}" ;;
    esac
  done
  echo "$title"
}
# The report's argument for the set of SYSTEM (bare-metal, kubernetes) and V (an engine variant,
# hostnet, pytorch-ddp[-V]): NAME=FOLDER.
report_set() {
  local system="$1" v="$2" network engine
  network=$(network_title "$system")
  case "$v" in
    hostnet) network=$(network_title hostnet) engine=$(engine_title "$first_engine") ;;
    pytorch-ddp) engine="PyTorch DDP" ;;
    pytorch-ddp-*) engine="PyTorch DDP + $(engine_title "${v#pytorch-ddp-}")" ;;
    *) engine=$(engine_title "$v") ;;
  esac
  echo "$network/$engine=$out/sets/$system-$v"
}

report_args=()
for v in "${variant_list[@]}"; do
  if [ "$v" = hostnet ]; then
    copy_single "kubernetes/single" "kubernetes/hostnet"
  else
    copy_single "bare-metal/single" "bare-metal/$v"
    copy_single "kubernetes/single" "kubernetes/$v"
  fi
done
# The first engine variant's bare-metal set is the baseline (report's first set).
report_args+=("$(report_set bare-metal "$first_engine")")
for v in "${variant_list[@]}"; do
  [ "$v" = hostnet ] && continue
  [ "$v" = "$first_engine" ] || report_args+=("$(report_set bare-metal "$v")")
  report_args+=("$(report_set kubernetes "$v")")
done
[[ ",$variants," == *,hostnet,* ]] && report_args+=("$(report_set kubernetes hostnet)")
if [ "$peer" = 1 ]; then
  for v in "${peer_variant_list[@]}"; do
    [ "$v" = overlapped ] || for system in bare-metal kubernetes; do
      copy_single "$system/pytorch-ddp" "$system/$(peer_set "$v")"
    done
  done
  for system in bare-metal kubernetes; do
    for v in "${peer_variant_list[@]}"; do
      report_args+=("$(report_set "$system" "$(peer_set "$v")")")
    done
  done
fi
echo "$bin report $(printf "'%s' " "${report_args[@]}")--out $out/report" >>"$commands_log"
"$bin" report "${report_args[@]}" --out "$out/report"
say "done: $out/report/report.md"
