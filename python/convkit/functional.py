"""convkit.conv1d: torch.nn.functional.conv1d's signature and semantics, on convkit's kernels.

Arguments are validated and normalised here, once, into (stride, pad_left, pad_right, dilation,
groups) integers; the ops below (convkit/ops.py) take them as given.
"""
from typing import Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from . import ops
from ._ext import require_cuda_ext

IntOr1Tuple = Union[int, Sequence[int]]
CUDA_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _single(value, name: str) -> int:
    """An int or a 1-element tuple/list of int, as torch accepts for conv1d."""
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise RuntimeError(f"conv1d: expected {name} to be a single integer value or a list of 1 values "
                               f"to match the convolution dimensions, but got {name}={list(value)}")
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, (int, torch.SymInt)):
        raise TypeError(f"conv1d: {name} must be an int or a 1-tuple of int, got {value!r}")
    return value


def resolve_padding(padding, kernel_size: int, stride: int, dilation: int) -> Tuple[int, int]:
    """(left, right) zero padding for an int, 1-tuple, 'valid', 'same' or 'causal' padding argument."""
    if isinstance(padding, str):
        total = dilation * (kernel_size - 1)
        if padding == "valid":
            return 0, 0
        if padding == "same":
            if stride != 1:
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            # torch puts the odd element of an odd total on the right
            return total // 2, total - total // 2
        if padding == "causal":
            return total, 0
        raise RuntimeError(f"Invalid padding string: {padding!r} (expected 'valid', 'same', 'causal' or an int)")
    p = _single(padding, "padding")
    if p < 0:
        raise RuntimeError(f"negative padding is not supported (padding={p})")
    return p, p


def normalize_args(input: Tensor, weight: Tensor, bias: Optional[Tensor], stride, padding, dilation, groups):
    """Checks a conv1d call as torch would and returns (stride, pad_left, pad_right, dilation, groups)."""
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        raise TypeError("conv1d: input and weight must be tensors")
    if input.dim() != 3:
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: "
                           f"{list(input.shape)}")
    if weight.dim() != 3:
        raise RuntimeError(f"conv1d: weight must be 3-D (out_channels, in_channels/groups, kernel_size), "
                           f"got weight of size {list(weight.shape)}")
    stride, dilation = _single(stride, "stride"), _single(dilation, "dilation")
    if isinstance(groups, bool) or not isinstance(groups, (int, torch.SymInt)):
        raise TypeError(f"conv1d: groups must be an int, got {groups!r}")
    if stride < 1:
        raise RuntimeError(f"non-positive stride is not supported (stride={stride})")
    if dilation < 1:
        raise RuntimeError(f"non-positive dilation is not supported (dilation={dilation})")
    if groups < 1:
        raise RuntimeError(f"non-positive groups is not supported (groups={groups})")
    cout, cin_g, k = weight.shape
    if k < 1:
        raise RuntimeError(f"conv1d: kernel size must be >= 1, got weight of size {list(weight.shape)}")
    if cout % groups != 0:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                           f"but got weight of size {list(weight.shape)} instead")
    if input.shape[1] != cin_g * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
                           f"{list(input.shape)} to have {cin_g * groups} channels, but got {input.shape[1]} "
                           f"channels instead")
    if input.shape[2] == 0 and input.shape[0] != 0 and input.shape[1] != 0:
        raise RuntimeError(f"Only zero batch or zero channel inputs are supported, but got input shape: "
                           f"{list(input.shape)} (length 0)")
    # fp32 weights beside fp16/bf16 input are allowed (fp32 master weights, no cast per call)
    fp32_weights = weight.dtype == torch.float32 and input.dtype in (torch.float16, torch.bfloat16)
    if input.dtype != weight.dtype and not fp32_weights:
        raise RuntimeError(f"Input type ({input.dtype}) and weight type ({weight.dtype}) should be the same "
                           f"(or float32 weights with float16/bfloat16 input)")
    if input.device != weight.device:
        raise RuntimeError(f"Input is on {input.device} but weight is on {weight.device}; they must be on the "
                           f"same device")
    if bias is not None:
        if not isinstance(bias, Tensor):
            raise TypeError("conv1d: bias must be a tensor or None")
        if bias.dim() != 1 or bias.shape[0] != cout:
            raise RuntimeError(f"Given weight of size {list(weight.shape)}, expected bias to be 1-dimensional with "
                               f"{cout} elements, but got bias of size {list(bias.shape)} instead")
        if bias.dtype != weight.dtype:
            raise RuntimeError(f"Input type ({input.dtype}) and bias type ({bias.dtype}) should be the same "
                               f"(bias takes the weight's dtype, {weight.dtype})")
        if bias.device != input.device:
            raise RuntimeError(f"Input is on {input.device} but bias is on {bias.device}; they must be on the "
                               f"same device")
    pad_left, pad_right = resolve_padding(padding, k, stride, dilation)
    padded = input.shape[2] + pad_left + pad_right
    if padded < dilation * (k - 1) + 1:
        raise RuntimeError(f"Calculated padded input size per channel: ({padded}). Kernel size: "
                           f"({dilation * (k - 1) + 1}) with dilation. Kernel size can't be greater than actual "
                           f"input size (the output would have length < 1)")
    if input.is_cuda and input.dtype not in CUDA_DTYPES:
        raise RuntimeError(f"convkit: dtype {input.dtype} is not supported on CUDA "
                           f"(float32, float16, bfloat16, float64)")
    return stride, pad_left, pad_right, dilation, groups


def conv1d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOr1Tuple = 1,
           padding: Union[str, IntOr1Tuple] = 0, dilation: IntOr1Tuple = 1, groups: int = 1,
           activation: Optional[str] = None) -> Tensor:
    """Same signature and result as torch.nn.functional.conv1d, plus padding='causal' and a fused
    activation: activation(conv1d(...) + bias) for activation in None, "relu", "silu", "gelu" (exact
    erf GELU, as F.gelu), applied inside the kernel and differentiated in the backward kernel.

    input (B, Cin, L) or unbatched (Cin, L); weight (Cout, Cin/groups, K); bias (Cout,) or None.
    padding: int, 1-tuple, 'valid', 'same' (stride 1 only) or 'causal' (left pad (K-1)*dilation).
    CUDA tensors run convkit's kernels, forward and backward; CPU tensors run torch's convolution.
    """
    unbatched = isinstance(input, Tensor) and input.dim() == 2
    if unbatched:
        input = input.unsqueeze(0)
    args = normalize_args(input, weight, bias, stride, padding, dilation, groups)
    if activation not in ops.ACTIVATIONS:
        raise ValueError(f"conv1d: activation must be one of None, 'relu', 'silu', 'gelu', got {activation!r}")
    out = ops.Conv1dFunction.apply(input, weight, bias, *args, ops.ACTIVATIONS[activation])
    return out.squeeze(0) if unbatched else out


def explain(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOr1Tuple = 1,
            padding: Union[str, IntOr1Tuple] = 0, dilation: IntOr1Tuple = 1, groups: int = 1) -> dict:
    """Which kernel each direction of this call would run, e.g.
    {'forward': 'conv1d_fwd_depthwise<K=3,S=1,D=1>', 'grad_input': ..., 'grad_weight': ...}.
    Set CONVKIT_FORCE_GENERIC=1 to force the generic kernels."""
    if isinstance(input, Tensor) and input.dim() == 2:
        input = input.unsqueeze(0)
    args = normalize_args(input, weight, bias, stride, padding, dilation, groups)
    if not input.is_cuda:
        return {"forward": "torch (CPU)", "grad_input": "torch (CPU)", "grad_weight": "torch (CPU)"}
    names = require_cuda_ext().explain(input, weight, *args)
    return dict(zip(("forward", "grad_input", "grad_weight"), names))
