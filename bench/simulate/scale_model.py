#!/usr/bin/env python3
"""How closely the lab is a scale model of the article's cluster: for each path, the ratio of one
step's compute time to the time its gradients take over that path, in the article (published
figures, docs/comparison.md "The article's Figure 1 ... predicted from published figures") and in
the lab (a compute profile at the workers' quota and the paths' commbench profiles). A lab ratio
equal to the article's means the lab hides or exposes communication as the cluster did.

Usage: bench/simulate/scale_model.py COMPUTE.json PATH=PROFILE.json ... [--markdown]
  PATH: fabric (bare metal between nodes), overlay (Kubernetes between nodes), intra-node
"""
import json
import math
import sys

# The article's hardware (docs/comparison.md, Inputs): DenseNet-121 at batch 64 per GPU, 256 px,
# 315 images/s on a V100; bytes per second each path moves.
ARTICLE_STEP_S = 64 / 315
ARTICLE_RATE = {
    "intra-node": ("NVLink 2.0, 2 links per pair x 25 GB/s x 0.8", 50e9 * 0.8),
    "fabric": ("EDR InfiniBand 12.5 GB/s x 0.88 (NCCL)", 12.5e9 * 0.88),
    "overlay": ("TCP over IPoIB 3 GB/s x 8.5/9.8 (flannel VXLAN)", 3e9 * 8.5 / 9.8),
}


def allreduce_seconds(profile, nbytes):
    """The profile's allreduce time at nbytes: log-log interpolation between its samples."""
    samples = sorted((s["bytes"], s["seconds"]) for s in profile["samples"])
    for (b0, t0), (b1, t1) in zip(samples, samples[1:]):
        if b0 <= nbytes <= b1:
            w = math.log(nbytes / b0) / math.log(b1 / b0)
            return math.exp(math.log(t0) + w * (math.log(t1) - math.log(t0)))
    b, t = samples[0] if nbytes < samples[0][0] else samples[-1]
    return t * nbytes / b  # outside the samples: proportional to the nearest


def main(argv):
    if len(argv) < 2 or any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    markdown = "--markdown" in argv
    args = [a for a in argv[1:] if a != "--markdown"]
    compute = json.load(open(args[0]))
    grad_bytes = sum(p["bytes"] for p in compute["parameters"])
    phases = compute["phases_s"]
    lab_step = phases["forward"] + phases["backward"] + phases["optimizer"]
    rows = []
    for arg in args[1:]:
        path, _, file = arg.partition("=")
        if path not in ARTICLE_RATE:
            sys.exit(f"scale_model.py: unknown path '{path}' (fabric, overlay, intra-node)")
        what, rate = ARTICLE_RATE[path]
        article = ARTICLE_STEP_S / (grad_bytes / rate)
        lab_transfer = allreduce_seconds(json.load(open(file)), grad_bytes)
        lab = lab_step / lab_transfer
        rows.append((path, what, article, lab_transfer, lab, grad_bytes * article / lab_step))
    print(f"gradients {grad_bytes / 1e6:.1f} MB; compute per step: article {ARTICLE_STEP_S:.3f} s, "
          f"lab {lab_step:.3f} s ({compute['arch']} {compute['image_size']} px, batch "
          f"{compute['batch_per_worker']}, profile at the workers' quota)")
    if markdown:
        print("\n| path | article's link | compute / transfer, article | lab transfer | "
              "compute / transfer, lab | lab / article | lab rate for the article's ratio |")
        print("|---|---|---:|---:|---:|---:|---:|")
    for path, what, article, transfer, lab, needed in rows:
        if markdown:
            print(f"| {path} | {what} | {article:.0f} | {transfer * 1e3:.0f} ms | {lab:.1f} | "
                  f"{lab / article:.2f} | {needed / 1e6:.0f} MB/s |")
        else:
            print(f"{path:10s} article {article:7.1f}  lab {lab:6.1f} (transfer {transfer * 1e3:.0f} ms)"
                  f"  lab/article {lab / article:.2f}  needs {needed / 1e6:.0f} MB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
