# Experiments of the TMA-fed forward (csrc/kernels/conv1d_fwd_dense_tma.cu) with ci/dense_mma_check.cu --tma,
# one build per macro setting. Run from the repository root on the GPU machine:
#   VARIANTS="-DCONVKIT_TMA_SW32=0;-DCONVKIT_TMA_SW32=2;-DCONVKIT_TMA_PRODUCER_WARP=1 -DCONVKIT_TMA_SW32=2" \
#     ONLY="w2v_k3s2 tcn kb67" bash ci/tma_experiment.sh          (variants separated by ';')
# Per variant and per tile shape in SHAPES (CONVKIT_TMA_SHAPE values, space-separated; "-" = the kernel's own
# table, the default): every small case (--quick: correctness), then the timed cases named in ONLY.
# STEP=build only compiles (e.g. in the background while the package builds), STEP=run only runs the binaries
# a build step left in /tmp; default both.
OUT=${OUT:-/tmp}
VARIANTS=${VARIANTS:--DCONVKIT_TMA_SW32=0}
STEP=${STEP:-all}
B="nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A -DDC_TMA -lineinfo -diag-suppress 177,128 -I csrc ci/dense_mma_check.cu
   csrc/kernels/conv1d_fwd_dense_mma.cu csrc/kernels/conv1d_fwd_dense_wgmma.cu csrc/kernels/conv1d_fwd_dense_tma.cu"
IFS=';' read -ra VS <<< "$VARIANTS"
if [ "$STEP" != run ]; then
  i=0
  for v in "${VS[@]}"; do $B $v -o /tmp/tx$i > "$OUT/tx_build$i.log" 2>&1 & i=$((i+1)); done
  wait
fi
[ "$STEP" = build ] && exit 0
i=0
for v in "${VS[@]}"; do
  if [ ! -x /tmp/tx$i ]; then echo "== variant $v: no binary"; tail -20 "$OUT/tx_build$i.log"; i=$((i+1)); continue; fi
  for s in ${SHAPES:--}; do
    echo "== variant $v, CONVKIT_TMA_SHAPE=$s"
    if [ "$s" = - ]; then unset CONVKIT_TMA_SHAPE; else export CONVKIT_TMA_SHAPE=$s; fi
    timeout 120 /tmp/tx$i --tma --quick | grep -E "FAIL|launch returned|cases run|CUDA error|not supported"
    for c in ${ONLY:-w2v_k3s2}; do timeout 60 /tmp/tx$i --tma --only $c | grep -E "^[a-z]|TIME|TRANSPOSE|FAIL"; done
  done
  i=$((i+1))
done
unset CONVKIT_TMA_SHAPE
