"""How much of a small case's CUDA-graph time is the replay itself: each case's forward timed as
`python -m convkit.bench --cuda-graph` does (one call per graph replay, events around each replay), and
as a graph of N calls per replay (time / N) on the same tensors and rotating over input sets that
together exceed the L2 several times; for convkit, torch, and a plain copy of x into y (torch's copy
kernel: the practical ceiling at that size). Percent of the byte floor as in the benchmark.

    python ci/graph_calls.py --cases conformer_dw_k31,mamba_dw_k4_causal --dtypes bfloat16,float32
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

import convkit
from convkit.bench import DTYPES, floor_ms, select_cases, time_ms
from convkit.functional import resolve_padding


def graph_per_call_ms(calls, reps=20):
    """Median time of one replay of a graph holding `calls` (after warm-up), divided by their number."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in calls:
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for fn in calls:
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        times.append((s, e))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in times) / len(calls)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="conformer_dw_k31,mamba_dw_k4_causal")
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--calls", type=int, default=20, help="calls per graph")
    args = ap.parse_args()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    print(f"{'case':20s} {'dtype':9s} {'what':8s} {'1/replay':>9s} {'N same':>9s} {'N rotate':>9s}   "
          "(ms per call; % of the byte floor)")
    for case in select_cases(args.cases.split(",")):
        B, Cin, Cout, K, L, g = (case[k] for k in ("B", "Cin", "Cout", "K", "L", "groups"))
        S, D = case["stride"], case["dilation"]
        pl, pr = resolve_padding(case["padding"], K, S, D)
        for name in args.dtypes.split(","):
            dtype = DTYPES[name][0]
            xs = torch.randn(B, Cin, L, device="cuda", dtype=dtype)
            lout = (L + pl + pr - D * (K - 1) - 1) // S + 1
            per_call = xs.numel() * xs.element_size() * (1 + Cout * lout / (Cin * L))
            n_sets = max(1, min(args.calls, int(4 * l2 // per_call) + 1))
            sets = [(torch.randn_like(xs), torch.randn(Cout, Cin // g, K, device="cuda", dtype=dtype),
                     torch.randn(Cout, device="cuda", dtype=dtype)) for _ in range(n_sets)]
            outs = [torch.empty(B, Cout, lout, device="cuda", dtype=dtype) for _ in range(n_sets)]
            ys = [torch.empty(B, Cin, L, device="cuda", dtype=dtype) for _ in range(n_sets)]
            fl = floor_ms(case, name, lout, "fwd")
            kw = dict(stride=S, dilation=D, groups=g)

            def ck(i):
                x, w, b = sets[i]
                return lambda: convkit.conv1d(x, w, b, padding=case["padding"], **kw)

            def th(i):
                x, w, b = sets[i]
                if pl == pr:
                    return lambda: F.conv1d(x, w, b, padding=pl, **kw)
                return lambda: F.conv1d(F.pad(x, (pl, pr)), w, b, **kw)

            def cp(i):
                return lambda: ys[i].copy_(sets[i][0])

            for what, make in (("convkit", ck), ("torch", th), ("copy", cp)):
                one = time_ms(make(0), graph=True)
                same = graph_per_call_ms([make(0) for _ in range(args.calls)])
                rot = graph_per_call_ms([make(i % n_sets) for i in range(args.calls)])
                print(f"{case['name']:20s} {name:9s} {what:8s} " + " ".join(
                    f"{t:6.4f} {100 * fl / t:5.1f}%" for t in (one, same, rot)), flush=True)
            del sets, outs, ys
            torch.cuda.empty_cache()
    print(f"(rotating over up to N input sets, enough that they exceed 4x the {l2 >> 20} MB L2; floor: the "
          "benchmark's, x + w + y at 4.26 TB/s; torch pads explicitly only for asymmetric padding)")


if __name__ == "__main__":
    main()
