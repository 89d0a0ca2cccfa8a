#!/usr/bin/env python3
"""Scales a measured compute profile (chexscale.compute-profile/1) to a published step time.

The measured profile (`chexscale bench --workers 1 --profile FILE`, any machine) gives the model's
real parameters (bytes, shapes, registration order), the split of a step into forward, backward
and optimizer, and when during backward each gradient is ready. A published figure gives only the
throughput of another device. This keeps the first and takes the second: every time (phases,
ready times) is multiplied by one factor so that the step takes batch / images_per_sec, the
bucket shape and readiness fractions stay the measured ones, and the data wait is set to zero
(the published figures are of a data path that keeps up). The step spread is dropped (no
stragglers) unless --keep-spread.

  scale_profile.py MEASURED.json OUT.json --images-per-sec 315 --batch 64 --image-size 256 \
      [--device cuda] [--powersgd-flops-per-s 1.5e12] [--arch densenet121]
"""
import argparse
import json
import sys

SCHEMA = "chexscale.compute-profile/1"


def scale(measured, images_per_sec, batch, image_size, device, powersgd_flops_per_s, keep_spread):
    if measured.get("schema") != SCHEMA:
        raise ValueError(f"schema {measured.get('schema')!r} is not {SCHEMA}")
    if not images_per_sec > 0 or batch < 1 or image_size < 1:
        raise ValueError("images_per_sec, batch and image_size must be > 0")
    phases = measured["phases_s"]
    compute = phases["forward"] + phases["backward"] + phases["optimizer"]
    target = batch / images_per_sec
    k = target / compute
    out = dict(measured)
    out["batch_per_worker"] = batch
    out["image_size"] = image_size
    out["device"] = device
    out["phases_s"] = {
        "data_wait": 0.0,
        "forward": phases["forward"] * k,
        "backward": phases["backward"] * k,
        "optimizer": phases["optimizer"] * k,
        "step": target,
    }
    out["step_spread"] = measured.get("step_spread", []) if keep_spread else []
    out["parameters"] = [dict(p, ready_s=min(p["ready_s"] * k, phases["backward"] * k))
                         for p in measured["parameters"]]
    out["powersgd_flops_per_s"] = powersgd_flops_per_s
    out["scaled_from"] = {"images_per_sec": images_per_sec, "factor": k}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("measured")
    ap.add_argument("out")
    ap.add_argument("--images-per-sec", type=float, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--image-size", type=int, required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--powersgd-flops-per-s", type=float, default=0.0)
    ap.add_argument("--keep-spread", action="store_true")
    a = ap.parse_args()
    try:
        with open(a.measured) as f:
            measured = json.load(f)
        out = scale(measured, a.images_per_sec, a.batch, a.image_size, a.device,
                    a.powersgd_flops_per_s, a.keep_spread)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"scale_profile.py: {a.measured}: {e}")
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
