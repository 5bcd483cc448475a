// Tuning choices of the depthwise kernels, picked by measurement on the H200 with ci/dw_micro.cu
// and ci/pick_dw_config.py (`bash ci/gpu_check.sh tune` does both, then builds, tests and
// benchmarks with the result; benchmarks/NOTES.md has the numbers). Per direction and per element size:
//   *_V       outputs per thread (a tile is 128 * V outputs; the staged kernels use at most 16);
//   *_VARIANT which kernel: forward 0 staged, 1 pipelined, 2 pipelined with interleaved runs,
//             3 pipelined in grid-stride tile order, 4 both, 5 pipelined with warp-coalesced
//             stores, 6 the same in grid-stride order, 7 direct (one block per tile,
//             conv1d_depthwise_direct.cuh), 8 Toeplitz on tensor cores (16-bit, stride 1);
//             backward 0 staged, 1 pipelined, 2 pipelined with interleaved runs, 3 direct
//             (see launch_fwd / launch_bwd).
//   *_LONG_K  16-bit forward for K >= CONVKIT_DW_FWD_LONG_K (set by hand from the micro-benchmark's
//             K31 rows: the Toeplitz kernel is the fastest there by 20-50 %; the picker's one choice
//             per dtype class is made on the short kernels).
#pragma once

#define CONVKIT_DW_FWD_V_16BIT 32
#define CONVKIT_DW_FWD_VARIANT_16BIT 7
#define CONVKIT_DW_FWD_V_FP32 16
#define CONVKIT_DW_FWD_VARIANT_FP32 6
#define CONVKIT_DW_BWD_V_16BIT 16
#define CONVKIT_DW_BWD_VARIANT_16BIT 1
#define CONVKIT_DW_BWD_V_FP32 16
#define CONVKIT_DW_BWD_VARIANT_FP32 1

#define CONVKIT_DW_FWD_LONG_K 15
#define CONVKIT_DW_FWD_V_16BIT_LONG_K 16
#define CONVKIT_DW_FWD_VARIANT_16BIT_LONG_K 8
