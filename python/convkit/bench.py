"""Benchmark convkit against torch.nn.functional.conv1d: `python -m convkit.bench`.

Every case of the suite (bench_suite.json, a copy of the project's benchmark suite) is timed for
convkit and for torch in this process, on the same tensors, with CUDA events (median of repeated
runs, after warm-up), forward ("fwd") and forward+backward ("fwdbwd"). Each row reports both times,
the ratio (torch / convkit: > 1 means convkit is faster) and each one's percent of the floor:

  floor = max(bytes / 4.26 TB/s, FLOPs / rate)          (../shared/PERFORMANCE.md, H200)
  fwd:    bytes = x + w + y,            FLOPs = 2 * B * Cout * Lout * Cin/groups * K
  fwdbwd: bytes = x + y + dy + dx + 2w, FLOPs = 3 * the forward's
  rate:   790 TFLOP/s for bf16/fp16 (tensor cores), 395 TFLOP/s for fp32 with TF32 allowed (tensor
          cores at half the bf16 rate), 67 TFLOP/s for IEEE fp32 (FMA)

Dtypes: "float32" runs both libraries with torch's default flags (torch.backends.cudnn.allow_tf32 True:
TF32 allowed for convolutions, which convkit's dense fp32 kernel follows); "float32_ieee" sets the flag
to False for both (IEEE fp32 everywhere). Depthwise kernels are IEEE fp32 either way.

--activation silu|relu|gelu times convkit's fused epilogue (convkit.conv1d(..., activation=...), one
kernel) against torch's unfused act(F.conv1d(...)) on the same tensors; the floor is the same as
without it (the fused kernel moves the same bytes), rows' cases carry a "+act" suffix.
"""
import argparse
import json
import os
import statistics
import sys
from contextlib import contextmanager

import torch
import torch.nn.functional as F

import convkit
from convkit.functional import resolve_padding

COPY_BW = 4.26e12
# dtype name -> (torch dtype, TF32 allowed for fp32 convolutions, FLOP rate of the floor)
DTYPES = {"float32": (torch.float32, True, 395e12), "float32_ieee": (torch.float32, False, 67e12),
          "bfloat16": (torch.bfloat16, True, 790e12), "float16": (torch.float16, True, 790e12)}
SUITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_suite.json")
# convkit's own cases (strided / dilated depthwise): chosen by name or family, never in the default run
EXTRA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_extra.json")


def load_suite(path=SUITE):
    with open(path) as f:
        return json.load(f)


def select_cases(wanted, suite=None):
    """The cases named by `wanted` (case names or families, in that order), from the suite and the
    extra cases; all of the suite's (and none of the extras) when `wanted` is empty."""
    suite = suite or load_suite()
    if not wanted:
        return list(suite["cases"])
    pool = suite["cases"] + load_suite(EXTRA)["cases"]
    unknown = [t for t in wanted if not any(t in (c["name"], c["family"]) for c in pool)]
    if unknown:
        raise SystemExit(f"unknown case(s) or family(ies) {unknown}; see bench_suite.json and bench_extra.json")
    return [c for token in wanted for c in pool if token in (c["name"], c["family"])]


def floor_ms(case, dtype_name, lout, direction):
    dtype, _, rate = DTYPES[dtype_name]
    esize = torch.tensor([], dtype=dtype).element_size()
    B, Cin, Cout, K, L, g = (case[k] for k in ("B", "Cin", "Cout", "K", "L", "groups"))
    x, y, w = B * Cin * L * esize, B * Cout * lout * esize, Cout * (Cin // g) * K * esize
    flops = 2.0 * B * Cout * lout * (Cin // g) * K
    if direction == "fwd":
        nbytes = x + w + y
    else:
        nbytes, flops = 2 * x + 2 * y + 2 * w, 3 * flops
    return 1e3 * max(nbytes / COPY_BW, flops / rate)


def as_graph(fn):
    """fn captured in a CUDA graph (after warm-up on a side stream): replaying it costs the GPU time
    of fn's kernels without Python's and the dispatcher's per-call host time."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def time_ms(fn, target_ms=150.0, max_reps=100, graph=False):
    """Median of CUDA-event timings; the repeat count adapts so each config costs ~target_ms."""
    if graph:
        fn = as_graph(fn)
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    est = max(start.elapsed_time(end), 1e-3)
    reps = int(min(max_reps, max(3, target_ms / est)))
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        times.append((s, e))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in times)


@contextmanager
def tf32_allowed(on):
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = old


@contextmanager
def force_generic(on):
    old = os.environ.get("CONVKIT_FORCE_GENERIC")
    if on:
        os.environ["CONVKIT_FORCE_GENERIC"] = "1"
    else:
        os.environ.pop("CONVKIT_FORCE_GENERIC", None)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CONVKIT_FORCE_GENERIC", None)
        else:
            os.environ["CONVKIT_FORCE_GENERIC"] = old


# torch's unfused form of each fused activation (exact-erf GELU, as convkit's)
TORCH_ACT = {None: lambda t: t, "relu": F.relu, "silu": F.silu, "gelu": F.gelu}


def run_case(case, dtype_name, directions, compare_generic, graph=False, layout="bcl", activation=None):
    with tf32_allowed(DTYPES[dtype_name][1]):
        return _run_case(case, dtype_name, directions, compare_generic, graph, layout, activation)


def _run_case(case, dtype_name, directions, compare_generic, graph, layout, activation=None):
    dtype = DTYPES[dtype_name][0]
    B, Cin, Cout, K, L = (case[k] for k in ("B", "Cin", "Cout", "K", "L"))
    stride, dilation, groups, padding = case["stride"], case["dilation"], case["groups"], case["padding"]
    pl, pr = resolve_padding(padding, K, stride, dilation)
    if layout == "blc":  # (B, L, C) memory seen as (B, C, L), as channels-last models hold it
        x = torch.randn(B, L, Cin, device="cuda", dtype=dtype).transpose(1, 2)
    else:
        x = torch.randn(B, Cin, L, device="cuda", dtype=dtype)
    w = torch.randn(Cout, Cin // groups, K, device="cuda", dtype=dtype)
    b = torch.randn(Cout, device="cuda", dtype=dtype)
    kw = dict(stride=stride, dilation=dilation, groups=groups)

    act = TORCH_ACT[activation]

    def ck():
        return convkit.conv1d(x, w, b, padding=padding, activation=activation, **kw)

    def tc():  # torch has no 'causal': pad explicitly (the pad is part of what a torch user pays)
        return act(F.conv1d(F.pad(x, (pl, pr)) if pl != pr else x, w, b, padding=0 if pl != pr else pl, **kw))

    rows = []
    y = ck()
    lout = y.shape[2]
    names = convkit.explain(x, w, b, padding=padding, **kw)
    kernel = names["forward"]
    for direction in directions:
        if direction == "fwd":
            with torch.no_grad():
                fns = {"convkit": ck, "torch": tc}
                res = {name: time_ms(fn, graph=graph) for name, fn in fns.items()}
                if compare_generic and "<" in kernel:  # a specialised kernel: time the family's generic one too
                    with force_generic(True):
                        res["generic"] = time_ms(ck, graph=graph)
        else:
            for t in (x, w, b):
                t.requires_grad_(True)
            dy = torch.randn_like(y)  # y's layout: (B, L, C) for convkit's channels-last depthwise output

            def step(f):
                def run():
                    for t in (x, w, b):
                        t.grad = None
                    f().backward(dy)
                return run

            res = {"convkit": time_ms(step(ck), graph=graph), "torch": time_ms(step(tc), graph=graph)}
            for t in (x, w, b):
                t.requires_grad_(False)
                t.grad = None
        fl = floor_ms(case, dtype_name, lout, direction)
        suffix = ("" if layout == "bcl" else f"[{layout}]") + (f"+{activation}" if activation else "")
        row = {"case": case["name"] + suffix, "family": case["family"], "activation": activation,
               "dtype": dtype_name, "layout": layout,
               "direction": direction, "timing": "cuda_graph" if graph else "eager", "convkit_ms": res["convkit"], "torch_ms": res["torch"], "floor_ms": fl,
               "kernel": kernel if direction == "fwd" else f"{kernel} + {names['grad_input']}"
               + ("" if names["grad_input"] == names["grad_weight"] else f" + {names['grad_weight']}")}
        if "generic" in res:
            row["generic_ms"] = res["generic"]
        rows.append(row)
    del x, w, b, y
    torch.cuda.empty_cache()
    return rows


def header():
    return {"header": True, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "convkit": convkit.__version__,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32}


def fmt_row(r):
    ratio = r["torch_ms"] / r["convkit_ms"]
    s = (f"{r['case']:<20} {r['dtype']:<9} {r['direction']:<6} {r['convkit_ms']:>9.3f} {r['torch_ms']:>9.3f} "
         f"{ratio:>7.2f}x {100 * r['floor_ms'] / r['convkit_ms']:>6.1f}% {100 * r['floor_ms'] / r['torch_ms']:>6.1f}%")
    if "generic_ms" in r:
        s += f"  spec/generic {r['generic_ms'] / r['convkit_ms']:.2f}x faster"
    return s


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['case']}\n{r['dtype']} {r['direction']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(rows)), 5))
    xs = range(len(rows))
    ax.bar([i - 0.2 for i in xs], [100 * r["floor_ms"] / r["convkit_ms"] for r in rows], 0.4, label="convkit")
    ax.bar([i + 0.2 for i in xs], [100 * r["floor_ms"] / r["torch_ms"] for r in rows], 0.4, label="torch")
    ax.set_ylabel("% of floor (higher is better)")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=90, fontsize=6)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="",
                    help="comma-separated case names or families (default: every case of the suite); "
                         "'depthwise_sd' names the extra strided / dilated depthwise cases (bench_extra.json)")
    ap.add_argument("--dtypes", default="",
                    help="comma-separated: float32,float32_ieee,bfloat16,float16 (default: the suite's)")
    ap.add_argument("--directions", default="fwd,fwdbwd")
    ap.add_argument("--compare-generic", action="store_true",
                    help="where a specialised kernel runs, also time the family's generic kernel "
                         "(CONVKIT_FORCE_GENERIC=1) on the same tensors")
    ap.add_argument("--cuda-graph", action="store_true",
                    help="time both libraries by replaying CUDA graphs of each call: the GPU time without the "
                         "per-call host time (which dominates cases under ~0.2 ms in eager mode)")
    ap.add_argument("--layout", choices=["bcl", "blc"], default="bcl",
                    help="input memory: (B, C, L) contiguous, or (B, L, C) seen through transpose(1, 2)")
    ap.add_argument("--activation", choices=sorted(a for a in TORCH_ACT if a),
                    help="convkit's fused activation(conv + bias) against torch's unfused one")
    ap.add_argument("--streaming", action="store_true",
                    help="instead of the suite: causal_conv1d_update (B 1 / 64 / 256, C 4096, K 4, bf16) and a "
                         "chunked causal call against torch (convkit/bench_streaming.py)")
    ap.add_argument("--json", help="write the records (and a header record) to this file")
    ap.add_argument("--plot", help="draw percent-of-floor bars to this PNG")
    args = ap.parse_args(argv)
    if not (torch.cuda.is_available() and convkit.cuda_built()):
        print("convkit.bench needs a CUDA GPU and convkit's CUDA extension", file=sys.stderr)
        return 2
    suite = load_suite()
    # in the order asked for, so `--cases depthwise,dense` times the depthwise family first
    cases = select_cases([c for c in args.cases.split(",") if c], suite)
    dtypes = args.dtypes.split(",") if args.dtypes else suite["dtypes"]
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown:
        ap.error(f"unknown dtype(s) {unknown}; choose from {sorted(DTYPES)}")
    directions = args.directions.split(",")
    hdr = {**header(), "timing": "cuda_graph" if args.cuda_graph else "eager"}
    if args.streaming:
        hdr["timing"] = "per row (eager, or cuda_graph for the [graph] rows)"
    print(hdr)
    print(f"{'case':<20} {'dtype':<9} {'dir':<6} {'convkit':>9} {'torch':>9} {'speedup':>8} {'ck%flr':>7} "
          f"{'th%flr':>7}   (ms, median; speedup = torch/convkit)")
    rows = []

    def save():  # rewritten as rows come, so an interrupted run keeps what it measured
        if args.json:
            with open(args.json, "w") as f:
                json.dump([hdr] + rows, f, indent=1)

    if args.streaming:
        from .bench_streaming import run as run_streaming

        for r in run_streaming():
            print(fmt_row(r) + f"  ({r['timing']})", flush=True)
            rows.append(r)
        save()
        cases = []
    for case in cases:
        for dtype in dtypes:
            for r in run_case(case, dtype, directions, args.compare_generic, args.cuda_graph, args.layout,
                              args.activation):
                print(fmt_row(r), flush=True)
                rows.append(r)
            save()
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
