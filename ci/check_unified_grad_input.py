# Run with any torch (CPU is enough): python3 ci/check_unified_grad_input.py
# CPU check of the unified grad-input math of dispatch.cpp (CONVKIT_GI_UNIFIED): offsets, W', shift/pad,
# output length lq, and the (B, S, Cin, lq) interleave, against torch autograd in float64.
import torch, torch.nn.functional as F, itertools, random
def phases(Lin, S, D, P, K):
    out = []
    for rho in range(min(S, Lin)):
        taps = [k for k in range(K - 1, -1, -1) if ((rho + P - k * D) % S + S) % S == 0]
        out.append((rho, taps))
    return out
def unified(x, w, dy, S, P, D):
    B, Cin, Lin = x.shape; Cout, _, K = w.shape; Lout = dy.shape[2]
    ph = phases(Lin, S, D, P, K)
    offs = [int((rho + P - k * D) / S) for rho, taps in ph for k in taps]
    for rho, taps in ph:
        for k in taps: assert (rho + P - k * D) % S == 0
    if not offs: return None
    omin, omax = min(offs), max(offs); Kp = omax - omin + 1
    if Kp > 8 or S * Kp > 3 * sum(len(t) for _, t in ph): return None
    shift, pad = max(omin, 0), max(-omin, 0)
    lq = (Lin + S - 1) // S
    if Lout - shift < 1: return None
    Wp = torch.zeros(S * Cin, Cout, Kp, dtype=w.dtype)
    for rho, taps in ph:
        for k in taps:
            o = int((rho + P - k * D) / S)   # C++ truncating division, exact here
            Wp[rho * Cin:(rho + 1) * Cin, :, o - omin] = w[:, :, k].t()
    # the kernel: y[m] = sum_u W'[u] * xin[m - pad + u], xin = dy[shift:], zero outside [0, Lin')
    xin = dy[:, :, shift:]
    Lin2 = xin.shape[2]
    need_right = max(0, lq - 1 - pad + Kp - 1 - (Lin2 - 1))
    ypad = F.conv1d(F.pad(xin, (pad, need_right)), Wp)[:, :, :lq]
    assert ypad.shape[2] == lq, (ypad.shape, lq)
    ph4 = ypad.view(B, S, Cin, lq)
    dx = torch.empty(B, Cin, Lin, dtype=x.dtype)
    for i in range(Lin):
        dx[:, :, i] = ph4[:, i % S, :, i // S]
    return dx
random.seed(0); torch.manual_seed(0)
cases = [(2, 16, 32, 3, 121, 3, 0, 4), (2, 8, 8, 3, 103, 2, 1, 1), (1, 5, 7, 2, 23, 5, 0, 1), (1, 4, 6, 3, 30, 2, 3, 2),
         (2, 6, 4, 4, 78, 2, 3, 1), (1, 3, 5, 10, 100, 5, 0, 1), (1, 3, 3, 5, 40, 3, 4, 2), (1, 2, 2, 3, 9, 4, 1, 1)]
for _ in range(200):
    cases.append((1, random.randint(1, 4), random.randint(1, 4), random.randint(1, 6), random.randint(5, 60),
                  random.randint(2, 6), random.randint(0, 6), random.randint(1, 5)))
done = skipped = 0
for B, Cin, Cout, K, L, S, P, D in cases:
    if (L + 2 * P - D * (K - 1) - 1) < 0: continue
    x = torch.randn(B, Cin, L, dtype=torch.float64, requires_grad=True)
    w = torch.randn(Cout, Cin, K, dtype=torch.float64)
    y = F.conv1d(F.pad(x, (P, P)), w, stride=S, dilation=D)
    dy = torch.randn_like(y)
    (dx_ref,) = torch.autograd.grad(y, x, dy)
    dx = unified(x.detach(), w, dy, S, P, D)
    if dx is None: skipped += 1; continue
    assert torch.allclose(dx, dx_ref, atol=1e-10), (B, Cin, Cout, K, L, S, P, D, (dx - dx_ref).abs().max())
    done += 1
print("ok", done, "checked,", skipped, "not eligible")
