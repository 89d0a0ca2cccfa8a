#!/usr/bin/env bash
# Allreduce bus bandwidth between 2 lab nodes (network namespaces on the fabric bridge,
# lab/cluster.sh), side by side in one run: commbench over Gloo ("gloo"), over the mpi backend as
# it runs by default ("mpi": chexscale's ring between nodes) and over the mpi backend with
# OpenMPI's own MPI_Allreduce ("mpi-library": --mpi-allreduce library). Rounds alternate the
# order (gloo mpi mpi-library, then mpi-library mpi gloo, ...) so that a burst of load on a shared
# machine hits every side. Every side starts under one mpirun in node 0's namespace, MPI over TCP
# on the fabric (bench/comm/lab_mpi.sh). Prints each round, the load average, then the medians
# and mpi / every other side. Needs root.
# Usage: bench/comm/allreduce_internode.sh CHEXSCALE_BIN [BYTES] [ROUNDS] [ITERS] [FABRIC_RATE]
#   FABRIC_RATE: a tbf rate (e.g. 1gbit) or none (the default: the bridge's own speed)
#   env RANKS_PER_NODE: ranks on each node (default 1; with 2 or more, intra-node traffic is TCP
#       inside the node's namespace, not shared memory)
#   env COMMBENCH_ARGS: more commbench flags for every side (e.g. --hierarchical)
#   env MPIRUN_ARGS: more mpirun options (e.g. "--mca coll_tuned_allreduce_algorithm 4")
#   env SIDES: the sides to run (default "gloo mpi mpi-library")
set -euo pipefail
usage="usage: allreduce_internode.sh CHEXSCALE_BIN [BYTES] [ROUNDS] [ITERS] [FABRIC_RATE]"
bin=$(realpath "${1:?$usage}")
bytes=${2:-64M}
rounds=${3:-5}
iters=${4:-10}
rate=${5:-none}
per_node=${RANKS_PER_NODE:-1}
read -r -a sides <<<"${SIDES:-gloo mpi mpi-library}"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/comm/lab_mpi.sh
. "$here/lab_mpi.sh"
lab_mpi_up "$rate"

# The commbench flags of a side.
side_flags() {
  case "$1" in
    gloo) echo "--backend gloo" ;;
    mpi) echo "--backend mpi" ;;
    mpi-library) echo "--backend mpi --mpi-allreduce library" ;;
    *) echo "unknown side $1 (gloo, mpi, mpi-library)" >&2; exit 2 ;;
  esac
}

port=29851
results="$lab_mpi_work/results"
for round in $(seq "$rounds"); do
  order=("${sides[@]}")
  if [ $((round % 2)) -eq 0 ]; then
    order=()
    for ((i = ${#sides[@]} - 1; i >= 0; i--)); do order+=("${sides[i]}"); done
  fi
  for side in "${order[@]}"; do
    port=$((port + 1))
    # commbench's table row: size count type redop time(us) algbw busbw #wrong
    # shellcheck disable=SC2086,SC2046
    line=$(lab_mpirun "$per_node" -x MASTER_ADDR="$(lab_fabric_addr 0)" -x MASTER_PORT="$port" \
      "$bin" commbench $(side_flags "$side") ${COMMBENCH_ARGS:-} -b "$bytes" -e "$bytes" \
      -n "$iters" -w 3 -c 1 2>"$lab_mpi_work/err" | awk '$1 ~ /^[0-9]+$/ {print; exit}') ||
      { cat "$lab_mpi_work/err" >&2; exit 1; }
    [ -n "$line" ] || {
      cat "$lab_mpi_work/err" >&2
      echo "round $round $side: no result" >&2
      exit 1
    }
    echo "round $round $side: $line"
    echo "$side $(echo "$line" | awk '{print $7, $8}')" >>"$results"
  done
  echo "round $round load average: $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "fabric: $rate, $per_node rank(s) per node ${COMMBENCH_ARGS:-}"
/usr/bin/python3 "$here/busbw_medians.py" "$results" "${sides[@]}"
