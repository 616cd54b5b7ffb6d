"""scikit-learn's KMeans as the reference palettizer for Provenant's `palettize` stage.

The report (AFM, §5.2) palettizes each group of 16 rows with K-means to 16 values; how well a
palettizer does is the squared error its tables leave. This script takes the float weights a
`palettize` stage read and its palette description, and palettizes every palettized tensor
again with PyPI scikit-learn's `KMeans` (k-means++ initialisation, `n_init=10`, fixed
`random_state`), group by group at the bits the stage chose, the table rounded to half
precision as the book says, each value replaced by its nearest entry; it prints the squared
error per tensor beside the stage's. It is an independent palettizer, not a transcription of
the stage: the two may find different local optima, and the test compares their errors.

Usage: palette_kmeans_reference.py --weights MODEL.safetensors --palette PALETTE.json
Output (stdout): {"tensors": {name: {"bits", "groups", "sklearn": error, "stage": error}}}
"""

import argparse
import json
import sys

import numpy as np
from safetensors.numpy import load_file
from sklearn.cluster import KMeans


def palettize_group(values, bits, seed):
    """The squared error of a half-precision table of 2^bits k-means centroids for `values`."""
    k = 1 << bits
    distinct = np.unique(values)
    if len(distinct) <= k:
        table = distinct.astype(np.float16).astype(np.float64)
    else:
        km = KMeans(n_clusters=k, n_init=10, random_state=seed).fit(values.reshape(-1, 1))
        table = km.cluster_centers_.reshape(-1).astype(np.float16).astype(np.float64)
    nearest = np.abs(values.reshape(-1, 1) - table.reshape(1, -1)).argmin(axis=1)
    return float(((table[nearest] - values) ** 2).sum())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", required=True)
    parser.add_argument("--palette", required=True)
    args = parser.parse_args()
    weights = load_file(args.weights)
    with open(args.palette, encoding="utf-8") as f:
        palette = json.load(f)
    group_rows = palette["config"]["group_rows"]
    out = {}
    for name, scheme in sorted(palette["tensors"].items()):
        if scheme["scheme"] != "palette":
            continue
        w = weights[name].astype(np.float64)
        rows = w.shape[0]
        w = w.reshape(rows, -1)
        error = 0.0
        for g, start in enumerate(range(0, rows, group_rows)):
            error += palettize_group(w[start : start + group_rows].reshape(-1), scheme["bits"], g)
        out[name] = {"bits": scheme["bits"], "groups": scheme["groups"], "sklearn": error, "stage": scheme["squared_error"]}
    json.dump({"tensors": out}, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
