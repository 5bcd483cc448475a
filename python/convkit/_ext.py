"""Loads the compiled extension convkit._C, if this install has one."""
_C = None
_import_error = None
try:
    from . import _C  # noqa: F811
except ImportError as e:  # CPU-only build, or a binary that does not match this torch
    _import_error = e


def cuda_built() -> bool:
    """True when convkit's CUDA kernels are compiled into this install."""
    return _C is not None


def require_cuda_ext():
    if _C is None:
        msg = "convkit was installed without its CUDA extension, so it cannot run on CUDA tensors"
        if _import_error is not None:
            msg += f" (importing convkit._C failed: {_import_error})"
        raise RuntimeError(msg + ". Rebuild with a CUDA toolkit and a CUDA build of torch: "
                           "pip install --no-build-isolation --force-reinstall --no-deps .")
    return _C
