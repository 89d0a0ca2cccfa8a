#!/usr/bin/env bash
# MPI point-to-point between 2 lab nodes, one rank each (bench/peer/mpi4py_p2p.py under mpirun,
# MPI over TCP on the fabric: bench/comm/lab_mpi.sh): one message one way, one message each way at
# once, and the same bytes each way in many small messages. Shows what OpenMPI's TCP transport
# does with traffic in both directions, which every allreduce between nodes has. Needs root.
# Usage: bench/comm/mpi_p2p_internode.sh [BYTES] [ITERS] [FABRIC_RATE] [SEGMENT]
#   env MPIRUN_ARGS: more mpirun options (e.g. "--mca btl_tcp_flags send,inplace")
set -euo pipefail
bytes=${1:-64M}
iters=${2:-3}
rate=${3:-none}
segment=${4:-60K}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/comm/lab_mpi.sh
. "$here/lab_mpi.sh"
lab_mpi_up "$rate"
echo "fabric: $rate ${MPIRUN_ARGS:-}"
lab_mpirun 1 /usr/bin/python3 "$here/../peer/mpi4py_p2p.py" --bytes "$bytes" --iters "$iters" \
  --segment "$segment"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
