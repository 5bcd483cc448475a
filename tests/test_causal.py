"""convkit.causal_conv1d and convkit.causal_conv1d_update (issue 6).

The references here do not share code with the package: a causal call is F.conv1d in float64 over
[initial_state, x]; a packed call is one such call per run of equal seq_idx; a decode is the causal conv of
the whole sequence. Three groups:
  * CPU properties (run in CI): chunks with carried state equal one call, packed equals separate calls,
    token-by-token decode equals the full conv (linear and circular buffers, state_indices), gradients.
  * The host harness: the per-element functions the CUDA kernels run (csrc/kernels/causal_conv1d.cuh),
    compiled for the CPU by the system C++ compiler (tests/causal_host_harness.cpp), against the references.
  * CUDA (marked cuda): every K of the depthwise table, each dtype, both layouts, poisoned outputs,
    gradients against float64, deterministic grad-weight, CUDA-graph capture of the update.
"""
import ctypes
import os
import secrets
import shutil
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import convkit
from reference import REL_TOL, assert_close

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE_KS = [2, 3, 4, 5, 7, 9, 15, 31]
ACTS = {None: lambda z: z, "silu": F.silu, "relu": F.relu, "gelu": F.gelu}


def gen(device="cpu", seed=None):
    g = torch.Generator(device=device)
    g.manual_seed(secrets.randbits(62) if seed is None else seed)
    return g


def rand(shape, dtype=torch.float64, device="cpu", g=None, scale=1.0):
    return (torch.randn(*shape, device=device, generator=g) * scale).to(dtype)


def rand_seq(B, L, g, device="cpu", min_runs=2):
    """(B, L) int32 packed-sequence ids: increasing runs from a random start, including runs of length 1."""
    rows = []
    for _ in range(B):
        cuts = sorted(set(torch.randint(1, max(L, 2), (min_runs + 2,), generator=g).tolist()) - {0, L})
        if L > 3:
            cuts = sorted(set(cuts) | {L - 1})  # a last run of length 1
        ids = torch.zeros(L, dtype=torch.int32)
        for c in cuts:
            ids[c:] += 1
        rows.append(ids + int(torch.randint(0, 5, (1,), generator=g)))
    return torch.stack(rows).to(device)


def ref_causal(x, w2, b, dilation, state=None, activation=None):
    """float64 activation(F.conv1d([state or zeros, x]) + b), differentiable."""
    B, C, L = x.shape
    halo = (w2.shape[1] - 1) * dilation
    pre = state.double() if state is not None else torch.zeros(B, C, halo, dtype=torch.float64, device=x.device)
    y = F.conv1d(torch.cat([pre, x.double()], 2), w2.double()[:, None], None if b is None else b.double(),
                 dilation=dilation, groups=C)
    return ACTS[activation](y)


def runs_of(ids):
    ids = ids.tolist()
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[start]:
            yield start, i
            start = i


def ref_packed(x, w2, b, dilation, seq_idx, state=None, activation=None):
    """Each row cut into its runs of equal seq_idx and each run convolved alone; the first run reads the state."""
    rows = []
    for r in range(x.shape[0]):
        pieces = []
        for s, e in runs_of(seq_idx[r]):
            st = state[r:r + 1] if (state is not None and s == 0) else None
            pieces.append(ref_causal(x[r:r + 1, :, s:e], w2, b, dilation, st, activation))
        rows.append(torch.cat(pieces, 2))
    return torch.cat(rows, 0)


def reference(x, w2, b, dilation, state, seq_idx, activation, dy):
    """(y, dx, dw, db, dstate) in float64; None for a missing bias / state."""
    leaves = [None if t is None else t.detach().double().requires_grad_() for t in (x, w2, b, state)]
    xd, wd, bd, sd = leaves
    if seq_idx is None:
        y = ref_causal(xd, wd, bd, dilation, sd, activation)
    else:
        y = ref_packed(xd, wd, bd, dilation, seq_idx.cpu(), sd, activation)
    wanted = [t for t in leaves if t is not None]
    grads = iter(torch.autograd.grad(y, wanted, dy.double()))
    return (y.detach(),) + tuple(None if t is None else next(grads) for t in leaves)


def layout(t, kind):
    """t (B, C, L) as a contiguous tensor, a (B, L, C) tensor seen as (B, C, L), or a strided view."""
    if kind == "bcl":
        return t.contiguous()
    if kind == "blc":
        return t.transpose(1, 2).contiguous().transpose(1, 2)
    big = torch.zeros(t.shape[0], t.shape[1] + 1, 2 * t.shape[2] + 3, dtype=t.dtype, device=t.device)
    view = big[:, 1:, 3::2]
    view.copy_(t)
    return view


# ---- CPU properties ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("K,dilation", [(1, 1), (2, 1), (4, 1), (4, 2), (5, 3), (31, 1)])
def test_matches_causal_conv_on_cpu(K, dilation):
    g = gen()
    x, w, b = rand((2, 3, 40), g=g), rand((3, K), g=g), rand((3,), g=g)
    torch.testing.assert_close(convkit.causal_conv1d(x, w, b, dilation=dilation), ref_causal(x, w, b, dilation))
    # nn.Conv1d's depthwise weight shape is accepted too
    torch.testing.assert_close(convkit.causal_conv1d(x, w[:, None], b, dilation=dilation, activation="silu"),
                               ref_causal(x, w, b, dilation, activation="silu"))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
@pytest.mark.parametrize("packed", ["plain", "plain_direct", "packed"])
@pytest.mark.parametrize("K,dilation,chunks", [(4, 1, (5, 1, 9, 25)), (3, 2, (2, 2, 3, 33)), (31, 1, (10, 30))])
def test_chunks_with_carried_state_equal_one_call(K, dilation, chunks, packed, device, monkeypatch):
    """On CUDA in fp32: the plain chunks run the depthwise kernels ([state, x], no padding; plain_direct: the
    direct kernels, CONVKIT_CAUSAL_STATE=direct), the whole call conv1d's causal padding; the packed ones the
    seq_idx kernels."""
    monkeypatch.setenv("CONVKIT_CAUSAL_STATE", "direct" if packed == "plain_direct" else "copy")
    packed = packed == "packed"
    g = gen()
    B, C, L = 3, 4, sum(chunks)
    dt = torch.float64 if device == "cpu" else torch.float32
    x, w, b = (rand(s, g=g).to(device, dt) for s in ((B, C, L), (C, K), (C,)))
    seq = rand_seq(B, L, g).to(device) if packed else None
    whole = convkit.causal_conv1d(x, w, b, activation="silu", seq_idx=seq, dilation=dilation)
    outs, state, start = [], torch.zeros(B, C, (K - 1) * dilation, dtype=dt, device=device), 0
    for n in chunks:
        sl = slice(start, start + n)
        part_seq = None if seq is None else seq[:, sl].contiguous()
        if seq is not None and start > 0:
            # a row whose chunk starts a new sequence starts from zeros (the state is its first sequence's)
            state = torch.where((seq[:, start] != seq[:, start - 1])[:, None, None], 0.0, state)
        y, state = convkit.causal_conv1d(x[:, :, sl], w, b, activation="silu", initial_state=state,
                                         return_final_state=True, seq_idx=part_seq, dilation=dilation)
        outs.append(y)
        start += n
    torch.testing.assert_close(torch.cat(outs, 2), whole)


@pytest.mark.parametrize("with_state", [False, True])
def test_packed_sequences_equal_separate_calls_on_cpu(with_state):
    g = gen()
    B, C, L, K, d = 3, 5, 57, 4, 2
    x, w, b = rand((B, C, L), g=g), rand((C, K), g=g), rand((C,), g=g)
    seq = rand_seq(B, L, g, min_runs=4)
    state = rand((B, C, (K - 1) * d), g=g) if with_state else None
    y, fs = convkit.causal_conv1d(x, w, b, activation="gelu", initial_state=state, seq_idx=seq,
                                  return_final_state=True, dilation=d)
    torch.testing.assert_close(y, ref_packed(x, w, b, d, seq, state, "gelu"))
    # the final state continues the last run: equal to the last halo inputs of that run, zeros before it
    assert torch.equal(fs, ref_final_state(x, state, seq, (K - 1) * d))


def test_gradients_on_cpu_match_separate_calls():
    g = gen()
    B, C, L, K, d = 2, 3, 29, 3, 2
    x, w, b, st = rand((B, C, L), g=g), rand((C, K), g=g), rand((C,), g=g), rand((B, C, (K - 1) * d), g=g)
    seq = rand_seq(B, L, g)
    leaves = [t.clone().requires_grad_() for t in (x, w, b, st)]
    y = convkit.causal_conv1d(leaves[0], leaves[1], leaves[2], activation="silu", initial_state=leaves[3],
                              seq_idx=seq, dilation=d)
    dy = rand(y.shape, g=g)
    y.backward(dy)
    _, *grads = reference(x, w, b, d, st, seq, "silu", dy)
    for leaf, ref, name in zip(leaves, grads, ("x", "weight", "bias", "initial_state")):
        torch.testing.assert_close(leaf.grad, ref, msg=name)


def test_gradient_flows_through_the_final_state():
    """Chunked training: the loss on chunk 2 reaches chunk 1's x and the first initial_state through the carried
    state (torch ops outside the kernel), as in one call over both chunks."""
    g = gen()
    B, C, K = 2, 3, 4
    x, w, st = rand((B, C, 20), g=g), rand((C, K), g=g), rand((B, C, K - 1), g=g)
    dy = rand((B, C, 20), g=g)
    xa, wa, sa = (t.clone().requires_grad_() for t in (x, w, st))
    y1, s1 = convkit.causal_conv1d(xa[:, :, :7], wa, initial_state=sa, return_final_state=True)
    y2 = convkit.causal_conv1d(xa[:, :, 7:], wa, initial_state=s1, seq_idx=torch.zeros(B, 13, dtype=torch.int32))
    torch.cat([y1, y2], 2).backward(dy)
    _, gx, gw, _, gs = reference(x, w, None, 1, st, None, None, dy)
    torch.testing.assert_close(xa.grad, gx)
    torch.testing.assert_close(wa.grad, gw)
    torch.testing.assert_close(sa.grad, gs)


def decode_case(g, B, C, K, d, S, rows=None, device="cpu", dtype=torch.float64, state_layout="bcl"):
    rows = B if rows is None else rows
    w, b = rand((C, K), dtype, device, g), rand((C,), dtype, device, g)
    hist = rand((rows, C, S), dtype, device, g)
    state = layout(hist, state_layout) if state_layout != "bcl" else hist.clone()
    return w, b, hist, state


@pytest.mark.parametrize("circular", [False, True], ids=["linear", "circular"])
@pytest.mark.parametrize("step", [1, 3])
@pytest.mark.parametrize("K,dilation,extra", [(4, 1, 0), (2, 1, 3), (3, 2, 1), (1, 1, 2)])
def test_decode_token_by_token_equals_full_conv_on_cpu(K, dilation, extra, step, circular):
    check_decode("cpu", torch.float64, K, dilation, extra, step, circular, "bcl", indices=False)


def test_decode_with_state_indices_and_padding_rows_on_cpu():
    check_decode("cpu", torch.float64, 4, 1, 1, 2, True, "bcl", indices=True)


def check_decode(device, dtype, K, dilation, extra, step, circular, state_layout, indices, activation="silu",
                 w_dtype=None):
    """Decode T tokens `step` at a time; each step's output equals the causal conv of the whole sequence
    (history + tokens) at those positions, and the cache ends holding the sequence's last S inputs."""
    g = gen(device)
    B, C, T = 4, 6, 7
    halo = (K - 1) * dilation
    S = max(halo, 1) + extra
    rows = B + 2 if indices else B
    w, b, hist, state = decode_case(g, B, C, K, dilation, S, rows, device, dtype, state_layout)
    if w_dtype is not None:
        w, b = w.to(w_dtype), b.to(w_dtype)
    # batch row i uses cache row idx[i]; with indices two batch rows are padding rows (-1, and one past the end)
    idx = torch.randperm(rows, generator=gen())[:B].to(torch.int32) if indices else torch.arange(B, dtype=torch.int32)
    if indices:
        idx[-1], idx[1] = -1, rows + 3
    x = rand((B, C, T), dtype, device, g)
    logical = hist[idx.clamp(0, rows - 1).long()]  # each batch row's history, oldest first
    cs0 = torch.randint(0, 3 * S, (B,), generator=gen(), dtype=torch.int32)
    if circular:  # store each history circularly: logical[p] at (cs0 + p - S) mod S
        for i in range(B):
            r = int(idx[i])
            if not 0 <= r < rows:
                continue
            pos = (int(cs0[i]) + torch.arange(-S, 0)) % S
            state[r, :, pos.to(device)] = logical[i]
    before = state.clone()
    full = ref_causal(x, w, b, dilation, logical[:, :, S - halo:], activation)
    cs = cs0.clone().to(device)
    outs = []
    for t0 in range(0, T, step):
        xt = x[:, :, t0:t0 + step]
        if step == 1:
            xt = xt[:, :, 0]
        y = convkit.causal_conv1d_update(xt, state, w, b, activation=activation,
                                         cache_seqlens=cs if circular else None,
                                         state_indices=idx.to(device) if indices else None, dilation=dilation)
        outs.append(y.unsqueeze(2) if step == 1 else y)
        cs += xt.shape[2] if xt.dim() == 3 else 1
    y = torch.cat(outs, 2)
    live = ((idx >= 0) & (idx < rows)).to(device)
    assert_close(y[live], full[live], dtype, "update output")
    if indices:
        assert (y[~live] == 0).all(), "a padding row's output is zero"
    expect_tail = torch.cat([logical, x.to(logical.dtype)], 2)[:, :, -S:]
    touched = set()
    for i in range(B):
        r = int(idx[i])
        if not 0 <= r < rows:
            continue
        touched.add(r)
        if circular:
            pos = (int(cs[i]) + torch.arange(-S, 0)) % S
            got = state[r][:, pos.to(device)]
        else:
            got = state[r]
        torch.testing.assert_close(got, expect_tail[i], msg=f"cache row {r}")
    for r in range(rows):
        if r not in touched:
            assert torch.equal(state[r], before[r]), f"cache row {r} was not used but changed"


@pytest.mark.parametrize("call,words", [
    (lambda: convkit.causal_conv1d(torch.randn(2, 3, 9), torch.randn(4, 3)), "weight must have shape (3, K)"),
    (lambda: convkit.causal_conv1d(torch.randn(3, 9), torch.randn(3, 3)), "3-D tensor"),
    (lambda: convkit.causal_conv1d(torch.randn(2, 3, 0), torch.randn(3, 3)), "length >= 1"),
    (lambda: convkit.causal_conv1d(torch.randn(2, 3, 9), torch.randn(3, 3), initial_state=torch.randn(2, 3, 3)),
     "initial_state must have shape [2, 3, 2]"),
    (lambda: convkit.causal_conv1d(torch.randn(2, 3, 9), torch.randn(3, 3), seq_idx=torch.zeros(2, 9)),
     "seq_idx must be int32"),
    (lambda: convkit.causal_conv1d(torch.randn(2, 3, 9), torch.randn(3, 3),
                                   seq_idx=torch.zeros(2, 8, dtype=torch.int32)), "seq_idx must have shape"),
    (lambda: convkit.causal_conv1d(torch.randn(2, 3, 9), torch.randn(3, 3), dilation=0), "dilation"),
    (lambda: convkit.causal_conv1d(torch.randn(2, 3, 9), torch.randn(3, 3).double()), "should be the same"),
    (lambda: convkit.causal_conv1d_update(torch.randn(2, 3), torch.randn(2, 3, 1), torch.randn(3, 3)),
     "S >= 2"),
    (lambda: convkit.causal_conv1d_update(torch.randn(2, 3), torch.randn(4, 3, 3), torch.randn(3, 3)),
     "pass state_indices"),
    (lambda: convkit.causal_conv1d_update(torch.randn(2, 3), torch.randn(4, 3, 3), torch.randn(3, 3),
                                          state_indices=torch.tensor([0, 4])), "state_indices must be int32"),
    (lambda: convkit.causal_conv1d(torch.randn(2, 0, 9), torch.randn(0, 3)), "channels >= 1"),
    (lambda: convkit.causal_conv1d_update(torch.randn(2, 3), torch.randn(2, 3, 3).double(), torch.randn(3, 3)),
     "conv_state has dtype"),
])
def test_bad_arguments_raise_clear_errors(call, words):
    with pytest.raises(RuntimeError, match=None) as info:
        call()
    assert words in str(info.value), str(info.value)


def test_unknown_activation_is_a_value_error():
    with pytest.raises(ValueError):
        convkit.causal_conv1d(torch.randn(1, 2, 5), torch.randn(2, 3), activation="tanh")


def test_opcheck_causal_ops():
    g = gen()
    x, w, b = rand((2, 4, 13), torch.float32, g=g), rand((4, 3), torch.float32, g=g), rand((4,), torch.float32, g=g)
    st, seq = rand((2, 4, 4), torch.float32, g=g), rand_seq(2, 13, g)
    dy = rand((2, 4, 13), torch.float32, g=g)
    for act in (0, 2):
        torch.library.opcheck(torch.ops.convkit.causal_conv1d_forward.default, (x, w, b, st, seq, 2, act))
        torch.library.opcheck(torch.ops.convkit.causal_conv1d_backward.default,
                              (dy, x, w, b, st, seq, 2, act, True, True, True, True))
    torch.library.opcheck(torch.ops.convkit.causal_conv1d_backward.default,
                          (dy, x, w, None, None, seq, 2, 0, False, True, False, False))
    # (B, L, C) x: outputs in that layout, for the fake implementations too; no seq_idx (the direct state route)
    xl = layout(x, "blc")
    torch.library.opcheck(torch.ops.convkit.causal_conv1d_forward.default, (xl, w, b, st, None, 2, 3))
    torch.library.opcheck(torch.ops.convkit.causal_conv1d_backward.default,
                          (dy, xl, w, b, st, None, 2, 3, True, True, True, True))
    state = rand((3, 4, 5), torch.float32, g=g)
    torch.library.opcheck(torch.ops.convkit.causal_conv1d_update.default,
                          (rand((2, 4, 2), torch.float32, g=g), state, w, b, torch.tensor([3, 1], dtype=torch.int32),
                           torch.tensor([2, 0], dtype=torch.int32), 2, 2))


def test_compile_fullgraph_packed_call_on_cpu():
    torch._dynamo.reset()
    g = gen()
    x, w, b = rand((2, 4, 21), torch.float32, g=g), rand((4, 4), torch.float32, g=g), rand((4,), torch.float32, g=g)
    seq = rand_seq(2, 21, g)
    xa = x.clone().requires_grad_()
    f = torch.compile(lambda x: convkit.causal_conv1d(x, w, b, activation="silu", seq_idx=seq, return_final_state=True),
                      fullgraph=True, backend="aot_eager")
    y, fs = f(xa)
    (y.square().sum() + fs.sum()).backward()
    xb = x.clone().requires_grad_()
    y2, fs2 = convkit.causal_conv1d(xb, w, b, activation="silu", seq_idx=seq, return_final_state=True)
    (y2.square().sum() + fs2.sum()).backward()
    torch.testing.assert_close(y, y2)
    torch.testing.assert_close(xa.grad, xb.grad)


# ---- the kernels' element functions on the CPU ---------------------------------------------------------------

@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    src = os.path.join(ROOT, "tests", "causal_host_harness.cpp")
    if not os.path.isfile(os.path.join(ROOT, "csrc", "kernels", "causal_conv1d.cuh")):
        pytest.skip("tests run outside the source tree")
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    out = str(tmp_path_factory.mktemp("harness") / "causal_host_harness.so")
    res = subprocess.run([cxx, "-O1", "-std=c++17", "-shared", "-fPIC", "-I", os.path.join(ROOT, "csrc"), src, "-o",
                          out], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return ctypes.CDLL(out)


def _p(t):
    return None if t is None else ctypes.c_void_p(t.data_ptr())


def _strides(t):
    return None if t is None else (ctypes.c_int64 * len(t.stride()))(*t.stride())


def _i(*values):
    return [ctypes.c_int64(v) for v in values]


HARNESS_CASES = [(K, 1) for K in [1] + TABLE_KS] + [(3, 2), (4, 4), (7, 2), (2, 512)]


@pytest.mark.parametrize("with_state", [False, True], ids=["zeros", "state"])
@pytest.mark.parametrize("packed", [False, True], ids=["single", "packed"])
@pytest.mark.parametrize("K,dilation", HARNESS_CASES, ids=[f"K{k}_d{d}" for k, d in HARNESS_CASES])
def test_kernel_element_functions_on_cpu(harness, K, dilation, packed, with_state):
    g = gen()
    B, C = 2, 3
    L = 600 if dilation == 512 else 45
    halo = (K - 1) * dilation
    x = layout(rand((B, C, L), g=g), "strided")
    w = rand((C, 2 * K), g=g)[:, ::2]  # a tap stride of 2
    st = layout(rand((B, C, halo), g=g), "blc") if with_state else None
    seq = rand_seq(B, L, g) if packed else None
    seq_t = None if seq is None else seq.t().contiguous().t()  # strides (1, B)
    dy = rand((B, C, L), g=g)
    y_ref, dx_ref, dw_ref, _, ds_ref = reference(x, w, None, dilation, st, seq, None, dy)
    common = (*_i(B, C, L, K, dilation), _p(x), _strides(x), _p(st), _strides(st), _p(seq_t), _strides(seq_t), _p(w),
              _strides(w))
    for c_fastest in (0, 1):
        z = torch.full((B, C, L), float("nan"), dtype=torch.float64)
        visits = torch.zeros((B, C, L), dtype=torch.int32)
        harness.causal_forward(*common, *_i(c_fastest), _p(z), _p(visits))
        assert (visits == 1).all(), "every output visited once"
        torch.testing.assert_close(z, y_ref, msg="forward")
    # split lengths: one split, several with a partial last one, one position per split
    for c_fastest, split_len in ((0, B * L), (1, 17), (0, 1)):
        dx = torch.full((B, C, L), float("nan"), dtype=torch.float64)
        ds = torch.full((B, C, halo), float("nan"), dtype=torch.float64) if with_state else None
        dw = torch.full((C, K), float("nan"), dtype=torch.float64)
        db = torch.full((C,), float("nan"), dtype=torch.float64)
        harness.causal_backward(*common, _p(dy), *_i(c_fastest, split_len), _p(dx), _p(ds), _p(dw), _p(db))
        torch.testing.assert_close(dx, dx_ref, msg="grad_input")
        torch.testing.assert_close(dw, dw_ref, msg="grad_weight")
        torch.testing.assert_close(db, dy.sum((0, 2)), msg="grad_bias")
        if with_state:
            torch.testing.assert_close(ds, ds_ref, msg="grad_initial_state")


@pytest.mark.parametrize("circular", [False, True], ids=["linear", "circular"])
@pytest.mark.parametrize("T", [1, 2, 5, 9])
@pytest.mark.parametrize("K,dilation,extra", [(4, 1, 0), (4, 1, 2), (2, 3, 1), (1, 1, 1), (31, 1, 0)])
def test_kernel_update_function_on_cpu(harness, K, dilation, extra, T, circular):
    """update_row over T new tokens at once (T may exceed S): outputs and the cache against the full conv; a
    padding row (index -1) and an out-of-range one leave every cache row alone."""
    g = gen()
    B, C = 4, 4
    halo = (K - 1) * dilation
    S = max(halo, 1) + extra
    rows = B + 1
    w = rand((C, K), g=g)
    x = layout(rand((B, C, T), g=g), "blc")
    hist = rand((B, C, S), g=g)
    idx = torch.randperm(rows, generator=g)[:B].to(torch.int32)
    idx[1], idx[3] = -1, rows  # padding rows
    cs = torch.randint(-S, 3 * S, (B,), generator=g, dtype=torch.int32)
    state = layout(rand((rows, C, S), g=g), "blc")
    for i in (0, 2):
        r = int(idx[i])
        if circular:
            state[r][:, (int(cs[i]) + torch.arange(-S, 0)) % S] = hist[i]
        else:
            state[r] = hist[i]
    before = state.clone()
    z = torch.full((B, C, T), float("nan"), dtype=torch.float64)
    harness.causal_update(*_i(B, C, T, K, dilation), _p(x), _strides(x), _p(state), _strides(state), *_i(rows, S),
                          _p(w), _strides(w), _p(cs) if circular else None, _p(idx), _p(z))
    live = [0, 2]
    torch.testing.assert_close(z[live], ref_causal(x[live], w, None, dilation, hist[live][:, :, S - halo:]))
    assert torch.isnan(z[[1, 3]]).all(), "padding rows are skipped"
    tail = torch.cat([hist, x], 2)[:, :, -S:]
    for i in live:
        r = int(idx[i])
        got = state[r][:, (int(cs[i]) + T + torch.arange(-S, 0)) % S] if circular else state[r]
        torch.testing.assert_close(got, tail[i])
    for r in set(range(rows)) - {int(idx[i]) for i in live}:
        assert torch.equal(state[r], before[r]), f"cache row {r} changed"


def test_kernel_file_under_cpu_emulation(tmp_path):
    """csrc/kernels/causal_conv1d.cu itself (not only its element functions) compiled for the CPU under an
    emulated CUDA thread model (ci/emulate_causal: a std::thread per CUDA thread, block barriers, shuffles),
    a tenth of its cases against float64 torch: forward, backward (several grad-weight splits, both block
    shapes), update."""
    build = os.path.join(ROOT, "ci", "emulate_causal", "build.py")
    if not os.path.isfile(build):
        pytest.skip("tests run outside the source tree")
    if shutil.which("g++") is None:
        pytest.skip("no g++")
    res = subprocess.run([sys.executable, build, str(tmp_path / "emu")], capture_output=True, text=True)
    if res.returncode == 3:
        pytest.skip("no CUDA headers to compile the kernel file against")
    assert res.returncode == 0, res.stderr[-3000:]
    res = subprocess.run([sys.executable, os.path.join(ROOT, "ci", "emulate_causal", "run_emu.py"),
                          str(tmp_path / "emu" / "emu.so"), "0.1"], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0 and "fails: 0" in res.stdout, res.stdout[-3000:] + res.stderr[-3000:]


# ---- CUDA ----------------------------------------------------------------------------------------------------

CUDA_DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def cuda_case(B, C, L, K, dtype, dilation, layout_kind, with_state, packed, w_dtype=None):
    g = gen("cuda")
    x = layout(rand((B, C, L), dtype, "cuda", g), layout_kind)
    w = rand((C, K), w_dtype or dtype, "cuda", g, scale=K ** -0.5)
    b = rand((C,), w_dtype or dtype, "cuda", g)
    st = layout(rand((B, C, (K - 1) * dilation), dtype, "cuda", g), layout_kind) if with_state else None
    seq = rand_seq(B, L, gen(), "cuda", min_runs=3) if packed else None
    return x, w, b, st, seq


def ref_final_state(x, st, seq, halo):
    """The last halo inputs of [state or zeros, x] of each row's last sequence (zeros before it)."""
    B, C, _ = x.shape
    rows = []
    for r in range(B):
        s = 0 if seq is None else list(runs_of(seq[r].cpu()))[-1][0]
        parts = [torch.zeros(C, halo, dtype=x.dtype, device=x.device)]
        if s == 0 and st is not None:
            parts.append(st[r])
        parts.append(x[r, :, s:])
        rows.append(torch.cat(parts, 1)[:, -halo:] if halo else parts[0])
    return torch.stack(rows)


def check_cuda_call(x, w, b, st, seq, dilation, activation, dtype):
    # detach() keeps x's strides (clone() would make a strided view contiguous)
    leaves = [None if t is None else t.detach().requires_grad_() for t in (x, w, b, st)]
    y, fs = convkit.causal_conv1d(leaves[0], leaves[1], leaves[2], activation=activation, initial_state=leaves[3],
                                  seq_idx=seq, dilation=dilation, return_final_state=True)
    assert y.stride() == (leaves[0].stride() if x.stride(1) == 1 and x.shape[1] > 1 and x.stride(2) == x.shape[1]
                          else y.contiguous().stride()), "y takes x's layout"
    dy = torch.randn_like(y)
    y.backward(dy)
    y_ref, dx_ref, dw_ref, db_ref, ds_ref = reference(x, w, b, dilation, st, seq, activation, dy)
    assert_close(y, y_ref, dtype, "forward")
    assert_close(leaves[0].grad, dx_ref, dtype, "grad_input")
    assert_close(leaves[1].grad, dw_ref, dtype, "grad_weight")
    terms = dy.double().pow(2).sum(dim=(0, 2)).sqrt() if activation is not None else None
    assert_close(leaves[2].grad, db_ref, dtype, "grad_bias", terms=terms)
    if st is not None:
        assert_close(leaves[3].grad, ds_ref, dtype, "grad_initial_state")
    halo = (w.shape[1] - 1) * dilation
    assert torch.equal(fs, ref_final_state(x, st, seq, halo)), "final state (copied inputs: exact)"


@pytest.mark.cuda
@pytest.mark.parametrize("layout_kind", ["bcl", "blc", "strided"])
@pytest.mark.parametrize("dtype", CUDA_DTYPES, ids=str)
@pytest.mark.parametrize("K", TABLE_KS)
def test_cuda_packed_call_matches_float64(K, dtype, layout_kind, poison_outputs):
    """The seq_idx kernels, with an initial state, against separate float64 calls per sequence."""
    x, w, b, st, seq = cuda_case(2, 24, 157, K, dtype, 1, layout_kind, True, True)
    check_cuda_call(x, w, b, st, seq, 1, "silu", dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("route", ["depthwise_kernels", "state_prepended", "state_direct", "packed_no_state"])
@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("K,dilation", [(4, 1), (3, 2), (15, 1), (5, 4)])
def test_cuda_each_route_matches_float64(K, dilation, activation, route, poison_outputs, monkeypatch):
    monkeypatch.setenv("CONVKIT_CAUSAL_STATE", "direct" if route == "state_direct" else "copy")
    with_state, packed = route.startswith("state"), route == "packed_no_state"
    x, w, b, st, seq = cuda_case(3, 16, 211, K, torch.bfloat16, dilation, "bcl", with_state, packed)
    check_cuda_call(x, w, b, st, seq, dilation, activation, torch.bfloat16)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16], ids=str)
def test_cuda_fp32_weights_and_fp64(dtype):
    w_dtype = torch.float32 if dtype == torch.bfloat16 else None
    x, w, b, st, seq = cuda_case(2, 8, 99, 4, dtype, 2, "blc", True, True, w_dtype)
    check_cuda_call(x, w, b, st, seq, 2, "silu", dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("wanted", ["x", "weight", "bias", "state", "weight_bias"])
@pytest.mark.parametrize("K", [3, 20])
def test_cuda_packed_call_computes_only_the_gradients_asked_for(wanted, K, poison_outputs):
    """Each gradient alone (the backward's kernels run for what is needed: a bias alone, weights without bias)."""
    x, w, b, st, seq = cuda_case(2, 40, 123, K, torch.float32, 1, "blc", True, True)
    names = ("x", "weight", "bias", "state")
    leaves = [t.detach().requires_grad_(n in wanted.split("_")) for t, n in zip((x, w, b, st), names)]
    y = convkit.causal_conv1d(leaves[0], leaves[1], leaves[2], activation="gelu", initial_state=leaves[3],
                              seq_idx=seq)
    dy = torch.randn_like(y)
    y.backward(dy)
    refs = dict(zip(names, reference(x, w, b, 1, st, seq, "gelu", dy)[1:]))
    for leaf, n in zip(leaves, names):
        if n in wanted.split("_"):
            terms = dy.double().pow(2).sum(dim=(0, 2)).sqrt() if n == "bias" else None
            assert_close(leaf.grad, refs[n], torch.float32, f"grad {n}", terms=terms)
        else:
            assert leaf.grad is None


@pytest.mark.cuda
def test_cuda_chunked_equals_whole_and_grad_weight_is_deterministic():
    x, w, b, _, seq = cuda_case(4, 64, 1000, 4, torch.bfloat16, 1, "bcl", False, True)
    whole = convkit.causal_conv1d(x, w, b, activation="silu", seq_idx=seq)
    state, outs = torch.zeros(4, 64, 3, dtype=x.dtype, device="cuda"), []
    for s in range(0, 1000, 250):
        if s:
            state = torch.where((seq[:, s] != seq[:, s - 1])[:, None, None], torch.zeros_like(state), state)
        y, state = convkit.causal_conv1d(x[:, :, s:s + 250], w, b, activation="silu", initial_state=state,
                                         seq_idx=seq[:, s:s + 250].contiguous(), return_final_state=True)
        outs.append(y)
    assert torch.equal(torch.cat(outs, 2), whole), "same kernels, same sums: bit-identical"
    grads = []
    for _ in range(2):
        wr = w.detach().clone().requires_grad_()
        convkit.causal_conv1d(x, wr, b, seq_idx=seq).float().square().sum().backward()
        grads.append(wr.grad)
    assert torch.equal(grads[0], grads[1])


@pytest.mark.cuda
@pytest.mark.parametrize("state_layout", ["bcl", "blc"])
@pytest.mark.parametrize("circular", [False, True], ids=["linear", "circular"])
@pytest.mark.parametrize("dtype", CUDA_DTYPES + [torch.float64], ids=str)
@pytest.mark.parametrize("K,dilation,extra,step", [(4, 1, 0, 1), (2, 1, 2, 3), (31, 1, 1, 2), (3, 2, 0, 1)])
def test_cuda_decode_equals_full_conv(K, dilation, extra, step, dtype, circular, state_layout, poison_outputs):
    check_decode("cuda", dtype, K, dilation, extra, step, circular, state_layout, indices=False)


@pytest.mark.cuda
@pytest.mark.parametrize("circular", [False, True], ids=["linear", "circular"])
def test_cuda_decode_with_state_indices_and_padding_rows(circular, poison_outputs):
    check_decode("cuda", torch.bfloat16, 4, 1, 1, 1, circular, "blc", indices=True)


@pytest.mark.cuda
def test_cuda_update_in_a_cuda_graph():
    """Capture one decode step, replay it over a sequence: the same outputs and cache as eager calls."""
    g = gen("cuda")
    B, C, K, S = 8, 256, 4, 3
    w, b = rand((C, K), torch.bfloat16, "cuda", g), rand((C,), torch.bfloat16, "cuda", g)
    xs = rand((10, B, C), torch.bfloat16, "cuda", g)
    state0 = rand((B + 2, C, S), torch.bfloat16, "cuda", g)
    idx = torch.tensor([3, 1, 0, 9, 2, -1, 8, 12], dtype=torch.int32, device="cuda")  # two padding rows
    cs = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7], dtype=torch.int32, device="cuda")
    static_x, static_state, static_cs = xs[0].clone(), state0.clone(), cs.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the graph (allocations, first launch)
        convkit.causal_conv1d_update(static_x, static_state.clone(), w, b, "silu", static_cs, idx)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = convkit.causal_conv1d_update(static_x, static_state, w, b, "silu", static_cs, idx)
        static_cs.add_(1)
    eager_state, eager_cs = state0.clone(), cs.clone()
    for t in range(xs.shape[0]):
        static_x.copy_(xs[t])
        graph.replay()
        y = convkit.causal_conv1d_update(xs[t], eager_state, w, b, "silu", eager_cs, idx)
        eager_cs += 1
        assert torch.equal(static_y, y), f"step {t}"
    assert torch.equal(static_state, eager_state)


@pytest.mark.cuda
@pytest.mark.parametrize("activation,w_dtype,K", [(None, None, 1), ("relu", None, 4), ("gelu", torch.float32, 4),
                                                  ("silu", torch.float32, 9)])
def test_cuda_decode_activations_weight_dtypes(activation, w_dtype, K, poison_outputs):
    check_decode("cuda", torch.bfloat16, K, 1, 1, 1, True, "bcl", indices=True, activation=activation,
                 w_dtype=w_dtype)


@pytest.mark.cuda
@pytest.mark.large
@pytest.mark.parametrize("layout_kind", ["bcl", "blc"])
def test_cuda_packed_call_over_2_pow_31_elements(layout_kind, poison_outputs):
    """x, y and dx of 2.2e9 elements (every index past int32): the seq_idx kernels forward and backward, against
    float64 on a few whole channels (channels are independent), every element written (poisoned outputs)."""
    B, C, L, K = 2, 16_400, 65_600, 4
    g = gen("cuda")
    x = layout(torch.randn(B, C, L, device="cuda", generator=g, dtype=torch.bfloat16), layout_kind)
    w = rand((C, K), torch.bfloat16, "cuda", g, scale=0.5)
    st = rand((B, C, K - 1), torch.bfloat16, "cuda", g)
    seq = rand_seq(B, L, gen(), "cuda", min_runs=5)
    xr, wr, sr = x.detach().requires_grad_(), w.clone().requires_grad_(), st.clone().requires_grad_()
    y = convkit.causal_conv1d(xr, wr, None, initial_state=sr, seq_idx=seq)
    assert y.numel() > 2**31 and not torch.isnan(y).any()
    dy = torch.randn(y.shape, device="cuda", generator=g, dtype=torch.bfloat16)
    y.backward(dy)
    assert not torch.isnan(xr.grad).any()
    chans = [0, 1, C // 2, C - 1]
    ref = reference(x[:, chans], w[chans], None, 1, st[:, chans], seq, None, dy[:, chans])
    assert_close(y[:, chans], ref[0], torch.bfloat16, "forward")
    assert_close(xr.grad[:, chans], ref[1], torch.bfloat16, "grad_input")
    assert_close(wr.grad[chans], ref[2], torch.bfloat16, "grad_weight")
    assert_close(sr.grad[:, chans], ref[4], torch.bfloat16, "grad_initial_state")


@pytest.mark.cuda
def test_cuda_opcheck_causal_ops():
    g = gen("cuda")
    f32 = dict(dtype=torch.float32, device="cuda", g=g)
    x, w, b, st = rand((2, 4, 13), **f32), rand((4, 3), **f32), rand((4,), **f32), rand((2, 4, 4), **f32)
    seq = rand_seq(2, 13, gen(), "cuda")
    dy = rand((2, 4, 13), **f32)
    torch.library.opcheck(torch.ops.convkit.causal_conv1d_forward.default, (x, w, b, st, seq, 2, 2))
    torch.library.opcheck(torch.ops.convkit.causal_conv1d_backward.default,
                          (dy, x, w, b, st, seq, 2, 2, True, True, True, True))
    torch.library.opcheck(torch.ops.convkit.causal_conv1d_update.default,
                          (rand((2, 4, 2), **f32), rand((3, 4, 5), **f32), w, b,
                           torch.tensor([3, 1], dtype=torch.int32, device="cuda"),
                           torch.tensor([2, -1], dtype=torch.int32, device="cuda"), 2, 2))


@pytest.mark.cuda
def test_cuda_streaming_benchmark_runs_small():
    """python -m convkit.bench --streaming on small shapes: both sides agree (its own checks) and rows are whole."""
    from convkit import bench_streaming

    rows = bench_streaming.update_rows(batches=(2,)) + bench_streaming.chunk_rows(B=1, L=256)
    assert {r["case"] for r in rows} == {"update_B2", "update_B2[graph]", "chunk_state", "chunk_state_direct",
                                        "chunk_packed"}
    for r in rows:
        assert r["convkit_ms"] > 0 and r["torch_ms"] > 0 and r["floor_ms"] > 0, r
