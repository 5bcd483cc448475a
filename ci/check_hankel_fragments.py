# Run with numpy (no GPU): python3 ci/check_hankel_fragments.py
# CPU model of the Hankel depthwise kernels (conv1d_depthwise_direct.cuh, forward variant 11 and the
# grad-input it serves): the swizzled window (issue_window<T, true>), the W fragments of hankel_w, the
# ldmatrix.x4 addresses and the epilogue positions of hankel_outputs, run lane by lane through the PTX
# definitions of ldmatrix and mma.m16n8k16 (the fragment layouts the GPU-tested Toeplitz kernels use),
# against a direct convolution; and that every ldmatrix phase is free of bank conflicts. The index expressions below are the kernel's, written again in Python.
import itertools
import random

import numpy as np


def swizzled_slot(s):
    return s ^ ((s >> 3) & 1)


def stage_window(xrow, q0, n_units):
    """issue_window<T, true>: slot s holds row elements [q0 + 8s, +8), zero outside the row, at swizzled_slot(s)."""
    smem = np.full((n_units, 8), np.nan)
    for s in range(n_units):
        q = q0 + 8 * s
        vals = [xrow[q + i] if 0 <= q + i < len(xrow) else 0.0 for i in range(8)]
        assert np.isnan(smem[swizzled_slot(s)]).all(), "two slots stored at one place"
        smem[swizzled_slot(s)] = vals
    return smem


def hankel_w(w, e, K, D, n_steps, reverse):
    """b[lane][s][h][r] = (low, high) 16-bit halves, as the kernel builds them (lane k holds tap k, shuffled)."""
    KD = (K - 1) * D
    mine = [(w[K - 1 - l] if reverse else w[l]) if l < K else 0.0 for l in range(32)]
    b = {}
    for lane in range(32):
        g, q = lane // 4, lane % 4
        o0 = 4 * (g // 2) + g % 2

        def tap(t, o):
            d = t - o - e
            hit = 0 <= d <= KD and d % D == 0
            v = mine[d // D if hit else 0]
            return v if hit else 0.0

        for s, h, r in itertools.product(range(n_steps), range(2), range(2)):
            t = 16 * s + 2 * q + 8 * r
            b[lane, s, h, r] = (tap(t, o0 + 2 * h), tap(t + 1, o0 + 2 * h))
    return b


def ldmatrix_x4(smem_flat, addr_elems):
    """ldmatrix.x4 (no .trans): lane l gives the address of row l % 8 of matrix l // 8; thread t gets from
    matrix j the elements (row t // 4, columns 2 (t % 4), +1) as register j."""
    for j in range(4):  # one matrix per shared-memory phase: its 8 rows in 8 different 16-byte bank groups
        assert len({(addr_elems[8 * j + i] // 8) % 8 for i in range(8)}) == 8, "ldmatrix bank conflict"
    regs = {}
    for t in range(32):
        for j in range(4):
            a = addr_elems[8 * j + t // 4]
            assert a % 8 == 0, "ldmatrix rows must be 16-byte aligned"
            regs[t, j] = (smem_flat[a + 2 * (t % 4)], smem_flat[a + 2 * (t % 4) + 1])
    return regs


def mma_16816(a_regs, b_regs, c):
    """mma.m16n8k16.row.col: A rows g / g + 8, columns 2q (+1) / +8 in a[0..3]; B rows 2q (+1) / +8 of column g
    in b[0..1]; C rows g / g + 8, columns 2q, 2q + 1 in c[0..3]."""
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    for lane in range(32):
        g, q = lane // 4, lane % 4
        for reg, (row, col) in enumerate([(g, 2 * q), (g + 8, 2 * q), (g, 2 * q + 8), (g + 8, 2 * q + 8)]):
            A[row, col], A[row, col + 1] = a_regs[lane, reg]
        for reg, row in enumerate([2 * q, 2 * q + 8]):
            B[row, g], B[row + 1, g] = b_regs[lane][reg]
    Cm = A @ B
    out = {}
    for lane in range(32):
        g, q = lane // 4, lane % 4
        out[lane] = [c[lane][0] + Cm[g, 2 * q], c[lane][1] + Cm[g, 2 * q + 1],
                     c[lane][2] + Cm[g + 8, 2 * q], c[lane][3] + Cm[g + 8, 2 * q + 1]]
    return out


def hankel_chunk(xrow, w, P, K, D, j0, groups, reverse=False, base=0):
    """One warp's chunk: outputs [j0, j0 + 256 * groups) of a row, as dict position -> value. The window
    starts `base` slots before x[j0 - P - e] (the backward's dy window starts kHalo slots before dy[j0])."""
    KD = (K - 1) * D
    k_steps = (16 + 7 + KD + 15) // 16
    n_units = base + 2 * (16 * groups - 1 + k_steps)
    n_units += n_units % 2  # the kernels' windows have an even slot count (the swizzle swaps pairs)
    e = (-P) & 7
    n_steps = (16 + e + KD + 15) // 16
    assert n_steps <= k_steps
    smem = stage_window(xrow, j0 - P - e - 8 * base, n_units)
    assert (j0 - P - e) % 8 == 0
    flat = smem.reshape(-1)
    b = hankel_w(w, e, K, D, k_steps, reverse)
    out = {}
    for r in range(groups):
        c = [{lane: [0.0] * 4 for lane in range(32)} for _ in range(2)]
        for s in range(k_steps):
            if s >= n_steps:
                # the skipped blocks must be all zero
                assert all(b[lane, s, h, rr] == (0.0, 0.0) for lane in range(32) for h in range(2) for rr in range(2))
                continue
            addr = []
            for lane in range(32):
                slot0 = base + 2 * (lane % 8 + 8 * ((lane // 8) % 2)) + lane // 16
                addr.append(8 * (swizzled_slot(slot0 + 2 * s) + 32 * r))
            assert max(addr) // 8 < n_units
            a = ldmatrix_x4(flat, addr)
            for h in range(2):
                c[h] = mma_16816(a, {lane: (b[lane, s, h, 0], b[lane, s, h, 1]) for lane in range(32)}, c[h])
        for lane in range(32):
            g, q = lane // 4, lane % 4
            for half in range(2):
                v = [c[0][lane][2 * half], c[0][lane][2 * half + 1], c[1][lane][2 * half], c[1][lane][2 * half + 1]]
                j = j0 + 256 * r + 128 * half + 16 * g + 4 * q
                for i in range(4):
                    assert j + i not in out, "an output written twice"
                    out[j + i] = v[i]
    return out


def direct(xrow, w, P, K, D, n_out):
    return np.array([sum(w[k] * (xrow[j - P + k * D] if 0 <= j - P + k * D < len(xrow) else 0.0) for k in range(K))
                     for j in range(n_out)])


def main():
    rng = np.random.default_rng(0)
    random.seed(0)
    n = 0
    for K, D in [(31, 1), (15, 1), (15, 2), (9, 4), (4, 1)]:
        KD = (K - 1) * D
        for P in sorted({0, 1, 3, 7, KD // 2, KD} | {random.randint(0, KD) for _ in range(3)}):
            for L, groups in [(600, 2), (256, 1), (1001, 4)]:
                x = rng.standard_normal(L)
                w = rng.standard_normal(K)
                n_out = L + P - KD  # right padding P too would only lengthen the row; the window zero-fills
                if n_out < 1:
                    continue
                ref = direct(x, w, P, K, D, n_out)
                chunk = 256 * groups
                got = {}
                for j0 in range(0, n_out, chunk):
                    for j, v in hankel_chunk(x, w, P, K, D, j0, groups).items():
                        if j < n_out:  # the kernel's stores are guarded by len
                            got[j] = v
                assert sorted(got) == list(range(n_out))
                err = max(abs(got[j] - ref[j]) for j in range(n_out))
                assert err < 1e-9, (K, D, P, L, groups, err)
                # grad-input: the same product on dy with the taps reversed and padding KD - P, from the ring
                # backward's dy window (it starts H = 8 * kHalo elements before dy[j0]; A from slot e_gi / 8)
                H = 8 * ((KD + 7) // 8)
                e_gi = H - (KD - P)
                assert e_gi >= 0 and (e_gi & 7) == (-(KD - P)) & 7
                dy = rng.standard_normal(n_out)
                dx_ref = np.zeros(L)
                for j in range(n_out):
                    for k in range(K):
                        i = j - P + k * D
                        if 0 <= i < L:
                            dx_ref[i] += w[k] * dy[j]
                dx = {}
                for j0 in range(0, L, chunk):
                    for i, v in hankel_chunk(dy, w, KD - P, K, D, j0, groups, reverse=True, base=e_gi // 8).items():
                        if i < L:
                            dx[i] = v
                err = max(abs(dx[i] - dx_ref[i]) for i in range(L))
                assert err < 1e-9, ("grad-input", K, D, P, L, groups, err)
                n += 1
    print(f"hankel fragment model: {n} (K, D, P, L, chunk) cases match the direct convolution and its grad-input")


if __name__ == "__main__":
    main()
