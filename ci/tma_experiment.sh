# Experiments of the TMA-fed forward (csrc/kernels/conv1d_fwd_dense_tma.cu) with ci/dense_mma_check.cu --tma,
# one build per macro setting. Run from the repository root on the GPU machine:
#   VARIANTS="-DCONVKIT_TMA_SW32=0;-DCONVKIT_TMA_PINGPONG=1;-DCONVKIT_TMA_EXPERIMENT=5" \
#     ONLY="w2v_k3s2 tcn kb67" bash ci/tma_experiment.sh          (variants separated by ';')
# Per variant and per tile shape in SHAPES (CONVKIT_TMA_SHAPE values, space-separated; "-" = the kernel's own
# table, the default): every small case (--quick: correctness), then the timed cases named in ONLY.
# STEP=build only compiles (e.g. in the background while the package builds) and then writes /tmp/tx_built;
# STEP=run waits (up to 10 min) for that file and runs the binaries the build step left in /tmp; default both.
# (Waiting with `pgrep -f <name>` hangs when the caller's own command line holds the name: session 21.)
OUT=${OUT:-/tmp}
VARIANTS=${VARIANTS:--DCONVKIT_TMA_SW32=0}
STEP=${STEP:-all}
B="nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A -DDC_TMA -lineinfo -diag-suppress 177,128 -I csrc ci/dense_mma_check.cu
   csrc/kernels/conv1d_fwd_dense_mma.cu csrc/kernels/conv1d_fwd_dense_wgmma.cu csrc/kernels/conv1d_fwd_dense_tma.cu"
IFS=';' read -ra VS <<< "$VARIANTS"
if [ "$STEP" != run ]; then
  rm -f /tmp/tx_built
  i=0
  for v in "${VS[@]}"; do $B $v -o /tmp/tx$i > "$OUT/tx_build$i.log" 2>&1 & i=$((i+1)); done
  wait
  touch /tmp/tx_built
fi
[ "$STEP" = build ] && exit 0
for _ in $(seq 300); do [ -e /tmp/tx_built ] && break; sleep 2; done
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
