"""Runs the transposing TMA forward's test cases (tests/test_cuda_correctness.py, TMA_TX_SCRIPT) one case per
process, so that a case that hangs or traps is named: python3 ci/tx_cases.py [--skew 0|1] [--timeout 60].
Needs a GPU running the sm_90a build."""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests")


def script_and_cases():
    src = open(os.path.join(TESTS, "test_cuda_correctness.py")).read()
    start = src.index('TMA_TX_SCRIPT = r"""') + len('TMA_TX_SCRIPT = r"""')
    script = src[start:src.index('"""', start)]
    names = re.findall(r'^\s+\("([a-z0-9_]+)", \d', script, flags=re.M)
    return script, names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skew", default="1")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--tx", default="1", help="CONVKIT_DENSE_TMA_TX (0: the copy path, to clear the backward)")
    ap.add_argument("--only", default="", help="comma-separated case names")
    args = ap.parse_args()
    script, names = script_and_cases()
    # one case: keep only its line in the case list (and skip the final alignment check)
    for name in names:
        if args.only and name not in args.only.split(","):
            continue
        one = re.sub(r'^\s+\("(?!%s")[a-z0-9_]+", \d.*\n' % name, "", script, flags=re.M)
        one = one.split("x = torch.randn(2 * 64 * 1024 + 1")[0] + 'print("tma tx cases passed")\n'
        env = dict(os.environ, CONVKIT_DENSE_TMA_TX=args.tx, CONVKIT_POISON_OUTPUTS="1", CONVKIT_TMA_TX_WQ_SKEW=args.skew,
                   CUDA_LAUNCH_BLOCKING="1")
        try:
            res = subprocess.run([sys.executable, "-c", one, TESTS], env=env, capture_output=True, text=True,
                                 timeout=args.timeout)
            ok = res.returncode == 0 and "tma tx cases passed" in res.stdout
            # with CUDA_LAUNCH_BLOCKING the traceback's '<string>' line names the call (forward or backward)
            out = (res.stdout + res.stderr).strip().splitlines()
            last = [l.strip() for l in out if 'File "<string>"' in l][-1:] + out[-1:] if not ok else []
            print(f"{name:16s} {'ok' if ok else 'FAILED'} {' | '.join(last)[:300]}", flush=True)
        except subprocess.TimeoutExpired:
            print(f"{name:16s} TIMEOUT", flush=True)


if __name__ == "__main__":
    main()
