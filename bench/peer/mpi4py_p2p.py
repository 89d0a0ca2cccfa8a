#!/usr/bin/python3
"""MPI point-to-point rates between 2 ranks (mpi4py): what the mpi backend's allreduce between
nodes is built on (bench/comm/mpi_p2p_internode.sh runs it across 2 lab nodes).

Run under mpirun -np 2. Three exchanges of BYTES, each timed over ITERS after one untimed:
  one-way     rank 0 sends one message, rank 1 receives it (osu_bw-like)
  both-ways   each rank sends one message to the other at once, Isend + Irecv (osu_bibw-like)
  both-ways in SEGMENT messages  the same bytes as many messages, all posted at once
Rank 0 prints one line each: the median time and the rate each way (GB = 1e9 bytes).
"""
import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

from mpi4py_allreduce import parse_bytes


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bytes", default="64M")
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--segment", default="60K", help="message size of the segmented exchange")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    if comm.size != 2:
        raise SystemExit("mpi4py_p2p.py runs on exactly 2 ranks")
    nbytes, segment = parse_bytes(args.bytes), parse_bytes(args.segment)
    peer = 1 - comm.rank
    send = np.ones(nbytes, np.uint8)
    recv = np.zeros(nbytes, np.uint8)

    def one_way():
        if comm.rank == 0:
            comm.Send(send, 1)
        else:
            comm.Recv(recv, 0)

    def both_ways():
        MPI.Request.Waitall([comm.Irecv(recv, peer), comm.Isend(send, peer)])

    def both_ways_in_segments():
        requests = []
        for offset in range(0, nbytes, segment):
            requests.append(comm.Irecv(recv[offset:offset + segment], peer))
            requests.append(comm.Isend(send[offset:offset + segment], peer))
        MPI.Request.Waitall(requests)

    for name, exchange in [("one-way", one_way), ("both-ways", both_ways),
                           (f"both-ways in {args.segment} messages", both_ways_in_segments)]:
        exchange()
        times = []
        for _ in range(args.iters):
            comm.Barrier()
            start = time.perf_counter()
            exchange()
            times.append(time.perf_counter() - start)
        t = statistics.median(times)
        if comm.rank == 0:
            print(f"{name:32s} {nbytes} bytes  median {t * 1e3:8.1f} ms  "
                  f"{nbytes / t / 1e9:.3f} GB/s each way", flush=True)


if __name__ == "__main__":
    main()
