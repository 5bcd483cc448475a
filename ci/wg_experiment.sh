# Timing experiments of the wgmma dense forward with ci/dense_mma_check.cu (kernel only, no torch):
# 0 as built, 1 without the main loop's wgmma calls, 2 without its staging (1 and 2 give wrong results:
# CONVKIT_DENSE_WGMMA_EXPERIMENT in csrc/kernels/conv1d_fwd_dense_wgmma.cu). Run from the repository root on
# the GPU machine: VARIANTS="0 2" ONLY=w2v bash ci/wg_experiment.sh
B="nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A -I csrc ci/dense_mma_check.cu csrc/kernels/conv1d_fwd_dense_mma.cu csrc/kernels/conv1d_fwd_dense_wgmma.cu"
for v in ${VARIANTS:-0 1 2}; do $B -DCONVKIT_DENSE_WGMMA_EXPERIMENT=$v -o /tmp/dc$v > /tmp/dc$v.log 2>&1 & done
wait
for v in ${VARIANTS:-0 1 2}; do
  echo "== experiment $v"
  DC_TIME_ALWAYS=1 /tmp/dc$v --wt --only ${ONLY:-_} 2>&1 | grep -E "^(kb|w2v_k|tcn|wave|grouped)|TIME|FAIL|cases run" | grep -v "max rel"
done
