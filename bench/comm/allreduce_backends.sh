#!/bin/sh
# Allreduce bus bandwidth of one message size on 2 ranks of this host, side by side: chexscale
# commbench over Gloo, over the mpi backend and through the training engine's reducer (which on
# one node allreduces through shared memory), all started by mpirun, so the ranks are placed
# alike, and mpi4py's Allreduce of a numpy array (bench/peer/mpi4py_allreduce.py, the same MPI
# call timed the same way). Rounds are interleaved (gloo, mpi, mpi4py, gloo, ...) so that a burst
# of load on a shared machine hits every side; each side's median busbw over the rounds is
# compared. Output: one line per run, then the medians, mpi / each other side and reducer /
# mpi4py.
# Usage: bench/comm/allreduce_backends.sh CHEXSCALE_BIN [BYTES] [ROUNDS] [ITERS]
set -eu
bin=${1:?usage: allreduce_backends.sh CHEXSCALE_BIN [BYTES] [ROUNDS] [ITERS]}
bytes=${2:-64M}
rounds=${3:-5}
iters=${4:-20}
here=$(cd "$(dirname "$0")" && pwd)
mpirun="mpirun -np 2 --oversubscribe --allow-run-as-root --mca btl_tcp_if_include lo \
--mca oob_tcp_if_include lo"
results=$(mktemp)
trap 'rm -f "$results"' EXIT
port=29731
for round in $(seq "$rounds"); do
  for backend in gloo mpi reducer; do
    port=$((port + 1))
    # reducer: the training engine's GradientReducer on gloo, which on one node allreduces
    # through shared memory (docs/bare-metal.md)
    case "$backend" in
      reducer) flags="--backend gloo --path reducer" ;;
      *) flags="--backend $backend" ;;
    esac
    # commbench's table row: size count type redop time(us) algbw busbw #wrong
    # shellcheck disable=SC2086
    line=$($mpirun -x MASTER_PORT=$port "$bin" commbench $flags -b "$bytes" \
      -e "$bytes" -n "$iters" -w 5 -c 1 2>/dev/null | awk '$1 ~ /^[0-9]+$/ {print; exit}')
    echo "round $round $backend: $line"
    echo "$backend $(echo "$line" | awk '{print $7, $8}')" >>"$results"
  done
  line=$($mpirun /usr/bin/python3 "$here/../peer/mpi4py_allreduce.py" --bytes "$bytes" \
    --iters "$iters" --warmup 5)
  echo "round $round mpi4py: $line"
  echo "mpi4py $(echo "$line" | sed 's/.*busbw=//') 0" >>"$results"
done
/usr/bin/python3 "$here/busbw_medians.py" "$results" gloo mpi mpi4py reducer
