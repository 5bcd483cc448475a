# CPU model of the tap-rows form of kernels/conv1d_bwd_weight_dense_tma.cu (session 29): tap_rows_kernel's copies
# (x's K tap rows xt[b, g, k, ci, j] = x[b, g*Cin_g + ci, j*S + k*D - P], dy's rows padded to lt = Lout rounded up
# to 8; any source strides, so (B, L, C) views too), then the tensor maps the launcher builds over them ((lt, Cin_g,
# G*K, B) and (lt, Cout_g, G, B)) read as the kernel's boxes (64 positions x 64 or BM rows, out-of-bounds elements
# zero) at the producer's coordinates (j0, ci0, g*K + k, b) and (j0, co0, g, b), summed as the warpgroups' MMAs do,
# in fp64, with the K 5..8 half blocks' tap split (each warpgroup's taps, the repeated last tap, the writes of taps
# < K only; every weight written exactly once). The copies start as NaN, so an element the copy did not write
# shows. Checks: dw against float64 torch (error < 1e-9). Mutating the row-set coordinate or the copy's shift makes it
# fail. It checks the index math as ported by hand, not the CUDA: keep it in step with the .cu. Run:
# python3 ci/emulate_tap_rows_wgrad.py (~10 s, torch on the CPU).
import torch, math, itertools
def ceil_div(a,b): return (a+b-1)//b
def box(flat, dims, strides, coords, shape):
    # dims/strides/coords innermost first; box shape (positions, rows); OOB -> 0
    out = torch.zeros(shape[1], shape[0], dtype=torch.float64)
    for r in range(shape[1]):
        c1 = coords[1] + r
        if not (0 <= c1 < dims[1] and 0 <= coords[2] < dims[2] and 0 <= coords[3] < dims[3]): continue
        for e in range(shape[0]):
            c0 = coords[0] + e
            if 0 <= c0 < dims[0]:
                out[r, e] = flat[c0 + c1*strides[0] + coords[2]*strides[1] + coords[3]*strides[2]]
    return out
def tap_rows(src, sb, sc, sl, length, channels, ch_g, groups, k, s, d, p, lout, lt, batch, dst):
    for b in range(batch):
        for c in range(channels):
            g, ci = divmod(c, ch_g)
            base = ((b*groups + g)*k*ch_g + ci)*lt
            for j in range(lt):
                t0 = j*s - p
                for kk in range(k):
                    t = t0 + kk*d
                    ok = j < lout and 0 <= t < length
                    dst[base + kk*ch_g*lt + j] = src[b*sb + c*sc + t*sl] if ok else 0.0
def run(B, Cin, Cout, K, L, S, P, D, G, xview=False, dyview=False):
    lout = (L + 2*P - D*(K-1) - 1)//S + 1
    x = torch.randn(B, L, Cin).transpose(1,2) if xview else torch.randn(B, Cin, L)
    dy = torch.randn(B, lout, Cout).transpose(1,2) if dyview else torch.randn(B, Cout, lout)
    cin_g, cout_g = Cin//G, Cout//G
    lt = ceil_div(lout, 8)*8
    xf = x.as_strided((x.numel(),), (1,)) if not xview else x.transpose(1,2).contiguous().view(-1)
    xs = x.stride()
    xt = torch.full((B*Cin*K*lt,), float('nan'), dtype=torch.float64)
    tap_rows(xf.double(), xs[0], xs[1], xs[2], L, Cin, cin_g, G, K, S, D, P, lout, lt, B, xt)
    dyf = dy.transpose(1,2).contiguous().view(-1) if dyview else dy.reshape(-1)
    ds = dy.stride()
    dyt = torch.full((B*Cout*lt,), float('nan'), dtype=torch.float64)
    tap_rows(dyf.double(), ds[0], ds[1], ds[2], lout, Cout, cout_g, G, 1, 1, 1, 0, lout, lt, B, dyt)
    assert not torch.isnan(xt).any() and not torch.isnan(dyt).any()
    J, BN = 64, 64
    bm = 64 if cout_g <= 64 else 128
    sets = G*K
    xdims, xstr = (lt, cin_g, sets, B), (lt, cin_g*lt, sets*cin_g*lt)
    ddims, dstr = (lt, cout_g, G, B), (lt, cout_g*lt, Cout*lt)
    # K 5..8 (half blocks only): warpgroup w accumulates taps w*KW .. w*KW + KW - 1, a tap past K reading tap K - 1,
    # and writes only taps < K; else one warpgroup set holds every tap (the position split of half blocks is a sum)
    assert K <= 4 or cout_g <= 64
    KW = (K + 1) // 2 if K > 4 else K
    wgs = 2 if K > 4 else 1
    dw = torch.full((Cout, cin_g, K), float('nan'), dtype=torch.float64)
    chunks = ceil_div(lout, J)
    for g in range(G):
        for mt in range(ceil_div(cout_g, bm)):
            for nt in range(ceil_div(cin_g, BN)):
                for wgi in range(wgs):
                    k0 = wgi * KW if K > 4 else 0
                    acc = torch.zeros(KW, bm, BN, dtype=torch.float64)
                    for b in range(B):
                        for jc in range(chunks):
                            j0 = jc*J
                            A = box(dyt, ddims, dstr, (j0, mt*bm, g, b), (J, bm))
                            for kk in range(KW):
                                tap = min(k0 + kk, K - 1)
                                Bk = box(xt, xdims, xstr, (j0, nt*BN, g*K + tap, b), (J, BN))
                                acc[kk] += A @ Bk.T
                    for r in range(bm):
                        co = mt*bm + r
                        if co >= cout_g: continue
                        for cc in range(BN):
                            ci = nt*BN + cc
                            if ci >= cin_g: continue
                            for kk in range(KW):
                                if k0 + kk < K:
                                    assert torch.isnan(dw[g*cout_g + co, ci, k0 + kk]), "written twice"
                                    dw[g*cout_g + co, ci, k0 + kk] = acc[kk, r, cc]
    assert not torch.isnan(dw).any(), "unwritten"
    xd = torch.nn.functional.pad(x.double(), (P, P)).requires_grad_()
    wd = torch.zeros(Cout, cin_g, K, dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.conv1d(xd, wd, None, S, 0, D, G)
    ref, = torch.autograd.grad(y, wd, dy.double())
    err = (dw - ref).abs().max().item()
    assert err < 1e-9, err
    return err
cases = [(2, 128, 128, 3, 199, 2, 0, 1, 1), (2, 64, 96, 3, 121, 3, 0, 4, 1), (2, 64, 64, 3, 100, 1, 1, 1, 1),
         (1, 96, 64, 4, 77, 1, 3, 1, 1), (2, 64, 128, 2, 101, 1, 0, 1, 1), (1, 256, 256, 3, 150, 2, 1, 1, 2),
         (2, 128, 128, 3, 123, 2, 0, 2, 2), (2, 64, 64, 1, 99, 2, 0, 1, 1), (2, 40, 200, 3, 100, 2, 1, 1, 1),
         (1, 128, 128, 5, 100, 1, 2, 1, 2), (1, 64, 64, 8, 70, 1, 3, 1, 1), (1, 96, 64, 7, 99, 2, 3, 1, 1),
         (1, 64, 48, 6, 100, 1, 16, 8, 1)]
for c in cases:
    print(c, run(*c))
print(run(2, 64, 96, 3, 90, 2, 1, 1, 1, xview=True), run(2, 64, 96, 2, 100, 1, 0, 8, 1, dyview=True))
print("ok")
