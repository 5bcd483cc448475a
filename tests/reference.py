"""float64 reference for conv1d and its gradients, computed by torch, the comparison rules, the names of the
CUDA kernels a call launches, and inputs held in unusual layouts (for the tests and their child processes)."""
import torch
import torch.nn.functional as F

# Norm-wise relative error allowed per dtype, against the float64 result on the same (rounded) inputs.
# fp32: IEEE (the tests run with torch.backends.cudnn.allow_tf32 False, conftest.py); with TF32 the dense
# fp32 kernel rounds its inputs to 10 mantissa bits: TF32_REL_TOL.
REL_TOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.2e-2}
TF32_REL_TOL = 2e-3


def reference(x, w, b, dy, stride, pad_left, pad_right, dilation, groups, activation=None):
    """(y, dx, dw, db) in float64 (db None when b is None) of activation(conv1d(x, w) + b)."""
    xd = x.detach().double().requires_grad_()
    wd = w.detach().double().requires_grad_()
    bd = None if b is None else b.detach().double().requires_grad_()
    y = F.conv1d(F.pad(xd, (pad_left, pad_right)), wd, bd, stride, 0, dilation, groups)
    if activation is not None:
        y = getattr(F, activation)(y)
    grads = torch.autograd.grad(y, [t for t in (xd, wd, bd) if t is not None], dy.double())
    return (y.detach(),) + tuple(grads) + ((None,) if b is None else ())


def assert_close(actual, expected, dtype, what, tol=None, terms=None):
    """Relative (norm-wise and worst-element) comparison with a float64 reference. `terms`, for a result
    that is a sum (grad-bias: dy summed over B and L), is the size of what each element sums
    (sqrt of the sum of squares): where the terms cancel, the sum is much smaller than they are and
    their 16-bit rounding, not the sum, sets the error, so the scale is the larger of the two."""
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    a = actual.double()
    assert not torch.isnan(a).any(), f"{what}: NaN in output (element not written?)"
    if expected.numel() == 0:
        return
    err = (a - expected).norm().item()
    scale = expected.norm().item()
    peak = expected.abs().max().item()
    if terms is not None:
        scale = max(scale, terms.double().norm().item())
        peak = max(peak, terms.double().abs().max().item())
    tol = REL_TOL[dtype] if tol is None else tol
    assert err <= tol * max(scale, 1e-30), f"{what}: relative error {err / max(scale, 1e-30):.3e} > {tol:.1e}"
    # Norm-wise error can hide one bad element among many: bound the worst element too.
    worst = (a - expected).abs().max().item()
    bound = 50 * tol * peak + 1e-30
    assert worst <= bound, f"{what}: max abs error {worst:.3e} > {bound:.3e}"


def cuda_kernel_names(fn):
    """Names of the CUDA kernels fn() launches (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}


def random_laid_out(shape, dtype, view, device="cuda"):
    """Fresh standard-normal values of a (B, C, L) `shape` in `dtype`, held as `view` says: "positions", every other
    element of rows twice as long (position stride 2); "offset", contiguous but one element past the start of its
    allocation (so no row starts on a 16-byte boundary); None, contiguous."""
    B, C, L = shape
    if view == "positions":
        return torch.randn(B, C, 2 * L, device=device).to(dtype)[:, :, ::2]
    if view == "offset":
        return torch.randn(B * C * L + 1, device=device).to(dtype)[1:].view(B, C, L)
    assert view is None, view
    return torch.randn(B, C, L, device=device).to(dtype)
