#!/usr/bin/env bash
# Where the transposing TMA forward's time goes (conv1d_fwd_dense_tma_tx, csrc/kernels/conv1d_fwd_dense_tma.cu), no
# package build: ci/tx_harness.cu built once per variant below, each timing the suite's shapes with x (B, C, L) read
# as it lies (CONVKIT_DENSE_TMA_TX=1), and the default build with the copy instead (=0). Into $OUT/txtime.log; ~3 min.
# Variants: e0 the package's form; e8 no transposes (the transposers only wait and arrive); e5 no wgmma, no epilogue;
# e13 the raw loads and the barriers alone; wg4 CONVKIT_TMA_TX_WG4=1 (7 transposer warps, setmaxnreg) and wg4e8;
# raw3 CONVKIT_TMA_TX_RAW=3 (three raw slots).
# The harness checks the small cases against a CPU sum: `TX_TIME_CHECK=1` also runs them on e0, wg4 and raw3 first
# (a "transposes=0" line: that build planned the copy instead). Timings without an activation (TX_TIME_ACT=3: GELU,
# the harness's default; session 38 on an H200: FULL_kb76 14.1 ms with GELU against 2.4 ms without wgmma and epilogue).
repo=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp}
cases=${TX_TIME_CASES:-FULL_kb76 FULL_kb67 FULL_tcn FULL_wavenet}
variants="e0:-DCONVKIT_TMA_EXPERIMENT=0 e8:-DCONVKIT_TMA_EXPERIMENT=8 e5:-DCONVKIT_TMA_EXPERIMENT=5
  e13:-DCONVKIT_TMA_EXPERIMENT=13 wg4:-DCONVKIT_TMA_TX_WG4=1 wg4e8:-DCONVKIT_TMA_TX_WG4=1;-DCONVKIT_TMA_EXPERIMENT=8
  raw3:-DCONVKIT_TMA_TX_RAW=3"
cd "$repo" || exit 1
# TX_TIME_PHASE=build: only the builds (e.g. beside the package's); =run: only the runs, on those binaries
[ "${TX_TIME_PHASE:-}" != run ] && for v in $variants; do
  name=${v%%:*}; flags=${v#*:}
  nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A ${flags//;/ } -I csrc ci/tx_harness.cu \
    csrc/kernels/conv1d_fwd_dense_tma.cu -o /tmp/txh_$name > /tmp/txh_$name.log 2>&1 &
done
wait
[ "${TX_TIME_PHASE:-}" = build ] && exit 0
{
  nvidia-smi --query-gpu=name --format=csv,noheader
  if [ -n "${TX_TIME_CHECK:-}" ]; then
    for name in e0 wg4 raw3; do for c in kb76 kb67 odd_rows stride2_odd stride4_k4 rows32_k5 segments k1 k9_d2 grouped \
        groups_cin16 batch_view channel_slice tail; do
      echo "$name $(CONVKIT_DENSE_TMA_TX=1 timeout 30 /tmp/txh_$name $c | tail -1)"; done; done
  fi
  for c in $cases; do
    echo "== $c"
    CONVKIT_DENSE_TMA_TX=0 TXH_TIME=20 timeout 60 /tmp/txh_e0 $c ${TX_TIME_ACT:-0} | grep -E "TIME|sync: [^n]|CUDA" | sed 's/^/copy   /'
    for v in $variants; do
      name=${v%%:*}
      [ -x /tmp/txh_$name ] || { echo "$name: no binary"; tail -5 /tmp/txh_$name.log; continue; }
      CONVKIT_DENSE_TMA_TX=1 TXH_TIME=20 timeout 60 /tmp/txh_$name $c ${TX_TIME_ACT:-0} | grep -E "TIME|transposes=0|sync: [^n]|CUDA" | sed "s/^/$name  /"
    done
  done
} 2>&1 | tee "$OUT/txtime.log"
