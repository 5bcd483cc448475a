import os
import zlib

import pytest
import torch

import convkit

HAS_CUDA = torch.cuda.is_available() and convkit.cuda_built()


def pytest_collection_modifyitems(config, items):
    # CONVKIT_TEST_SHARD=i/n: this process runs share i of n (ci/gpu_check.sh runs n at once on one GPU): every
    # test marked `large` in share 0 (two of them at once could exceed the GPU's memory), the rest by a hash of their
    # ids (dealing them in turn put every slow parametrization of a test into one share: session 38).
    shard = os.environ.get("CONVKIT_TEST_SHARD")
    if shard:
        i, n = (int(v) for v in shard.split("/"))
        small = [item for item in items if "large" not in item.keywords]
        keep = {id(item) for item in small if zlib.crc32(item.nodeid.encode()) % n == i}
        if i == 0:
            keep |= {id(item) for item in items if "large" in item.keywords}
        config.hook.pytest_deselected(items=[item for item in items if id(item) not in keep])
        items[:] = [item for item in items if id(item) in keep]
    if HAS_CUDA:
        return
    why = ("no CUDA GPU" if not torch.cuda.is_available() else "convkit was built without its CUDA extension")
    skip = pytest.mark.skip(reason=f"CUDA test: {why}")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_logreport(report):
    # CONVKIT_TEST_TIMES=FILE: one line per test phase that took time ("seconds outcome phase nodeid"), appended and
    # flushed as each ends, so a run stopped by a time limit still says which tests ran and which were slow
    # (ci/gpu_check.sh sets it; `sort -rn FILE | head` lists the slowest).
    path = os.environ.get("CONVKIT_TEST_TIMES")
    if path and (report.when == "call" or report.duration > 0.5):
        with open(path, "a") as f:
            f.write(f"{report.duration:.2f} {report.outcome} {report.when} {report.nodeid}\n")


@pytest.fixture(autouse=True)
def ieee_fp32():
    """torch allows TF32 in fp32 convolutions by default, and convkit's dense fp32 kernel follows that
    flag; the tests run with it off so that fp32 is held to IEEE accuracy (REL_TOL), and the TF32 tests
    switch it on themselves."""
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = old


@pytest.fixture
def poison_outputs(monkeypatch):
    """Every output convkit allocates starts as NaN, so unwritten elements fail the comparison."""
    monkeypatch.setenv("CONVKIT_POISON_OUTPUTS", "1")


KERNEL_PATHS = {"dispatch": None, "no_specialised": "1", "all_generic": "all"}


@pytest.fixture(params=list(KERNEL_PATHS))
def kernel_path(request, monkeypatch):
    """Runs a test through normal dispatch, with the specialisation table off (CONVKIT_FORCE_GENERIC=1:
    each family's runtime-shape kernel) and with the any-configuration generic kernels only (=all)."""
    value = KERNEL_PATHS[request.param]
    if value is None:
        monkeypatch.delenv("CONVKIT_FORCE_GENERIC", raising=False)
    else:
        monkeypatch.setenv("CONVKIT_FORCE_GENERIC", value)
    return request.param
