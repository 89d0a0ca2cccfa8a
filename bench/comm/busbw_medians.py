#!/usr/bin/python3
"""Medians of interleaved allreduce rounds, for bench/comm's side-by-side scripts.

Usage: busbw_medians.py RESULTS SIDE...
RESULTS has one line per round and side: "<side> <busbw GB/s> <wrong elements>". Fails if any
round summed wrong; prints each SIDE's median busbw over its rounds (with min and max), then
mpi / every other side when mpi is among them, and reducer / mpi4py when both are.
"""
import statistics
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip().splitlines()[2])
    results, sides = sys.argv[1], sys.argv[2:]
    rounds = {}
    for line in open(results):
        side, busbw, wrong = line.split()
        if int(wrong) != 0:
            sys.exit(f"{side}: {wrong} wrong elements")
        rounds.setdefault(side, []).append(float(busbw))
    missing = [side for side in sides if side not in rounds]
    if missing:
        sys.exit(f"busbw_medians.py: no rounds of {', '.join(missing)} in {results}")
    med = {side: statistics.median(rounds[side]) for side in sides}
    for side in sides:
        v = rounds[side]
        print(f"{side:7s} median busbw {med[side]:.3f} GB/s over {len(v)} rounds "
              f"(min {min(v):.3f}, max {max(v):.3f})")
    if "mpi" in med:
        print("   ".join(f"mpi / {side} {med['mpi'] / med[side]:.3f}"
                         for side in sides if side != "mpi"))
    if "reducer" in med and "mpi4py" in med:
        print(f"reducer / mpi4py {med['reducer'] / med['mpi4py']:.3f}")


if __name__ == "__main__":
    main()
