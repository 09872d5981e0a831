"""moetune config lookup / config validate on the cases of tests/data/cases."""
import json
import os
import tempfile
import unittest

from moetune_cli import (CASES, EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEMS, CliTestCase, run)

TABLE_18 = os.path.join(CASES, "config_table_18.json")
BAD_SMEM = os.path.join(CASES, "config_bad_smem.json")
BAD_BLOCKK = os.path.join(CASES, "config_bad_blockk.json")
RTX_PRO = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
CONFIG_KEYS = {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps",
               "num_stages"}


class Lookup(CliTestCase):
    def test_nearest_key_cases(self):
        with open(TABLE_18) as f:
            table = json.load(f)
        for M, key in ((20, 16), (3, 2), (1280, 1024), (5000, 4096), (1, 1), (100, 96)):
            with self.subTest(M=M):
                r = run("config", "lookup", TABLE_18, "--batch", M, "--json")
                self.assertExit(r, EXIT_OK)
                j = r.json()
                self.assertEqual(set(j), {"key", "config", "ok"})
                self.assertEqual(j["key"], key)
                self.assertEqual(j["config"], table[str(key)])
                self.assertIs(j["ok"], True)
                self.assertNotIn("fails validation", r.err)

    def test_lookup_checks_as_validate_does(self):
        with tempfile.TemporaryDirectory() as d:
            entry = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8,
                     "num_warps": 4, "num_stages": 4}
            up = os.path.join(d, "E=8,N=128,device_name=NVIDIA_H200.json")
            down = os.path.join(d, "E=8,N=128,device_name=NVIDIA_H200_down.json")
            with open(up, "w") as f:
                json.dump({"4096": entry}, f)
            with open(down, "w") as f:
                json.dump({"4096": dict(entry, BLOCK_SIZE_M=128)}, f)
            # The pair rule: down's BLOCK_SIZE_M must be up's (validate fails it; so does lookup).
            self.assertExit(run("config", "validate", down), EXIT_PROBLEMS)
            r = run("config", "lookup", down, "--batch", "4096", "--json")
            self.assertExit(r, EXIT_OK)
            self.assertIs(r.json()["ok"], False)
            self.assertIn("up and down share one alignment", r.err)
            # A target the flags cannot form: unchecked, said once, still the answer.
            r = run("config", "lookup", up, "--batch", "4096", "--block-shape", "128,128", "--json")
            self.assertExit(r, EXIT_OK)
            self.assertIsNone(r.json()["ok"])
            self.assertEqual(r.err.count("not validated"), 1)

    def test_invalid_entry_is_noted(self):
        # The entry the nearest-M rule picks breaks the shared-memory limit: lookup still
        # answers (exit 0) and says so once on stderr, and "ok" is false in --json.
        with open(BAD_SMEM) as f:
            keys = sorted(int(k) for k in json.load(f) if k.isdigit())
        r = run("config", "lookup", BAD_SMEM, "--batch", keys[-1], "--json")
        self.assertExit(r, EXIT_OK)
        self.assertIs(r.json()["ok"], False)
        self.assertEqual(r.err.count("fails validation"), 1)
        self.assertIn("see moetune config validate", r.err)

    def test_text(self):
        r = run("config", "lookup", TABLE_18, "--batch", "20")
        self.assertExit(r, EXIT_OK)
        self.assertIn("16", r.out)
        self.assertIn("BLOCK_SIZE_M=16", r.out)

    def test_skipped_key_is_noted(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            with open(TABLE_18) as f:
                entry = json.load(f)["8"]
            with open(path, "w") as f:
                json.dump({"triton_version": "3.1.0", "8": entry}, f)
            r = run("config", "lookup", path, "--batch", "3", "--json")
            self.assertExit(r, EXIT_OK)
            self.assertEqual(r.json()["key"], 8)
            self.assertIn("triton_version", r.err)

    def test_bad_inputs(self):
        cases = [
            (["config", "lookup", TABLE_18, "--batch", "0"], ["batch", "0"]),
            (["config", "lookup", TABLE_18, "--batch", "x"], ["batch", "x"]),
            (["config", "lookup", TABLE_18], ["batch"]),
            (["config", "lookup", "/nonexistent/t.json", "--batch", "1"], ["/nonexistent/t.json"]),
            (["config", "lookup", os.path.join(CASES, "README.md"), "--batch", "1"], ["README.md"]),
            (["config", "lookup", os.path.join(CASES, "shapes_expected.json"), "--batch", "1"],
             ["shapes_expected.json"]),
        ]
        for args, words in cases:
            with self.subTest(args=args):
                self.assertOneErrorLine(run(*args), EXIT_BAD_INPUT, *words)

    def test_bad_table_values(self):
        with tempfile.TemporaryDirectory() as d:
            for content, words in (({"-4": {}}, ["-4"]),
                                   ({"16": {"BLOCK_SIZE_M": "64"}}, ["16"]),
                                   ([1, 2], ["config"])):
                path = os.path.join(d, "t.json")
                with open(path, "w") as f:
                    json.dump(content, f)
                with self.subTest(content=content):
                    r = run("config", "lookup", path, "--batch", "1")
                    self.assertOneErrorLine(r, EXIT_BAD_INPUT, *words)


class Validate(CliTestCase):
    def validate(self, *args):
        return run("config", "validate", *args, "--json")

    def check_json(self, j):
        self.assertEqual(set(j), {"ok", "entries"})
        for e in j["entries"]:
            self.assertEqual(set(e), {"M", "ok", "smem_bytes", "reference_smem_bytes",
                                      "violations"})
            for v in e["violations"]:
                self.assertEqual(set(v), {"key", "value", "limit", "rule"})

    def test_bad_smem_on_rtx_pro_6000(self):
        r = self.validate(BAD_SMEM, "--gpu", RTX_PRO, "--dtype", "fp8_w8a8")
        self.assertExit(r, EXIT_PROBLEMS)
        j = r.json()
        self.check_json(j)
        self.assertFalse(j["ok"])
        entries = {e["M"]: e for e in j["entries"]}
        self.assertEqual(set(entries), {1, 4096})
        self.assertTrue(entries[1]["ok"], entries[1])
        self.assertEqual(entries[1]["violations"], [])
        self.assertFalse(entries[4096]["ok"])
        self.assertGreater(entries[4096]["smem_bytes"], 101376)
        self.assertIn("smem_bytes", [v["key"] for v in entries[4096]["violations"]])
        smem = [v for v in entries[4096]["violations"] if v["key"] == "smem_bytes"][0]
        self.assertEqual(smem["limit"], "101376")
        self.assertIn("shared memory", smem["rule"])

    def test_bad_smem_text(self):
        r = run("config", "validate", BAD_SMEM, "--gpu", RTX_PRO, "--dtype", "fp8_w8a8")
        self.assertExit(r, EXIT_PROBLEMS)
        lines = [l for l in (r.out + r.err).splitlines() if "smem_bytes" in l and "4096" in l]
        self.assertEqual(len(lines), 1, r)  # one line per violation

    def test_bad_smem_fits_an_h200(self):
        r = self.validate(BAD_SMEM, "--gpu", "H200", "--dtype", "fp8_w8a8")
        self.assertExit(r, EXIT_OK)
        self.assertTrue(r.json()["ok"])

    def test_bad_blockk(self):
        r = self.validate(BAD_BLOCKK, "--dtype", "fp8_w8a8", "--block-shape", "128,128",
                          "--gpu", "H200")
        self.assertExit(r, EXIT_PROBLEMS)
        j = r.json()
        self.check_json(j)
        self.assertFalse(j["ok"])
        keys = [v["key"] for e in j["entries"] for v in e["violations"]]
        self.assertIn("BLOCK_SIZE_K", keys)

    def test_bad_blockk_text_names_the_key(self):
        r = run("config", "validate", BAD_BLOCKK, "--dtype", "fp8_w8a8", "--block-shape",
                "128,128")
        self.assertExit(r, EXIT_PROBLEMS)
        self.assertIn("BLOCK_SIZE_K", r.out + r.err)

    def test_blockk_fine_without_block_scales(self):
        r = self.validate(BAD_BLOCKK, "--dtype", "bf16", "--gpu", "H200")
        self.assertExit(r, EXIT_OK)

    def test_good_table(self):
        r = self.validate(TABLE_18, "--dtype", "fp8_w8a8", "--block-shape", "128,128",
                          "--gpu", "H200")
        self.assertExit(r, EXIT_OK)
        j = r.json()
        self.check_json(j)
        self.assertTrue(j["ok"])
        self.assertEqual(len(j["entries"]), 18)

    def test_target_from_the_file_name(self):
        with tempfile.TemporaryDirectory() as d:
            name = ("E=256,N=256,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition,"
                    "dtype=fp8_w8a8.json")
            path = os.path.join(d, name)
            with open(BAD_SMEM) as src, open(path, "w") as dst:
                dst.write(src.read())
            r = self.validate(path)
            self.assertExit(r, EXIT_PROBLEMS)
            self.assertFalse({e["M"]: e for e in r.json()["entries"]}[4096]["ok"])

    def test_a_name_without_dtype_is_checked_as_bf16_with_a_note(self):
        # A hand-named fp8 table (swap-AB with 128-byte rows of fp8) fails bf16's rules; the
        # report says how it was read and how to check it as fp8.
        entry = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
                 "num_warps": 4, "num_stages": 3, "SPLIT_K": 1, "SWAP_AB": 1}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "n256w4s3.json")
            with open(path, "w") as f:
                json.dump({"8": entry}, f)
            r = run("config", "validate", path, "--gpu", "H200")
            self.assertExit(r, EXIT_PROBLEMS)
            self.assertIn("SWAP_AB=1", r.out)
            self.assertIn("note: the file name names no dtype, so the table was checked as bf16",
                          r.out)
            r = run("config", "validate", path, "--gpu", "H200", "--dtype", "fp8_w8a8",
                    "--block-shape", "128,128")
            self.assertExit(r, EXIT_OK)
            self.assertNotIn("note:", r.out)

    def test_bad_dtype_or_block_shape_in_the_file_name(self):
        # A target taken from the file name is checked as the flags are: exit 2 naming it,
        # never a silent fallback (int4 was checked as bf16, [0, 0] passed, [128,128,128] and
        # an overflowing number turned into per-tensor fp8).
        cases = (("dtype=int4_w4a16", "dtype (file name)=int4_w4a16"),
                 ("dtype=fp8_w8a8,block_shape=[0, 0]", "block_shape (file name)=[0, 0]"),
                 ("dtype=fp8_w8a8,block_shape=[128,128,128]",
                  "block_shape (file name)=[128,128,128]"),
                 ("dtype=fp8_w8a8,block_shape=[99999999999999999999, 128]",
                  "block_shape (file name)=[99999999999999999999, 128]"),
                 ("dtype=fp8_w8a8,block_shape=x", "block_shape (file name)=x"))
        with tempfile.TemporaryDirectory() as d:
            for tail, words in cases:
                with self.subTest(tail=tail):
                    path = os.path.join(d, f"E=256,N=256,device_name=NVIDIA_H200,{tail}.json")
                    with open(TABLE_18) as src, open(path, "w") as dst:
                        dst.write(src.read())
                    self.assertOneErrorLine(run("config", "validate", path), EXIT_BAD_INPUT,
                                            words)
                    # lookup still answers (it needs no target) and says why it did not check.
                    r = run("config", "lookup", path, "--batch", 8)
                    self.assertExit(r, EXIT_OK)
                    self.assertIn("not validated: " + words, r.err)
            # A flag names the target: the file name's dtype is moot then.
            path = os.path.join(d, "E=256,N=256,device_name=NVIDIA_H200,dtype=int4_w4a16.json")
            self.assertExit(run("config", "validate", path, "--dtype", "fp8_w8a8",
                                "--block-shape", "128,128"), EXIT_OK)
            # Well-formed names still set the target: SGLang's, vLLM's (no space), the down
            # table's, and a copy's " (1)" suffix.
            for tail, target in (
                    ("dtype=fp8_w8a8,block_shape=[128, 128].json", "block_shape [128, 128]"),
                    ("dtype=fp8_w8a8,block_shape=[128,128].json", "block_shape [128, 128]"),
                    ("dtype=fp8_w8a8,block_shape=[128, 128]_down.json", "block_shape [128, 128]"),
                    ("dtype=fp8_w8a8 (1).json", "per-tensor"),
                    ("dtype=fp8_w8a8_down.json", "per-tensor")):
                with self.subTest(tail=tail):
                    good = os.path.join(d, "E=256,N=256,device_name=NVIDIA_H200," + tail)
                    with open(TABLE_18) as src, open(good, "w") as dst:
                        dst.write(src.read())
                    r = run("config", "validate", good)
                    self.assertExit(r, EXIT_OK)
                    self.assertIn(f"(fp8_w8a8 {target}, from the file name)", r.out)
            # A block_k moetune's kernels do not take is refused as tune refuses it.
            path = os.path.join(d, "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,"
                                   "block_shape=[128, 96].json")
            with open(TABLE_18) as src, open(path, "w") as dst:
                dst.write(src.read())
            self.assertOneErrorLine(run("config", "validate", path), EXIT_BAD_INPUT,
                                    "block_shape (file name)=[128, 96]", "block_k")
            self.assertOneErrorLine(run("config", "validate", TABLE_18, "--dtype", "fp8_w8a8",
                                        "--block-shape", "128,96"), EXIT_BAD_INPUT,
                                    "block-shape=[128, 96]")

    def test_unknown_device_in_the_file_name_is_noted(self):
        # moetune has no spec for it: the note names the GPU whose limits were used instead.
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "E=256,N=256,device_name=NVIDIA_Future_X9,dtype=fp8_w8a8.json")
            with open(BAD_SMEM) as src, open(path, "w") as dst:
                dst.write(src.read())
            r = run("config", "validate", path, "--json")
            self.assertIn("device_name=NVIDIA_Future_X9 (file name) is not in moetune's GPU table",
                          r.err)
            self.assertIn("checking against NVIDIA H200 (choose with --gpu)", r.err)
            self.assertTrue(r.json()["ok"])  # checked as an H200 table: it fits (not an RTX PRO 6000)
            quiet = run("config", "validate", path, "--json", "--gpu", "H200")
            self.assertNotIn("NVIDIA_Future_X9", quiet.err)

    def test_bad_inputs(self):
        for args, words in ((["--block-shape", "128"], ["block-shape", "128"]),
                            (["--gpu", "nonsense"], ["gpu", "nonsense"]),
                            (["--dtype", "int3"], ["dtype", "int3"])):
            with self.subTest(args=args):
                self.assertOneErrorLine(run("config", "validate", BAD_SMEM, *args),
                                        EXIT_BAD_INPUT, *words)
        self.assertOneErrorLine(run("config", "validate", "/nonexistent.json"), EXIT_BAD_INPUT,
                                "/nonexistent.json")


if __name__ == "__main__":
    unittest.main()
