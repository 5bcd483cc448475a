import os

import pytest
import torch

import convkit

HAS_CUDA = torch.cuda.is_available() and convkit.cuda_built()


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    why = ("no CUDA GPU" if not torch.cuda.is_available() else "convkit was built without its CUDA extension")
    skip = pytest.mark.skip(reason=f"CUDA test: {why}")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def poison_outputs(monkeypatch):
    """Every output convkit allocates starts as NaN, so unwritten elements fail the comparison."""
    monkeypatch.setenv("CONVKIT_POISON_OUTPUTS", "1")


@pytest.fixture(params=["specialised", "generic"])
def kernel_path(request, monkeypatch):
    """Runs a test once through the dispatch table and once with CONVKIT_FORCE_GENERIC=1."""
    if request.param == "generic":
        monkeypatch.setenv("CONVKIT_FORCE_GENERIC", "1")
    else:
        monkeypatch.delenv("CONVKIT_FORCE_GENERIC", raising=False)
    return request.param
