"""Runs suite cases once each through convkit (forward, then forward + backward) for a profiler to
capture: `bash ci/gpu_check.sh profile` runs it under Nsight Compute (ncu).

    python ci/profile_cases.py --cases kb76_dense_s3d4,mamba_dw_k4_causal --dtypes bfloat16 [--layout blc]

With --kernel-times it profiles itself instead (torch.profiler, after a warm-up run) and prints every
GPU kernel of one forward + backward with its time: where a fwd+bwd's milliseconds go, including
torch's own copies and fills between convkit's kernels.
"""
import argparse

import torch

import convkit
from convkit.bench import DTYPES, select_cases, tf32_allowed


def kernel_times(step):
    """One run of step() under torch.profiler: its GPU kernels in launch order, with times (ms)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    total = 0.0
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            ms = (ev.time_range.end - ev.time_range.start) / 1e3  # a kernel event: its GPU interval (us)
            total += ms
            print(f"    {ms:9.3f} ms  {ev.name[:110]}")
    print(f"    {total:9.3f} ms  total of the kernels above", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", required=True, help="comma-separated case names or families of the suite")
    ap.add_argument("--dtypes", default="bfloat16")
    ap.add_argument("--layout", choices=["bcl", "blc"], default="bcl")
    ap.add_argument("--kernel-times", action="store_true", help="print per-kernel GPU times (torch.profiler)")
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
                if args.kernel_times:
                    kernel_times(lambda: convkit.conv1d(x, w, b, **kw).backward(torch.randn_like(y)))
            del x, w, b, y
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
