"""convkit's custom ops: the only place that calls the compiled kernels.

  convkit::conv1d_forward   (x, w, bias) -> y = activation(conv1d(x, w) + bias)
  convkit::conv1d_backward  (dy, x, w, bias) -> (dx, dw, db); a gradient not asked for is empty
Arguments arrive validated (convkit/functional.py), with asymmetric padding and the activation as
an int code. CUDA tensors go to convkit's kernels, and only to them; CPU tensors go to torch's own
convolution. Each op has a fake (meta) implementation so torch.compile can trace through it, and
Conv1dFunction (an autograd.Function) ties them together for training.
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from ._ext import require_cuda_ext

# Same codes as csrc/conv1d_params.h
ACTIVATIONS = {None: 0, "relu": 1, "silu": 2, "gelu": 3}
_TORCH_ACT = {0: lambda z: z, 1: F.relu, 2: F.silu, 3: F.gelu}
# grad_out * activation'(z), by torch's own elementwise backward ops
_ACT_BACKWARD = {
    1: lambda g, z: torch.ops.aten.threshold_backward(g, z, 0),
    2: lambda g, z: torch.ops.aten.silu_backward(g, z),
    3: lambda g, z: torch.ops.aten.gelu_backward(g, z),
}


def out_length(length, kernel_size, stride, pad_left, pad_right, dilation):
    return (length + pad_left + pad_right - dilation * (kernel_size - 1) - 1) // stride + 1


def is_blc(x):
    """x (B, C, L) is a (B, L, C) tensor seen through .transpose(1, 2) (dispatch.cpp's is_blc)."""
    return x.shape[1] > 1 and x.stride(1) == 1 and x.stride(2) == x.shape[1]


def channels_last_depthwise(x, weight, groups):
    """A depthwise call (multiplier 1) on a (B, L, C) tensor seen as (B, C, L): on CUDA its output has
    the same layout (the channels-last kernel writes it so). Must match dispatch.cpp's rule."""
    C = x.shape[1]
    return x.is_cuda and groups == C and weight.shape[0] == C and is_blc(x)


def _cpu_pre_activation(x, weight, bias, stride, pad_left, pad_right, dilation, groups):
    if pad_left or pad_right:
        x = F.pad(x, (pad_left, pad_right))
    if x.dtype != weight.dtype:  # fp32 weights, 16-bit input: compute in fp32 like the CUDA kernels
        return F.conv1d(x.to(weight.dtype), weight, bias, stride, 0, dilation, groups).to(x.dtype)
    return F.conv1d(x, weight, bias, stride, 0, dilation, groups)


@torch.library.custom_op("convkit::conv1d_forward", mutates_args=())
def conv1d_forward(x: Tensor, weight: Tensor, bias: Optional[Tensor], stride: int, pad_left: int,
                   pad_right: int, dilation: int, groups: int, activation: int) -> Tensor:
    if x.is_cuda:
        return require_cuda_ext().conv1d_forward(x, weight, bias, stride, pad_left, pad_right, dilation, groups,
                                                 activation)
    z = _cpu_pre_activation(x, weight, bias, stride, pad_left, pad_right, dilation, groups)
    return _TORCH_ACT[activation](z)


@conv1d_forward.register_fake
def _(x, weight, bias, stride, pad_left, pad_right, dilation, groups, activation):
    lout = out_length(x.shape[2], weight.shape[2], stride, pad_left, pad_right, dilation)
    if channels_last_depthwise(x, weight, groups):
        return x.new_empty((x.shape[0], lout, weight.shape[0])).transpose(1, 2)
    return x.new_empty((x.shape[0], weight.shape[0], lout))


@torch.library.custom_op("convkit::conv1d_backward", mutates_args=())
def conv1d_backward(grad_out: Tensor, x: Tensor, weight: Tensor, bias: Optional[Tensor], stride: int,
                    pad_left: int, pad_right: int, dilation: int, groups: int, activation: int, need_input: bool,
                    need_weight: bool, need_bias: bool) -> Tuple[Tensor, Tensor, Tensor]:
    if x.is_cuda:
        return require_cuda_ext().conv1d_backward(grad_out, x, weight, bias, stride, pad_left, pad_right, dilation,
                                                  groups, activation, need_input, need_weight, need_bias)
    if activation:
        z = _cpu_pre_activation(x, weight, bias, stride, pad_left, pad_right, dilation, groups)
        grad_out = _ACT_BACKWARD[activation](grad_out, z)
    xp = F.pad(x, (pad_left, pad_right)) if (pad_left or pad_right) else x
    need_bias = need_bias and bias is not None
    wt = weight.dtype
    gx, gw, gb = torch.ops.aten.convolution_backward(grad_out.to(wt), xp.to(wt), weight, [weight.shape[0]], [stride],
                                                     [0], [dilation], False, [0], groups,
                                                     [need_input, need_weight, need_bias])
    gx = gx[:, :, pad_left:pad_left + x.shape[2]].to(x.dtype).contiguous() if need_input else x.new_empty((0,))
    return gx, (gw if need_weight else weight.new_empty((0,))), (gb if need_bias else weight.new_empty((0,)))


@conv1d_backward.register_fake
def _(grad_out, x, weight, bias, stride, pad_left, pad_right, dilation, groups, activation, need_input,
      need_weight, need_bias):
    if not need_input:
        gx = x.new_empty((0,))
    elif channels_last_depthwise(x, weight, groups):  # dispatch.cpp gives grad-input x's layout then
        gx = x.new_empty((x.shape[0], x.shape[2], x.shape[1])).transpose(1, 2)
    else:
        gx = x.new_empty(x.shape)
    gw = weight.new_empty(weight.shape if need_weight else (0,))
    gb = weight.new_empty((weight.shape[0],) if (need_bias and bias is not None) else (0,))
    return gx, gw, gb


class Conv1dFunction(torch.autograd.Function):
    """Differentiates convkit::conv1d_forward with convkit::conv1d_backward (once: no double backward)."""

    @staticmethod
    def forward(x, weight, bias, stride, pad_left, pad_right, dilation, groups, activation):
        return torch.ops.convkit.conv1d_forward(x, weight, bias, stride, pad_left, pad_right, dilation, groups,
                                                activation)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, weight, bias, *args = inputs
        ctx.save_for_backward(x, weight, bias)
        ctx.conv_args = tuple(args)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight, bias = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        need_b = need_b and bias is not None
        if not (need_x or need_w or need_b):
            return (None,) * 9
        gx, gw, gb = torch.ops.convkit.conv1d_backward(grad_out, x, weight, bias, *ctx.conv_args, need_x, need_w,
                                                       need_b)
        return (gx if need_x else None, gw if need_w else None, gb if need_b else None) + (None,) * 6
