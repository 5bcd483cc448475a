"""Runs the emulated causal kernels (build.py) against float64 torch: forward, backward (dx, dw, db, the initial
state's grad; 1 and 4 "SMs", so one and several grad-weight splits) over dtypes (fp32 weights with 16-bit x
too), layouts, states, seq_idx, K / dilation and activations, a random quarter of the product; then the
update (linear / circular, state_indices with padding rows, T > S) against the package's CPU update, which
tests/test_causal.py checks against the full conv. Exit status 1 on any failure.

    PYTHONPATH=python python ci/emulate_causal/run_emu.py /tmp/convkit_emu/emu.so [FRACTION]

FRACTION (default 1) scales the share of cases run: tests/test_causal.py runs 0.1 of them in CI.
"""
import ctypes, itertools, os, random, sys
import torch, torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests"))
from test_causal import ref_packed, ref_causal, reference, rand_seq, layout, gen
from convkit import causal as ck
lib = ctypes.CDLL(sys.argv[1] if len(sys.argv)>1 else "./emu.so")
# the share of the case product to run (the same cases for the same fraction): 1 = the default quarter
FRACTION = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
DT = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3}
TOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.2e-2}
def P(t): return None if t is None else ctypes.c_void_p(t.data_ptr())
def S(t): return None if t is None else (ctypes.c_int64 * t.dim())(*t.stride())
I = ctypes.c_int64
def rel(a, b):
    a = a.double(); b = b.double()
    assert not torch.isnan(a).any(), "NaN"
    return ((a - b).norm() / max(b.norm().item(), 1e-30)).item()
ACT = {0: lambda z: z, 1: F.relu, 2: F.silu, 3: F.gelu}
fails = 0
SPL = []
def check(name, a, b, dt):
    global fails
    try:
        r = rel(a, b)
    except AssertionError as e:
        print("FAIL", name, e); fails += 1; return
    if r > TOL[dt]:
        print("FAIL", name, r); fails += 1
g = gen(seed=1)
cases = 0
for dt, wfp32, lay, with_state, packed, (K, d), (B, C, L), act, nsm in itertools.product(
        [torch.float32, torch.bfloat16, torch.float16, torch.float64], [False, True], ["bcl", "blc", "strided"],
        [False, True], [False, True], [(1, 1), (4, 1), (3, 2), (5, 3), (17, 1)], [(2, 3, 1100), (1, 5, 37)], [0, 2, 3], [1, 4]):
    if wfp32 and dt in (torch.float32, torch.float64): continue
    if random.Random(cases).random() > 0.25 * FRACTION: cases += 1; continue
    cases += 1
    wd = torch.float32 if wfp32 else dt
    halo = (K - 1) * d
    x = layout(torch.randn(B, C, L, generator=g).to(dt), lay)
    w = (torch.randn(C, 2 * K, generator=g) * K ** -0.5).to(wd)[:, ::2]
    b = torch.randn(C, generator=g).to(wd)
    st = layout(torch.randn(B, C, halo, generator=g).to(dt), lay) if with_state else None
    seq = rand_seq(B, L, g, min_runs=3) if packed else None
    if seq is not None: seq = seq.t().contiguous().t()
    # forward
    blc = C > 1 and x.stride(1) == 1 and x.stride(2) == C
    y = (torch.full((B, L, C), float("nan"), dtype=dt).transpose(1, 2) if blc else torch.full((B, C, L), float("nan"), dtype=dt))
    lib.emu_fwd(DT[dt], DT[wd], *[I(v) for v in (B, C, L, K, d)], P(x), S(x), P(w), S(w), P(b), P(st), S(st), P(seq), S(seq),
                P(y), S(y), act, nsm)
    z_ref = reference(x, w, b, d, st, seq, None, torch.zeros(B, C, L))[0]
    check(f"fwd {dt} w32={wfp32} {lay} st={with_state} seq={packed} K{K}d{d} {B,C,L} act{act} nsm{nsm}", y, ACT[act](z_ref), dt)
    # backward (g given)
    gg = layout(torch.randn(B, C, L, generator=g).to(dt), lay)
    _, dx_ref, dw_ref, db_ref, ds_ref = reference(x, w, b, d, st, seq, None, gg)
    dx = torch.full((B, C, L), float("nan"), dtype=dt); dx = dx if not blc else torch.full((B, L, C), float("nan"), dtype=dt).transpose(1, 2)
    ds = torch.full((B, C, halo), float("nan"), dtype=dt) if (with_state and halo > 0) else None
    dw = torch.full((C, K), float("nan"), dtype=wd); db = torch.full((C,), float("nan"), dtype=wd)
    splits = ctypes.c_int64(0)
    lib.emu_bwd(DT[dt], DT[wd], *[I(v) for v in (B, C, L, K, d)], P(x), S(x), P(w), S(w), P(b), P(st), S(st), P(seq), S(seq),
                P(gg), S(gg), P(dx), S(dx), P(ds), S(ds), P(dw), P(db), nsm, ctypes.byref(splits))
    SPL.append(splits.value)
    tag = f"{dt} w32={wfp32} {lay} st={with_state} seq={packed} K{K}d{d} {B,C,L} nsm{nsm} splits{splits.value}"
    check("dx " + tag, dx, dx_ref, dt); check("dw " + tag, dw, dw_ref, dt); check("db " + tag, db, db_ref, dt)
    if ds is not None: check("ds " + tag, ds, ds_ref, dt)
print("fwd/bwd cases run:", len(SPL), "splits seen", sorted(set(SPL)), "fails:", fails)
# update
ucases = 0
for dt, wfp32, circ, withidx, (K, d, extra), T, slay, act in itertools.product(
        [torch.float32, torch.bfloat16, torch.float64], [False, True], [False, True], [False, True],
        [(4, 1, 0), (4, 1, 3), (3, 2, 1), (1, 1, 1), (2, 1, 0)], [1, 3, 7], ["bcl", "blc"], [0, 2]):
    if wfp32 and dt != torch.bfloat16: continue
    if random.Random(1000 + ucases).random() > 0.3 * FRACTION: ucases += 1; continue
    ucases += 1
    wd = torch.float32 if wfp32 else dt
    B, C = 4, 5
    halo = (K - 1) * d; Sl = max(halo, 1) + extra
    rows = B + 2 if withidx else B
    x = layout(torch.randn(B, C, T, generator=g).to(dt), slay)
    w = torch.randn(C, K, generator=g).to(wd); b = torch.randn(C, generator=g).to(wd)
    state = layout(torch.randn(rows, C, Sl, generator=g).to(dt), slay)
    idx = None
    if withidx:
        idx = torch.randperm(rows, generator=g)[:B].to(torch.int32); idx[1] = -1; idx[2] = rows + 3
    cs = torch.randint(-Sl, 3 * Sl, (B,), generator=g, dtype=torch.int32) if circ else None
    st_ref = state.clone()
    y_ref = ck._cpu_update(x, st_ref, w, b, cs, idx, d, act)
    y = torch.full((B, C, T), float("nan"), dtype=dt)
    lib.emu_update(DT[dt], DT[wd], *[I(v) for v in (B, C, T, K, d)], P(x), S(x), P(w), S(w), P(b), P(state), S(state),
                   I(rows), I(Sl), P(cs), P(idx), P(y), S(y), act, 2)
    tag = f"upd {dt} w32={wfp32} circ={circ} idx={withidx} K{K}d{d}e{extra} T{T} {slay} act{act}"
    check(tag + " y", y, y_ref, dt)
    if not torch.equal(state, st_ref): print("FAIL state", tag, (state.double() - st_ref.double()).abs().max()); fails += 1
print("update done; fails:", fails)
sys.exit(1 if fails else 0)
