"""Picks the depthwise tuning choices (csrc/kernels/conv1d_depthwise_config.h) from a
ci/dw_micro.cu log: per direction and element size, the (variant, V) with the smallest time summed
over the suite's depthwise cases, each case's times normalised by its best time. Combinations whose
results were wrong are never picked.

    python ci/pick_dw_config.py micro.log csrc/kernels/conv1d_depthwise_config.h
"""
import collections
import re
import sys

LINE = re.compile(r"^(?P<case>\S+)\s+(?P<dtype>bf16|fp16|fp32)\s+fv(?P<fv>\d+) bv(?P<bv>\d+) V=(?P<V>\d+)\s+fwd\s+"
                  r"(?P<fwd>[\d.]+) ms.*\| bwd\s+(?P<bwd>[\d.]+) ms.*\| err(?P<rest>.*)$")
SUITE = {"mamba_dw_k4_causal", "kb_dw_k3", "conformer_dw_k31", "shortconv_dw_k4"}


def pick(rows, direction, key):
    by_case = collections.defaultdict(dict)  # case -> (variant, V) -> [times]
    for r in rows:
        by_case[r["case"]].setdefault((int(r[key]), int(r["V"])), []).append(float(r[direction]))
    score = collections.Counter()
    combos = None
    for case, res in by_case.items():
        best = min(min(v) for v in res.values())
        for combo, times in res.items():
            score[combo] += (sum(times) / len(times)) / best
        combos = set(res) if combos is None else combos & set(res)
    return min(sorted(combos), key=lambda c: score[c]), {c: round(score[c], 3) for c in sorted(combos)}


def main():
    rows = [m.groupdict() for m in map(LINE.match, open(sys.argv[1])) if m and m["case"] in SUITE]
    bad = {(r["dtype"], r["fv"], r["bv"], r["V"]) for r in rows if "WRONG" in r["rest"]}
    rows = [r for r in rows if (r["dtype"], r["fv"], r["bv"], r["V"]) not in bad]
    out = {}
    for cls, dtypes in (("16BIT", {"bf16", "fp16"}), ("FP32", {"fp32"})):
        sel = [r for r in rows if r["dtype"] in dtypes]
        for direction, key in (("fwd", "fv"), ("bwd", "bv")):
            # The staged backward (activations, stride > 1, odd rows) shares the backward's V and
            # spills registers at V = 32, so the backward stays at 16 or less.
            rows_d = [r for r in sel if direction == "fwd" or int(r["V"]) <= 16]
            (variant, v), scores = pick(rows_d, direction, key)
            print(f"{direction} {cls}: variant {variant}, V {v}   (scores, lower is better: {scores})")
            out[f"CONVKIT_DW_{direction.upper()}_V_{cls}"] = v
            out[f"CONVKIT_DW_{direction.upper()}_VARIANT_{cls}"] = variant
    if bad:
        print("wrong results (never picked):", sorted(bad))
    path = sys.argv[2]
    text = open(path).read()
    for name, value in out.items():
        text, n = re.subn(rf"#define {name} \d+", f"#define {name} {value}", text)
        assert n == 1, name
    open(path, "w").write(text)


if __name__ == "__main__":
    main()
