"""convkit.show_config(): what this install was built against and what it contains."""
import torch

from . import _ext


def arch_summary(arch_list):
    """'8.0;9.0+PTX' -> (['sm_80', 'sm_90'], ['compute_90']); '9.0a' -> (['sm_90a'], [])."""
    sass, ptx = [], []
    for item in (arch_list or "").replace(",", ";").replace(" ", ";").split(";"):
        if not item:
            continue
        num = item.replace("+PTX", "").replace(".", "")
        sass.append(f"sm_{num}")
        if item.endswith("+PTX"):
            ptx.append(f"compute_{num}")
    return sass, ptx


def config() -> dict:
    from . import __version__, spec_entries

    info = _ext.build_info
    sass, ptx = arch_summary(info.arch_list if info else None)
    return {
        "convkit": getattr(info, "local_version", __version__),
        "built_against_torch": getattr(info, "torch_version", None),
        "built_against_cuda": getattr(info, "cuda_version", None),
        "running_torch": torch.__version__,
        "running_cuda": torch.version.cuda,
        "cuda_built": _ext.cuda_built(),
        "sass": sass,
        "ptx": ptx,
        "specialised_kernels": [f"{fam} K={k} stride={s} dilation={d}" for fam, k, s, d in spec_entries()],
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def show_config() -> None:
    """Prints version, the torch/CUDA convkit was built against and is running with, the GPU
    architectures compiled in (SASS and PTX) and the specialised kernels."""
    for key, value in config().items():
        if isinstance(value, list) and key == "specialised_kernels":
            print(f"{key}: {len(value)}")
            for v in value:
                print(f"  {v}")
        else:
            print(f"{key}: {', '.join(value) if isinstance(value, list) else value}")
