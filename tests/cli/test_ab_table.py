"""bench/scripts/ab_table.py: the A/B table of a stage_ab.sh call from synthetic bench outputs
(medians over runs, the runs' range, the change against the base side), and its exit code 2
on a folder without them."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "scripts", "ab_table.py")

BENCH = """qwen3.5-122b-a10b-fp8 at TP4 on NVIDIA H200 (cold: rotating routing sets, PDL)
default:
     M    layer_us                 95% CI     gemm_us      GB/s   TFLOP/s   floor_us   %floor
     1       {m1:.2f}  [   11.19,    11.25]       14.88      1684       3.4       3.94    35.1%
     8       {m8:.2f}  [   44.79,    44.96]       38.42      3021       6.7      28.25    62.9%
"""


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=60)


class AbTable(unittest.TestCase):
    def test_medians_ranges_and_changes(self):
        with tempfile.TemporaryDirectory() as d:
            runs = {"main": [(11.20, 45.0), (11.30, 44.0), (11.25, 46.0)],
                    "new": [(10.00, 45.0), (10.10, 45.0), (10.20, 45.0)]}
            for side, values in runs.items():
                for r, (m1, m8) in enumerate(values, 1):
                    with open(os.path.join(d, f"bench_0_{side}_{r}.txt"), "w") as f:
                        f.write(BENCH.format(m1=m1, m8=m8))
            r = run(d, "main")
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = r.stdout.splitlines()
            self.assertEqual(lines[0], "== qwen3.5-122b-a10b-fp8 at TP4 on NVIDIA H200")
            m1 = next(l for l in lines if l.startswith("   1 "))
            self.assertIn("11.25 [11.20-11.30]", m1)  # main: median and range of its runs
            self.assertIn("10.10 [10.00-10.20]", m1)
            self.assertIn("-10.2%", m1)  # 10.10 / 11.25 - 1
            m8 = next(l for l in lines if l.startswith("   8 "))
            self.assertIn("45.00 [44.00-46.00]", m8)
            self.assertIn("+0.0%", m8)

    def test_a_folder_without_bench_files_is_exit_2(self):
        with tempfile.TemporaryDirectory() as d:
            r = run(d)
            self.assertEqual(r.returncode, 2)
            self.assertIn("no bench_", r.stderr)
            self.assertEqual(r.stdout, "")


if __name__ == "__main__":
    unittest.main()
