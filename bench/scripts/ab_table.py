#!/usr/bin/env python3
"""The layer A/B table of a stage_ab.sh call: per model, M and side, the median of the runs'
layer medians with [min-max] over the runs, and the change against the base side.
Usage: ab_table.py DIR [BASE]  (DIR: an extracted ab_call.tgz, files bench_<model>_<side>_<run>.txt;
BASE: a side name, e.g. main). Exit 2 when DIR holds no bench files."""
import glob
import os
import re
import statistics
import sys


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    d, base = argv[1], (argv[2] if len(argv) > 2 else None)
    times, models = {}, {}
    for f in sorted(glob.glob(os.path.join(d, "bench_*.txt"))):
        m = re.match(r"bench_(\d+)_(.+)_(\d+)\.txt$", os.path.basename(f))
        if not m:
            continue
        i, side = int(m.group(1)), m.group(2)
        lines = open(f).read().splitlines()
        if lines and i not in models:
            models[i] = lines[0].split(" (")[0]
        for line in lines:
            row = re.match(r"^\s+(\d+)\s+([\d.]+)\s+\[", line)
            if row:
                times.setdefault((i, int(row.group(1))), {}).setdefault(side, []).append(
                    float(row.group(2)))
    if not times:
        print(f"ab_table.py: no bench_<model>_<side>_<run>.txt with layer times in {d}",
              file=sys.stderr)
        return 2
    sides = sorted({s for v in times.values() for s in v}, key=lambda s: (s != base, s))
    for i in sorted(models):
        print("==", models[i])
        print("   M " + "".join(f"{s:>28}" for s in sides))
        for (j, M), per_side in sorted(times.items()):
            if j != i:
                continue
            ref = statistics.median(per_side[base]) if base in per_side else None
            cells = f"{M:4d} "
            for s in sides:
                xs = per_side.get(s)
                if not xs:
                    cells += " " * 28
                    continue
                med = statistics.median(xs)
                rel = f" {100 * (med / ref - 1):+5.1f}%" if ref and s != base else ""
                cells += f"{med:8.2f} [{min(xs):.2f}-{max(xs):.2f}]{rel}".rjust(28)
            print(cells)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
