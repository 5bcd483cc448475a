"""convkit: fast 1D convolution for PyTorch (CUDA kernels, forward and backward).

    y = convkit.conv1d(x, w, b, stride=1, padding=0, dilation=1, groups=1)   # like F.conv1d
    m = convkit.Conv1d(64, 128, 3)                                           # like nn.Conv1d
    convkit.convert(model)                                                   # swap nn.Conv1d in place
    y, s = convkit.causal_conv1d(x, w, b, initial_state=s, return_final_state=True)   # sequence models
    y = convkit.causal_conv1d_update(x_t, conv_state, w, b)                  # one decode step
"""
from . import ops  # registers the torch.library custom ops
from ._config import show_config
from ._ext import cuda_built
from .causal import causal_conv1d, causal_conv1d_update
from .functional import conv1d, explain
from .modules import Conv1d, convert

__version__ = "0.1.0"
__all__ = ["conv1d", "Conv1d", "convert", "explain", "causal_conv1d", "causal_conv1d_update", "cuda_built",
           "spec_entries", "show_config"]


def spec_entries():
    """The specialised kernels compiled into this build: [(family, K, stride, dilation), ...]."""
    from ._ext import _C

    return [] if _C is None else [tuple(e) for e in _C.spec_entries()]
