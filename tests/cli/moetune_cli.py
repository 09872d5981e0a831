"""Helpers for the CLI tests: run the binary named by MOETUNE_BIN, find the test data."""
import json
import os
import subprocess
import unittest

BIN = os.environ.get("MOETUNE_BIN", "")
DATA = os.environ.get("MOETUNE_TEST_DATA", os.path.join(os.path.dirname(__file__), "..", "data"))
CASES = os.path.join(DATA, "cases")
MODEL_CONFIGS = os.path.join(DATA, "model_configs")

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT, EXIT_NO_GPU, EXIT_PROBLEMS = 0, 1, 2, 3, 4


class Result:
    def __init__(self, proc):
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    @property
    def err_lines(self):
        return [l for l in self.err.splitlines() if l.strip()]

    @property
    def error_lines(self):
        """stderr lines that are errors (notes such as the no-GPU fallback are not)."""
        return [l for l in self.err_lines if not l.startswith("moetune: note:")]

    def json(self):
        return json.loads(self.out)

    def __repr__(self):
        return f"exit {self.code}\n--- stdout ---\n{self.out}\n--- stderr ---\n{self.err}"


def run(*args, timeout=120, env=None):
    if not BIN:
        raise unittest.SkipTest("MOETUNE_BIN is not set")
    e = dict(os.environ)
    # A private cache so that tests never touch the user's.
    e.setdefault("MOETUNE_CACHE_DIR", os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                   f"moetune-cli-test-{os.getuid()}"))
    if env:
        e.update(env)
    proc = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=e)
    return Result(proc)


_gpu = None


def gpu_present():
    """True when the machine has a usable GPU (then the no-GPU assertions are skipped)."""
    global _gpu
    if _gpu is None:
        r = run("shapes")
        _gpu = "no GPU" not in r.err
    return _gpu


class CliTestCase(unittest.TestCase):
    def assertNoCrash(self, r):
        self.assertNotIn(r.code, (-6, -11, 134, 139), r)  # abort / segfault
        self.assertNotIn("Traceback", r.err, r)
        self.assertNotIn("terminate called", r.err, r)
        self.assertNotIn("what():", r.err, r)

    def assertExit(self, r, code):
        self.assertNoCrash(r)
        self.assertEqual(r.code, code, r)

    def assertOneErrorLine(self, r, code, *words):
        """exit `code`, exactly one stderr line, `moetune: error: ...`, containing each word."""
        self.assertExit(r, code)
        self.assertEqual(len(r.err_lines), 1, r)
        line = r.err_lines[0]
        self.assertTrue(line.startswith("moetune: error: "), r)
        for w in words:
            self.assertIn(str(w).lower(), line.lower(), r)
        return line
