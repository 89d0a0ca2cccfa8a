#!/usr/bin/python3
"""Summary of a scripts/bench.sh run: chexscale beside the PyTorch DDP peer, as Markdown.

Reads OUT/round<k>/{chexscale,peer,peer-glibc,no-overlap}/bench-w<N>.json and
OUT/commbench-64M.json and prints, per worker count, the images/s of both systems in each round,
the per-round ratio (measured back to back, so load drift cancels), medians over rounds, scaling
efficiency, exposed communication with and without overlap, the 64 MiB allreduce paths, and each
target's verdict. "peer" ran with chexscale's malloc thresholds, "peer-glibc" (where run) with
glibc's adaptive defaults; the targets are read against "peer".

Usage: /usr/bin/python3 bench/peer/summarise.py OUT
"""
import glob
import json
import os
import re
import statistics
import sys


def load_rounds(out):
    """{round: {system: {workers: bench dict}}}"""
    rounds = {}
    for path in glob.glob(os.path.join(out, "round*", "*", "bench-w*.json")):
        rnd = int(re.search(r"round(\d+)", path).group(1))
        system = os.path.basename(os.path.dirname(path))
        workers = int(re.search(r"bench-w(\d+)\.json$", path).group(1))
        with open(path) as f:
            rounds.setdefault(rnd, {}).setdefault(system, {})[workers] = json.load(f)
    return rounds


def ips(rounds, rnd, system, workers):
    run = rounds.get(rnd, {}).get(system, {}).get(workers)
    return run["images_per_sec"] if run else None


def exposed_fraction(run):
    b = run["breakdown_s"]
    return b["comm_exposed"] / b["total"] if b["total"] > 0 else 0.0


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def verdict(ok):
    return "met" if ok else "MISSED"


def fmt(v, spec=".2f"):
    return "n/a" if v is None else format(v, spec)


def main(out):
    rounds = load_rounds(out)
    if not rounds:
        sys.exit(f"summarise: no round*/*/bench-w*.json under {out}")
    order = sorted(rounds)
    workers = sorted({w for r in rounds.values() for s in r.values() for w in s})
    lines = ["# chexscale vs PyTorch DDP (side by side, alternating)", ""]
    first = next(iter(rounds[order[0]].get("chexscale", {}).values()), None)
    if first:
        lines += [f"Workload: {first['arch']} {first['image_size']}x{first['image_size']}, batch "
                  f"{first['batch_per_worker']}/worker, {first['threads_per_worker']} thread(s)/"
                  f"worker, {first['steps']} timed steps after {first['warmup_steps']} warm-up, "
                  f"data {first['data']}, host {first['hostname']}.", ""]
    glibc = any("peer-glibc" in r for r in rounds.values())
    extra = " peer, glibc malloc img/s |" if glibc else ""
    lines += ["The peer runs with chexscale's malloc thresholds"
              + (" (and again with glibc's defaults: peer-glibc)." if glibc else "."), "",
              "| workers | round | chexscale img/s | peer img/s | chexscale / peer |" + extra,
              "|---|---|---|---|---|" + ("---|" if glibc else "")]
    ratios = {}
    for w in workers:
        for rnd in order:
            c, p = ips(rounds, rnd, "chexscale", w), ips(rounds, rnd, "peer", w)
            ratio = c / p if c and p else None
            ratios.setdefault(w, []).append(ratio)
            more = f" {fmt(ips(rounds, rnd, 'peer-glibc', w))} |" if glibc else ""
            lines.append(f"| {w} | {rnd} | {fmt(c)} | {fmt(p)} | {fmt(ratio, '.3f')} |" + more)
    lines += ["", "Medians over rounds:", "",
              "| workers | chexscale img/s | peer img/s | ratio (median of rounds) | target >= 1.0 |",
              "|---|---|---|---|---|"]
    for w in workers:
        c = median([ips(rounds, r, "chexscale", w) for r in order])
        p = median([ips(rounds, r, "peer", w) for r in order])
        ratio = median(ratios[w])
        lines.append(f"| {w} | {fmt(c)} | {fmt(p)} | {fmt(ratio, '.3f')} | "
                     f"{verdict(ratio is not None and ratio >= 1.0)} |")

    if 1 in workers:
        systems = ["chexscale", "peer"] + (["peer-glibc"] if glibc else [])
        lines += ["", "Scaling efficiency T(N) / (N x T(1)), per round then median:", "",
                  "| workers | chexscale | peer |" + (" peer, glibc malloc |" if glibc else "")
                  + " target (N=2) >= 0.95 | target >= the peer's |",
                  "|---|---|---|---|---|" + ("---|" if glibc else "")]
        for w in [w for w in workers if w > 1]:
            eff = {}
            for system in systems:
                eff[system] = median([
                    ips(rounds, r, system, w) / (w * ips(rounds, r, system, 1))
                    if ips(rounds, r, system, w) and ips(rounds, r, system, 1) else None
                    for r in order])
            target = verdict(eff["chexscale"] is not None and eff["chexscale"] >= 0.95) \
                if w == 2 else "-"
            versus = verdict(None not in (eff["chexscale"], eff["peer"])
                             and eff["chexscale"] >= eff["peer"])
            cells = " | ".join(fmt(eff[s], ".3f") for s in systems)
            lines.append(f"| {w} | {cells} | {target} | {versus} |")

    multi = [w for w in workers if w > 1]
    if multi:
        lines += ["", "Overlap (chexscale, exposed communication = time after backward waiting "
                  "for allreduces, % of the median step):", "",
                  "| workers | overlap img/s | exposed % | no-overlap img/s | exposed % | "
                  "target: exposed < 5 % with overlap |", "|---|---|---|---|---|---|"]
        for w in multi:
            on = [rounds[r]["chexscale"][w] for r in order if w in rounds[r].get("chexscale", {})]
            off = [rounds[r]["no-overlap"][w] for r in order
                   if w in rounds[r].get("no-overlap", {})]
            on_exp = median([exposed_fraction(r) * 100 for r in on])
            off_exp = median([exposed_fraction(r) * 100 for r in off])
            lines.append(
                f"| {w} | {fmt(median([r['images_per_sec'] for r in on]))} | {fmt(on_exp, '.1f')} "
                f"| {fmt(median([r['images_per_sec'] for r in off]))} | {fmt(off_exp, '.1f')} | "
                f"{verdict(on_exp is not None and on_exp < 5.0)} |")

    comm_path = os.path.join(out, "commbench-64M.json")
    if os.path.exists(comm_path):
        with open(comm_path) as f:
            comm = json.load(f)
        lines += ["", f"Allreduce of 64 MiB, {comm['world_size']} ranks ({comm['backend']}, "
                  f"loopback), {comm['iterations']} iterations:", "",
                  "| path | busbw GB/s | reducer / raw | target within 10 % |", "|---|---|---|---|"]
        for c in comm.get("compare", []):
            lines.append(f"| raw c10d allreduce (one tensor) | {c['raw_busbw_gbps']:.3f} | | |")
            lines.append(f"| GradientReducer ({c['buckets']} buckets) | "
                         f"{c['reducer_busbw_gbps']:.3f} | {c['ratio']:.3f} | "
                         f"{verdict(c['ratio'] >= 0.9)} |")
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
