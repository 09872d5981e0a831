"""Review fixes: the up/down BLOCK_SIZE_M rule in config validate, one line per key/value
(no forged output lines), --dtype case, the quoted form of empty values."""
import json
import os
import tempfile
import unittest

from moetune_cli import (CASES, EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEMS, CliTestCase, run)

TABLE_18 = os.path.join(CASES, "config_table_18.json")
UP_NAME = "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json"
DOWN_NAME = UP_NAME[:-len(".json")] + "_down.json"
TARGET = ["--dtype", "fp8_w8a8", "--block-shape", "128,128", "--gpu", "H200"]
RULE = "up and down share one alignment"


def entry(key):
    with open(TABLE_18) as f:
        return json.load(f)[key]


def write(path, table):
    with open(path, "w") as f:
        json.dump(table, f)


class UpDownRule(CliTestCase):
    """DESIGN.md: the down table's BLOCK_SIZE_M equals the up table's at every key."""

    def pair(self, d, up_bm, down_bm):
        up, down = entry("256"), entry("256")  # valid on an H200, fp8 [128, 128]
        up["BLOCK_SIZE_M"], down["BLOCK_SIZE_M"] = up_bm, down_bm
        write(os.path.join(d, UP_NAME), {"16": up, "1": entry("1")})
        write(os.path.join(d, DOWN_NAME), {"16": down, "1": entry("1")})
        return os.path.join(d, UP_NAME), os.path.join(d, DOWN_NAME)

    def test_up_file_checks_its_down_sibling(self):
        with tempfile.TemporaryDirectory() as d:
            up, down = self.pair(d, 64, 16)
            for path in (up, down):
                with self.subTest(file=os.path.basename(path)):
                    r = run("config", "validate", path, *TARGET)
                    self.assertExit(r, EXIT_PROBLEMS)
                    lines = [l for l in r.out.splitlines() if l.startswith("violation:")]
                    self.assertEqual(len(lines), 1, r)
                    self.assertIn("M=16", lines[0])
                    self.assertIn("BLOCK_SIZE_M", lines[0])
                    self.assertIn(RULE, lines[0])

                    r = run("config", "validate", path, *TARGET, "--json")
                    self.assertExit(r, EXIT_PROBLEMS)
                    j = r.json()
                    self.assertEqual(set(j), {"ok", "entries"})
                    self.assertFalse(j["ok"])
                    entries = {e["M"]: e for e in j["entries"]}
                    self.assertTrue(entries[1]["ok"], entries[1])
                    self.assertFalse(entries[16]["ok"])
                    self.assertEqual([v["rule"] for v in entries[16]["violations"]], [RULE])
                    self.assertEqual(entries[16]["violations"][0]["key"], "BLOCK_SIZE_M")

    def test_matching_pair_is_valid(self):
        with tempfile.TemporaryDirectory() as d:
            up, down = self.pair(d, 64, 64)
            for path in (up, down):
                with self.subTest(file=os.path.basename(path)):
                    self.assertExit(run("config", "validate", path, *TARGET), EXIT_OK)

    def test_without_sibling(self):
        with tempfile.TemporaryDirectory() as d:
            up, down = self.pair(d, 64, 16)
            os.remove(down)
            self.assertExit(run("config", "validate", up, *TARGET), EXIT_OK)


FORGED = "violation: M=1 fake"


class OneLine(CliTestCase):
    """A key or value holding a line break is printed escaped, on its own line's part."""

    def assertNoForgedLine(self, r):
        for stream in (r.out, r.err):
            for line in stream.splitlines():
                self.assertFalse(line.startswith(FORGED), r)
                self.assertFalse(line.startswith("fake"), r)

    def test_unknown_key_in_validate(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            for brk in ("\n", "\r", "\x0b", "\u2028", "\x85"):
                with self.subTest(brk=repr(brk)):
                    e = entry("256")
                    e["foo" + brk + FORGED] = 1
                    write(path, {"16": e})
                    for extra in ([], ["--json"]):
                        r = run("config", "validate", path, *TARGET, *extra)
                        self.assertExit(r, EXIT_PROBLEMS)
                        self.assertNoForgedLine(r)
                        if extra:
                            keys = [v["key"] for e in r.json()["entries"] for v in e["violations"]]
                            self.assertEqual(keys, ["foo" + brk + FORGED])
                        else:
                            lines = [l for l in r.out.splitlines() if l.startswith("violation:")]
                            self.assertEqual(len(lines), 1, r)
                            self.assertIn('"foo\\', lines[0])
                            self.assertIn("unknown key", lines[0])
                    if brk == "\n":
                        self.assertIn('"foo\\nviolation: M=1 fake"', r.out)

    def test_skipped_key_note(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            for brk in ("\n", "\x0b", "\u2028"):
                with self.subTest(brk=repr(brk)):
                    write(path, {"foo" + brk + FORGED: 1, "16": entry("256")})
                    r = run("config", "validate", path, *TARGET)
                    self.assertExit(r, EXIT_OK)
                    self.assertNoForgedLine(r)
                    self.assertEqual(len(r.err_lines), 1, r)
                    self.assertTrue(r.err_lines[0].startswith("moetune: note:"), r)

    def test_error_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            for brk in ("\n", "\x0b", "\x0c", "\u2028", "\x1c"):
                with self.subTest(brk=repr(brk)):
                    # A numeric-looking key that is not a batch size: InputError("config key", ...)
                    write(path, {"1" + brk + FORGED: entry("256")})
                    r = run("config", "validate", path, *TARGET)
                    self.assertOneErrorLine(r, EXIT_BAD_INPUT, "config key")
                    self.assertNoForgedLine(r)
            for brk in ("\n", "\x0b", "\u2028"):
                for args in (["shapes", "--gpu", "x" + brk + "y"],
                             ["shapes", "--tp", "1" + brk + "2"],
                             ["shapes", "--model", "no" + brk + "such"],
                             ["config", "validate", "/nonexistent" + brk + FORGED]):
                    with self.subTest(args=args):
                        r = run(*args)
                        self.assertOneErrorLine(r, EXIT_BAD_INPUT)
                        self.assertNoForgedLine(r)
            r = run("shapes", "--model", "no\nsuch")
            self.assertIn('model="no\\nsuch":', r.err)


class DtypeCase(CliTestCase):
    def test_auto_in_any_case(self):
        want = run("shapes", "--json", "--gpu", "H200", "--dtype", "auto")
        self.assertExit(want, EXIT_OK)
        for spelling in ("AUTO", "Auto", "aUtO"):
            with self.subTest(dtype=spelling):
                r = run("shapes", "--json", "--gpu", "H200", "--dtype", spelling)
                self.assertExit(r, EXIT_OK)
                self.assertEqual(r.json(), want.json())
        r = run("config", "validate", TABLE_18, "--gpu", "H200", "--dtype", "AUTO")
        self.assertNoCrash(r)
        self.assertNotEqual(r.code, EXIT_BAD_INPUT, r)
        for spelling in ("FP8", "BF16", "Fp8_W8A8"):
            with self.subTest(dtype=spelling):
                self.assertExit(run("shapes", "--gpu", "H200", "--dtype", spelling), EXIT_OK)


class LookupUsesTheLibrarysJson(CliTestCase):
    def test_config_keys_in_table_order(self):
        r = run("config", "lookup", TABLE_18, "--batch", "20", "--json")
        self.assertExit(r, EXIT_OK)
        config = json.loads(r.out, object_pairs_hook=list)[1][1]
        self.assertEqual([k for k, _ in config],
                         ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M",
                          "num_warps", "num_stages"])


class EmptyValues(CliTestCase):
    def test_empty_values_are_quoted_alike(self):
        cases = [(["shapes", "--dtype", ""], "dtype"),
                 (["shapes", "--gpu", ""], "gpu"),
                 (["shapes", "--tp", ""], "tp"),
                 (["shapes", "--ep", ""], "ep"),
                 (["shapes", "--experts", ""], "experts"),
                 (["roofline", "--gpu", "H200", "--batch", ""], "batch"),
                 (["roofline", "--gpu", "H200", "--batch", "1,,8"], "batch")]
        for args, field in cases:
            with self.subTest(args=args):
                line = self.assertOneErrorLine(run(*args), EXIT_BAD_INPUT)
                # an empty value, or an empty item of a list: the list, then the item quoted
                self.assertTrue(f'{field}="":' in line or f'{field}=1,,8: "":' in line, line)


if __name__ == "__main__":
    unittest.main()
