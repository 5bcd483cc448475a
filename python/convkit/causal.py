"""Causal depthwise conv for sequence models (Mamba-style short convolutions): carried state, packed
sequences and a one-step decode update.

  y = convkit.causal_conv1d(x, w, b, activation="silu")                          # training, whole sequences
  y, state = convkit.causal_conv1d(x, w, b, initial_state=state, return_final_state=True)   # in chunks
  y = convkit.causal_conv1d(x, w, b, seq_idx=seq_idx)                            # packed sequences
  y = convkit.causal_conv1d_update(x_t, conv_state, w, b)                        # decode, state in place

Where each call runs (CUDA):
  * no seq_idx, no initial_state: convkit.conv1d's op (ops.Conv1dFunction) with causal padding, the depthwise
    kernels (arguments checked here, once);
  * initial_state, no seq_idx: the state placed in front of x (one copy), then the same depthwise kernels
    with no padding (CONVKIT_CAUSAL_STATE=direct: the direct kernels below instead);
  * seq_idx: convkit::causal_conv1d_forward / _backward (csrc/kernels/causal_conv1d.cu), direct kernels that
    read the state and mask other sequences;
  * the update: convkit::causal_conv1d_update (same file).
CPU tensors run the same semantics in torch (the conv through torch's convolution).
"""
import os
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from . import ops
from ._ext import require_cuda_ext
from .functional import normalize_args

_ACT_ALIASES = {"swish": "silu"}


def _activation_code(activation, fn):
    activation = _ACT_ALIASES.get(activation, activation)
    if activation not in ops.ACTIVATIONS:
        raise ValueError(f"{fn}: activation must be one of None, 'relu', 'silu' ('swish'), 'gelu', got {activation!r}")
    return ops.ACTIVATIONS[activation]


def _weight_2d(weight, channels, fn):
    """(C, K) or nn.Conv1d's depthwise (C, 1, K) weight, as a (C, K) view."""
    if not isinstance(weight, Tensor):
        raise TypeError(f"{fn}: weight must be a tensor")
    if weight.dim() == 3 and weight.shape[1] == 1:
        weight = weight.squeeze(1)
    if weight.dim() != 2 or weight.shape[0] != channels or weight.shape[1] < 1:
        raise RuntimeError(f"{fn}: weight must have shape ({channels}, K) or ({channels}, 1, K) for input with "
                           f"{channels} channels, got {list(weight.shape)}")
    return weight


def _dilation(dilation, fn):
    if isinstance(dilation, bool) or not isinstance(dilation, (int, torch.SymInt)) or dilation < 1:
        raise RuntimeError(f"{fn}: dilation must be an int >= 1, got {dilation!r}")
    return dilation


def _like_x(x):
    """An empty tensor shaped like x, in the layout the kernels give outputs of x: (B, L, C) memory for a
    (B, L, C) tensor seen as (B, C, L), else contiguous."""
    B, C, L = x.shape
    return x.new_empty((B, L, C)).transpose(1, 2) if ops.is_blc(x) else x.new_empty((B, C, L))


def _check_int32(t, name, shape, x, fn):
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}: {name} must be a tensor or None")
    if t.dtype != torch.int32:
        raise RuntimeError(f"{fn}: {name} must be int32, got {t.dtype}")
    if tuple(t.shape) != tuple(shape):
        raise RuntimeError(f"{fn}: {name} must have shape {list(shape)}, got {list(t.shape)}")
    if t.device != x.device:
        raise RuntimeError(f"{fn}: {name} is on {t.device} but x is on {x.device}")


def _check_state(t, name, shape, x, fn):
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}: {name} must be a tensor or None")
    if t.dtype != x.dtype:
        raise RuntimeError(f"{fn}: {name} has dtype {t.dtype} but x has dtype {x.dtype}")
    if t.device != x.device:
        raise RuntimeError(f"{fn}: {name} is on {t.device} but x is on {x.device}")
    if shape is not None and tuple(t.shape) != tuple(shape):
        raise RuntimeError(f"{fn}: {name} must have shape {list(shape)}, got {list(t.shape)}")


def _direct_state_route():
    """CONVKIT_CAUSAL_STATE=direct (read at every call): a call with an initial state and no seq_idx runs the
    direct kernels of the seq_idx route, which read the state where it is, instead of the default ("copy"):
    [state, x] copied once, then the depthwise kernels. For timing one against the other."""
    return os.environ.get("CONVKIT_CAUSAL_STATE", "copy") == "direct"


def _prepend(state, x):
    """[state, x] along L, in x's layout (a (B, L, C) x gives (B, L, C) memory, so the depthwise kernels keep it)."""
    if ops.is_blc(x):
        return torch.cat([state.transpose(1, 2), x.transpose(1, 2)], dim=1).transpose(1, 2)
    return torch.cat([state, x], dim=2)


def _final_state(x, state, seq_idx, halo):
    """The last `halo` inputs of [state, x] (zeros for a missing state), positions of a sequence other than
    the last token's zeroed: what a next call continuing that sequence needs. Differentiable (torch ops)."""
    B, C, L = x.shape
    if halo == 0:
        return x.new_zeros((B, C, 0))
    if L >= halo:
        fs = x[:, :, L - halo:]
    else:
        prev = state[:, :, L:] if state is not None else x.new_zeros((B, C, halo - L))
        fs = torch.cat([prev, x], dim=2)
    if seq_idx is not None:
        pos = torch.arange(L - halo, L, device=x.device)
        at = torch.where(pos >= 0, seq_idx.index_select(1, pos.clamp(min=0)), seq_idx[:, :1])
        fs = torch.where((at == seq_idx[:, L - 1:])[:, None, :], fs, fs.new_zeros(()))
    return fs.contiguous()


def causal_conv1d(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation: Optional[str] = None,
                  initial_state: Optional[Tensor] = None, return_final_state: bool = False,
                  seq_idx: Optional[Tensor] = None, dilation: int = 1):
    """y[b, c, t] = activation(bias[c] + sum_k weight[c, k] * x[b, c, t - (K - 1 - k) * dilation]).

    x (B, C, L), contiguous or a (B, L, C) tensor seen through .transpose(1, 2) (the output takes x's layout);
    weight (C, K) or (C, 1, K); bias (C,); activation None, "silu" ("swish"), "relu" or "gelu".
    initial_state (B, C, (K - 1) * dilation), x's dtype: the inputs before x[..., 0] (zeros when None); with
      seq_idx it is the left context of each row's first sequence only.
    return_final_state: also return the last (K - 1) * dilation inputs of [initial_state, x], shaped like
      initial_state, to pass as the next chunk's initial_state (with seq_idx: those of the row's last sequence,
      other positions zero).
    seq_idx (B, L) int32: packed sequences; positions with different values never meet in one output.
    Gradients flow to x, weight, bias and initial_state (also through the final state).
    """
    fn = "causal_conv1d"
    if not isinstance(x, Tensor) or x.dim() != 3:
        raise RuntimeError(f"{fn}: x must be a 3-D tensor (B, C, L), got "
                           f"{list(x.shape) if isinstance(x, Tensor) else type(x).__name__}")
    B, C, L = x.shape
    if L < 1 or C < 1:
        raise RuntimeError(f"{fn}: x must have length >= 1 and channels >= 1, got shape {list(x.shape)}")
    dilation = _dilation(dilation, fn)
    w2 = _weight_2d(weight, C, fn)
    act = _activation_code(activation, fn)
    K = w2.shape[1]
    halo = (K - 1) * dilation
    # conv1d's own checks (dtypes, devices, bias) on the depthwise call this is
    normalize_args(x, w2.unsqueeze(1), bias, 1, "causal", dilation, C)
    if initial_state is not None:
        _check_state(initial_state, "initial_state", (B, C, halo), x, fn)
    if seq_idx is not None:
        _check_int32(seq_idx, "seq_idx", (B, L), x, fn)

    if seq_idx is not None or (initial_state is not None and halo > 0 and _direct_state_route()):
        y = CausalConv1dFunction.apply(x, w2, bias, initial_state, seq_idx, dilation, act)
    elif initial_state is None or halo == 0:  # checked above: conv1d's op directly, causal padding
        y = ops.Conv1dFunction.apply(x, w2.unsqueeze(1), bias, 1, halo, 0, dilation, C, act)
    else:  # [state, x] without padding
        y = ops.Conv1dFunction.apply(_prepend(initial_state, x), w2.unsqueeze(1), bias, 1, 0, 0, dilation, C, act)
    if return_final_state:
        return y, _final_state(x, initial_state, seq_idx, halo)
    return y


def causal_conv1d_update(x: Tensor, conv_state: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                         activation: Optional[str] = None, cache_seqlens: Optional[Tensor] = None,
                         state_indices: Optional[Tensor] = None, dilation: int = 1) -> Tensor:
    """One decode step: the causal conv of the new tokens x given the inputs before them in conv_state,
    which is updated in place. Inference only (no gradients).

    x (B, C) one token or (B, C, T) T tokens; returns the same shape.
    conv_state (rows, C, S), x's dtype, any strides (e.g. a (rows, S, C) cache seen through .transpose(1, 2)),
      S >= (K - 1) * dilation. Without cache_seqlens it is a sliding window: the sequence so far ends at
      conv_state[..., S - 1], and afterwards holds the last S inputs of [conv_state, x].
    cache_seqlens (B,) int32: conv_state is a circular buffer; the input before new token 0 is at
      (cache_seqlens - 1) mod S and new token i is written at (cache_seqlens + i) mod S (the caller advances
      cache_seqlens, as with causal-conv1d).
    state_indices (B,) int32: batch row b uses conv_state[state_indices[b]] (continuous batching; rows may
      then differ from B). An index outside [0, rows) marks a padding row (-1, as vLLM's pad slot): its output
      is zero and no cache row is touched. Checking the indices would take a device sync per step, so they
      are not checked; the other entries must be distinct (two batch rows updating one cache row race).
    No host synchronisation inside the op: it can be captured in a CUDA graph.
    """
    fn = "causal_conv1d_update"
    if not isinstance(x, Tensor) or x.dim() not in (2, 3):
        raise RuntimeError(f"{fn}: x must be (B, C) or (B, C, T)")
    single = x.dim() == 2
    x3 = x.unsqueeze(2) if single else x
    B, C, T = x3.shape
    if C < 1:
        raise RuntimeError(f"{fn}: x must have channels >= 1, got shape {list(x.shape)}")
    dilation = _dilation(dilation, fn)
    w2 = _weight_2d(weight, C, fn)
    act = _activation_code(activation, fn)
    halo = (w2.shape[1] - 1) * dilation
    if T >= 1:
        normalize_args(x3, w2.unsqueeze(1), bias, 1, "causal", dilation, C)
    _check_state(conv_state, "conv_state", None, x, fn)
    if conv_state.dim() != 3 or conv_state.shape[1] != C or conv_state.shape[2] < max(halo, 1):
        raise RuntimeError(f"{fn}: conv_state must have shape (rows, {C}, S) with S >= {max(halo, 1)} "
                           f"((K - 1) * dilation, at least 1), got {list(conv_state.shape)}")
    if cache_seqlens is not None:
        _check_int32(cache_seqlens, "cache_seqlens", (B,), x, fn)
    if state_indices is not None:
        # not range-checked here: that would cost a device sync per decode step (see the docstring)
        _check_int32(state_indices, "state_indices", (B,), x, fn)
    elif conv_state.shape[0] != B:
        raise RuntimeError(f"{fn}: conv_state has {conv_state.shape[0]} rows for a batch of {B} "
                           f"(pass state_indices to pick rows)")
    y = torch.ops.convkit.causal_conv1d_update(x3, conv_state, w2, bias, cache_seqlens, state_indices, dilation, act)
    return y.squeeze(2) if single else y


# ---- custom ops ---------------------------------------------------------------------------------------------

def _compute_dtype(x):
    return torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype


def _cpu_taps(x, w2, state, seq_idx, dilation):
    """The seq_idx call's pieces in torch ops: [state or zeros, x] in the compute dtype, and per tap k the
    (B, 1, L) mask of the positions tap k may read (input t - (K-1-k)*dilation is of the same sequence as t)."""
    B, C, L = x.shape
    K = w2.shape[1]
    halo = (K - 1) * dilation
    ct = _compute_dtype(x)
    pre = state.to(ct) if state is not None else x.new_zeros((B, C, halo), dtype=ct)
    xe = torch.cat([pre, x.to(ct)], dim=2)
    if seq_idx is None:  # one sequence (the direct route of a call with an initial state)
        return xe, [torch.ones((B, 1, L), dtype=torch.bool, device=x.device)] * K
    se = torch.cat([seq_idx[:, :1].expand(B, halo), seq_idx], dim=1)
    keeps = [(se[:, k * dilation:k * dilation + L] == seq_idx).unsqueeze(1) for k in range(K)]
    return xe, keeps


def _cpu_masked_z(x, w2, bias, state, seq_idx, dilation):
    """The pre-activation z of the seq_idx call, in the compute dtype."""
    L = x.shape[2]
    xe, keeps = _cpu_taps(x, w2, state, seq_idx, dilation)
    w = w2.to(xe.dtype)
    z = xe.new_zeros(x.shape)
    for k, keep in enumerate(keeps):
        off = k * dilation
        z = z + w[:, k, None] * torch.where(keep, xe[:, :, off:off + L], xe.new_zeros(()))
    if bias is not None:
        z = z + bias.to(xe.dtype)[:, None]
    return z


def _cpu_masked_backward(grad_out, x, w2, bias, state, seq_idx, dilation, act):
    """(dx, dw, db, dstate) of the seq_idx call, written out (a custom op's CPU kernel runs below autograd)."""
    L = x.shape[2]
    halo = (w2.shape[1] - 1) * dilation
    xe, keeps = _cpu_taps(x, w2, state, seq_idx, dilation)
    g = grad_out.to(xe.dtype)
    if act:
        g = ops._ACT_BACKWARD[act](g, _cpu_masked_z(x, w2, bias, state, seq_idx, dilation))
    w = w2.to(xe.dtype)
    dxe = torch.zeros_like(xe)
    dw = xe.new_zeros(w2.shape)
    zero = xe.new_zeros(())
    for k, keep in enumerate(keeps):
        off = k * dilation
        dxe[:, :, off:off + L] += w[:, k, None] * torch.where(keep, g, zero)
        dw[:, k] = (g * torch.where(keep, xe[:, :, off:off + L], zero)).sum(dim=(0, 2))
    return (dxe[:, :, halo:].to(x.dtype), dw.to(w2.dtype), g.sum(dim=(0, 2)).to(w2.dtype),
            dxe[:, :, :halo].to(x.dtype).contiguous())


@torch.library.custom_op("convkit::causal_conv1d_forward", mutates_args=())
def causal_conv1d_forward(x: Tensor, weight: Tensor, bias: Optional[Tensor], initial_state: Optional[Tensor],
                          seq_idx: Optional[Tensor], dilation: int, activation: int) -> Tensor:
    if x.is_cuda:
        return require_cuda_ext().causal_conv1d_forward(x, weight, bias, initial_state, seq_idx, dilation, activation)
    out = _like_x(x)
    out.copy_(ops._TORCH_ACT[activation](_cpu_masked_z(x, weight, bias, initial_state, seq_idx, dilation)))
    return out


@causal_conv1d_forward.register_fake
def _(x, weight, bias, initial_state, seq_idx, dilation, activation):
    return _like_x(x)


@torch.library.custom_op("convkit::causal_conv1d_backward", mutates_args=())
def causal_conv1d_backward(grad_out: Tensor, x: Tensor, weight: Tensor, bias: Optional[Tensor],
                           initial_state: Optional[Tensor], seq_idx: Optional[Tensor], dilation: int, activation: int,
                           need_x: bool, need_w: bool, need_b: bool,
                           need_state: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    if x.is_cuda:
        return require_cuda_ext().causal_conv1d_backward(grad_out, x, weight, bias, initial_state, seq_idx, dilation,
                                                         activation, need_x, need_w, need_b, need_state)
    need_b = need_b and bias is not None
    need_state = need_state and initial_state is not None
    gx, gw, gb, gs = _cpu_masked_backward(grad_out, x, weight, bias, initial_state, seq_idx, dilation, activation)
    if need_x:
        out = _like_x(x)
        out.copy_(gx)
        gx = out
    # a gradient not asked for is a fresh empty tensor (outputs may not alias one another)
    return (gx if need_x else x.new_empty((0,)), gw if need_w else weight.new_empty((0,)),
            gb if need_b else weight.new_empty((0,)), gs if need_state else x.new_empty((0,)))


@causal_conv1d_backward.register_fake
def _(grad_out, x, weight, bias, initial_state, seq_idx, dilation, activation, need_x, need_w, need_b, need_state):
    gx = _like_x(x) if need_x else x.new_empty((0,))
    gw = weight.new_empty(tuple(weight.shape)) if need_w else weight.new_empty((0,))
    gb = weight.new_empty((weight.shape[0],)) if (need_b and bias is not None) else weight.new_empty((0,))
    halo = (weight.shape[1] - 1) * dilation
    gs = x.new_empty((x.shape[0], x.shape[1], halo)) if (need_state and initial_state is not None) else x.new_empty((0,))
    return gx, gw, gb, gs


class CausalConv1dFunction(torch.autograd.Function):
    """Differentiates convkit::causal_conv1d_forward (the seq_idx call, or a state without seq_idx on the direct
    route) with convkit::causal_conv1d_backward."""

    @staticmethod
    def forward(x, weight, bias, initial_state, seq_idx, dilation, activation):
        return torch.ops.convkit.causal_conv1d_forward(x, weight, bias, initial_state, seq_idx, dilation, activation)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, weight, bias, initial_state, seq_idx, dilation, activation = inputs
        ctx.save_for_backward(x, weight, bias, initial_state, seq_idx)
        ctx.args = (dilation, activation)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight, bias, initial_state, seq_idx = ctx.saved_tensors
        need = ctx.needs_input_grad
        need_x, need_w = need[0], need[1]
        need_b, need_s = need[2] and bias is not None, need[3] and initial_state is not None
        if not (need_x or need_w or need_b or need_s):
            return (None,) * 7
        gx, gw, gb, gs = torch.ops.convkit.causal_conv1d_backward(grad_out, x, weight, bias, initial_state, seq_idx,
                                                                  *ctx.args, need_x, need_w, need_b, need_s)
        return (gx if need_x else None, gw if need_w else None, gb if need_b else None, gs if need_s else None,
                None, None, None)


def _cpu_update(x, conv_state, w2, bias, cache_seqlens, state_indices, dilation, act):
    B, C, T = x.shape
    K = w2.shape[1]
    rows_total, _, S = conv_state.shape
    rows = state_indices.long() if state_indices is not None else torch.arange(B)
    valid = (rows >= 0) & (rows < rows_total)
    r = rows.clamp(0, max(rows_total - 1, 0))
    st = conv_state[r]  # (B, C, S), a copy
    if cache_seqlens is not None:  # hist[..., S + p] = st[..., (cache_seqlens + p) mod S], p in [-S, -1]
        idx = (cache_seqlens.long()[:, None] + torch.arange(-S, 0)) % S
        hist = st.gather(2, idx[:, None, :].expand(B, C, S))
    else:
        hist = st
    ct = _compute_dtype(x)
    seq = torch.cat([hist, x], dim=2).to(ct)
    w = w2.to(ct)
    z = x.new_zeros((B, C, T), dtype=ct)
    for k in range(K):
        start = S - (K - 1 - k) * dilation
        z = z + w[:, k, None] * seq[:, :, start:start + T]
    if bias is not None:
        z = z + bias.to(ct)[:, None]
    y = ops._TORCH_ACT[act](z).to(x.dtype)
    y[~valid] = 0
    if cache_seqlens is None:
        new = torch.cat([hist, x], dim=2)[:, :, T:]
    else:
        first = max(0, T - S)
        pos = (cache_seqlens.long()[:, None] + torch.arange(first, T)) % S
        new = st.clone()
        new.scatter_(2, pos[:, None, :].expand(B, C, T - first), x[:, :, first:])
    conv_state[r[valid]] = new[valid]
    return y


@torch.library.custom_op("convkit::causal_conv1d_update", mutates_args=("conv_state",))
def _causal_conv1d_update_op(x: Tensor, conv_state: Tensor, weight: Tensor, bias: Optional[Tensor],
                             cache_seqlens: Optional[Tensor], state_indices: Optional[Tensor], dilation: int,
                             activation: int) -> Tensor:
    if x.is_cuda:
        return require_cuda_ext().causal_conv1d_update(x, conv_state, weight, bias, cache_seqlens, state_indices,
                                                       dilation, activation)
    return _cpu_update(x, conv_state, weight, bias, cache_seqlens, state_indices, dilation, activation)


@_causal_conv1d_update_op.register_fake
def _(x, conv_state, weight, bias, cache_seqlens, state_indices, dilation, activation):
    return x.new_empty(tuple(x.shape))
