"""Summarises `ncu --page source --csv --print-source sass` output: executed instructions by opcode
(the kernel's instruction mix) and the instructions with the most warp-stall samples, with their
per-reason sample columns. Usage: python3 ci/ncu_source_top.py FILE.csv [top-N]"""
import csv
import sys
from collections import defaultdict


def num(s):
    try:
        return float(str(s).replace(",", ""))
    except ValueError:
        return 0.0


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"#') or ln.startswith('"Address')), None)
    if start is None:
        print("no CSV table found; first lines:", *lines[:20], sep="\n")
        return
    rows = list(csv.DictReader(lines[start:]))
    cols = list(rows[0].keys()) if rows else []
    print("columns:", cols)
    src = next((c for c in cols if c.strip().lower() == "source"), None)
    execd = next((c for c in cols if c.startswith("Instructions Executed")), None)
    samp = next((c for c in cols if "Warp Stall Sampling (All" in c), None)
    if src is None or execd is None or samp is None:
        print("missing columns (source / executed / samples):", src, execd, samp)
        return
    mix = defaultdict(float)
    total = sum(num(r[execd]) for r in rows)
    for r in rows:
        op = r[src].split()
        op = [t for t in op if not t.startswith("@")]
        mix[op[0].split(".")[0] if op else "?"] += num(r[execd])
    print(f"\ninstructions executed (warp level): {total:.4g}")
    for op, n in sorted(mix.items(), key=lambda kv: -kv[1])[:30]:
        print(f"  {op:12s} {n:12.4g}  {100 * n / max(total, 1):5.1f} %")
    reasons = [c for c in cols if c.startswith("stall_") or ("Stall" in c and c != samp and "Sampling" not in c)]
    all_samples = sum(num(r[samp]) for r in rows)
    totals = sorted(((sum(num(r[c]) for r in rows), c) for c in reasons if "Not Issued" not in c), reverse=True)
    print("\nstall samples by reason: " + ", ".join(f"{c[6:] if c.startswith('stall_') else c} "
                                                  f"{100 * v / max(all_samples, 1):.1f} %" for v, c in totals if v > 0))
    print(f"\nstall samples: {all_samples:.4g}; top {top} instructions (addr, samples %, executed, source, reasons)")
    for r in sorted(rows, key=lambda r: -num(r[samp]))[:top]:
        why = sorted(((num(r[c]), c) for c in reasons if num(r[c]) > 0), reverse=True)[:3]
        addr = r.get(cols[0], "")
        print(f"  {addr:>6} {100 * num(r[samp]) / max(all_samples, 1):5.1f} % {num(r[execd]):10.4g}  "
              f"{r[src][:60]:60s} " + " ".join(f"{c}={v:.0f}" for v, c in why))


if __name__ == "__main__":
    main()
