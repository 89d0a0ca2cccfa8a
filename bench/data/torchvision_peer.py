#!/usr/bin/python3
"""PyTorch reference data path, one core: PIL decode alone, and the CheXNet torchvision pipeline
(Resize 256, RandomCrop 224, RandomHorizontalFlip, ToTensor, Normalize) through a DataLoader
with num_workers=0, on the same PNGs as bench_data, and the same on the JPEGs bench_data writes of
them (DATA/bench-jpeg/, when it has run). Prints one JSON line."""
import argparse
import csv
import json
import os
import time

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms


def train_images(data_dir, limit):
    listed = set(open(os.path.join(data_dir, "train_val_list.txt")).read().split())
    with open(os.path.join(data_dir, "Data_Entry_2017.csv")) as f:
        names = [row[0] for row in csv.reader(f) if row and row[0] in listed]
    return [os.path.join(data_dir, "images", n) for n in names[:limit]]


class Images(Dataset):
    def __init__(self, paths):
        self.paths = paths
        self.transform = transforms.Compose([
            transforms.Resize(256),
            transforms.RandomCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ])

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return self.transform(Image.open(self.paths[i]).convert("RGB")), 0


def best_rates(n, repeats, fn):
    """Images per second of wall time and per second of this process's CPU time (the per-core
    cost, insensitive to other processes on a shared machine), each the best of `repeats`."""
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
    return n / best_wall, n / best_cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True)
    ap.add_argument("--images", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    paths = train_images(args.data, args.images)
    for p in paths:  # warm the page cache
        open(p, "rb").read()

    def rates(key, images):
        n = len(images)
        d_wall, d_cpu = best_rates(n, args.repeats, lambda: [Image.open(p).load() for p in images])
        p_wall, p_cpu = best_rates(
            n, args.repeats, lambda: [None for _ in DataLoader(Images(images), batch_size=16)])
        return {f"pil{key}_decode_per_s": d_wall, f"pil{key}_decode_per_cpu_s": d_cpu,
                f"torchvision{key}_pipeline_per_s": p_wall,
                f"torchvision{key}_pipeline_per_cpu_s": p_cpu}

    out = {"images": len(paths), **rates("", paths)}
    jpeg_dir = os.path.join(args.data, "bench-jpeg")
    jpegs = [j for j in (os.path.join(jpeg_dir, os.path.splitext(os.path.basename(p))[0] + ".jpg")
                         for p in paths) if os.path.exists(j)]
    if jpegs:
        for j in jpegs:
            open(j, "rb").read()
        out.update(rates("_jpeg", jpegs))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
