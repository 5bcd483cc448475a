"""Builds the CPU emulation of csrc/kernels/causal_conv1d.cu (issue 6's kernels) for run_emu.py.

The real kernel file is compiled by the host compiler: shim.h stands in for the CUDA execution model (one
std::thread per CUDA thread, a std::barrier per block for __syncthreads, __shfl_down_sync through shared
slots; blocks one after another), and each `kernel<<<grid, block, 0, stream>>>(args);` launch in a copy of
the file is rewritten into `emu_launch(grid, block, [&] { kernel(args); });`. driver.cpp fills CausalParams
as dispatch.cpp does.

    python ci/emulate_causal/build.py [OUT_DIR]  # -> /tmp/convkit_emu/emu.so (exit status 3: no CUDA headers)
    python ci/emulate_causal/run_emu.py /tmp/convkit_emu/emu.so

Slow (hundreds of threads per block): the whole run takes minutes; tests/test_causal.py runs a tenth of it.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/convkit_emu"
CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    shutil.copytree(os.path.join(ROOT, "csrc"), os.path.join(OUT, "csrc"))
    launch = re.compile(r"(\w+<[\w, ]+>)<<<(.+?), 0, stream>>>\((.*?)\);", re.S)
    # the kernel file's six launches, and common.cuh's one (sum_weight_bias_partials, which the backward calls)
    for name, expect in (("causal_conv1d.cu", 6), ("common.cuh", 1)):
        path = os.path.join(OUT, "csrc", "kernels", name)
        src = open(path).read()
        src, n = launch.subn(lambda m: f"emu_launch({m.group(2)}, [&] {{ {m.group(1)}({m.group(3)}); }});", src)
        assert n == expect, f"expected {expect} launches in {name}, rewrote {n}"
        open(path, "w").write(src)
    for f in ("shim.h", "driver.cpp"):
        shutil.copy(os.path.join(HERE, f), OUT)
    candidates = [os.path.join(CUDA, "include")] + sorted(glob.glob("/usr/local/cuda-*/include"), reverse=True)
    cuda_inc = next((d for d in candidates if os.path.isfile(os.path.join(d, "cuda_runtime.h"))), None)
    if cuda_inc is None:
        print("CUDA headers not found (set CUDA_HOME)", file=sys.stderr)
        sys.exit(3)
    cmd = ["g++", "-O1", "-std=c++20", "-shared", "-fPIC", "-include", "shim.h", "-I", cuda_inc, "-I", "csrc",
           "driver.cpp", "-o", "emu.so", "-pthread"]
    subprocess.run(cmd, cwd=OUT, check=True)
    print(os.path.join(OUT, "emu.so"))


if __name__ == "__main__":
    main()
