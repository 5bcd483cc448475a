"""Runs suite cases once each through convkit (forward, then forward + backward) for a profiler to
capture: `bash ci/gpu_check.sh profile` runs it under Nsight Compute (ncu).

    python ci/profile_cases.py --cases kb76_dense_s3d4,mamba_dw_k4_causal --dtypes bfloat16 [--layout blc]
"""
import argparse

import torch

import convkit
from convkit.bench import DTYPES, select_cases, tf32_allowed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", required=True, help="comma-separated case names or families of the suite")
    ap.add_argument("--dtypes", default="bfloat16")
    ap.add_argument("--layout", choices=["bcl", "blc"], default="bcl")
    args = ap.parse_args()
    cases = select_cases(args.cases.split(","))
    for case in cases:
        for name in args.dtypes.split(","):
            dtype, tf32, _ = DTYPES[name]
            B, Cin, Cout, K, L, g = (case[k] for k in ("B", "Cin", "Cout", "K", "L", "groups"))
            with tf32_allowed(tf32):
                if args.layout == "blc":
                    x = torch.randn(B, L, Cin, device="cuda", dtype=dtype).transpose(1, 2)
                else:
                    x = torch.randn(B, Cin, L, device="cuda", dtype=dtype)
                w = torch.randn(Cout, Cin // g, K, device="cuda", dtype=dtype, requires_grad=True)
                b = torch.randn(Cout, device="cuda", dtype=dtype, requires_grad=True)
                x.requires_grad_(True)
                kw = dict(stride=case["stride"], padding=case["padding"], dilation=case["dilation"], groups=g)
                print(case["name"], name, convkit.explain(x, w, b, **kw), flush=True)
                y = convkit.conv1d(x, w, b, **kw)
                y.backward(torch.randn_like(y))
                torch.cuda.synchronize()
            del x, w, b, y
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
