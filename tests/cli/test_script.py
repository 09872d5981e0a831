"""scripts/tune-default.sh (the README's main job): without a GPU it falls back to the dry run,
shapes and roofline, says the GPU part was skipped, and exits 0."""
import os
import subprocess
import tempfile
import unittest

from moetune_cli import BIN, CliTestCase, gpu_present

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "tune-default.sh")


class TuneDefault(CliTestCase):
    def test_falls_back_without_gpu(self):
        if not BIN:
            self.skipTest("MOETUNE_BIN is not set")
        if gpu_present():
            self.skipTest("a GPU is present (the script would tune)")
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, MOETUNE_BIN=BIN, MOETUNE_CACHE_DIR=os.path.join(d, "cache"))
            p = subprocess.run(["bash", SCRIPT], cwd=d, env=env, capture_output=True, text=True,
                               timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("SKIPPED", p.stderr)
            for part in ("== moetune tune --dry-run", "== moetune shapes", "== moetune roofline",
                         "estimated", "compute-bound from M"):
                self.assertIn(part, p.stdout)
            self.assertFalse(os.path.exists(os.path.join(d, "tuned")))


if __name__ == "__main__":
    unittest.main()
