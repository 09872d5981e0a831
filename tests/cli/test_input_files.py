"""Input files that are not what a JSON input can be: a FIFO, a device, a folder, a huge file.
Each is exit 2 with one line naming the field and the path, at once: never a hang, a run on
/dev/zero's endless bytes, or seconds spent parsing a disk image. Large config tables parse in
linear time."""
import json
import os
import tempfile
import time
import unittest

from moetune_cli import EXIT_BAD_INPUT, EXIT_OK, CliTestCase, run

# A hang must fail the test, not the suite: far above what a refusal takes.
TIMEOUT_S = 30

ENTRY = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
         "num_warps": 4, "num_stages": 3}


class NotARegularFile(CliTestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def refused(self, field, path, *args, words=()):
        r = run(*args, timeout=TIMEOUT_S)
        line = self.assertOneErrorLine(r, EXIT_BAD_INPUT, f"{field}={path}", *words)
        self.assertNotIn("invalid JSON", line)
        return line

    def test_fifo(self):
        fifo = os.path.join(self.dir, "config.json")
        os.mkfifo(fifo)
        self.refused("model", fifo, "shapes", "--model", fifo, words=["not a regular file"])
        self.refused("model", fifo, "roofline", "--model", self.dir, words=["not a regular file"])
        self.refused("config", fifo, "config", "lookup", fifo, "--batch", "5",
                     words=["not a regular file"])
        self.refused("config", fifo, "config", "validate", fifo, words=["not a regular file"])

    @unittest.skipUnless(os.path.exists("/dev/zero"), "needs /dev/zero")
    def test_device(self):
        self.refused("model", "/dev/zero", "shapes", "--model", "/dev/zero",
                     words=["not a regular file"])
        self.refused("config", "/dev/zero", "config", "validate", "/dev/zero",
                     words=["not a regular file"])

    def test_config_json_that_is_a_folder(self):
        # It said "invalid JSON ... unexpected end of input".
        inner = os.path.join(self.dir, "config.json")
        os.mkdir(inner)
        self.refused("model", inner, "shapes", "--model", self.dir, words=["folder"])
        self.refused("config", self.dir, "config", "validate", self.dir, words=["folder"])

    def test_file_over_the_cap(self):
        # 400 MB of nothing (sparse): refused by its size before a byte is read.
        big = os.path.join(self.dir, "big.json")
        with open(big, "wb") as f:
            f.truncate(400 << 20)
        for args, field in ((["shapes", "--model", big], "model"),
                            (["config", "lookup", big, "--batch", "1"], "config")):
            with self.subTest(args=args):
                t0 = time.monotonic()
                self.refused(field, big, *args, words=["419430400 bytes", "64 MiB"])
                self.assertLess(time.monotonic() - t0, 10)


class LargeTable(CliTestCase):
    def test_30000_entries(self):
        # The duplicate-key check was quadratic: 30,000 entries took 12 s or more, 40,000 87 s;
        # now well under a second.
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            with open(path, "w") as f:
                json.dump({str(m): ENTRY for m in range(1, 30001)}, f)
            for args in (["config", "lookup", path, "--batch", "5", "--json"],
                         ["config", "validate", path, "--gpu", "H200"]):
                with self.subTest(args=args):
                    t0 = time.monotonic()
                    r = run(*args, timeout=120)
                    elapsed = time.monotonic() - t0
                    self.assertExit(r, EXIT_OK)
                    self.assertLess(elapsed, 3, args)
            self.assertEqual(run("config", "lookup", path, "--batch", "5", "--json").json()["key"],
                             5)


if __name__ == "__main__":
    unittest.main()
