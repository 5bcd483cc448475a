#!/usr/bin/env bash
# The transposing TMA forward (conv1d_fwd_dense_tma_tx) on its own: written in session 37 to find where it trapped
# (boxes starting inside a 16-byte unit; fixed).
# The harness (ci/tx_harness.cu, forward alone, CPU check) builds and runs while the package builds; then the
# TX test, the test's cases one per process, then bf16 timings with TX off and on (CUDA graphs) and kernel times.
repo=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$repo/gpu_logs}; mkdir -p "$OUT"
cases="kb76 kb67 odd_rows stride2_odd stride4_k4 rows32_k5 segments k1 k9_d2 grouped groups_cin16 batch_view channel_slice tail MID_kb76"
( cd "$repo" && nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A -lineinfo -I csrc ci/tx_harness.cu \
    csrc/kernels/conv1d_fwd_dense_tma.cu -o /tmp/txh > "$OUT/txh.log" 2>&1
  for skew in 1 0; do for c in $cases; do echo "== skew $skew $c"
    CONVKIT_TMA_TX_WQ_SKEW=$skew CONVKIT_DENSE_TMA_TX=1 timeout 30 /tmp/txh $c; echo "exit $?"; done; done
) >> "$OUT/txh.log" 2>&1 &
# TX_TESTS: the pytest -k expression (default the TX test alone); the cases one per process only if that test failed.
PYTEST_TIMEOUT=${PYTEST_TIMEOUT:-330} PYTEST_ARGS="-k '${TX_TESTS:-transposing_form}'" EXTRA_CMD="cd $repo && { grep -q 'FAILED.*transposing_form' \
  \"\$OUT/tests.log\" && timeout 200 python3 ci/tx_cases.py --timeout 30; }; \
  for tx in 0 1; do echo \"== TX=\$tx\"; CONVKIT_DENSE_TMA_TX=\$tx timeout 100 python3 -m convkit.bench --cases \
    kb76_dense_s3d4,kb67_dense_k3,tcn_k3_d8,wavenet_k2_d512,grouped_g8_k5 --dtypes bfloat16 --cuda-graph; done; \
  CONVKIT_DENSE_TMA_TX=1 timeout 60 python3 ci/profile_cases.py --cases kb76_dense_s3d4,kb67_dense_k3,tcn_k3_d8 \
    --dtypes bfloat16 --kernel-times" bash ci/gpu_check.sh tests
wait
echo "== harness"; grep -vE "^exit 0$|ptxas info|^$" "$OUT/txh.log" | tail -90
