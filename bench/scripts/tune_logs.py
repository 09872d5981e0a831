"""What bench/scripts/tune_quality.py and decode_stages.py both read from a `moetune tune --out`
folder: the record log (*.tune.jsonl), the config tables and sidecars, and config keys. Bad
input raises BadInput; each script's `run_main` prints it as one line and exits 2."""
import argparse
import glob
import json
import os
import sys

KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages",
        "SPLIT_K")


class BadInput(Exception):
    pass


def key(cfg):
    """A config's comparable key (SPLIT_K 1 when absent, as the tables write it)."""
    return tuple(int(cfg.get(k, 1 if k == "SPLIT_K" else -1)) for k in KEYS)


def text(k):
    return "m{}n{}k{}_g{}_w{}_s{}_sk{}".format(*k)


def one(folder, pattern):
    found = sorted(glob.glob(os.path.join(glob.escape(folder), pattern)))
    if len(found) != 1:
        raise BadInput(f"{folder}: expected one file matching {pattern}, found {len(found)}")
    return found[0]


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: {e}")


def read_log(folder):
    """(header or None, {(M, stage, config key): (median µs, n)}) of the folder's record log:
    the ok measurements, each config's record with the most samples (successive halving times
    the losers less). A half-written last line (a killed run's) is skipped, as --resume does."""
    path = one(folder, "*.tune.jsonl")
    with open(path) as f:
        lines = f.readlines()
    header, best = None, {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except ValueError:
            if n == len(lines) and not line.endswith("\n"):
                continue
            raise BadInput(f"{path}:{n}: not JSON")
        if r.get("type") == "header":
            header = r
        if r.get("type") != "measure" or r.get("status") != "ok":
            continue
        k = (int(r["M"]), r["stage"], key(r["config"]))
        if k not in best or r.get("n", 0) >= best[k][1]:
            best[k] = (float(r["median_us"]), int(r.get("n", 0)))
    return header, best


def sidecar_entries(path):
    """{M: entry} of a tune sidecar (<name>.meta.json / <name>_down.meta.json)."""
    try:
        return {int(m): e for m, e in load_json(path)["entries"].items()}
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BadInput(f"{path}: not a tune sidecar ({e})")


class OneLineParser(argparse.ArgumentParser):
    """argparse, with its errors as BadInput (one line, exit 2: the project's contract)."""

    def error(self, message):
        raise BadInput(message)


def run_main(prog, main):
    """sys.exit(main(argv)), bad input as `<prog>: error: <what>` and exit 2."""
    try:
        sys.exit(main(sys.argv[1:]))
    except BadInput as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(2)
