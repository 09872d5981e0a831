"""bench/scripts/tune_quality.sh with a stub `moetune tune` (no GPU): a deadline stops the
exhaustive run (exit 3) and packs the runs; QUALITY_SEED continues them in an empty folder on
"another machine" and ends with the comparison (exit 0); a non-empty folder refuses a seed."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "scripts",
                      "tune_quality.sh")
NAME = "E=8,N=64,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128]"

# tune [--resume] --batch 1 --out DIR [--exhaustive]: one finished M=1 with two configs timed;
# the exhaustive run sleeps first when STUB_SLEEP is set (and is stopped by the deadline).
STUB = textwrap.dedent(f"""\
    #!{sys.executable}
    import json, os, sys, time
    args = sys.argv[1:]
    out = args[args.index("--out") + 1]
    ex = "--exhaustive" in args
    os.makedirs(out, exist_ok=True)
    if ex and os.environ.get("STUB_SLEEP"):
        time.sleep(60)
    cfg = {{"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
            "num_warps": 4, "num_stages": 3}}
    name = os.path.join(out, "{NAME}")
    for suffix in (".json", "_down.json"):
        json.dump({{"1": cfg}}, open(name + suffix, "w"))
    json.dump({{"entries": {{"1": {{"flag": "tuned"}}}}}}, open(name + ".meta.json", "w"))
    with open(name + ".tune.jsonl", "a") as f:
        f.write(json.dumps({{"type": "header"}}) + "\\n")
        for stage, us in (("up", 10.0), ("down", 5.0)):
            f.write(json.dumps({{"type": "measure", "status": "ok", "M": 1, "stage": stage,
                                "config": cfg, "median_us": us, "n": 8}}) + "\\n")
    """)


class TuneQualitySh(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.stub = os.path.join(self.d, "moetune")
        with open(self.stub, "w") as f:
            f.write(STUB)
        os.chmod(self.stub, 0o755)

    def tearDown(self):
        self.tmp.cleanup()

    def run_script(self, out, work, **env):
        e = dict(os.environ, OUT=out, QUALITY_WORK=work, MOETUNE_BIN=self.stub,
                 MOETUNE_CACHE_DIR=os.path.join(self.d, "cache"), QUALITY_BATCH="1", **env)
        return subprocess.run(["bash", SCRIPT], capture_output=True, text=True, env=e, timeout=120)

    def test_deadline_pack_and_seed_on_a_fresh_folder(self):
        out1, work1 = os.path.join(self.d, "out1"), os.path.join(self.d, "work1")
        r = self.run_script(out1, work1, STUB_SLEEP="1", QUALITY_DEADLINE_S="6")
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("QUALITY_SEED=", r.stdout)
        pack = os.path.join(out1, "runs.tar.gz")
        self.assertTrue(os.path.isfile(pack))
        self.assertFalse(os.path.exists(os.path.join(out1, ".runs.tar.gz.part")))

        out2, work2 = os.path.join(self.d, "out2"), os.path.join(self.d, "work2")
        r = self.run_script(out2, work2, QUALITY_SEED=pack)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(work2, "runs.txt")) as f:
            runs = f.read()
        self.assertIn("seeded", runs)
        self.assertNotIn("tuned: exit", runs.split("seeded")[1])  # the tuned run was not redone
        with open(os.path.join(out2, "quality.md")) as f:
            self.assertIn("worst ratio 1.000", f.read())

        # A seed into a folder that holds something else is refused; into its own runs, ignored.
        busy = os.path.join(self.d, "busy")
        os.makedirs(busy)
        open(os.path.join(busy, "x"), "w").close()
        r = self.run_script(os.path.join(self.d, "out3"), busy, QUALITY_SEED=pack)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        r = self.run_script(out2, work2, QUALITY_SEED=pack)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("QUALITY_SEED ignored", r.stdout)


if __name__ == "__main__":
    unittest.main()
