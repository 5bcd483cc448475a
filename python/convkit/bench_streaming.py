"""The streaming benchmark (issue 6): `python -m convkit.bench --streaming`.

Rows as convkit.bench's (same keys, family "streaming"; torch timed in the same process on the same tensors):
  update_B{1,64,256}   one decode step, convkit.causal_conv1d_update against the same step written in torch
                       (roll the (B, C, K) state, write the token, multiply by the weights, sum, bias, SiLU),
                       C 4096, K 4, bf16; convkit's state has the same K columns (S >= K - 1 is allowed).
                       Timed eagerly and as CUDA-graph replays (decode steps are launch-bound; graphs are how
                       servers run them).
  chunk_state          one chunk of a chunked causal call, B 8, C 4096, 2048 positions, K 4, SiLU, with the
                       initial state and the final state, fwd and fwd+bwd; torch: F.conv1d over [state, x]
                       and the state sliced off x. chunk_state_direct: the same call on the direct kernels
                       (CONVKIT_CAUSAL_STATE=direct) instead of [state, x] copied for the depthwise kernels.
  chunk_packed         the same chunk with seq_idx (4 packed sequences per row); torch: the masked sum over
                       taps, the only way to write it in torch.
Floors: bytes / 4.26 TB/s (../shared/PERFORMANCE.md); update: x, y, the state read and written, weights;
chunk fwd: x, y, state, final state, weights; fwd+bwd adds dy, dx and the state's grad.
"""
import os

import torch
import torch.nn.functional as F

import convkit

from .bench import COPY_BW, time_ms

C, K = 4096, 4
DTYPE = torch.bfloat16


def _row(case, direction, ck_ms, th_ms, nbytes, timing, kernel):
    return {"case": case, "family": "streaming", "dtype": "bfloat16", "layout": "bcl", "direction": direction,
            "timing": timing, "convkit_ms": ck_ms, "torch_ms": th_ms, "floor_ms": 1e3 * nbytes / COPY_BW,
            "kernel": kernel}


def update_rows(batches=(1, 64, 256)):
    rows = []
    for B in batches:
        w = torch.randn(C, K, device="cuda", dtype=DTYPE)
        b = torch.randn(C, device="cuda", dtype=DTYPE)
        x = torch.randn(B, C, device="cuda", dtype=DTYPE)
        state_ck = torch.randn(B, C, K, device="cuda", dtype=DTYPE)
        state_th = state_ck.clone()

        def ck():
            return convkit.causal_conv1d_update(x, state_ck, w, b, activation="silu")

        def th():
            state_th.copy_(torch.roll(state_th, shifts=-1, dims=-1))
            state_th[:, :, -1] = x
            return F.silu((state_th * w).sum(-1) + b)

        # same step, same result (a check that the two sides do the same work)
        y_ck, y_th = ck().float(), th().float()
        err = ((y_ck - y_th).norm() / y_th.norm()).item()
        assert err < 2e-2, f"update B{B}: convkit and torch differ (relative {err})"
        esize = 2
        nbytes = esize * (2 * B * C + 2 * B * C * K + C * K + C)
        for graph in (False, True):
            rows.append(_row(f"update_B{B}" + ("[graph]" if graph else ""), "fwd", time_ms(ck, graph=graph),
                             time_ms(th, graph=graph), nbytes,
                             "cuda_graph" if graph else "eager", "causal_conv1d_update"))
    return rows


def _packed_reference(x, w, b, state, seq_idx):
    """The seq_idx call written in torch: masked sum over taps of [state, x]."""
    B, Cx, L = x.shape
    halo = w.shape[1] - 1
    xe = torch.cat([state, x], 2)
    se = torch.cat([seq_idx[:, :1].expand(B, halo), seq_idx], 1)
    z = b[:, None].float()
    for k in range(w.shape[1]):
        keep = (se[:, k:k + L] == seq_idx)[:, None, :]
        z = z + w[:, k, None].float() * torch.where(keep, xe[:, :, k:k + L], 0).float()
    return F.silu(z).to(x.dtype), xe[:, :, -halo:]


def chunk_rows(B=8, L=2048):
    rows = []
    x = torch.randn(B, C, L, device="cuda", dtype=DTYPE)
    w = torch.randn(C, K, device="cuda", dtype=DTYPE)
    b = torch.randn(C, device="cuda", dtype=DTYPE)
    state = torch.randn(B, C, K - 1, device="cuda", dtype=DTYPE)
    seq = (torch.arange(L, device="cuda", dtype=torch.int32) * 4 // L).expand(B, L).contiguous()

    def ck_state():
        return convkit.causal_conv1d(x, w, b, activation="silu", initial_state=state, return_final_state=True)

    def th_state():
        xe = torch.cat([state, x], 2)
        return F.silu(F.conv1d(xe, w[:, None], b, groups=C)), xe[:, :, -(K - 1):]

    def ck_packed():
        return convkit.causal_conv1d(x, w, b, activation="silu", initial_state=state, return_final_state=True,
                                     seq_idx=seq)

    def th_packed():
        return _packed_reference(x, w, b, state, seq)

    esize = 2
    fwd_bytes = esize * (2 * B * C * L + 2 * B * C * (K - 1) + C * K + C)
    bwd_bytes = fwd_bytes + esize * (2 * B * C * L + B * C * (K - 1))
    kernels = {"chunk_state": "[state, x] copy + conv1d depthwise", "chunk_state_direct": "causal_conv1d direct",
               "chunk_packed": "causal_conv1d direct (seq_idx)"}
    for name, ck, th in (("chunk_state", ck_state, th_state), ("chunk_state_direct", ck_state, th_state),
                         ("chunk_packed", ck_packed, th_packed)):
        # the state's two routes: CONVKIT_CAUSAL_STATE (convkit/causal.py), read at every call
        os.environ["CONVKIT_CAUSAL_STATE"] = "direct" if name == "chunk_state_direct" else "copy"
        y_ck, y_th = ck()[0].float(), th()[0].float()
        err = ((y_ck - y_th).norm() / y_th.norm()).item()
        assert err < 2e-2, f"{name}: convkit and torch differ (relative {err})"
        with torch.no_grad():
            rows.append(_row(name, "fwd", time_ms(ck), time_ms(th), fwd_bytes, "eager", kernels[name]))
        for t in (x, w, b, state):
            t.requires_grad_(True)
        dy = torch.randn_like(x)

        def step(f):
            def run():
                for t in (x, w, b, state):
                    t.grad = None
                y, fs = f()
                torch.autograd.backward([y, fs], [dy, torch.zeros_like(fs)])
            return run

        rows.append(_row(name, "fwdbwd", time_ms(step(ck)), time_ms(step(th)), bwd_bytes, "eager",
                         kernels[name] + ", fwd + bwd"))
        for t in (x, w, b, state):
            t.requires_grad_(False)
            t.grad = None
    os.environ.pop("CONVKIT_CAUSAL_STATE", None)
    return rows


def run():
    return update_rows() + chunk_rows()
