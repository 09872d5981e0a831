"""Bad input: exit 2 and one stderr line naming the value; never a crash or a traceback."""
import os
import subprocess
import unittest

from moetune_cli import BIN, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_OK, CliTestCase, run

TABLE_18 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "cases",
                        "config_table_18.json")


class BadInput(CliTestCase):
    def test_named_values(self):
        cases = [
            (["shapes", "--tp", "0"], ["tp", "0"]),
            (["shapes", "--tp", "abc"], ["tp", "abc"]),
            (["shapes", "--tp", ""], ["tp"]),
            (["shapes", "--ep", "-2"], ["ep", "-2"]),
            (["shapes", "--tp", "99999999999"], ["tp", "99999999999"]),
            (["roofline", "--batch", "0"], ["batch", "0"]),
            (["roofline", "--batch", "x"], ["batch", "x"]),
            (["shapes", "--model", "nonexistent"], ["model", "nonexistent"]),
            (["roofline", "--model", "nonexistent"], ["model", "nonexistent"]),
            (["shapes", "--gpu", "nonsense"], ["gpu", "nonsense"]),
            (["roofline", "--gpu", "nonsense"], ["gpu", "nonsense"]),
            (["shapes", "--block-shape", "128"], ["block-shape", "128"]),
            (["shapes", "--dtype", "int4"], ["dtype", "int4"]),
            (["shapes", "--experts", "0"], ["experts", "0"]),
            (["shapes", "--topk", "z"], ["topk", "z"]),
            (["shapes", "--model", "qwen3-30b-a3b", "--topk", "999"], ["999"]),
            (["bogus"], ["bogus"]),
            (["config", "lookpu", "t.json", "--batch", "1"], ["config lookpu", "lookup, validate"]),
            (["config"], ["config", "lookup, validate"]),
            (["shapes", "--model", "qwen3-235b-a22b-fp8", "--hidden", "100"], ["hidden", "100"]),
            (["shapes", "--frobnicate"], ["--frobnicate"]),
            (["shapes", "--tp"], ["--tp"]),
            ([], []),
        ]
        for args, words in cases:
            with self.subTest(args=args):
                r = run(*args)
                self.assertOneErrorLine(r, EXIT_BAD_INPUT, *words)
                self.assertEqual(r.out, "", r)

    def assertExactError(self, args, line):
        r = run(*args)
        self.assertExit(r, EXIT_BAD_INPUT)
        self.assertEqual(r.err_lines, ["moetune: error: " + line], r)
        self.assertEqual(r.out, "", r)

    def test_unknown_option_names_it_and_the_nearest(self):
        cases = [
            (["shapes", "--tpp", "4"], "unknown option --tpp for 'moetune shapes' (did you mean --tp?)"),
            (["shapes", "--tpp=4"], "unknown option --tpp for 'moetune shapes' (did you mean --tp?)"),
            (["--tpp", "4", "shapes"], "unknown option --tpp for 'moetune shapes' (did you mean --tp?)"),
            (["roofline", "--batchh", "4"],
             "unknown option --batchh for 'moetune roofline' (did you mean --batch?)"),
            (["tune", "--dry"], "unknown option --dry for 'moetune tune' (did you mean --dry-run?)"),
            (["tune", "--bugdet", "5m"], "unknown option --bugdet for 'moetune tune' (did you mean --budget?)"),
            # before CLI11's "--batch is required", which the misspelling caused
            (["config", "lookup", TABLE_18, "--bach", "8"],
             "unknown option --bach for 'moetune config lookup' (did you mean --batch?)"),
            # nothing close: no guess, the command's help instead
            (["shapes", "--frobnicate"], "unknown option --frobnicate for 'moetune shapes' "
                                         "(see moetune shapes --help)"),
            (["tune", "--xyzzy"], "unknown option --xyzzy for 'moetune tune' (see moetune tune --help)"),
            # a unique prefix beats a near miss (--top is one letter from --tp)
            (["shapes", "--top", "2"], "unknown option --top for 'moetune shapes' (did you mean --topk?)"),
            (["shapes", "--exp", "4"], "unknown option --exp for 'moetune shapes' (did you mean --experts?)"),
            # nameless options: exit 2 and one line, no guess (they crashed the guess once)
            (["shapes", "--=4"], "unknown option --=4 for 'moetune shapes' (see moetune shapes --help)"),
            (["shapes", "---"], "unknown option --- for 'moetune shapes' (see moetune shapes --help)"),
            # no command at all: the choices (CLI11 said "A subcommand is required")
            ([], "no command given; commands: shapes, roofline, config, kernels, check, bench, "
                 "profile, tune (see moetune --help)"),
            (["--tp", "4"], "no command given; commands: shapes, roofline, config, kernels, check, "
                            "bench, profile, tune (see moetune --help)"),
            # a command's option before the command
            (["--batch", "1", "config", "lookup", TABLE_18],
             "--batch belongs after 'moetune config lookup' (a command's options follow its name)"),
        ]
        for args, line in cases:
            with self.subTest(args=args):
                self.assertExactError(args, line)

    def test_repeated_option(self):
        cases = [
            (["shapes", "--tp", "4", "--tp", "8"], "--tp given twice (once is allowed)"),
            (["shapes", "--tp=4", "--tp=4"], "--tp given twice (once is allowed)"),
            (["roofline", "--batch", "1", "--batch", "2"], "--batch given twice (once is allowed)"),
            (["roofline", "--gpu", "H200", "--gpu", "H100", "--gpu", "B200"],
             "--gpu given 3 times (once is allowed)"),
            (["config", "lookup", TABLE_18, "--batch", "1", "--batch", "2"],
             "--batch given twice (once is allowed)"),
            # Flags too (CLI11 would take the last), global and a command's own.
            (["roofline", "--json", "--json"], "--json given twice (once is allowed)"),
            (["shapes", "--json", "--tp", "4", "--json"], "--json given twice (once is allowed)"),
            (["kernels", "--list", "--list"], "--list given twice (once is allowed)"),
            (["bench", "--sliced", "--sliced", "--sliced"], "--sliced given 3 times (once is allowed)"),
        ]
        for args, line in cases:
            with self.subTest(args=args):
                self.assertExactError(args, line)

    def test_contradicting_flags(self):
        # Refused before any GPU is looked for, so this runs without one too.
        for cmd in ("bench", "profile", "check"):
            with self.subTest(cmd=cmd):
                self.assertExactError(
                    [cmd, "--align-in-gemm1", "--no-align-in-gemm1"],
                    "--align-in-gemm1 excludes --no-align-in-gemm1 (see moetune --help)")
                # The sliced kernel's adds land in any order: no bit-reproducible output. CLI11
                # names first the flag declared first (check declares --deterministic first).
                pair = ("--deterministic", "--sliced") if cmd == "check" else (
                    "--sliced", "--deterministic")
                self.assertExactError([cmd, "--sliced", "--deterministic"],
                                      f"{pair[0]} excludes {pair[1]} (see moetune --help)")

    def test_global_options_on_either_side(self):
        a = run("--tp", "0", "shapes")
        b = run("shapes", "--tp", "0")
        self.assertOneErrorLine(a, EXIT_BAD_INPUT, "tp")
        self.assertEqual(a.err, b.err)

    def test_help_and_version(self):
        r = run("--help")
        self.assertExit(r, EXIT_OK)
        for cmd in ("shapes", "roofline", "config"):
            self.assertIn(cmd, r.out)
        self.assertNotIn("worker", r.out)
        self.assertExit(run("--version"), EXIT_OK)
        self.assertExit(run("shapes", "--help"), EXIT_OK)

    def test_dense_model_refused(self):
        import json, os, tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "config.json")
            with open(path, "w") as f:
                json.dump({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
                           "intermediate_size": 14336, "num_hidden_layers": 32}, f)
            for cmd in ("shapes", "roofline"):
                r = run(cmd, "--model", d)
                self.assertOneErrorLine(r, EXIT_BAD_INPUT)

    def test_junk_configs(self):
        import json, os, tempfile
        junk = ["", "{", "[]", "null", "42", '"x"', '{"num_experts": "many"}',
                '{"num_experts": 8, "num_experts_per_tok": 2, "hidden_size": -1, '
                '"moe_intermediate_size": 64}',
                '{"text_config": 5}', '{"num_experts": 1e30}',
                '{"num_experts": 8, "num_experts_per_tok": 2, "hidden_size": 128, '
                '"moe_intermediate_size": 64, "quantization_config": "fp8"}']
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "c.json")
            for text in junk:
                with open(path, "w") as f:
                    f.write(text)
                for cmd in ("shapes", "roofline"):
                    with self.subTest(text=text, cmd=cmd):
                        r = run(cmd, "--model", path, "--gpu", "H200")
                        self.assertNoCrash(r)
                        self.assertIn(r.code, (EXIT_OK, EXIT_BAD_INPUT), r)
                        if r.code == EXIT_BAD_INPUT:
                            self.assertOneErrorLine(r, EXIT_BAD_INPUT)

    def test_bad_input_wins_over_a_missing_gpu(self):
        # Exit 2 naming the option, before the GPU check (this machine may have none).
        import os, tempfile
        with tempfile.TemporaryDirectory() as d:
            afile = os.path.join(d, "afile")
            open(afile, "w").close()
            cases = [
                (["bench", "--gpu", "nonsense"], ["gpu=nonsense"]),
                (["profile", "--gpu", "nonsense"], ["gpu=nonsense"]),
                (["check", "--gpu", "nonsense"], ["gpu=nonsense"]),
                (["tune", "--gpu", "nonsense"], ["gpu=nonsense"]),
                (["roofline", "--measured-ceilings", "--gpu", "nonsense"], ["gpu=nonsense"]),
                (["kernels", "--compile-only", "--arch", "sm_90a", "--gpu", "nonsense"],
                 ["gpu=nonsense"]),
                (["tune", "--dry-run", "--out", afile], ["out=", "not a folder"]),
                (["tune", "--out", afile], ["out=", "not a folder"]),
                (["tune", "--dry-run", "--out", os.path.join(afile, "sub")], ["out=", "not a folder"]),
                (["tune", "--dry-run", "--out", ""], ["out=", "empty"]),
                (["shapes", "extra"], ["argument=extra: not expected by 'moetune shapes'"]),
                # refused before any GPU is looked for (exit 2, not 3)
                (["bench", "--sliced-stages", "6"], ["sliced-stages=6", "2..5"]),
                (["profile", "--sliced-stages", "x"], ["sliced-stages=x"]),
                (["check", "--sliced-stages", "1"], ["sliced-stages=1", "2..5"]),
                (["config", "validate", TABLE_18, "b"], ["argument=b: not expected"]),
                # nothing can be made in /proc, even by root (whom access() lets through)
                (["tune", "--dry-run", "--out", "/proc/moetune-out"], ["out=", "cannot write"]),
                (["tune", "--out", "/proc/moetune-out"], ["out=", "cannot write"]),
                (["bench", "--vs", os.path.join(d, "missing.json")], ["vs=", "missing.json"]),
                (["shapes", "--model", "qwen3-235b-a22b-fp8", "--tp", "4", "--block-shape", "100,128"],
                 ["block-shape=100,128"]),
                (["shapes", "--model", "qwen3-235b-a22b-fp8", "--tp", "4", "--intermediate", "100"],
                 ["intermediate=100"]),
                # config: the model options choose nothing there, but are checked all the same
                (["config", "validate", TABLE_18, "--tp", "0"], ["tp=0"]),
                (["config", "lookup", TABLE_18, "--batch", "8", "--model", "nope"], ["model=nope"]),
                (["config", "validate", TABLE_18, "--block-shape", "128,128", "--gpu", "H200"],
                 ["block-shape=128,128", "fp8_w8a8"]),
            ]
            empty = os.path.join(d, "empty.json")
            with open(empty, "w") as f:
                f.write("{}")
            cases += [
                # the kernels' int32 slot ids: M * topk < 2^31 for the model's own topk
                (["roofline", "--gpu", "H200", "--topk", "256", "--batch", "16777216"],
                 ["batch=16777216", "4294967296"]),
                (["tune", "--dry-run", "--topk", "256", "--batch", "8388608"],
                 ["batch=8388608", "2147483648"]),
                (["bench", "--topk", "256", "--batch", "8388608"], ["batch=8388608"]),
                # shapes moetune's kernels cannot run, before any plan or GPU
                (["tune", "--dry-run", "--model", "mixtral-8x7b", "--hidden", "4095",
                  "--batch", "1"], ["K (the hidden size)=4095", "multiple of 8"]),
                (["tune", "--dry-run", "--batch", "1", "--block-shape", "16,16"],
                 ["block_shape (its block_k)=16", "block_k"]),
                (["bench", "--model", "mixtral-8x7b", "--intermediate", "14335"],
                 ["N (the expert intermediate size per TP rank)=14335", "8"]),
                # the roofline models any shape, also with the GPU's measured ceilings (exit 3
                # here: no GPU), not refused as the kernels refuse it
                (["roofline", "--model", "mixtral-8x7b", "--hidden", "4095", "--batch", "1",
                  "--gpu", "H200"], None),
                (["check", "--model", "mixtral-8x7b", "--hidden", "4095"],
                 ["K (the hidden size)=4095"]),
                # check without --model runs the anchors: these would be ignored
                (["check", "--tp", "0"], ["tp=0", "--model"]),
                (["check", "--dtype", "foo"], ["dtype=foo", "--model"]),
                # an empty --config table would have timed the defaults under its name
                (["bench", "--config", empty], ["config=", "empty.json", "no entries"]),
            ]
            for args, words in cases:
                with self.subTest(args=args):
                    if words is None:
                        self.assertExit(run(*args), EXIT_OK)
                    else:
                        self.assertOneErrorLine(run(*args), EXIT_BAD_INPUT, *words)
            self.assertEqual(sorted(os.listdir(d)), ["afile", "empty.json"])  # nothing written


class LostOutput(CliTestCase):
    """Output that cannot be written (a full disk) fails the run: exit 1 and one line, not 0."""

    @unittest.skipUnless(os.path.exists("/dev/full"), "needs /dev/full")
    def test_a_full_stdout_is_an_error(self):
        if not BIN:
            raise unittest.SkipTest("MOETUNE_BIN is not set")
        # roofline --json and kernels --list print more than stdio buffers: the write fails
        # mid-run (fmt throws), not at the final flush; that said "internal error".
        for args in (["shapes"], ["tune", "--dry-run", "--batch", "1"], ["shapes", "--json"],
                     ["roofline", "--json"], ["kernels", "--list"]):
            with open("/dev/full", "w") as full:
                p = subprocess.run([BIN, *args, "--gpu", "H200"], stdout=full,
                                   stderr=subprocess.PIPE, text=True, timeout=120)
            self.assertEqual(p.returncode, EXIT_INTERNAL, (args, p.stderr))
            errors = [l for l in p.stderr.splitlines() if l.startswith("moetune: error:")]
            self.assertEqual(errors, ["moetune: error: cannot write to standard output"],
                             (args, p.stderr))


class KernelEnvironmentKnobs(CliTestCase):
    """The knobs the JIT hands the kernels (L2 prefetch sizes, the sliced kernel's trace): a bad
    value is refused before any command runs."""

    def test_a_bad_size_is_one_line_naming_the_variable(self):
        for var in ("MOETUNE_CP_ASYNC_L2_PREFETCH", "MOETUNE_SLICED_W2_L2_PREFETCH"):
            for args in (["kernels", "--compile-only", "--arch", "sm_90a"], ["shapes"]):
                r = run(*args, env={var: "100"})
                self.assertEqual(r.code, EXIT_BAD_INPUT, r)
                self.assertIn(f"{var}=100", r.err)
                self.assertIn("0, 64, 128 or 256", r.err)
                self.assertEqual(len(r.err.strip().splitlines()), 1, r)

    def test_a_bad_switch_is_one_line_naming_the_variable(self):
        for var in ("MOETUNE_SLICED_TRACE", "MOETUNE_SLICED_EARLY_W13"):
            r = run("shapes", env={var: "yes"})
            self.assertEqual(r.code, EXIT_BAD_INPUT, r)
            self.assertIn(f"{var}=yes", r.err)
            self.assertIn("0 or 1", r.err)
            self.assertEqual(len(r.err.strip().splitlines()), 1, r)

    def test_a_good_size_runs(self):
        r = run("kernels", "--list", env={"MOETUNE_CP_ASYNC_L2_PREFETCH": "256",
                                          "MOETUNE_SLICED_W2_L2_PREFETCH": "0"})
        self.assertEqual(r.code, EXIT_OK, r)
        self.assertIn("moe_gemms_sliced", r.out)


if __name__ == "__main__":
    unittest.main()
