"""Release engineering: what the installed build contains, and (slow, CONVKIT_PACKAGING_TESTS=1, run
by .ci/run) an sdist -> wheel -> fresh virtual environment round trip."""
import glob
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile

import pytest
import torch

import convkit
from convkit import _ext
from convkit._config import arch_summary, config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLOW = os.environ.get("CONVKIT_PACKAGING_TESTS") == "1"
needs_ext = pytest.mark.skipif(not convkit.cuda_built(), reason="convkit was built without its CUDA extension")
slow = pytest.mark.skipif(not SLOW, reason="set CONVKIT_PACKAGING_TESTS=1 (builds an sdist, a wheel and a venv)")


def find_cuobjdump():
    cands = [os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "cuobjdump"), shutil.which("cuobjdump")]
    try:
        import triton

        cands.append(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump"))
    except ImportError:
        pass
    for c in cands:
        if c and os.path.isfile(c):
            return c
    pytest.skip("no cuobjdump (CUDA toolkit or triton) on this machine")


def embedded_archs(so_path):
    """({'sm_80', ...} with SASS, {'sm_90', ...} with PTX) in a compiled extension."""
    tool = find_cuobjdump()
    elf = subprocess.run([tool, "--list-elf", so_path], capture_output=True, text=True, check=True).stdout
    ptx = subprocess.run([tool, "--list-ptx", so_path], capture_output=True, text=True, check=True).stdout
    grab = lambda text: {w.split(".")[-2] for w in text.split() if w.endswith((".cubin", ".ptx"))}  # noqa: E731
    return grab(elf), grab(ptx)


def test_arch_summary_parses_torch_arch_lists():
    assert arch_summary("8.0;9.0+PTX") == (["sm_80", "sm_90"], ["compute_90"])
    assert arch_summary("9.0") == (["sm_90"], [])
    assert arch_summary("8.0+PTX;9.0a") == (["sm_80", "sm_90a"], ["compute_80"])


@needs_ext
def test_wheel_version_and_metadata_name_the_build():
    info = _ext.build_info
    cuda_tag = "cu" + info.cuda_version.replace(".", "")
    assert importlib.metadata.version("convkit") == f"{convkit.__version__}+{cuda_tag}.torch{info.torch_version}"
    major, minor = info.torch_version.split(".")
    reqs = importlib.metadata.requires("convkit")
    assert f"torch<{major}.{int(minor) + 1},>={major}.{minor}" in [r.replace(" ", "") for r in reqs]


@needs_ext
def test_extension_has_the_promised_sass_and_ptx():
    sass, ptx = embedded_archs(convkit._ext._C.__file__)
    want_sass, want_ptx = arch_summary(_ext.build_info.arch_list)
    assert sass == set(want_sass), (sass, want_sass)
    assert ptx == {p.replace("compute_", "sm_") for p in want_ptx}, (ptx, want_ptx)
    if os.environ.get("CI") and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        assert sass == {"sm_80", "sm_90a"} and ptx == {"sm_80"}  # the default build


def test_show_config_prints_versions_archs_and_kernels(capsys):
    convkit.show_config()
    out = capsys.readouterr().out
    for key in ("convkit:", "built_against_torch:", "running_torch:", "sass:", "ptx:", "specialised_kernels:"):
        assert key in out
    assert config()["running_torch"] == torch.__version__


def test_python_m_convkit_info_runs():
    r = subprocess.run([sys.executable, "-m", "convkit", "--info"], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0 and "cuda_built:" in r.stdout, r.stderr


@needs_ext
def test_mismatched_torch_raises_import_error_naming_both(monkeypatch):
    monkeypatch.setattr(_ext.build_info, "torch_version", "1.0")
    with pytest.raises(ImportError) as e:
        _ext._load()
    msg = str(e.value)
    assert "built for torch 1.0" in msg and torch.__version__ in msg and "pip install" in msg


@pytest.fixture(scope="module")
def sdist_wheel(tmp_path_factory):
    """Builds an sdist, unpacks it, and builds a wheel from it for sm_90 only."""
    work = tmp_path_factory.mktemp("pkg")
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(work), ROOT],
                   check=True, capture_output=True)
    (sdist,) = glob.glob(str(work / "convkit-*.tar.gz"))
    with tarfile.open(sdist) as t:
        t.extractall(work / "src")
    (src,) = glob.glob(str(work / "src" / "convkit-*"))
    env = dict(os.environ, TORCH_CUDA_ARCH_LIST="9.0")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w",
                        str(work / "wheels"), src], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (wheel,) = glob.glob(str(work / "wheels" / "convkit-*.whl"))
    return work, wheel


@slow
@needs_ext
def test_sdist_builds_a_wheel_and_arch_list_9_0_gives_only_sm_90(sdist_wheel):
    work, wheel = sdist_wheel
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        (so,) = [n for n in z.namelist() if n.startswith("convkit/_C") and n.endswith(".so")]
        z.extract(so, work / "unzipped")
    sass, ptx = embedded_archs(str(work / "unzipped" / so))
    assert sass == {"sm_90"} and ptx == set(), (sass, ptx)


def torch_site_without_convkit(work):
    """A folder of links to everything in the running torch's site-packages except convkit (and .pth
    files, which only a site directory runs). A fresh venv that sees it through a .pth file gets torch
    and pytest without a second 5.5 GB copy of the CUDA torch (a second copy ran CI out of disk), while
    the only convkit it can import is the one pip installs from the wheel."""
    site = os.path.dirname(os.path.dirname(torch.__file__))
    shared = work / "torch-site"
    shared.mkdir()
    for name in os.listdir(site):
        if name.lower().startswith(("convkit", "__editable__")) or name.endswith(".pth"):
            continue
        os.symlink(os.path.join(site, name), shared / name)
    return shared


@slow
@needs_ext
def test_wheel_installs_in_fresh_venv_and_cpu_tests_pass_there(sdist_wheel):
    work, wheel = sdist_wheel
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    # The venv's own setuptools (ensurepip's, 65.x on Python 3.11) would shadow the linked one that torch's
    # requirement (>= 77) needs.
    subprocess.run([py, "-m", "pip", "uninstall", "-y", "-q", "setuptools"], check=True)
    purelib = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(purelib, "convkit_test_torch_site.pth"), "w") as f:
        f.write(str(torch_site_without_convkit(work)) + "\n")
    # --no-index: pip may take nothing from elsewhere, so the install passes only if the wheel's torch
    # requirement is met by the running torch.
    r = subprocess.run([py, "-m", "pip", "install", "--no-index", wheel], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Successfully installed convkit-" in r.stdout, r.stdout[-3000:]
    outside = work / "elsewhere"
    shutil.copytree(os.path.join(ROOT, "tests"), outside / "tests")
    r = subprocess.run([py, "-m", "pytest", "tests", "-q", "-m", "not cuda", "-k", "not packaging"],
                       cwd=outside, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    r = subprocess.run([py, "-c", "import convkit; print(convkit.__file__, convkit.cuda_built())"], cwd=outside,
                       capture_output=True, text=True, check=True)
    assert str(venv) in r.stdout and "True" in r.stdout
