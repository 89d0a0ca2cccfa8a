#!/usr/bin/python3
"""The same node faults under three elastic paths, side by side, all running chexscale's workers:
`chexscale launch --elastic in-place`, `chexscale launch --elastic restart`, and PyTorch's
torchrun (`--rdzv_backend c10d --max_restarts`).

Two lab nodes run one ResNet-18 32 px worker each (--nnodes 1:2); a third node serves the
rendezvous (`chexscale rendezvous-server`, or for torchrun a c10d TCPStore, so that neither path
loses its rendezvous with a worker node). Node 0 survives; node 1 takes, GAP seconds apart:
  1. kill -9 of every process of node 1;   2. node 1 started again (a join);
  3. node 1's link cut;                      4. the link restored.
For each fault, from node 0's log (every line stamped as it arrives) and rank 0's metrics.jsonl:
  detected     first line of node 0's launcher or agent about it after the fault (chexscale:
               "round N ended"; torchrun: "Worker group FAILED" or "Detected N new nodes")
  first step   end of the longest pause between step records in the GAP after the fault
  steps again  steps trained a second time (the last step before the fault less the step
               that ends the pause, plus one; the failed step itself is not counted); the
               losses strike at an epoch's third batch, three steps after the checkpoint that
               every epoch's end writes
  restarted    whether node 0's worker processes are other PIDs afterwards
  checkpoint   whether a worker read a checkpoint ("resumed from")
Writes DIR/paths.json and DIR/paths.md (the table). Needs root. Usage:
  bench/train/elastic_paths.py CHEXSCALE_BIN [--paths in-place,restart,torchrun] [--gap 30]
                               [--out DIR]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import elastic_chaos as lab  # noqa: E402  (StepClock, node_env, kill_node, sh, ns, addr, ...)

lab.PREFIX = "chxpaths"
SERVER = 2
PORT = 29681
HEARTBEAT = 3
DETECTED = {
    "in-place": r"round \d+ ended",
    "restart": r"round \d+ ended",
    "torchrun": r"Worker group (FAILED|UNHEALTHY)|Detected \d+ new nodes",
}
STORE = ("import datetime, sys, time\n"
         "from torch.distributed import TCPStore\n"
         "s = TCPStore(sys.argv[1], int(sys.argv[2]), None, True, datetime.timedelta(seconds=600),"
         " wait_for_workers=False)\n"
         "print('store up', flush=True)\n"
         "time.sleep(86400)\n")


class Stamped:
    """A process in a node's namespace whose output lines are kept with their arrival time."""

    def __init__(self, node, cmd, log, hostname=None):
        inner = lab.node_env() + ["LOGLEVEL=INFO"] + cmd
        if hostname:  # torchrun names rank 0's node by its hostname: the node's own address
            inner = ["unshare", "--uts", "sh", "-c", f'hostname {hostname} && exec "$@"', "sh"] + inner
        self.proc = subprocess.Popen(["ip", "netns", "exec", lab.ns(node)] + inner,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     errors="replace")
        self.lines = []  # (time, line)
        self.log = open(log, "a")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            t = time.monotonic()
            self.lines.append((t, line.rstrip("\n")))
            self.log.write(f"{t:.3f} {line}")
            self.log.flush()

    def first_after(self, t, pattern, until):
        for at, line in list(self.lines):
            if t < at <= until and re.search(pattern, line):
                return at
        return None

    def count_after(self, t, text, until):
        return sum(1 for at, line in list(self.lines) if t < at <= until and text in line)


def mid_epoch(clock, timeout=20):
    """Waits until rank 0's newest step record (CLOCK's) is the epoch's third batch, so that each
    path's fault falls at the same place between two checkpoints (one at every epoch's end)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with clock.lock:
            if clock.last is not None and clock.last["batch"] == 3:
                return
        time.sleep(0.01)


def launcher(path, run, data):
    train = ["train", "--data", data, "--out", run, "--arch", "resnet18", "--image-size", "32",
             "--crop-size", "32", "--batch-size", "4", "--epochs", "2000", "--no-augment",
             "--loader-threads", "1", "--val-threads", "1", "--intra-op-threads", "1", "--seed",
             "3", "--log-every", "1", "--checkpoint-every", "10", "--keep-checkpoints", "2",
             "--collective-timeout", "10", "--resume", "auto"]
    if path == "torchrun":
        return ["/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes", "1:2",
                "--nproc_per_node", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                f"{lab.addr(SERVER)}:{PORT}", "--rdzv_id", "paths", "--rdzv_conf",
                "is_host=false,last_call_timeout=1,join_timeout=600", "--max_restarts", "100",
                "--monitor_interval", "0.5", "--redirects", "1", "--tee", "1", "--no_python",
                lab.BIN] + train
    return [lab.BIN, "launch", "--nnodes", "1:2", "--nproc-per-node", "1", "--master-addr",
            lab.addr(SERVER), "--master-port", str(PORT), "--rdzv-last-call", "1",
            "--heartbeat-timeout", str(HEARTBEAT), "--max-restarts", "100", "--stop-grace", "10",
            "--elastic", path, "--"] + train


def run_path(path, work, data, gap):
    """The four faults under PATH; a list of one dict per fault."""
    here = f"{work}/{path}"
    shutil.rmtree(here, ignore_errors=True)
    os.makedirs(here)
    run = f"{here}/run"
    if path == "torchrun":
        server = Stamped(SERVER, ["/usr/bin/python3", "-c", STORE, lab.addr(SERVER), str(PORT)],
                         f"{here}/server.log")
    else:
        server = Stamped(SERVER, [lab.BIN, "rendezvous-server", "--port", str(PORT)],
                         f"{here}/server.log")
    time.sleep(1.5)
    nodes = {}

    def start(node):
        nodes[node] = Stamped(node, launcher(path, run, data), f"{here}/node{node}.log",
                              hostname=lab.addr(node) if path == "torchrun" else None)

    try:
        start(0)
        time.sleep(1)
        start(1)
        clock = lab.StepClock(run)
        clock.start()
        deadline = time.monotonic() + 180
        while len(clock.seen) < 25 and time.monotonic() < deadline:
            time.sleep(0.2)
        if len(clock.seen) < 25:
            raise SystemExit(f"{path}: fewer than 25 steps in 180 s (logs in {here})")
        time.sleep(2)
        faults = []
        for kind in ("kill -9", "join", "link cut", "link restored"):
            if kind in ("kill -9", "link cut"):
                mid_epoch(clock)
            before = lab.children(nodes[0].proc.pid)
            t = time.monotonic()
            if kind == "kill -9":
                lab.kill_node(1)
            elif kind == "join":
                start(1)
            elif kind == "link cut":
                lab.sh(f"ip -n {lab.ns(1)} link set eth0 down")
            else:
                lab.sh(f"ip -n {lab.ns(1)} link set eth0 up")
            print(f"[{path}] {kind} on node 1", flush=True)
            time.sleep(gap)
            until = t + gap - 0.5
            with clock.lock:
                seen = list(clock.seen)
            last_before = max((s for at, s in seen if at <= t), default=None)
            f = {"fault": kind, "detected_s": None, "first_step_s": None, "pause_s": None,
                 "steps_again": None}
            detected = nodes[0].first_after(t, DETECTED[path], until)
            # The pause that the fault caused: the longest gap between step records that ends
            # after the detection and starts at most 5 s after it (an epoch's validation makes
            # pauses too), or anywhere in the window when nothing was detected.
            if detected is not None:
                f["detected_s"] = round(detected - t, 2)
                pairs = [(x, y) for x, y in zip(seen, seen[1:])
                         if detected < y[0] <= until and x[0] <= detected + 5]
            else:
                pairs = [(x, y) for x, y in zip(seen, seen[1:]) if t < y[0] <= until]
            if pairs:
                (a_t, _), (b_t, b_step) = max(pairs, key=lambda xy: xy[1][0] - xy[0][0])
                f["pause_s"] = round(b_t - a_t, 2)
                f["first_step_s"] = round(b_t - t, 2)
                if last_before is not None:
                    f["steps_again"] = max(0, last_before + 1 - b_step)
            after = lab.children(nodes[0].proc.pid)
            f["restarted"] = bool(before) and after != before
            f["checkpoint_read"] = sum(n.count_after(t, "resumed from ", until)
                                       for n in nodes.values()) > 0
            f["steps_in_window"] = len(pairs)
            faults.append(f)
            print(f"[{path}] {json.dumps(f)}", flush=True)
        clock.stopping = True
        return faults
    finally:
        for n in nodes.values():
            if n.proc.poll() is None:
                n.proc.terminate()
        time.sleep(3)
        for node in (0, 1, SERVER):
            lab.kill_node(node)
        lab.sh(f"ip -n {lab.ns(1)} link set eth0 up", check=False)


def cell(v, unit=""):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return f"{v:g}{unit}" if isinstance(v, (int, float)) else str(v)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("bin")
    p.add_argument("--paths", default="in-place,restart,torchrun")
    p.add_argument("--gap", type=float, default=30, help="seconds from one fault to the next")
    p.add_argument("--out", default="")
    a = p.parse_args()
    lab.BIN = os.path.realpath(a.bin)
    if os.geteuid() != 0:
        sys.exit("elastic_paths.py: needs root (network namespaces)")
    paths = a.paths.split(",")
    for path in paths:
        if path not in DETECTED:
            sys.exit(f"elastic_paths.py: unknown path '{path}' (in-place, restart, torchrun)")
    work = os.path.realpath(a.out or tempfile.mkdtemp(prefix="chexscale-paths-"))
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, LAB_PREFIX=lab.PREFIX)
    subprocess.run([lab.CLUSTER, "up", "--nodes", "3"], env=env, check=True, capture_output=True)
    try:
        data = f"{work}/data"
        shutil.rmtree(data, ignore_errors=True)
        lab.sh(f"{lab.BIN} synth --out {data} --images 64 --size 32 --seed 6")
        results = {path: run_path(path, work, data, a.gap) for path in paths}
    finally:
        subprocess.run([lab.CLUSTER, "down"], env=env, capture_output=True)
    with open(f"{work}/paths.json", "w") as f:
        json.dump(results, f, indent=1)
    rows = ["| fault | path | detected | first step after | longest pause | steps trained again "
            "| survivor's workers restarted | checkpoint read |", "|---|---|---:|---:|---:|---:|---|---|"]
    for kind in ("kill -9", "join", "link cut", "link restored"):
        for path in paths:
            f = next(x for x in results[path] if x["fault"] == kind)
            rows.append(f"| {kind} | {path} | {cell(f['detected_s'], ' s')} | "
                        f"{cell(f['first_step_s'], ' s')} | {cell(f['pause_s'], ' s')} | "
                        f"{cell(f['steps_again'])} | {cell(f['restarted'])} | "
                        f"{cell(f['checkpoint_read'])} |")
    table = "\n".join(rows)
    with open(f"{work}/paths.md", "w") as f:
        f.write(table + "\n")
    print(table)
    print(f"(logs in {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
