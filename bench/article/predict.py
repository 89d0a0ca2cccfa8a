#!/usr/bin/env python3
"""The article's Figure 1 and 16 to 1,024 GPUs, predicted by `chexscale simulate` from published
figures only (every one below with its source; the assumptions are named and ranged).

Writes profiles/*.json (the inputs), results.md (Figure 1, the sensitivity table, where each
configuration stops scaling) and charts/ (the report's charts of the simulated runs).
  predict.py [--chexscale PATH] [--out DIR]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the tree
import scale_profile  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- Published figures (docs/comparison.md cites each URL) ------------------------------------
# NVIDIA DeepLearningExamples, TensorFlow ResNet-50 v1.5, DGX-1 (V100 16 GB), TF 20.06, FP32+XLA:
# 412 img/s on 1 GPU at batch 128 (224 px); 3170 img/s on 8 GPUs (7.69x).
RN50_V100_FP32_IMG_S = 412.0
# V100 SXM2: NVLink 2.0, 25 GB/s per direction per link, 6 links (300 GB/s total); four GPUs
# connected all to all use 2 links per pair: 50 GB/s per direction between two GPUs.
NVLINK_PAIR_BYTES_S = 50e9
# EDR InfiniBand: 100 Gb/s per port (12.5 GB/s), sub-microsecond switch/adapter latency.
EDR_LINE_BYTES_S = 12.5e9
# VXLAN overlay against direct routing on the same 25 Gb/s NICs: 8.5 vs 9.8 Gb/s (-13 %).
VXLAN_FACTOR = 8.5 / 9.8

# ---- Assumptions (central value, low, high): the sensitivity table moves each ------------------
ASSUMPTIONS = {
    # DenseNet-121 images/s over ResNet-50's on the same GPU (no published V100 training figure).
    "densenet_over_resnet": (1.0, 0.6, 1.4),
    # Compute per image grows with the pixels from 224 to 256 px: 1.306x the time.
    "pixel_exponent": (1.0, 0.8, 1.2),
    # Achieved NCCL bandwidth over EDR as a fraction of line rate.
    "edr_efficiency": (0.88, 0.72, 0.96),
    "fabric_latency_us": (5.0, 2.0, 20.0),
    # TCP over IP-over-InfiniBand (what flannel's VXLAN runs on): bytes/s achieved by NCCL's
    # socket transport; no published EDR figure for this stack was found.
    "ipoib_bytes_s": (3.0e9, 1.5e9, 6.0e9),
    "overlay_latency_us": (40.0, 15.0, 100.0),
    "nvlink_latency_us": (5.0, 2.0, 10.0),
    # Fraction of the NVLink pair bandwidth a ring step gets.
    "nvlink_efficiency": (0.8, 0.5, 1.0),
    # Gradient bucket (Horovod 0.16 fuses up to 64 MB each 5 ms cycle; the reducer 25 MiB).
    "bucket_mb": (25.0, 8.0, 64.0),
}
# Kubernetes with hostNetwork: TCP over IPoIB without VXLAN; latency per ring step (assumed).
HOST_LATENCY_US = 25.0
# V100 FP32 peak 15.7 TFLOP/s; PowerSGD's skinny products and Gram-Schmidt reach a fraction.
POWERSGD_FLOPS_S = 1.5e12
BATCH = 64
IMAGE = 256


def central():
    return {k: v[0] for k, v in ASSUMPTIONS.items()}


def network(path, bytes_s, latency_us):
    return {"schema": "chexscale.network-profile/1", "path": path, "backend": "nccl",
            "measured_world_size": 2, "latency_s": latency_us * 1e-6,
            "bandwidth_bytes_per_s": bytes_s, "cpu_s_per_byte": 0.0, "fit_max_error": 0.0}


def write(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def make_inputs(a, folder):
    """Writes the compute and network profiles of assumption set `a` into `folder`."""
    os.makedirs(folder, exist_ok=True)
    rn50 = RN50_V100_FP32_IMG_S / (IMAGE / 224.0) ** (2 * a["pixel_exponent"])
    rates = {"resnet50": rn50, "densenet121": rn50 * a["densenet_over_resnet"]}
    for arch, rate in rates.items():
        with open(os.path.join(HERE, "measured", arch + ".json")) as f:
            measured = json.load(f)
        write(os.path.join(folder, f"{arch}-v100.json"),
              scale_profile.scale(measured, rate, BATCH, IMAGE, "cuda", POWERSGD_FLOPS_S, False))
    nets = {
        "nvlink": network("nvlink", NVLINK_PAIR_BYTES_S * a["nvlink_efficiency"],
                          a["nvlink_latency_us"]),
        "edr-ib": network("edr-ib", EDR_LINE_BYTES_S * a["edr_efficiency"],
                          a["fabric_latency_us"]),
        "flannel-ipoib": network("flannel-ipoib", a["ipoib_bytes_s"] * VXLAN_FACTOR,
                                 a["overlay_latency_us"]),
        "host-ipoib": network("host-ipoib", a["ipoib_bytes_s"], HOST_LATENCY_US),
    }
    for name, doc in nets.items():
        write(os.path.join(folder, name + ".json"), doc)
    return rates


def simulate(exe, folder, arch, nodes, wpn, a, kube="flannel-ipoib", extra=(), out=None,
             charts=False):
    """Runs chexscale simulate for bare metal (EDR) and Kubernetes (`kube`); the JSON document."""
    out = out or tempfile.mkdtemp(prefix="sim-")
    cmd = [exe, "simulate", "--compute", os.path.join(folder, f"{arch}-v100.json")]
    for name in ("nvlink", "edr-ib", "flannel-ipoib", "host-ipoib"):
        cmd += ["--network", f"{name}={os.path.join(folder, name + '.json')}"]
    cmd += ["--system", "bare-metal=edr-ib,nvlink", "--system", f"kubernetes={kube},nvlink",
            "--nodes", ",".join(map(str, nodes)), "--workers-per-node", str(wpn),
            "--bucket-mb", str(a["bucket_mb"]), "--cores-per-worker", "10", "--no-stragglers",
            "--steps", "1", "--out", out]  # without stragglers every step is the same
    if not charts:
        cmd.append("--no-charts")
    cmd += list(extra)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "simulate.json")) as f:
        return json.load(f)


def system(doc, name):
    return next(s for s in doc["systems"] if s["name"] == name)


def figure1(exe, folder, a, arch="densenet121"):
    """(GPUs, bare-metal img/s, kubernetes img/s, gap %) at 1, 2, 3, 4 and 8 GPUs."""
    rows = []
    for gpus, nodes, wpn in ((1, 1, 1), (2, 1, 2), (3, 1, 3), (4, 1, 4), (8, 2, 4)):
        doc = simulate(exe, folder, arch, [nodes], wpn, a)
        bm = system(doc, "bare-metal")["jobs"][0]
        k8 = system(doc, "kubernetes")["jobs"][0]
        rows.append((gpus, bm["images_per_sec"], k8["images_per_sec"], k8["gap_pct"],
                     bm["efficiency"], k8["efficiency"]))
    return rows


def gap_at_8(exe, folder, a, extra=()):
    doc = simulate(exe, folder, "densenet121", [2], 4, a, extra=extra)
    return system(doc, "kubernetes")["jobs"][0]["gap_pct"]


def stops_scaling(jobs, effs):
    for job, eff in zip(jobs, effs):
        if eff < 0.8:
            return job["workers"]
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chexscale", default=os.environ.get("CHEXSCALE", "build/src/cli/chexscale"))
    ap.add_argument("--out", default=HERE)
    args = ap.parse_args()
    if not os.access(args.chexscale, os.X_OK):
        sys.exit(f"predict.py: {args.chexscale} is not an executable chexscale (--chexscale PATH)")
    folder = os.path.join(args.out, "profiles")
    work = tempfile.mkdtemp(prefix="article-")
    # A private copy: a build relinking the binary meanwhile cannot break the run.
    args.chexscale = shutil.copy(args.chexscale, os.path.join(work, "chexscale"))
    lines = []
    a = central()
    rates = make_inputs(a, folder)
    lines.append("# The article's Figure 1 and 16-1,024 GPUs, simulated from published figures\n")
    lines.append("Regenerated by `bench/article/predict.sh`; inputs in `bench/article/profiles/`, "
                 "sources and assumptions in docs/comparison.md.\n")
    lines.append(f"V100 one-GPU images/s at batch {BATCH}, {IMAGE} px (FP32): "
                 f"ResNet-50 {rates['resnet50']:.0f}, DenseNet-121 {rates['densenet121']:.0f}.\n")

    lines.append("## Figure 1: DenseNet-121, batch 64 per GPU, 256 px\n")
    lines.append("| GPUs | bare metal img/s | Kubernetes img/s | gap % | efficiency BM | "
                 "efficiency K8s |")
    lines.append("|---:|---:|---:|---:|---:|---:|")
    fig = figure1(args.chexscale, folder, a)
    for g, bm, k8, gap, ebm, ek8 in fig:
        lines.append(f"| {g} | {bm:.0f} | {k8:.0f} | {gap:+.1f} | {ebm:.3f} | {ek8:.3f} |")
    lines.append("")

    lines.append("## Sensitivity: the gap at 8 GPUs when one assumption moves\n")
    base = fig[-1][3]
    lines.append(f"Central prediction: Kubernetes {base:+.1f} % slower (the article: about 8 %).\n")
    lines.append("| assumption | central | low | high | gap at low | gap at high | swing |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|")
    swings = []
    for name, (mid, lo, hi) in ASSUMPTIONS.items():
        gaps = []
        for value in (lo, hi):
            b = dict(a, **{name: value})
            sub = os.path.join(work, f"{name}-{value}")
            make_inputs(b, sub)
            gaps.append(gap_at_8(args.chexscale, sub, b))
        swings.append((abs(gaps[1] - gaps[0]), name))
        lines.append(f"| {name} | {mid:g} | {lo:g} | {hi:g} | {gaps[0]:+.1f} | {gaps[1]:+.1f} | "
                     f"{abs(gaps[1] - gaps[0]):.1f} |")
    no_overlap = gap_at_8(args.chexscale, folder, a, ["--no-overlap"])
    lines.append(f"| overlap (Horovod-like) | on | off | | {no_overlap:+.1f} | | "
                 f"{abs(no_overlap - base):.1f} |")
    swings.append((abs(no_overlap - base), "overlap"))
    swings.sort(reverse=True)
    lines.append(f"\nMost sensitive to: {swings[0][1]}, then {swings[1][1]}.\n")

    lines.append("## 16 to 1,024 GPUs: first size with scaling efficiency < 0.8\n")
    lines.append("'-' = still >= 0.8 at 1,024 GPUs. Kubernetes variants: flannel over IPoIB "
                 "(default), host network over IPoIB, RDMA (the fabric itself, as with an RDMA "
                 "device plugin).\n")
    lines.append("| model | GPUs/node | setting | bare metal | Kubernetes flannel | "
                 "K8s host net | K8s RDMA |")
    lines.append("|---|---:|---|---:|---:|---:|---:|")
    variants = [("baseline", []), ("fp16", ["--grad-compression", "fp16"]),
                ("powersgd:4", ["--grad-compression", "powersgd:4"]),
                ("bucket 100 MiB", "bucket"), ("tree allreduce", ["--algorithm", "tree"]),
                ("powersgd:4 + tree", ["--grad-compression", "powersgd:4", "--algorithm", "tree"])]
    for arch in ("densenet121", "resnet50"):
        for wpn in (4, 8):
            nodes = [n for n in (2, 4, 8, 16, 32, 64, 128, 256) if 16 <= n * wpn <= 1024]
            for label, extra in variants:
                cells = []
                for kube in ("flannel-ipoib", "host-ipoib", "edr-ib"):
                    if extra == "bucket":
                        doc = simulate(args.chexscale, folder, arch, nodes, wpn,
                                       dict(a, bucket_mb=100.0), kube, ["--first-bucket-mb", "100"])
                    else:
                        doc = simulate(args.chexscale, folder, arch, nodes, wpn, a, kube, extra)
                    if kube == "flannel-ipoib":
                        bm = system(doc, "bare-metal")
                        cells.append(stops_scaling(bm["jobs"], [j["efficiency"]
                                                                for j in bm["jobs"]]))
                    k8 = system(doc, "kubernetes")
                    cells.append(stops_scaling(k8["jobs"], [j["efficiency"] for j in k8["jobs"]]))
                text = " | ".join("-" if c is None else str(c) for c in cells)
                lines.append(f"| {arch} | {wpn} | {label} | {text} |")
    lines.append("")

    charts = os.path.join(args.out, "charts")
    os.makedirs(charts, exist_ok=True)
    for arch in ("densenet121", "resnet50"):
        out = os.path.join(work, f"chart-{arch}")
        simulate(args.chexscale, folder, arch, [4, 8, 16, 32, 64, 128, 256], 4, a, out=out,
                 charts=True)
        # Images/s (bars) and scaling efficiency (log worker axis, the ideal line).
        for chart, name in (("throughput", f"scaling-{arch}"),
                            ("efficiency", f"scaling-{arch}-efficiency")):
            for ext in ("png", "svg"):
                src = os.path.join(out, f"{chart}.{ext}")
                if os.path.exists(src):
                    shutil.copy(src, os.path.join(charts, f"{name}.{ext}"))

    start = time.monotonic()
    timing = subprocess.run([args.chexscale, "simulate", "--compute",
                             os.path.join(folder, "densenet121-v100.json"), "--network",
                             f"edr-ib={os.path.join(folder, 'edr-ib.json')}", "--nodes", "256",
                             "--workers-per-node", "4", "--steps", "100", "--no-charts", "--out",
                             os.path.join(work, "timing")], check=True, capture_output=True,
                            text=True)
    wall = time.monotonic() - start
    inside = re.search(r"steps in ([0-9.]+) s", timing.stdout).group(1)
    lines.append(f"`chexscale simulate` of 1,024 workers x 100 steps (and its one-worker "
                 f"reference): {inside} s of simulation, {wall:.3f} s for the whole command "
                 f"(process start and file writes included).\n")
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("\n".join(lines))
    shutil.rmtree(work)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
