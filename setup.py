"""Build convkit: the Python package plus the CUDA extension convkit._C.

Environment:
  TORCH_CUDA_ARCH_LIST   architectures to compile (default "8.0+PTX;9.0a": SASS for sm_80 and for sm_90 with
                         Hopper's arch-specific instructions (wgmma: the dense tensor-core forward), PTX for
                         compute_80 so newer GPUs can JIT it). A "9.0a" entry defines CONVKIT_SM90A, which
                         lets the host pick the sm_90a-only kernels.
  MAX_JOBS               parallel compile jobs (ninja)
  CUDA_HOME / CUDA_PATH  the CUDA toolkit; found automatically otherwise (see find_cuda_home)
  CONVKIT_SKIP_CUDA=1    build the CPU-only package on purpose
"""
import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION = "0.1.0"
DEFAULT_ARCH_LIST = "8.0+PTX;9.0a"


def _is_toolkit(root):
    return bool(root) and os.path.isfile(os.path.join(root, "bin", "nvcc")) and os.path.isfile(
        os.path.join(root, "include", "cuda_runtime.h"))


def find_cuda_home():
    """The CUDA toolkit root, or None.

    torch derives CUDA_HOME from the `nvcc` on PATH, which goes wrong when that nvcc is a wrapper
    script (for example /usr/local/bin/nvcc doing `exec /usr/local/cuda-13.0/bin/nvcc "$@"`): the
    derived root has no lib64/libcudart and the link fails. So: explicit variables first, then the
    real nvcc behind any symlink or wrapper script, then the conventional locations.
    """
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if _is_toolkit(os.environ.get(var)):
            return os.environ[var]
    candidates = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        real = os.path.realpath(nvcc)
        candidates.append(os.path.dirname(os.path.dirname(real)))
        try:
            with open(real, "rb") as f:
                head = f.read(65536)
            if head.startswith(b"#!"):
                for m in re.finditer(rb"(/[^\s'\"]+)/bin/nvcc\b", head):
                    candidates.append(os.path.realpath(m.group(1).decode()))
        except OSError:
            pass
    candidates += ["/usr/local/cuda"] + sorted(glob.glob("/usr/local/cuda-*"), reverse=True) + ["/opt/cuda"]
    for root in candidates:
        if _is_toolkit(root):
            return root
    return None


def cuda_extension_or_reason():
    """(ext_modules, cmdclass) for the CUDA build, or ([], {}) and a reason printed loudly."""
    if os.environ.get("CONVKIT_SKIP_CUDA", "0") not in ("", "0"):
        return [], {}, "CONVKIT_SKIP_CUDA is set"
    cuda_home = find_cuda_home()
    if cuda_home is None:
        return [], {}, "no CUDA toolkit found (set CUDA_HOME to the toolkit root that holds bin/nvcc)"
    # cpp_extension reads CUDA_HOME when it is imported, so set it first.
    os.environ["CUDA_HOME"] = cuda_home
    try:
        import torch
    except ImportError:
        return [], {}, "torch is not importable in the build environment (use pip's --no-build-isolation)"
    if torch.version.cuda is None:
        return [], {}, f"torch {torch.__version__} is a CPU-only build"
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension

    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCH_LIST)
    sys.path.insert(0, os.path.join(HERE, "csrc"))
    import generate_kernels

    if generate_kernels.main([]) != 0:
        raise RuntimeError("csrc/generate_kernels.py failed")

    sources = (["csrc/dispatch.cpp", "csrc/kernels/generated/spec_table.cpp"]
               + sorted(glob.glob("csrc/kernels/*.cu"))
               + sorted(glob.glob("csrc/kernels/generated/*.cu")))
    ext = CUDAExtension(
        name="convkit._C",
        sources=sources,
        include_dirs=[os.path.join(HERE, "csrc")],
        extra_compile_args={
            # -g0: Python's own CFLAGS carry -g, which made dispatch.cpp (torch headers) a third slower to compile.
            "cxx": ["-O3", "-g0"],
            # No --use_fast_math: results must match torch to the dtype's rounding.
            "nvcc": ["-O3", "--expt-relaxed-constexpr", "-lineinfo"] + sm90a_flags(),
        },
    )
    print(f"convkit: building the CUDA extension with CUDA_HOME={cuda_home}, "
          f"TORCH_CUDA_ARCH_LIST={os.environ['TORCH_CUDA_ARCH_LIST']}, torch {torch.__version__}")
    return [ext], {"build_ext": BuildExtension.with_options(use_ninja=shutil.which("ninja") is not None
                                                             or _has_ninja_module())}, None


def sm90a_flags():
    """-DCONVKIT_SM90A when TORCH_CUDA_ARCH_LIST builds sm_90a code (the wgmma kernels exist then) and no plain
    sm_90 / compute_90 code beside it, which an sm_90 device might load instead (the kernels trap there)."""
    items = [i.replace("+PTX", "") for i in
             os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace(",", ";").replace(" ", ";").split(";")]
    return ["-DCONVKIT_SM90A"] if "9.0a" in items and "9.0" not in items else []


def _has_ninja_module():
    try:
        subprocess.check_call([sys.executable, "-m", "ninja", "--version"], stdout=subprocess.DEVNULL)
        return True
    except Exception:
        return False


def torch_info():
    """(torch 'X.Y', CUDA 'X.Y' or None) of the torch in the build environment, or (None, None)."""
    try:
        import torch
    except ImportError:
        return None, None
    return ".".join(torch.__version__.split("+")[0].split(".")[:2]), torch.version.cuda


def write_build_info(built_cuda):
    """python/convkit/_build_info.py: what this build was made against, read at import to refuse a
    binary that does not match the running torch (see convkit/_ext.py)."""
    torch_mm, cuda = torch_info()
    info = {
        "version": VERSION,
        "local_version": local_version(built_cuda),
        "torch_version": torch_mm,
        "cuda_version": cuda if built_cuda else None,
        "arch_list": os.environ.get("TORCH_CUDA_ARCH_LIST") if built_cuda else None,
        "cuda_built": bool(built_cuda),
    }
    with open(os.path.join(HERE, "python", "convkit", "_build_info.py"), "w") as f:
        f.write("# Written by setup.py at build time; not in git.\n")
        for k, v in info.items():
            f.write(f"{k} = {v!r}\n")


def local_version(built_cuda):
    """'0.1.0+cu130.torch2.14': the wheel names the torch and CUDA it was compiled against."""
    torch_mm, cuda = torch_info()
    if torch_mm is None:
        return VERSION
    tag = f"cu{cuda.replace('.', '')}" if built_cuda else "cpu"
    return f"{VERSION}+{tag}.torch{torch_mm}"


def torch_requirement():
    """The extension uses torch's C++ ABI, which changes between minor releases: pin to X.Y.*."""
    torch_mm, _ = torch_info()
    if torch_mm is None:
        return "torch"
    major, minor = (int(v) for v in torch_mm.split("."))
    return f"torch>={major}.{minor},<{major}.{minor + 1}"


ext_modules, cmdclass, reason = cuda_extension_or_reason()
write_build_info(bool(ext_modules))
if reason:
    bar = "=" * 78
    print(f"\n{bar}\nconvkit: NOT building the CUDA extension: {reason}.\n"
          f"convkit will install and run on CPU tensors only (convkit.cuda_built() is False).\n{bar}\n",
          file=sys.stderr)

setup(
    name="convkit",
    version=local_version(bool(ext_modules)),
    description="Fast 1D convolution for PyTorch: CUDA kernels, forward and backward",
    long_description=open(os.path.join(HERE, "README.md")).read(),
    long_description_content_type="text/markdown",
    license="BSD-3-Clause",
    python_requires=">=3.9",
    package_dir={"": "python"},
    packages=find_packages("python"),
    package_data={"convkit": ["bench_suite.json", "bench_extra.json"]},
    install_requires=[torch_requirement()],
    ext_modules=ext_modules,
    cmdclass=cmdclass,
    zip_safe=False,
)
