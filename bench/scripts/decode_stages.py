#!/usr/bin/env python3
"""Does the decode rule's num_stages hold? Per shape, M and GEMM, from `moetune tune` runs.

Usage: decode_stages.py TUNE_DIR [TUNE_DIR ...] [--max-m 256]
  TUNE_DIR  the --out folder of one `moetune tune` run (one model): its *.tune.jsonl record log
            and the sidecars (<name>.meta.json for GEMM1, <name>_down.meta.json for GEMM2), whose
            entries name the default config per batch size.

For each batch size M <= --max-m and each GEMM: the default's median, the best median among the
configs that differ from the default only in num_stages (the "same tile" at each stage count
timed), and the best median overall; medians are each config's record with the most samples
(successive halving times the losers less: their n is printed). Prints a Markdown table, then
per GEMM the stage count that was best for the default's tile at every (shape, M), or "none".
Exit 0, or 2 on bad input (one line naming what is wrong).
"""
import os

from tune_logs import BadInput, OneLineParser, key, one, read_log, run_main, sidecar_entries, text


def run_folder(folder):
    """(shape label, {(M, stage): default key}, {(M, stage, key): (median, n)})."""
    down_meta = one(folder, "*_down.meta.json")
    up_meta = down_meta[: -len("_down.meta.json")] + ".meta.json"
    defaults = {}
    for stage, path in (("up", up_meta), ("down", down_meta)):
        try:
            for m, e in sidecar_entries(path).items():
                defaults[(m, stage)] = key(e["default_config"])
        except (KeyError, TypeError, AttributeError) as e:
            raise BadInput(f"{path}: not a tune sidecar ({e})")
    header, best = read_log(folder)
    label = os.path.basename(os.path.normpath(folder))
    if header:
        s = header.get("shape", {})
        label = "E={} N={} K={} topk={} {}".format(s.get("E"), s.get("N"), s.get("K"),
                                                   s.get("topk"), s.get("dtype"))
    return label, defaults, best


def main(argv):
    ap = OneLineParser(prog="decode_stages.py")
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--max-m", type=int, default=256)
    a = ap.parse_args(argv)
    print("| shape | M | GEMM | default | µs (n) | same tile, best stages | µs (n) | ratio | "
          "best overall | µs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    winners = {"up": set(), "down": set()}  # stage counts that won the default's tile
    rows = 0
    conditioned = []  # (label, M): GEMM2 rows left out, see below
    for folder in a.dirs:
        label, defaults, best = run_folder(folder)
        for (m, stage), dk in sorted(defaults.items(), key=lambda x: (x[0][0], x[0][1] != "up")):
            if m > a.max_m:
                continue
            # The tuner times GEMM2 at GEMM1's candidate BLOCK_SIZE_M (one alignment serves
            # both); the down sidecar's default then has that BLOCK_SIZE_M, not the layer's.
            up_default = defaults.get((m, "up"))
            if stage == "down" and up_default and dk[0] != up_default[0]:
                conditioned.append((label, m, dk[0]))
                continue
            if (m, stage, dk) not in best:
                continue
            same = {k: v for (mm, st, k), v in best.items()
                    if mm == m and st == stage and k[:5] + k[6:] == dk[:5] + dk[6:]}
            sk = min(same, key=lambda k: same[k][0])
            allk = {k: v for (mm, st, k), v in best.items() if mm == m and st == stage}
            bk = min(allk, key=lambda k: allk[k][0])
            d, s, b = best[(m, stage, dk)], same[sk], allk[bk]
            winners[stage].add(sk[5])
            rows += 1
            print(f"| {label} | {m} | {stage} | {text(dk)} | {d[0]:.2f} ({d[1]}) | s{sk[5]} | "
                  f"{s[0]:.2f} ({s[1]}) | {s[0] / d[0]:.3f} | {text(bk)} | {b[0]:.2f} |")
    if rows == 0:
        raise BadInput("no batch size with a timed default at or below --max-m")
    for label, m, bm in conditioned:
        print(f"left out: {label} M={m} down: its sidecar default has BLOCK_SIZE_M {bm} (GEMM1's "
              "candidate), not the layer default's")
    for stage in ("up", "down"):
        w = sorted(winners[stage])
        if not w:
            verdict = "no row"
        elif len(w) == 1:
            verdict = f"s{w[0]} at every row"
        else:
            verdict = "none (" + ", ".join(f"s{x}" for x in w) + " each won somewhere)"
        print(f"{stage}: best stage count for the default's tile: {verdict}")
    return 0


if __name__ == "__main__":
    run_main("decode_stages", main)
