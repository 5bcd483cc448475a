"""ci/pick_dw_config.py: picks the fastest correct depthwise variant per direction and element size."""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PICK = ROOT / "ci" / "pick_dw_config.py"

CONFIG = """#define CONVKIT_DW_FWD_V_16BIT 8
#define CONVKIT_DW_FWD_VARIANT_16BIT 0
#define CONVKIT_DW_FWD_V_FP32 8
#define CONVKIT_DW_FWD_VARIANT_FP32 0
#define CONVKIT_DW_BWD_V_16BIT 8
#define CONVKIT_DW_BWD_VARIANT_16BIT 0
#define CONVKIT_DW_BWD_V_FP32 8
#define CONVKIT_DW_BWD_VARIANT_FP32 0
"""


def line(case, dtype, fv, bv, v, fwd, bwd, wrong=False):
    return (f"{case:22s} {dtype:5s} fv{fv} bv{bv} V={v:<2d} fwd {fwd:8.4f} ms  50.0 % floor | "
            f"bwd {bwd:8.4f} ms  50.0 % floor | err y 1.0e-03 dx 1.0e-03 dw 1.0e-03"
            + ("  <-- WRONG" if wrong else ""))


@pytest.mark.skipif(not PICK.exists(), reason="tests copied away from the repository (no ci/)")
def test_picks_fastest_correct_and_keeps_backward_at_most_16(tmp_path):
    log = "\n".join([
        line("mamba_dw_k4_causal", "bf16", 0, 0, 8, 0.20, 0.30),
        line("mamba_dw_k4_causal", "bf16", 1, 1, 16, 0.10, 0.15),
        line("mamba_dw_k4_causal", "bf16", 2, 2, 32, 0.09, 0.05),         # fastest, but V=32 backward
        line("mamba_dw_k4_causal", "bf16", 4, 2, 16, 0.01, 0.01, True),   # fastest of all, but wrong
        line("mamba_dw_k4_causal", "fp32", 0, 0, 8, 0.20, 0.30),
        line("mamba_dw_k4_causal", "fp32", 4, 2, 16, 0.15, 0.40),
        line("other_case", "fp32", 1, 1, 8, 0.001, 0.001),                # not a suite case: ignored
    ])
    (tmp_path / "micro.log").write_text(log + "\n")
    cfg = tmp_path / "config.h"
    cfg.write_text(CONFIG)
    out = subprocess.run([sys.executable, str(PICK), str(tmp_path / "micro.log"),
                          str(cfg)], check=True, capture_output=True, text=True).stdout
    text = cfg.read_text()
    assert "#define CONVKIT_DW_FWD_VARIANT_16BIT 2" in text and "#define CONVKIT_DW_FWD_V_16BIT 32" in text
    assert "#define CONVKIT_DW_BWD_VARIANT_16BIT 1" in text and "#define CONVKIT_DW_BWD_V_16BIT 16" in text
    assert "#define CONVKIT_DW_FWD_VARIANT_FP32 4" in text and "#define CONVKIT_DW_FWD_V_FP32 16" in text
    assert "#define CONVKIT_DW_BWD_VARIANT_FP32 0" in text and "#define CONVKIT_DW_BWD_V_FP32 8" in text
    assert "wrong results" in out
