#!/usr/bin/env bash
# Register caps of the depthwise Toeplitz kernels (K >= 15, 16-bit), swept with the micro-benchmark
# (ci/dw_micro.cu -DLONG_K, conformer_dw_k31 bf16): one binary per (forward, backward) min-blocks pair.
#   bash ci/toeplitz_sweep.sh build "1,1 12,10"    # compile only (can overlap other GPU work)
#   bash ci/toeplitz_sweep.sh run "1,1 12,10"      # time them (nothing else on the GPU)
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
what=$1
pairs=${2:-"1,1 8,1 16,10"}
for pr in $pairs; do
  f=${pr%,*}; b=${pr#*,}
  if [ "$what" = build ]; then
    nvcc -O3 -std=c++17 -arch=sm_90a -I "$repo/csrc" -DPART=5 -DLONG_K -DCONVKIT_DW_TOEPLITZ_FWD_MIN_BLOCKS=$f \
      -DCONVKIT_DW_TOEPLITZ_BWD_MIN_BLOCKS=$b "$repo/ci/dw_micro.cu" -o /tmp/toep_f${f}_b$b &
  else
    echo "== forward min blocks $f, backward min blocks $b"
    timeout 120 /tmp/toep_f${f}_b$b
  fi
done
wait
