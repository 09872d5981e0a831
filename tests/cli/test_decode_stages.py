"""bench/scripts/decode_stages.py: the default's tile at each stage count, per (shape, M, GEMM),
from a measured tune run (tests/data/tune/h200_bf16_m8) and a synthetic one."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "scripts", "decode_stages.py")
MEASURED = os.path.join(HERE, "..", "data", "tune", "h200_bf16_m8")
NAME = "E=256,N=256,device_name=NVIDIA_H200"


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=60)


def edit_json(path, change):
    """Loads the JSON file at path, lets change() edit it in place, writes it back."""
    with open(path) as f:
        data = json.load(f)
    change(data)
    with open(path, "w") as f:
        json.dump(data, f)


def copy_measured(tmp):
    """A writable copy of the measured run under tmp, as a folder path."""
    run_dir = os.path.join(tmp, "run")
    shutil.copytree(MEASURED, run_dir)
    return run_dir


class DecodeStages(unittest.TestCase):
    def test_the_measured_bf16_m8_run(self):
        r = run(MEASURED)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("| 8 | up | m16n64k128_g1_w4_s4_sk1 | 49.21 (64) | s2 | 47.44 (64) | 0.964 |",
                      r.stdout)
        self.assertIn("| 8 | down | m16n64k64_g1_w4_s5_sk1 | 29.21 (64) | s2 | 26.94 (64) | 0.922 | "
                      "m16n128k64_g1_w4_s2_sk1 | 26.47 |", r.stdout)
        self.assertIn("up: best stage count for the default's tile: s2 at every row", r.stdout)
        self.assertEqual(run(MEASURED, "--max-m", "4").returncode, 2)  # nothing at M <= 4

    def test_stage_counts_that_disagree_are_reported(self):
        with tempfile.TemporaryDirectory() as d:
            run_dir = copy_measured(d)
            # Another M (16) where the default's own stage count (4) is the best of its tile.
            log = os.path.join(run_dir, NAME + ".tune.jsonl")
            tile = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128,
                    "GROUP_SIZE_M": 1, "num_warps": 4}
            with open(log, "a") as f:
                for st, us in ((4, 50.0), (2, 51.0)):
                    f.write(json.dumps({"type": "measure", "status": "ok", "M": 16, "stage": "up",
                                        "config": dict(tile, num_stages=st), "median_us": us,
                                        "n": 8}) + "\n")
            edit_json(os.path.join(run_dir, NAME + ".meta.json"),
                      lambda m: m["entries"].update(
                          {"16": {"default_config": dict(tile, num_stages=4)}}))
            r = run(run_dir)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("| 16 | up | m16n64k128_g1_w4_s4_sk1 | 50.00 (8) | s4 | 50.00 (8) | 1.000 |",
                          r.stdout)
            self.assertIn("up: best stage count for the default's tile: none (s2, s4 each won "
                          "somewhere)", r.stdout)
            self.assertIn("down: best stage count for the default's tile: s2 at every row",
                          r.stdout)

    def test_a_down_default_at_gemm1s_candidate_block_m_is_left_out(self):
        # The tuner times GEMM2 at GEMM1's candidate BLOCK_SIZE_M; the down sidecar's default
        # then is not the layer's (measured: Qwen3.5 fp8 M=4, m64). Such a row is left out.
        with tempfile.TemporaryDirectory() as d:
            run_dir = copy_measured(d)
            edit_json(os.path.join(run_dir, NAME + "_down.meta.json"),
                      lambda m: m["entries"]["8"]["default_config"].update(BLOCK_SIZE_M=64))
            r = run(run_dir)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("| 8 | down |", r.stdout)
            self.assertIn("| 8 | up |", r.stdout)
            self.assertIn("left out: E=256 N=256 K=3072 topk=8 bf16 M=8 down: its sidecar default "
                          "has BLOCK_SIZE_M 64", r.stdout)
            self.assertIn("down: best stage count for the default's tile: no row", r.stdout)

    def test_bad_input_is_one_line_and_exit_2(self):
        with tempfile.TemporaryDirectory() as d:
            for args in ([os.path.join(d, "nowhere")], [d], [MEASURED, "--max-m", "x"]):
                r = run(*args)
                self.assertEqual(r.returncode, 2, args)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
                self.assertTrue(r.stderr.startswith("decode_stages: error: "), r.stderr)


if __name__ == "__main__":
    unittest.main()
