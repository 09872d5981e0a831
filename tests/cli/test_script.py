"""scripts/tune-default.sh (the README's main job): without a GPU it falls back to the dry run,
shapes and roofline, says the GPU part was skipped, and exits 0."""
import json
import os
import subprocess
import tempfile
import unittest

from moetune_cli import BIN, CliTestCase, gpu_present

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "tune-default.sh")


class TuneDefault(CliTestCase):
    def setUp(self):
        if not BIN:
            self.skipTest("MOETUNE_BIN is not set")
        if gpu_present():
            self.skipTest("a GPU is present (the script would tune)")

    @staticmethod
    def run_script(d, *args):
        env = dict(os.environ, MOETUNE_BIN=BIN, MOETUNE_CACHE_DIR=os.path.join(d, "cache"))
        return subprocess.run(["bash", SCRIPT, *args], cwd=d, env=env, capture_output=True,
                              text=True, timeout=300)

    def test_falls_back_without_gpu(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.run_script(d)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("SKIPPED", p.stderr)
            for part in ("== moetune tune --dry-run", "== moetune shapes", "== moetune roofline",
                         "estimated", "compute-bound from M"):
                self.assertIn(part, p.stdout)
            self.assertFalse(os.path.exists(os.path.join(d, "tuned")))

    def test_fallback_shows_the_model_asked_for(self):
        # Extra arguments naming a model or a GPU apply to the shapes and roofline too (they
        # showed the default model on the H200 whatever was asked); tune's own stay tune's.
        with tempfile.TemporaryDirectory() as d:
            p = self.run_script(d, "--model", "deepseek-v3", "--tp=8", "--gpu", "H100",
                                "--budget", "5m")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("== moetune shapes --gpu H100 --model deepseek-v3 --tp=8", p.stdout)
            self.assertIn("== moetune roofline --gpu H100 --model deepseek-v3 --tp=8", p.stdout)
            shapes = p.stdout.split("== moetune shapes")[1].split("== moetune roofline")[0]
            self.assertIn("deepseek", shapes.lower())
            self.assertNotIn("qwen", shapes.lower())

    def test_fallback_with_json_prints_one_json_document(self):
        # --json: stdout is the dry run's plan alone (it mixed banners and tables before).
        with tempfile.TemporaryDirectory() as d:
            p = self.run_script(d, "--json", "--batch", "1,8")
            self.assertEqual(p.returncode, 0, p.stderr)
            plan = json.loads(p.stdout)
            self.assertEqual(plan["batch"], [1, 8])
            self.assertEqual([r["M"] for r in plan["plan"]], [1, 8])
            self.assertIn("nothing tuned", p.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "tuned")))


if __name__ == "__main__":
    unittest.main()
