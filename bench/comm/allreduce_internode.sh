#!/usr/bin/env bash
# Allreduce bus bandwidth between 2 lab nodes (network namespaces on the fabric bridge,
# lab/cluster.sh), one rank per node, commbench over Gloo against commbench over the mpi backend,
# in interleaved rounds. Both sides start under one mpirun run in node 0's namespace, which
# reaches node 1 through a launch agent that enters node 1's namespace instead of ssh (the lab's
# nodes share this host); MPI moves the bytes over TCP on the fabric (--mca btl tcp,self: the
# nodes share a hostname, and shared memory would bypass the fabric). Prints each round, then the
# medians and mpi / gloo. Needs root.
# Usage: bench/comm/allreduce_internode.sh CHEXSCALE_BIN [BYTES] [ROUNDS] [ITERS] [FABRIC_RATE]
#   FABRIC_RATE: a tbf rate (e.g. 1gbit) or none (the default: the bridge's own speed)
#   env MPIRUN_ARGS: more mpirun options (e.g. "--mca coll_tuned_allreduce_algorithm 4")
set -euo pipefail
usage="usage: allreduce_internode.sh CHEXSCALE_BIN [BYTES] [ROUNDS] [ITERS] [FABRIC_RATE]"
bin=$(realpath "${1:?$usage}")
bytes=${2:-64M}
rounds=${3:-5}
iters=${4:-10}
rate=${5:-none}
here=$(cd "$(dirname "$0")" && pwd)
export LAB_PREFIX=${LAB_PREFIX:-chxmpi}
# shellcheck source=lab/lib.sh
. "$here/../../lab/lib.sh"
cluster="$here/../../lab/cluster.sh"
lab_require_root
"$cluster" up --nodes 2 --fabric-rate "$rate" >/dev/null
work=$(mktemp -d)
trap '"$cluster" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# mpirun's launch agent: "AGENT HOST COMMAND..." runs COMMAND in the namespace of the node whose
# fabric address is HOST.
cat >"$work/agent" <<AGENT
#!/bin/sh
host=\$1
shift
for i in 0 1; do
  if [ "\$host" = "\$(echo $LAB_FABRIC_NET).\$((i + 1))" ]; then
    exec ip netns exec "${LAB_PREFIX}-n\$i" sh -c "\$*"
  fi
done
echo "agent: \$host is no lab node" >&2
exit 1
AGENT
chmod +x "$work/agent"

node0=$(lab_fabric_addr 0)
node1=$(lab_fabric_addr 1)
port=29851
results="$work/results"
for round in $(seq "$rounds"); do
  for backend in gloo mpi; do
    port=$((port + 1))
    # commbench's table row: size count type redop time(us) algbw busbw #wrong
    line=$(ip netns exec "$(lab_node_ns 0)" env OMP_NUM_THREADS=1 mpirun -np 2 \
      -H "$node0:1,$node1:1" --allow-run-as-root --mca plm_rsh_agent "$work/agent" \
      --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
      ${MPIRUN_ARGS:-} \
      -x OMP_NUM_THREADS -x MASTER_ADDR="$node0" -x MASTER_PORT="$port" \
      "$bin" commbench --backend "$backend" -b "$bytes" -e "$bytes" -n "$iters" -w 3 -c 1 \
      2>"$work/err" | awk '$1 ~ /^[0-9]+$/ {print; exit}') ||
      { cat "$work/err" >&2; exit 1; }
    [ -n "$line" ] || { cat "$work/err" >&2; echo "round $round $backend: no result" >&2; exit 1; }
    echo "round $round $backend: $line"
    echo "$backend $(echo "$line" | awk '{print $7, $8}')" >>"$results"
  done
done
echo "fabric: $rate"
/usr/bin/python3 "$here/busbw_medians.py" "$results" gloo mpi
