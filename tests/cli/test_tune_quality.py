"""bench/scripts/tune_quality.py (issue 4's quality bar) on synthetic tune folders: the winner's
median against the exhaustive best per (M, GEMM), from the exhaustive log or cross-run."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "scripts",
                      "tune_quality.py")
NAME = "E=8,N=64,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128]"


def cfg(bm, bn, sk=1):
    c = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
         "num_warps": 4, "num_stages": 3}
    if sk != 1:
        c["SPLIT_K"] = sk
    return c


def write_run(folder, up=None, down=None, measures=(), finished=None):
    """A tune --out folder; `finished`: {M: sidecar flag} of an exhaustive run (its sidecar)."""
    os.makedirs(folder)
    if finished is not None:
        with open(os.path.join(folder, NAME + ".meta.json"), "w") as f:
            json.dump({"entries": {str(m): {"flag": fl} for m, fl in finished.items()}}, f)
    if up is not None:
        with open(os.path.join(folder, NAME + ".json"), "w") as f:
            json.dump({str(m): c for m, c in up.items()}, f)
        with open(os.path.join(folder, NAME + "_down.json"), "w") as f:
            json.dump({str(m): c for m, c in down.items()}, f)
        with open(os.path.join(folder, NAME + ".meta.json"), "w") as f:
            json.dump({"not": "a table"}, f)
    with open(os.path.join(folder, NAME + ".tune.jsonl"), "w") as f:
        f.write(json.dumps({"type": "header"}) + "\n")
        for m, stage, c, us, n in measures:
            f.write(json.dumps({"type": "measure", "status": "ok", "M": m, "stage": stage,
                                "config": c, "median_us": us, "n": n}) + "\n")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=60)


class TuneQuality(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def folders(self, ex_measures, tuned_measures=()):
        tuned, ex = os.path.join(self.d, "tuned"), os.path.join(self.d, "ex")
        write_run(tuned, up={1: cfg(16, 64, 8)}, down={1: cfg(16, 64)}, measures=tuned_measures)
        write_run(ex, measures=ex_measures,
                  finished={m: "tuned" for m, _, _, _, _ in ex_measures})
        return tuned, ex

    def test_within_limit_passes_and_reads_both_gemms(self):
        tuned, ex = self.folders([(1, "up", cfg(16, 64, 8), 10.2, 8), (1, "up", cfg(16, 128), 10.0, 8),
                                  (1, "down", cfg(16, 64), 5.0, 8), (1, "down", cfg(16, 128), 5.5, 8)])
        r = run(tuned, ex)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("| 1 | up | m16n64k128_g1_w4_s3_sk8 | 10.20 | m16n128k128_g1_w4_s3_sk1 | 10.00 | 1.020 |",
                      r.stdout)
        self.assertIn("| 1 | down | m16n64k128_g1_w4_s3_sk1 | 5.00 |", r.stdout)
        self.assertIn("worst ratio 1.020", r.stdout)

    def test_over_limit_fails(self):
        tuned, ex = self.folders([(1, "up", cfg(16, 64, 8), 10.4, 8), (1, "up", cfg(16, 128), 10.0, 8),
                                  (1, "down", cfg(16, 64), 5.0, 8)])
        r = run(tuned, ex)
        self.assertEqual(r.returncode, 1)
        self.assertIn("1.040 **over**", r.stdout)
        self.assertEqual(run(tuned, ex, "--limit", "1.05").returncode, 0)
        self.assertEqual(run(tuned, ex, "--limit=1.05").returncode, 0)

    def test_the_record_with_most_samples_counts(self):
        # an early round's noisy 4.0 (n=2) is superseded by the full measurement (n=8)
        tuned, ex = self.folders([(1, "up", cfg(16, 64, 8), 10.0, 8), (1, "up", cfg(16, 128), 4.0, 2),
                                  (1, "up", cfg(16, 128), 11.0, 8), (1, "down", cfg(16, 64), 5.0, 8)])
        r = run(tuned, ex)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("| 1 | up | m16n64k128_g1_w4_s3_sk8 | 10.00 | m16n64k128_g1_w4_s3_sk8 | 10.00 | 1.000 |",
                      r.stdout)

    def test_winner_missing_from_the_exhaustive_run_is_taken_cross_run(self):
        tuned, ex = self.folders([(1, "up", cfg(16, 64, 8), 10.0, 8), (1, "down", cfg(32, 64), 5.0, 8)],
                                 tuned_measures=[(1, "down", cfg(16, 64), 5.1, 8)])
        r = run(tuned, ex)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("| 1 | down | m16n64k128_g1_w4_s3_sk1 | 5.10 | m32n64k128_g1_w4_s3_sk1 | 5.00 | 1.020 | cross-run |",
                      r.stdout)

    def test_an_m_missing_from_the_tuned_tables_is_an_error(self):
        tuned, ex = self.folders([(1, "up", cfg(16, 64, 8), 10.0, 8), (64, "up", cfg(16, 64), 20.0, 8)])
        r = run(tuned, ex)
        self.assertEqual(r.returncode, 2)
        self.assertIn("M=64", r.stderr)

    def test_unfinished_batch_sizes_are_partial_and_not_judged(self):
        # A run stopped at a deadline: M=1 finished, M=64 interrupted with its best not yet timed.
        tuned, ex = os.path.join(self.d, "tuned"), os.path.join(self.d, "ex")
        write_run(tuned, up={1: cfg(16, 64, 8), 64: cfg(16, 64)}, down={1: cfg(16, 64), 64: cfg(16, 64)})
        write_run(ex, measures=[(1, "up", cfg(16, 64, 8), 10.0, 8), (1, "down", cfg(16, 64), 5.0, 8),
                                (64, "up", cfg(16, 64), 30.0, 8), (64, "up", cfg(32, 64), 20.0, 8)])
        sidecar = os.path.join(ex, NAME + ".meta.json")

        def flags(f1, f64):
            with open(sidecar, "w") as f:
                json.dump({"entries": {"1": {"flag": f1}, "64": {"flag": f64}}}, f)

        flags("tuned", "not tuned (interrupted)")
        r = run(tuned, ex)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("| 64 | up | m16n64k128_g1_w4_s3_sk1 | 30.00 | m32n64k128_g1_w4_s3_sk1 | 20.00 | "
                      "1.500 (not judged) | exhaustive run; partial: 2 configs timed |", r.stdout)
        self.assertIn("not judged): M = 64", r.stdout)
        self.assertIn("worst ratio 1.000 over the finished batch sizes", r.stdout)
        flags("within noise", "tuned")  # both finished: M=64's 1.5 now counts
        self.assertEqual(run(tuned, ex).returncode, 1)
        flags("not reached", "not tuned (interrupted)")  # nothing finished
        r = run(tuned, ex)
        self.assertEqual(r.returncode, 3, r.stdout)
        self.assertIn("nothing to judge yet", r.stdout)
        with open(sidecar, "w") as f:
            f.write("[1, 2]")
        r = run(tuned, ex)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a tune sidecar", r.stderr)

    def test_a_run_killed_before_its_sidecar_judges_nothing(self):
        # Killed (TERM, then KILL) before it wrote tables: no sidecar, a half-written last record.
        tuned, ex = os.path.join(self.d, "tuned"), os.path.join(self.d, "ex")
        write_run(tuned, up={1: cfg(16, 64, 8)}, down={1: cfg(16, 64)})
        write_run(ex, measures=[(1, "up", cfg(16, 64, 8), 10.0, 8), (1, "up", cfg(16, 128), 5.0, 8)])
        with open(os.path.join(ex, NAME + ".tune.jsonl"), "a") as f:
            f.write('{"type": "measure", "status": "o')
        r = run(tuned, ex)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("2.000 (not judged)", r.stdout)
        self.assertIn("nothing to judge yet", r.stdout)
        with open(os.path.join(ex, NAME + ".tune.jsonl"), "a") as f:
            f.write('\n{"type": "header"}\n')  # the broken line is no longer the last: an error
        r = run(tuned, ex)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not JSON", r.stderr)

    def test_a_log_with_no_measurement_yet_is_nothing_to_judge(self):
        tuned, ex = self.folders([])
        r = run(tuned, ex)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("nothing to judge yet", r.stdout)

    def test_bad_input_is_one_line_and_exit_2(self):
        tuned, ex = self.folders([(1, "up", cfg(16, 64, 8), 10.0, 8)])
        for args in ([tuned], [tuned, os.path.join(self.d, "nowhere")], [tuned, ex, "--limit", "x"],
                     [tuned, ex, "--limit=x"], [tuned, ex, "--limt", "1.05"]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertTrue(r.stderr.startswith("tune_quality: error: "), r.stderr)


if __name__ == "__main__":
    unittest.main()
