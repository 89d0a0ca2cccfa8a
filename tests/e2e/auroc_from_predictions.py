#!/usr/bin/python3
"""Per-class and mean AUROC recomputed from a predictions.csv, independently of chexscale.

AUROC here is the probability that a positive outranks a negative (ties count one half),
counted over every positive-negative pair with numpy -- not chexscale's rank sums. A class
without positives or without negatives has no AUROC (null), and the mean is over the others.
An empty label cell is a label that is not known. Prints JSON: {"per_class": {...}, "mean": x}.
Usage: auroc_from_predictions.py PREDICTIONS_CSV
"""
import csv
import json
import sys

import numpy as np


def pairwise_auroc(scores, labels):
    positives = scores[labels == 1]
    negatives = scores[labels == 0]
    if positives.size == 0 or negatives.size == 0:
        return None
    above = (positives[:, None] > negatives[None, :]).sum()
    tied = (positives[:, None] == negatives[None, :]).sum()
    return float((above + 0.5 * tied) / (positives.size * negatives.size))


def main(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    classes = [h[len("prob_"):] for h in header if h.startswith("prob_")]
    per_class = {}
    for name in classes:
        p_col = header.index("prob_" + name)
        y_col = header.index("label_" + name)
        known = [r for r in body if r[y_col] != ""]
        scores = np.array([float(r[p_col]) for r in known], dtype=np.float64)
        labels = np.array([int(r[y_col]) for r in known], dtype=np.int64)
        per_class[name] = pairwise_auroc(scores, labels)
    defined = [v for v in per_class.values() if v is not None]
    mean = sum(defined) / len(defined) if defined else None
    print(json.dumps({"per_class": per_class, "mean": mean}))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: auroc_from_predictions.py PREDICTIONS_CSV")
    main(sys.argv[1])
