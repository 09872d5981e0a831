#!/usr/bin/env python3
"""Splits each traced MoE layer at its kernels' ends (bench/scripts/chain_timeline.sh).

Input: nsys `cuda_gpu_trace` CSV files of `moetune bench` runs. A layer is a routing kernel
and the kernels after it up to the next routing kernel; only layers whose previous kernel is a
GEMM (the layer before it) count, so the GEMM-phase graphs and set-up kernels are left out.
For each layer: t0 = the previous kernel's end; each stage's share = its end minus the end
before it (so the shares add up to the layer's time in the chain); `start` = when its first
block ran, against t0 (under PDL a stage starts before the one before it ends).
Prints, per file, the median share and start of each stage in µs, and the median layer.
Exit 2 on a file without usable rows.
"""
import csv
import re
import statistics
import sys


def stage_of(name):
    n = name.lower()
    if "route_align" in n:
        return "route+align"
    if "routing" in n:
        return "routing"
    if "moe_align" in n:
        return "align"
    if "gemm" in n:
        return "gemm"
    for key in ("silu_mul", "topk_reduce", "quant"):
        if key in n:
            return key
    return "other"


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head = next((i for i, r in enumerate(rows) if any("Start" in c for c in r)), None)
    if head is None:
        return []
    cols = rows[head]
    si = next(i for i, c in enumerate(cols) if c.startswith("Start"))
    di = next(i for i, c in enumerate(cols) if c.startswith("Duration"))
    ni = next(i for i, c in enumerate(cols) if c == "Name")
    out = []
    for r in rows[head + 1:]:
        if len(r) <= max(si, di, ni) or not r[si].strip():
            continue
        try:
            s, d = float(r[si]), float(r[di])
        except ValueError:
            continue  # memcpy / memset rows without a number
        out.append((s, s + d, stage_of(r[ni])))
    out.sort()
    return out


def main(paths):
    status = 0
    for path in paths:
        k = read(path)
        if not k:
            print(f"{path}: no kernel rows", file=sys.stderr)
            status = 2
            continue
        shares, starts, layers = {}, {}, []
        i = 0
        while i < len(k):
            if k[i][2] not in ("routing", "route+align") or i == 0 or k[i - 1][2] != "gemm":
                i += 1
                continue
            j = i + 1
            while j < len(k) and k[j][2] not in ("routing", "route+align"):
                j += 1
            t0, prev = k[i - 1][1], k[i - 1][1]
            gemms = 0
            for s, e, st in k[i:j]:
                if st == "gemm":
                    gemms += 1
                    st = f"gemm{gemms}"
                shares.setdefault(st, []).append((max(e, prev) - prev) / 1e3)
                starts.setdefault(st, []).append((s - t0) / 1e3)
                prev = max(prev, e)
            layers.append((prev - t0) / 1e3)
            i = j
        if not layers:
            print(f"{path}: no layer after a GEMM", file=sys.stderr)
            status = 2
            continue
        name = re.sub(r"_cuda_gpu_trace\.csv$", "", path.split("/")[-1])
        print(f"{name}: {len(layers)} layers, median {statistics.median(layers):.2f} µs")
        for st in shares:
            print(f"  {st:<12} share {statistics.median(shares[st]):6.2f} µs   "
                  f"start {statistics.median(starts[st]):6.2f} µs after the layer before")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
