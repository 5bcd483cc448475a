#!/usr/bin/env bash
# Where the transposing TMA forward's time goes (conv1d_fwd_dense_tma_tx, csrc/kernels/conv1d_fwd_dense_tma.cu), no
# package build: ci/tx_harness.cu built four times (CONVKIT_TMA_EXPERIMENT 0; 8 no transposes; 5 no wgmma, no
# epilogue; 13 the raw loads and the barriers alone), each timing the suite's shapes with x (B, C, L) read as it lies
# (CONVKIT_DENSE_TMA_TX=1), and the full build with the copy instead (=0). Into $OUT/txtime.log. ~2-3 min.
repo=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp}
cases=${TX_TIME_CASES:-FULL_kb76 FULL_kb67 FULL_tcn FULL_wavenet}
cd "$repo" || exit 1
for e in 0 8 5 13; do
  nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A -DCONVKIT_TMA_EXPERIMENT=$e -I csrc ci/tx_harness.cu \
    csrc/kernels/conv1d_fwd_dense_tma.cu -o /tmp/txh_e$e > /tmp/txh_e$e.log 2>&1 &
done
wait
{
  nvidia-smi --query-gpu=name --format=csv,noheader
  for c in $cases; do
    echo "== $c"
    CONVKIT_DENSE_TMA_TX=0 TXH_TIME=20 timeout 60 /tmp/txh_e0 $c | grep -E "TIME|sync: [^n]|CUDA" | sed 's/^/copy   /'
    for e in 0 8 5 13; do
      [ -x /tmp/txh_e$e ] || { echo "exp $e: no binary"; tail -5 /tmp/txh_e$e.log; continue; }
      CONVKIT_DENSE_TMA_TX=1 TXH_TIME=20 timeout 60 /tmp/txh_e$e $c | grep -E "TIME|sync: [^n]|CUDA" | sed "s/^/exp $e  /"
    done
  done
} 2>&1 | tee "$OUT/txtime.log"
