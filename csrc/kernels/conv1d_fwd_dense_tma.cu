// Dense and grouped forward on wgmma with every operand brought in by the copy engine (TMA), sm_90a, fp16/bf16
// input and weights, fp32 accumulation, for x in channels-last memory ((B, L, C) storage seen as a (B, C, L)
// view), and (B, C, L) x where that pays (read as it lies and transposed in shared memory, or copied first; below).
// dispatch.cpp runs it where conv1d_fwd_dense_tma_supports(p) holds and Cout/groups > 64 (CONVKIT_DENSE_TMA=0: off);
// the register-staged wgmma kernel (conv1d_fwd_dense_wgmma.cu) serves the other (B, C, L) x.
// Written in session 15 (ci/dense_mma_check.cu --tma checks and times it: `bash ci/gpu_check.sh tma`,
// ci/tma_experiment.sh for the macro experiments below), in the package since session 16.
//
// Measured (H100, bf16, kernel only with channels-last x, session 15; default form: producer warp + 32-byte
// swizzled x rows): w2v_k3s2 2.95 ms (package wgmma kernel 4.12), tcn 0.470 (0.722), kb67 1.54 (1.91,
// mma.sync), kb76 3.95 (5.84), wavenet 0.438 (0.612), grouped_g8 0.429 (0.364: why Cout/groups > 64).
// Session 22 (H200, same binary pair, kernel only, bf16, channels-last x, ci/tma_experiment.sh): 32-channel stages
// with 64-byte x rows where Cin/groups % 32 == 0 (CONVKIT_TMA_SW64) and the epilogue through a 64 x 128 band per
// warpgroup (CONVKIT_TMA_BANDED_EPILOGUE, which frees the shared memory those stages need): w2v_k3s2 3.17 -> 2.23
// ms, tcn 0.506 -> 0.390, kb67 1.58 -> 1.45 against the session 15 form (16-channel stages, 32-byte rows, whole
// C tile). The band alone (16-channel stages) changes little (tcn 0.48, w2v 3.17); writing y straight from the
// accumulators instead (CONVKIT_TMA_DIRECT_EPILOGUE) costs ~1 ms on w2v (H100: 3.14 -> 4.16).
// Session 24 (H100, kernel only, bf16, ci/tma_experiment.sh): the step table (per-step operand offsets computed once) took w2v_k3s2
// 2.17 -> 1.96 ms, tcn 0.379 -> 0.344, kb67 1.42 -> 1.27, kb76 3.91 -> 3.66. What bounds it now is the copies: with
// the wgmma calls and the epilogue left out (CONVKIT_TMA_EXPERIMENT=5) w2v still takes 1.33 ms and tcn 0.198 of their
// 1.99 / 0.351, at ~15 bytes per clock per SM with L2 29 % and DRAM 22 % busy; the epilogue adds 0.34 / 0.09 (it does
// not overlap the copies), the wgmma calls the rest. Session 25 timed two-CTA clusters multicasting the weights or x
// on an H100 (CONVKIT_TMA_CLUSTER): slower (copies only, w2v_k3s2 1.30 -> 1.42 ms) and wrong results, so that
// experiment is removed; details in benchmarks/NOTES.md.
// A (B, C, L) x is first copied into channels-last memory by the launcher (x_to_channels_last_kernel, session 17)
// where the work per x element is high enough for that to pay (copy_pays below), unless the transposing form takes
// it (session 37, the default where its 4-D tensor map can describe x: rows of whole 16-byte units): x read as it
// lies, box by box, and transposed into the same x image in shared memory by three more warps (transpose_stages).
// H100, bf16, CUDA graphs, same process (copy -> TX): kb76 fwd 5.85 -> 4.75 ms, kb67 1.64 -> 1.25, tcn 0.451 ->
// 0.400, wavenet 0.435 -> 0.380; fwd+bwd kb76 15.54 -> 14.52, kb67 4.87 -> 4.45. (The channels-last form runs kb76
// in 3.66 ms: the transposers, not the copies, may now bound it.) A tiled TMA load must start at a whole 16-byte
// unit (an illegal instruction otherwise, ci/tma_unaligned_probe.cu), so boxes start rounded down.
//
// Why: the wgmma forward in kernels/conv1d_fwd_dense_wgmma.cu stages its operands with the threads (16-byte
// cp.async per weight row piece, x rows loaded into registers, realigned and transposed by byte_perm): on the
// H200 that staging alone takes 3.6 of w2v_k3s2's 4.2 ms, against 1.5 ms for its wgmma calls alone. Here no
// thread touches an operand byte:
//   * x must be channels-last in memory ((B, L, C) storage seen as a (B, C, L) view; the caller transposes
//     once otherwise). Then a 16-byte row of 8 channels at one position is exactly a row of the K-major
//     no-swizzle core matrices wgmma reads, and one TMA load per (channel group, phase, piece) lands rows
//     position by position. The tensor map is 5-D: (8 channels, channel group within the conv group, group,
//     position, batch); its box is 8 x 1 x 1 x (rows * S) x 1 with element stride S along positions, so a
//     load brings rows t, t + S, t + 2S, ...: the phase-split window of the mma / wgmma kernels
//     (row = phase * wq + t / S, so tap k of BN outputs is BN consecutive rows at row rb[k]) without any
//     index arithmetic. Positions outside [0, L) (padding, tails) and channel groups past Cin/groups come back
//     as zeros from the copy engine.
//   * Weights are packed once per call (pack_weights_kernel) into the exact shared-memory image of each stage:
//     [g][m tile][chunk] blocks of [tap * CC/8 + channel group][BM rows][8 channels], zero outside the tensor,
//     so a stage's weights are one cp.async.bulk.
//   * One thread (of a ninth, producer-only warp) issues a stage's copies; an mbarrier per ring slot (expect_tx of the
//     stage's bytes; in the transposing form only the weights', plus the transposers' arrivals) says when it has
//     landed. The stage sequence runs across the block's tiles (persistent blocks, one per SM), so the
//     next tile's first stages load while this tile's last ones and its epilogue run; the epilogue's band of
//     each warpgroup has its own shared memory for that reason.
// Each step: wait for stage s, issue its wgmma calls (m64n128k16, both operands in shared memory, as in the
// wgmma kernel), wait for stage s - 1's calls, release stage s - 1's slot (an "empty" mbarrier the producer
// waits on before refilling it with stage s - 1 + NS).
#include <cuda.h>  // CUtensorMap and the encode function's type (the function comes through the runtime)

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <cstdlib>

#include "kernels/activation.cuh"
#include "kernels/common.cuh"
#include "kernels/launchers.h"
#include "kernels/mma_common.cuh"
#include "kernels/tma_common.cuh"
#include "kernels/wgmma_common.cuh"

// The sm_80 pass compiles the kernel as a trap: the sm_90a-only helpers below are unreferenced there.
#pragma nv_diag_suppress 177, 128  // (128: the x-by-cp.async experiment's loop, off by default)

// 1: the x window by 16-byte cp.async from every thread (a warp's copies cover whole 32-byte sectors: the two
// channel groups of a 16-channel stage at one position are neighbours), completion counted on the same
// mbarrier (cp.async.mbarrier.arrive.noinc); the weights stay one bulk copy. 0: x by TMA. An experiment: the
// TMA boxes are 16 bytes wide (half a sector per row), which may not keep up.
#ifndef CONVKIT_TMA_X_CPASYNC
#define CONVKIT_TMA_X_CPASYNC 0
#endif
// 1 (default): x as 32-byte rows (16 channels at one position: one box row per position, half the rows of the
// 16-byte form) in the 32-byte swizzled K-major layout, read through 32B-swizzle descriptors. A tap's operand
// starts at any row, not only at 8-row pattern boundaries, with the descriptor's base offset 0 (H100, session 15:
// 1 passes every case; a form 2 with base offset (address >> 7) & 7 failed 4 of 20 and is gone). Needs Cin/groups
// % 16 == 0. Since
// session 22 the 32-byte rows serve the channel counts and shapes the 64-byte rows below do not. 0: 16-byte rows
// only (Cin/groups % 8).
#ifndef CONVKIT_TMA_SW32
#define CONVKIT_TMA_SW32 1
#endif
static_assert(CONVKIT_TMA_SW32 == 0 || CONVKIT_TMA_SW32 == 1, "CONVKIT_TMA_SW32: 0 or 1");
static_assert(!(CONVKIT_TMA_SW32 && CONVKIT_TMA_X_CPASYNC), "one x staging experiment at a time (-DCONVKIT_TMA_SW32=0)");
// 1 (default, session 22): where Cin/groups % 32 == 0, x as 64-byte rows (32 channels at one position: half the
// box rows of the 32-byte form per channel) in the 64-byte swizzled K-major layout, read through 64B-swizzle
// descriptors whose start moves 32 bytes into the row for a stage's second 16 channels; 32-channel stages. Other
// channel counts keep the 32-byte rows (the kernel's XR template argument: 32 or 64). 0: 32-byte rows only. As
// with the 32-byte rows, a tap's operand starts at any row with base offset 0 (the H200 runs of session 22 pass
// with it; the swizzle evidently follows the absolute shared address, as TMA writes it).
#ifndef CONVKIT_TMA_SW64
#define CONVKIT_TMA_SW64 1
#endif
// 1 (default) adds a ninth warp that only issues the copies, waiting on a per-slot "empty" mbarrier that each
// consumer warpgroup arrives on once its wgmma calls of the slot's stage are done; the consumers then need no
// block barrier per stage (the epilogue syncs them with a named barrier). 0: thread 0 issues after a block
// barrier per stage.
// Experiment: 1 issues one m64n256k16 per k16 step instead of two m64n128k16 where a warpgroup's tile is 64 x 256
// (MW 1, NB 2); its 128 accumulators are acc[0][0..1] as one array (the same register-to-column map).
#ifndef CONVKIT_TMA_N256
#define CONVKIT_TMA_N256 0
#endif

// Experiment: 1 writes y straight from the accumulators (4-byte stores of two columns, 2-byte where a row is
// not 4-byte aligned) instead of through a C tile in shared memory: the ring gets that memory (room for
// 32-channel stages).
#ifndef CONVKIT_TMA_DIRECT_EPILOGUE
#define CONVKIT_TMA_DIRECT_EPILOGUE 0
#endif

// 1 (default, session 22): the epilogue goes through one 64 x 128 band of shared memory per warpgroup, a
// fragment at a time (2 x 17 KB instead of a BM x BN C tile: room for 32-channel stages beside it). 0: the whole
// C tile at once.
#ifndef CONVKIT_TMA_BANDED_EPILOGUE
#define CONVKIT_TMA_BANDED_EPILOGUE 1
#endif

#ifndef CONVKIT_TMA_PRODUCER_WARP
#define CONVKIT_TMA_PRODUCER_WARP 1
#endif


// 1 (session 24): "ping-pong" consumers. Each warpgroup computes whole tiles of its own (BM = 64 * MW rows: the
// block's tiles alternate between the two), and their main loops take turns through two order mbarriers, so one
// warpgroup's epilogue runs while the other's wgmma calls keep the tensor cores busy. 0: both warpgroups share each
// tile (BM = 128 * MW) and run their epilogues together, the tensor cores idle meanwhile.
#ifndef CONVKIT_TMA_PINGPONG
#define CONVKIT_TMA_PINGPONG 0
#endif

// Timing experiments (ci/tma_experiment.sh with DC_TIME_ALWAYS=1; wrong results), bits: 1 leaves out the epilogue's
// stores, 2 the copies after the ring's first fill (the consumers reuse stale slots without waiting), 4 the wgmma
// calls, 8 (the transposing form) the transposers' ldmatrix / stmatrix (they only wait and arrive; bit 2 would hang
// that form: its producer and transposers run every stage; builds with it leave the form out, kTxForm). Where the
// time goes: 2 + 1 is the main loop's wgmma rate with these layouts, 4 the copy engine's feed rate; for the
// transposing form (ci/tx_harness.cu, ci/tx_time.sh) 8 + 4 + 1 the raw loads alone.
// 0 in every build of the package.
#ifndef CONVKIT_TMA_EXPERIMENT
#define CONVKIT_TMA_EXPERIMENT 0
#endif
constexpr bool kExpNoEpilogue = (CONVKIT_TMA_EXPERIMENT & 1) != 0;
constexpr bool kExpNoFeed = (CONVKIT_TMA_EXPERIMENT & 2) != 0;
constexpr bool kExpNoWgmma = (CONVKIT_TMA_EXPERIMENT & 4) != 0;
constexpr bool kExpNoTranspose = (CONVKIT_TMA_EXPERIMENT & 8) != 0;  // TX: the transposers only wait and arrive

static_assert(!CONVKIT_TMA_PINGPONG || (CONVKIT_TMA_PRODUCER_WARP && CONVKIT_TMA_BANDED_EPILOGUE &&
                                        !CONVKIT_TMA_DIRECT_EPILOGUE),
              "the ping-pong consumers need the producer warp and the banded epilogue");
static_assert(!(CONVKIT_TMA_PRODUCER_WARP && CONVKIT_TMA_X_CPASYNC),
              "the producer warp stages x by TMA (-DCONVKIT_TMA_PRODUCER_WARP=0)");

namespace convkit {
namespace {
using namespace tc;
using namespace tma;

constexpr int kThreads = 256;  // two warpgroups (the consumers)
constexpr int kMaxSteps = 32;  // k16 steps per stage: K <= 16 taps x 32 channels
constexpr int kBlockThreads = kThreads + (CONVKIT_TMA_PRODUCER_WARP ? 32 : 0);
// The transposing form (TX, x in (B, C, L) memory, no copy): warps 0-7 the consumers, warp 8 the producer, warps
// 9-11 the transposers (see transpose_stages).
// Built only with the default forms of the experiments above (swizzled rows, producer warp, shared tiles).
// CONVKIT_TMA_TX_WG4=1 (an experiment, session 37, compiled, not run): 512 threads, warps 9-15 the transposers,
// registers moved by setmaxnreg (the consumers' warpgroups up to kTxConsumerRegs, the other two down to
// kTxOtherRegs; a plain fourth transposer warp gives 416 threads, a 128-register cap and 1.4 KB of consumer spills).
#ifndef CONVKIT_TMA_TX_WG4
#define CONVKIT_TMA_TX_WG4 0
#endif
constexpr bool kTxForm = CONVKIT_TMA_SW32 && CONVKIT_TMA_PRODUCER_WARP && !CONVKIT_TMA_PINGPONG &&
                         !CONVKIT_TMA_X_CPASYNC && !kExpNoFeed;
constexpr int kTxWarps = CONVKIT_TMA_TX_WG4 ? 7 : 3;
constexpr int kTxThreads = 32 * kTxWarps;
constexpr int kTxBlockThreads = kThreads + 32 + kTxThreads;
constexpr int kTxConsumerRegs = 168, kTxOtherRegs = 88;  // (2 x 128 x 168 + 2 x 128 x 88 = 65536)
#ifndef CONVKIT_TMA_TX_RAW  // raw slots (an experiment, session 37, not run: 3 keeps more loads in flight, at the
#define CONVKIT_TMA_TX_RAW 2  // cost of ring slots)
#endif
constexpr int kMaxRaw = CONVKIT_TMA_TX_RAW;  // raw x slots (the (B, C, L) windows as TMA lands them)
constexpr int kTxDummyBytes = kTxWarps * 512;  // where a transposer lane stores a row past the window
constexpr int kTxMaxItems = (96 + kTxWarps - 1) / kTxWarps;  // transposer items per warp and stage at most (their
                                                              // addresses stay in registers): 96 (WG4: 98) in all
constexpr int kTxMaxBox = 248;     // positions per raw box at most (8 * 31: a row pitch of an odd number of 16 bytes)
constexpr int kBandPitch = 128 + 8;             // elements per band row (conflict-free 4-byte stores)
constexpr int kBandBytes = 64 * kBandPitch * 2;  // one warpgroup's epilogue band
// Bytes of one x row in shared memory (a TMA box row: one position): the kernel's XR, the plan's xr. 16: the
// no-swizzle experiment (CONVKIT_TMA_SW32=0); otherwise 32 or 64 (swizzled rows, CONVKIT_TMA_SW64).
constexpr int kXRowMin = CONVKIT_TMA_SW32 ? 32 : 16;
constexpr int kXRowMax = CONVKIT_TMA_SW32 && CONVKIT_TMA_SW64 ? 64 : kXRowMin;

struct TmaPlan {
  int mw, nb, bm, bn, cc, ns;  // 64-row blocks per warpgroup, 128-column blocks, tile, channels per stage, slots
  int xr;                      // bytes per x row in shared memory (the kernel's XR)
  int k, s, d;
  int nseg, nph;               // x window: 1 contiguous window of S phases, or one per tap of phase 0 only
  int wq, piece_rows, npieces; // rows per (segment, phase) = npieces * piece_rows; rows per TMA load
  int cgs;                     // rows per channel group: nseg * nph * wq
  int a_bytes, x_bytes, stage_bytes, c_pitch, c_off, bar_off, smem_bytes;
  int64_t cin_g, cout_g, chunks, m_tiles, j_tiles, num_tiles;
  // The transposing form (tx 1: x in (B, C, L) memory read as it lies): a stage's window lands by TMA as raw rows
  // [segment][piece][channel][boxl positions] (a raw slot; nraw slots), and the transposer warps write the stage's
  // x image from it. seg_span: window positions per segment (S * wq, or wq for the per-tap segments at stride 1).
  // A tiled TMA load must start at a whole 16-byte unit (8 positions; ci/tma_unaligned_probe.cu), so segment seg's
  // boxes start lead positions early, rounded down: its window starts at raw position sh(seg) = (sh0 + seg * dsh) % 8
  // (sh0 = -P mod 8, dsh = D mod 8, the same in every stage since tiles start at multiples of 8 positions); span_max
  // = seg_span + the largest sh(seg): the raw positions a segment's items cover.
  int tx, nraw, seg_span, rpc, boxl, raw_bytes, raw_tx, raw_off, dummy_off;
  int sh0, dsh, span_max;
};

// This thread's earlier cp.async copies arrive on bar when they complete (without raising its expected count:
// the count given at init includes them).
__device__ __forceinline__ void cp_async_mbar_arrive_noinc(uint32_t bar) {
#ifdef CONVKIT_WGMMA_DEVICE
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#endif
}

// Barrier 1 among the 256 consumer threads (the producer warp does not take part).
__device__ __forceinline__ void consumers_sync() {
  if (CONVKIT_TMA_PRODUCER_WARP) {
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
  } else {
    __syncthreads();
  }
}

#define CONVKIT_D128                                                                                       \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "  \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, "  \
  "%65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, "  \
  "%86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, " \
  "%106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, "     \
  "%123, %124, %125, %126, %127}"
#define CONVKIT_A8(d, o)                                                                                     \
  "+f"(d[o]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), "+f"(d[o + 5]), "+f"(d[o + 6]), \
      "+f"(d[o + 7])
#define CONVKIT_A64(d, o)                                                                                    \
  CONVKIT_A8(d, o), CONVKIT_A8(d, o + 8), CONVKIT_A8(d, o + 16), CONVKIT_A8(d, o + 24), CONVKIT_A8(d, o + 32),  \
      CONVKIT_A8(d, o + 40), CONVKIT_A8(d, o + 48), CONVKIT_A8(d, o + 56)
// d (64 x 256 fp32) += A (64 x 16) * B (16 x 256), both K-major.
template <typename T>
__device__ __forceinline__ void mma_m64n256k16(float* d, uint64_t da, uint64_t db) {
#ifdef CONVKIT_WGMMA_DEVICE
  if constexpr (std::is_same<T, __half>::value) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " CONVKIT_D128 ", %128, %129, p, 1, 1, 0, 0;\n}\n"
                 : CONVKIT_A64(d, 0), CONVKIT_A64(d, 64)
                 : "l"(da), "l"(db), "r"(1));
  } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " CONVKIT_D128 ", %128, %129, p, 1, 1, 0, 0;\n}\n"
                 : CONVKIT_A64(d, 0), CONVKIT_A64(d, 64)
                 : "l"(da), "l"(db), "r"(1));
  }
#endif
}
#undef CONVKIT_D128
#undef CONVKIT_A8
#undef CONVKIT_A64

// Epilogue walk over a warpgroup's m64n128 accumulator fragments acc[mb][nb] (rows (wrow + mb) * 64 ..
// + 63, columns nb * 128 .. + 127 of the tile): f(row, co, col, v0, v1) for each pair of adjacent columns of this
// thread, v = accumulator + bias of output channel co = co0 + row (no bias read past cout_g; the activation comes
// after rounding, in wg::store_c_tile, except in the direct-epilogue experiment). With
// only_mb / only_nb >= 0 (constants in the caller's unrolled loop), only that fragment.
// (kernels/conv1d_fwd_dense_wgmma.cu has the same walk inline; both store the C tile with wg::store_c_tile.)
template <typename T, int MW, int NB, typename F>
__device__ __forceinline__ void for_each_output_pair(const Conv1dParams& p, float (&acc)[MW][NB][64], int wrow, int warp,
                                                     int lane, int64_t g, int64_t cout_g, int64_t co0, F&& f,
                                                     int only_mb = -1, int only_nb = -1) {
  const int rw = (warp & 3) * 16 + (lane >> 2);
#pragma unroll
  for (int mb = 0; mb < MW; ++mb) {
    if (only_mb >= 0 && mb != only_mb) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = (wrow + mb) * 64 + rw + 8 * h;
      const int64_t co = co0 + row;
      float bv = 0.f;
      if (p.bias != nullptr && co < cout_g) bv = load_param<T>(p, p.bias, g * cout_g + co);
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) {
        if (only_nb >= 0 && nb != only_nb) continue;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          const float v0 = acc[mb][nb][4 * i + 2 * h] + bv, v1 = acc[mb][nb][4 * i + 2 * h + 1] + bv;
          f(row, co, nb * 128 + 8 * i + 2 * (lane & 3), v0, v1);
        }
      }
    }
  }
}

// The window row of output 0 for tap k (any tile: the window starts at the tile's first position exactly).
__device__ __forceinline__ int tap_row(const TmaPlan& q, int k) {
  if (q.nseg > 1) return k * q.wq;
  const int o = k * q.d;
  return (o % q.s) * q.wq + o / q.s;
}

// Four 8 x 8 matrices of 16-bit elements (registers as ldmatrix gives them) stored transposed: lane l gives the
// 16-byte destination of row l % 8 of matrix l / 8, which receives column l % 8 of that matrix. sm_90.
__device__ __forceinline__ void stsm_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
#ifdef CONVKIT_WGMMA_DEVICE
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
#endif
}

// Items (ldmatrix + stmatrix pairs) of a TX plan's stage: per segment and channel set of xr / 2 channels, one per
// 4 / (xr / 16) raw 8-position blocks; in all (tx_items) at most kTxWarps * kTxMaxItems (try_shapes).
__host__ __device__ inline int tx_items_per_seg(const TmaPlan& q, int xr) {
  const int nblk = (q.span_max + 7) / 8, upm = 4 / (xr / 16);
  return (nblk + upm - 1) / upm;
}
__host__ __device__ inline int tx_items(const TmaPlan& q, int xr) {
  return (q.cc / (xr / 2)) * q.nseg * tx_items_per_seg(q, xr);
}

// The transposer warps of the TX form (warp tw of kTxWarps), for every stage of the block: wait until the stage's raw
// window has landed (raw "full" barrier) and the consumers have released the stage's slot ("empty"), then write the
// slot's x image exactly as the TMA loads of the channels-last form would have: image row (cs * cgs + (seg * nph +
// ph) * wq + r) holds the XR / 2 channels of channel set cs at window position t = ph + r * S of segment seg (x
// position start + seg * D + t), its 16-byte chunks swizzled as the 32 / 64-byte TMA swizzle does it (chunk c of a row
// at address A goes to A + 16 (c ^ ((A >> 7) & (XR / 16 - 1))): the pattern follows the absolute address). One item
// is an ldmatrix.x4 of raw rows (matrix m: 8 channels x 8 positions) and a transposing stmatrix.x4 that puts each
// position's 8 channels into its image row; raw positions outside the window (the lead of a box rounded down to a
// 16-byte unit, the tail past it) go to a scratch row. Then every thread fences its writes for the async proxy
// (wgmma) and arrives on the stage's "full" barrier and the raw slot's "empty" one.
// Every stage has the same items and every slot's image starts on a 1024-byte boundary (as the swizzle patterns
// repeat), so a lane's two addresses of item j (warp items tw, tw + kTxWarps, ...: at most kTxMaxItems, tx_items)
// are computed once, as offsets from the raw slot and the image.
template <int XR>
__device__ __forceinline__ void transpose_stages(const TmaPlan& q, int64_t total, uint32_t base, uint32_t bar0,
                                                 uint32_t raw_bar, int tw, int lane) {
  constexpr int kCh = XR / 16;    // 16-byte chunks per image row
  constexpr int kUpm = 4 / kCh;   // 8-position blocks per item
  constexpr int kSetCh = XR / 2;  // channels per image row (a channel set)
  const int m = lane >> 3, i8 = lane & 7;
  const int chunk = m % kCh, uoff = m / kCh;
  const int nblk = (q.span_max + 7) / 8;  // raw 8-position blocks per segment
  const int per_seg = tx_items_per_seg(q, XR), items = tx_items(q, XR);
  const int mine = items > tw ? (items - 1 - tw) / kTxWarps + 1 : 0;
  const uint32_t dummy = base + q.dummy_off + tw * 512 + lane * 16;
  const int S = q.s;
  uint32_t src[kTxMaxItems], dst[kTxMaxItems];  // offsets from the raw slot / the image (~0u: the scratch row)
#pragma unroll
  for (int j = 0; j < kTxMaxItems; ++j) {
    const int it = tw + j * kTxWarps;
    src[j] = 0;
    dst[j] = ~0u;
    if (j >= mine) continue;
    const int ub = it % per_seg, rest = it / per_seg;
    const int seg = rest % q.nseg, cs = rest / q.nseg;
    const int blk = ub * kUpm + uoff;
    const int t0 = 8 * (blk < nblk ? blk : nblk - 1);  // (a block past the window: read any, stored to scratch)
    const int pc = t0 / q.boxl;
    const int ch = cs * kSetCh + chunk * 8 + i8;
    src[j] = static_cast<uint32_t>((((seg * q.rpc + pc) * q.cc + ch) * q.boxl + t0 - pc * q.boxl) * 2);
    const int t = 8 * blk + i8 - (q.sh0 + seg * q.dsh) % 8;  // the window position of raw position 8 blk + i8
    if (t >= 0 && t < q.seg_span) {
      const int ph = t % S, rr = t / S;
      const uint32_t a = static_cast<uint32_t>((cs * q.cgs + (seg * q.nph + ph) * q.wq + rr) * XR);
      dst[j] = a + 16u * (chunk ^ ((a >> 7) & (kCh - 1)));
    }
  }
  for (int64_t i = 0; i < total; ++i) {
    const int slot = static_cast<int>(i % q.ns), r = static_cast<int>(i % q.nraw);
    tma::mbar_wait(raw_bar + 8u * r, static_cast<uint32_t>((i / q.nraw) & 1));
    if (i >= q.ns) tma::mbar_wait(bar0 + 8u * (tma::kMaxSlots + slot), static_cast<uint32_t>((i / q.ns - 1) & 1));
    const uint32_t x_dst = base + slot * q.stage_bytes + q.a_bytes;
    const uint32_t raw = base + q.raw_off + r * q.raw_bytes;
#pragma unroll
    for (int j = 0; j < kTxMaxItems; ++j) {
      if (j >= mine || kExpNoTranspose) break;
      uint32_t r0, r1, r2, r3;
      tc::ldsm_x4(raw + src[j], r0, r1, r2, r3);
      stsm_x4_trans(dst[j] == ~0u ? dummy : x_dst + dst[j], r0, r1, r2, r3);
    }
    wg::fence_proxy_async();
    tma::mbar_arrive(raw_bar + 8u * (kMaxRaw + r));
    tma::mbar_arrive(bar0 + 8u * slot);
  }
}


template <typename T, int MW, int NB, int XR, bool TX>
__global__ void __launch_bounds__(TX ? kTxBlockThreads : kBlockThreads, 1)
    conv1d_fwd_dense_tma_kernel(const __grid_constant__ CUtensorMap xmap, const Conv1dParams p, const TmaPlan q,
                                const unsigned short* __restrict__ wpack) {
#ifndef CONVKIT_WGMMA_DEVICE
  __trap();  // sm_90a only
#else
  extern __shared__ unsigned char smem_raw[];
  constexpr int kXRow = XR, kXRowCh = XR / 2;
  constexpr bool kXSwizzled = XR > 16;
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5, wgi = warp >> 2;
  const int wrow = CONVKIT_TMA_PINGPONG ? 0 : wgi * MW;  // the warpgroup's first 64-row block of a tile
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;  // TMA destinations: 128 (swizzled: 1024)-byte aligned
  const uint32_t bar0 = base + q.bar_off;
  const uint32_t order0 = bar0 + 16 * kMaxSlots;  // ping-pong: warpgroup w may start its next main loop at order0 + 8 w
  const int nch = static_cast<int>(q.chunks);
  const int64_t my_tiles = block_tiles(q.num_tiles);
  const int64_t total = my_tiles * nch;  // stages this block consumes
  const int64_t S = q.s, D = q.d, P = p.pad_left;

  // the coordinates of this block's tile ti
  auto tile_of = [&](int64_t ti, int64_t& b, int64_t& g, int64_t& jt, int64_t& mt) {
    tma::tile_coords(blockIdx.x + ti * static_cast<int64_t>(gridDim.x), q.m_tiles, p.groups, q.j_tiles, b, g, jt, mt);
  };

  // Stage sidx of this block (tile sidx / nch of the block, chunk sidx % nch) into its ring slot: one bulk copy
  // of the packed weights, one TMA load per (channel group, segment, phase, piece). Thread 0 only.
  auto issue = [&](int64_t sidx) {
    const Stage st = stage_of(q, p.groups, sidx, base, bar0);
    const int64_t b = st.b, g = st.g, jt = st.jt;
    const int chunk = st.chunk;
    const uint32_t bar = st.bar, x_dst = st.x_dst;
    issue_weights(q, st, wpack, CONVKIT_TMA_X_CPASYNC ? 0u : static_cast<uint32_t>(q.x_bytes));
    if (CONVKIT_TMA_X_CPASYNC) return;
    const int64_t start0 = jt * q.bn * S - P;
    const int cg_base = chunk * (q.cc / 8);
    auto load_box = [&](uint32_t dst, int c1, int64_t pos) {
      load_5d(dst, &xmap, 0, c1, static_cast<int>(g), static_cast<int>(pos), static_cast<int>(b), bar);
    };
    if (kXSwizzled) {  // kXRowCh-channel sets: box rows of kXRow bytes
      for (int cs = 0; cs < q.cc / kXRowCh; ++cs)
        for (int seg = 0; seg < q.nseg; ++seg)
          for (int ph = 0; ph < q.nph; ++ph)
            for (int pc = 0; pc < q.npieces; ++pc) {
              const uint32_t dst = x_dst + (cs * q.cgs + (seg * q.nph + ph) * q.wq + pc * q.piece_rows) * kXRow;
              const int64_t pos = start0 + seg * D + ph + static_cast<int64_t>(pc) * q.piece_rows * S;
              load_box(dst, chunk * (q.cc / kXRowCh) + cs, pos);
            }
      return;
    }
    for (int cg = 0; cg < q.cc / 8; ++cg)
      for (int seg = 0; seg < q.nseg; ++seg)
        for (int ph = 0; ph < q.nph; ++ph)
          for (int pc = 0; pc < q.npieces; ++pc) {
            const uint32_t dst = x_dst + (cg * q.cgs + (seg * q.nph + ph) * q.wq + pc * q.piece_rows) * 16;
            const int64_t pos = start0 + seg * D + ph + static_cast<int64_t>(pc) * q.piece_rows * S;
            load_box(dst, cg_base + cg, pos);
          }
  };

  // TX: stage sidx's weights into its slot (the slot's "full" barrier expects only their bytes; the transposers'
  // arrivals complete it), then, once the transposers have released raw slot sidx % nraw, its raw window: one box of
  // boxl positions x cc channels per (segment, piece), zeros outside x (padding, tails, channels past Cin/groups).
  const uint32_t raw_bar = base + q.bar_off + 16 * kMaxSlots + 16 + 8 * kMaxSteps;
  auto issue_raw = [&](int64_t sidx) {
    const Stage st = stage_of(q, p.groups, sidx, base, bar0);
    issue_weights(q, st, wpack, 0u);
    const int r = static_cast<int>(sidx % q.nraw);
    if (sidx >= q.nraw) mbar_wait(raw_bar + 8u * (kMaxRaw + r), static_cast<uint32_t>((sidx / q.nraw - 1) & 1));
    const uint32_t rb = raw_bar + 8u * r, rdst = base + q.raw_off + r * q.raw_bytes;
    mbar_arrive_expect_tx(rb, static_cast<uint32_t>(q.raw_tx));
    const int64_t start0 = st.jt * q.bn * S - P;
    for (int seg = 0; seg < q.nseg; ++seg) {
      const int64_t at = (start0 + seg * D) & ~int64_t{7};  // rounded down to a 16-byte unit (floor, also below 0)
      for (int pc = 0; pc < q.rpc; ++pc)
        load_4d(rdst + (seg * q.rpc + pc) * q.cc * q.boxl * 2, &xmap, static_cast<int>(at + pc * q.boxl),
                st.chunk * q.cc, static_cast<int>(st.g), static_cast<int>(st.b), rb);
    }
  };

  // CONVKIT_TMA_X_CPASYNC: stage sidx's x window by every thread. Unit u = (row, channel group), channel group
  // fastest; row = (segment * nph + phase) * wq + r holds position start + segment * D + phase + r * S.
  const unsigned short* const xr = static_cast<const unsigned short*>(p.x);
  auto issue_x = [&](int64_t sidx) {
    const Stage st = stage_of(q, p.groups, sidx, base, bar0);
    const int64_t b = st.b, g = st.g;
    const int chunk = st.chunk;
    const uint32_t x_dst = st.x_dst;
    const int64_t start0 = st.jt * q.bn * S - P;
    const int cgn = q.cc / 8;
    const int rows = q.nseg * q.nph * q.wq;
    const int64_t ci0 = g * q.cin_g + static_cast<int64_t>(chunk) * q.cc;
    const unsigned short* const xb = xr + b * p.x_stride_b + ci0;
#pragma unroll 1
    for (int u = tid; u < rows * cgn; u += kThreads) {
      const int cg = u % cgn, row = u / cgn;
      const int sp = row / q.wq, r = row - sp * q.wq;  // sp = segment * nph + phase
      const int seg = sp / q.nph, ph = sp - seg * q.nph;
      const int64_t pos = start0 + seg * D + ph + static_cast<int64_t>(r) * S;
      const bool ok = pos >= 0 && pos < p.in_length && chunk * q.cc + cg * 8 < q.cin_g;
      const uint32_t dst = x_dst + (cg * q.cgs + row) * 16;
      const void* src = ok ? static_cast<const void*>(xb + pos * p.x_stride_l + cg * 8) : static_cast<const void*>(xr);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory");
    }
    cp_async_mbar_arrive_noinc(st.bar);
  };

  // The step table (session 24: ~10 % faster than recomputing a tap row, with a division, and both descriptors per
  // step): per k16 step st of a stage, .x = A's offset (2 st row groups of bm * 16 bytes), .y = B's (the tap's
  // window row and the channel offset inside the row, after the stage's A), both in 16-byte units from the slot.
  uint2* const step_tab = reinterpret_cast<uint2*>(smem_raw + (base - smem_u32(smem_raw)) + q.bar_off + 16 * kMaxSlots + 16);
  const int steps = q.k * q.cc / 16;  // k16 steps per stage
  const int cps_shift = q.cc == 32 ? 1 : 0;  // log2(k16 steps per tap)
  if (tid < steps) {
    const int st = tid, k = st >> cps_shift, cg0 = (st & ((1 << cps_shift) - 1)) * 2;
    const uint32_t b_off = kXSwizzled ? ((cg0 * 8 / kXRowCh) * q.cgs + tap_row(q, k)) * kXRow + (cg0 * 8 % kXRowCh) * 2
                                      : (cg0 * q.cgs + tap_row(q, k)) * 16;
    step_tab[st] = make_uint2((2 * st) * q.bm, (q.a_bytes + b_off) >> 4);
  }
  if (tid == 0) {
    prefetch_map(&xmap);
    // "full" arrivals per phase: the issuing thread's expect_tx, plus every thread's cp.async arrival in the cp.async
    // form, or every transposer thread's in the transposing form; the "empty" barriers serve the producer-warp form
    // only (unused without it)
    if (CONVKIT_TMA_PINGPONG) {
      mbar_init(order0, 1);
      mbar_init(order0 + 8, 1);
    }
    if (TX)  // raw "full": the producer's expect_tx; raw "empty": every transposer thread
      for (int r = 0; r < q.nraw; ++r) {
        mbar_init(raw_bar + 8u * r, 1);
        mbar_init(raw_bar + 8u * (kMaxRaw + r), kTxThreads);
      }
    // "empty": one arrival per consumer warpgroup (ping-pong: per stage's warpgroup)
    init_ring(bar0, q.ns, TX ? 1 + kTxThreads : CONVKIT_TMA_X_CPASYNC ? 1 + kThreads : 1, kMaxSlots,
              CONVKIT_TMA_PINGPONG ? 1 : 2);
  }
  __syncthreads();
  if (TX) {
    static_assert(!TX || (CONVKIT_TMA_PRODUCER_WARP && !CONVKIT_TMA_PINGPONG && !CONVKIT_TMA_X_CPASYNC && XR > 16),
                  "the transposing form: producer warp, shared tiles, swizzled rows");
    if (CONVKIT_TMA_TX_WG4 && warp >= 8) wg::set_max_regs<false, kTxOtherRegs>();
    if (warp == 8) {
      if (lane == 0) produce_stages(total, q.ns, bar0, kMaxSlots, issue_raw);
      return;
    }
    if (warp > 8) {
      transpose_stages<XR>(q, total, base, bar0, raw_bar, warp - 9, lane);
      return;
    }
    if (CONVKIT_TMA_TX_WG4) wg::set_max_regs<true, kTxConsumerRegs>();
  } else if (CONVKIT_TMA_PRODUCER_WARP) {
    if (warp == 8) {  // the producer warp: lane 0 issues every stage once its slot is empty
      if (lane == 0) produce_stages(kExpNoFeed ? (total < q.ns ? total : q.ns) : total, q.ns, bar0, kMaxSlots, issue);
      return;
    }
  } else if (tid == 0) {
    for (int64_t s = 0; s < q.ns && s < total; ++s) issue(s);
  }
  if (CONVKIT_TMA_X_CPASYNC)
    for (int64_t s = 0; s < q.ns && s < total; ++s) issue_x(s);

  float acc[MW][NB][64];
  const uint32_t a_lbo = q.bm * 16, x_lbo = q.cgs * 16;
  // The descriptors' constant parts: A no-swizzle K-major, LBO a_lbo, SBO 128; B 32B / 64B swizzled K-major (LBO 16,
  // SBO 8 rows, layout type 3 / 2 in bits 62-63, base offset 0: a tap's operand may start at any row) or no-swizzle
  // (LBO x_lbo, SBO 128).
  constexpr uint32_t kSwizzleBits = kXRow == 64 ? 2u << 30 : 3u << 30;
  const uint32_t a_lo = (a_lbo >> 4) << 16, a_hi = 128 >> 4;
  const uint32_t b_lo = kXSwizzled ? 1u << 16 : (x_lbo >> 4) << 16;
  const uint32_t b_hi = kXSwizzled ? ((8 * kXRow) >> 4) | kSwizzleBits : 128 >> 4;
  // this warpgroup's first A row group and one 64-row block (16-byte units: 64 rows x 16 bytes)
  const uint32_t a_mb = 64, a_wg = wrow * a_mb;

  int64_t s = 0;  // this block's stage index (over all its tiles)
  for (int64_t ti = 0; ti < my_tiles; ++ti) {
    if (CONVKIT_TMA_PINGPONG) {
      if ((ti & 1) != wgi) {  // the other warpgroup's tile
        s += nch;
        continue;
      }
      // this warpgroup's turn: the other one has issued its previous tile's calls (and so waited on every stage
      // before this tile's: no "full" barrier here can be two phases behind the parity waited for)
      if (ti >= 1) mbar_wait(order0 + 8u * wgi, static_cast<uint32_t>(((ti - 1) >> 1) & 1));
    }
#pragma unroll
    for (int mb = 0; mb < MW; ++mb)
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[mb][nb][i] = 0.f;
    for (int c = 0; c < nch; ++c, ++s) {
      const int slot = static_cast<int>(s % q.ns);
      if (!kExpNoFeed || s < q.ns) mbar_wait(bar0 + 8u * slot, static_cast<uint32_t>((s / q.ns) & 1));
      if (CONVKIT_TMA_X_CPASYNC) wg::fence_proxy_async();  // other threads' cp.async writes, read by wgmma
#pragma unroll
      for (int mb = 0; mb < MW; ++mb)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) wg::fence_acc(acc[mb][nb]);
      wg::fence();
      if (!kExpNoWgmma) {
        const uint32_t slot16 = (base + slot * q.stage_bytes) >> 4;
#pragma unroll 2
        for (int st = 0; st < steps; ++st) {
          const uint2 t = step_tab[st];
          const uint32_t b16 = slot16 + t.y;
#pragma unroll
          for (int mb = 0; mb < MW; ++mb) {
            const uint64_t da = (static_cast<uint64_t>(a_hi) << 32) | (a_lo | (slot16 + t.x + a_wg + mb * a_mb));
            if (CONVKIT_TMA_N256 && kXSwizzled && NB == 2) {  // one call for both 128-column halves
              mma_m64n256k16<T>(&acc[mb][0][0], da, (static_cast<uint64_t>(b_hi) << 32) | (b_lo | b16));
              continue;
            }
#pragma unroll
            for (int nb = 0; nb < NB; ++nb) {
              const uint32_t nb16 = kXSwizzled ? nb * 128 * kXRow / 16 : nb * 128;
              wg::mma_m64n128k16<T>(acc[mb][nb], da, (static_cast<uint64_t>(b_hi) << 32) | (b_lo | (b16 + nb16)));
            }
          }
        }
      }
      wg::commit();
      wg::wait<1>();  // this warpgroup's calls of stage s - 1 are done
      if (CONVKIT_TMA_PINGPONG) {  // this warpgroup's previous stage of the tile
        if (c >= 1 && (tid & 127) == 0) mbar_arrive(bar0 + 8u * (kMaxSlots + static_cast<int>((s - 1) % q.ns)));
      } else if (CONVKIT_TMA_PRODUCER_WARP) {
        release_previous_slot(bar0, kMaxSlots, s, q.ns, tid);
      } else {
        __syncthreads();  // ... and the other warpgroup's: slot (s - 1) % NS is free
        if (tid == 0 && s >= 1 && s - 1 + q.ns < total) issue(s - 1 + q.ns);
      }
      if (CONVKIT_TMA_X_CPASYNC && s >= 1 && s - 1 + q.ns < total) issue_x(s - 1 + q.ns);
    }

    // Epilogue of the tile (the ring meanwhile holds the next tile's first stages).
    {
      if (CONVKIT_TMA_PINGPONG && (tid & 127) == 0) mbar_arrive(order0 + 8u * (1 - wgi));  // the other's turn
      wg::wait<0>();
      if (CONVKIT_TMA_PINGPONG && (tid & 127) == 0)  // the tile's last stage
        mbar_arrive(bar0 + 8u * (kMaxSlots + static_cast<int>((s - 1) % q.ns)));
#pragma unroll
      for (int mb = 0; mb < MW; ++mb)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) wg::fence_acc(acc[mb][nb]);
      if (kExpNoEpilogue) continue;
      int64_t b, g, jt, mt;
      tile_of(ti, b, g, jt, mt);
      const int64_t j0 = jt * q.bn, co0 = mt * q.bm;
      if (CONVKIT_TMA_DIRECT_EPILOGUE) {  // y straight from the accumulators
        unsigned short* yr = static_cast<unsigned short*>(p.y);
        for_each_output_pair<T, MW, NB>(p, acc, wrow, warp, lane, g, q.cout_g, co0,
                                        [&](int, int64_t co, int col, float v0, float v1) {
          if (co >= q.cout_g) return;
          v0 = activate(p.activation, v0);
          v1 = activate(p.activation, v1);
          const int64_t j = j0 + col;
          unsigned short* dst = yr + b * p.y_stride_b + (g * q.cout_g + co) * p.y_stride_c + j * p.y_stride_l;
          if (j + 1 < p.out_length && p.y_stride_l == 1 && (reinterpret_cast<uintptr_t>(dst) & 3) == 0) {
            *reinterpret_cast<uint32_t*>(dst) = bits16<T>(v0) | (bits16<T>(v1) << 16);
          } else {
            if (j < p.out_length) dst[0] = static_cast<unsigned short>(bits16<T>(v0));
            if (j + 1 < p.out_length) dst[p.y_stride_l] = static_cast<unsigned short>(bits16<T>(v1));
          }
        });
        continue;  // next tile
      }
      if (CONVKIT_TMA_BANDED_EPILOGUE) {
        // One 64 x 128 fragment at a time per warpgroup, through the warpgroup's own band [64][kBandPitch] (the
        // ring already holds the next tile's stages): bias, rounded to T, into the band, then coalesced stores
        // with the activation (wg::store_c_tile); named barrier 2 + wgi among the warpgroup's 128 threads around each.
        const uint32_t band = base + q.c_off + wgi * kBandBytes;
#pragma unroll
        for (int mb = 0; mb < MW; ++mb)
#pragma unroll
          for (int nb = 0; nb < NB; ++nb) {
            const int row0 = (wrow + mb) * 64;
            for_each_output_pair<T, MW, NB>(
                p, acc, wrow, warp, lane, g, q.cout_g, co0,
                [&](int row, int64_t, int col, float v0, float v1) {
                  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(band + ((row - row0) * kBandPitch + col - nb * 128) * 2),
                               "r"(bits16<T>(v0) | (bits16<T>(v1) << 16)));
                },
                mb, nb);
            warpgroup_sync(wgi);
            wg::store_c_tile<T>(p, q.cout_g, band, kBandPitch, 64, 128, tid & 127, 128, b, g, co0 + row0, j0 + nb * 128,
                                p.activation);
            warpgroup_sync(wgi);  // the band's next write
          }
        continue;  // next tile
      }
      // bias, rounded to T, into the C tile [BM][c_pitch] (its own shared memory: the ring already holds the next
      // tile's stages), then coalesced stores with the activation (wg::store_c_tile).
      const uint32_t c_base = base + q.c_off;
      for_each_output_pair<T, MW, NB>(p, acc, wrow, warp, lane, g, q.cout_g, co0,
                                      [&](int row, int64_t, int col, float v0, float v1) {
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(c_base + (row * q.c_pitch + col) * 2),
                     "r"(bits16<T>(v0) | (bits16<T>(v1) << 16)));
      });
      consumers_sync();
      wg::store_c_tile<T>(p, q.cout_g, c_base, q.c_pitch, q.bm, q.bn, tid, kThreads, b, g, co0, j0, p.activation);
      // The next write of the C tile is a later tile's epilogue. With a block barrier per step nothing more is
      // needed; without (producer warp), one warpgroup may run a whole short tile ahead of the other.
      if (CONVKIT_TMA_PRODUCER_WARP) consumers_sync();
    }
  }
#endif
}

// x of any strides, batches blockIdx.z of a slab, to channels-last memory: out[b][l][c] (C % 8 == 0, out 16-byte
// aligned). One TC-channel x TL-position tile per block of 256 threads through shared memory; every load of a
// thread is issued before its first shared store. Ways to read x's rows (Load):
//   kCopyRows      x_stride_l 1 (rows at any 2-byte address): a warp per row loads the 33 16-byte aligned chunks
//                  that hold its 256 positions (lane 31 two) and shifts them into place with the next lane's chunk
//                  (funnel shifts; the row's offset d in 0..7 elements is warp-uniform, 0 for aligned rows). A chunk
//                  is loaded only if it holds one of the row's elements; its other elements land outside the tile
//                  or past L and are never stored. Such a chunk may reach up to 14 bytes before the tensor's
//                  storage or past its end, never outside the 16-byte block of a byte of the storage: it cannot
//                  fault (allocations are 16-byte granular at least; torch's caching allocator rounds blocks to
//                  512 bytes), but compute-sanitizer memcheck with PYTORCH_NO_CUDA_MEMORY_CACHING=1 reports it
//                  for storage whose size or start is not 16-byte aligned.
//   kCopyRowsExact kCopyRows whose chunks that cross the row's ends are loaded element by element, so nothing
//                  outside the row is read. Not used yet: ci/copy_micro.cu checks and times it against kCopyRows
//                  before it replaces it (written in session 18 after the last GPU call). ci/emulate_copy_rows.py
//                  models both row kinds' index math and where they read.
//   kCopyElements  other strides: 2-byte loads.
// Stores: a warp writes 32 / VW positions x VW 8-channel vectors (16 * VW contiguous bytes per position; launch_copy:
// VW 8 with TC 64 where C % 64 == 0, a whole 128-byte line per position, else VW 4, 64 bytes). Shared row r starts
// at r * (TL + 8 * VW) + ((r >> 3) % VW) * 8 elements: a warp's column reads (32 / VW positions of VW rows 8 apart)
// fall in distinct banks. Session 18's micro-benchmark (ci/copy_micro.cu, H100, VW 4): 2.2-2.3 TB/s for kCopyRows
// on aligned and odd rows alike (74-80 % of cudaMemcpy; a 64 x 256 tile of plain 16-byte loads 2.1-2.2), 1.5-1.65
// TB/s for kCopyElements, against 1.0-1.1 TB/s for session 17's 64 x 64 tiles whose warps stored 16 positions x 32
// bytes.
enum CopyLoad { kCopyRows, kCopyElements, kCopyRowsExact };
// Elements lo .. lo + 7 of row (positions relative to row), zero outside [first, end).
__device__ __forceinline__ uint4 row_part(const unsigned short* row, int64_t lo, int64_t first, int64_t end) {
  unsigned short e[8];
#pragma unroll
  for (int t = 0; t < 8; ++t) e[t] = lo + t >= first && lo + t < end ? row[lo + t] : static_cast<unsigned short>(0);
  return pack8(e);
}
// Elements d..d+7 of the 16 in (a, b) (a first; little-endian halves).
template <int D>
__device__ __forceinline__ uint4 shift_elements(const uint4& a, const uint4& b) {
  const unsigned w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  if constexpr (D % 2 == 0) {
    return make_uint4(w[D / 2], w[D / 2 + 1], w[D / 2 + 2], w[D / 2 + 3]);
  } else {
    constexpr int q = D / 2;
    return make_uint4(__funnelshift_r(w[q], w[q + 1], 16), __funnelshift_r(w[q + 1], w[q + 2], 16),
                      __funnelshift_r(w[q + 2], w[q + 3], 16), __funnelshift_r(w[q + 3], w[q + 4], 16));
  }
}
__device__ __forceinline__ uint4 shift_elements(const uint4& a, const uint4& b, int d) {
  switch (d) {
    case 1: return shift_elements<1>(a, b);
    case 2: return shift_elements<2>(a, b);
    case 3: return shift_elements<3>(a, b);
    case 4: return shift_elements<4>(a, b);
    case 5: return shift_elements<5>(a, b);
    case 6: return shift_elements<6>(a, b);
    case 7: return shift_elements<7>(a, b);
    default: return a;
  }
}
template <int TC, int TL, int Load, int VW = 4>
__global__ void __launch_bounds__(256) x_to_channels_last_kernel(const unsigned short* __restrict__ x, int64_t sb,
                                                                 int64_t sc, int64_t sl, int64_t C, int64_t L,
                                                                 unsigned short* __restrict__ out) {
  constexpr int kVw = VW, kPitch = TL + 8 * kVw, kP = 32 / kVw;
  static_assert(TC % (8 * kVw) == 0 && TL % 64 == 0 && (Load == kCopyElements || (TL == 256 && TC % 8 == 0)), "tile");
  __shared__ __align__(16) unsigned short tile[TC * kPitch];
  const int tid = threadIdx.x;
  const int64_t l0 = static_cast<int64_t>(blockIdx.x) * TL, c0 = static_cast<int64_t>(blockIdx.y) * TC;
  const unsigned short* xb = x + static_cast<int64_t>(blockIdx.z) * sb;
  auto at = [](int r, int l) { return r * kPitch + ((r >> 3) % kVw) * 8 + l; };
  if constexpr (Load == kCopyRows || Load == kCopyRowsExact) {
    constexpr int N = TC / 8;  // rows per warp
    const int warp = tid / 32, lane = tid % 32;
    const int64_t n = L - l0 < TL ? L - l0 : TL;  // positions of the tile inside x
    uint4 val[N], extra[N];
    int dd[N];
#pragma unroll
    for (int it = 0; it < N; ++it) {
      const int64_t c = c0 + it * 8 + warp;
      val[it] = extra[it] = make_uint4(0, 0, 0, 0);
      dd[it] = 0;
      if (c >= C) continue;
      const unsigned short* row = xb + c * sc + l0;  // tile position 0
      const int d = static_cast<int>((reinterpret_cast<uintptr_t>(row) >> 1) & 7);
      const uint4* base = reinterpret_cast<const uint4*>(row - d);  // chunk j: tile positions 8j - d .. 8j - d + 7
      dd[it] = d;
      if constexpr (Load == kCopyRowsExact) {
        const int64_t lo = 8 * lane - d, end = L - l0;  // the row's positions are -l0 .. end - 1
        if (lo < n) val[it] = lo >= -l0 && lo + 8 <= end ? base[lane] : row_part(row, lo, -l0, end);
        if (lane == 31 && d > 0 && 256 - d < n)
          extra[it] = 256 - d + 8 <= end ? base[32] : row_part(row, 256 - d, -l0, end);
      } else {
        if (8 * lane - d < n) val[it] = base[lane];
        if (lane == 31 && d > 0 && 256 - d < n) extra[it] = base[32];
      }
    }
#pragma unroll
    for (int it = 0; it < N; ++it) {
      uint4 next;
      next.x = __shfl_down_sync(0xffffffffu, val[it].x, 1);
      next.y = __shfl_down_sync(0xffffffffu, val[it].y, 1);
      next.z = __shfl_down_sync(0xffffffffu, val[it].z, 1);
      next.w = __shfl_down_sync(0xffffffffu, val[it].w, 1);
      if (lane == 31) next = extra[it];
      *reinterpret_cast<uint4*>(&tile[at(it * 8 + warp, lane * 8)]) = shift_elements(val[it], next, dd[it]);
    }
  } else {
    constexpr int N = TC * TL / 256;
    unsigned short val[N];
#pragma unroll
    for (int it = 0; it < N; ++it) {
      const int i = tid + it * 256;
      const int64_t c = c0 + i / TL, l = l0 + i % TL;
      val[it] = c < C && l < L ? xb[c * sc + l * sl] : static_cast<unsigned short>(0);
    }
#pragma unroll
    for (int it = 0; it < N; ++it) {
      const int i = tid + it * 256;
      tile[at(i / TL, i % TL)] = val[it];
    }
  }
  __syncthreads();
  unsigned short* ob = out + static_cast<int64_t>(blockIdx.z) * L * C;
#pragma unroll
  for (int it = 0; it < TC * TL / 8 / 256; ++it) {
    const int i = tid + it * 256, w = i / 32, lane = i % 32;  // a warp: kP positions x kVw vectors
    const int band = w / (TL / kP), pg = w % (TL / kP);
    const int v = band * kVw + lane % kVw, li = pg * kP + lane / kVw;
    const int64_t l = l0 + li, c = c0 + v * 8;
    if (l >= L || c >= C) continue;
    unsigned short e[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) e[j] = tile[at(v * 8 + j, li)];
    *reinterpret_cast<uint4*>(ob + l * C + c) = pack8(e);
  }
}
// The launcher's tiles per load kind (ci/copy_micro.cu).
template <int Load>
struct CopyTile {
  static constexpr int kC = 32, kL = Load == kCopyElements ? 128 : 256;
};
template <int Load, int TC = CopyTile<Load>::kC, int TL = CopyTile<Load>::kL, int VW = 4>
void launch_copy(const unsigned short* x, int64_t n, int64_t sb, int64_t sc, int64_t sl, int64_t C, int64_t L,
                 unsigned short* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div(L, TL)), static_cast<unsigned>(ceil_div(C, TC)),
                  static_cast<unsigned>(n));
  x_to_channels_last_kernel<TC, TL, Load, VW><<<grid, 256, 0, stream>>>(x, sb, sc, sl, C, L, out);
}
// Rows with C % 64 == 0 take 64-channel tiles whose warps store 4 positions x 128 bytes (VW 8: a whole line per
// position). ci/copy_micro.cu, H100 (session 35): w2v 0.764 -> 0.608 ms (72 -> 91 % of cudaMemcpy), kb76 slab
// 1.012 -> 0.774, kb67 0.474 -> 0.384, tcn 0.120 -> 0.105; the element loads gain nothing from it.
// CONVKIT_COPY_VW8=0 keeps the 32-channel tiles (to time both).
void launch_copy(const unsigned short* x, int64_t n, int64_t sb, int64_t sc, int64_t sl, int64_t C, int64_t L,
                 unsigned short* out, cudaStream_t stream) {
  static const bool vw8_on = !env_equals("CONVKIT_COPY_VW8", "0");
  if (sl == 1 && C % 64 == 0 && vw8_on)
    launch_copy<kCopyRows, 64, CopyTile<kCopyRows>::kL, 8>(x, n, sb, sc, sl, C, L, out, stream);
  else if (sl == 1)
    launch_copy<kCopyRows>(x, n, sb, sc, sl, C, L, out, stream);
  else
    launch_copy<kCopyElements>(x, n, sb, sc, sl, C, L, out, stream);
}

// ---- host -----------------------------------------------------------------------------------------------
// CONVKIT_TMA_SHAPE="mw,nb,cc" forces a tile shape (experiments); otherwise the table below.
bool shape_override(int& mw, int& nb, int& cc) {
  const char* v = std::getenv("CONVKIT_TMA_SHAPE");
  if (v == nullptr || *v == '\0') return false;
  int a = 0, b = 0, c = 0;
  char* end = nullptr;
  a = static_cast<int>(std::strtol(v, &end, 10));
  if (*end != ',') return false;
  b = static_cast<int>(std::strtol(end + 1, &end, 10));
  if (*end != ',') return false;
  c = static_cast<int>(std::strtol(end + 1, &end, 10));
  if ((a != 1 && a != 2) || (b != 1 && b != 2) || a * b > 2 || (c != 16 && c != 32)) return false;
  mw = a;
  nb = b;
  cc = c;
  return true;
}

// The transposers' stmatrix of 8 consecutive window positions writes 8 image rows, spread over the S phases. With wq
// a multiple of 8 rows, rows of different phases fall in the same banks (kb76, S 3: 3 ways); a few rows more per
// phase (the delta in 0..7 with the fewest such conflicts, e.g. wq = 8n + 3 at S 3) spreads them. The rows of the
// window (wq >= wq_min) for stride s and xr-byte rows. CONVKIT_TMA_TX_WQ_SKEW=0: multiples of the swizzle pattern.
bool tx_wq_skew() {
  static const bool on = !env_equals("CONVKIT_TMA_TX_WQ_SKEW", "0");
  return on;
}
int64_t tx_skewed_rows(int64_t wq_min, int s, int xr) {
  const int64_t base = ceil_div(wq_min, 8) * 8;
  const int kch = xr / 16;
  int64_t best = base;
  int best_cost = 1 << 30;
  for (int delta = 0; delta < 8; ++delta) {
    const int64_t wq = base + delta;
    int cost = 0;  // wavefronts of the 8-row stores of the first 8 * s positions' blocks, every chunk
    for (int blk = 0; blk < 2 * s; ++blk)
      for (int c = 0; c < kch; ++c) {
        int per_unit[8] = {0, 0, 0, 0, 0, 0, 0, 0}, worst = 0;
        for (int i = 0; i < 8; ++i) {
          const int64_t t = 8 * blk + i, row = (t % s) * wq + t / s, a = row * xr;
          const int unit = static_cast<int>(((a + 16 * (c ^ ((a >> 7) & (kch - 1)))) / 16) % 8);
          worst = std::max(worst, ++per_unit[unit]);
        }
        cost += worst;
      }
    if (cost < best_cost) {
      best_cost = cost;
      best = wq;
    }
  }
  return best;
}

// The x window for q.bn outputs: fills nseg, nph, wq, piece_rows, npieces, cgs (TX: also the raw boxes; pad: P).
void plan_window(TmaPlan& q, int64_t pad) {
  const int64_t wq_contig = static_cast<int64_t>(q.k - 1) * q.d / q.s + q.bn;  // rows per phase, one window
  const int64_t rows_contig = q.s * wq_contig;
  const int64_t rows_seg = static_cast<int64_t>(q.k) * q.bn;  // one window of phase 0 per tap
  int64_t wq_min;
  if (q.k > 1 && rows_seg < rows_contig && !(q.tx && q.s > 1)) {  // (TX: per-tap segments at stride 1 only)
    q.nseg = q.k;
    q.nph = 1;
    wq_min = q.bn;
  } else {
    q.nseg = 1;
    q.nph = q.s;
    wq_min = wq_contig;
  }
  // box <= 256 positions; rows a multiple of 8 (128-byte destinations), of 1024 / q.xr for the swizzled rows
  // (1024-byte destinations: whole swizzle patterns); TX (no boxes for the image): skewed, see below
#ifdef CONVKIT_TMA_ROW_ALIGN  // experiment: 8 for the 32-byte rows too (256-byte destinations: one pattern)
  const int ra = CONVKIT_TMA_ROW_ALIGN;
#else
  const int ra = q.xr > 16 ? 1024 / q.xr : 8;
#endif
  const int max_rows = (256 / q.s) & ~(ra - 1);
  q.npieces = static_cast<int>(ceil_div(wq_min, max_rows));
  q.piece_rows = static_cast<int>(ceil_div(ceil_div(wq_min, q.npieces), ra) * ra);
  if (q.tx) {  // the image is written by the transposers: no box limit on its rows
    q.npieces = 1;
    q.piece_rows = static_cast<int>(ceil_div(wq_min, ra) * ra);
    if (q.nph > 1 && tx_wq_skew()) q.piece_rows = static_cast<int>(tx_skewed_rows(wq_min, q.s, q.xr));
  }
  q.wq = q.npieces * q.piece_rows;
  q.cgs = q.nseg * q.nph * q.wq;
  if (q.tx) {  // raw rows: seg_span positions in rpc boxes of boxl, boxl 8 x an odd number (conflict-free ldmatrix)
    q.seg_span = q.nseg > 1 ? q.wq : q.s * q.wq;
    q.sh0 = static_cast<int>(((-pad) % 8 + 8) % 8);
    q.dsh = static_cast<int>(q.d % 8);
    int lead = 0;
    for (int seg = 0; seg < q.nseg; ++seg) lead = std::max(lead, (q.sh0 + seg * q.dsh) % 8);
    q.span_max = q.seg_span + lead;
    q.rpc = static_cast<int>(ceil_div(q.span_max, kTxMaxBox));
    q.boxl = static_cast<int>(ceil_div(ceil_div(q.span_max, q.rpc), 8) * 8);
    if ((q.boxl / 8) % 2 == 0) q.boxl += 8;
  }
}

// x that is not channels-last (x_stride_c != 1: (B, C, L) memory) is first copied into channels-last memory
// in the workspace by x_to_channels_last_kernel, a slab of batches (at most kCopySlabBytes) at a time, where that
// pays: the copy moves 2 x-sizes, while what the TMA kernel saves over the register-staged wgmma kernel grows
// with the work per x element, Cout/groups * K / stride. Session 18, H100, bf16 forward, ms (copy + TMA kernel
// against the wgmma / mma.sync kernel on (B, C, L) x): w2v_k3s2 (768) 3.85 against 4.14, tcn (768) 0.63 / 0.72,
// wavenet (512) 0.60 / 0.63 are copied; kb67 (384) 2.03 / 1.89 and kb76 (128) 7.95 / 5.88 were not. Session 35,
// H100, bf16 forward in CUDA graphs, with the 64-channel copy tiles (launch_copy): kb67 1.64 copied against 1.89
// not, kb76 6.81 against 5.80, so the bar went from 512 down to 384.
// CONVKIT_DENSE_TMA_COPY=0: never copy; =1: copy for every shape the kernel runs (measurements). The same rule
// decides where the transposing form replaces the copy (transpose_x): =0 turns that off too, =1 extends it.
constexpr int64_t kCopyMinWorkPerElement = 384;

bool channels_last_x(const Conv1dParams& p) { return p.x_stride_c == 1; }

bool copy_pays(const Conv1dParams& p) {
  static const int forced = env_forced("CONVKIT_DENSE_TMA_COPY");
  if (forced >= 0) return forced == 1;
  return (p.out_channels / p.groups) * p.kernel_size >= kCopyMinWorkPerElement * p.stride;
}

// Batches per copy slab.
int64_t slab_batches(const Conv1dParams& p) {
  return copy_slab_batches(p.batch, p.in_length * p.in_channels * 2, 65535);  // grid.z of launch_copy
}

// p with x replaced by batch batches of channels-last x at xbuf.
Conv1dParams channels_last_view(const Conv1dParams& p, void* xbuf, int64_t batch) {
  Conv1dParams v = p;
  v.batch = batch;
  v.x = xbuf;
  v.x_stride_c = 1;
  v.x_stride_l = p.in_channels;
  v.x_stride_b = p.in_length * p.in_channels;
  return v;
}

// The first tile shape that fits (three or more ring slots) for q.xr and cc channels per stage, of the two-block
// shapes (wide: (mw, nb) first, then BM 128 x BN 256, 256 x 128; w2v's 32-channel stages of 256 x 128 do not fit
// three times) or the 128 x 128 one (!wide: one wgmma per k16 step and warpgroup, about 1.6x slower, session 15);
// only (mw, nb) when forced. Fills the rest of q.
bool try_shapes(TmaPlan& q, int mw, int nb, int cc, bool forced, bool wide, int limit, const Conv1dParams& p) {
  const int tries[4][2] = {{mw, nb}, {1, 2}, {mw, 1}, {1, 1}};
  for (const auto& tr : tries) {
    if (forced ? (tr[0] != mw || tr[1] != nb) : wide != (tr[0] * tr[1] == 2)) continue;
    q.mw = tr[0];
    q.nb = tr[1];
    q.cc = cc;
    q.bm = (CONVKIT_TMA_PINGPONG ? 64 : 128) * q.mw;
    q.bn = 128 * q.nb;
    plan_window(q, p.pad_left);
    q.a_bytes = q.k * q.cc * q.bm * 2;
    q.x_bytes = (q.cc / 8) * q.cgs * 16;
    q.stage_bytes = static_cast<int>(wg::round_up(q.a_bytes + q.x_bytes, q.xr > 16 ? 1024 : 128));
    q.c_pitch = q.bn + 8;
    const int c_bytes = CONVKIT_TMA_DIRECT_EPILOGUE   ? 0
                        : CONVKIT_TMA_BANDED_EPILOGUE ? 2 * kBandBytes
                                                      : static_cast<int>(wg::round_up(static_cast<int64_t>(q.bm) * q.c_pitch * 2, 128));
    if (q.a_bytes + q.x_bytes >= (1 << 20)) continue;                 // mbarrier transaction count
    if ((q.cgs + 16) * 16 > (1 << 18)) continue;                      // descriptor fields (14 bits of 16 B)
    if (q.tx && tx_items(q, q.xr) > kTxWarps * kTxMaxItems) continue;
    // TX: nraw raw slots, the transposers' scratch rows, the raw slots' barriers
    q.nraw = q.tx ? kMaxRaw : 0;
    q.raw_tx = q.tx ? q.nseg * q.rpc * q.cc * q.boxl * 2 : 0;
    q.raw_bytes = static_cast<int>(wg::round_up(q.raw_tx, 128));
    const int tx_bytes = q.tx ? q.nraw * q.raw_bytes + kTxDummyBytes + 16 * kMaxRaw : 0;
    // alignment slack, ring and order barriers, step table, C tile
    const int avail = limit - 1024 - 16 * kMaxSlots - 16 - 8 * kMaxSteps - c_bytes - tx_bytes;
    q.ns = std::min(kMaxSlots, std::max(0, avail) / q.stage_bytes);
    if (q.ns > 6) q.ns = 6;
    if (q.ns < 3) continue;
    q.c_off = q.ns * q.stage_bytes;
    q.raw_off = q.c_off + c_bytes;  // (128-byte aligned: TMA destinations)
    q.dummy_off = q.raw_off + q.nraw * q.raw_bytes;
    q.bar_off = q.dummy_off + (q.tx ? kTxDummyBytes : 0);
    // barriers, the step table (TX: the raw slots' barriers after it)
    q.smem_bytes = q.bar_off + 16 * kMaxSlots + 16 + 8 * kMaxSteps + (q.tx ? 16 * kMaxRaw : 0) + 1024;
    q.chunks = ceil_div(q.cin_g, q.cc);
    q.m_tiles = ceil_div(q.cout_g, q.bm);
    q.j_tiles = ceil_div(p.out_length, q.bn);
    q.num_tiles = p.batch * q.j_tiles * p.groups * q.m_tiles;
    return true;
  }
  return false;
}

// The transposing form's tensor map: x in (B, C, L) memory as a 4-D map (position, channel in the group, group,
// batch): positions contiguous, channel and batch strides whole 16-byte units in increasing order, a 16-byte aligned
// start.
bool tx_map_ok(const Conv1dParams& p) {
  return kTxForm && p.x_stride_l == 1 && p.x_stride_c % 8 == 0 && p.x_stride_b % 8 == 0 &&
         p.x_stride_c >= p.in_length && p.x_stride_b >= p.in_channels * p.x_stride_c &&
         p.x_stride_b < (int64_t{1} << 38) && (reinterpret_cast<uintptr_t>(p.x) & 15) == 0;
}

// Whether a (B, C, L) x takes the transposing form (x read as it lies, transposed in shared memory) instead of the
// copy: by default where the copy would run (copy_pays) and the map can describe x. CONVKIT_DENSE_TMA_TX=0: never
// (the copy); =1: every x whose map it can make, also shapes the copy does not pay on (read once per process).
bool transpose_x(const Conv1dParams& p) {
  static const int forced = env_forced("CONVKIT_DENSE_TMA_TX");
  if (forced == 0 || !tx_map_ok(p)) return false;
  return forced == 1 || copy_pays(p);
}

bool plan_shapes(const Conv1dParams& p, TmaPlan& q, bool tx);

bool make_plan(const Conv1dParams& p, TmaPlan& q) {
  q.tx = 0;
#ifndef CONVKIT_SM90A
  (void)p;
  return false;
#else
  if (!sm90a_16bit_whole_groups(p) || p.w_dtype != p.dtype) return false;
  if (p.in_length < 1 || p.out_length < 1 || p.batch < 1) return false;  // empty x: no tensor map, no slabs
  const int64_t cin_g = p.in_channels / p.groups;
  if (cin_g < 16 || cin_g % (kXRowMin / 2) != 0) return false;
  if (channels_last_x(p)) return plan_shapes(p, q, false);
  // (B, C, L) x: read as it lies where wanted and a tile shape fits beside the raw slots, else planned as the
  // channels-last copy the launcher makes (any 16-byte aligned address)
  if (transpose_x(p) && plan_shapes(p, q, true)) return true;
  if (!copy_pays(p) || p.in_length * p.in_channels * 2 > kCopySlabBytes || p.in_channels > 65535 * 32) return false;
  return make_plan(channels_last_view(p, reinterpret_cast<void*>(uintptr_t{256}), p.batch), q);
#endif
}

// The rest of the plan for x channels-last (tx false) or read as it lies (tx).
bool plan_shapes(const Conv1dParams& p, TmaPlan& q, bool tx) {
#ifndef CONVKIT_SM90A
  (void)p;
  (void)q;
  (void)tx;
  return false;
#else
  const int64_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
  if (p.kernel_size < 1 || p.kernel_size > 16 || p.stride < 1 || p.stride > 8) return false;
  if (p.dilation < 1 || p.dilation > (1 << 16) || p.pad_left < 0) return false;
  // The tensor map: channels-last x, 16-byte aligned, strides in increasing order, coordinates in 32 bits (TX: the
  // (B, C, L) map above).
  if (!tx && !channels_last_map_ok(p.x, p.x_stride_b, p.x_stride_l, p.x_stride_c, p.in_channels, p.in_length))
    return false;
  q.tx = tx ? 1 : 0;
  if (p.in_length + p.pad_left + 256 * 8 >= (int64_t{1} << 31) || p.batch >= (int64_t{1} << 31)) return false;
  if (p.out_length + 256 >= (int64_t{1} << 31) / p.stride) return false;
  if (encode_tiled() == nullptr) return false;

  q.k = static_cast<int>(p.kernel_size);
  q.s = static_cast<int>(p.stride);
  q.d = static_cast<int>(p.dilation);
  q.cin_g = cin_g;
  q.cout_g = cout_g;
  const int limit = wg::smem_optin_bytes();
  // x rows of 64 bytes with 32-channel stages where the channels come in 32s and such stages fit three times
  // (not K 8 at BM 128: 82 KB a stage, nor kb76's three stride phases at BN 256), else 32-byte rows (16-byte rows:
  // experiment) with 16-channel stages.
  // (ping-pong: a warpgroup's tile of 128 rows x 128 positions wherever Cout/groups > 64)
  const int64_t two_blocks = CONVKIT_TMA_PINGPONG ? 64 : 128;
  int mw = cout_g > two_blocks ? 2 : 1, nb = cout_g > two_blocks ? 1 : 2, cc = 0;
  const bool forced = shape_override(mw, nb, cc);
  const bool rows64 = kXRowMax == 64 && cin_g % 32 == 0;
  struct Config { int xr, cc; } configs[2];
  int n = 0;
  if (forced) {
    configs[n++] = {cc == 32 && rows64 ? 64 : kXRowMin, cc};
  } else {
    if (rows64) configs[n++] = {64, 32};
    configs[n++] = {kXRowMin, 16};
  }
  for (const bool wide : {true, false})  // the two-block shapes of either configuration before 128 x 128
    for (int i = 0; i < n; ++i) {
      q.xr = configs[i].xr;
      if (try_shapes(q, mw, nb, configs[i].cc, forced, wide, limit, p)) return true;
    }
  return false;
#endif
}

bool make_map(const Conv1dParams& p, const TmaPlan& q, CUtensorMap& map) {
  if (q.tx) {  // (position, channel in the group, group, batch); box boxl x cc x 1 x 1, no swizzle
    const cuuint64_t dims[4] = {static_cast<cuuint64_t>(p.in_length), static_cast<cuuint64_t>(q.cin_g),
                                static_cast<cuuint64_t>(p.groups), static_cast<cuuint64_t>(p.batch)};
    const cuuint64_t strides[3] = {static_cast<cuuint64_t>(p.x_stride_c * 2),
                                   static_cast<cuuint64_t>(q.cin_g * p.x_stride_c * 2),
                                   static_cast<cuuint64_t>(p.x_stride_b * 2)};
    const cuuint32_t box[4] = {static_cast<cuuint32_t>(q.boxl), static_cast<cuuint32_t>(q.cc), 1, 1};
    const cuuint32_t estr[4] = {1, 1, 1, 1};
    return encode_tiled()(&map, p.dtype == DType::kFloat16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                           : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                          4, const_cast<void*>(p.x), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                          CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
  }
  return make_x_map(map, p.dtype == DType::kFloat16, p.x, q.xr, q.cin_g, p.groups, p.in_length, p.batch, p.x_stride_l,
                    p.x_stride_b, q.piece_rows * q.s, q.s);
}

template <typename T, int MW, int NB, int XR, bool TX>
cudaError_t launch_form(const CUtensorMap& map, const Conv1dParams& p, const TmaPlan& q, const void* wpack,
                           cudaStream_t stream) {
  auto kernel = conv1d_fwd_dense_tma_kernel<T, MW, NB, XR, TX>;
  cudaError_t err = allow_max_dynamic_smem(kernel);  // (q.smem_bytes <= the opt-in limit: try_shapes)
  if (err != cudaSuccess) return err;
  const unsigned grid = grid_for(q.num_tiles, p.num_sms, 1);  // persistent: one block per SM
  kernel<<<grid, TX ? kTxBlockThreads : kBlockThreads, q.smem_bytes, stream>>>(map, p, q,
                                                                              static_cast<const unsigned short*>(wpack));
  return cudaGetLastError();
}
template <typename T, int MW, int NB, int XR>
cudaError_t launch_variant(const CUtensorMap& map, const Conv1dParams& p, const TmaPlan& q, const void* wpack,
                           cudaStream_t stream) {
  if (kTxForm && q.tx) return launch_form<T, MW, NB, XR, kTxForm>(map, p, q, wpack, stream);
  return launch_form<T, MW, NB, XR, false>(map, p, q, wpack, stream);
}

template <typename T, int XR>
cudaError_t launch_shaped(const CUtensorMap& map, const Conv1dParams& p, const TmaPlan& q, const void* wpack,
                          cudaStream_t stream) {
  if (q.mw == 2) return launch_variant<T, 2, 1, XR>(map, p, q, wpack, stream);
  if (q.nb == 2) return launch_variant<T, 1, 2, XR>(map, p, q, wpack, stream);
  return launch_variant<T, 1, 1, XR>(map, p, q, wpack, stream);
}
template <typename T>
cudaError_t launch_typed(const CUtensorMap& map, const Conv1dParams& p, const TmaPlan& q, const void* wpack,
                         cudaStream_t stream) {
  if (kXRowMax == 64 && q.xr == 64) return launch_shaped<T, kXRowMax>(map, p, q, wpack, stream);
  return launch_shaped<T, kXRowMin>(map, p, q, wpack, stream);
}

// The packed weights, then (x not channels-last) the copy slab from a 256-byte boundary.
int64_t workspace_bytes_of(const Conv1dParams& p, const TmaPlan& q) {
  const int64_t w = packed_weight_bytes(p, q);
  if (channels_last_x(p) || q.tx) return w;
  return wg::round_up(w, 256) + slab_batches(p) * p.in_length * p.in_channels * 2;
}

}  // namespace

bool conv1d_fwd_dense_tma_supports(const Conv1dParams& p) {
  TmaPlan q;
  return make_plan(p, q);
}

int conv1d_fwd_dense_tma_form(const Conv1dParams& p) {
  TmaPlan q;
  if (!make_plan(p, q)) return 0;
  return channels_last_x(p) ? 1 : q.tx ? 2 : 3;
}

int64_t conv1d_fwd_dense_tma_workspace_bytes(const Conv1dParams& p) {
  TmaPlan q;
  return make_plan(p, q) ? workspace_bytes_of(p, q) : 0;
}

cudaError_t launch_x_to_channels_last(const void* x, int64_t B, int64_t sb, int64_t sc, int64_t sl, int64_t C,
                                      int64_t L, void* out, cudaStream_t stream) {
  if (C % 8 != 0 || (reinterpret_cast<uintptr_t>(out) & 15) != 0 || C > 65535 * 32) return cudaErrorInvalidValue;
  if (B < 1 || C < 1 || L < 1) return cudaSuccess;
  for (int64_t b0 = 0; b0 < B; b0 += 65535) {  // grid.z
    launch_copy(static_cast<const unsigned short*>(x) + b0 * sb, std::min<int64_t>(65535, B - b0), sb, sc, sl, C, L,
                static_cast<unsigned short*>(out) + b0 * L * C, stream);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t launch_conv1d_fwd_dense_tma(const Conv1dParams& p, cudaStream_t stream) {
  void* const workspace = p.workspace;
  TmaPlan q;
  if (!make_plan(p, q) || workspace == nullptr || (reinterpret_cast<uintptr_t>(workspace) & 15) != 0)
    return cudaErrorInvalidValue;
  if (q.num_tiles == 0 || p.out_length <= 0) return cudaSuccess;
  const PackSpec ps{static_cast<const unsigned short*>(p.w), q.cout_g * p.w_stride_o, p.w_stride_o, p.w_stride_i,
                    p.w_stride_k, q.cout_g, q.cin_g, p.groups, q.m_tiles, q.chunks, q.k, q.cc, q.bm};
  cudaError_t err = launch_pack_weights(ps, workspace, p.num_sms, stream);
  if (err != cudaSuccess) return err;
  auto run = [&](const Conv1dParams& v, const TmaPlan& qv) {
    CUtensorMap map;
    if (!make_map(v, qv, map)) return cudaErrorInvalidValue;
    if (v.dtype == DType::kFloat16) return launch_typed<__half>(map, v, qv, workspace, stream);
    return launch_typed<__nv_bfloat16>(map, v, qv, workspace, stream);
  };
  if (channels_last_x(p) || q.tx) return run(p, q);
  unsigned short* const xbuf =
      static_cast<unsigned short*>(workspace) + wg::round_up(packed_weight_bytes(p, q), 256) / 2;
  const unsigned short* const x = static_cast<const unsigned short*>(p.x);
  const int64_t nb = slab_batches(p);
  for (int64_t b0 = 0; b0 < p.batch; b0 += nb) {
    const int64_t n = std::min(nb, p.batch - b0);
    launch_copy(x + b0 * p.x_stride_b, n, p.x_stride_b, p.x_stride_c, p.x_stride_l, p.in_channels, p.in_length, xbuf,
                stream);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    Conv1dParams v = channels_last_view(p, xbuf, n);
    v.y = static_cast<unsigned short*>(p.y) + b0 * p.y_stride_b;
    TmaPlan qv;
    if (!make_plan(v, qv)) return cudaErrorInvalidValue;
    if ((err = run(v, qv)) != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace convkit
