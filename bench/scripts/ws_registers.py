#!/usr/bin/env python3
"""Registers and spills of the warp-specialized fp8 GEMM1 kernel, offline (nvcc + ptxas, no GPU).

For every block-fp8 config of the tuner's space (SPLIT_K 1/2/4/8) that runs the warp-specialized
wgmma kernel on sm_90a (BLOCK_SIZE_K 128, accumulators <= 64 a thread, >= 8 K-tiles per split):
GEMM1 at K = 3072 (Qwen3.5-122B TP4) and 7168 (DeepSeek-V3 TP8) with N = 256, and GEMM2 (its
reduction is N) at N = 2048 (a wide expert, e.g. Mixtral-class) with K = 4096; topk 8. Compile
one instance from this checkout's kernels/ to PTX, read the bound it carries (.minnctapersm,
setmaxnreg) and run ptxas -v on it. A bounded instance that spills means tile_math's register
split is wrong for it.

Usage: bench/scripts/ws_registers.py [--jobs 2] [--all]   (--all: print unbounded configs too)
Exit: 0, 1 when a bounded instance spills, 2 when nvcc or ptxas is missing or a compile fails.
"""
import argparse
import concurrent.futures
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
INSTANCE = ('#include "moe_gemm_wgmma_sm90a.cuh"\n'
            "template __global__ void moetune::moe_gemm_wgmma<{STAGE}, 2, {N}, {K}, 8, 128, 128, {BM}, {BN}, "
            "128, 8, {W}, {S}, {SK}, 0>(const void *, const float *, const void *, const float *, "
            "void *, const float *, const int *, const int *, const int *, long long, void *);\n")


def cdiv(a, b):
    return -(-a // b)


def warp_specialized_configs():
    shapes = ((0, 256, 3072), (0, 256, 7168), (1, 2048, 4096))  # (stage, N, K)
    for (STAGE, N, K), BM, BN, W, S, SK in itertools.product(shapes, (64, 128, 256), (64, 128, 256),
                                                             (4, 8), (2, 3, 4, 5), (1, 2, 4, 8)):
        k_red = K if STAGE == 0 else N
        wgs = W // 4
        if BM * BN // (32 * W) > 64:  # block fp8 accumulators (tile_math::gemm_wgmma_eligible)
            continue
        if not any(BM % (64 * wm) == 0 and BN % (wgs // wm) == 0 and BN // (wgs // wm) in (64, 128, 256)
                   for wm in (1, 2) if wgs % wm == 0):
            continue
        if cdiv(cdiv(k_red, 128), SK) < 8:  # fewer than 8 K-tiles a split: not warp-specialized
            continue
        if S * (BM + BN) * 128 > 227 * 1024:
            continue
        yield STAGE, N, K, BM, BN, W, S, SK


def compile_one(cfg, tmp):
    STAGE, N, K, BM, BN, W, S, SK = cfg
    name = "i_" + "_".join(map(str, cfg))
    cu, ptx = os.path.join(tmp, name + ".cu"), os.path.join(tmp, name + ".ptx")
    with open(cu, "w") as f:
        f.write(INSTANCE.format(STAGE=STAGE, N=N, K=K, BM=BM, BN=BN, W=W, S=S, SK=SK))
    r = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90a", "-ptx", "-I", os.path.join(ROOT, "kernels"),
                        cu, "-o", ptx], capture_output=True, text=True)
    if r.returncode != 0:
        return cfg, None, r.stderr[-400:]
    text = open(ptx).read()
    m = re.search(r"\.minnctapersm (\d+)", text)
    split = re.findall(r"setmaxnreg\.(dec|inc)\.sync\.aligned\.u32 (\d+)", text)
    r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", ptx, "-o", os.devnull], capture_output=True, text=True)
    regs = re.search(r"Used (\d+) registers", r.stderr)
    spill = re.search(r"(\d+) bytes spill stores", r.stderr)
    if r.returncode != 0 or not regs or not spill:
        return cfg, None, r.stderr[-400:]
    return cfg, (int(m.group(1)) if m else 0, dict((k, int(v)) for k, v in split), int(regs.group(1)),
                 int(spill.group(1))), ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--all", action="store_true")
    a = ap.parse_args()
    for tool in ("nvcc", "ptxas"):
        if shutil.which(tool) is None:
            print(f"ws_registers: error: {tool} not on PATH", file=sys.stderr)
            return 2
    bad = failed = 0
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for cfg, res, err in ex.map(lambda c: compile_one(c, tmp), list(warp_specialized_configs())):
            STAGE, N, K, BM, BN, W, S, SK = cfg
            label = f"{'up' if STAGE == 0 else 'down'} N={N} K={K} m{BM}n{BN}k128 w{W} s{S} sk{SK}"
            if res is None:
                failed += 1
                print(f"{label}: compile failed: {err}")
                continue
            minb, split, regs, spill = res
            if minb or a.all:
                flag = "  SPILLS" if minb and spill else ""
                bad += bool(minb and spill)
                print(f"{label}: min blocks {minb}, setmaxnreg {split or '-'}, {regs} registers, "
                      f"{spill} B spilled{flag}")
    return 2 if failed else (1 if bad else 0)


if __name__ == "__main__":
    sys.exit(main())
