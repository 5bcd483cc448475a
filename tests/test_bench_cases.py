"""The benchmark's case selection (CPU only): the suite by default, convkit's extra depthwise cases only
when asked for, every extra case a specialised entry of the table, and every entry timed by some case."""
import json
import os

import pytest

from convkit import bench

TABLE = os.path.join(os.path.dirname(__file__), "..", "csrc", "specializations.json")


def test_default_is_the_suite():
    suite = bench.load_suite()
    chosen = bench.select_cases([])
    assert [c["name"] for c in chosen] == [c["name"] for c in suite["cases"]]
    assert all(c["family"] != "depthwise_sd" for c in chosen)


def test_extra_cases_by_family_and_name_in_order():
    extra = [c for c in bench.load_suite(bench.EXTRA)["cases"] if c["family"] == "depthwise_sd"]
    assert len(extra) >= 5
    chosen = bench.select_cases(["depthwise_sd", "kb_dw_k3"])
    assert [c["name"] for c in chosen] == [c["name"] for c in extra] + ["kb_dw_k3"]
    assert [c["name"] for c in bench.select_cases([extra[1]["name"]])] == [extra[1]["name"]]


def table_entries():
    if not os.path.exists(TABLE):
        pytest.skip("needs the source tree (csrc/specializations.json)")
    with open(TABLE) as f:
        return {(e["family"], e["K"], e["stride"], e["dilation"]) for e in json.load(f)["entries"]}


def test_extra_cases_are_table_entries():
    entries = table_entries()
    for c in bench.load_suite(bench.EXTRA)["cases"]:
        assert c["groups"] == c["Cin"] == c["Cout"]
        assert ("depthwise", c["K"], c["stride"], c["dilation"]) in entries, c["name"]
        assert c["family"] in ("depthwise_sd", "depthwise_entries"), c["name"]
        if c["family"] == "depthwise_sd":
            assert c["stride"] > 1 or c["dilation"] > 1, c["name"]


def narrow_dense_case(c):
    """Whether the narrow dense forward runs the case (dispatch.cpp): Cin/groups < 8 and Cin/groups * K <= 64, and
    not a depthwise call with a channel multiplier under 8 (the depthwise kernels take those)."""
    cin_g = c["Cin"] // c["groups"]
    return cin_g < 8 and cin_g * c["K"] <= 64 and (c["groups"] != c["Cin"] or c["Cout"] >= 8 * c["Cin"])


def test_suite_and_extra_cases_cover_every_table_entry():
    """`--compare-generic` over the suite's cases and the extras times every specialised entry: the depthwise entries
    on depthwise cases, the dense_narrow entries on cases the narrow forward runs (w2v_first_k10s5)."""
    cases = bench.load_suite()["cases"] + bench.load_suite(bench.EXTRA)["cases"]
    covered = {("depthwise", c["K"], c["stride"], c["dilation"]) for c in cases
               if c["groups"] == c["Cin"] and c["Cin"] > 1 and c["Cout"] < 8 * c["Cin"]}
    covered |= {("dense_narrow", c["K"], c["stride"], c["dilation"]) for c in cases if narrow_dense_case(c)}
    assert table_entries() <= covered, sorted(table_entries() - covered)
    assert ("dense_narrow", 10, 5, 1) in covered  # w2v_first_k10s5


def test_unknown_case_is_an_error():
    with pytest.raises(SystemExit, match="unknown case"):
        bench.select_cases(["no_such_case"])


def test_accuracy_report_runs_on_cpu():
    """convkit.accuracy's comparison (inputs, padding, the four tensors) on small cuts of suite shapes: on the CPU
    convkit runs torch, so this checks the script's reference, not the kernels (the GPU run reports those)."""
    from convkit import accuracy

    rows = accuracy.main(["--cases", "mamba_dw_k4_causal,w2v_k3s2,grouped_g8_k5", "--dtypes", "float32,bfloat16",
                          "--device", "cpu", "--max-length", "96"])
    assert [(r["case"], r["dtype"]) for r in rows] == [
        (c, d) for c in ("mamba_dw_k4_causal", "w2v_k3s2", "grouped_g8_k5") for d in ("float32", "bfloat16")]
    for r in rows:
        assert r["batch"] == 1 and r["length"] == 96
        limit = 1e-5 if r["dtype"] == "float32" else 2e-2
        for t in accuracy.TENSORS:
            assert 0 < r[f"convkit_{t}"] < limit, (r, t)


def test_activation_option_times_torch_unfused_form_of_each_fused_activation():
    """`--activation A` times convkit's fused A(conv + b) against torch's unfused one: the bench must know every
    activation convkit takes, and its torch form must compute what convkit's activation means (on the CPU convkit
    runs torch's conv with its own reference activation)."""
    import torch
    import torch.nn.functional as F

    import convkit
    from convkit import ops

    assert set(bench.TORCH_ACT) == set(ops.ACTIVATIONS)
    x, w, b = (torch.randn(*s, dtype=torch.float64) for s in ((2, 3, 17), (4, 3, 3), (4,)))
    for act in ops.ACTIVATIONS:
        want = convkit.conv1d(x, w, b, padding=1, activation=act)
        got = bench.TORCH_ACT[act](F.conv1d(x, w, b, padding=1))
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
