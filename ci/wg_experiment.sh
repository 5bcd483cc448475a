# Timing experiments of the wgmma dense forward (ci/dense_mma_check.cu): 0 as built, 1 without the staging
# work, 2 without the wgmma calls, 3 without the accumulator fences in the loop (1, 2 give wrong results).
B="nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A -I csrc ci/dense_mma_check.cu csrc/kernels/conv1d_fwd_dense_mma.cu csrc/kernels/conv1d_fwd_dense_wgmma.cu"
for v in ${VARIANTS:-0 1 2 3}; do $B -DCONVKIT_WG_EXPERIMENT=$v -o /tmp/dc$v > /tmp/dc$v.log 2>&1 & done
wait
for v in ${VARIANTS:-0 1 2 3}; do echo "== experiment $v"; DC_TIME_ALWAYS=1 /tmp/dc$v --wt --only ${ONLY:-_} 2>&1 | grep -E "^(kb|w2v_k|tcn|wave|grouped)|TIME|FAIL|cases run" | grep -v "max rel"; done
