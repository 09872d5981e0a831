"""moetune tune: --dry-run (no GPU needed) and its JSON; option errors; exit 3 without a GPU;
Ctrl-C during a sweep (exit 130 after writing; --resume continues), which needs a GPU."""
import glob
import json
import os
import shlex
import signal
import subprocess
import tempfile
import unittest

from moetune_cli import (BIN, EXIT_BAD_INPUT, EXIT_NO_GPU, EXIT_OK, MODEL_CONFIGS, CliTestCase,
                         gpu_present, run)

EXIT_INTERRUPTED = 130
INTERRUPTED_FLAG = "not tuned (interrupted)"

COMMON_18 = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096]
SHAPE_KEYS = {"architecture", "E", "E_global", "N", "K", "topk", "dtype", "block_shape", "tp",
              "ep", "routing", "moe_layers", "config_file"}


class DryRun(CliTestCase):
    def dry(self, *args):
        r = run("tune", "--dry-run", "--json", "--gpu", "H200", *args)
        self.assertExit(r, EXIT_OK)
        return r.json()

    def test_json_keys(self):
        j = self.dry("--batch", "1,64")
        self.assertEqual(set(j), {"shape", "batch", "plan", "estimated_seconds"})
        self.assertEqual(set(j["shape"]), SHAPE_KEYS)
        self.assertEqual(j["shape"], run("shapes", "--json", "--gpu", "H200").json())
        self.assertEqual(j["batch"], [1, 64])
        self.assertEqual([p["M"] for p in j["plan"]], [1, 64])
        for p in j["plan"]:
            self.assertEqual(set(p), {"M", "space", "candidates", "pruned", "layer_kernels"})
            self.assertIsInstance(p["space"], int)
            self.assertIsInstance(p["candidates"], int)
            self.assertGreater(p["candidates"], 0)
            self.assertLess(p["candidates"], p["space"])
            self.assertIsInstance(p["pruned"], dict)
            for reason, count in p["pruned"].items():
                self.assertIsInstance(reason, str)
                self.assertIsInstance(count, int)
            # Every config is either pruned for one reason or left to measure.
            self.assertEqual(sum(p["pruned"].values()) + p["candidates"], p["space"])
        self.assertIsInstance(j["estimated_seconds"], (int, float))
        self.assertGreater(j["estimated_seconds"], 0)

    def test_layer_kernels_name_where_the_tables_do_not_run(self):
        # moetune's layer with the default configs at each M (FusedMoe::layer_kernels): block fp8
        # on the H200 runs its decode kernels at M <= 4 (Qwen3.5, DeepSeek-V3: M <= 2) and the
        # sliced kernel at M = 6..8 and 14..20; bf16 never the sliced kernel; the H100 PCIe
        # (sm_90a, not one of the GPUs the sliced rule was measured on) never either.
        def kernels(*args):
            j = run("tune", "--dry-run", "--json", "--batch", "1,4,8,12,16,64", *args)
            self.assertExit(j, EXIT_OK)
            return [p["layer_kernels"] for p in j.json()["plan"]]
        self.assertEqual(kernels("--gpu", "H200"),
                         ["decode", "decode", "sliced", "stages", "sliced", "stages"])
        self.assertEqual(kernels("--gpu", "H200", "--model", "deepseek-v3", "--tp", "8"),
                         ["decode", "stages", "sliced", "stages", "sliced", "stages"])
        self.assertEqual(kernels("--gpu", "H200", "--model", "qwen3.5-122b-a10b", "--tp", "4"),
                         ["decode", "decode", "stages", "stages", "stages", "stages"])
        self.assertEqual(kernels("--gpu", "H100 PCIe"),
                         ["decode", "decode", "stages", "stages", "stages", "stages"])
        r = run("tune", "--dry-run", "--batch", "1,8,64", "--gpu", "H200")
        self.assertExit(r, EXIT_OK)
        self.assertIn("note (the default configs): At some batch sizes moetune's layer (its "
                      "default options on this GPU, with these configs) runs kernels with tiles "
                      "of their own: its two decode kernels at M = 1 (`--no-decode-kernels` runs "
                      "the stage path there); its sliced GEMM kernel at M = 8 (`--no-sliced` runs "
                      "the stage path there).", r.out)
        self.assertIn("(bench and profile; check takes `--no-sliced`; ", r.out)
        r = run("tune", "--dry-run", "--batch", "64", "--gpu", "H200")
        self.assertNotIn("note:", r.out)

    def test_default_batch_is_the_common_18(self):
        j = self.dry()
        self.assertEqual(j["batch"], COMMON_18)
        self.assertEqual(len(j["plan"]), 18)

    def test_space_counts_both_gemms(self):
        j = self.dry("--batch", "8")
        self.assertEqual(j["plan"][0]["space"] % 1920, 0)

    def test_serving_profile(self):
        j = self.dry("--serving", "concurrency=1..64,spec=3")
        self.assertEqual(j["batch"], [4, 8, 16, 32, 64, 128, 256])

    def test_works_without_gpu_flag(self):
        r = run("tune", "--dry-run", "--json", "--batch", "16")
        self.assertExit(r, EXIT_OK)
        self.assertEqual(r.json()["batch"], [16])

    def test_other_models(self):
        for args in (["--model", "deepseek-v3", "--tp", "8"], ["--model", "mixtral-8x7b", "--tp", "2"],
                     ["--model", "qwen3-30b-a3b", "--gpu", "RTX PRO 6000"]):
            with self.subTest(args=args):
                r = run("tune", "--dry-run", "--json", "--batch", "1,4096", *args)
                self.assertExit(r, EXIT_OK)
                self.assertEqual(len(r.json()["plan"]), 2)

    def test_text(self):
        r = run("tune", "--dry-run", "--batch", "1,64", "--gpu", "H200")
        self.assertExit(r, EXIT_OK)
        self.assertIn("estimated", r.out)

    def test_a_budget_below_the_sweep_says_so(self):
        r = run("tune", "--dry-run", "--batch", "1,64,4096", "--gpu", "H200", "--budget", "10s")
        self.assertExit(r, EXIT_OK)
        self.assertIn("estimated: 10 s for 3 batch sizes", r.out)
        self.assertIn("the whole sweep needs about", r.out)
        self.assertIn("each is searched less", r.out)
        self.assertIn("keeps the default", r.out)
        r = run("tune", "--dry-run", "--batch", "1", "--gpu", "H200", "--budget", "2h")
        self.assertIn("(budget 2.0 h)", r.out)
        self.assertNotIn("needs about", r.out)

    def test_dry_run_writes_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            r = run("tune", "--dry-run", "--batch", "1", "--gpu", "H200", "--out", d)
            self.assertExit(r, EXIT_OK)
            self.assertEqual(os.listdir(d), [])

    def test_bad_options(self):
        cases = [
            (["--batch", "0"], ["batch", "0"]),
            (["--batch", "x"], ["batch", "x"]),
            (["--budget", "5q"], ["budget", "5q"]),
            (["--budget", "0"], ["budget"]),
            (["--serving", "concurrency=abc"], ["serving", "abc"]),
            (["--batch", "1", "--serving", "concurrency=1..8"], ["serving"]),
            (["--gpus", "0"], ["gpus", "0"]),
            (["--naming", "trt"], ["naming", "trt"]),
            (["--tp", "0"], ["tp", "0"]),
            # The layer refuses it (fp8 rows of N = 360 bytes): no tables that nothing runs.
            (["--model", os.path.join(MODEL_CONFIGS, "gpt-oss-120b.json"), "--tp", "8",
              "--dtype", "fp8_w8a8", "--gpu", "H200"],
             ["N (the expert intermediate size per TP rank)=360", "16-byte chunks"]),
        ]
        for args, words in cases:
            with self.subTest(args=args):
                self.assertOneErrorLine(run("tune", "--dry-run", *args), EXIT_BAD_INPUT, *words)


class NoGpu(CliTestCase):
    def setUp(self):
        if gpu_present():
            self.skipTest("a GPU is present")

    def test_tune_exits_3_pointing_to_dry_run(self):
        for args in ([], ["--batch", "1"], ["--gpu", "H200"], ["--json"]):
            with self.subTest(args=args):
                r = run("tune", *args)
                line = self.assertOneErrorLine(r, EXIT_NO_GPU)
                self.assertIn("--dry-run", line)
                self.assertEqual(r.out, "")

    def test_bad_input_still_exit_2(self):
        self.assertOneErrorLine(run("tune", "--batch", "0"), EXIT_BAD_INPUT, "batch")


class Interrupt(CliTestCase):
    def test_help_documents_exit_130_and_resume(self):
        r = run("tune", "--help")
        self.assertExit(r, EXIT_OK)
        text = " ".join(r.out.split())
        self.assertIn("--resume", text)
        self.assertIn("exits 130", text)

    def test_ctrl_c_writes_what_finished_and_resume_continues(self):
        # Without a GPU no sweep runs: test_tune_tuner's Tuner.Interrupt* tests cover the stop
        # flag with a synthetic evaluator, test_tune_worker the workers' SIGINT.
        if not gpu_present():
            self.skipTest("no GPU")
        env = dict(os.environ)
        env.setdefault("MOETUNE_CACHE_DIR", os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                         f"moetune-cli-test-{os.getuid()}"))
        with tempfile.TemporaryDirectory() as d:
            # Its own session, so that Ctrl-C can be sent as a terminal does: to the whole
            # process group, the worker processes included.
            p = subprocess.Popen([BIN, "tune", "--batch", "1,2", "--out", d],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=env, start_new_session=True)
            try:
                seen = []
                for line in p.stderr:  # "moetune: M=1 <flag>" once M=1 is finished
                    seen.append(line)
                    if line.startswith("moetune: M=1 "):
                        break
                else:
                    self.fail("tune ended before M=1 finished:\n" + "".join(seen))
                os.killpg(p.pid, signal.SIGINT)  # M=2 is in flight now
                out, err = p.communicate(timeout=540)
            finally:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            self.assertEqual(p.returncode, EXIT_INTERRUPTED, out + err)
            self.assertIn("interrupted", out)
            # Every output is there and parses; M=1 keeps its verdict, M=2 the default.
            (up,) = [f for f in glob.glob(os.path.join(d, "*.json"))
                     if not f.endswith((".meta.json", "_down.json"))]
            stem = up[:-len(".json")]
            for f in (up, stem + "_down.json", stem + ".meta.json", stem + "_down.meta.json"):
                with open(f) as fh:
                    j = json.load(fh)
                if not f.endswith(".meta.json"):
                    self.assertEqual(set(j), {"1", "2"}, f)
            with open(stem + ".meta.json") as fh:
                side = json.load(fh)["entries"]
            self.assertIn(side["1"]["flag"], ("tuned", "within noise", "kept default"))
            self.assertEqual(side["2"]["flag"], INTERRUPTED_FLAG)
            self.assertEqual(side["2"]["config"], side["2"]["default_config"])
            with open(stem + ".report.md") as fh:
                report = fh.read()
            self.assertIn("Interrupted", report)
            # No worker died of the Ctrl-C: no candidate was recorded as killed by it.
            with open(stem + ".tune.jsonl") as fh:
                log = fh.read()
            self.assertNotIn("killed by signal", log)
            # The printed command continues the run: M=1 from the log, M=2 measured.
            lines = out.splitlines()
            at = [i for i, l in enumerate(lines) if "continue with:" in l]
            self.assertEqual(len(at), 1, out)
            resume = lines[at[0] + 1].strip()
            self.assertIn(resume, report)
            args = shlex.split(resume)
            self.assertEqual(args[-1], "--resume")
            r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=540)
            self.assertEqual(r.returncode, EXIT_OK, r.stdout + r.stderr)
            with open(stem + ".meta.json") as fh:
                resumed = json.load(fh)["entries"]
            self.assertEqual(resumed["1"]["flag"], side["1"]["flag"])
            self.assertEqual(resumed["1"]["config"], side["1"]["config"])
            self.assertNotEqual(resumed["2"]["flag"], INTERRUPTED_FLAG)
            with open(stem + ".report.md") as fh:
                self.assertNotIn("Interrupted", fh.read())


class ResumeLog(CliTestCase):
    def test_a_log_that_is_not_a_regular_file_is_exit_2(self):
        # --resume reads the record log back: a FIFO at its name blocked the run forever, a link
        # to /dev/zero grew it without bound. The log is read before anything is measured, but
        # only a sweep reads it, and a sweep needs a GPU.
        if not gpu_present():
            self.skipTest("no GPU")
        name = run("shapes", "--json").json()["config_file"]["sglang"]
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, name[:-len(".json")] + ".tune.jsonl")
            os.mkfifo(log)
            r = run("tune", "--batch", "1", "--out", d, "--resume", timeout=60)
            self.assertOneErrorLine(r, EXIT_BAD_INPUT,
                                    f"resume={log}: not a regular file (a FIFO)")
            os.remove(log)
            os.symlink("/dev/zero", log)
            r = run("tune", "--batch", "1", "--out", d, "--resume", timeout=60)
            self.assertOneErrorLine(r, EXIT_BAD_INPUT,
                                    f"resume={log}: not a regular file (a character device)")


if __name__ == "__main__":
    unittest.main()
