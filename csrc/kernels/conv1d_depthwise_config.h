// Tuning choices of the depthwise kernels, picked by measurement on the H200 with ci/dw_micro.cu
// and ci/pick_dw_config.py (`bash ci/gpu_check.sh tune` does both, then builds, tests and
// benchmarks with the result; benchmarks/NOTES.md has the numbers). Per direction and per element size:
//   *_V       outputs per thread (a tile is 128 * V outputs; the staged kernels use at most 16);
//   *_VARIANT which kernel: forward 0 staged, 1 pipelined, 2 pipelined with interleaved runs,
//             3 pipelined in grid-stride tile order, 4 both, 5 pipelined with warp-coalesced
//             stores, 6 the same in grid-stride order, 7 direct (one block per tile,
//             conv1d_depthwise_direct.cuh), 8 Toeplitz on tensor cores (16-bit, stride 1),
//             9 streaming (conv1d_depthwise_stream.cuh, stride 1 or 2), 10 Toeplitz with a cp.async
//             ring per warp (persistent warps; 16-bit, stride 1), 11 Hankel (the window as the mma A
//             operand, weights in registers; persistent warps with a ring; 16-bit, stride 1);
//             backward 0 staged, 1 pipelined, 2 pipelined with interleaved runs, 3 direct,
//             4 streaming (stride 1 or 2), 5 Toeplitz on tensor cores (16-bit, stride 1; else 1),
//             6 Toeplitz with a cp.async ring per warp (persistent warps; needs B*C >= 64 * SMs; else 5),
//             7 the same with a Hankel grad-input on swizzled windows (else 5)
//             (see launch_fwd / launch_bwd).
//   *_LONG_K  forward / backward for K >= CONVKIT_DW_{FWD,BWD}_LONG_K (set by hand from the
//             micro-benchmark's K31 rows): the 16-bit Hankel forward (11) is the fastest there (session 11,
//             conformer bf16: 0.0627 ms against 0.0742 for the Toeplitz forward (8) and 0.0772 for its ring
//             version (10); after the Hankel chunk's direct stores V 32, i.e. 1024-output chunks, beat V 16:
//             0.0479 against 0.0534 ms), and the Hankel grad-input in the ring backward (7) edges out
//             variant 6 (0.1390 against 0.1402 ms; session 7: pipelined 0.212 ms, Toeplitz 0.156, with the
//             ring 0.141); fp32 keeps the pipelined forward and backward, which are 1.5-2x faster there than
//             the streaming kernels. (The picker's one choice per dtype class is made on the short kernels.)
// Streaming variants (fwd 9, bwd 4) double V for 16-bit types on rows that fill the bigger block
// (stream_vec). Session 5 micro-benchmark (benchmarks/NOTES.md): streaming fwd 87.8-95.6 % of the
// floor on kb_dw_k3 / shortconv (direct: 73-75 %), fp32 94-96 %; bwd 77-91 %.
#pragma once

#define CONVKIT_DW_FWD_V_16BIT 16
#define CONVKIT_DW_FWD_VARIANT_16BIT 9
#define CONVKIT_DW_FWD_V_FP32 16
#define CONVKIT_DW_FWD_VARIANT_FP32 9
#define CONVKIT_DW_BWD_V_16BIT 16
#define CONVKIT_DW_BWD_VARIANT_16BIT 4
#define CONVKIT_DW_BWD_V_FP32 16
#define CONVKIT_DW_BWD_VARIANT_FP32 4

#define CONVKIT_DW_FWD_LONG_K 15
#define CONVKIT_DW_FWD_V_16BIT_LONG_K 32
#define CONVKIT_DW_FWD_VARIANT_16BIT_LONG_K 11
#define CONVKIT_DW_FWD_V_FP32_LONG_K 16
#define CONVKIT_DW_FWD_VARIANT_FP32_LONG_K 6
#define CONVKIT_DW_BWD_LONG_K 15
#define CONVKIT_DW_BWD_VARIANT_16BIT_LONG_K 7
#define CONVKIT_DW_BWD_VARIANT_FP32_LONG_K 1

// Resident blocks per SM the 16-bit streaming kernels with 2 units per thread ask the compiler for
// (__launch_bounds__, see stream_min_blocks). Overridable with -D for the micro-benchmark.
#ifndef CONVKIT_DW_STREAM_FWD_MIN_BLOCKS
#define CONVKIT_DW_STREAM_FWD_MIN_BLOCKS 16
#endif
#ifndef CONVKIT_DW_STREAM_BWD_MIN_BLOCKS
#define CONVKIT_DW_STREAM_BWD_MIN_BLOCKS 10
#endif

// Resident blocks per SM the Toeplitz (tensor-core) forward / backward ask the compiler for
// (__launch_bounds__; 1: no register cap). Overridable with -D for the micro-benchmark. The backward's 4
// (session 12): the K 31 ring backward (variant 7) takes 125 registers instead of 145, without spills, so 4
// blocks fit per SM instead of 3: 0.1236 -> 0.1165 ms on conformer bf16 (5 blocks spill 180 bytes).
#ifndef CONVKIT_DW_TOEPLITZ_FWD_MIN_BLOCKS
#define CONVKIT_DW_TOEPLITZ_FWD_MIN_BLOCKS 1
#endif
#ifndef CONVKIT_DW_TOEPLITZ_BWD_MIN_BLOCKS
#define CONVKIT_DW_TOEPLITZ_BWD_MIN_BLOCKS 4
#endif
// ... and the Hankel forward (variant 11): uncapped, ptxas takes 135-164 registers for K 31 (the
// compiler's choice, not the kernel's need); capped at 85 (6 blocks) it takes 74-77 without spills,
// while the 128-register cap (4 blocks) spills. Other caps not yet measured on the GPU.
#ifndef CONVKIT_DW_HANKEL_FWD_MIN_BLOCKS
#define CONVKIT_DW_HANKEL_FWD_MIN_BLOCKS 6
#endif
