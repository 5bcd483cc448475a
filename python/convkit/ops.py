"""convkit's custom ops: the only place that calls the compiled kernels.

Three ops, all with explicit (already validated) arguments and asymmetric padding:
  convkit::conv1d_forward           (x, w, bias) -> y
  convkit::conv1d_backward_input    (dy, w) -> dx
  convkit::conv1d_backward_params   (dy, x) -> (dw, db); an unrequested grad is an empty tensor
CUDA tensors go to convkit's kernels, and only to them; CPU tensors go to torch's own convolution.
Each op has a fake (meta) implementation so torch.compile can trace through it, and
Conv1dFunction (an autograd.Function) ties them together for training.
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from ._ext import require_cuda_ext


def out_length(length, kernel_size, stride, pad_left, pad_right, dilation):
    return (length + pad_left + pad_right - dilation * (kernel_size - 1) - 1) // stride + 1


@torch.library.custom_op("convkit::conv1d_forward", mutates_args=())
def conv1d_forward(x: Tensor, weight: Tensor, bias: Optional[Tensor], stride: int, pad_left: int,
                   pad_right: int, dilation: int, groups: int) -> Tensor:
    if x.is_cuda:
        return require_cuda_ext().conv1d_forward(x, weight, bias, stride, pad_left, pad_right, dilation, groups)
    if pad_left or pad_right:
        x = F.pad(x, (pad_left, pad_right))
    return F.conv1d(x, weight, bias, stride, 0, dilation, groups)


@conv1d_forward.register_fake
def _(x, weight, bias, stride, pad_left, pad_right, dilation, groups):
    lout = out_length(x.shape[2], weight.shape[2], stride, pad_left, pad_right, dilation)
    return x.new_empty((x.shape[0], weight.shape[0], lout))


@torch.library.custom_op("convkit::conv1d_backward_input", mutates_args=())
def conv1d_backward_input(grad_out: Tensor, weight: Tensor, in_length: int, stride: int, pad_left: int,
                          pad_right: int, dilation: int, groups: int) -> Tensor:
    if grad_out.is_cuda:
        return require_cuda_ext().conv1d_backward_input(grad_out, weight, in_length, stride, pad_left, pad_right,
                                                        dilation, groups)
    padded = grad_out.new_empty((grad_out.shape[0], weight.shape[1] * groups, in_length + pad_left + pad_right))
    gx = torch.ops.aten.convolution_backward(grad_out, padded, weight, None, [stride], [0], [dilation], False,
                                             [0], groups, [True, False, False])[0]
    return gx[:, :, pad_left:pad_left + in_length].contiguous()


@conv1d_backward_input.register_fake
def _(grad_out, weight, in_length, stride, pad_left, pad_right, dilation, groups):
    return grad_out.new_empty((grad_out.shape[0], weight.shape[1] * groups, in_length))


@torch.library.custom_op("convkit::conv1d_backward_params", mutates_args=())
def conv1d_backward_params(grad_out: Tensor, x: Tensor, kernel_size: int, stride: int, pad_left: int,
                           pad_right: int, dilation: int, groups: int, need_weight: bool,
                           need_bias: bool) -> Tuple[Tensor, Tensor]:
    if grad_out.is_cuda:
        return require_cuda_ext().conv1d_backward_params(grad_out, x, kernel_size, stride, pad_left, pad_right,
                                                         dilation, groups, need_weight, need_bias)
    cout = grad_out.shape[1]
    weight_like = x.new_empty((cout, x.shape[1] // groups, kernel_size))
    xp = F.pad(x, (pad_left, pad_right)) if (pad_left or pad_right) else x
    _, gw, gb = torch.ops.aten.convolution_backward(grad_out, xp, weight_like, [cout], [stride], [0], [dilation],
                                                    False, [0], groups, [False, need_weight, need_bias])
    empty = grad_out.new_empty((0,))
    return (gw if need_weight else empty), (gb if need_bias else empty.clone())


@conv1d_backward_params.register_fake
def _(grad_out, x, kernel_size, stride, pad_left, pad_right, dilation, groups, need_weight, need_bias):
    cout = grad_out.shape[1]
    gw = grad_out.new_empty((cout, x.shape[1] // groups, kernel_size) if need_weight else (0,))
    gb = grad_out.new_empty((cout,) if need_bias else (0,))
    return gw, gb


class Conv1dFunction(torch.autograd.Function):
    """Differentiates convkit::conv1d_forward with convkit's own backward ops (once: no double backward)."""

    @staticmethod
    def forward(x, weight, bias, stride, pad_left, pad_right, dilation, groups):
        return torch.ops.convkit.conv1d_forward(x, weight, bias, stride, pad_left, pad_right, dilation, groups)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, weight, bias, stride, pad_left, pad_right, dilation, groups = inputs
        ctx.save_for_backward(x, weight)
        ctx.conv_args = (stride, pad_left, pad_right, dilation, groups)
        ctx.has_bias = bias is not None

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        stride, pad_left, pad_right, dilation, groups = ctx.conv_args
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        need_b = need_b and ctx.has_bias
        gx = gw = gb = None
        if need_x:
            gx = torch.ops.convkit.conv1d_backward_input(grad_out, weight, x.shape[2], *ctx.conv_args)
        if need_w or need_b:
            gw, gb = torch.ops.convkit.conv1d_backward_params(grad_out, x, weight.shape[2], *ctx.conv_args,
                                                               need_w, need_b)
            gw = gw if need_w else None
            gb = gb if need_b else None
        return gx, gw, gb, None, None, None, None, None
