"""Loads the compiled extension convkit._C and checks it matches the running torch.

A binary compiled against another torch minor release or another CUDA major would fail with a bare
"undefined symbol" (or worse, load and misbehave): refuse it at import with an ImportError that
says what it was built for, what is running, and how to rebuild.
"""
import torch

REBUILD = "pip install --no-build-isolation --no-deps --force-reinstall --no-binary convkit convkit"

try:
    from . import _build_info as build_info
except ImportError:  # a source tree that was never built
    build_info = None

_C = None
_import_error = None


def _running():
    return ".".join(torch.__version__.split("+")[0].split(".")[:2]), torch.version.cuda


def _mismatch_message(detail):
    torch_mm, cuda = _running()
    return (f"convkit's compiled extension does not match the running torch: it was built for torch "
            f"{build_info.torch_version} with CUDA {build_info.cuda_version}, but torch {torch.__version__} "
            f"(CUDA {cuda}) is running{detail}. Rebuild convkit from source against this torch: {REBUILD}"
            f"   (from a source checkout: pip install --no-build-isolation --no-deps --force-reinstall .)")


def _load():
    global _C, _import_error
    if build_info is not None and not build_info.cuda_built:
        return  # a CPU-only build: nothing to load
    if build_info is not None:
        torch_mm, cuda = _running()
        if torch_mm != build_info.torch_version:
            raise ImportError(_mismatch_message(""))
        if cuda is None or cuda.split(".")[0] != build_info.cuda_version.split(".")[0]:
            raise ImportError(_mismatch_message(" (a different CUDA major version)"))
    try:
        from . import _C as ext
    except ImportError as e:
        if build_info is not None:
            raise ImportError(_mismatch_message(f" (loading convkit._C failed: {e})")) from e
        _import_error = e
        return
    _C = ext


_load()


def cuda_built() -> bool:
    """True when convkit's CUDA kernels are compiled into this install."""
    return _C is not None


def require_cuda_ext():
    if _C is None:
        msg = "convkit was installed without its CUDA extension, so it cannot run on CUDA tensors"
        if _import_error is not None:
            msg += f" (importing convkit._C failed: {_import_error})"
        raise RuntimeError(msg + ". Rebuild with a CUDA toolkit and a CUDA build of torch: " + REBUILD)
    return _C
