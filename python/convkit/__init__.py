"""convkit: fast 1D convolution for PyTorch (CUDA kernels, forward and backward).

    y = convkit.conv1d(x, w, b, stride=1, padding=0, dilation=1, groups=1)   # like F.conv1d
    m = convkit.Conv1d(64, 128, 3)                                           # like nn.Conv1d
    convkit.convert(model)                                                   # swap nn.Conv1d in place
"""
from . import ops  # registers the torch.library custom ops
from ._config import show_config
from ._ext import cuda_built
from .functional import conv1d, explain
from .modules import Conv1d, convert

__version__ = "0.1.0"
__all__ = ["conv1d", "Conv1d", "convert", "explain", "cuda_built", "spec_entries", "show_config"]


def spec_entries():
    """The specialised kernels compiled into this build: [(family, K, stride, dilation), ...]."""
    from ._ext import _C

    return [] if _C is None else [tuple(e) for e in _C.spec_entries()]
