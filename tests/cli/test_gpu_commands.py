"""Commands that need a GPU: exit 3 with one line where there is none (input errors stay 2);
kernels --compile-only needs none."""
import os
import tempfile
import unittest

from moetune_cli import (EXIT_BAD_INPUT, EXIT_NO_GPU, EXIT_OK, CliTestCase, gpu_present, run)


class NoGpu(CliTestCase):
    def setUp(self):
        if gpu_present():
            self.skipTest("a GPU is present")

    def test_exit_3_with_one_line(self):
        for args in (["check"], ["bench"], ["profile"], ["tune"], ["check", "--json"],
                     ["bench", "--json", "--batch", "1"], ["profile", "--gpu", "H200"],
                     ["check", "--model", "deepseek-v3", "--tp", "8", "--batch", "40000"],
                     ["bench", "--hot", "--measured-ceilings"],
                     ["kernels"], ["roofline", "--measured-ceilings"]):
            with self.subTest(args=args):
                r = run(*args)
                line = self.assertOneErrorLine(r, EXIT_NO_GPU)
                self.assertIn("GPU", line)
                self.assertEqual(r.out, "")

    def test_bad_input_is_still_exit_2(self):
        for args, words in ((["check", "--batch", "0"], ["batch", "0"]),
                            (["bench", "--batch", "x"], ["batch", "x"]),
                            (["profile", "--tp", "abc"], ["tp", "abc"]),
                            (["bench", "--config", "/nonexistent.json"], ["/nonexistent.json"]),
                            (["check", "--variants", "int4"], ["variants", "int4"]),
                            (["bench", "--model", "nonexistent"], ["model", "nonexistent"])):
            with self.subTest(args=args):
                self.assertOneErrorLine(run(*args), EXIT_BAD_INPUT, *words)


class CompileOnly(CliTestCase):
    def test_list(self):
        r = run("kernels", "--compile-only", "--arch", "sm_90a", "--list")
        self.assertExit(r, EXIT_OK)
        names = r.out.splitlines()
        self.assertGreater(len(names), 5)
        self.assertEqual(len(names), len(set(names)))  # each kernel once (counts are of kernels)

    def test_list_json(self):
        # --json is honoured by --list too: the same names, each with its file and kernel.
        text = run("kernels", "--list", "--arch", "sm_90a")
        r = run("kernels", "--list", "--arch", "sm_90a", "--json")
        self.assertExit(r, EXIT_OK)
        j = r.json()
        self.assertEqual(j["arch"], "sm_90a")
        self.assertEqual([k["name"] for k in j["kernels"]], text.out.splitlines())
        for k in j["kernels"]:
            self.assertTrue(k["file"].endswith(".cuh"), k)
            self.assertTrue(k["kernel"].startswith("moetune::"), k)

    def test_model_options_are_refused(self):
        # The set is the anchors': a model's options would be ignored.
        for args, words in ((["--model", "nonexistent"], ["model=nonexistent"]),
                            (["--tp", "0"], ["tp=0"]),
                            (["--model", "mixtral-8x7b"], ["model=mixtral-8x7b", "anchor"]),
                            (["--dtype", "bf16"], ["dtype=bf16"])):
            with self.subTest(args=args):
                self.assertOneErrorLine(run("kernels", "--list", "--arch", "sm_90a", *args),
                                        EXIT_BAD_INPUT, *words)

    def test_compile_sm_90a_and_sm_120(self):
        # CI compiles the representative set for Hopper (wgmma) and consumer Blackwell (no wgmma).
        for arch in ("sm_90a", "sm_120"):
            with self.subTest(arch=arch):
                r = run("kernels", "--compile-only", "--arch", arch, "--json", timeout=600)
                self.assertExit(r, EXIT_OK)
                j = r.json()
                for key in ("arch", "kernels", "compiled", "from_cache", "failed", "wall_s",
                            "failures"):
                    self.assertIn(key, j)
                self.assertEqual(j["arch"], arch)
                self.assertEqual(j["failed"], 0, j["failures"])
                self.assertGreater(j["kernels"], 5)

    def test_unwritable_cache_is_noted_once(self):
        # A cache folder that is a file: compiles still succeed (exit 0), but one note says the
        # cache cannot be written (it was silent), however many compile threads failed.
        with tempfile.TemporaryDirectory() as d:
            cache = os.path.join(d, "somefile")
            with open(cache, "w") as f:
                f.write("x")
            r = run("kernels", "--compile-only", "--arch", "sm_80", timeout=600,
                    env={"MOETUNE_CACHE_DIR": cache})
            self.assertExit(r, EXIT_OK)
            notes = [l for l in r.err_lines if "kernel cache" in l]
            self.assertEqual(notes, [f"moetune: note: cannot write the kernel cache at {cache} "
                                     "(not a folder); kernels will be recompiled next time"], r)
            with open(cache) as f:
                self.assertEqual(f.read(), "x")

    def test_bad_arch(self):
        # sm_75: below the kernels' sm_80; sm_999: NVRTC knows no such target (every kernel an
        # invalid option): one line each, exit 2, not a FAILED line per kernel.
        for arch in ("sm90", "hopper", "", "sm_75", "sm_999"):
            for mode in ("--compile-only", "--list"):
                with self.subTest(arch=arch, mode=mode):
                    self.assertOneErrorLine(run("kernels", mode, "--arch", arch),
                                            EXIT_BAD_INPUT, "arch")


if __name__ == "__main__":
    unittest.main()
