#!/usr/bin/env bash
# The open A/B timings of the installed package, one bench process per setting (the switches are read once per
# process), each line "== <setting>" then the bench's table. Meant as the EXTRA_CMD of a warm call once the tests
# have ended, e.g.
#   TESTS_WAIT=300 EXTRA_CMD='bash $repo/ci/ab_experiments.sh' bash ci/gpu_check.sh collect
# AB_PARTS picks parts (default all): realign, narrow, act, ieee. Each bench run is capped by timeout: AB_TIMEOUT seconds where
# set, else 40 (narrow), 60 (act), 150 (ieee: kb76's IEEE fwd+bwd takes ~75 ms a call).
#   realign 16-bit dense forwards whose y rows do not start on 16-byte units (kb76, kb67, w2v_k3s2; tcn's do, as a
#           control), fwd and fwd+bwd: default against CONVKIT_REALIGN_STORES=1 (wg::store_c_tile, session 41).
#   narrow  w2v_first: the default (the tiled narrow forward since session 41) against the per-thread shapes
#           (CONVKIT_DENSE_NARROW_TILE=0), its staged 16-byte stores (CONVKIT_DENSE_NARROW_STAGED=1, 16-bit only) and
#           the lanes grad-input (CONVKIT_DENSE_NARROW_OUT_LANES=1), bf16 and fp32.
#   act     16-bit dense forwards without and with a fused activation (the epilogue in wg::store_c_tile, session 39).
#   ieee    IEEE fp32 window forward (and the grad-input phases on it): unaligned taps by 4-byte loads (default) or
#           by aligned loads (CONVKIT_DENSE_F32_SHIFT=1, session 40; H100 session 41: within 1-2 %).
PY=${PYTHON:-python3}
parts=${AB_PARTS:-realign narrow act ieee}
for part in $parts; do
  case $part in
    realign)
      T=${AB_TIMEOUT:-60}
      for e in "" CONVKIT_REALIGN_STORES=1; do
        echo "== realign ${e:-default}"
        env $e timeout "$T" "$PY" -m convkit.bench --cuda-graph --cases kb76_dense_s3d4,kb67_dense_k3,w2v_k3s2,tcn_k3_d8 \
          --dtypes bfloat16
      done ;;
    narrow)
      T=${AB_TIMEOUT:-40}
      for e in "" CONVKIT_DENSE_NARROW_STAGED=1 CONVKIT_DENSE_NARROW_TILE=0 CONVKIT_DENSE_NARROW_OUT_LANES=1; do
        echo "== narrow ${e:-default}"
        env $e timeout "$T" "$PY" -m convkit.bench --cuda-graph --cases w2v_first_k10s5 --dtypes bfloat16,float32
      done ;;
    act)
      T=${AB_TIMEOUT:-60}
      for a in "" gelu silu; do
        echo "== act ${a:-none}"
        timeout "$T" "$PY" -m convkit.bench --cuda-graph --cases kb76_dense_s3d4,kb67_dense_k3,tcn_k3_d8,w2v_k3s2 \
          --dtypes bfloat16 --directions fwd ${a:+--activation $a}
      done ;;
    ieee)
      T=${AB_TIMEOUT:-150}
      for e in "" CONVKIT_DENSE_F32_SHIFT=1; do
        echo "== ieee ${e:-default}"
        env $e timeout "$T" "$PY" -m convkit.bench --cuda-graph --dtypes float32_ieee \
          --cases kb76_dense_s3d4,kb67_dense_k3,w2v_k3s2,grouped_g8_k5,wavenet_k2_d512
      done ;;
    *) echo "ab_experiments: unknown part $part"; exit 2 ;;
  esac
done
