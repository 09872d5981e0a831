"""moetune shapes: every case of shapes_expected.json, every model config, the JSON keys."""
import json
import os
import unittest

from moetune_cli import (CASES, MODEL_CONFIGS, EXIT_BAD_INPUT, EXIT_OK, CliTestCase, run)

SHAPE_KEYS = {"architecture", "E", "E_global", "N", "K", "topk", "dtype", "block_shape", "tp",
              "ep", "routing", "moe_layers", "config_file"}
ROUTING_KEYS = {"scoring", "renormalize", "n_group", "topk_group", "routed_scaling_factor",
                "correction_bias"}


def load_cases():
    with open(os.path.join(CASES, "shapes_expected.json")) as f:
        return json.load(f)["cases"]


class ShapesExpected(CliTestCase):
    def test_every_case(self):
        cases = load_cases()
        self.assertGreater(len(cases), 10)
        for i, case in enumerate(cases):
            args = ["shapes", "--model", os.path.join(MODEL_CONFIGS, case["file"]),
                    *case["args"], "--json"]
            with self.subTest(i=i, file=case["file"], args=case["args"]):
                r = run(*args)
                if "error" in case:
                    self.assertOneErrorLine(r, EXIT_BAD_INPUT, *case["error"])
                    self.assertEqual(r.out, "", r)
                    continue
                self.assertExit(r, EXIT_OK)
                j = r.json()
                self.assertEqual(set(j), SHAPE_KEYS, r)
                for key, want in case["expect"].items():
                    self.assertEqual(j[key], want, f"{key}: {r}")
                if "sglang_file" in case:
                    self.assertEqual(j["config_file"]["sglang"], case["sglang_file"], r)
                if "vllm_file" in case:
                    self.assertEqual(j["config_file"]["vllm"], case["vllm_file"], r)


class ShapesJson(CliTestCase):
    def test_unknown_layer_count_is_not_zero_of_zero(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "config.json")
            with open(path, "w") as f:
                json.dump({"num_experts": 8, "num_experts_per_tok": 2,
                           "moe_intermediate_size": 256, "hidden_size": 512}, f)
            r = run("shapes", "--model", path)
            self.assertExit(r, EXIT_OK)
            self.assertIn("MoE layers    unknown (the config gives no layer count)", r.out)
            self.assertNotIn("0 of 0", r.out)

    def test_unknown_layer_count_is_null_in_json(self):
        # It said "moe_layers": 0 where the text says unknown: a model without MoE layers.
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "config.json")
            with open(path, "w") as f:
                json.dump({"num_experts": 8, "num_experts_per_tok": 2,
                           "moe_intermediate_size": 256, "hidden_size": 512}, f)
            r = run("shapes", "--json", "--model", path)
            self.assertExit(r, EXIT_OK)
            j = r.json()
            self.assertEqual(set(j), SHAPE_KEYS)
            self.assertIsNone(j["moe_layers"])
            # Known, it stays a number.
            with open(path, "w") as f:
                json.dump({"num_experts": 8, "num_experts_per_tok": 2,
                           "moe_intermediate_size": 256, "hidden_size": 512,
                           "num_hidden_layers": 6}, f)
            self.assertEqual(run("shapes", "--json", "--model", path).json()["moe_layers"], 6)

    def test_default_model_is_qwen35_fp8_at_tp4(self):
        r = run("shapes", "--json", "--gpu", "NVIDIA H200")
        self.assertExit(r, EXIT_OK)
        j = r.json()
        self.assertEqual(set(j), SHAPE_KEYS)
        self.assertEqual(set(j["routing"]), ROUTING_KEYS)
        self.assertEqual(set(j["config_file"]), {"sglang", "vllm"})
        self.assertEqual((j["E"], j["N"], j["K"], j["topk"], j["tp"], j["ep"]),
                         (256, 256, 3072, 8, 4, 1))
        self.assertEqual(j["dtype"], "fp8_w8a8")
        self.assertEqual(j["block_shape"], [128, 128])
        self.assertEqual(j["config_file"]["sglang"],
                         "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,"
                         "block_shape=[128, 128].json")
        self.assertEqual(r.err, "")  # --gpu given: no fallback note

    def test_ep_on_the_default_model_notes_its_tp(self):
        r = run("shapes", "--ep", "8", "--gpu", "H200")
        self.assertExit(r, EXIT_OK)
        self.assertIn("at TP4 EP8", r.out)
        self.assertEqual(len(r.err_lines), 1, r)
        self.assertIn("runs at TP4; --ep 8", r.err_lines[0])
        for args in (["--ep", "8", "--tp", "1"], ["--model", "deepseek-v3", "--ep", "8"]):
            self.assertEqual(run("shapes", "--gpu", "H200", *args).err_lines, [], args)
        # A refused --ep stays one line (no note before the error).
        self.assertOneErrorLine(run("shapes", "--ep", "3", "--gpu", "H200"), EXIT_BAD_INPUT, "ep=3")

    def test_tp_and_ep_together_are_noted_on_stderr(self):
        # They multiply (64 ranks here); SGLang's --tp 8 --ep-size 8 is 8 ranks. Every command
        # says so once on stderr; shapes --json also carries it.
        for cmd in (["shapes"], ["roofline", "--batch", "1"], ["tune", "--dry-run", "--batch", "1"]):
            with self.subTest(cmd=cmd):
                r = run(*cmd, "--model", "deepseek-v3", "--tp", "8", "--ep", "8", "--gpu", "H200")
                self.assertExit(r, EXIT_OK)
                notes = [l for l in r.err_lines if "ranks" in l]
                self.assertEqual(len(notes), 1, r)
                self.assertTrue(notes[0].startswith("moetune: note: --tp 8 and --ep 8 split one "
                                                    "layer over 64 ranks"), notes[0])
                self.assertNotIn("ranks", r.out)
        j = run("shapes", "--json", "--model", "deepseek-v3", "--tp", "8", "--ep", "8",
                "--gpu", "H200").json()
        self.assertIn("--tp 1 --ep 8 here", j["parallel_note"])
        self.assertNotIn("parallel_note", run("shapes", "--json", "--model", "deepseek-v3",
                                              "--ep", "8", "--gpu", "H200").json())

    def test_preset_implies_tp1(self):
        r = run("shapes", "--json", "--model", "qwen3.5-122b-a10b-fp8", "--gpu", "H200")
        self.assertExit(r, EXIT_OK)
        self.assertEqual((r.json()["tp"], r.json()["N"]), (1, 1024))

    def test_types(self):
        r = run("shapes", "--json", "--model", "deepseek-v3", "--tp", "8", "--gpu", "H200")
        self.assertExit(r, EXIT_OK)
        j = r.json()
        for key in ("E", "E_global", "N", "K", "topk", "tp", "ep", "moe_layers"):
            self.assertIsInstance(j[key], int, key)
        self.assertEqual(j["moe_layers"], 58)  # 61 layers, first_k_dense_replace 3
        self.assertEqual(j["routing"]["scoring"], "sigmoid")
        self.assertTrue(j["routing"]["correction_bias"])
        self.assertEqual((j["routing"]["n_group"], j["routing"]["topk_group"]), (8, 4))
        self.assertAlmostEqual(j["routing"]["routed_scaling_factor"], 2.5)

    def test_spaces_in_device_name_become_underscores(self):
        r = run("shapes", "--json", "--model", "mixtral-8x7b", "--gpu",
                "NVIDIA H100 80GB HBM3")
        self.assertExit(r, EXIT_OK)
        self.assertIn("device_name=NVIDIA_H100_80GB_HBM3", r.json()["config_file"]["sglang"])

    def test_overrides_before_parallelism(self):
        r = run("shapes", "--json", "--model", "qwen3-30b-a3b", "--experts", "64", "--topk", "4",
                "--intermediate", "1024", "--hidden", "1024", "--tp", "2", "--ep", "2",
                "--gpu", "H200")
        self.assertExit(r, EXIT_OK)
        j = r.json()
        self.assertEqual((j["E"], j["E_global"], j["N"], j["K"], j["topk"]),
                         (32, 64, 512, 1024, 4))

    def test_text_output(self):
        r = run("shapes", "--gpu", "H200")
        self.assertExit(r, EXIT_OK)
        self.assertIn("E=256", r.out)
        self.assertIn("E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json",
                      r.out)

    def test_global_options_before_the_command(self):
        r = run("--gpu", "H200", "--json", "shapes")
        self.assertExit(r, EXIT_OK)
        self.assertEqual(r.json()["E"], 256)


class EveryModelConfig(CliTestCase):
    """Every real config: shapes and roofline answer (exit 0) or refuse (exit 2), one line."""

    def test_every_file(self):
        files = sorted(f for f in os.listdir(MODEL_CONFIGS) if f.endswith(".json"))
        self.assertGreater(len(files), 20)
        for f in files:
            for cmd in (["shapes"], ["shapes", "--json"], ["roofline"], ["roofline", "--json"]):
                with self.subTest(file=f, cmd=cmd):
                    r = run(*cmd, "--model", os.path.join(MODEL_CONFIGS, f), "--gpu", "H200")
                    self.assertNoCrash(r)
                    self.assertIn(r.code, (EXIT_OK, EXIT_BAD_INPUT), r)
                    if r.code == EXIT_BAD_INPUT:
                        self.assertOneErrorLine(r, EXIT_BAD_INPUT)
                    elif "--json" in cmd:
                        r.json()  # parses

    def test_every_file_at_tp8_ep8(self):
        files = sorted(f for f in os.listdir(MODEL_CONFIGS) if f.endswith(".json"))
        for f in files:
            for extra in (["--tp", "8"], ["--ep", "8"], ["--dtype", "bf16"], ["--dtype", "fp8_w8a8"]):
                with self.subTest(file=f, extra=extra):
                    r = run("shapes", "--json", "--model", os.path.join(MODEL_CONFIGS, f), *extra,
                            "--gpu", "H200")
                    self.assertNoCrash(r)
                    self.assertIn(r.code, (EXIT_OK, EXIT_BAD_INPUT), r)
                    if r.code == EXIT_BAD_INPUT:
                        self.assertOneErrorLine(r, EXIT_BAD_INPUT)


if __name__ == "__main__":
    unittest.main()
