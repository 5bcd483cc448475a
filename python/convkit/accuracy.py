"""Accuracy of convkit against float64 torch on the benchmark suite's shapes: `python -m convkit.accuracy`.

For every case of the suite (bench_suite.json; --cases picks some) and dtype, the inputs are drawn once in that
dtype (x, bias and dy standard normal, w scaled by 1 / sqrt(Cin/groups * K)), convkit computes y = conv1d(x, w, b)
and its three gradients for dy, torch computes the same in the same dtype with the same flags, and both are compared
with float64 torch on the same (already rounded) inputs. Per tensor the maximum relative error is reported:

  max |result - reference| / max |reference|

(norm-wise errors go to the JSON). The batch is reduced to --batch (default 1) so that the float64 reference fits
beside the rest; the kernels are the same ones the full batch runs (a different number of slabs or grad-weight
splits at most). Dtypes as in convkit.bench: "float32" with TF32 allowed for convolutions (torch's default flag,
which convkit's dense fp32 kernels follow), "float32_ieee" with it off.
"""
import argparse
import json
import math

import torch
import torch.nn.functional as F

import convkit
from convkit.bench import DTYPES, header, select_cases, tf32_allowed
from convkit.functional import resolve_padding

TENSORS = ("y", "dx", "dw", "db")


def errors(result, reference):
    """(max-relative, norm-relative) error of result against the float64 reference."""
    diff = result.double() - reference
    peak = reference.abs().max().item()
    norm = reference.norm().item()
    return (diff.abs().max().item() / peak if peak > 0 else diff.abs().max().item(),
            diff.norm().item() / norm if norm > 0 else diff.norm().item())


def forward_backward(fn, x, w, b, dy):
    """fn(x, w, b) and its gradients for dy, on fresh leaves."""
    x, w, b = (t.detach().requires_grad_() for t in (x, w, b))
    y = fn(x, w, b)
    y.backward(dy.to(y.dtype))
    return y.detach(), x.grad, w.grad, b.grad


def run_case(case, dtype_name, batch, max_length, device, seed):
    dtype, tf32, _ = DTYPES[dtype_name]
    B, Cin, Cout, K, L = (case[k] for k in ("B", "Cin", "Cout", "K", "L"))
    B = min(B, batch)
    L = min(L, max_length) if max_length else L
    S, D, G, padding = case["stride"], case["dilation"], case["groups"], case["padding"]
    pl, pr = resolve_padding(padding, K, S, D)
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(B, Cin, L, device=device, generator=gen).to(dtype)
    w = (torch.randn(Cout, Cin // G, K, device=device, generator=gen) / math.sqrt(Cin // G * K)).to(dtype)
    b = torch.randn(Cout, device=device, generator=gen).to(dtype)

    def ck(x, w, b):
        return convkit.conv1d(x, w, b, stride=S, padding=padding, dilation=D, groups=G)

    def tc(x, w, b):  # torch has no 'causal': pad explicitly
        return F.conv1d(F.pad(x, (pl, pr)), w, b, stride=S, dilation=D, groups=G)

    with tf32_allowed(tf32):
        y = ck(x, w, b)
        dy = torch.randn(y.shape, device=device, generator=gen).to(dtype)
        mine = forward_backward(ck, x, w, b, dy)
        theirs = forward_backward(tc, x, w, b, dy)
    exact = forward_backward(tc, x.double(), w.double(), b.double(), dy.double())
    row = {"case": case["name"], "family": case["family"], "dtype": dtype_name, "batch": B, "length": L,
           "kernel": convkit.explain(x, w, b, stride=S, padding=padding, dilation=D, groups=G)["forward"]}
    for name, a, t, e in zip(TENSORS, mine, theirs, exact):
        row[f"convkit_{name}"], row[f"convkit_{name}_norm"] = errors(a, e)
        row[f"torch_{name}"], row[f"torch_{name}_norm"] = errors(t, e)
    del x, w, b, y, dy, mine, theirs, exact
    if device == "cuda":
        torch.cuda.empty_cache()
    return row


def fmt_row(r):
    cells = " ".join(f"{r[f'convkit_{t}']:>9.2e} {r[f'torch_{t}']:>9.2e}" for t in TENSORS)
    return f"{r['case']:<20} {r['dtype']:<12} {cells}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="", help="comma-separated case names or families (default: the suite)")
    ap.add_argument("--dtypes", default="bfloat16,float16,float32,float32_ieee")
    ap.add_argument("--batch", type=int, default=1, help="batch size used (at most the case's)")
    ap.add_argument("--max-length", type=int, default=0, help="cap on L (0: the case's)")
    ap.add_argument("--device", default="cuda", help="cuda; cpu only checks this script (convkit runs torch there)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the records (and a header record) to this file")
    args = ap.parse_args(argv)
    cases = select_cases([t for t in args.cases.split(",") if t])
    dtypes = [d for d in args.dtypes.split(",") if d]
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown:
        raise SystemExit(f"unknown dtype(s) {unknown}; choose from {sorted(DTYPES)}")
    rows = []
    if args.device == "cuda":
        print(header())
    print(f"{'case':<20} {'dtype':<12} " + " ".join(f"{t + ' convkit':>9} {t + ' torch':>9}" for t in TENSORS)
          + "   (max |err| / max |float64|)")
    for case in cases:
        for d in dtypes:
            r = run_case(case, d, args.batch, args.max_length, args.device, args.seed)
            rows.append(r)
            print(fmt_row(r), flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(([header()] if args.device == "cuda" else []) + rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
