#!/usr/bin/env python3
"""Issue 4's quality bar: is each tuned winner within 3% of the --exhaustive best, per GEMM?

Usage: tune_quality.py TUNED_DIR EXHAUSTIVE_DIR [--limit 1.03]
  TUNED_DIR       the --out folder of a normal `moetune tune` run (its config tables name the
                  winners: <name>.json for GEMM1 (up), <name>_down.json for GEMM2 (down))
  EXHAUSTIVE_DIR  the --out folder of `moetune tune --exhaustive` over the same model and batch
                  sizes (its *.tune.jsonl record log times every valid config)

Per (M, GEMM): the winner's median and the best median, both taken from the exhaustive run's log
(same process, same conditions) when the exhaustive run timed the winner; otherwise (GEMM2
candidates follow the exhaustive GEMM1 winner's BLOCK_SIZE_M, which may differ) the winner's
median from the tuned run's own log, marked "cross-run". A batch size the exhaustive run did not
finish (its sidecar's flag: interrupted or not reached; a run stopped at a deadline) is printed
marked "partial" and left out of the verdict: its best may be among the configs not yet timed;
without a sidecar (a run killed before it wrote any) no batch size counts as finished.
Exit 0 when every finished ratio <= limit, 1 when one is above, 3 when no batch size is finished
yet, 2 on bad input (one line naming what is wrong).
"""
import glob
import os

from tune_logs import (BadInput, OneLineParser, key, load_json, read_log, run_main,
                       sidecar_entries, text)

FINISHED = ("tuned", "within noise", "kept default")  # tuner.hpp's flags of a finished M


def tables(folder):
    """{stage: {M: config key}} from the up and _down tables of a tune --out folder."""
    up = [p for p in glob.glob(os.path.join(glob.escape(folder), "*.json"))
          if not p.endswith((".meta.json", "_down.json"))]
    if len(up) != 1:
        raise BadInput(f"{folder}: expected one config table, found {len(up)}")
    down = up[0][:-len(".json")] + "_down.json"
    out = {}
    for stage, path in (("up", up[0]), ("down", down)):
        table = load_json(path)
        try:
            out[stage] = {int(m): key(c) for m, c in table.items()}
        except (AttributeError, ValueError, TypeError) as e:
            raise BadInput(f"{path}: {e}")
    return out


def finished(folder):
    """{M: finished?} from the run's GEMM1 sidecar (<name>.meta.json); {} when it has none."""
    metas = [p for p in glob.glob(os.path.join(glob.escape(folder), "*.meta.json"))
             if not p.endswith("_down.meta.json")]
    if not metas:
        return {}
    if len(metas) != 1:
        raise BadInput(f"{folder}: expected one sidecar, found {len(metas)}")
    entries = sidecar_entries(metas[0])
    try:
        return {m: e.get("flag") in FINISHED for m, e in entries.items()}
    except AttributeError as e:
        raise BadInput(f"{metas[0]}: not a tune sidecar ({e})")


def medians(folder):
    """{(M, stage, config key): median µs} of the ok measurements (tune_logs.read_log)."""
    return {k: v[0] for k, v in read_log(folder)[1].items()}


def main(argv):
    parser = OneLineParser(prog="tune_quality.py", add_help=True)
    parser.add_argument("tuned_dir")
    parser.add_argument("exhaustive_dir")
    parser.add_argument("--limit", type=float, default=1.03,
                        help="largest winner / exhaustive-best ratio that passes (default 1.03)")
    a = parser.parse_args(argv)
    tuned_dir, ex_dir, limit = a.tuned_dir, a.exhaustive_dir, a.limit
    winners = tables(tuned_dir)
    tuned = medians(tuned_dir)
    ex = medians(ex_dir)
    ex_ms = sorted({m for (m, _, _) in ex})
    if not ex_ms:
        print(f"{ex_dir}: no ok measurement in the exhaustive log yet: nothing to judge yet")
        return 3
    done = finished(ex_dir)
    print("| M | GEMM | winner | winner µs | exhaustive best | best µs | ratio | source |")
    print("|---|---|---|---|---|---|---|---|")
    worst, judged, partial = 0.0, 0, []
    for m in ex_ms:
        whole = done.get(m, False)
        if not whole:
            partial.append(m)
        for stage in ("up", "down"):
            cands = {c: v for (mm, st, c), v in ex.items() if mm == m and st == stage}
            if not cands:
                continue
            if m not in winners[stage]:
                raise BadInput(f"M={m}: timed by the exhaustive run but not in the tuned {stage} "
                               "table")
            b = min(cands, key=cands.get)
            w = winners[stage][m]
            if w in cands:
                wv, src = cands[w], "exhaustive run"
            elif (m, stage, w) in tuned:
                wv, src = tuned[(m, stage, w)], "cross-run"
            else:
                raise BadInput(f"M={m} {stage}: the winner {text(w)} was timed in neither log")
            ratio = wv / cands[b]
            if whole:
                worst, judged = max(worst, ratio), judged + 1
                mark = "" if ratio <= limit else " **over**"
            else:
                src += f"; partial: {len(cands)} configs timed"
                mark = " (not judged)"
            print(f"| {m} | {stage} | {text(w)} | {wv:.2f} | {text(b)} | {cands[b]:.2f} | "
                  f"{ratio:.3f}{mark} | {src} |")
    if partial:
        print(f"not finished by the exhaustive run (not judged): M = {', '.join(map(str, partial))}")
    if judged == 0:
        print("no finished batch size: nothing to judge yet")
        return 3
    print(f"worst ratio {worst:.3f} over the finished batch sizes (limit {limit})")
    return 0 if worst <= limit else 1


if __name__ == "__main__":
    run_main("tune_quality", main)
