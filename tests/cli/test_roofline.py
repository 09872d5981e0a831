"""moetune roofline: JSON keys, and numbers checked against DESIGN.md's formulas."""
import unittest

from moetune_cli import EXIT_BAD_INPUT, EXIT_OK, CliTestCase, run

ROW_KEYS = {"M", "expected_experts", "bytes", "flops", "t_mem_us", "t_compute_us", "floor_us",
            "bound"}
COMMON_18 = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096]

# The default model (qwen3.5-122b-a10b-fp8 at TP4) on the H200 (DESIGN.md's numbers).
E, E_GLOBAL, N, K, TOPK = 256, 256, 256, 3072, 8
BW, FP8_PEAK, BF16_PEAK = 4.8e12, 1978.9e12, 989.4e12


def expected_row(M, e=E, e_global=E_GLOBAL, n=N, k=K, topk=TOPK, wbytes=1, block=(128, 128),
                 peak=FP8_PEAK):
    experts = e * (1 - (1 - topk / e_global) ** M)
    per_expert = 3 * n * k * wbytes
    if block:
        bn, bk = block
        per_expert += ((2 * n // bn) * (k // bk) + (k // bk) * (n // bn)) * 4
    nbytes = experts * per_expert + M * k * 2 + M * k * 2
    flops = 6 * M * topk * (e / e_global) * n * k
    t_mem = nbytes / BW * 1e6
    t_comp = flops / peak * 1e6
    return {"M": M, "expected_experts": experts, "bytes": nbytes, "flops": flops,
            "t_mem_us": t_mem, "t_compute_us": t_comp, "floor_us": max(t_mem, t_comp),
            "bound": "memory" if t_mem >= t_comp else "compute"}


class Roofline(CliTestCase):
    def check_rows(self, rows, expected):
        self.assertEqual(len(rows), len(expected))
        for row, want in zip(rows, expected):
            self.assertEqual(set(row), ROW_KEYS)
            self.assertEqual(row["M"], want["M"])
            self.assertEqual(row["bound"], want["bound"], row)
            # Rounded as written (README): bytes and FLOPs to integers, the rest to 4 decimals.
            for key in ("bytes", "flops"):
                self.assertIsInstance(row[key], int, key)
                self.assertAlmostEqual(row[key], want[key], delta=abs(want[key]) * 1e-9 + 0.5,
                                       msg=f"M={row['M']} {key}")
            for key in ROW_KEYS - {"M", "bound", "bytes", "flops"}:
                self.assertIsInstance(row[key], float, key)
                self.assertEqual(row[key], round(row[key], 4), f"M={row['M']} {key}")
                self.assertAlmostEqual(row[key], want[key], delta=abs(want[key]) * 1e-9 + 5e-5,
                                       msg=f"M={row['M']} {key}")

    def test_json_keys_and_numbers(self):
        r = run("roofline", "--batch", "1,8,64", "--json", "--gpu", "NVIDIA H200")
        self.assertExit(r, EXIT_OK)
        j = r.json()
        self.assertEqual(set(j), {"gpu", "crossover_M", "rows"})
        self.assertEqual(j["gpu"], "NVIDIA H200")
        self.assertIsInstance(j["crossover_M"], int)
        self.check_rows(j["rows"], [expected_row(M) for M in (1, 8, 64)])
        # The first row by hand: 8 experts of 3*256*3072 fp8 bytes plus 576 B of scales each.
        self.assertEqual(j["rows"][0]["bytes"], 8 * (3 * 256 * 3072 + 576) + 4 * 3072)
        self.assertEqual(j["rows"][0]["flops"], 6 * 8 * 256 * 3072)

    def test_json_has_no_float_noise(self):
        # 256 * (1 - (1 - 8/256)^1) is 7.999999999999999 in doubles; the JSON rounds as it writes.
        r = run("roofline", "--batch", "1", "--json", "--gpu", "H200")
        self.assertExit(r, EXIT_OK)
        self.assertIn('"expected_experts": 8.0,', r.out)
        self.assertIn('"bytes": 18891264,', r.out)
        self.assertIn('"t_mem_us": 3.9357,', r.out)
        row = r.json()["rows"][0]
        self.assertEqual(row["expected_experts"], 8)
        self.assertIsInstance(row["bytes"], int)
        self.assertEqual(row["floor_us"], row["t_mem_us"])

    def test_default_batch_is_the_common_18(self):
        r = run("roofline", "--json", "--gpu", "H200")
        self.assertExit(r, EXIT_OK)
        self.assertEqual([row["M"] for row in r.json()["rows"]], COMMON_18)

    def test_crossover(self):
        j = run("roofline", "--json", "--gpu", "H200", "--batch", "1").json()
        c = j["crossover_M"]
        self.assertGreater(c, 1)
        rows = run("roofline", "--json", "--gpu", "H200", "--batch", f"{c - 1},{c}").json()["rows"]
        self.assertEqual([r["bound"] for r in rows], ["memory", "compute"])

    def test_bf16_mixtral_at_tp2(self):
        r = run("roofline", "--json", "--model", "mixtral-8x7b", "--tp", "2", "--gpu", "H200",
                "--batch", "1,4096")
        self.assertExit(r, EXIT_OK)
        want = [expected_row(M, e=8, e_global=8, n=7168, k=4096, topk=2, wbytes=2, block=None,
                             peak=BF16_PEAK) for M in (1, 4096)]
        self.check_rows(r.json()["rows"], want)

    def test_text_table(self):
        r = run("roofline", "--batch", "1,8,64", "--gpu", "H200")
        self.assertExit(r, EXIT_OK)
        self.assertIn("floor_us", r.out)
        self.assertIn("memory", r.out)
        self.assertEqual(len([l for l in r.out.splitlines() if l.strip().startswith(("1 ", "8 ", "64 "))]), 3)

    def test_fp8_on_a100_is_refused(self):
        r = run("roofline", "--gpu", "A100", "--batch", "1")
        line = self.assertOneErrorLine(r, EXIT_BAD_INPUT, "dtype")
        self.assertIn("8.9", line)

    def test_counts_past_2_to_53_stay_numbers(self):
        # A count a double cannot hold exactly is written as the double (it was an int64 once,
        # and overflowed to -2^63 for sizes the tool accepts).
        r = run("roofline", "--json", "--model", "mixtral-8x7b", "--batch", "16777216", "--topk", "8",
                "--experts", "8", "--intermediate", "1048576", "--hidden", "1048576", "--gpu", "H200")
        self.assertExit(r, EXIT_OK)
        row = r.json()["rows"][0]
        self.assertIsInstance(row["flops"], float)
        self.assertGreater(row["flops"], 2.0 ** 63)
        small = run("roofline", "--json", "--batch", "1", "--gpu", "H200").json()["rows"][0]
        self.assertIsInstance(small["bytes"], int)

    def test_bad_batch(self):
        for bad in ("0", "x", "1,x", "-4", "1.5", ""):
            with self.subTest(batch=bad):
                r = run("roofline", "--batch", bad, "--gpu", "H200")
                self.assertOneErrorLine(r, EXIT_BAD_INPUT, "batch")

    def test_measured_times_against_the_floor(self):
        # A run measured elsewhere: %floor = floor / measured, per M; without --batch the
        # measured Ms are the batch.
        r = run("roofline", "--measured", "8=46.69,32=111.45", "--gpu", "H200", "--json")
        self.assertExit(r, EXIT_OK)
        rows = r.json()["rows"]
        self.assertEqual([row["M"] for row in rows], [8, 32])
        for row, us in zip(rows, (46.69, 111.45)):
            self.assertEqual(row["measured_us"], us)
            floor = expected_row(row["M"])["floor_us"]
            self.assertAlmostEqual(row["pct_floor"], 100 * floor / us, places=3)
        # With --batch: rows without a measurement carry none.
        r = run("roofline", "--batch", "1,8", "--measured", "8=46.69", "--gpu", "H200", "--json")
        self.assertExit(r, EXIT_OK)
        rows = {row["M"]: row for row in r.json()["rows"]}
        self.assertNotIn("measured_us", rows[1])
        self.assertEqual(rows[8]["measured_us"], 46.69)
        text = run("roofline", "--batch", "1,8", "--measured", "8=46.69", "--gpu", "H200")
        self.assertExit(text, EXIT_OK)
        self.assertIn("measured_us", text.out)
        self.assertRegex(text.out, r"\n\s+8 .*memory\s+46\.69\s+60\.5%")

    def test_bad_measured(self):
        for bad in ("8", "8=-1", "8=0", "8=nan", "8=inf", "8=1e400", "8=1,8=2", "x=1", "8=",
                    "=5", "8=1,"):
            with self.subTest(measured=bad):
                r = run("roofline", "--measured", bad, "--gpu", "H200")
                self.assertOneErrorLine(r, EXIT_BAD_INPUT, "measured=")
        self.assertOneErrorLine(run("roofline", "--measured", "8=1", "--batch", "1,2", "--gpu",
                                    "H200"), EXIT_BAD_INPUT, "measured=", "not in --batch")


if __name__ == "__main__":
    unittest.main()
