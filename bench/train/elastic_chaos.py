#!/usr/bin/python3
"""A chaos run of `chexscale launch --elastic in-place` on the emulated cluster.

Three lab nodes run an elastic job (--nnodes 1:3, one ResNet-18 32 px worker each) against a
rendezvous server on a fourth node. Every 15-30 s (seeded) one fault strikes: a live node's
processes are killed with SIGKILL, or its link is cut, or a node that is down comes back (its
link restored, or its launcher started again: a join). At least one node is always up. After
FAULTS faults every node comes back and the job runs to its end. Then it checks:
  - every launcher alive at the end exits 0;
  - the lineage: per step the records of the last round that trained it, and every epoch
    trains every example, none twice beyond the sampler's padding (--record-examples);
  - the run's last line says every rank holds the same bytes (the workers' own digest check);
  - no worker read a checkpoint;
and prints each fault with the time to the next step record, the survivors' PIDs kept, and the
parts of the survivors' pauses from their own regroup lines (median per part, joins and losses).
Needs root. Usage:
  bench/train/elastic_chaos.py CHEXSCALE_BIN [--faults 20] [--min-seconds 600] [--seed 1]
                               [--epochs 650] [--out DIR]
"""
import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "..", "..", "lab", "cluster.sh")
PREFIX = "chxchaos"
NODES = 3  # worker nodes 0..2; node 3 serves the rendezvous store
SERVER = 3
PORT = 29671
HEARTBEAT = 3


def ns(node):
    return f"{PREFIX}-n{node}"


def addr(node):
    return f"10.77.0.{node + 1}"


def sh(cmd, check=True):
    return subprocess.run(cmd, shell=True, check=check, capture_output=True, text=True)


def node_env():
    """The clean environment a node's processes start in (env -i and its variables)."""
    return ["env", "-i", f"PATH={os.environ['PATH']}", "HOME=/tmp", "OMP_NUM_THREADS=1",
            "GLOO_SOCKET_IFNAME=eth0"]


def on_node(node, args, log):
    """chexscale ARGS in node's namespace, its output appended to LOG."""
    out = open(log, "a")
    cmd = ["ip", "netns", "exec", ns(node)] + node_env() + [BIN] + args
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)


def kill_node(node):
    """SIGKILL to every process in node's namespace."""
    sh(f"ip netns pids {ns(node)} | xargs -r kill -9", check=False)


class StepClock(threading.Thread):
    """When each step record of metrics.jsonl appeared (polled every 20 ms), and when any record
    did (steps, epochs' validations, memberships: the work a rank does anyway)."""

    def __init__(self, run):
        super().__init__(daemon=True)
        self.path = os.path.join(run, "metrics.jsonl")
        self.seen = []  # (time, step) of the step records
        self.records = []  # the time of every record
        self.last = None  # the newest step record
        self.lock = threading.Lock()
        self.stopping = False

    def run(self):
        done = 0
        while not self.stopping:
            try:
                with open(self.path) as f:
                    lines = f.read().splitlines()
            except FileNotFoundError:
                lines = []
            now = time.monotonic()
            for line in lines[done:]:
                try:
                    r = json.loads(line)
                except ValueError:
                    break  # a line being written
                done += 1
                with self.lock:
                    self.records.append(now)
                if r.get("type") == "step":
                    with self.lock:
                        self.seen.append((now, r["step"]))
                        self.last = r
            time.sleep(0.02)

    def first_after(self, t, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for at, step in self.seen:
                    if at > t:
                        return at, step
            time.sleep(0.02)
        return None


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return sorted(int(p) for p in f.read().split())
    except OSError:
        return []


def lineage(run, epochs):
    """(ok, message): every epoch trains every example, none twice beyond the padding.

    Per step the records of the last round that trained it count. Each pass over (the rest of)
    an epoch with W workers pads by up to 2W - 1 examples (W - 1 to fill the ranks' slices, W
    more to avoid a last batch of one), so an epoch may repeat that many per round it ran in."""
    steps = {}  # step -> (round, [(rank, epoch, index)])
    for rank in range(NODES):
        path = f"{run}.examples.rank{rank}"
        if not os.path.exists(path):
            continue
        for line in open(path):
            f = line.split()
            if len(f) < 3:
                continue
            rnd, epoch, step = int(f[0]), int(f[1]), int(f[2])
            latest, ex = steps.get(step, (-1, []))
            if rnd > latest:
                latest, ex = rnd, []
            if rnd == latest:
                ex.extend((rank, epoch, int(i)) for i in f[3:])
            steps[step] = (latest, ex)
    by_epoch = {}  # epoch -> [index]
    ranks_of = {}  # (epoch, round) -> {rank}
    for _, (rnd, ex) in steps.items():
        for rank, epoch, index in ex:
            by_epoch.setdefault(epoch, []).append(index)
            ranks_of.setdefault((epoch, rnd), set()).add(rank)
    if len(by_epoch) != epochs:
        return False, f"{len(by_epoch)} epochs recorded, {epochs} expected"
    everything = set()
    for indices in by_epoch.values():
        everything.update(indices)
    worst = 0
    for epoch, indices in sorted(by_epoch.items()):
        if set(indices) != everything:
            return False, f"epoch {epoch} left out {sorted(everything - set(indices))}"
        twice = len(indices) - len(set(indices))
        allowed = sum(2 * len(r) - 1 for (e, _), r in ranks_of.items() if e == epoch)
        if twice > allowed:
            return False, (f"epoch {epoch} trained {twice} examples twice, its passes' padding "
                           f"allows {allowed}")
        worst = max(worst, twice)
    return True, (f"{epochs} epochs, {len(steps)} steps: every example of every epoch trained, "
                  f"at most {worst} twice (the sampler's padding)")


REGROUP = re.compile(r"round (\d+): rank (\d+)( \(new\))? regrouped in ([0-9.]+) s: ([^\n]*)")
PART = re.compile(r"([a-z][a-z ]*) ([0-9.]+) s(?: \([^)]*\))?(?:, |$)")


def regroup_parts(logs):
    """The workers' regroup lines: {round: [(new, total, {part: seconds})]}."""
    rounds = {}
    for m in REGROUP.finditer(logs):
        parts = {name: float(sec) for name, sec in PART.findall(m.group(5))}
        rounds.setdefault(int(m.group(1)), []).append((bool(m.group(3)), float(m.group(4)), parts))
    return rounds


def print_regroup_parts(logs):
    """Per kind of round (a newcomer joined, or only survivors), the survivors' median of each
    part of their pause as their own regroup lines give it, over the rounds of that kind."""
    kinds = {"join": [], "loss": []}
    for lines in regroup_parts(logs).values():
        kind = "join" if any(new for new, _, _ in lines) else "loss"
        kinds[kind].extend((total, parts) for new, total, parts in lines if not new)
    for kind, lines in kinds.items():
        if not lines:
            continue
        names = []
        for _, parts in lines:
            names += [n for n in parts if n not in names]
        medians = ", ".join(
            f"{n} {statistics.median(p.get(n, 0.0) for _, p in lines):.3f} s" for n in names)
        print(f"survivors' regroups after a {kind} ({len(lines)} lines): total median "
              f"{statistics.median(t for t, _ in lines):.2f} s, max {max(t for t, _ in lines):.2f} s;"
              f" median parts: {medians}")


def main():
    global BIN
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("bin")
    p.add_argument("--faults", type=int, default=20)
    p.add_argument("--min-seconds", type=float, default=600)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epochs", type=int, default=650)
    p.add_argument("--out", default="")
    a = p.parse_args()
    BIN = os.path.realpath(a.bin)
    if os.geteuid() != 0:
        sys.exit("elastic_chaos.py: needs root (network namespaces)")
    rng = random.Random(a.seed)
    work = a.out or tempfile.mkdtemp(prefix="chexscale-chaos-")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, LAB_PREFIX=PREFIX)
    subprocess.run([CLUSTER, "up", "--nodes", str(NODES + 1)], env=env, check=True,
                   capture_output=True)
    procs = {}
    try:
        data, run = f"{work}/data", f"{work}/run"
        shutil.rmtree(run, ignore_errors=True)
        shutil.rmtree(data, ignore_errors=True)
        for f in os.listdir(work):
            if f.startswith("run.examples") or f.endswith(".log"):
                os.remove(os.path.join(work, f))
        sh(f"{BIN} synth --out {data} --images 64 --size 32 --seed 6")
        server = on_node(SERVER, ["rendezvous-server", "--port", str(PORT)], f"{work}/server.log")
        time.sleep(1)
        train = (f"train --data {data} --out {run} --arch resnet18 --image-size 32 --crop-size 32 "
                 f"--batch-size 4 --epochs {a.epochs} --no-augment --loader-threads 1 "
                 f"--val-threads 1 --intra-op-threads 1 --seed 3 --log-every 1 "
                 f"--checkpoint-every 20 --keep-checkpoints 2 --collective-timeout 20 "
                 f"--resume auto --record-examples {run}.examples").split()

        def start(node):
            procs[node] = on_node(node, [
                "launch", "--nnodes", f"1:{NODES}", "--nproc-per-node", "1", "--master-addr",
                addr(SERVER), "--master-port", str(PORT), "--node-name", f"node-{node}",
                "--rdzv-last-call", "1", "--heartbeat-timeout", str(HEARTBEAT),
                "--max-restarts", "1000", "--stop-grace", "10", "--elastic", "in-place", "--"
            ] + train, f"{work}/node{node}.log")

        for node in range(NODES):
            start(node)
        clock = StepClock(run)
        clock.start()
        while not clock.seen:
            time.sleep(0.1)
        began = time.monotonic()
        state = {n: "up" for n in range(NODES)}  # up, killed, cut
        events = []
        while len(events) < a.faults or time.monotonic() - began < a.min_seconds:
            time.sleep(rng.uniform(15, 30))
            if any(p.poll() is not None and state[n] == "up" for n, p in procs.items()):
                break  # the job ended (or a launcher failed): no more faults
            up = [n for n in range(NODES) if state[n] == "up"]
            down = [n for n in range(NODES) if state[n] != "up"]
            t = time.monotonic()
            survivors = None  # a loss: the other live nodes' worker PIDs before it
            if down and (len(up) == 1 or rng.random() < 0.5):
                node = rng.choice(down)
                if state[node] == "cut":
                    sh(f"ip -n {ns(node)} link set eth0 up")
                    kind = "link restored"
                else:
                    start(node)
                    kind = "node started again (join)"
                state[node] = "up"
            else:
                node = rng.choice(up)
                survivors = {n: children(procs[n].pid) for n in up if n != node}
                if rng.random() < 0.5:
                    kill_node(node)
                    kind, state[node] = "kill -9", "killed"
                else:
                    sh(f"ip -n {ns(node)} link set eth0 down")
                    kind, state[node] = "link cut", "cut"
            events.append({"at": t - began, "t": t, "node": node, "fault": kind})
            if survivors is not None:
                clock.first_after(t + 1.0)  # a step after the regroup
                events[-1]["pids_kept"] = all(children(procs[n].pid) == pids
                                              for n, pids in survivors.items())
            print(f"[chaos {len(events):2d}] {t - began:6.1f} s: {kind} on node {node}",
                  flush=True)
            if len(events) >= a.faults and time.monotonic() - began >= a.min_seconds:
                break
        for node in range(NODES):
            if state[node] == "cut":
                sh(f"ip -n {ns(node)} link set eth0 up")
            elif state[node] == "killed":
                start(node)
            state[node] = "up"
        deadline = time.monotonic() + 1800
        for node, proc in procs.items():
            proc.wait(timeout=max(1, deadline - time.monotonic()))
        elapsed = time.monotonic() - began
        clock.stopping = True
        server.terminate()
        logs = "".join(open(f"{work}/node{n}.log").read() for n in range(NODES))
        codes = {n: p.returncode for n, p in procs.items()}
        ok_lineage, lineage_msg = lineage(run, a.epochs)
        same = re.findall(r"the run ends at step (\d+) with every rank \((\d+)\) holding the same "
                          r"bytes \(digest ([0-9a-f]+)\)", logs)
        rounds = len(re.findall(r"every rank (?:took rank \d+'s training state from memory|held the same "
                                r"parameters)", logs))
        checkpoint_reads = logs.count("resumed from ")
        # Each fault's pause: the longest time between two step records in the 14 s after it
        # (the next fault comes 15 s later at the earliest); the step after that pause, from the
        # fault; and the pause less the median time per step.
        seen = clock.seen
        gaps = sorted(y[0] - x[0] for x, y in zip(seen, seen[1:]))
        step_time = gaps[len(gaps) // 2]
        for e in events:
            t = e.pop("t")
            window = [(x, y) for x, y in zip(seen, seen[1:]) if t < y[0] <= t + 14]
            if not window:
                continue
            before, after = max(window, key=lambda xy: xy[1][0] - xy[0][0])
            e["first_step_after_s"] = after[0] - t
            e["pause_s"] = after[0] - before[0]
            e["cost_s"] = after[0] - before[0] - step_time
            # The same between records of any kind: an epoch's validation, which the ranks do
            # anyway, is not counted as the fault's.
            records = clock.records
            e["record_cost_s"] = max((y - x for x, y in zip(records, records[1:])
                                      if t < y <= t + 14), default=e["pause_s"]) - step_time
            print(f"[chaos] {e['at']:6.1f} s {e['fault']:>26} on node {e['node']}: longest pause "
                  f"{e['pause_s']:.2f} s, ending {e['first_step_after_s']:.2f} s after the fault "
                  f"({e['cost_s']:.2f} s beyond a step; between records of any kind "
                  f"{e['record_cost_s']:.2f} s)")
        losses = [e["first_step_after_s"] for e in events
                  if e["fault"] in ("kill -9", "link cut") and "first_step_after_s" in e]
        joins = [e["cost_s"] for e in events
                 if e["fault"] not in ("kill -9", "link cut") and "cost_s" in e]
        join_records = [e["record_cost_s"] for e in events
                        if e["fault"] not in ("kill -9", "link cut") and "record_cost_s" in e]
        kept = [e["pids_kept"] for e in events if "pids_kept" in e]
        print_regroup_parts(logs)
        if joins:
            print(f"a join's cost to the others (pause beyond a step of {step_time:.2f} s): median "
                  f"{statistics.median(joins):.2f} s, max {max(joins):.2f} s; between records of "
                  f"any kind (validations not counted): median "
                  f"{statistics.median(join_records):.2f} s, max {max(join_records):.2f} s")
        print(f"\n{len(events)} faults over {elapsed / 60:.1f} min (seed {a.seed}); "
              f"{rounds} regroups from memory; {checkpoint_reads} checkpoint reads")
        if losses:
            print(f"first step after a loss: median {statistics.median(losses):.2f} s, "
                  f"max {max(losses):.2f} s (heartbeat timeout {HEARTBEAT} s)")
        print(f"survivors' worker PIDs kept through every loss: {all(k for k in kept)} "
              f"({sum(1 for k in kept if k)} of {len(kept)})")
        print(f"launchers' exit codes at the end: {codes}")
        print(f"lineage: {'pass' if ok_lineage else 'FAIL'}: {lineage_msg}")
        print(f"end state: {same[-1] if same else 'NO digest line'}")
        with open(f"{work}/chaos.json", "w") as f:
            json.dump({"events": events, "codes": codes, "lineage": lineage_msg,
                       "end": same, "elapsed_s": elapsed}, f, indent=1, default=str)
        good = (all(c == 0 for c in codes.values()) and ok_lineage and same
                and checkpoint_reads == 0 and all(k for k in kept))
        print("chaos run:", "PASS" if good else "FAIL", f"(logs in {work})")
        return 0 if good else 1
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
        subprocess.run([CLUSTER, "down"], env=env, capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
