#!/usr/bin/env python3
"""Where a tune sweep's wall time went: per batch size, when its first and last measurement
were recorded (seconds after the log's header), how many measurements it took, how many of
them at each replay count (successive halving's rounds) and the compile seconds they carried.

Usage: bench/scripts/tune_timeline.py RUN.tune.jsonl[.gz] ...
"""
import collections
import gzip
import json
import signal
import sys
from datetime import datetime


def seconds(stamp):
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").timestamp()


def main(paths):
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            records = [json.loads(line) for line in f if line.strip()]
        if not records or records[0].get("type") != "header":
            sys.exit(f"{path}: not a tune record log (no header line)")
        t0 = seconds(records[0]["time"])
        per_m = collections.OrderedDict()
        for r in records[1:]:
            if r.get("type") != "measure":
                continue
            t = seconds(r["time"]) - t0
            d = per_m.setdefault(r["M"], {"first": t, "last": t, "n": 0, "compile_s": 0.0,
                                           "replays": collections.Counter()})
            d["first"], d["last"] = min(d["first"], t), max(d["last"], t)
            d["n"] += 1
            d["compile_s"] += r.get("compile_s") or 0.0
            d["replays"][r.get("n", 0)] += 1
        print(path)
        print(f"{'M':>6} {'first_s':>8} {'last_s':>7} {'span_s':>6} {'meas':>5} "
              f"{'compile_s':>9}  by replays")
        for m, d in per_m.items():
            rounds = " ".join(f"{k}:{v}" for k, v in sorted(d["replays"].items()))
            print(f"{m:>6} {d['first']:>8.0f} {d['last']:>7.0f} {d['last'] - d['first']:>6.0f} "
                  f"{d['n']:>5} {d['compile_s']:>9.1f}  {rounds}")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
