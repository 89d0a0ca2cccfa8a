#!/usr/bin/python3
"""mpi4py peer of `chexscale commbench --backend mpi`: MPI_Allreduce (sum, in place) of a float32
numpy array, timed as commbench times it, so the two measure the same MPI library call.

Run under mpirun, e.g.
  mpirun -np 2 --oversubscribe --allow-run-as-root /usr/bin/python3 bench/peer/mpi4py_allreduce.py \\
      --bytes 64M --iters 20 --warmup 5
Timed as commbench's raw path: one barrier, then each iteration refills the buffer (untimed) and
times one Allreduce; a rank's time is its mean, the job's the slowest rank's mean. Rank 0 prints
one line in commbench's units:
  mpi4py size=<bytes> n=<ranks> time_us=<mean> algbw=<GB/s> busbw=<GB/s>
with algbw = bytes / time and busbw = algbw x 2(n-1)/n (nccl-tests' convention), GB = 1e9 bytes.
"""
import argparse
import sys
import time

import numpy as np
from mpi4py import MPI


def parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text[-1].upper() in units:
        return int(float(text[:-1]) * units[text[-1].upper()])
    return int(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bytes", default="64M", help="message size (K, M, G suffixes)")
    parser.add_argument("--iters", type=int, default=20, help="timed allreduces")
    parser.add_argument("--warmup", type=int, default=5, help="untimed allreduces first")
    args = parser.parse_args()
    size = parse_bytes(args.bytes)
    if size <= 0 or size % 4 != 0:
        sys.exit(f"mpi4py_allreduce: --bytes {size} must be a positive multiple of 4")
    comm = MPI.COMM_WORLD
    n = comm.Get_size()
    buf = np.ones(size // 4, dtype=np.float32)
    for _ in range(args.warmup):
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
    comm.Barrier()
    seconds = 0.0
    for _ in range(args.iters):
        buf.fill(1.0)  # keeps the values finite, outside the timed call
        start = time.perf_counter()
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        seconds += time.perf_counter() - start
    if not np.all(buf == n):
        sys.exit(f"mpi4py_allreduce: rank {comm.Get_rank()} summed wrong")
    t = comm.reduce(seconds / args.iters, op=MPI.MAX, root=0)
    if comm.Get_rank() == 0:
        algbw = size / t / 1e9
        busbw = algbw * 2 * (n - 1) / n
        print(f"mpi4py size={size} n={n} time_us={t * 1e6:.1f} algbw={algbw:.3f} "
              f"busbw={busbw:.3f}")


if __name__ == "__main__":
    main()
