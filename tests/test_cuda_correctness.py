"""convkit's CUDA kernels against torch in float64: forward and every gradient, every dtype."""
import os
import re
import secrets
import threading
import pytest
import torch

import convkit
from convkit.functional import resolve_padding

from reference import REL_TOL, TF32_REL_TOL, assert_close, cuda_kernel_names, random_laid_out, reference

pytestmark = pytest.mark.cuda

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]

# (name, B, Cin, Cout, K, L, stride, padding, dilation, groups)
CASES = [
    ("basic", 2, 4, 6, 3, 37, 1, 1, 1, 1),
    ("lout_1", 2, 3, 5, 4, 4, 1, 0, 1, 1),
    ("stride_gt_k", 2, 4, 4, 2, 50, 5, 0, 1, 1),
    ("padding_gt_k", 1, 3, 2, 3, 17, 1, 7, 1, 1),
    ("dilation_512", 2, 2, 3, 2, 1100, 1, 0, 512, 1),
    ("dilated_strided_padded", 2, 5, 7, 3, 151, 3, 2, 4, 1),
    ("groups_2", 2, 4, 6, 3, 41, 2, 1, 1, 2),
    ("groups_3_cout_mult", 2, 6, 9, 5, 129, 1, 2, 2, 3),
    ("depthwise_k3", 3, 8, 8, 3, 129, 1, 1, 1, 8),
    ("depthwise_k4_causal", 2, 16, 16, 4, 372, 1, "causal", 1, 16),
    ("depthwise_k31_same", 2, 6, 6, 31, 151, 1, "same", 1, 6),
    ("depthwise_k5_stride2", 2, 5, 5, 5, 1134, 2, 2, 1, 5),
    ("depthwise_multiplier_2", 2, 4, 8, 3, 33, 1, 1, 1, 4),
    ("channels_1", 2, 1, 1, 3, 151, 1, 1, 1, 1),
    ("batch_0", 0, 3, 4, 3, 20, 1, 1, 1, 1),
    ("same_even_k", 2, 3, 4, 4, 29, 1, "same", 1, 1),
    ("valid", 2, 3, 4, 3, 29, 1, "valid", 1, 1),
    ("many_in_channels", 2, 96, 16, 3, 257, 1, 1, 1, 1),
    ("long_kernel", 1, 3, 2, 41, 300, 1, 20, 1, 1),
    ("length_1_padded", 2, 3, 4, 3, 1, 1, 1, 1, 1),
    ("k1_pointwise", 2, 8, 12, 1, 65, 1, 0, 1, 1),
]


def make_inputs(B, Cin, Cout, K, L, groups, dtype, bias=True, seed=None):
    # A fresh seed that leaves the global generator alone: torch.seed() would reseed the global CUDA
    # generator with the same value, and check_case's dy = randn_like(y) would then repeat x's numbers
    # (dy == x wherever the shapes line up, so grad-weight's middle tap summed x**2: fp16 overflow).
    g = torch.Generator(device="cuda")
    g.manual_seed(secrets.randbits(62) if seed is None else seed)
    x = torch.randn(B, Cin, L, device="cuda", generator=g).to(dtype)
    w = torch.randn(Cout, Cin // groups, K, device="cuda", generator=g).div_((Cin // groups * K) ** 0.5).to(dtype)
    b = torch.randn(Cout, device="cuda", generator=g).to(dtype) if bias else None
    return x, w, b


def check_case(x, w, b, stride, padding, dilation, groups, dtype, activation=None, tol=None):
    """Runs convkit forward + backward on (x, w, b) and compares all four results with float64 torch."""
    K = w.shape[2]
    pl, pr = resolve_padding(padding, K, stride, dilation)
    xr = x.detach().clone().requires_grad_()
    wr = w.detach().clone().requires_grad_()
    br = None if b is None else b.detach().clone().requires_grad_()
    y = convkit.conv1d(xr, wr, br, stride=stride, padding=padding, dilation=dilation, groups=groups,
                       activation=activation)
    dy = torch.randn_like(y)
    y.backward(dy)
    y_ref, dx_ref, dw_ref, db_ref = reference(x, w, b, dy, stride, pl, pr, dilation, groups, activation)
    assert_close(y, y_ref, dtype, "forward", tol)
    assert_close(xr.grad, dx_ref, dtype, "grad_input", tol)
    assert_close(wr.grad, dw_ref, dtype, "grad_weight", tol)
    if b is not None:
        # grad-bias sums dy * act'(z) over B and L. With an activation and a 16-bit dtype each term is
        # rounded to 16 bits before the sum (the unfused backward's dy * act'(z)), and one channel's 300
        # terms can cancel to a sum that this rounding misses by 1.4 % (red_1024 in bf16, Cout 1): there
        # the comparison scales by the terms' size, for which dy's per-channel sqrt of sum of squares
        # stands (act' is at most ~1.13, GELU). Without an activation the terms are dy itself, exact.
        # In fp32 the terms carry act'(z)'s own rounding (z recomputed in another order, erf / exp to a few
        # ulp): red_1024 in fp32 once summed to 0.0306 from terms of norm ~17 and missed by 1.3e-4 relative
        # (3.9e-6 absolute, ~2e-7 of the terms), so the same scaling applies to every dtype with an activation.
        terms = None
        if activation is not None:
            terms = dy.double().pow(2).sum(dim=(0, 2)).sqrt()
        assert_close(br.grad, db_ref, dtype, "grad_bias", tol, terms=terms)


def run_child_script(script, marker, **env):
    """Runs `script` in a fresh Python process with these environment variables set (None: unset; convkit
    reads its switches once per process) and the tests folder as argv[1]; it must exit 0 and print `marker`."""
    import subprocess
    import sys
    child_env = {k: v for k, v in dict(os.environ, **env).items() if v is not None}
    res = subprocess.run([sys.executable, "-c", script, os.path.dirname(os.path.abspath(__file__))],
                         env=child_env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert marker in res.stdout, res.stdout


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_forward_and_grads_match_float64_torch(case, dtype, kernel_path, poison_outputs):
    _, B, Cin, Cout, K, L, stride, padding, dilation, groups = case
    x, w, b = make_inputs(B, Cin, Cout, K, L, groups, dtype)
    check_case(x, w, b, stride, padding, dilation, groups, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_no_bias(dtype, poison_outputs):
    x, w, _ = make_inputs(2, 4, 6, 3, 40, 2, dtype)
    check_case(x, w, None, 1, 1, 1, 2, dtype)


@pytest.mark.parametrize("layout", ["transposed_BLC", "strided_L", "sliced_channels", "expanded_batch"])
@pytest.mark.parametrize("groups", [1, 8])
def test_non_contiguous_inputs(layout, groups, poison_outputs):
    B, C, L, K = 3, 8, 97, 3
    dtype = torch.float32
    if layout == "transposed_BLC":  # a (B, L, C) tensor seen as (B, C, L)
        x = torch.randn(B, L, C, device="cuda").transpose(1, 2)
    elif layout == "strided_L":
        x = torch.randn(B, C, 2 * L, device="cuda")[:, :, ::2]
    elif layout == "sliced_channels":
        x = torch.randn(B, 2 * C, L, device="cuda")[:, 1::2]
    else:
        x = torch.randn(1, C, L, device="cuda").expand(B, C, L)
    assert not x.is_contiguous()
    w = torch.randn(2 * C, C // groups, K, device="cuda").transpose(1, 2).contiguous().transpose(1, 2)[:C]
    b = torch.randn(2 * C, device="cuda")[::2]
    check_case(x, w, b, 1, 1, 1, groups, dtype)


def test_expanded_grad_output_from_sum(poison_outputs):
    # y.sum().backward() hands the op an expanded (stride-0) gradient
    x = torch.randn(2, 4, 50, device="cuda", dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, 4, 3, device="cuda", dtype=torch.float64, requires_grad=True)
    convkit.conv1d(x, w, padding=1).sum().backward()
    xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
    torch.nn.functional.conv1d(xr, wr, padding=1).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad)
    torch.testing.assert_close(w.grad, wr.grad)


def test_gradcheck_float64_on_real_kernels():
    x = torch.randn(2, 4, 13, device="cuda", dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, 2, 3, device="cuda", dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, device="cuda", dtype=torch.float64, requires_grad=True)
    f = lambda x, w, b: convkit.conv1d(x, w, b, stride=2, padding=2, dilation=2, groups=2)
    assert torch.autograd.gradcheck(f, (x, w, b))


# the table's depthwise entries (its "dense_narrow" entries: test_dense_narrow_table_entry)
DEPTHWISE_ENTRIES = [e for e in convkit.spec_entries() if e[0] == "depthwise"]


@pytest.mark.parametrize("entry", DEPTHWISE_ENTRIES or [None], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("padding", ["half", "causal"])
def test_every_specialised_entry_is_used_and_correct(entry, dtype, padding, poison_outputs):
    if entry is None:
        pytest.skip("no specialised entries in this build")
    family, K, S, D = entry
    assert family == "depthwise"
    C = 6
    # L spans several tiles and is odd, so the last tile is ragged
    x, w, b = make_inputs(3, C, C, K, 2 * 1024 * S + 517, C, dtype)
    pad = K // 2 if padding == "half" else "causal"
    names = convkit.explain(x, w, b, stride=S, padding=pad, dilation=D, groups=C)
    if dtype == torch.float64:  # the entries have no float64 kernels: the runtime-shape ones run
        assert names["forward"] == "conv1d_fwd_depthwise_generic"
        assert names["grad_input"] == names["grad_weight"] == "conv1d_bwd_depthwise_generic"
    else:
        assert names["forward"] == f"conv1d_fwd_depthwise<K={K},S={S},D={D}>"
        assert names["grad_input"] == names["grad_weight"] == f"conv1d_bwd_depthwise<K={K},S={S},D={D}>"
    check_case(x, w, b, S, pad, D, C, dtype)


@pytest.mark.parametrize("activation", ["relu", "silu", "gelu"])
@pytest.mark.parametrize("groups", [1, 8], ids=["dense", "depthwise"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_fused_activation_matches_unfused_torch(activation, groups, dtype, kernel_path, poison_outputs):
    x, w, b = make_inputs(2, 8, 8, 4, 2100, groups, dtype)
    check_case(x, w, b, 1, "causal", 1, groups, dtype, activation=activation)


def test_force_generic_env_switches_kernel(monkeypatch):
    x, w, b = make_inputs(1, 4, 4, 3, 10, 4, torch.float32)
    assert convkit.explain(x, w, b, padding=1, groups=4)["forward"] == "conv1d_fwd_depthwise<K=3,S=1,D=1>"
    monkeypatch.setenv("CONVKIT_FORCE_GENERIC", "1")
    assert convkit.explain(x, w, b, padding=1, groups=4) == {
        "forward": "conv1d_fwd_depthwise_generic", "grad_input": "conv1d_bwd_depthwise_generic",
        "grad_weight": "conv1d_bwd_depthwise_generic"}
    monkeypatch.setenv("CONVKIT_FORCE_GENERIC", "all")
    assert convkit.explain(x, w, b, padding=1, groups=4) == {
        "forward": "conv1d_fwd_generic", "grad_input": "conv1d_bwd_input_generic",
        "grad_weight": "conv1d_bwd_weight_generic"}


def test_grad_weight_is_deterministic():
    x, w, b = make_inputs(8, 16, 16, 5, 4099, 1, torch.float32)
    dy = torch.randn(8, 16, 4099, device="cuda")
    grads = []
    for _ in range(3):
        wr, br = w.clone().requires_grad_(), b.clone().requires_grad_()
        convkit.conv1d(x, wr, br, padding=2).backward(dy)
        grads.append((wr.grad, br.grad))
    for gw, gb in grads[1:]:
        assert torch.equal(gw, grads[0][0]) and torch.equal(gb, grads[0][1])


def check_requested_grads(x, w, b, padding, groups, dtype, needs):
    """Forward + backward (stride 1, dilation 1) with only the tensors named in `needs` ("input", "weight",
    "bias") requiring grad: the others get no gradient, the requested ones match float64 torch."""
    pl, pr = resolve_padding(padding, w.shape[2], 1, 1)
    xr = x.clone().requires_grad_("input" in needs)
    wr, br = w.clone().requires_grad_("weight" in needs), b.clone().requires_grad_("bias" in needs)
    y = convkit.conv1d(xr, wr, br, padding=padding, groups=groups)
    dy = torch.randn_like(y)
    y.backward(dy)
    _, dx_ref, dw_ref, db_ref = reference(x, w, b, dy, 1, pl, pr, 1, groups, None)
    for what, t, ref in (("grad_input", xr, dx_ref), ("grad_weight", wr, dw_ref), ("grad_bias", br, db_ref)):
        if t.requires_grad:
            assert_close(t.grad, ref, dtype, what)
        else:
            assert t.grad is None, what


# Grad-weight and grad-bias come out of one partial-sum launch (sum_weight_bias_partials_kernel); these ask
# for one of them alone, so the launch covers only the weight range or only the bias range.
@pytest.mark.parametrize("which", ["weight", "bias"])
@pytest.mark.parametrize("case", [(8, 8, 4, 8, "depthwise"), (8, 16, 3, 1, "dense")], ids=lambda c: c[-1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_weight_or_bias_gradient_alone(which, case, dtype, poison_outputs):
    Cin, Cout, K, groups, _ = case
    x, w, b = make_inputs(3, Cin, Cout, K, 2048 + 40, groups, dtype)
    check_requested_grads(x, w, b, 1, groups, dtype, {which})


def test_runs_on_current_stream_without_host_sync():
    x, w, b = make_inputs(4, 8, 8, 3, 1000, 1, torch.float32)
    x.requires_grad_()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.cuda.stream(s):
            y = convkit.conv1d(x, w, b, padding=1)
            y.backward(torch.ones_like(y))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.nn.functional.conv1d(x.detach(), w, b, padding=1), rtol=1e-4, atol=1e-4)


def test_unbatched_input():
    x, w, b = make_inputs(1, 4, 6, 3, 30, 1, torch.float32)
    y = convkit.conv1d(x[0], w, b, padding=1)
    assert y.shape == (6, 30)
    torch.testing.assert_close(y, torch.nn.functional.conv1d(x[0], w, b, padding=1), rtol=1e-4, atol=1e-4)


def test_module_trains_like_nn_conv1d_on_cuda():
    torch.manual_seed(0)
    ref = torch.nn.Conv1d(8, 16, 5, stride=2, padding=3, dilation=2, groups=2, padding_mode="reflect").cuda().double()
    mine = convkit.convert(torch.nn.Sequential(torch.nn.Conv1d(8, 16, 5, stride=2, padding=3, dilation=2, groups=2,
                                                               padding_mode="reflect"))).cuda().double()
    mine[0].load_state_dict(ref.state_dict())
    x = torch.randn(3, 8, 64, device="cuda", dtype=torch.float64)
    for m in (ref, mine):
        m.zero_grad()
        m(x).square().sum().backward()
    torch.testing.assert_close(mine[0].weight.grad, ref.weight.grad)
    torch.testing.assert_close(mine[0].bias.grad, ref.bias.grad)


def test_compile_fullgraph_on_cuda():
    m = convkit.Conv1d(4, 8, 3, padding="causal").cuda()
    x = torch.randn(2, 4, 33, device="cuda", requires_grad=True)
    f = torch.compile(m, fullgraph=True)
    y = f(x)
    y.sum().backward()
    torch.testing.assert_close(y, m(x), rtol=1e-5, atol=1e-5)


def test_opcheck_on_cuda():
    from test_api_cpu import run_opchecks

    run_opchecks("cuda")


def test_tensor_on_other_device_than_current():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    x, w, b = make_inputs(2, 4, 6, 3, 30, 1, torch.float32)
    x, w, b = x.to("cuda:1"), w.to("cuda:1"), b.to("cuda:1")
    with torch.cuda.device(0):
        y = convkit.conv1d(x, w, b, padding=1)
    assert y.device == x.device
    torch.testing.assert_close(y, torch.nn.functional.conv1d(x, w, b, padding=1), rtol=1e-4, atol=1e-4)


def test_cuda_errors_are_python_exceptions():
    x, w, b = make_inputs(2, 4, 6, 3, 30, 1, torch.float32)
    with pytest.raises(RuntimeError, match="same device|device"):
        convkit.conv1d(x, w.cpu())
    with pytest.raises(RuntimeError, match="not supported on CUDA"):
        convkit.conv1d(x.to(torch.int32), w.to(torch.int32))
    with pytest.raises(RuntimeError, match="should be the same"):
        convkit.conv1d(x, w.double())
    # length 0 (torch refuses it even where padding would give outputs), also on the dense TMA shapes
    for dt, cin in ((torch.float32, 4), (torch.bfloat16, 512)):
        x0 = torch.empty(2, cin, 0, device="cuda", dtype=dt)
        with pytest.raises(RuntimeError, match="Only zero batch or zero channel"):
            convkit.conv1d(x0, torch.randn(512, cin, 3, device="cuda", dtype=dt), padding=2)
        with pytest.raises(RuntimeError, match="Only zero batch or zero channel"):
            torch.nn.functional.conv1d(x0, torch.randn(512, cin, 3, device="cuda", dtype=dt), padding=2)


def depthwise_staged_smem(K, D):
    """(forward, backward) shared memory bytes of the runtime-shape staged depthwise kernels, fp32, stride 1, no
    padding (kernels/conv1d_depthwise.cuh: fwd_smem_bytes, bwd_smem_bytes: 128 threads x 16 outputs a tile, one pad
    word every 16, the backward's static block_sum scratch of one float per warp)."""
    tile, padded = 128 * 16, lambda n: n + n // 16 + 1
    wd = tile + (K - 1) * D + 2
    return padded(tile + (K - 1) * D) * 4, (padded(wd) + padded(wd + (K - 1) * D)) * 4 + 4 * 4


def test_threads_launching_one_kernel_with_different_shared_memory(poison_outputs):
    """Two host threads run the same kernels (the runtime-shape depthwise forward and backward, fp32) at once, with
    plans of different dynamic shared memory, all above 48 KB. cudaFuncAttributeMaxDynamicSharedMemorySize belongs to
    the kernel, not to a launch: while each launcher set it to its own launch's size, one thread could lower it
    between the other's setting and launch, and that launch failed (cudaErrorInvalidValue, a RuntimeError here). The
    launchers now set the opt-in maximum for every plan. (The race needs convkit._C's calls to run without the GIL.)"""
    dtype, B, C, K, iterations = torch.float32, 2, 8, 3, 200
    dilations = (5000, 5750)  # no specialisation: both run conv1d_fwd_dw_kernel<float, 0, 0, 0, 16> and its backward
    sizes = [depthwise_staged_smem(K, D) for D in dilations]
    assert sizes == [(51208, 144948), (57580, 164068)]  # all above 48 KB, the backward's within the A100's 163 KB
    jobs = []
    for i, D in enumerate(dilations):
        L = (K - 1) * D + 2 * 2048 + 100
        x, w, b = make_inputs(B, C, C, K, L, C, dtype, seed=i)
        names = convkit.explain(x, w, b, dilation=D, groups=C)
        assert names["forward"] == "conv1d_fwd_depthwise_generic", names
        dy = torch.randn(B, C, L - (K - 1) * D, device="cuda")
        jobs.append((x, w, b, dy, D, reference(x, w, b, dy, 1, 0, 0, D, C)))
    barrier = threading.Barrier(len(jobs))
    errors, worst = [], [None] * len(jobs)

    def run(i):
        try:
            x, w, b, dy, D, refs = jobs[i]
            errs = []
            barrier.wait()
            for _ in range(iterations):  # no host sync in the loop: the two threads' launches interleave
                y = convkit.conv1d(x, w, b, dilation=D, groups=C)
                gx, gw, gb = torch.ops.convkit.conv1d_backward(dy, x, w, b, 1, 0, 0, D, C, 0, True, True, True)
                # assert_close's two measures (norm-wise, worst element against 50 x the tolerance), on the device
                errs.append(torch.stack([torch.stack([(a.double() - e).norm() / e.norm(),
                                                      (a.double() - e).abs().max() / (50 * e.abs().max())])
                                         for a, e in zip((y, gx, gw, gb), refs)]))
            worst[i] = torch.stack(errs).amax(dim=0).tolist()  # (NaN, an element not written, propagates)
        except BaseException as e:  # re-raised below, in the test's thread
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    for D, per_output in zip(dilations, worst):
        for what, (norm_err, elem_err) in zip(("forward", "grad_input", "grad_weight", "grad_bias"), per_output):
            assert norm_err <= REL_TOL[dtype] and elem_err <= REL_TOL[dtype], (
                f"D {D} {what}: relative error {norm_err:.3e}, worst element {50 * elem_err:.3e} of the peak")


@pytest.mark.large
def test_input_over_2_pow_31_elements():
    # One row longer than 2^31: every index past the int32 range must be 64-bit.
    L = 2**31 + 1001
    dtype = torch.float16
    x = torch.randn(1, 1, L, device="cuda", dtype=dtype)
    w = torch.randn(1, 1, 3, device="cuda", dtype=dtype)
    b = torch.randn(1, device="cuda", dtype=dtype)
    xr = x.requires_grad_()
    wr = w.clone().requires_grad_()
    br = b.clone().requires_grad_()
    y = convkit.conv1d(xr, wr, br, padding=1)
    # scaled so that the sums over 2^31 terms (about sqrt(2^31) / 64) stay inside fp16's range
    dy = torch.randn_like(y) / 64
    y.backward(dy)
    assert y.shape == (1, 1, L)
    for start in (0, 2**31 - 700, L - 700):
        sl = slice(max(start - 1, 0), start + 701)
        ref = torch.nn.functional.conv1d(x.detach()[:, :, sl].double(), w.double(), b.double(), padding=1)
        off = start - sl.start
        got = y.detach()[:, :, start:start + 700].double()
        torch.testing.assert_close(got, ref[:, :, off:off + 700], rtol=4e-3, atol=4e-3)
        # grad_input at those positions: dx[i] = sum_k w[k] dy[i + 1 - k]
        dys = dy[:, :, sl].double()
        refx = torch.nn.functional.conv_transpose1d(dys, w.double(), padding=1)
        torch.testing.assert_close(xr.grad[:, :, start:start + 700].double(), refx[:, :, off:off + 700],
                                   rtol=4e-3, atol=4e-3)
    # grad_weight over all 2^31 terms, reference accumulated in float64 by chunks
    xd = torch.nn.functional.pad(x.detach(), (1, 1))
    ref_w = torch.zeros(3, dtype=torch.float64, device="cuda")
    scale = torch.zeros(3, dtype=torch.float64, device="cuda")
    chunk = 2**28
    for s in range(0, L, chunk):
        e = min(s + chunk, L)
        d = dy[0, 0, s:e].double()
        for k in range(3):
            t = d * xd[0, 0, s + k:e + k].double()
            ref_w[k] += t.sum()
            scale[k] += t.abs().sum()
    # fp16 rounding of the result, plus fp32 accumulation error; leaving out any 2^28-term chunk
    # would move a sum by about sqrt(2^28) / 64 = 256, far outside this bound
    err = (wr.grad[0, 0].double() - ref_w).abs()
    assert (err <= 2e-3 * ref_w.abs() + 1e-6 * scale).all(), (wr.grad, ref_w, scale)
    ref_b = sum(dy[0, 0, s:s + chunk].double().sum() for s in range(0, L, chunk))
    assert abs(br.grad.double().item() - ref_b.item()) <= 2e-3 * abs(ref_b.item()) + 1e-6 * dy.abs().double().sum().item()


@pytest.mark.parametrize("length", [1500, 2048], ids=["ragged_rows", "aligned_rows"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("groups", [1, 8], ids=["dense", "depthwise"])
def test_fp32_weights_with_16bit_input(dtype, groups, length, kernel_path, poison_outputs):
    x, _, _ = make_inputs(2, 8, 8, 4, length, groups, dtype)
    _, w, b = make_inputs(2, 8, 8, 4, length, groups, torch.float32)
    xr, wr, br = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
    y = convkit.conv1d(xr, wr, br, padding="causal", groups=groups, activation="silu")
    assert y.dtype == dtype
    dy = torch.randn_like(y)
    y.backward(dy)
    assert wr.grad.dtype == torch.float32 and br.grad.dtype == torch.float32 and xr.grad.dtype == dtype
    y_ref, dx_ref, dw_ref, db_ref = reference(x, w, b, dy, 1, 3, 0, 1, groups, "silu")
    assert_close(y, y_ref, dtype, "forward")
    assert_close(xr.grad, dx_ref, dtype, "grad_input")
    # dw, db are fp32 sums of 16-bit products: the input's tolerance applies
    assert_close(wr.grad, dw_ref, dtype, "grad_weight")
    assert_close(br.grad, db_ref, dtype, "grad_bias")


@pytest.mark.parametrize("entry", DEPTHWISE_ENTRIES or [None], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("padding", ["valid", "half", "causal"])
def test_every_specialised_entry_on_aligned_rows(entry, dtype, padding, poison_outputs):
    """Rows of a multiple of 16 bytes take the pipelined (cp.async) kernels; the test above, with
    its odd length, takes the staged ones."""
    if entry is None:
        pytest.skip("no specialised entries in this build")
    _, K, S, D = entry
    C = 4
    x, w, b = make_inputs(2, C, C, K, 2 * 2048 * S + 256, C, dtype)
    pad = {"valid": 0, "half": K // 2 * D, "causal": "causal"}[padding]
    check_case(x, w, b, S, pad, D, C, dtype)


# The streaming kernels (csrc/kernels/conv1d_depthwise_stream.cuh) run depthwise calls on rows of whole
# 16-byte vectors. Lengths: 640 (one partly filled block), 2048 (exactly one block of the base tile),
# 8192 + 64 (16-bit types take the doubled tile there: two full blocks, then one edge block). Paddings:
# each compiled mode (causal, "same" = (K-1)*D/2, anything else at run time). On sm_90 the lengths
# also take the doubled (8192 + 64, 16-bit) and, at stride 2, the halved (640) widths.
@pytest.mark.parametrize("length", [640, 2048, 8192 + 64])
@pytest.mark.parametrize("padding", ["causal", "same", 1, 0])
@pytest.mark.parametrize("ksd", [(4, 1, 1), (3, 1, 1), (4, 2, 1), (3, 2, 1), (3, 1, 2), (5, 2, 1), (7, 1, 1)],
                         ids=lambda e: "K%d_S%d_D%d" % e)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_depthwise_streaming_kernels(dtype, ksd, padding, length, poison_outputs):
    K, S, D = ksd
    if S > 1 and padding == "same":
        pytest.skip("torch allows padding='same' only at stride 1")
    if ("depthwise", K, S, D) not in (convkit.spec_entries() or []):
        pytest.skip("entry not in this build's table")
    C = 6
    x, w, b = make_inputs(2, C, C, K, length, C, dtype)
    names = convkit.explain(x, w, b, stride=S, padding=padding, dilation=D, groups=C)
    assert names["forward"] == f"conv1d_fwd_depthwise<K={K},S={S},D={D}>"
    check_case(x, w, b, S, padding, D, C, dtype)


def test_depthwise_streaming_width_follows_the_code_architecture(poison_outputs):
    """The doubled width for 16-bit rows of 4096+ outputs is built only in code for compute_90 and newer
    (kStreamWidthsMinArch): a device running such code takes it, any other takes the configured width
    (the others trap there), and the result is right either way."""
    import re
    from convkit._config import config

    if ("depthwise", 3, 1, 1) not in (convkit.spec_entries() or []):
        pytest.skip("entry not in this build's table")
    C, dtype = 4, torch.bfloat16
    x, w, b = make_inputs(2, C, C, 3, 8192 + 64, C, dtype)
    names = cuda_kernel_names(lambda: check_case(x, w, b, 1, 1, 1, C, dtype))
    widths = {int(m.group(1)) for n in names for m in [re.search(r"conv1d_fwd_dw_stream_kernel<[^,]+, 3, 1, 1, (\d+),", n)]
              if m}
    # the code this device runs: SASS of its major version not newer than it, else the newest PTX not newer
    major, minor = torch.cuda.get_device_capability()
    dev = 10 * major + minor
    num = lambda names: [int(a.split("_")[1].rstrip("a")) for a in names]  # 'sm_90a' -> 90
    sass = [a for a in num(config()["sass"]) if a // 10 == major and a <= dev]
    ptx = [a for a in num(config()["ptx"]) if a <= dev]
    runs_90 = max(sass or ptx or [0]) >= 90
    assert widths == ({32} if runs_90 else {16}), sorted(names)


# The Toeplitz backward (16-bit, K >= 15, stride 1, grad-input and grad-weight on tensor cores) runs on
# rows whose x and dy are whole 16-byte vectors: symmetric paddings with (K-1) - 2P a multiple of 8,
# and causal. Lengths: part of one tile (a tile is 2048 outputs), one tile, two tiles and a part.
@pytest.mark.parametrize("length", [640, 2048, 4096 + 64])
@pytest.mark.parametrize("kp", [(31, 15), (31, 3), (31, "causal"), (15, 7), (15, 3), (15, "causal")], ids=str)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_depthwise_toeplitz_backward(dtype, kp, length, poison_outputs):
    K, padding = kp
    if ("depthwise", K, 1, 1) not in (convkit.spec_entries() or []):
        pytest.skip("entry not in this build's table")
    C = 5
    x, w, b = make_inputs(2, C, C, K, length, C, dtype)
    names = cuda_kernel_names(lambda: check_case(x, w, b, 1, padding, 1, C, dtype))
    assert any("conv1d_bwd_dw_toeplitz_kernel" in n for n in names), sorted(names)


@pytest.mark.parametrize("length", [640, 2048 + 64])
def test_depthwise_toeplitz_ring_backward(length, poison_outputs):
    """With B * C >= 64 rows per SM the Toeplitz backward streams 512-position chunks per warp (its ring
    variant); rows of 2 or 5 chunks, and warps' runs of chunks that cut rows (two partial sums per row)."""
    if ("depthwise", 31, 1, 1) not in (convkit.spec_entries() or []):
        pytest.skip("entry not in this build's table")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    dtype, B = torch.bfloat16, 2
    C = 64 * sms // B + 3
    x, w, b = make_inputs(B, C, C, 31, length, C, dtype)
    names = cuda_kernel_names(lambda: check_case(x, w, b, 1, 15, 1, C, dtype))
    assert any("conv1d_bwd_dw_toeplitz_ring_kernel" in n for n in names), sorted(names)


# The 16-bit K >= 15 forward runs the Hankel kernel (forward variant 11: the window as the mma A operand, W in
# registers, 8-byte stores straight from the accumulators). The window offset e = -P mod 8 takes every value
# 0..7 (at K 31, e >= 3 needs a fourth W block); asymmetric paddings through the custom op reach y rows that
# are 2-byte aligned (odd length), symmetric ones rows 16-, 8- and 4-byte aligned (L 2048 with P 15 / 1 / 0).
# Lengths: part of a 1024-output chunk (V 32), whole chunks, chunks and a part; a channel multiplier;
# activations; no bias; and a case with ~10 chunks per warp (more than its 3 ring slots), so that each warp's
# ring slots are refilled and its run crosses rows and channels.
HANKEL_FWD_CASES = [  # B, C, multiplier, K, L, padding (int, 'causal' or (left, right)), activation, bias
    (2, 5, 1, 31, 640, 15, None, True), (2, 5, 1, 31, 2048, 15, "silu", True), (2, 3, 1, 31, 4096 + 64, 15, None, True),
    (2, 5, 1, 31, 2048, 1, None, True), (2, 5, 1, 31, 2048, 0, "gelu", True), (1, 4, 1, 31, 1000, 3, None, False),
    (2, 4, 1, 31, 1000, "causal", "relu", True), (2, 3, 2, 31, 1536, 15, None, True), (2, 3, 1, 31, 2048, 13, None, True),
    (2, 3, 1, 31, 2048, 12, None, True), (2, 3, 1, 31, 777 + 7, (15, 16), None, True),
    (2, 3, 1, 31, 1024, (4, 1), "silu", True), (4, 2048, 1, 31, 4096, 15, None, True),
    (2, 5, 1, 15, 2048, 7, None, True), (2, 5, 1, 15, 776, "causal", "silu", True), (2, 5, 1, 15, 4096, 2, None, False),
    (1, 3, 1, 15, 24, 7, None, True), (2, 3, 1, 15, 1000, (5, 2), None, True)]


@pytest.mark.parametrize("case", HANKEL_FWD_CASES, ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_depthwise_hankel_forward(dtype, case, poison_outputs):
    from convkit.ops import ACTIVATIONS
    B, C, m, K, L, P, act, with_bias = case
    if ("depthwise", K, 1, 1) not in (convkit.spec_entries() or []):
        pytest.skip("entry not in this build's table")
    x = torch.randn(B, C, L, device="cuda").to(dtype)
    w = (torch.randn(C * m, 1, K, device="cuda") / K ** 0.5).to(dtype)
    b = torch.randn(C * m, device="cuda").to(dtype) if with_bias else None
    pl, pr = P if isinstance(P, tuple) else resolve_padding(P, K, 1, 1)
    out = {}
    ran = cuda_kernel_names(lambda: out.setdefault(
        "y", torch.ops.convkit.conv1d_forward(x, w, b, 1, pl, pr, 1, C, ACTIVATIONS[act])))
    assert any("conv1d_fwd_dw_hankel_kernel" in n for n in ran), sorted(ran)
    y_ref = reference(x, w, b, torch.zeros_like(out["y"]), 1, pl, pr, 1, C, act)[0]
    assert_close(out["y"], y_ref, dtype, "forward")


# With at least 64 rows per SM the 16-bit K >= 15 backward is the ring Toeplitz kernel with its grad-input by
# the Hankel product on swizzled windows (backward variant 7). The fused backward needs 16-byte aligned dy
# rows: symmetric paddings with (K-1) - 2P a multiple of 8 and causal give dy window offsets -(KD - P) mod 8
# of 0, 1 and 5; asymmetric ones through the custom op give the others (7 at K 31: four W blocks). Rows of 2
# and 5 chunks, one with Lout > Lin, and one call that asks for grad-weight and grad-bias only.
HANKEL_BWD_CASES = [  # K, padding (int, 'causal' or (left, right)), L, grad-input asked for
    (31, 15, 640, True), (31, 3, 2048 + 64, True), (31, "causal", 640, True), (31, 7, 640, True),
    (31, 19, 640, True), (31, (0, 6), 640, True), (31, (1, 5), 640, True), (31, (2, 4), 640, True),
    (31, (4, 2), 640, True), (31, (5, 1), 2048 + 64, True), (31, 15, 640, False), (15, 7, 2048 + 64, True),
    (15, 3, 640, True), (15, "causal", 2048 + 64, True), (15, (0, 6), 640, True)]


@pytest.mark.parametrize("case", HANKEL_BWD_CASES, ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_depthwise_hankel_backward(dtype, case, poison_outputs):
    K, P, L, need_x = case
    if ("depthwise", K, 1, 1) not in (convkit.spec_entries() or []):
        pytest.skip("entry not in this build's table")
    B = 2
    C = 64 * torch.cuda.get_device_properties(0).multi_processor_count // B + 3
    x = torch.randn(B, C, L, device="cuda").to(dtype)
    w = (torch.randn(C, 1, K, device="cuda") / K ** 0.5).to(dtype)
    b = torch.randn(C, device="cuda").to(dtype)
    pl, pr = P if isinstance(P, tuple) else resolve_padding(P, K, 1, 1)
    dy = torch.randn(B, C, L + pl + pr - (K - 1), device="cuda").to(dtype)
    out = {}
    ran = cuda_kernel_names(lambda: out.setdefault(
        "grads", torch.ops.convkit.conv1d_backward(dy, x, w, b, 1, pl, pr, 1, C, 0, need_x, True, True)))
    assert any("conv1d_bwd_dw_toeplitz_ring_kernel" in n and "true>" in n for n in ran), sorted(ran)
    dx, dw, db = out["grads"]
    _, dx_ref, dw_ref, db_ref = reference(x, w, b, dy, 1, pl, pr, 1, C)
    if need_x:
        assert_close(dx, dx_ref, dtype, "grad_input")
    assert_close(dw, dw_ref, dtype, "grad_weight")
    assert_close(db, db_ref, dtype, "grad_bias")


@pytest.mark.parametrize("needs", ["input", "weight"])
def test_depthwise_toeplitz_backward_one_gradient(needs):
    """Only grad-input, or only grad-weight / grad-bias, requested of the Toeplitz backward."""
    if ("depthwise", 31, 1, 1) not in (convkit.spec_entries() or []):
        pytest.skip("entry not in this build's table")
    dtype, C, L = torch.bfloat16, 3, 2048 + 512
    x, w, b = make_inputs(2, C, C, 31, L, C, dtype)
    check_requested_grads(x, w, b, 15, C, dtype, {"input"} if needs == "input" else {"weight", "bias"})


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_depthwise_grad_weight_is_deterministic(dtype):
    """The depthwise backward's grad-weight / grad-bias: per-block partial sums added in a fixed order."""
    C = 64
    x, w, b = make_inputs(4, C, C, 4, 8192, C, dtype)
    dy = torch.randn(4, C, 8192, device="cuda").to(dtype)
    grads = []
    for _ in range(3):
        wr, br = w.clone().requires_grad_(), b.clone().requires_grad_()
        convkit.conv1d(x, wr, br, padding="causal", groups=C).backward(dy)
        grads.append((wr.grad, br.grad))
    for gw, gb in grads[1:]:
        assert torch.equal(gw, grads[0][0]) and torch.equal(gb, grads[0][1])


@pytest.mark.parametrize("padding", [1, "causal"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_depthwise_length_sliced_view(padding, dtype, poison_outputs):
    """Rows start 16-byte aligned but end mid-vector (x[..., :L'] of an aligned tensor): the
    pipelined kernels copy the valid prefix of the last 16-byte slot and zero-fill the rest."""
    C, K = 8, 4 if padding == "causal" else 3
    base, w, b = make_inputs(2, C, C, K, 4096, C, dtype)
    x = base[..., :4096 - 5]
    assert not x.is_contiguous() and x.stride(1) == 4096
    check_case(x, w, b, 1, padding, 1, C, dtype)


@pytest.mark.parametrize("activation", [None, "silu"])
@pytest.mark.parametrize("multiplier", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_depthwise_aligned_rows_with_multiplier_and_activation(activation, multiplier, dtype, poison_outputs):
    C = 8
    x, w, b = make_inputs(3, C, C * multiplier, 4, 4096 + 64, C, dtype)
    check_case(x, w, b, 1, "causal", 1, C, dtype, activation=activation)



DENSE_CASES = [c for c in CASES if c[9] != c[2]]  # everything that is not depthwise


# Shapes on the dense tensor-core kernels: (name, B, Cin, Cout, K, L, stride, padding, dilation, groups).
# Odd lengths (ragged last tiles and rows that are not 16-byte aligned), grad-input's transposed
# padding (K-1)*D - pad at both ends of its range (pad 0 and pad (K-1)*D), K = 8 (the largest K the
# kernel takes), groups, and strides: grad-input runs one forward convolution per phase i mod S
# (kb76's S3 D4: one tap per phase; S5 K2: phases without taps, zero; S2 D2: gcd(S, D) = 2).
# Cin/groups = 512 with K = 3: the weight panel does not fit in shared memory, so the forward (and the
# stride-1 grad-input, whose reduction is over Cout = 512) stage weights per step from a tap-major copy;
# Cin 256, K 3 (tcn-like): the panel fits only beside 16-channel stages, so 32-channel staged ones run
# (for the forward and, Cout being 256 too, the grad-input).
MMA_CASES = [
    ("k3_same_d2", 2, 32, 48, 3, 1001, 1, 2, 2, 1),
    ("k8_causal", 2, 16, 24, 8, 515, 1, "causal", 1, 1),
    ("k2_valid_d64", 3, 24, 16, 2, 777, 1, 0, 64, 1),
    ("groups_2", 2, 32, 64, 5, 333, 1, 2, 1, 2),
    ("cout_200", 1, 16, 200, 3, 259, 1, 1, 1, 1),
    ("stride_2", 2, 32, 32, 3, 1003, 2, 1, 1, 1),
    ("s3_d4_like_kb76", 2, 16, 32, 3, 1201, 3, 0, 4, 1),
    ("s5_k2_empty_phases", 2, 16, 16, 2, 203, 5, 0, 1, 1),
    ("s2_d2_padded", 2, 16, 24, 3, 301, 2, 3, 2, 2),
    ("staged_weights_k3_cin512", 1, 512, 512, 3, 257, 1, 1, 1, 1),
    ("staged_weights_s2_groups_2", 1, 1024, 128, 3, 301, 2, 1, 1, 2),
    ("tcn_like_wide_stages", 1, 256, 256, 3, 700, 1, 8, 8, 1),
    # rows 4-byte but not 16-byte aligned: the x ring's 4-byte copies (forward and grad-input), also at
    # the grad-input's stride phases (dy rows of 398); Cin 40 at stride 2 (16-channel stages, 4-byte
    # forward ring; odd dy rows: register-path grad-input); Cin 20 (a group of 8 channels partly past
    # Cin_g in the 4-byte copies); a grad-input phase whose dy pointer moves by an odd shift (the ring
    # must turn off for it while the other phase keeps it)
    ("ring4_even_len", 2, 32, 48, 3, 1002, 1, 1, 1, 1),
    ("ring4_s3_d4_phases", 2, 16, 32, 3, 1200, 3, 0, 4, 1),
    ("ring4_cin40_s2", 1, 40, 24, 4, 778, 2, 3, 1, 1),
    ("ring4_cin20_partial_group", 2, 20, 36, 3, 1002, 1, 1, 1, 1),
    ("ring_odd_shift_phase", 1, 40, 24, 4, 780, 2, 3, 1, 1),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", MMA_CASES, ids=[c[0] for c in MMA_CASES])
def test_dense_mma_forward_and_grad_input_match_float64_torch(case, dtype, poison_outputs):
    _, B, Cin, Cout, K, L, stride, padding, dilation, groups = case
    x, w, b = make_inputs(B, Cin, Cout, K, L, groups, dtype)
    names = convkit.explain(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    # (the wide-reduction cases run the wgmma kernel on an sm_90a build: test_dense_wgmma_* below; shapes with
    # much work per x element the TMA kernel after a channels-last copy: test_dense_tma_* below)
    if tma_copy_expected(Cin, Cout, K, stride, groups, dtype):
        assert names["forward"] == tma_bcl_forward(x), names
    else:
        assert names["forward"] in ("conv1d_fwd_dense_mma", "conv1d_fwd_dense_wgmma")
    gi = expected_tma_grad_input(B, Cin, Cout, K, L, stride, padding, dilation, groups, dtype)
    if gi is not None:
        assert names["grad_input"] == gi, names
    else:
        assert names["grad_input"] in ("conv1d_bwd_input_dense_mma", "conv1d_bwd_input_dense_wgmma")
    gw = expected_tma_grad_weight(Cin, Cout, K, L, stride, padding, dilation, groups)
    if gw is not None:
        assert names["grad_weight"] == gw, names
    else:
        assert names["grad_weight"] in ("conv1d_bwd_weight_dense_mma", "conv1d_bwd_weight_dense_wgmma")
    check_case(x, w, b, stride, padding, dilation, groups, dtype, activation="gelu")


# The MMA_CASES whose stride-1 grad-input the one-pass TMA kernel takes on an sm_90a build (32 <= Cin/groups <= 64,
# Cout/groups % 16 == 0: k3_same_d2, ring4_even_len) with CONVKIT_GI_FUSED_S1=0 (read once per process: a child
# process), so the mma.sync grad-input and its 4-byte x ring keep a test there: dx against float64, poisoned outputs.
MMA_GI_S1_SCRIPT = r"""
import sys, torch, convkit
from convkit.functional import resolve_padding
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
torch.manual_seed(0)
for dtype in (torch.bfloat16, torch.float16):
    for name, B, Cin, Cout, K, L, S, P, D, G in %r:
        x = torch.randn(B, Cin, L, device="cuda").to(dtype)
        w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(dtype)
        assert convkit.explain(x, w, None, stride=S, padding=P, dilation=D, groups=G)["grad_input"] == \
            "conv1d_bwd_input_dense_mma", name
        xr = x.clone().requires_grad_()
        y = convkit.conv1d(xr, w, None, stride=S, padding=P, dilation=D, groups=G)
        dy = torch.randn_like(y)
        (dx,) = torch.autograd.grad(y, xr, dy)
        pl, pr = resolve_padding(P, K, S, D)
        assert_close(dx, reference(x, w, None, dy, S, pl, pr, D, G)[1], dtype, f"grad_input {name} {dtype}")
print("mma.sync stride-1 grad-input cases passed")
"""


def test_dense_mma_grad_input_where_one_pass_is_default():
    if not runs_sm90a_code():
        pytest.skip("the one-pass grad-input (and so this switch) is for sm_90 devices with an sm_90a build")
    cases = [c for c in MMA_CASES if c[0] in ("k3_same_d2", "ring4_even_len")]
    assert all(fused_grad_input_expected(*c[2:5], *c[6:10], torch.bfloat16) for c in cases)
    run_child_script(MMA_GI_S1_SCRIPT % (cases,), "mma.sync stride-1 grad-input cases passed",
                     CONVKIT_GI_FUSED_S1="0", CONVKIT_POISON_OUTPUTS="1")


TAP_ROWS_GRAD_WEIGHT = "tap_rows + conv1d_bwd_weight_dense_tma"


def expected_tma_grad_weight(Cin, Cout, K, L, stride, padding, dilation, groups, blc=False):
    """The grad-weight's name where conv1d_bwd_weight_dense_tma takes a 16-bit call on an sm_90a build (its
    make_plan), else None: K <= 4, 32+ channels per group both ways; x and dy straight from their rows where the
    stride is 1, (B, C, L) x and dy rows are whole 16-byte units and the tap shifts come in 8s; else from copies in
    the workspace (x's tap rows, dy's rows padded) where Cout/groups >= 256 (CONVKIT_DENSE_TMA_WGRAD_TAPS=1: every
    such shape, see test_dense_tma_grad_weight_tap_rows). K 5..8: only from copies of x's tap rows, with
    Cout/groups <= 64 and a staged copy's span (2047 * stride + (K - 1) * dilation + 1) within 12288 elements."""
    if not runs_sm90a_code() or K > 8 or Cin // groups < 32 or Cout // groups < 32:
        return None
    pl, pr = resolve_padding(padding, K, stride, dilation)
    lout = (L + pl + pr - dilation * (K - 1) - 1) // stride + 1
    if lout < 1:
        return None
    x_direct = not blc and stride == 1 and L % 8 == 0 and pl % 8 == 0 and (K == 1 or dilation % 8 == 0)
    if K > 4:
        span = 2047 * stride + (K - 1) * dilation + 1
        return TAP_ROWS_GRAD_WEIGHT if not x_direct and Cout // groups <= 64 and span <= 12288 else None
    if x_direct and lout % 8 == 0:
        return "conv1d_bwd_weight_dense_tma"
    return TAP_ROWS_GRAD_WEIGHT if Cout // groups >= 256 else None


def runs_sm90a_code():
    """Whether this device runs the extension's sm_90a code (where the wgmma kernels exist)."""
    from convkit._config import config

    return torch.cuda.get_device_capability() == (9, 0) and "sm_90a" in config()["sass"]


TMA_COPY = "x_to_channels_last + conv1d_fwd_dense_tma"
TMA_TX = "conv1d_fwd_dense_tma_tx"


def tma_bcl_forward(x):
    """The TMA forward's name for a (B, C, L) x that tma_copy_expected sends to it (kernels/conv1d_fwd_dense_tma.cu,
    transpose_x): x read as it lies and transposed in shared memory where a 4-D tensor map can describe it
    (positions contiguous, channel and batch strides multiples of 8 elements, a 16-byte aligned start), else
    copied to channels-last memory first. (Not modelled: a tile shape that fits beside the raw slots; the copy
    otherwise.)"""
    tx = (x.stride(2) == 1 and x.stride(1) % 8 == 0 and x.stride(0) % 8 == 0 and x.data_ptr() % 16 == 0
          and x.stride(1) >= x.shape[2] and x.stride(0) >= x.shape[1] * x.stride(1) and x.stride(0) < 1 << 38)
    return TMA_TX if tx else TMA_COPY


def tma_copy_expected(Cin, Cout, K, stride, groups, dtype):
    """Whether a (B, C, L) x of this shape takes the TMA forward after a copy to channels-last memory (the
    launcher's rule: Cout/groups * K >= 384 * stride, besides the kernel's own conditions)."""
    return (runs_sm90a_code() and dtype in (torch.float16, torch.bfloat16) and (Cin // groups) % 16 == 0
            and Cout // groups > 64 and K <= 16 and stride <= 8 and (Cout // groups) * K >= 384 * stride)


TMA_GRAD_INPUT = "x_to_channels_last + conv1d_bwd_input_dense_tma"


def tma_grad_input_expected(B, Cin, Cout, K, L, stride, padding, dilation, groups, dtype):
    """Whether the grad-input takes the TMA forward on a channels-last copy of dy (dispatch.cpp,
    dense_grad_input_tma): every stride phase with taps would be copied by the forward's rule as a problem of its
    own (Cin' = Cout, Cout' = Cin, K' = the phase's taps, stride 1), and dy is at most 1 GiB. (Not modelled, as in
    tma_copy_expected: the kernel's shared-memory plan for K' >= 15, fp32 master weights, phase dilation > 65536.)"""
    pl, pr = resolve_padding(padding, K, stride, dilation)
    lout = (L + pl + pr - dilation * (K - 1) - 1) // stride + 1
    if B * Cout * lout * 2 > 1 << 30:
        return False
    any_taps = False
    for rho in range(min(stride, L)):
        taps = [k for k in range(K) if (rho + pl - k * dilation) % stride == 0]
        if not taps:
            continue
        first = (rho + pl - taps[-1] * dilation) // stride
        if lout - max(first, 0) < 1 or not tma_copy_expected(Cout, Cin, len(taps), 1, groups, dtype):
            return False
        any_taps = True
    return any_taps


TX_GRAD_INPUT = "conv1d_bwd_input_dense_tma_tx"


def tma_grad_input_name(B, Cin, Cout, K, L, stride, padding, dilation, groups, dtype):
    """Where tma_grad_input_expected holds, the name for a fresh (contiguous) dy: at stride 1 the forward reads dy
    as it lies (its transposing form, no copy) where dy's rows, and the window's start (dy advanced past a padding
    beyond the taps), are whole 16-byte units; else TMA_GRAD_INPUT (a channels-last copy of dy). None otherwise."""
    if not tma_grad_input_expected(B, Cin, Cout, K, L, stride, padding, dilation, groups, dtype):
        return None
    pl, pr = resolve_padding(padding, K, stride, dilation)
    lout = (L + pl + pr - dilation * (K - 1) - 1) // stride + 1
    if stride == 1 and lout % 8 == 0 and max(0, pl - (K - 1) * dilation) % 8 == 0:
        return TX_GRAD_INPUT
    return TMA_GRAD_INPUT


FUSED_GRAD_INPUT = "conv1d_bwd_input_dense_tma_fused"


def fused_grad_input_expected(Cin, Cout, K, stride, padding, dilation, groups, dtype, smem=232448):
    """Whether the grad-input runs in one pass on kernels/conv1d_bwd_input_dense_tma.cu (dispatch.cpp,
    dense_grad_input_fused, and the kernel's make_plan): 16-bit, stride 2..4 (stride 1 where Cin/groups <= 64),
    K <= 16, Cout/groups % 16 == 0, Cin/groups >= 32, on a device running sm_90a code, a dy window of at most 2048
    rows and two ring stages in `smem` bytes (the H100's / H200's opt-in shared memory per block). (Not modelled:
    fp32 master weights, dilation > 65536, lengths near 2^31, CONVKIT_GI_FUSED_S1.)"""
    if not (runs_sm90a_code() and dtype in (torch.float16, torch.bfloat16) and 1 <= stride <= 4 and K <= 16
            and (Cout // groups) % 16 == 0 and 32 <= Cin // groups and (stride > 1 or Cin // groups <= 64)):
        return False
    pl, _ = resolve_padding(padding, K, stride, dilation)
    offsets = [((k * dilation - pl) % stride + pl - k * dilation) // stride for k in range(K)]
    cin_g, cout_g = Cin // groups, Cout // groups
    xr = 64 if cout_g % 32 == 0 else 32
    nw = 128 if stride <= 2 else 64
    bm, bnj = (64, 2 * nw) if cin_g <= 64 else (128, nw)
    wq_min = bnj + max(offsets) - min(offsets)
    if wq_min > 2048:
        return False
    ra = 1024 // xr
    npieces = -(-wq_min // 256)
    wq = npieces * (-(-(-(-wq_min // npieces)) // ra) * ra)
    stage = -(-(K * (xr // 2) * bm * 2 + wq * xr) // 1024) * 1024
    return (smem - 1024 - 16 * 8 - 2 * 64 * 136 * 2) // stage >= 2


def expected_tma_grad_input(B, Cin, Cout, K, L, stride, padding, dilation, groups, dtype):
    """The grad-input's name where a TMA kernel runs it (fused, else the phases on the TMA forward), else None."""
    if fused_grad_input_expected(Cin, Cout, K, stride, padding, dilation, groups, dtype):
        return FUSED_GRAD_INPUT
    return tma_grad_input_name(B, Cin, Cout, K, L, stride, padding, dilation, groups, dtype)


# The dense forward on Hopper's wgmma (kernels/conv1d_fwd_dense_wgmma.cu): 16-bit, Cin/groups >= 128 (four
# 32-channel stages or more) and a multiple of 8, Cout/groups > 64, K <= 8, on a device running sm_90a code; the grad-input
# of such shapes runs on it too. Cases: w2v_k3s2-like (BM 256, odd rows: the realigning loads), tcn-like,
# wavenet-like (one window per tap), Cout/groups 200 in 2 groups (a partial 256-row tile), K 8 causal, stride 3
# with dilation 4, a (B, L, C) view of x (the strided loads), Cin/groups 136 (a partial last stage), and
# enough tiles that every block of the persistent grid runs several.
WGMMA_CASES = [
    ("w2v_like_s2", 2, 512, 512, 3, 1999, 2, 0, 1, 1),
    ("tcn_like_d8", 2, 256, 256, 3, 1000, 1, 8, 8, 1),
    ("wavenet_like_d512", 2, 128, 128, 2, 2100, 1, 0, 512, 1),
    ("cout_200_groups_2", 1, 512, 400, 3, 777, 1, 1, 1, 2),
    ("k8_causal", 2, 128, 72, 8, 515, 1, "causal", 1, 1),
    ("s3_d4", 2, 128, 96, 3, 1201, 3, 0, 4, 1),
    ("blc_view", 2, 128, 96, 3, 600, 1, 1, 1, 1),
    ("cin_136_partial_stage", 2, 136, 72, 3, 700, 1, 1, 1, 1),
    # 632 tiles: each block of the persistent grid runs several (rb table, C tile and accumulators reused)
    ("many_tiles_per_block", 8, 128, 128, 3, 20001, 1, 1, 1, 1),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", WGMMA_CASES, ids=[c[0] for c in WGMMA_CASES])
def test_dense_wgmma_forward_and_grads_match_float64_torch(case, dtype, poison_outputs):
    name, B, Cin, Cout, K, L, stride, padding, dilation, groups = case
    if not runs_sm90a_code():
        pytest.skip("the wgmma kernels run on sm_90 devices with an sm_90a build")
    x, w, b = make_inputs(B, Cin, Cout, K, L, groups, dtype)
    if "view" in name:
        x = torch.randn(B, L, Cin, device="cuda").to(dtype).transpose(1, 2)
    names = convkit.explain(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    # (a channels-last x takes the TMA-fed forward, and so does a (B, C, L) one with much work per x element after
    # a copy: test_dense_tma_* below; the wgmma kernel still runs those shapes' grad-input)
    if "view" in name:
        assert names["forward"] == "conv1d_fwd_dense_tma", names
    elif tma_copy_expected(Cin, Cout, K, stride, groups, dtype):
        assert names["forward"] == tma_bcl_forward(x), names
    else:
        assert names["forward"] == "conv1d_fwd_dense_wgmma", names
    gi = expected_tma_grad_input(B, Cin, Cout, K, L, stride, padding, dilation, groups, dtype)
    if gi is not None:
        assert names["grad_input"] == gi, names
    else:
        assert names["grad_input"] in ("conv1d_bwd_input_dense_wgmma", "conv1d_bwd_input_dense_mma"), names
    # grad-weight by TMA (kernels/conv1d_bwd_weight_dense_tma.cu) where x and dy rows allow it (tcn_like_d8) or
    # after copies (w2v_like_s2), else on wgmma (kernels/conv1d_bwd_weight_dense_wgmma.cu): Cin/groups >= 32 and
    # % 8, Cout/groups >= 64, K = 3 (not wavenet_like_d512, k8_causal)
    gw = expected_tma_grad_weight(Cin, Cout, K, L, stride, padding, dilation, groups, blc="view" in name)
    if gw is not None:
        assert names["grad_weight"] == gw, names
    else:
        assert names["grad_weight"] == ("conv1d_bwd_weight_dense_wgmma" if K == 3 else "conv1d_bwd_weight_dense_mma")
    if name in ("w2v_like_s2", "s3_d4"):  # the profiler costs seconds per use: two cases show the kernels the names
        # stand for: the forward alone (the grad-input runs the wgmma forward kernel too), then forward + gradients
        fwd = "conv1d_fwd_dense_tma_kernel" if "tma" in names["forward"] else "conv1d_fwd_dense_wgmma_kernel"
        ran = cuda_kernel_names(lambda: convkit.conv1d(x, w, b, stride=stride, padding=padding, dilation=dilation,
                                                       groups=groups))
        assert any(fwd in n for n in ran), sorted(ran)
        assert not any("dense_wgmma" in n for n in ran) if "tma" in names["forward"] else True, sorted(ran)
        ran = cuda_kernel_names(lambda: check_case(x, w, b, stride, padding, dilation, groups, dtype, activation="gelu"))
        gi = ("conv1d_bwd_input_dense_tma_kernel" if names["grad_input"] == FUSED_GRAD_INPUT
              else "conv1d_fwd_dense_tma_kernel" if "tma" in names["grad_input"] else "conv1d_fwd_dense_wgmma_kernel")
        assert any(gi in n for n in ran), sorted(ran)  # the grad-input
        gw_kernel = "conv1d_bwd_weight_dense_tma_kernel" if gw is not None else "conv1d_bwd_weight_dense_wgmma_kernel"
        assert any(gw_kernel in n for n in ran), sorted(ran)
        if gw == TAP_ROWS_GRAD_WEIGHT:  # w2v_like_s2: x's tap rows copied through shared memory (a short span)
            assert any("tap_rows_staged_kernel" in n for n in ran), sorted(ran)
    else:
        check_case(x, w, b, stride, padding, dilation, groups, dtype, activation="gelu")


@pytest.mark.parametrize("shape", [(4, 64, 128, 3, 20001, 3, 4), (2, 512, 192, 3, 9999, 2, 1),
                                   (2, 512, 512, 3, 9999, 2, 1)], ids=["kb76_like", "w2v_like", "w2v_like_tap_rows"])
def test_dense_wgmma_grad_weight_deterministic(shape):
    """The wgmma grad-weight's split sums are added in a fixed order: the same bits on every run (and grad-bias
    with them), for a single-tile shape split over every SM and a many-tile one; Cout 512 runs the TMA
    grad-weight on tap rows, the same promise."""
    if not runs_sm90a_code():
        pytest.skip("the wgmma kernels run on sm_90 devices with an sm_90a build")
    B, Cin, Cout, K, L, S, D = shape
    x, w, b = make_inputs(B, Cin, Cout, K, L, 1, torch.bfloat16)
    assert convkit.explain(x, w, b, stride=S, dilation=D)["grad_weight"] == (
        TAP_ROWS_GRAD_WEIGHT if Cout >= 256 else "conv1d_bwd_weight_dense_wgmma")
    w.requires_grad_()
    b.requires_grad_()
    y = convkit.conv1d(x, w, b, stride=S, dilation=D)
    dy = torch.randn_like(y)
    grads = [torch.autograd.grad(y, (w, b), dy, retain_graph=True) for _ in range(3)]
    for dw, db in grads[1:]:
        assert torch.equal(dw, grads[0][0]) and torch.equal(db, grads[0][1])


def test_dense_wgmma_not_for_short_reductions_or_fp32_weights():
    """Cin/groups 64 (two stages: the mma.sync kernel is faster there), Cout/groups 64 (half a 128-row
    tile) and fp32 master weights keep the mma.sync kernel."""
    if not runs_sm90a_code():
        pytest.skip("the wgmma kernels run on sm_90 devices with an sm_90a build")
    # (K 2: at K 3 the TMA forward takes these (B, C, L) shapes after a copy, Cout * K >= 384)
    x, w, b = make_inputs(2, 64, 128, 2, 500, 1, torch.bfloat16)
    assert convkit.explain(x, w, b)["forward"] == "conv1d_fwd_dense_mma"
    x, w, b = make_inputs(2, 256, 128, 2, 500, 1, torch.bfloat16)
    assert convkit.explain(x, w, b)["forward"] == "conv1d_fwd_dense_wgmma"
    assert convkit.explain(x, w.float(), b.float())["forward"] == "conv1d_fwd_dense_mma"
    x, w, b = make_inputs(2, 256, 64, 3, 500, 1, torch.bfloat16)
    assert convkit.explain(x, w, b)["forward"] == "conv1d_fwd_dense_mma"


# The TMA-fed wgmma forward (kernels/conv1d_fwd_dense_tma.cu) for x in channels-last memory (a (B, L, C) tensor
# seen through .transpose(1, 2)): 16-bit, Cin/groups % 16 == 0, Cout/groups > 64, on a device running sm_90a
# code. Cases: every tile shape (BM 256 x BN 128 for Cout/groups > 128, else 128 x 256, w2v-like stride 2: phase
# rows by the tensor map's element stride), one x window per tap (wavenet-like dilation 512, the 3-tap
# "segments"), kb76-like stride 3 with dilation 4, partial output tiles (Cout/groups 200, odd lengths), one
# 16-channel stage (Cin/groups 16), three (Cin/groups 48, in three groups),
# K 8 causal, K 1, x rows padded past Cin (a narrowed (B, L, C + 8) tensor), and enough tiles that every block
# of the persistent grid runs several (the ring continues across tiles).
TMA_CASES = [
    ("w2v_like_s2", 2, 512, 512, 3, 1999, 2, 0, 1, 1),
    ("tcn_like_d8", 2, 256, 256, 3, 1000, 1, 8, 8, 1),
    ("wavenet_like_d512", 2, 128, 128, 2, 2100, 1, 0, 512, 1),
    ("kb76_like_s3_d4", 2, 64, 128, 3, 4001, 3, 0, 4, 1),
    ("cout_200_groups_2", 1, 512, 400, 3, 777, 1, 1, 1, 2),
    ("cin_16", 2, 16, 96, 3, 515, 1, 1, 1, 1),
    ("cin_48_groups_3", 2, 144, 288, 5, 333, 1, 2, 1, 3),
    ("k8_causal", 2, 64, 72, 8, 515, 1, "causal", 1, 1),
    ("k1", 2, 64, 80, 1, 301, 1, 0, 1, 1),
    ("padded_rows", 2, 128, 96, 3, 600, 2, 3, 2, 1),
    ("many_tiles_per_block", 8, 128, 128, 3, 20001, 1, 1, 1, 1),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", TMA_CASES, ids=[c[0] for c in TMA_CASES])
def test_dense_tma_forward_matches_float64_torch(case, dtype, poison_outputs):
    name, B, Cin, Cout, K, L, stride, padding, dilation, groups = case
    if not runs_sm90a_code():
        pytest.skip("the TMA forward runs on sm_90 devices with an sm_90a build")
    _, w, b = make_inputs(B, Cin, Cout, K, L, groups, dtype)
    extra = 8 if name == "padded_rows" else 0
    x = torch.randn(B, L, Cin + extra, device="cuda").to(dtype)[:, :, :Cin].transpose(1, 2)
    names = convkit.explain(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    assert names["forward"] == "conv1d_fwd_dense_tma", names
    if name == "w2v_like_s2":  # the kernel the name stands for (the profiler costs seconds: one case)
        ran = cuda_kernel_names(lambda: check_case(x, w, b, stride, padding, dilation, groups, dtype, activation="silu"))
        assert any("conv1d_fwd_dense_tma_kernel" in n for n in ran), sorted(ran)
    else:
        check_case(x, w, b, stride, padding, dilation, groups, dtype, activation="gelu" if K % 2 else None)


# CONVKIT_REALIGN_STORES=1 (read once per process: a child process): the 16-bit wgmma / TMA forwards' epilogue
# (wg::store_c_tile) writes y as 16-byte units of y itself, the units a tile shares with its neighbours element by
# element. Every WGMMA_CASES shape with a (B, C, L) x and every TMA_CASES shape with a (B, L, C) view, GELU, forward
# and grad-input (whose phases and one-pass kernel store through the same function) against float64, poisoned
# outputs: out_lengths of every remainder mod 8 among them (rows starting 2, 4, 6, ... bytes into a unit).
REALIGN_SCRIPT = r"""
import sys, torch, convkit
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
from convkit.functional import resolve_padding
torch.manual_seed(0)
for dtype in (torch.bfloat16, torch.float16):
    for view, cases in ((False, @WGMMA@), (True, @TMA@)):
        for name, B, Cin, Cout, K, L, S, P, D, G in cases:
            x = (torch.randn(B, L, Cin, device="cuda").to(dtype).transpose(1, 2) if view
                 else torch.randn(B, Cin, L, device="cuda").to(dtype)).requires_grad_()
            w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(dtype)
            b = torch.randn(Cout, device="cuda").to(dtype)
            y = convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G, activation="gelu")
            dy = torch.randn_like(y)
            y.backward(dy)
            pl, pr = resolve_padding(P, K, S, D)
            y_ref, dx_ref = reference(x.detach(), w, b, dy, S, pl, pr, D, G, "gelu")[:2]
            assert_close(y, y_ref, dtype, f"forward {name} {dtype} view {view}")
            assert_close(x.grad, dx_ref, dtype, f"grad_input {name} {dtype} view {view}")
print("realigned store cases passed")
"""


def test_dense_forward_realigned_stores():
    if not runs_sm90a_code():
        pytest.skip("the wgmma kernels run on sm_90 devices with an sm_90a build")
    script = REALIGN_SCRIPT.replace("@WGMMA@", repr(WGMMA_CASES)).replace("@TMA@", repr(TMA_CASES))
    run_child_script(script, "realigned store cases passed", CONVKIT_REALIGN_STORES="1", CONVKIT_POISON_OUTPUTS="1")


def test_dense_tma_forward_only_where_it_applies(poison_outputs):
    """Channels-last x that the tensor map cannot describe, or shapes the kernel is slower on, take the other
    dense kernels and still give torch's results: x 2 bytes off 16-byte alignment, Cin/groups 24 (not a multiple
    of 16), Cout/groups 64, fp32 master weights, fp32 input; (B, C, L) x keeps the register-staged kernels."""
    if not runs_sm90a_code():
        pytest.skip("the TMA forward runs on sm_90 devices with an sm_90a build")
    dt = torch.bfloat16

    def blc(B, L, C, offset=0):
        return torch.randn(B * L * C + offset, device="cuda").to(dt)[offset:].view(B, L, C).transpose(1, 2)

    _, w, b = make_inputs(2, 128, 128, 3, 501, 1, dt)
    x = blc(2, 501, 128)
    assert convkit.explain(x, w, b, padding=1)["forward"] == "conv1d_fwd_dense_tma"
    assert convkit.explain(x, w.float(), b.float(), padding=1)["forward"] != "conv1d_fwd_dense_tma"
    assert convkit.explain(x.float(), w.float(), b.float(), padding=1)["forward"] != "conv1d_fwd_dense_tma"
    w2 = w[:, :, :2].contiguous()  # Cout * K 256: below the copy rule
    assert convkit.explain(x.contiguous(), w2, b, padding=1)["forward"] == "conv1d_fwd_dense_wgmma"
    x = torch.randn(2 * 501 * 128 + 8, device="cuda").to(dt)[1:2 * 501 * 128 + 1].view(2, 501, 128).transpose(1, 2)
    assert x.data_ptr() % 16 != 0
    assert convkit.explain(x, w, b, padding=1)["forward"] != "conv1d_fwd_dense_tma"
    check_case(x, w, b, 1, 1, 1, 1, dt)
    x = blc(2, 333, 48)
    _, w, b = make_inputs(2, 48, 192, 3, 333, 2, dt)  # Cin/groups 24 (Cout/groups 96: only the % 16 rule applies)
    assert convkit.explain(x, w, b, padding=1, groups=2)["forward"] != "conv1d_fwd_dense_tma"
    check_case(x, w, b, 1, 1, 1, 2, dt)
    x = blc(2, 333, 128)
    _, w, b = make_inputs(2, 128, 128, 3, 333, 2, dt)  # Cout/groups 64
    assert convkit.explain(x, w, b, padding=1, groups=2)["forward"] != "conv1d_fwd_dense_tma"
    check_case(x, w, b, 1, 1, 1, 2, dt)


# (B, C, L) x on the TMA forward through the launcher's channels-last copy (x_to_channels_last_kernel, launch_copy's
# two load kinds: rows of x_stride_l 1 as 16-byte chunks shifted into place, other strides as 2-byte elements):
# rows that are not 16-byte aligned (odd L), aligned rows (L % 8 == 0 with a ragged last tile), a channel-sliced
# view (x_stride_c 2L with L odd), a position-strided view (x_stride_l 2: elements), Cin 80 (a ragged channel
# tile), groups, 16-byte rows with a partial last chunk (L 1001 in rows of 1008), x one element past a 16-byte
# boundary (every row shifted). The two cases with rows of whole 16-byte units (aligned_rows, aligned_rows_tail) take
# the transposing form instead by default (x read as it lies; the copy's aligned rows: COPY_VW8_SCRIPT).
# (test_dense_tma_copy_in_slabs: several slabs.)
TMA_COPY_CASES = [
    ("w2v_like_odd_rows", 2, 512, 512, 3, 1999, 2, 0, 1, 1, None),
    ("aligned_rows", 3, 256, 256, 3, 2056, 1, 8, 8, 1, None),
    ("channel_slice", 2, 256, 256, 3, 1001, 1, 1, 1, 1, "channels"),
    ("position_stride", 2, 256, 256, 3, 1001, 1, 1, 1, 1, "positions"),
    ("cin_80_cout_400", 4, 80, 400, 3, 777, 2, 1, 1, 1, None),
    ("grouped", 2, 512, 1024, 3, 555, 1, 1, 1, 2, None),
    ("aligned_rows_tail", 2, 256, 256, 3, 1001, 1, 1, 1, 1, "tail"),
    ("x_one_element_off", 2, 256, 256, 3, 1024, 1, 1, 1, 1, "offset"),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", TMA_COPY_CASES, ids=[c[0] for c in TMA_COPY_CASES])
def test_dense_tma_forward_copies_bcl_x(case, dtype, poison_outputs):
    name, B, Cin, Cout, K, L, stride, padding, dilation, groups, view = case
    if not runs_sm90a_code():
        pytest.skip("the TMA forward runs on sm_90 devices with an sm_90a build")
    x, w, b = make_inputs(B, Cin, Cout, K, L, groups, dtype)
    if view == "channels":
        x = torch.randn(B, 2 * Cin, L, device="cuda").to(dtype)[:, ::2]
    elif view in ("positions", "offset"):  # (offset: even rows, but x 2 bytes past a 16-byte boundary: all realigned)
        x = random_laid_out((B, Cin, L), dtype, view)
    elif view == "tail":  # rows of 1008 elements holding 1001 positions: the last 16-byte chunk is partial
        x = torch.randn(B, Cin, (L + 7) // 8 * 8, device="cuda").to(dtype)[:, :, :L]
    assert tma_copy_expected(Cin, Cout, K, stride, groups, dtype)
    names = convkit.explain(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    # (rows of whole 16-byte units are read as they lie, the transposing form: aligned_rows, aligned_rows_tail)
    assert names["forward"] == tma_bcl_forward(x), names
    assert (names["forward"] == TMA_TX) == (name in ("aligned_rows", "aligned_rows_tail")), names
    gi_tma = tma_grad_input_expected(B, Cin, Cout, K, L, stride, padding, dilation, groups, dtype)
    assert gi_tma == (name in ("w2v_like_odd_rows", "aligned_rows", "channel_slice", "position_stride", "grouped",
                               "aligned_rows_tail", "x_one_element_off"))  # the rule, spelled out once
    fused = fused_grad_input_expected(Cin, Cout, K, stride, padding, dilation, groups, dtype)
    assert fused == (name in ("w2v_like_odd_rows", "cin_80_cout_400"))  # stride 2
    if fused:
        assert names["grad_input"] == FUSED_GRAD_INPUT, names
    elif gi_tma:  # (aligned_rows: dy read as it lies at stride 1, TX_GRAD_INPUT)
        assert names["grad_input"] == tma_grad_input_name(B, Cin, Cout, K, L, stride, padding, dilation, groups,
                                                          dtype), names
    else:
        assert "tma" not in names["grad_input"], names
    if name == "w2v_like_odd_rows":
        ran = cuda_kernel_names(lambda: check_case(x, w, b, stride, padding, dilation, groups, dtype))
        assert any("x_to_channels_last_kernel" in n for n in ran), sorted(ran)
        assert any("conv1d_fwd_dense_tma_kernel" in n for n in ran), sorted(ran)
        # the backward alone: dy copied, both phases (2 taps and 1) in one pass (on the TMA forward, one launch
        # per phase, with CONVKIT_GI_FUSED=0), no wgmma / mma.sync forward, no interleave
        xr, wr = x.detach().clone().requires_grad_(), w.detach().clone()
        y = convkit.conv1d(xr, wr, b, stride=stride)
        dy = torch.randn_like(y)
        ran = cuda_kernel_names(lambda: y.backward(dy))
        assert any("x_to_channels_last_kernel" in n for n in ran), sorted(ran)
        assert any("conv1d_bwd_input_dense_tma_kernel" in n for n in ran), sorted(ran)
        assert not any("dense_wgmma" in n or "dense_mma" in n or "interleave" in n for n in ran), sorted(ran)
    else:
        check_case(x, w, b, stride, padding, dilation, groups, dtype, activation="silu")


@pytest.mark.parametrize("dy_layout", ["blc_view", "position_stride", "expanded_row", "expanded_scalar"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_dense_tma_grad_input_any_dy_strides(dy_layout, dtype, poison_outputs):
    """The TMA grad-input reads dy whatever its strides: a (B, L, C) view (used as it is, no copy), every other
    position of a longer tensor (2-byte loads), one row expanded over B and C (strides 0, 0, 1: the row loads from
    one row), one value expanded everywhere (strides 0, 0, 0, as y.sum().backward() gives): dx against float64
    torch, stride 2 (two phases) and stride 1. (Strides as the backward receives them, if autograd hands dy over
    as it is.)"""
    if not runs_sm90a_code():
        pytest.skip("the TMA forward runs on sm_90 devices with an sm_90a build")
    for B, Cin, Cout, K, L, S, P in ((2, 512, 512, 3, 1001, 2, 1), (2, 256, 256, 3, 777, 1, 1)):
        x, w, b = make_inputs(B, Cin, Cout, K, L, 1, dtype)
        gi = expected_tma_grad_input(B, Cin, Cout, K, L, S, P, 1, 1, dtype)
        assert gi == (FUSED_GRAD_INPUT if S == 2 else TMA_GRAD_INPUT)
        assert convkit.explain(x, w, b, stride=S, padding=P)["grad_input"] == gi
        xr = x.detach().clone().requires_grad_()
        y = convkit.conv1d(xr, w, b, stride=S, padding=P)
        lout = y.shape[2]
        if dy_layout == "blc_view":
            dy = torch.randn(B, lout, Cout, device="cuda").to(dtype).transpose(1, 2)
        elif dy_layout == "position_stride":
            dy = random_laid_out((B, Cout, lout), dtype, "positions")
        elif dy_layout == "expanded_row":
            dy = torch.randn(lout, device="cuda").to(dtype).expand(B, Cout, lout)
        else:
            dy = torch.randn((), device="cuda").to(dtype).expand(B, Cout, lout)
        (dx,) = torch.autograd.grad(y, xr, dy)
        dx_ref = reference(x, w, b, dy, S, P, P, 1, 1)[1]
        assert_close(dx, dx_ref, dtype, f"grad_input S {S}, dy {dy_layout} {tuple(dy.stride())}")


# The stride-1 grad-input on the TMA forward reading dy as it lies (its transposing form, no channels-last copy;
# dispatch.cpp, dense_grad_input_tma): tcn-like (D 8), wavenet-like (K 2, D 512), groups (256 a group), a padding
# past the taps by 8 positions (dy advanced 16 bytes); against the copy where the window would start mid 16-byte
# unit (padding past the taps by 4) or dy is not a tensor of whole 16-byte rows (every other position of a longer
# row, one element past a 16-byte boundary): dx against float64 torch, poisoned outputs, the kernels that ran.
TX_GI_CASES = [  # name, B, Cin, Cout, K, L, padding, dilation, groups, dy view, expected name
    ("tcn_like", 2, 256, 256, 3, 2048, 8, 8, 1, None, TX_GRAD_INPUT),
    ("wavenet_like", 2, 256, 128, 2, 2560, 0, 512, 1, None, TX_GRAD_INPUT),
    ("groups_2", 2, 512, 512, 3, 1024, 1, 1, 2, None, TX_GRAD_INPUT),
    ("pad_past_taps_8", 2, 128, 128, 3, 1006, 10, 1, 1, None, TX_GRAD_INPUT),
    ("pad_past_taps_4", 2, 128, 128, 3, 1014, 6, 1, 1, None, TMA_GRAD_INPUT),
    ("dy_positions_strided", 2, 256, 256, 3, 1024, 1, 1, 1, "positions", TX_GRAD_INPUT),
    ("dy_one_element_off", 2, 256, 256, 3, 1024, 1, 1, 1, "offset", TX_GRAD_INPUT),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", TX_GI_CASES, ids=[c[0] for c in TX_GI_CASES])
def test_dense_tma_grad_input_reads_dy_as_it_lies(case, dtype, poison_outputs):
    name, B, Cin, Cout, K, L, P, D, G, view, expected = case
    if not runs_sm90a_code():
        pytest.skip("the TMA forward runs on sm_90 devices with an sm_90a build")
    x, w, b = make_inputs(B, Cin, Cout, K, L, G, dtype)
    assert tma_grad_input_name(B, Cin, Cout, K, L, 1, P, D, G, dtype) == expected
    assert convkit.explain(x, w, b, padding=P, dilation=D, groups=G)["grad_input"] == expected  # for a fresh dy
    xr = x.clone().requires_grad_()
    y = convkit.conv1d(xr, w, b, padding=P, dilation=D, groups=G)
    dy = random_laid_out(tuple(y.shape), dtype, view)
    grads = []
    ran = cuda_kernel_names(lambda: grads.extend(torch.autograd.grad(y, xr, dy)))
    dx = grads[0]
    assert any("conv1d_fwd_dense_tma_kernel" in n for n in ran), sorted(ran)
    copied = expected == TMA_GRAD_INPUT or view is not None  # (those dy: the copy, whatever explain says)
    assert any("x_to_channels_last_kernel" in n for n in ran) == copied, sorted(ran)
    dx_ref = reference(x, w, b, dy, 1, P, P, D, G)[1]
    assert_close(dx, dx_ref, dtype, f"grad_input {name} {dtype}")


# The dense grad-input of stride 2..4 in one pass (kernels/conv1d_bwd_input_dense_tma.cu): kb76-like (BM 64, both
# warpgroups on one 64-row block, S 3), w2v-like (BM 128, S 2, two taps in phase 0), Cin 96 at S 4 (a partial
# 128-row tile), Cout 48 (32-byte dy rows, 16-channel stages), groups, phases without taps (zeros), a dilation whose
# dy window spans two TMA loads, Cin 40 (a partial 64-row tile), padding wider than the kernel, L shorter than
# a tile, enough tiles that every block of the persistent grid runs several. Forward and all gradients
# against float64 torch with poisoned outputs.
FUSED_GI_CASES = [  # name, B, Cin, Cout, K, L, stride, padding, dilation, groups
    ("kb76_like", 2, 64, 128, 3, 3001, 3, 0, 4, 1),
    ("w2v_like", 2, 512, 512, 3, 1999, 2, 0, 1, 1),
    ("cin96_s4_k4", 2, 96, 64, 4, 1003, 4, 2, 1, 1),
    ("cout48_rows32", 2, 64, 48, 5, 777, 2, 3, 2, 1),
    ("groups_2", 2, 128, 256, 3, 555, 2, 1, 1, 2),
    ("s3_k2_empty_phase", 2, 64, 64, 2, 1000, 3, 0, 1, 1),
    ("s4_d2_two_empty", 2, 32, 32, 2, 501, 4, 1, 2, 1),
    ("d256_two_loads", 1, 64, 64, 3, 3000, 2, 256, 256, 1),
    ("cin40", 2, 40, 32, 3, 999, 2, 1, 1, 1),
    ("pad_5", 2, 64, 64, 3, 100, 2, 5, 1, 1),
    ("short_l", 3, 64, 64, 3, 7, 2, 1, 1, 1),
    ("many_tiles", 8, 64, 128, 3, 40001, 3, 0, 4, 1),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", FUSED_GI_CASES, ids=[c[0] for c in FUSED_GI_CASES])
def test_dense_fused_grad_input_matches_float64_torch(case, dtype, poison_outputs):
    name, B, Cin, Cout, K, L, stride, padding, dilation, groups = case
    if not runs_sm90a_code():
        pytest.skip("the TMA kernels run on sm_90 devices with an sm_90a build")
    x, w, b = make_inputs(B, Cin, Cout, K, L, groups, dtype)
    assert fused_grad_input_expected(Cin, Cout, K, stride, padding, dilation, groups, dtype)
    names = convkit.explain(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    assert names["grad_input"] == FUSED_GRAD_INPUT, names
    if name == "kb76_like":  # the kernels behind the name: dy copied, one grad-input launch, no phase kernels
        xr = x.detach().clone().requires_grad_()
        y = convkit.conv1d(xr, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
        dy = torch.randn_like(y)
        ran = cuda_kernel_names(lambda: y.backward(dy))
        assert any("x_to_channels_last_kernel" in n for n in ran), sorted(ran)
        assert any("conv1d_bwd_input_dense_tma_kernel" in n for n in ran), sorted(ran)
        assert not any("interleave" in n or "conv1d_fwd_dense" in n for n in ran), sorted(ran)
    check_case(x, w, b, stride, padding, dilation, groups, dtype, activation="silu" if name == "w2v_like" else None)


# The one-pass grad-input kernel also takes stride 1 (one phase): by default where Cin/groups <= 64 (its 64-row
# tiles), every shape it supports with CONVKIT_GI_FUSED_S1=1, none with =0. The script (run with =1): kb67-like, valid padding, Cin 96 (a partial 128-row tile), Cin 128
# with dilation 8, grouped (64 per group), Cout 48 (32-byte dy rows), K 2 with dilation 512, padding past the taps;
# a (B, L, C) dy (no copy); dx against float64 torch, poisoned outputs.
FUSED_S1_SCRIPT = r"""
import sys, torch, convkit
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
torch.manual_seed(0)
cases = [  # B, Cin, Cout, K, L, padding, dilation, groups, dy layout
    (2, 64, 128, 3, 1001, 1, 1, 1, "bcl"), (2, 64, 128, 3, 1000, 0, 1, 1, "bcl"), (2, 96, 64, 5, 777, 2, 1, 1, "bcl"),
    (1, 128, 256, 3, 2000, 8, 8, 1, "bcl"), (2, 512, 512, 5, 555, 2, 1, 8, "bcl"), (2, 32, 48, 3, 501, 1, 1, 1, "bcl"),
    (1, 64, 128, 2, 1500, 0, 512, 1, "bcl"), (2, 64, 64, 3, 300, 5, 1, 1, "bcl"), (2, 64, 128, 3, 1001, 1, 1, 1, "blc")]
for dtype in (torch.bfloat16, torch.float16):
    for B, Cin, Cout, K, L, P, D, G, layout in cases:
        x = torch.randn(B, Cin, L, device="cuda").to(dtype)
        w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(dtype)
        names = convkit.explain(x, w, None, padding=P, dilation=D, groups=G)
        assert names["grad_input"] == "conv1d_bwd_input_dense_tma_fused", names
        xr = x.clone().requires_grad_()
        y = convkit.conv1d(xr, w, None, padding=P, dilation=D, groups=G)
        dy = torch.randn_like(y)
        if layout == "blc":
            dy = dy.transpose(1, 2).contiguous().transpose(1, 2)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            (dx,) = torch.autograd.grad(y, xr, dy)
            torch.cuda.synchronize()
        ran = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        assert any("conv1d_bwd_input_dense_tma_kernel" in n for n in ran), ran
        assert any("x_to_channels_last" in n for n in ran) == (layout == "bcl"), ran  # a (B, L, C) dy: no copy
        dx_ref = reference(x, w, None, dy, 1, P, P, D, G)[1]
        assert_close(dx, dx_ref, dtype, f"grad_input {dtype} {(B, Cin, Cout, K, L, P, D, G, layout)}")
print("stride-1 one-pass grad-input cases passed")
"""


FUSED_S1_OFF_SCRIPT = r"""
import torch, convkit
x = torch.randn(2, 64, 1001, device="cuda", dtype=torch.bfloat16)
w = torch.randn(128, 64, 3, device="cuda", dtype=torch.bfloat16)
assert convkit.explain(x, w, None, padding=1)["grad_input"] != "conv1d_bwd_input_dense_tma_fused"
assert convkit.explain(x, w, None, stride=2, padding=1)["grad_input"] == "conv1d_bwd_input_dense_tma_fused"
print("stride-1 one-pass grad-input off")
"""


def test_dense_fused_grad_input_stride1_switch():
    if not runs_sm90a_code():
        pytest.skip("the TMA kernels run on sm_90 devices with an sm_90a build")
    run_child_script(FUSED_S1_SCRIPT, "stride-1 one-pass grad-input cases passed", CONVKIT_GI_FUSED_S1="1",
                     CONVKIT_POISON_OUTPUTS="1")
    run_child_script(FUSED_S1_OFF_SCRIPT, "stride-1 one-pass grad-input off", CONVKIT_GI_FUSED_S1="0")
    if os.environ.get("CONVKIT_GI_FUSED_S1") is None:  # the default rule, in this process: Cin/groups <= 64
        for Cin, Cout, G, fused in ((64, 128, 1, True), (32, 48, 1, True), (96, 64, 1, False), (512, 512, 8, True),
                                    (128, 256, 1, False)):
            assert fused_grad_input_expected(Cin, Cout, 3, 1, 1, 1, G, torch.bfloat16) == fused
            x = torch.randn(2, Cin, 1001, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(Cout, Cin // G, 3, device="cuda", dtype=torch.bfloat16)
            gi = convkit.explain(x, w, None, padding=1, groups=G)["grad_input"]
            assert (gi == FUSED_GRAD_INPUT) == fused, (Cin, Cout, G, gi)


# CONVKIT_GI_FUSED=0 (read once per process: a child process): the strided 16-bit grad-input of wide shapes runs
# its stride phases one by one on the TMA forward after one channels-last copy of dy (dense_grad_input_tma), the
# path the one-pass kernel took over by default but still serves where it declines (K >= 11 or 12 with Cin/groups
# > 64: its stages do not fit twice; dy windows over 2048 rows). w2v-like with odd rows, grouped, a (B, L, C) view
# of dy (no copy), stride 3 with dilation 4; dx against float64 torch, poisoned outputs; and K 12 at stride 2,
# which the one-pass kernel declines even when it is on (checked in this process: the name without it).
PHASED_TMA_GI_SCRIPT = r"""
import sys, torch, convkit
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
torch.manual_seed(0)
cases = [  # B, Cin, Cout, K, L, stride, padding, dilation, groups, dy layout
    (2, 512, 512, 3, 1999, 2, 0, 1, 1, "bcl"), (2, 1024, 512, 3, 555, 2, 1, 1, 2, "bcl"),
    (2, 512, 512, 3, 1001, 2, 1, 1, 1, "blc"), (2, 512, 256, 3, 1201, 3, 0, 4, 1, "bcl")]
for dtype in (torch.bfloat16, torch.float16):
    for B, Cin, Cout, K, L, S, P, D, G, layout in cases:
        x = torch.randn(B, Cin, L, device="cuda").to(dtype)
        w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(dtype)
        names = convkit.explain(x, w, None, stride=S, padding=P, dilation=D, groups=G)
        assert names["grad_input"] == "x_to_channels_last + conv1d_bwd_input_dense_tma", names
        xr = x.clone().requires_grad_()
        y = convkit.conv1d(xr, w, None, stride=S, padding=P, dilation=D, groups=G)
        dy = torch.randn_like(y)
        if layout == "blc":
            dy = dy.transpose(1, 2).contiguous().transpose(1, 2)
        (dx,) = torch.autograd.grad(y, xr, dy)
        dx_ref = reference(x, w, None, dy, S, P, P, D, G)[1]
        assert_close(dx, dx_ref, dtype, f"grad_input {dtype} {(B, Cin, Cout, K, L, S, P, D, G, layout)}")
print("phased tma grad-input cases passed")
"""


def test_dense_tma_grad_input_by_phases():
    if not runs_sm90a_code():
        pytest.skip("the TMA kernels run on sm_90 devices with an sm_90a build")
    run_child_script(PHASED_TMA_GI_SCRIPT, "phased tma grad-input cases passed", CONVKIT_GI_FUSED="0",
                     CONVKIT_POISON_OUTPUTS="1")
    # K 12 at stride 2, Cin 128: two one-pass stages do not fit, so the phases run even with the kernel on
    x = torch.randn(2, 128, 777, device="cuda", dtype=torch.bfloat16)
    w = (torch.randn(128, 128, 12, device="cuda") / (128 * 12) ** 0.5).to(torch.bfloat16)
    assert not fused_grad_input_expected(128, 128, 12, 2, 0, 1, 1, torch.bfloat16)
    assert convkit.explain(x, w, None, stride=2)["grad_input"] != FUSED_GRAD_INPUT
    check_case(x, w, None, 2, 0, 1, 1, torch.bfloat16)


@pytest.mark.large
def test_dense_fused_grad_input_in_slabs(poison_outputs):
    """dy over the launcher's 1 GiB copy slab (kb76-like, 24 batches of 51 MB: slabs of 20 and 4 batches), each
    slab's dx at its own offset; dx of batches on both sides of the slab boundary and the last one against
    float64 torch."""
    if not runs_sm90a_code():
        pytest.skip("the TMA kernels run on sm_90 devices with an sm_90a build")
    B, Cin, Cout, K, L, S, D, dt = 24, 64, 128, 3, 600_000, 3, 4, torch.bfloat16
    x = torch.randn(B, Cin, L, device="cuda", dtype=dt).requires_grad_()
    w = (torch.randn(Cout, Cin, K, device="cuda") / (Cin * K) ** 0.5).to(dt)
    assert convkit.explain(x, w, None, stride=S, dilation=D)["grad_input"] == FUSED_GRAD_INPUT
    y = convkit.conv1d(x, w, None, stride=S, dilation=D)
    dy = torch.randn_like(y)
    assert dy.numel() * 2 > 1 << 30
    (dx,) = torch.autograd.grad(y, x, dy)
    for bi in (0, 19, 20, B - 1):
        ref = torch.nn.functional.conv_transpose1d(dy[bi:bi + 1].double(), w.double(), stride=S, dilation=D,
                                                   output_padding=(L - ((y.shape[2] - 1) * S + D * (K - 1) + 1)))
        assert_close(dx[bi:bi + 1], ref, dt, f"grad_input batch {bi}")
    del x, y, dy, dx
    torch.cuda.empty_cache()


# The TMA grad-weight (kernels/conv1d_bwd_weight_dense_tma.cu), the default where it applies, in a child process (a
# fault in a TMA kernel must not take the rest of the suite with it): stride-1 shapes with 16-byte aligned x and dy
# rows and tap shifts k*D - P in multiples of 8 positions (tcn-like, wavenet-like, grouped K 4 (half blocks:
# Cout/groups 64), K 1, Cin 40 and Cout 200 (partial tiles), many splits, two groups of 256, half blocks with two ci
# tiles and 48 rows), grad-weight and grad-bias against float64 torch with poisoned outputs and the same bits on a
# second run; shapes it cannot read directly (x rows of odd length, dy rows of odd length, padding 1 (unaligned tap
# shifts), a (B, L, C) view of x, stride 2) do not take that form (CONVKIT_DENSE_TMA_WGRAD_TAPS=1 gives them the
# copies below), and K 5 none.
TMA_WGRAD_SCRIPT = r"""
import sys, torch, convkit
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
torch.manual_seed(0)
cases = [  # B, Cin, Cout, K, L, padding, dilation, groups
    (2, 256, 256, 3, 1000, 8, 8, 1), (2, 128, 128, 2, 2048, 0, 512, 1), (2, 256, 256, 4, 1024, 16, 8, 4),
    (3, 64, 96, 1, 808, 0, 1, 1), (2, 40, 200, 3, 1000, 8, 8, 1), (4, 64, 128, 3, 8192, 8, 8, 1),
    (1, 512, 512, 3, 520, 8, 8, 2), (2, 256, 96, 3, 512, 8, 8, 2), (2, 128, 128, 2, 1024, 8, 16, 1)]
for dtype in (torch.bfloat16, torch.float16):
    for B, Cin, Cout, K, L, P, D, G in cases:
        x = torch.randn(B, Cin, L, device="cuda").to(dtype)
        w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(dtype).requires_grad_()
        b = torch.randn(Cout, device="cuda").to(dtype).requires_grad_()
        names = convkit.explain(x, w, b, padding=P, dilation=D, groups=G)
        assert names["grad_weight"] == "conv1d_bwd_weight_dense_tma", names
        y = convkit.conv1d(x, w, b, padding=P, dilation=D, groups=G)
        assert y.shape[2] % 8 == 0
        dy = torch.randn_like(y)
        dw, db = torch.autograd.grad(y, (w, b), dy)
        dw2, db2 = torch.autograd.grad(convkit.conv1d(x, w, b, padding=P, dilation=D, groups=G), (w, b), dy)
        assert torch.equal(dw, dw2) and torch.equal(db, db2), "not deterministic"
        _, _, dw_ref, db_ref = reference(x, w, b, dy, 1, P, P, D, G)
        what = f"{dtype} {(B, Cin, Cout, K, L, P, D, G)}"
        assert_close(dw, dw_ref, dtype, "grad_weight " + what)
        assert_close(db, db_ref, dtype, "grad_bias " + what)
    w = torch.randn(256, 256, 3, device="cuda").to(dtype)
    for x, S, Kw, P in ((torch.randn(2, 256, 1001, device="cuda").to(dtype), 1, 3, 0),
                        (torch.randn(2, 256, 1000, device="cuda").to(dtype), 1, 2, 0),  # Lout 999
                        (torch.randn(2, 256, 1000, device="cuda").to(dtype), 1, 3, 1),  # shifts -1, 0, 1
                        (torch.randn(2, 1000, 256, device="cuda").to(dtype).transpose(1, 2), 1, 3, 0),
                        (torch.randn(2, 256, 1000, device="cuda").to(dtype), 2, 3, 0),
                        (torch.randn(2, 256, 1000, device="cuda").to(dtype), 1, 5, 0)):
        assert convkit.explain(x, w[:, :, :1].repeat(1, 1, Kw), None, stride=S, padding=P)["grad_weight"] != \
            "conv1d_bwd_weight_dense_tma"
print("tma grad-weight cases passed")
"""


def test_dense_tma_grad_weight():
    if not runs_sm90a_code():
        pytest.skip("the TMA kernels run on sm_90 devices with an sm_90a build")
    run_child_script(TMA_WGRAD_SCRIPT, "tma grad-weight cases passed", CONVKIT_POISON_OUTPUTS="1",
                     CONVKIT_DENSE_TMA_WGRAD=None)


# The same kernel after copies into the workspace (tap_rows_kernel: x's K tap rows, dy's rows padded to whole 16-byte
# units), CONVKIT_DENSE_TMA_WGRAD_TAPS=1 (every shape the kernel's other conditions allow; the default needs K <= 4
# and Cout/groups >= 256, or K 5..8 with Cout/groups <= 64 and x's tap rows copied): stride 2 with
# odd output rows (w2v-like: both copies), stride 3 with dilation 4 (kb76-like), padding 1 (shifts -1, 0, 1; Cout
# 64: half blocks), K 4 with padding 3, odd x rows with aligned dy rows (the x copy alone), an aligned x with a
# (B, L, C) view of dy (dy's copy alone), a (B, L, C) view of x and of dy at stride 2, two groups, half blocks at
# stride 2, K 1 at stride 2, Cin 40 and Cout 200 (partial tiles), causal K 4 with dilation 2 (padding on one side),
# stride 2 with aligned dy rows (the x copy alone), K 5..8 with Cout/groups <= 64 (the same switch splits the taps
# between the warpgroups: grouped K 5, causal K 8, K 7 at stride 2, K 6 read directly); grad-weight and grad-bias
# against float64 torch with poisoned outputs and a poisoned workspace (dispatch.cpp), the same bits on a second run;
# the profiler sees the copy kernel and the TMA kernel run for two cases. Then the default: Cout 256 at stride 2
# takes it, Cout 128 does not, nor K 6 with Cout/groups 64 read directly; grouped K 5 with padding 2 (x copied) takes
# it at Cout/groups 64, not at 128.
TAP_ROWS_WGRAD_SCRIPT = r"""
import os, sys, torch, convkit
from convkit.functional import resolve_padding
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close, cuda_kernel_names
torch.manual_seed(0)
cases = [  # B, Cin, Cout, K, L, stride, padding, dilation, groups, x view / dy view
    (2, 128, 128, 3, 1999, 2, 0, 1, 1, ""), (2, 64, 96, 3, 1201, 3, 0, 4, 1, ""), (2, 64, 64, 3, 1000, 1, 1, 1, 1, ""),
    (1, 96, 64, 4, 777, 1, 3, 1, 1, ""), (2, 64, 128, 2, 1001, 1, 0, 1, 1, ""), (2, 64, 96, 2, 1000, 1, 0, 8, 1, "dy"),
    (2, 64, 96, 3, 900, 2, 1, 1, 1, "x"), (2, 64, 96, 3, 900, 2, 1, 1, 1, "dy"), (1, 256, 256, 3, 1500, 2, 1, 1, 2, ""),
    (2, 128, 128, 3, 1234, 2, 0, 2, 2, ""), (2, 64, 64, 1, 999, 2, 0, 1, 1, ""), (2, 40, 200, 3, 1000, 2, 1, 1, 1, ""),
    (2, 64, 96, 4, 1000, 1, "causal", 2, 1, ""), (2, 64, 96, 3, 2001, 2, 0, 1, 1, ""),
    # K 5..8 (half blocks with the taps split between the warpgroups): grouped_g8-like K 5, causal K 8, K 7 at
    # stride 2 (a phantom eighth tap), K 6 with aligned shifts (no copies, "direct")
    (2, 128, 128, 5, 1000, 1, 2, 1, 2, ""), (1, 64, 64, 8, 700, 1, "causal", 1, 1, ""),
    (2, 96, 64, 7, 999, 2, 3, 1, 1, ""), (2, 64, 48, 6, 1000, 1, 16, 8, 1, "direct")]
# the copy kernel that runs: rows of several 2048-position blocks (the last partial) staged in shared memory; spans
# over its 12288 elements (stride 7, a strided x view; K 4 at dilation 4001) copied an element at a time
copy_kernels = {(2, 64, 96, 3, 9001, 2, 1, 1, 1, ""): "tap_rows_staged_kernel",
                (1, 64, 64, 2, 30001, 7, 0, 1, 1, "x"): "tap_rows_kernel",
                (1, 64, 64, 4, 20000, 1, 0, 4001, 1, ""): "tap_rows_kernel"}
cases += list(copy_kernels)
occ = 4 if os.environ.get("CONVKIT_TAP_ROWS_OCC") == "4" else 6

for dtype in (torch.bfloat16, torch.float16):
    for i, (B, Cin, Cout, K, L, S, P, D, G, view) in enumerate(cases):
        if view == "x":
            x = torch.randn(B, L, Cin, device="cuda").to(dtype).transpose(1, 2)
        else:
            x = torch.randn(B, Cin, L, device="cuda").to(dtype)
        w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(dtype).requires_grad_()
        b = torch.randn(Cout, device="cuda").to(dtype).requires_grad_()
        names = convkit.explain(x, w, b, stride=S, padding=P, dilation=D, groups=G)
        # (explain assumes a contiguous dy: the dy view's copy is seen only in the kernels that run)
        assert names["grad_weight"] == "tap_rows + conv1d_bwd_weight_dense_tma" or (
            view in ("dy", "direct") and names["grad_weight"] == "conv1d_bwd_weight_dense_tma"), names
        y = convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G)
        if view == "dy":
            dy = torch.randn(y.shape[0], y.shape[2], y.shape[1], device="cuda").to(dtype).transpose(1, 2)
        else:
            dy = torch.randn_like(y)
        dw, db = torch.autograd.grad(y, (w, b), dy)
        dw2, db2 = torch.autograd.grad(convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G), (w, b), dy)
        assert torch.equal(dw, dw2) and torch.equal(db, db2), "not deterministic"
        if i in (0, 5) and dtype == torch.bfloat16:  # both copies; dy's copy alone (a dy view the names cannot see)
            ran = cuda_kernel_names(lambda: torch.autograd.grad(
                convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G), (w, b), dy))
            # x's tap rows and dy's plain rows staged (CONVKIT_TAP_ROWS_OCC=4: the 4-block form)
            assert any(f"::tap_rows_staged_kernel<{occ}," in n for n in ran), ran
            assert not any("::tap_rows_kernel(" in n for n in ran), ran
            assert any("conv1d_bwd_weight_dense_tma_kernel" in n for n in ran), ran
        if (B, Cin, Cout, K, L, S, P, D, G, view) in copy_kernels and dtype == torch.bfloat16:
            ran = cuda_kernel_names(lambda: torch.autograd.grad(
                convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G), (w, b), dy))
            want = "::" + copy_kernels[(B, Cin, Cout, K, L, S, P, D, G, view)]
            assert any(want + "(" in n or want + "<" in n for n in ran), (want, ran)
        pl, pr = resolve_padding(P, K, S, D)
        _, _, dw_ref, db_ref = reference(x, w, b, dy, S, pl, pr, D, G)
        what = f"{dtype} {(B, Cin, Cout, K, L, S, P, D, G, view)}"
        assert_close(dw, dw_ref, dtype, "grad_weight " + what)
        assert_close(db, db_ref, dtype, "grad_bias " + what)
print("tap rows grad-weight cases passed")
"""

TAP_ROWS_DEFAULT_SCRIPT = r"""
import torch, convkit
x = torch.randn(2, 256, 1000, device="cuda", dtype=torch.bfloat16)
for cout, expected in ((256, True), (128, False)):
    w = torch.randn(cout, 256, 3, device="cuda", dtype=torch.bfloat16)
    names = convkit.explain(x, w, None, stride=2)
    assert (names["grad_weight"] == "tap_rows + conv1d_bwd_weight_dense_tma") == expected, (cout, names)
w = torch.randn(64, 64, 6, device="cuda", dtype=torch.bfloat16)  # K 6, aligned shifts, Cout/groups 64: not by TMA
x = torch.randn(2, 64, 1000, device="cuda", dtype=torch.bfloat16)
names = convkit.explain(x, w, None, padding=16, dilation=8)
assert "conv1d_bwd_weight_dense_tma" not in names["grad_weight"], names
x = torch.randn(2, 128, 1000, device="cuda", dtype=torch.bfloat16)  # grouped_g8-like K 5: x's tap rows copied
for cout, expected in ((128, True), (256, False)):  # Cout/groups 64 takes it, 128 does not
    w = torch.randn(cout, 64, 5, device="cuda", dtype=torch.bfloat16)
    names = convkit.explain(x, w, None, padding=2, groups=2)
    assert (names["grad_weight"] == "tap_rows + conv1d_bwd_weight_dense_tma") == expected, (cout, names)
print("tap rows default")
"""


@pytest.mark.parametrize("occ", [None, "4"], ids=["occ_default", "occ_4"])
def test_dense_tma_grad_weight_tap_rows(occ):
    if not runs_sm90a_code():
        pytest.skip("the TMA kernels run on sm_90 devices with an sm_90a build")
    run_child_script(TAP_ROWS_WGRAD_SCRIPT, "tap rows grad-weight cases passed", CONVKIT_POISON_OUTPUTS="1",
                     CONVKIT_DENSE_TMA_WGRAD=None, CONVKIT_DENSE_TMA_WGRAD_TAPS="1", CONVKIT_TAP_ROWS_OCC=occ)
    if occ is not None:
        return
    run_child_script(TAP_ROWS_DEFAULT_SCRIPT, "tap rows default", CONVKIT_DENSE_TMA_WGRAD=None,
                     CONVKIT_DENSE_TMA_WGRAD_TAPS=None)


SWITCHED_OFF_WGRAD_SCRIPT = r"""
import torch, convkit
x = torch.randn(2, 256, 1000, device="cuda", dtype=torch.bfloat16)
w = torch.randn(256, 256, 3, device="cuda", dtype=torch.bfloat16)
names = convkit.explain(x, w, None, padding=8, dilation=8)
assert names["grad_weight"] != "conv1d_bwd_weight_dense_tma", names
print("switched off")
"""


def test_dense_tma_grad_weight_switched_off():
    if not runs_sm90a_code():
        pytest.skip("the TMA kernels run on sm_90 devices with an sm_90a build")
    run_child_script(SWITCHED_OFF_WGRAD_SCRIPT, "switched off", CONVKIT_DENSE_TMA_WGRAD="0")


@pytest.mark.large
def test_dense_tma_grad_input_over_65535_batches(poison_outputs):
    """70000 batches (grid.z holds 65535): the grad-input's dy copy runs in two launches; dx of batches on both
    sides of the split against float64 torch. (L 17: rows of whole 16-byte units would be read without a copy.)"""
    if not runs_sm90a_code():
        pytest.skip("the TMA forward runs on sm_90 devices with an sm_90a build")
    B, C, L, dt = 70_000, 256, 17, torch.bfloat16
    x = torch.randn(B, C, L, device="cuda", dtype=dt)
    w = (torch.randn(C, C, 3, device="cuda") / (C * 3) ** 0.5).to(dt)
    assert convkit.explain(x, w, None, padding=1)["grad_input"] == TMA_GRAD_INPUT
    xr = x.clone().requires_grad_()
    y = convkit.conv1d(xr, w, None, padding=1)
    dy = torch.randn_like(y)
    (dx,) = torch.autograd.grad(y, xr, dy)
    assert torch.isfinite(dx).all()
    for b0 in (0, 65_534, B - 2):
        ref = reference(x[b0:b0 + 2], w, None, dy[b0:b0 + 2], 1, 1, 1, 1, 1)[1]
        assert_close(dx[b0:b0 + 2], ref, dt, f"grad_input, batches {b0}..{b0 + 1}")
    del x, xr, y, dy, dx
    torch.cuda.empty_cache()


def dense_tma_big_x_case(B, L, S, expect):
    """test_dense_tma_copy_in_slabs' check (also run by its child process): x (B, 512, L) bf16 through the TMA
    forward (`expect`: its name), windows at the start, middle and end of each batch against float64."""
    Cin, Cout, K, n = 512, 512, 3, 300
    dt = torch.bfloat16
    x = torch.randn(B, Cin, L, device="cuda", dtype=dt)
    w = (torch.randn(Cout, Cin, K, device="cuda") / (Cin * K) ** 0.5).to(dt)
    assert convkit.explain(x, w, None, stride=S)["forward"] == expect
    y = convkit.conv1d(x, w, None, stride=S)
    assert torch.isfinite(y).all()
    lout = y.shape[2]
    for b in range(B):
        for j0 in (0, lout // 2 + 1, lout - n):
            xs = x[b:b + 1, :, j0 * S:(j0 + n - 1) * S + K]
            ref = torch.nn.functional.conv1d(xs.double(), w.double(), stride=S)
            assert_close(y[b:b + 1, :, j0:j0 + n], ref, dt, f"batch {b}, outputs {j0}..{j0 + n}")
    del x, y
    torch.cuda.empty_cache()


# the over_2e31 shape with the copy instead of the transposing form (CONVKIT_DENSE_TMA_TX is read once per process)
BIG_X_COPY_SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[1])
import test_cuda_correctness as t
t.dense_tma_big_x_case(11, 400_000, 1, t.TMA_COPY)
print("big x copied in slabs")
"""


@pytest.mark.large
@pytest.mark.parametrize("shape", [(3, 600_001, 2), (11, 400_000, 1), "over_2e31_copied"],
                         ids=["odd_rows_one_batch_slabs", "over_2e31", "over_2e31_copied"])
def test_dense_tma_copy_in_slabs(shape, poison_outputs):
    """x over the launcher's 1 GiB copy slab: 3 batches of 614 MB with odd rows, copied and convolved a slab at a
    time (one batch per slab), each slab's y at its own offset; 11 batches of 410 MB with 16-byte aligned rows, x
    and y of 2.25e9 elements (offsets past 2^31), read as they lie by the transposing form in one launch, and the
    same with CONVKIT_DENSE_TMA_TX=0 (a child process): copied in slabs of 2, 2, 2, 2, 2, 1 batches. Every element
    written (poisoned outputs), windows at the start, middle and end of each batch against float64."""
    if not runs_sm90a_code():
        pytest.skip("the TMA forward runs on sm_90 devices with an sm_90a build")
    if shape == "over_2e31_copied":
        run_child_script(BIG_X_COPY_SCRIPT, "big x copied in slabs", CONVKIT_DENSE_TMA_TX="0",
                         CONVKIT_POISON_OUTPUTS="1")
        return
    B, L, S = shape
    dense_tma_big_x_case(B, L, S, TMA_COPY if L % 8 else TMA_TX)


# CONVKIT_DENSE_TMA_COPY=1: every shape the TMA kernel takes is copied (Cout 128 K 2: below the rule; odd rows, which
# the transposing form cannot read); =0: none (w2v-like keeps the wgmma kernel).
TMA_COPY_SCRIPT = r"""
import os, sys, torch, convkit
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
mode = os.environ["CONVKIT_DENSE_TMA_COPY"]
shape = (2, 64, 128, 2, 1001, 1, 1, 1, 1) if mode == "1" else (2, 512, 512, 3, 999, 2, 1, 1, 1)
B, Cin, Cout, K, L, S, P, D, G = shape
x = torch.randn(B, Cin, L, device="cuda").bfloat16()
w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).bfloat16()
b = torch.randn(Cout, device="cuda").bfloat16()
name = convkit.explain(x, w, b, stride=S, padding=P, dilation=D, groups=G)["forward"]
expect = "x_to_channels_last + conv1d_fwd_dense_tma" if mode == "1" else "conv1d_fwd_dense_wgmma"
assert name == expect, name
y = convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G)
assert_close(y, reference(x, w, b, torch.randn_like(y), S, P, P, D, G, None)[0], torch.bfloat16, "forward")
print("copy mode", mode, name)
"""


@pytest.mark.parametrize("mode", ["0", "1"])
def test_dense_tma_copy_switch(mode):
    if not runs_sm90a_code():
        pytest.skip("the TMA forward runs on sm_90 devices with an sm_90a build")
    run_child_script(TMA_COPY_SCRIPT, "copy mode " + mode, CONVKIT_DENSE_TMA_COPY=mode)


# CONVKIT_COPY_VW8: launch_copy's two tile shapes for rows of x_stride_l 1 with C % 64 == 0 (64 channels stored as
# 128-byte lines by default, 32 channels as 64-byte pieces with =0), each on odd rows, aligned rows, a channel-sliced
# view and an x one element off a 16-byte boundary, forward (x copied; CONVKIT_DENSE_TMA_TX=0, else aligned rows
# take the transposing form) and gradients (dy copied for the one-pass grad-input) against float64.
COPY_VW8_SCRIPT = r"""
import os, sys, torch, convkit
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close, random_laid_out
torch.manual_seed(0)
for view, B, C, L, S in (("", 2, 512, 1999, 2), ("", 3, 256, 2056, 1), ("channels", 2, 256, 1001, 1),
                         ("offset", 2, 192, 1024, 1)):
    dt = torch.bfloat16
    x = torch.randn(B, C, L, device="cuda").to(dt)
    if view == "channels":
        x = torch.randn(B, 2 * C, L, device="cuda").to(dt)[:, ::2]
    elif view == "offset":
        x = random_laid_out((B, C, L), dt, "offset")
    x.requires_grad_()
    w = (torch.randn(C, C, 3, device="cuda") / (C * 3) ** 0.5).to(dt).requires_grad_()
    b = torch.randn(C, device="cuda").to(dt)
    names = convkit.explain(x, w, b, stride=S, padding=1)
    assert names["forward"] == "x_to_channels_last + conv1d_fwd_dense_tma", (view, C, names)
    y = convkit.conv1d(x, w, b, stride=S, padding=1)
    dy = torch.randn_like(y)
    y.backward(dy)
    y_ref, dx_ref, dw_ref = reference(x, w, b, dy, S, 1, 1, 1, 1, None)[:3]
    what = f"{view or 'plain'} C {C} L {L} stride {S}"
    assert_close(y, y_ref, dt, "forward " + what)
    assert_close(x.grad, dx_ref, dt, "grad_input " + what)
    assert_close(w.grad, dw_ref, dt, "grad_weight " + what)
print("copy vw8", os.environ["CONVKIT_COPY_VW8"], "cases passed")
"""


@pytest.mark.parametrize("mode", ["0", "1"])
def test_dense_tma_copy_tile_shapes(mode):
    if not runs_sm90a_code():
        pytest.skip("the TMA forward runs on sm_90 devices with an sm_90a build")
    run_child_script(COPY_VW8_SCRIPT, "copy vw8 " + mode + " cases passed", CONVKIT_COPY_VW8=mode,
                     CONVKIT_DENSE_TMA_TX="0")  # (aligned rows: the copy, not the transposing form)


# CONVKIT_DENSE_TMA_TX=1 (read once per process): a (B, C, L) x whose rows the 4-D tensor map can describe (16-byte
# aligned start, channel and batch strides multiples of 8 elements) goes to the TMA forward read as it lies and
# transposed in shared memory (conv1d_fwd_dense_tma_tx) instead of the copy or the register-staged kernels (by
# default only instead of the copy, so most of these small shapes would take the register-staged kernels). Paddings
# and dilations that are not multiples of 8 start the boxes before the window (rounded down to 16 bytes). (=1 also
# sends the grad-input's phases below the copy rule to the TMA forward on a copy of dy: correct, not the default.)
# Cases: strides 1-4 (phase-split images), dilations, padding, the per-tap segments of a large dilation at stride 1,
# K 1-16, both row widths (Cin/groups % 32 == 0 or only % 16), groups, partial and two-block m tiles, odd lengths
# through views of longer rows, a batch-strided view, a channel slice; an x one element off alignment keeps the copy.
# Forward with bias and GELU, poisoned outputs, then the gradients (the grad-input's phases may run the forward).
TMA_TX_SCRIPT = r"""
import sys, torch, convkit
from convkit.functional import resolve_padding
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
torch.manual_seed(0)
cases = [  # name, B, Cin, Cout, K, L, row, S, P, D, G
    ("kb76", 2, 64, 128, 3, 3000, 3000, 3, 0, 4, 1),
    ("kb67", 2, 64, 128, 3, 1024, 1024, 1, 0, 1, 1),
    ("odd_rows", 3, 64, 128, 3, 1001, 1008, 1, 1, 1, 1),
    ("stride2_odd", 2, 128, 256, 3, 2001, 2008, 2, 1, 1, 1),
    ("stride4_k4", 1, 32, 96, 4, 777, 784, 4, 3, 1, 1),
    ("rows32_k5", 2, 48, 128, 5, 999, 1000, 1, 2, 2, 1),
    ("segments", 2, 64, 128, 2, 1500, 1504, 1, 0, 300, 1),
    ("k1", 2, 64, 128, 1, 600, 600, 1, 0, 1, 1),
    ("k9_d2", 1, 64, 80, 9, 700, 704, 1, 8, 2, 1),
    ("grouped", 2, 128, 256, 3, 640, 640, 1, 1, 1, 2),
    ("groups_cin16", 2, 64, 512, 3, 500, 504, 2, 1, 3, 4),
    ("batch_view", 2, 64, 128, 3, 800, 800, 1, 1, 1, 1),
    ("channel_slice", 2, 64, 128, 3, 512, 512, 1, 1, 1, 1),
    ("tail", 1, 64, 128, 3, 20, 24, 3, 9, 1, 1),
]
for dtype in (torch.bfloat16, torch.float16):
    for name, B, Cin, Cout, K, L, row, S, P, D, G in cases:
        pl, pr = resolve_padding(P, K, S, D)
        x = torch.randn(B, Cin, row, device="cuda").to(dtype)[:, :, :L]
        if name == "batch_view":
            x = torch.randn(2 * B, Cin, L, device="cuda").to(dtype)[::2]
        elif name == "channel_slice":
            x = torch.randn(B, 2 * Cin, L, device="cuda").to(dtype)[:, Cin:]
        x.requires_grad_()
        w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(dtype).requires_grad_()
        b = torch.randn(Cout, device="cuda").to(dtype).requires_grad_()
        names = convkit.explain(x, w, b, stride=S, padding=P, dilation=D, groups=G)
        assert names["forward"] == "conv1d_fwd_dense_tma_tx", (name, names)
        y = convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G, activation="gelu")
        dy = torch.randn_like(y)
        y.backward(dy)
        y_ref, dx_ref, dw_ref, db_ref = reference(x, w, b, dy, S, pl, pr, D, G, "gelu")[:4]
        what = f"{dtype} {name}"
        assert_close(y, y_ref, dtype, "forward " + what)
        assert_close(x.grad, dx_ref, dtype, "grad_input " + what)
        assert_close(w.grad, dw_ref, dtype, "grad_weight " + what)
x = torch.randn(2 * 64 * 1024 + 1, device="cuda").to(torch.bfloat16)[1:].view(2, 64, 1024)
w = torch.randn(512, 64, 3, device="cuda").to(torch.bfloat16)
assert convkit.explain(x, w, None)["forward"] == "x_to_channels_last + conv1d_fwd_dense_tma"
print("tma tx cases passed")
"""


@pytest.mark.parametrize("skew", ["0", "1"])
def test_dense_tma_forward_transposing_form(skew):
    """skew 1 (the default): strided windows get a few more rows per phase than a multiple of 8 (fewer bank
    conflicts in the transposers' stores; partial 8-position blocks, whose extra rows go to the scratch rows)."""
    if not runs_sm90a_code():
        pytest.skip("the TMA forward runs on sm_90 devices with an sm_90a build")
    run_child_script(TMA_TX_SCRIPT, "tma tx cases passed", CONVKIT_DENSE_TMA_TX="1", CONVKIT_POISON_OUTPUTS="1",
                     CONVKIT_TMA_TX_WQ_SKEW=skew)


# CONVKIT_DENSE_TMA=0: the WGMMA_CASES that the TMA forward takes by default (channels-last x, or (B, C, L) x
# through the copy) run the register-staged wgmma forward again (its realigning loads on odd rows, the strided
# loads of a (B, L, C) view, a partial 256-row tile, K 8), forward and gradients with GELU against float64.
TMA_OFF_SCRIPT = r"""
import sys, torch, convkit
from convkit.functional import resolve_padding
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
torch.manual_seed(0)
for dtype in (torch.bfloat16, torch.float16):
    for name, B, Cin, Cout, K, L, S, P, D, G in %r:
        pl, pr = resolve_padding(P, K, S, D)
        x = torch.randn(B, Cin, L, device="cuda").to(dtype)
        if "view" in name:
            x = torch.randn(B, L, Cin, device="cuda").to(dtype).transpose(1, 2)
        x.requires_grad_()
        w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(dtype).requires_grad_()
        b = torch.randn(Cout, device="cuda").to(dtype).requires_grad_()
        names = convkit.explain(x, w, b, stride=S, padding=P, dilation=D, groups=G)
        assert names["forward"] == "conv1d_fwd_dense_wgmma", (name, names)
        y = convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G, activation="gelu")
        dy = torch.randn_like(y)
        y.backward(dy)
        y_ref, dx_ref, dw_ref, db_ref = reference(x, w, b, dy, S, pl, pr, D, G, "gelu")[:4]
        what = f"{dtype} {name}"
        assert_close(y, y_ref, dtype, "forward " + what)
        assert_close(x.grad, dx_ref, dtype, "grad_input " + what)
        assert_close(w.grad, dw_ref, dtype, "grad_weight " + what)
        assert_close(b.grad, db_ref, dtype, "grad_bias " + what, terms=dy.double().pow(2).sum(dim=(0, 2)).sqrt())
print("tma off: wgmma forward cases passed")
"""


def test_dense_tma_forward_switched_off():
    if not runs_sm90a_code():
        pytest.skip("the TMA forward runs on sm_90 devices with an sm_90a build")
    cases = [c for c in WGMMA_CASES if "view" in c[0] or tma_copy_expected(c[2], c[3], c[4], c[6], c[9], torch.bfloat16)]
    assert len(cases) >= 4, cases
    run_child_script(TMA_OFF_SCRIPT % (cases,), "tma off: wgmma forward cases passed", CONVKIT_DENSE_TMA="0")


# CONVKIT_DENSE_WGMMA=0 (read once per process): the wgmma shapes run the mma.sync kernel's staged-weight
# path (forward and grad-input) and the mma.sync grad-weight, which the wgmma kernels otherwise take over on
# the H200: MMA_CASES' wide cases and a wavenet-like one, forward and gradients with GELU.
WGMMA_OFF_SCRIPT = r"""
import sys, torch, convkit
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
torch.manual_seed(0)
cases = [(1, 512, 512, 3, 257, 1, 1, 1, 1), (1, 1024, 128, 3, 301, 2, 1, 1, 2), (1, 256, 256, 3, 700, 1, 8, 8, 1),
         (2, 128, 128, 2, 2100, 1, 0, 512, 1)]
for dtype in (torch.bfloat16, torch.float16):
    for B, Cin, Cout, K, L, S, P, D, G in cases:
        x = torch.randn(B, Cin, L, device="cuda").to(dtype).requires_grad_()
        w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(dtype).requires_grad_()
        b = torch.randn(Cout, device="cuda").to(dtype)
        names = convkit.explain(x, w, b, stride=S, padding=P, dilation=D, groups=G)
        assert names["forward"] == "conv1d_fwd_dense_mma", names
        assert names["grad_input"] == "conv1d_bwd_input_dense_mma", names
        assert names["grad_weight"] == "conv1d_bwd_weight_dense_mma", names
        y = convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G, activation="gelu")
        dy = torch.randn_like(y)
        y.backward(dy)
        y_ref, dx_ref, dw_ref = reference(x, w, b, dy, S, P, P, D, G, "gelu")[:3]
        what = f"{dtype} {(B, Cin, Cout, K, L, S, P, D, G)}"
        assert_close(y, y_ref, dtype, "forward " + what)
        assert_close(x.grad, dx_ref, dtype, "grad_input " + what)
        assert_close(w.grad, dw_ref, dtype, "grad_weight " + what)
print("mma.sync cases passed")
"""


def test_dense_forward_with_wgmma_switched_off():
    # (TMA grad-weight off too: its tap-rows default rule takes Cout/groups >= 256, e.g. the first case)
    run_child_script(WGMMA_OFF_SCRIPT, "mma.sync cases passed", CONVKIT_DENSE_WGMMA="0", CONVKIT_DENSE_TMA_WGRAD="0")


@pytest.mark.parametrize("length", [1002, 1008], ids=["rows_4_byte", "rows_16_byte"])
def test_dense_mma_ring_on_aligned_rows(length, poison_outputs):
    """x rows that are 4-byte (or 16-byte) aligned go through the cp.async ring (kernel <T, true, true>),
    forward and stride-1 grad-input (on an sm_90a build the one-pass TMA kernel takes the grad-input: Cin 32), and
    give torch's results."""
    x, w, b = make_inputs(2, 32, 48, 3, length, 1, torch.bfloat16)
    names = cuda_kernel_names(lambda: check_case(x, w, b, 1, 1, 1, 1, torch.bfloat16))
    ring = [n for n in names if "conv1d_fwd_dense_mma_kernel<__nv_bfloat16, true, true>" in n]
    assert ring, sorted(names)


@pytest.mark.parametrize("shape", [(2, 32, 48, 3, 1001), (1, 512, 512, 3, 257)], ids=["resident", "staged"])
def test_dense_mma_fp32_master_weights(shape, poison_outputs):
    x, w, b = make_inputs(*shape, 1, torch.bfloat16)
    w, b = w.float(), b.float()
    names = convkit.explain(x, w, b, padding=1)
    assert names["forward"] == "conv1d_fwd_dense_mma" and names["grad_input"] == "conv1d_bwd_input_dense_mma"
    check_case(x, w, b, 1, 1, 1, 1, torch.bfloat16)


# fp32 on the dense implicit-GEMM kernels (kernels/conv1d_fwd_dense_f32.cu, kernels/conv1d_dense_f32.cu): IEEE FFMA when
# torch.backends.cudnn.allow_tf32 is False, TF32 tensor cores when it is True; grad-input runs on the
# same kernel phase by phase. MMA_CASES plus shapes with ragged 128 x 128 tiles and a reduction
# (Cin/groups * K) that is not a multiple of the 16-deep stage.
F32_CASES = MMA_CASES + [
    ("red_9_cin3_k3", 2, 3, 130, 3, 300, 1, 1, 1, 1),
    ("w2v_first_like_cin2_k10_s5", 2, 2, 40, 10, 1003, 5, 0, 1, 1),
    ("cout_257_strided_view", 2, 20, 257, 2, 259, 1, 1, 3, 1),
    # the window kernel's 8-channel stages (K 13), one window per tap (D 300, stride 2), K 17 on the im2col kernel
    ("k13_8_channel_stages", 2, 24, 40, 13, 500, 1, 6, 1, 1),
    ("k3_s2_d300_tap_windows", 2, 16, 24, 3, 1500, 2, 5, 300, 1),
    ("k17_im2col", 1, 16, 24, 17, 300, 1, 8, 1, 1),
    # one window per tap in 64 x 256 tiles (Cout/groups <= 64: the windows of 256 outputs; D 300 above is one window
    # there) and in 128 x 128 tiles (Cout 96)
    ("k2_d600_tap_windows_wide", 2, 16, 24, 2, 2000, 1, 3, 600, 1),
    ("k3_s2_d300_tap_windows_cout96", 1, 16, 96, 3, 1500, 2, 5, 300, 1),
]


# Narrow reductions, Cin/groups < 8 and Cin/groups * K <= 64 (kernels/conv1d_fwd_dense_narrow.cu, any
# dtype): w2v's first layer, the largest reduction (7 x 9, 1 x 64), partial channel tiles (Cout/groups 4,
# 9, 20; 520 = 8 tiles of 64 and one of 8), padding wider than the kernel, one output, odd lengths (rows that are
# not 16-byte aligned: the narrower stores), a (B, L, C) view of x, a dilation whose x window per tile passes the
# tiled shape's shared memory (the per-thread shapes then).
def narrow_forward_name(x, K, S, D, dtype):
    """The narrow forward explain() names: the table's "dense_narrow" entry for (K, S, D) where there is one (fp32 /
    fp16 / bf16, x rows contiguous, the table not switched off by CONVKIT_FORCE_GENERIC), else the runtime kernel."""
    if (("dense_narrow", K, S, D) in convkit.spec_entries() and dtype != torch.float64 and x.stride(2) == 1
            and os.environ.get("CONVKIT_FORCE_GENERIC", "0") in ("", "0")
            and os.environ.get("CONVKIT_DENSE_NARROW_TILE") != "1"
            and os.environ.get("CONVKIT_DENSE_NARROW_COALESCED") not in ("0", "1")):
        return f"conv1d_fwd_dense_narrow<K={K},S={S},D={D}>"
    return "conv1d_fwd_dense_narrow"


NARROW_CASES = [
    ("w2v_first_like_k10_s5", 2, 1, 40, 10, 1003, 5, 0, 1, 1),
    ("w2v_first_cout520", 2, 1, 520, 10, 2503, 5, 0, 1, 1),
    ("d6000_untiled", 1, 2, 24, 3, 13000, 1, 0, 6000, 1),
    ("cin3_k7_same_d2", 2, 3, 20, 7, 777, 1, "same", 2, 1),
    ("cin7_k9_s2", 2, 7, 16, 9, 1001, 2, 4, 1, 1),
    ("groups_3_cin2_causal", 2, 6, 12, 4, 515, 1, "causal", 1, 3),
    ("cin1_k64_pad70", 1, 1, 9, 64, 300, 1, 70, 1, 1),
    ("one_output", 3, 2, 5, 3, 3, 1, 0, 1, 1),
    ("blc_view_s3_d2", 2, 4, 24, 5, 2051, 3, 2, 2, 1),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", NARROW_CASES, ids=[c[0] for c in NARROW_CASES])
def test_dense_narrow_forward_matches_float64_torch(case, dtype, poison_outputs):
    _, B, Cin, Cout, K, L, stride, padding, dilation, groups = case
    x, w, b = make_inputs(B, Cin, Cout, K, L, groups, dtype)
    if "view" in case[0]:
        x = torch.randn(B, L, Cin, device="cuda").to(dtype).transpose(1, 2)
    names = convkit.explain(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    assert names["forward"] == narrow_forward_name(x, K, stride, dilation, dtype)
    check_case(x, w, b, stride, padding, dilation, groups, dtype, activation="gelu")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_dense_narrow_fp32_weights(dtype, poison_outputs):
    x, _, _ = make_inputs(2, 2, 24, 10, 1001, 1, dtype)
    _, w, b = make_inputs(2, 2, 24, 10, 1001, 1, torch.float32)
    assert convkit.explain(x, w, b, stride=5)["forward"] == narrow_forward_name(x, 10, 5, 1, dtype)
    check_case(x, w, b, 5, 0, 1, 1, dtype, activation="silu")


# The narrow forward has two per-thread block shapes (8 positions x 8 channels per thread for 16-bit dtypes, one
# position x 16 channels for fp32 / fp64); CONVKIT_DENSE_NARROW_COALESCED=1 / =0 forces one for every dtype, so
# each dtype runs the shape it does not run by default; CONVKIT_DENSE_NARROW_TILE=1 takes the tiled shape (x window
# and weights in shared memory, 64 channels x 256 positions a block) where its shared memory fits, the per-thread
# shapes elsewhere (d6000_untiled). Read once per process: NARROW_CASES run again in a child process.
NARROW_SCRIPT = r"""
import os, sys, torch, convkit
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
from convkit.functional import resolve_padding
torch.manual_seed(0)
for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
    for name, B, Cin, Cout, K, L, S, P, D, G in @CASES@:
        for w_dtype in ((dtype, torch.float32) if dtype in (torch.float16, torch.bfloat16) else (dtype,)):
            x = torch.randn(B, Cin, L, device="cuda").to(dtype)
            if "view" in name:  # a (B, L, C) tensor seen as (B, C, L)
                x = torch.randn(B, L, Cin, device="cuda").to(dtype).transpose(1, 2)
            w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(w_dtype)
            b = torch.randn(Cout, device="cuda").to(w_dtype)
            names = convkit.explain(x, w, b, stride=S, padding=P, dilation=D, groups=G)
            assert names["forward"] == "conv1d_fwd_dense_narrow", names
            y = convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G, activation="silu")
            pl, pr = resolve_padding(P, K, S, D)
            y_ref = reference(x, w, b, torch.zeros_like(y), S, pl, pr, D, G, "silu")[0]
            assert_close(y, y_ref, dtype, f"forward {name} {dtype} w {w_dtype}")
            if os.environ.get("CONVKIT_DENSE_NARROW_TILE") == "1" and w_dtype == dtype == torch.bfloat16:
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                    convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G)
                    torch.cuda.synchronize()
                ran = {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}
                tiled = [n for n in ran if "conv1d_fwd_dense_narrow_tile_kernel" in n]
                assert bool(tiled) == (name != "d6000_untiled"), (name, sorted(ran))
                # the staged epilogue is the kernel's <bf16, true> instance (CONVKIT_DENSE_NARROW_STAGED=1)
                staged = any("true" in n or "(bool)1" in n for n in tiled)
                assert staged == (bool(tiled) and os.environ.get("CONVKIT_DENSE_NARROW_STAGED") == "1"), sorted(ran)
print("forced narrow shape cases passed")
"""


@pytest.mark.parametrize("shape", ["runs", "coalesced", "tiled", "tiled_staged"])
def test_dense_narrow_forced_shape(shape):
    # (a forced shape also skips a dense_narrow table entry: the child expects the runtime kernel's name for
    # every (K, S, D)). tiled_staged: the tiled shape's staged epilogue (16-bit y through shared memory, aligned
    # 16-byte stores; CONVKIT_DENSE_NARROW_STAGED=1), on rows of odd lengths split into several pieces.
    run_child_script(NARROW_SCRIPT.replace("@CASES@", repr(NARROW_CASES)), "forced narrow shape cases passed",
                     CONVKIT_DENSE_NARROW_COALESCED="1" if shape == "coalesced" else "0",
                     CONVKIT_DENSE_NARROW_TILE="1" if shape.startswith("tiled") else "0",
                     CONVKIT_DENSE_NARROW_STAGED="1" if shape == "tiled_staged" else None,
                     CONVKIT_POISON_OUTPUTS="1", CONVKIT_FORCE_GENERIC=None)


def test_dense_narrow_tiled_by_default(poison_outputs):
    """By default the tiled shape runs where the group has 64 output channels or more (w2v_first-like, a grouped
    call), the per-thread shapes where it has fewer; each against float64 torch."""
    if any(os.environ.get(v) in ("0", "1") for v in ("CONVKIT_DENSE_NARROW_TILE", "CONVKIT_DENSE_NARROW_COALESCED")):
        pytest.skip("a narrow shape is forced in this process")
    for dtype in (torch.bfloat16, torch.float32):
        for Cin, Cout, groups, tiled in ((1, 64, 1, True), (1, 520, 1, True), (1, 63, 1, False), (2, 128, 2, True),
                                         (2, 126, 2, False)):
            x, w, b = make_inputs(2, Cin, Cout, 10, 2503, groups, dtype)
            ran = cuda_kernel_names(lambda: convkit.conv1d(x, w, b, stride=5, groups=groups))
            kernel = "conv1d_fwd_dense_narrow_tile_kernel" if tiled else "conv1d_fwd_dense_narrow_kernel"
            assert any(kernel in n for n in ran), (Cout, groups, dtype, sorted(ran))
            check_case(x, w, b, 5, 0, 1, groups, dtype, activation="gelu")

# A "dense_narrow" table entry K 10, stride 5, dilation 1 (csrc/specializations.json; wav2vec2's first layer;
# kernels/conv1d_fwd_dense_narrow_spec.cuh: each thread's x window in registers). The table has had no such entry
# since session 41 (the entry measured slower than the runtime kernels on w2v_first, H100): this skips unless one is
# added back. Windows cut by the row's ends,
# a padding past the whole window (outputs of bias alone), reductions up to 60 (Cin 6), groups, a channel multiplier
# of 8 (dense-like depthwise), partial channel tiles, several position tiles, one output, a row slice one element
# in (odd offsets, row pitch L + 1), and a position-strided x (the runtime kernel then). Its forward gives the same
# bits as the runtime kernel's (same FMA order per output, same epilogue), checked without an activation; all four
# results against float64 with GELU.
NARROW_SPEC_CASES = [  # name, B, Cin, Cout, L, padding, groups, x: "plain", "slice" or "strided"
    ("w2v_like", 2, 1, 40, 4003, 0, 1, "plain"),
    ("pads_both_ends", 2, 1, 24, 3001, 7, 1, "plain"),
    ("pad_past_window", 1, 1, 16, 200, 60, 1, "plain"),
    ("cin6_red60_cout20", 2, 6, 20, 2053, 3, 1, "plain"),
    ("groups2_cin4", 2, 4, 16, 1501, 2, 2, "plain"),
    ("multiplier8_depthwise", 2, 3, 24, 1201, 0, 3, "plain"),
    ("several_tiles", 1, 2, 12, 15007, 4, 1, "plain"),
    ("one_output", 3, 1, 8, 10, 0, 1, "plain"),
    ("row_slice_offset", 2, 1, 32, 5001, 0, 1, "slice"),
    ("strided_x", 2, 2, 16, 1001, 0, 1, "strided"),
]


@pytest.mark.parametrize("w_fp32", [False, True], ids=["w_same", "w_fp32"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", NARROW_SPEC_CASES, ids=[c[0] for c in NARROW_SPEC_CASES])
def test_dense_narrow_table_entry(case, dtype, w_fp32, monkeypatch, poison_outputs):
    if ("dense_narrow", 10, 5, 1) not in convkit.spec_entries():
        pytest.skip("this build has no dense_narrow entry K 10, stride 5, dilation 1")
    if w_fp32 and dtype == torch.float32:
        pytest.skip("fp32 weights are for 16-bit inputs")
    name, B, Cin, Cout, L, P, G, layout = case
    K, S = 10, 5
    x, w, b = make_inputs(B, Cin, Cout, K, {"plain": L, "slice": L + 1, "strided": 2 * L}[layout], G, dtype)
    x = {"plain": x, "slice": x[:, :, 1:], "strided": x[:, :, ::2]}[layout]
    if w_fp32:
        w, b = w.float(), b.float()
    monkeypatch.delenv("CONVKIT_FORCE_GENERIC", raising=False)
    names = convkit.explain(x, w, b, stride=S, padding=P, groups=G)
    assert names["forward"] == narrow_forward_name(x, K, S, 1, dtype), names
    assert (names["forward"] == "conv1d_fwd_dense_narrow<K=10,S=5,D=1>") == (layout != "strided"), names
    y = convkit.conv1d(x, w, b, stride=S, padding=P, groups=G)
    monkeypatch.setenv("CONVKIT_FORCE_GENERIC", "1")  # the runtime-shape kernel on the same tensors
    assert convkit.explain(x, w, b, stride=S, padding=P, groups=G)["forward"] == "conv1d_fwd_dense_narrow"
    y_runtime = convkit.conv1d(x, w, b, stride=S, padding=P, groups=G)
    monkeypatch.delenv("CONVKIT_FORCE_GENERIC")
    assert torch.equal(y, y_runtime), f"{name}: the entry's forward differs from the runtime kernel's"
    check_case(x, w, b, S, P, 1, G, dtype, activation="gelu")


# Few output channels, long reduction (Cout/groups <= 4, Cin/groups >= 8) on the narrow kernel
# ("narrow_out"), for the forward and for grad-input phases whose Cout is the call's Cin (w2v's first
# layer: Cin 1 -> each phase reduces over Cout = 40 here).
NARROW_OUT_CASES = [  # name, B, Cin, Cout, K, L, stride, padding, dilation, groups, the narrow_out part, its longest reduction
    ("cout1", 2, 64, 1, 3, 1001, 1, 1, 1, 1, "forward", 192),
    ("cout4_s2_d2", 2, 96, 4, 5, 777, 2, 2, 2, 1, "forward", 480),
    ("groups2_causal", 2, 64, 4, 3, 515, 1, "causal", 1, 2, "forward", 96),
    ("red_2048", 1, 512, 2, 4, 300, 1, 3, 1, 1, "forward", 2048),
    ("red_1024", 1, 256, 1, 4, 300, 1, 2, 1, 1, "forward", 1024),
    ("w2v_first_like", 2, 1, 40, 10, 1003, 5, 0, 1, 1, "grad_input", 80),
    ("cin4_s2", 2, 4, 64, 3, 501, 2, 1, 1, 1, "grad_input", 128),
    # phases of 1 and 2 taps: reductions 1024 and 2048; in fp64 (limit 1024) the phases would split, so
    # the whole grad-input takes the kernels without narrow_out
    ("gi_phases_1024_2048", 1, 2, 1024, 3, 301, 2, 1, 1, 1, "grad_input", 2048),
    # several position tiles per row (Lout 2608) with a padding past the taps; an output shorter than a warp
    ("cout1_long_pad5", 2, 64, 1, 3, 2600, 1, 5, 1, 1, "forward", 192),
    ("cout2_lout18", 1, 32, 2, 3, 20, 1, 0, 1, 1, "forward", 96),
    # S * Cin = 9 phase channels: more than narrow_out8 takes, so the phases run one by one (strided buffer rows)
    ("cin3_s3_phases", 2, 3, 64, 6, 601, 3, 0, 1, 1, "grad_input", 128),
]


@pytest.mark.parametrize("w_fp32", [False, True], ids=["w_same", "w_fp32"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", NARROW_OUT_CASES, ids=[c[0] for c in NARROW_OUT_CASES])
def test_dense_narrow_out_few_output_channels(case, dtype, w_fp32, poison_outputs):
    name, B, Cin, Cout, K, L, S, P, D, G, part, red = case
    if w_fp32 and dtype not in (torch.float16, torch.bfloat16):
        pytest.skip("fp32 weights are for 16-bit inputs")
    x, w, b = make_inputs(B, Cin, Cout, K, L, G, dtype)
    if w_fp32:
        w, b = w.float(), b.float()
    names = convkit.explain(x, w, b, stride=S, padding=P, dilation=D, groups=G)
    fits = red <= (1024 if dtype == torch.float64 else 2048)
    assert names[part].endswith("_dense_narrow_out") == fits, names
    check_case(x, w, b, S, P, D, G, dtype, activation="gelu")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_dense_narrow_out_grad_input_phases_in_one_pass(dtype, poison_outputs):
    """Where the grad-input's stride phases run the narrow_out kernel, they run as one convolution of dy with the
    phases as output channels (dispatch.cpp, unified_grad_input): w2v_first_like (S 5, Cin 1: five channels) and
    cin4_s2 (S 2, Cin 4: eight, one phase without a tap at one offset: zero weights) on the 8-channel shape,
    instead of one pass over dy per phase (1 or 4 channels); all four results against float64 torch."""
    for name in ("w2v_first_like", "cin4_s2"):
        _, B, Cin, Cout, K, L, S, P, D, G, _, _ = next(c for c in NARROW_OUT_CASES if c[0] == name)
        x, w, b = make_inputs(B, Cin, Cout, K, L, G, dtype)
        ran = cuda_kernel_names(lambda: check_case(x, w, b, S, P, D, G, dtype, activation="gelu"))
        narrow = sorted(n for n in ran if "conv1d_fwd_dense_narrow_kernel" in n)
        assert any(re.search(r"narrow_kernel<[^,]+, 128, 8, 8, 1024>", n) for n in narrow), narrow
        assert not any(re.search(r"narrow_kernel<[^,]+, 128, 8, [14], 2048>", n) for n in narrow), narrow


def test_dense_narrow_out_switch_off():
    """CONVKIT_DENSE_NARROW_OUT=0 (read once per process) puts these calls back on the tensor-core /
    fp32 tile kernels; a child process checks the routing and the results."""
    script = r"""
import sys, torch, convkit
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
from convkit.functional import resolve_padding
torch.manual_seed(0)
torch.backends.cudnn.allow_tf32 = False
for dtype in (torch.float32, torch.bfloat16):
    for name, B, Cin, Cout, K, L, S, P, D, G, part, red in @CASES@:
        x = torch.randn(B, Cin, L, device="cuda").to(dtype).requires_grad_()
        w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(dtype)
        b = torch.randn(Cout, device="cuda").to(dtype)
        names = convkit.explain(x, w, b, stride=S, padding=P, dilation=D, groups=G)
        assert not any("narrow_out" in v for v in names.values()), names
        y = convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G)
        dy = torch.randn_like(y)
        y.backward(dy)
        pl, pr = resolve_padding(P, K, S, D)
        y_ref, dx_ref = reference(x.detach(), w, b, dy, S, pl, pr, D, G, None)[:2]
        assert_close(y, y_ref, dtype, f"forward {name} {dtype}")
        assert_close(x.grad, dx_ref, dtype, f"grad_input {name} {dtype}")
print("narrow_out off cases passed")
""".replace("@CASES@", repr(NARROW_OUT_CASES[:3] + NARROW_OUT_CASES[5:7]))
    run_child_script(script, "narrow_out off cases passed", CONVKIT_DENSE_NARROW_OUT="0",
                     CONVKIT_POISON_OUTPUTS="1")


def test_dense_narrow_out_lanes_shape():
    """CONVKIT_DENSE_NARROW_OUT_LANES=1 (opt-in, read once per process): the narrow_out / narrow_out8 calls run the
    lanes shape (a warp on 256 consecutive-lane outputs of every output channel); NARROW_OUT_CASES forward and
    gradients against float64 in a child process, every dtype, fp32 weights beside 16-bit input, the kernel that
    ran. (A reduction the case's dtype does not fit, red_2048 and gi_phases_1024_2048 in fp64, takes other kernels.)"""
    script = r"""
import sys, torch, convkit
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
from convkit.functional import resolve_padding
torch.manual_seed(0)
torch.backends.cudnn.allow_tf32 = False
for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
    for name, B, Cin, Cout, K, L, S, P, D, G, part, red in @CASES@:
        for w_dtype in ((dtype, torch.float32) if dtype in (torch.float16, torch.bfloat16) else (dtype,)):
            x = torch.randn(B, Cin, L, device="cuda").to(dtype).requires_grad_()
            w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(w_dtype).requires_grad_()
            b = torch.randn(Cout, device="cuda").to(w_dtype)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                y = convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G, activation="gelu")
                dy = torch.randn_like(y)
                y.backward(dy)
                torch.cuda.synchronize()
            ran = {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}
            fits = red <= (1024 if dtype == torch.float64 else 2048)
            assert any("narrow_out_lanes_kernel" in n for n in ran) == fits, (name, dtype, sorted(ran))
            pl, pr = resolve_padding(P, K, S, D)
            y_ref, dx_ref, dw_ref = reference(x.detach(), w.detach(), b, dy, S, pl, pr, D, G, "gelu")[:3]
            what = f"{name} {dtype} w {w_dtype}"
            assert_close(y, y_ref, dtype, "forward " + what)
            assert_close(x.grad, dx_ref, dtype, "grad_input " + what)
            assert_close(w.grad, dw_ref, dtype, "grad_weight " + what)
print("narrow_out lanes cases passed")
""".replace("@CASES@", repr(NARROW_OUT_CASES))
    run_child_script(script, "narrow_out lanes cases passed", CONVKIT_DENSE_NARROW_OUT_LANES="1",
                     CONVKIT_POISON_OUTPUTS="1")


@pytest.mark.parametrize("tf32", [False, True], ids=["ieee", "tf32"])
@pytest.mark.parametrize("case", F32_CASES, ids=[c[0] for c in F32_CASES])
def test_dense_f32_forward_and_grad_input_match_float64_torch(case, tf32, poison_outputs):
    _, B, Cin, Cout, K, L, stride, padding, dilation, groups = case
    torch.backends.cudnn.allow_tf32 = tf32
    x, w, b = make_inputs(B, Cin, Cout, K, L, groups, torch.float32)
    if "view" in case[0]:
        x = torch.randn(B, L, Cin, device="cuda").transpose(1, 2)
    names = convkit.explain(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    kind = "tf32" if tf32 else "f32"
    # a reduction over fewer than 8 input channels runs on the narrow kernel (IEEE FMAs) instead
    assert names["forward"] == (narrow_forward_name(x, K, stride, dilation, torch.float32) if Cin // groups < 8
                                else f"conv1d_fwd_dense_{kind}")
    # ... and a grad-input with at most 4 input channels per group on its few-output-channel use
    assert names["grad_input"] == ("conv1d_bwd_input_dense_narrow_out" if Cin // groups <= 4
                                   else f"conv1d_bwd_input_dense_{kind}")
    assert names["grad_weight"] == f"conv1d_bwd_weight_dense_{kind}"
    check_case(x, w, b, stride, padding, dilation, groups, torch.float32, activation="silu",
               tol=TF32_REL_TOL if tf32 else None)


# fp32 calls with one input channel per group and a channel multiplier of 8 or more take the fp32 tile
# grad-weight (the default; CONVKIT_F32_WGRAD_DENSE_LIKE=0 sends them to the generic one): w2v_first-like (Cin 1, stride
# 5, K 10) and a grouped one (Cin 4 in 4 groups, multiplier 16), TF32 and IEEE, all three gradients.
F32_WGRAD_DENSE_LIKE_SCRIPT = r"""
import sys, torch, convkit
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close, TF32_REL_TOL
torch.manual_seed(0)
for tf32 in (False, True):
    torch.backends.cudnn.allow_tf32 = tf32
    for B, Cin, Cout, K, L, S, P, G in ((2, 1, 64, 10, 2001, 5, 0, 1), (2, 4, 64, 3, 999, 1, 1, 4)):
        x = torch.randn(B, Cin, L, device="cuda").requires_grad_()
        w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).requires_grad_()
        b = torch.randn(Cout, device="cuda").requires_grad_()
        names = convkit.explain(x, w, b, stride=S, padding=P, groups=G)
        kind = "tf32" if tf32 else "f32"
        assert names["grad_weight"] == f"conv1d_bwd_weight_dense_{kind}", names
        y = convkit.conv1d(x, w, b, stride=S, padding=P, groups=G)
        dy = torch.randn_like(y)
        y.backward(dy)
        y_ref, dx_ref, dw_ref, db_ref = reference(x, w, b, dy, S, P, P, 1, G)
        tol = TF32_REL_TOL if tf32 else None
        what = f"{kind} {(B, Cin, Cout, K, L, S, P, G)}"
        assert_close(y, y_ref, torch.float32, "forward " + what, tol)
        assert_close(x.grad, dx_ref, torch.float32, "grad_input " + what, tol)
        assert_close(w.grad, dw_ref, torch.float32, "grad_weight " + what, tol)
        assert_close(b.grad, db_ref, torch.float32, "grad_bias " + what, tol, terms=dy.double().pow(2).sum(dim=(0, 2)).sqrt())
print("f32 grad-weight dense-like cases passed")
"""


def test_f32_grad_weight_dense_like():
    # the default route (an inherited CONVKIT_F32_WGRAD_DENSE_LIKE is unset), poisoned outputs
    run_child_script(F32_WGRAD_DENSE_LIKE_SCRIPT, "f32 grad-weight dense-like cases passed",
                     CONVKIT_F32_WGRAD_DENSE_LIKE=None, CONVKIT_POISON_OUTPUTS="1")


# The fp32 forward's switches: CONVKIT_DENSE_F32_WINDOW=0 puts every call on the im2col kernel, CONVKIT_DENSE_F32_CC=8
# gives the window kernel 8-channel stages everywhere, CONVKIT_DENSE_F32_FFMA_2BLOCKS=0 runs IEEE at one block per SM
# (the default: two where three stages fit twice, as TF32), CONVKIT_DENSE_F32_STAGES=3 keeps paired blocks at three
# stages (the default: four where they fit twice, as in the stride-2 case below), CONVKIT_DENSE_F32_WIDE=0 keeps
# 128 x 128 tiles where Cout/groups <= 64 (the default: 64 x 256, the grouped case below and every grad-input of Cin
# <= 64), CONVKIT_DENSE_F32_SHIFT=1 reads the IEEE taps whose rows are not 16-byte aligned by aligned loads and a
# compile-time pick (the default: 4-byte loads; taps 3 and 1 floats into a unit in the first case, 1 in the second,
# 2 in the third, in the forward and the grad-input phases); either way forward and grad-input (its phases run the same kernel) match float64 torch, TF32 and IEEE,
# poisoned outputs.
F32_SWITCH_SCRIPT = r"""
import os, re, sys, torch, convkit
from torch.profiler import ProfilerActivity, profile
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close, TF32_REL_TOL
torch.manual_seed(0)
window = os.environ.get("CONVKIT_DENSE_F32_WINDOW") != "0"
for tf32 in (False, True):
    torch.backends.cudnn.allow_tf32 = tf32
    # (the last: TF32's 64 x 256 plan does not fit (K 8, stride 8: 2048-position windows), so 128 x 128)
    for B, Cin, Cout, K, L, S, P, D, G in ((2, 64, 128, 3, 1000, 1, 1, 1, 1), (2, 48, 96, 3, 1001, 2, 1, 1, 1),
                                            (1, 32, 80, 5, 777, 1, 4, 2, 2), (1, 16, 24, 8, 3000, 8, 0, 1, 1)):
        x = torch.randn(B, Cin, L, device="cuda").requires_grad_()
        w = torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5
        b = torch.randn(Cout, device="cuda")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            y = convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G)
            torch.cuda.synchronize()
        names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        win = [n for n in names if "conv1d_fwd_dense_f32_window_kernel" in n]
        assert bool(win) == window and any("conv1d_fwd_dense_f32_kernel" in n for n in names) != window, names
        # the window kernel's template arguments <TF32, channels per stage, blocks per SM, wide> (a bool may print
        # as 0 / 1)
        args = [re.search(r"window_kernel<(true|false|1|0), ?(8|16), ?(1|2), ?(true|false|1|0)>", n).groups()
                for n in win]
        wide = [a[3] in ("true", "1") for a in args]
        args = [(a[0] in ("true", "1"), a[1], a[2]) for a in args]
        if window:
            fits = not (tf32 and S == 8)
            assert wide == [Cout // G <= 64 and fits and os.environ.get("CONVKIT_DENSE_F32_WIDE") != "0"] * len(win), win
        if os.environ.get("CONVKIT_DENSE_F32_CC") == "8":
            assert all(a[1] == "8" for a in args), win
        if window and not tf32 and (K, S) == (3, 1):  # three 33 KB stages fit twice per SM
            one = os.environ.get("CONVKIT_DENSE_F32_FFMA_2BLOCKS") == "0"
            cc = "8" if os.environ.get("CONVKIT_DENSE_F32_CC") == "8" else "16"
            assert all(a == (False, cc, "1" if one else "2") for a in args), win
        dy = torch.randn_like(y)
        y.backward(dy)
        y_ref, dx_ref = reference(x.detach(), w, b, dy, S, P, P, D, G)[:2]
        tol = TF32_REL_TOL if tf32 else None
        assert_close(y, y_ref, torch.float32, f"forward {tf32} {(Cin, Cout, K, S, G)}", tol)
        assert_close(x.grad, dx_ref, torch.float32, f"grad_input {tf32} {(Cin, Cout, K, S, G)}", tol)
print("f32 switch cases passed")
"""


@pytest.mark.parametrize("env", [dict(CONVKIT_DENSE_F32_WINDOW=None, CONVKIT_DENSE_F32_CC=None,
                                      CONVKIT_DENSE_F32_FFMA_2BLOCKS=None, CONVKIT_DENSE_F32_WIDE=None,
                                      CONVKIT_DENSE_F32_SHIFT=None, CONVKIT_DENSE_F32_STAGES=None),
                                 dict(CONVKIT_DENSE_F32_WINDOW="0"), dict(CONVKIT_DENSE_F32_CC="8"),
                                 dict(CONVKIT_DENSE_F32_FFMA_2BLOCKS="0"), dict(CONVKIT_DENSE_F32_STAGES="3"),
                                 dict(CONVKIT_DENSE_F32_WIDE="0"), dict(CONVKIT_DENSE_F32_SHIFT="1")],
                         ids=["default", "im2col", "cc8", "ffma_1block", "stages3", "no_wide", "shift"])
def test_dense_f32_forward_switches(env):
    run_child_script(F32_SWITCH_SCRIPT, "f32 switch cases passed", CONVKIT_POISON_OUTPUTS="1", **env)


# The TF32 grad-weight on the window-staged kernel (kernels/conv1d_bwd_weight_dense_tf32.cu; by default only where
# Cout/groups <= 64, with CONVKIT_F32_WGRAD_WINDOW=1, read once per process, on every shape) and, with =0, on the
# tile kernel of conv1d_dense_f32.cu: the kernel that ran,
# grad-weight and grad-bias against float64 torch, and the same bits on a second run. Shapes: dy rows 16-byte aligned
# (Lout 1024: 16-byte dy copies) and not, stride 3 with dilation 4, one window per tap (D 600), Cin 100 over three
# channel tiles (40 + 40 + 20), Cout 200 (a partial second 128-row tile), K 16 (one 8-channel tile of 16 n8 tiles),
# K 1, groups, a (B, L, C) view of x (strided rows: the element copies), one input channel (w2v's first layer).
F32_WGRAD_WINDOW_SCRIPT = r"""
import os, sys, torch, convkit
from torch.profiler import ProfilerActivity, profile
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close, TF32_REL_TOL
torch.manual_seed(0)
torch.backends.cudnn.allow_tf32 = True
window = os.environ.get("CONVKIT_F32_WGRAD_WINDOW") == "1"
cases = [  # name, B, Cin, Cout, K, L, stride, padding, dilation, groups
    ("aligned_dy", 2, 64, 128, 3, 1026, 1, 0, 1, 1), ("odd_s3_d4", 2, 32, 48, 3, 1201, 3, 0, 4, 1),
    ("tap_windows", 2, 16, 24, 2, 2000, 1, 3, 600, 1), ("cin100", 1, 100, 64, 3, 777, 1, 1, 1, 1),
    ("cout200_s2", 1, 24, 200, 5, 901, 2, 2, 1, 1), ("k16", 2, 8, 16, 16, 500, 1, 7, 1, 1),
    ("k1", 2, 40, 24, 1, 333, 1, 0, 1, 1), ("groups4", 2, 64, 32, 3, 515, 1, 1, 2, 4),
    ("blc_view", 2, 24, 40, 4, 701, 2, 1, 1, 1), ("cin1_k10_s5", 2, 1, 64, 10, 2001, 5, 0, 1, 1)]
for name, B, Cin, Cout, K, L, S, P, D, G in cases:
    x = torch.randn(B, Cin, L, device="cuda")
    if "view" in name:
        x = torch.randn(B, L, Cin, device="cuda").transpose(1, 2)
    w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).requires_grad_()
    b = torch.randn(Cout, device="cuda").requires_grad_()
    assert convkit.explain(x, w, b, stride=S, padding=P, dilation=D, groups=G)["grad_weight"] == \
        "conv1d_bwd_weight_dense_tf32", name
    y = convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G)
    dy = torch.randn_like(y)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        dw, db = torch.autograd.grad(y, (w, b), dy, retain_graph=True)
        torch.cuda.synchronize()
    ran = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert any("conv1d_bwd_weight_dense_tf32_window_kernel" in n for n in ran) == window, (name, ran)
    dw2, db2 = torch.autograd.grad(y, (w, b), dy)
    assert torch.equal(dw, dw2) and torch.equal(db, db2), f"not deterministic: {name}"
    _, _, dw_ref, db_ref = reference(x, w.detach(), b.detach(), dy, S, P, P, D, G)
    assert_close(dw, dw_ref, torch.float32, f"grad_weight {name}", TF32_REL_TOL)
    assert_close(db, db_ref, torch.float32, f"grad_bias {name}", TF32_REL_TOL)
# x values that no output reads may be Inf without touching dw (L 12, K 2, D 3, stride 2: outputs 0..4 read positions
# 0, 2..9 and 11; position 10 is tap 0 of a sixth output, inside the kernel's window)
x = torch.randn(1, 8, 12, device="cuda")
x[:, :, 10] = float("inf")
w = torch.randn(8, 8, 2, device="cuda").requires_grad_()
y = convkit.conv1d(x, w, stride=2, dilation=3)
assert y.shape[2] == 5 and torch.isfinite(y).all()
dy = torch.randn_like(y)
dw, = torch.autograd.grad(y, (w,), dy)
dw_ref = reference(x, w.detach(), None, dy, 2, 0, 0, 3, 1)[2]
assert torch.isfinite(dw_ref).all()
assert_close(dw, dw_ref, torch.float32, "grad_weight, Inf where no output reads", TF32_REL_TOL)
print("tf32 grad-weight window cases passed")
"""


@pytest.mark.parametrize("window, dy_align", [("1", None), ("1", "1"), ("0", None)],
                         ids=["window", "window_dy_align", "tiles"])
def test_tf32_grad_weight_window(window, dy_align):
    # (CONVKIT_F32_WGRAD_DY_ALIGN=1: dy rows that are not 16-byte aligned by 16-byte copies, realigned in shared memory)
    run_child_script(F32_WGRAD_WINDOW_SCRIPT, "tf32 grad-weight window cases passed", CONVKIT_F32_WGRAD_WINDOW=window,
                     CONVKIT_F32_WGRAD_DY_ALIGN=dy_align, CONVKIT_POISON_OUTPUTS="1")


def test_tf32_grad_weight_default_route():
    """By default the window grad-weight runs where Cout/groups <= 64 (measured faster there), the tile kernel elsewhere."""
    if os.environ.get("CONVKIT_F32_WGRAD_WINDOW") is not None:
        pytest.skip("CONVKIT_F32_WGRAD_WINDOW is set for this process")
    from torch.profiler import ProfilerActivity, profile
    torch.backends.cudnn.allow_tf32 = True
    for Cout, G, window in ((64, 1, True), (128, 2, True), (128, 1, False)):
        x = torch.randn(2, 64, 1000, device="cuda")
        w = (torch.randn(Cout, 64 // G, 3, device="cuda") / (64 // G * 3) ** 0.5).requires_grad_()
        y = convkit.conv1d(x, w, padding=1, groups=G)
        dy = torch.randn_like(y)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            dw, = torch.autograd.grad(y, (w,), dy)
            torch.cuda.synchronize()
        ran = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        assert any("conv1d_bwd_weight_dense_tf32_window_kernel" in n for n in ran) == window, (Cout, G, ran)
        assert any("conv1d_bwd_weight_dense_f32_kernel" in n for n in ran) != window, (Cout, G, ran)
        assert_close(dw, reference(x, w.detach(), None, dy, 1, 1, 1, 1, G)[2], torch.float32, "grad_weight",
                     TF32_REL_TOL)


def _round_to_tf32(t):
    """fp32 -> the nearest TF32 value (10 mantissa bits, ties away from zero), as cvt.rna.tf32.f32."""
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def test_tf32_flag_is_followed():
    """With TF32 allowed the result is the fp32-accumulated product of TF32-rounded inputs (so the
    tensor cores really run); with it off it is IEEE fp32, more accurate than any TF32 result."""
    x, w, b = make_inputs(2, 64, 96, 3, 4097, 1, torch.float32)
    exact = reference(x, w, b, torch.zeros(2, 96, 4097, device="cuda"), 1, 1, 1, 1, 1)[0]
    rounded = reference(_round_to_tf32(x), _round_to_tf32(w), b, torch.zeros(2, 96, 4097, device="cuda"),
                        1, 1, 1, 1, 1)[0]
    torch.backends.cudnn.allow_tf32 = True
    y_tf32 = convkit.conv1d(x, w, b, padding=1).double()
    torch.backends.cudnn.allow_tf32 = False
    y_ieee = convkit.conv1d(x, w, b, padding=1).double()
    rel = lambda a, e: ((a - e).norm() / e.norm()).item()  # noqa: E731
    assert rel(y_tf32, rounded) < 1e-6, "TF32 result is not the product of TF32-rounded inputs"
    assert rel(y_tf32, exact) > 1e-5, "TF32 result is as exact as IEEE: were the tensor cores used?"
    assert rel(y_ieee, exact) < 1e-6


# Depthwise on (B, L, C) memory (x = t.transpose(1, 2) of a channels-last tensor): the forward runs the
# channels-last kernel and returns its output in the same layout; the backward is the fused
# depthwise one through strides. C a multiple of 8 (16-byte vectors of channels); C = 264 leaves a
# partial block of channels, odd lengths a partial block of positions.
CL_CASES = [
    # (name, B, C, K, L, stride, padding, dilation, activation)
    ("k4_causal_silu", 2, 264, 4, 301, 1, "causal", 1, "silu"),
    ("k3_same", 3, 64, 3, 257, 1, "same", 1, None),
    ("k31_same_gelu", 2, 136, 31, 199, 1, "same", 1, "gelu"),
    ("k5_stride2_d2", 2, 32, 5, 403, 2, 3, 2, "relu"),
    ("k2_valid_l2", 1, 8, 2, 2, 1, 0, 1, None),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", CL_CASES, ids=[c[0] for c in CL_CASES])
def test_depthwise_channels_last_layout(case, dtype, poison_outputs):
    _, B, C, K, L, stride, padding, dilation, activation = case
    x = torch.randn(B, L, C, device="cuda").to(dtype).transpose(1, 2)
    _, w, b = make_inputs(B, C, C, K, L, C, dtype)
    names = convkit.explain(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=C)
    assert names["forward"] == "conv1d_fwd_depthwise_channels_last"
    if stride == 1:  # grad-input: the channels-last forward of dy with reversed taps
        assert names["grad_input"] == "conv1d_bwd_input_depthwise_channels_last"
        assert names["grad_weight"] == "conv1d_bwd_weight_depthwise_channels_last"
    else:  # the fused depthwise backward, through strides
        assert names["grad_input"] == names["grad_weight"] and "conv1d_bwd_depthwise" in names["grad_input"]
    y = convkit.conv1d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=C)
    assert y.stride(1) == 1 and y.stride(2) == C, "the output keeps the (B, L, C) layout"
    check_case(x, w, b, stride, padding, dilation, C, dtype, activation=activation)
    # grad-input in x's layout, grad-weight / grad-bias the same bits on a second run
    grads = []
    for _ in range(2):
        xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
        yr = convkit.conv1d(xr, wr, br, stride=stride, padding=padding, dilation=dilation, groups=C,
                            activation=activation)
        yr.backward(torch.ones_like(yr))
        grads.append((xr.grad, wr.grad, br.grad))
    assert grads[0][0].stride(1) == 1 and grads[0][0].stride(2) == C
    assert torch.equal(grads[0][1], grads[1][1]) and torch.equal(grads[0][2], grads[1][2])


@pytest.mark.parametrize("activation", [None, "silu"])
@pytest.mark.parametrize("dy_layout", ["bcl", "blc"])
def test_depthwise_channels_last_one_output(activation, dy_layout):
    """A (B, L, C) input with one output position and a dy of another layout: a (B, C, 1) dy is
    contiguous in both layouts, so the channels-last backward must build its (B, L, C) copy itself
    (an offset view makes dy's address unaligned too)."""
    B, C, K = 3, 24, 5
    dtype = torch.bfloat16
    x = torch.randn(B, K, C, device="cuda").to(dtype).transpose(1, 2)
    _, w, b = make_inputs(B, C, C, K, K, C, dtype)
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    y = convkit.conv1d(xr, wr, br, groups=C, activation=activation)
    assert y.shape == (B, C, 1)
    base = torch.randn(B * C + 1, device="cuda").to(dtype)
    dy = base[1:].view(B, C, 1) if dy_layout == "bcl" else base[1:].view(B, 1, C).transpose(1, 2)
    y.backward(dy)
    y_ref, dx_ref, dw_ref, db_ref = reference(x, w, b, dy, 1, 0, 0, 1, C, activation)
    assert_close(y, y_ref, dtype, "forward")
    assert_close(xr.grad, dx_ref, dtype, "grad_input")
    assert_close(wr.grad, dw_ref, dtype, "grad_weight")
    assert_close(br.grad, db_ref, dtype, "grad_bias")


def test_depthwise_channels_last_fp32_weights_and_compile():
    x = torch.randn(2, 515, 64, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    _, w, b = make_inputs(2, 64, 64, 4, 515, 64, torch.float32)
    check_case(x, w, b, 1, "causal", 1, 64, torch.bfloat16, activation="silu")

    def f(x, w, b):
        return convkit.conv1d(x, w, b, padding="causal", groups=64, activation="silu") * 2

    y = torch.compile(f, fullgraph=True)(x, w, b)
    assert y.stride(1) == 1, "the fake implementation and the kernel agree on the output layout"
    torch.testing.assert_close(y, f(x, w, b))


# The dense forward's cp.async x ring (conv1d_fwd_dense_mma.cu, kRing) is on by default where it applies;
# CONVKIT_DENSE_RING=0 turns it off (the register path). The switch is read once per process, so a child
# process runs these cases with it off; the other dense tests run the ring.
RING_SCRIPT = r"""
import sys, torch, convkit
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
torch.manual_seed(0)
cases = [  # B, Cin, Cout, K, L, stride, padding, dilation, groups
    (2, 64, 128, 3, 4104, 1, 0, 1, 1), (2, 64, 128, 3, 3000, 3, 0, 4, 1), (2, 64, 96, 3, 2048, 1, 8, 8, 1),
    (2, 64, 64, 2, 2048, 1, 0, 512, 1), (2, 128, 128, 5, 1032, 1, 2, 1, 8), (1, 40, 24, 4, 777, 2, 3, 1, 1)]
for dtype in (torch.bfloat16, torch.float16):
    for B, Cin, Cout, K, L, S, P, D, G in cases:
        x = torch.randn(B, Cin, L, device="cuda").to(dtype)
        w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(dtype)
        b = torch.randn(Cout, device="cuda").to(dtype)
        y = convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G)
        y_ref = reference(x, w, b, torch.zeros_like(y), S, P, P, D, G)[0]
        assert_close(y, y_ref, dtype, f"forward {dtype} {(B, Cin, Cout, K, L, S, P, D, G)}")
print("register path cases passed")
"""


def test_dense_forward_without_cp_async_ring():
    run_child_script(RING_SCRIPT, "register path cases passed", CONVKIT_DENSE_RING="0")


# The dense grad-input's stride phases interleaved into dx by convkit's kernel (the default: at strides 2-4 a thread
# moves 16-byte vectors, element by element where rows are not aligned), or with CONVKIT_GI_INTERLEAVE=torch (read
# once per process) by torch's strided copy. CONVKIT_GI_UNIFIED=1: the
# phases run as one convolution of dy (groups == 1, where the phases' kernel runs it: here every case
# but the grouped and narrow_out ones, which keep one launch per phase). Strided cases of every dtype
# whose grad-input runs phase by phase (tensor cores for 16-bit, the fp32 tile kernel, narrow_out for
# fp64: 2-, 4- and 8-byte elements), odd lengths, a (B, L, C) view of x (dx is allocated contiguous
# for these calls all the same, so the kernel's strided-dx branch is not reached).
# All with CONVKIT_GI_FUSED=0: the 16-bit cases of Cin/groups >= 32 would otherwise run in one pass
# (test_dense_fused_grad_input_matches_float64_torch).
INTERLEAVE_SCRIPT = r"""
import os, re, sys, torch, convkit
from torch.profiler import ProfilerActivity, profile
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
from convkit.functional import resolve_padding
torch.manual_seed(0)
torch.backends.cudnn.allow_tf32 = False
kernel = os.environ.get("CONVKIT_GI_INTERLEAVE") != "torch"
elements = os.environ.get("CONVKIT_GI_INTERLEAVE") == "elements"
unified = os.environ.get("CONVKIT_GI_UNIFIED") == "1"
cases = [  # name, B, Cin, Cout, K, L, stride, padding, dilation, groups
    ("stride_2", 2, 32, 32, 3, 1003, 2, 1, 1, 1), ("s3_d4", 2, 16, 32, 3, 1201, 3, 0, 4, 1),
    ("s5_k2_empty_phases", 2, 16, 16, 2, 203, 5, 0, 1, 1), ("s2_d2_groups", 2, 16, 24, 3, 301, 2, 3, 2, 2),
    ("cin4_s2_narrow_out", 2, 4, 64, 3, 501, 2, 1, 1, 1), ("view_s3", 2, 16, 32, 3, 1000, 3, 1, 1, 1),
    ("s2_p4_dy_shift", 2, 16, 32, 3, 301, 2, 4, 1, 1), ("lin_3_below_s4", 2, 16, 16, 2, 3, 4, 1, 1, 1),
    # rows of whole 16-byte vectors (the interleave's vector loads and stores at strides 3 and 4)
    ("s3_d4_l1200", 2, 16, 32, 3, 1200, 3, 0, 4, 1), ("s4_l2048", 2, 16, 24, 4, 2048, 4, 0, 1, 1)]
for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
    for name, B, Cin, Cout, K, L, S, P, D, G in cases:
        if dtype == torch.float64 and "narrow_out" not in name:
            continue  # fp64 grad-input runs phase by phase only on the narrow_out kernel
        x = torch.randn(B, Cin, L, device="cuda").to(dtype)
        if "view" in name:
            x = torch.randn(B, L, Cin, device="cuda").to(dtype).transpose(1, 2)
        x.requires_grad_()
        w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(dtype)
        b = torch.randn(Cout, device="cuda").to(dtype)
        y = convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G)
        dy = torch.randn_like(y)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            y.backward(dy)
            torch.cuda.synchronize()
        events = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        # convkit's interleave: the vector kernel at strides 2-4 (unless =elements), the element kernel otherwise
        ran = [n for n in events if re.search("interleave_(phases|rows)_kernel", n)]
        want = "interleave_rows_kernel" if 2 <= S <= 4 and not elements else "interleave_phases_kernel"
        assert (bool(ran) and all(want in n for n in ran)) if kernel else not ran, (name, dtype, want, events)
        pl, pr = resolve_padding(P, K, S, D)
        gi_launches = sum(any(k in n for k in ("conv1d_fwd_dense_mma_kernel", "conv1d_fwd_dense_f32_kernel",
                                               "conv1d_fwd_dense_f32_window_kernel")) for n in events)
        phases = sum(any((rho + pl - k * D) % S == 0 for k in range(K)) for rho in range(min(S, L)))
        if "narrow_out" not in name:  # one launch per phase with a tap, or one in all
            assert gi_launches == (1 if unified and G == 1 else phases), (name, dtype, phases, events)
        dx_ref = reference(x.detach(), w, b, dy, S, pl, pr, D, G)[1]
        assert_close(x.grad, dx_ref, dtype, f"grad_input {name} {dtype}")
print("strided grad-input cases passed")
"""


@pytest.mark.parametrize("env", [dict(CONVKIT_GI_INTERLEAVE=None, CONVKIT_GI_UNIFIED=None),
                                 dict(CONVKIT_GI_INTERLEAVE="elements", CONVKIT_GI_UNIFIED=None),
                                 dict(CONVKIT_GI_INTERLEAVE="torch"), dict(CONVKIT_GI_UNIFIED="1"),
                                 dict(CONVKIT_GI_UNIFIED="1", CONVKIT_GI_INTERLEAVE="torch"),
                                 dict(CONVKIT_GI_UNIFIED="1", CONVKIT_DENSE_STAGE_WEIGHTS="1")],
                         ids=["default", "interleave_elements", "interleave_torch", "unified",
                              "unified_interleave_torch", "unified_staged_weights"])
def test_dense_grad_input_strided_switches(env):
    run_child_script(INTERLEAVE_SCRIPT, "strided grad-input cases passed", CONVKIT_POISON_OUTPUTS="1",
                     CONVKIT_GI_FUSED="0", **env)


# CONVKIT_WGRAD_CHUNK=32 (read once per process): the mma.sync grad-weight reduces 32 outputs per
# chunk instead of 64. MMA_CASES' grad-weight and grad-bias again in a child process, with lengths that
# leave a partial last chunk (CONVKIT_DENSE_WGMMA=0: the wide cases too, which the H200 otherwise runs on wgmma).
WGRAD_SCRIPT = r"""
import sys, torch, convkit
from torch.profiler import ProfilerActivity, profile
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
from convkit.functional import resolve_padding
torch.manual_seed(0)
for dtype in (torch.bfloat16, torch.float16):
    for name, B, Cin, Cout, K, L, S, P, D, G in @CASES@:
        x = torch.randn(B, Cin, L, device="cuda").to(dtype)
        w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(dtype).requires_grad_()
        b = torch.randn(Cout, device="cuda").to(dtype).requires_grad_()
        assert convkit.explain(x, w, b, stride=S, padding=P, dilation=D, groups=G)["grad_weight"] == \
            "conv1d_bwd_weight_dense_mma"
        y = convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G)
        dy = torch.randn_like(y)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            y.backward(dy)
            torch.cuda.synchronize()
        names = {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}
        assert any("conv1d_bwd_weight_dense_mma_kernel<" in n and ", 32>" in n for n in names), sorted(names)
        pl, pr = resolve_padding(P, K, S, D)
        _, _, dw_ref, db_ref = reference(x, w, b, dy, S, pl, pr, D, G)
        assert_close(w.grad, dw_ref, dtype, f"grad_weight {name} {dtype}")
        assert_close(b.grad, db_ref, dtype, f"grad_bias {name} {dtype}")
print("chunk 32 grad-weight cases passed")
"""


def test_dense_grad_weight_chunk32():
    run_child_script(WGRAD_SCRIPT.replace("@CASES@", repr(MMA_CASES)), "chunk 32 grad-weight cases passed",
                     CONVKIT_WGRAD_CHUNK="32", CONVKIT_POISON_OUTPUTS="1", CONVKIT_DENSE_WGMMA="0",
                     CONVKIT_DENSE_TMA_WGRAD="0")


# CONVKIT_DENSE_STAGE_WEIGHTS=1 makes the dense tensor-core forward stage weights per reduction step on
# every shape (normally only where the panel does not fit, MMA_CASES' staged_weights_*): tap-major
# copies by cp.async (Cin/groups a multiple of 8) or the register path (the others), for the forward and
# the grad-input phases. Read once per process: a child process.
# (CONVKIT_GI_FUSED=0: the strided grad-inputs run phase by phase, on the staged weights too.)
STAGED_SCRIPT = r"""
import sys, torch, convkit
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
torch.manual_seed(0)
cases = [  # B, Cin, Cout, K, L, stride, padding, dilation, groups
    (2, 64, 128, 3, 4104, 1, 0, 1, 1), (2, 64, 128, 3, 3000, 3, 0, 4, 1), (2, 64, 96, 3, 2048, 1, 8, 8, 1),
    (2, 64, 64, 2, 2048, 1, 0, 512, 1), (2, 128, 128, 5, 1032, 1, 2, 1, 8), (1, 40, 24, 4, 777, 2, 3, 1, 1),
    (2, 16, 24, 8, 515, 1, 7, 1, 1), (1, 96, 200, 3, 259, 1, 1, 1, 1), (2, 32, 48, 3, 301, 2, 3, 2, 2),
    (2, 20, 24, 3, 301, 1, 1, 1, 1), (2, 24, 36, 3, 299, 2, 1, 1, 2)]  # Cin/groups 20, 12: not tap-major units
for dtype in (torch.bfloat16, torch.float16):
    for B, Cin, Cout, K, L, S, P, D, G in cases:
        for w_dtype in (dtype, torch.float32):
            x = torch.randn(B, Cin, L, device="cuda").to(dtype).requires_grad_()
            w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(w_dtype)
            b = torch.randn(Cout, device="cuda").to(w_dtype)
            y = convkit.conv1d(x, w, b, stride=S, padding=P, dilation=D, groups=G)
            dy = torch.randn_like(y)
            y.backward(dy)
            y_ref, dx_ref = reference(x.detach(), w, b, dy, S, P, P, D, G)[:2]
            what = f"{dtype} w {w_dtype} {(B, Cin, Cout, K, L, S, P, D, G)}"
            assert_close(y, y_ref, dtype, "forward " + what)
            assert_close(x.grad, dx_ref, dtype, "grad_input " + what)
print("staged weight cases passed")
"""


def test_dense_forward_with_staged_weights_everywhere():
    run_child_script(STAGED_SCRIPT, "staged weight cases passed", CONVKIT_DENSE_STAGE_WEIGHTS="1",
                     CONVKIT_POISON_OUTPUTS="1", CONVKIT_GI_FUSED="0")


# The dense grad-input's stride phases write a buffer that one copy interleaves into dx (the default, which
# the other dense tests run); CONVKIT_GI_PHASE_BUFFER=0 writes dx directly, checked here in a child process.
# (CONVKIT_GI_FUSED=0: strides 2..4 of 16-bit calls with Cin/groups >= 32 run in one pass otherwise.)
GI_BUFFER_SCRIPT = r"""
import sys, torch, convkit
sys.path.insert(0, sys.argv[1])
from reference import reference, assert_close
torch.manual_seed(0)
cases = [  # B, Cin, Cout, K, L, stride, padding, dilation, groups
    (2, 64, 128, 3, 3000, 3, 0, 4, 1), (2, 64, 64, 3, 2001, 2, 0, 1, 1), (1, 40, 24, 4, 777, 2, 3, 1, 1),
    (2, 32, 32, 5, 1031, 3, 2, 1, 2), (2, 16, 32, 2, 515, 4, 0, 1, 1)]
for dtype in (torch.bfloat16, torch.float16):
    for B, Cin, Cout, K, L, S, P, D, G in cases:
        x = torch.randn(B, Cin, L, device="cuda").to(dtype).requires_grad_()
        w = (torch.randn(Cout, Cin // G, K, device="cuda") / (Cin // G * K) ** 0.5).to(dtype)
        y = convkit.conv1d(x, w, None, stride=S, padding=P, dilation=D, groups=G)
        dy = torch.randn_like(y)
        y.backward(dy)
        dx_ref = reference(x.detach(), w, None, dy, S, P, P, D, G)[1]
        assert_close(x.grad, dx_ref, dtype, f"grad_input {dtype} {(B, Cin, Cout, K, L, S, P, D, G)}")
print("direct phase cases passed")
"""


def test_dense_grad_input_without_phase_buffer():
    run_child_script(GI_BUFFER_SCRIPT, "direct phase cases passed", CONVKIT_GI_PHASE_BUFFER="0",
                     CONVKIT_POISON_OUTPUTS="1", CONVKIT_GI_FUSED="0")

