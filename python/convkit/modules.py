"""convkit.Conv1d (a drop-in nn.Conv1d) and convert(model)."""
import torch.nn as nn
from torch import Tensor

from .functional import conv1d


class Conv1d(nn.Conv1d):
    """nn.Conv1d computed by convkit: same constructor, parameters, init, state_dict and padding modes,
    plus padding='causal' (left pad of (kernel_size - 1) * dilation, nothing on the right)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        causal = isinstance(padding, str) and padding == "causal"
        super().__init__(in_channels, out_channels, kernel_size, stride, 0 if causal else padding, dilation,
                         groups, bias, padding_mode, device, dtype)
        if causal:
            self.padding = "causal"
            # F.pad order (left, right); used for the non-zero padding modes
            self._reversed_padding_repeated_twice = [self.dilation[0] * (self.kernel_size[0] - 1), 0]

    def _conv_forward(self, input: Tensor, weight: Tensor, bias):
        if self.padding_mode != "zeros":
            input = nn.functional.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv1d(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv1d(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)


def convert(module: nn.Module) -> nn.Module:
    """Makes every nn.Conv1d in `module` (the module itself included) a convkit.Conv1d, in place.

    The modules keep their identity, parameters, buffers, hooks, device and dtype (only their class
    changes), so optimizers and references to them stay valid. Subclasses of nn.Conv1d other than
    nn.Conv1d itself are left alone: they may override forward. Returns `module`.
    """
    for m in module.modules():
        if type(m) is nn.Conv1d:
            m.__class__ = Conv1d
    return module
