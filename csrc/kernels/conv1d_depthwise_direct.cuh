// Depthwise conv1d, direct kernels: one block per tile, warps independent, no loop over tiles.
// Same eligibility as the pipelined kernels (fixed (K, S, D), fp32/fp16/bf16, 16-byte aligned
// contiguous rows, left padding <= (K-1)*D); chosen by the variants of launch_fwd / launch_bwd.
//
// The pipelined kernels keep a few large blocks resident and stream tiles through cp.async stages.
// Here the GPU's block scheduler does the streaming instead: a block covers one tile (kThreads * V
// outputs of one row), each warp copies the window of its own 32 * V outputs (plus the halo of the
// taps on both sides) into a small per-warp shared buffer with cp.async, waits, and computes from
// it; only a __syncwarp between copy and use, and (backward) one block barrier for the grad-weight
// sums. Every thread's loads are in flight at once and many small blocks per SM overlap, which is
// the structure that reaches copy bandwidth in simple streaming kernels.
//
// Backward (stride 1, channel multiplier 1, no activation, like the pipelined one): a block computes
// grad-input for inputs [t*kTile, +kTile) and the grad-weight / grad-bias sums of outputs
// [t*kTile, +kTile) of one (b, c) row, and writes its sums to the workspace as split b * n_tiles + t;
// sum_partials_kernel adds the splits in a fixed order (deterministic).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "activation.cuh"
#include "common.cuh"
#include "conv1d_depthwise_config.h"
#include "mma_common.cuh"

namespace convkit {
namespace dw {

template <typename T, int K, int S, int D, int V>
struct DirectCfg {
  static constexpr int VE = VecOf<T>::kElems;
  static constexpr int KD = (K - 1) * D;
  static constexpr int kTile = kThreads * V;
  static constexpr int kOwn = V * S / VE;                  // 16-byte input units per thread
  static constexpr int kHalo = (KD + VE - 1) / VE;         // units before a warp's first own unit
  static constexpr int kThreadWin = (V - 1) * S + KD + 1;  // input elements behind V outputs
  static constexpr int kReadVecs = (kThreadWin + VE - 1 + VE - 1) / VE;  // what read_window reads
  // Lane 31 with no padding reads units [kHalo + 31 * kOwn, + kReadVecs) of its warp's buffer.
  static constexpr int kWarpUnits = kHalo + 31 * kOwn + kReadVecs;
  static_assert(V % VE == 0 && (V * S) % VE == 0, "a thread's window must start on a 16-byte boundary");
};

// Tiles of a launch (one block each); 0 when they do not fit a 1-D grid (then another kernel runs).
inline int64_t direct_tiles(int64_t rows, int64_t len, int V) {
  const int64_t t = rows * ceil_div(len, int64_t{kThreads} * V);
  return t < (int64_t{1} << 31) ? t : 0;
}

template <typename T, int K, int S, int D, int V>
__global__ void __launch_bounds__(kThreads) conv1d_fwd_dw_direct_kernel(const Conv1dParams p) {
  using Cfg = DirectCfg<T, K, S, D, V>;
  constexpr int VE = Cfg::VE;
  __shared__ uint4 buf[kThreads / 32][Cfg::kWarpUnits];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t l_tiles = ceil_div(p.out_length, int64_t{Cfg::kTile});
  int64_t row, lt, b, co;
  divmod(blockIdx.x, l_tiles, row, lt);
  const int64_t jw = lt * Cfg::kTile + warp * 32 * V;  // the warp's first output
  if (jw >= p.out_length) return;
  divmod(row, p.out_channels, b, co);
  const int64_t ci = depthwise_in_channel(p, co);
  uint4* wb = buf[warp];
  issue_window<T>(wb, static_cast<const T*>(p.x) + b * p.x_stride_b + ci * p.x_stride_c,
                  jw * S - Cfg::kHalo * VE, p.in_length, Cfg::kWarpUnits, lane, 32);
  cp_async_commit();

  float w[K];
#pragma unroll
  for (int k = 0; k < K; ++k) w[k] = load_param<T>(p, p.w, co * p.w_stride_o + k * p.w_stride_k);
  const float bias = p.bias != nullptr ? load_param<T>(p, p.bias, co) : 0.0f;
  cp_async_wait<0>();
  __syncwarp();

  const int64_t j0 = jw + lane * V;
  if (j0 >= p.out_length) return;
  const int e = Cfg::kHalo * VE + lane * V * S - static_cast<int>(p.pad_left);  // x[j0*S - P] in wb
  float xin[Cfg::kThreadWin];
  read_window<T>(wb, e / VE, e % VE, xin);
  float acc[V];
  fwd_taps<K, S, D>(w, xin, bias, p.activation, acc);
  store_run<T, V>(p.y, b * p.y_stride_b + co * p.y_stride_c, p.y_stride_l, j0, p.out_length, acc);
}

// Forward on tensor cores for 16-bit types and long kernels (stride 1; forward variant 8). For one
// channel, 16 consecutive outputs are a Toeplitz matrix times a window of the input:
//   y[j0 + i] = sum_t A[i, t] * x[j0 - P + t - off],   A[i, t] = w[(t - off - i) / D] where that is a tap
// (0 <= t - off - i <= (K-1)*D, divisible by D), else 0; `off` (0 or 1) makes the window start even.
// A (16 x 16*kSteps, built once per warp from the weights) is the mma A operand; 8 such output blocks
// side by side (128 outputs) are the 8 columns of B, read as aligned 32-bit pairs from the warp's
// staged window. kSteps m16n8k16 MMAs replace 16 * K FMAs per column, which is what makes K = 31 run
// at memory speed instead of FMA speed. Products of 16-bit values are exact in the fp32 accumulator,
// as in the FMA kernels; the sums run in another order. One difference: an Inf/NaN input reaches
// (through a zero coefficient) every output of its 16-output block, not only those whose taps touch it.
// Weights must be of the input's dtype (fp32 weights take the FMA kernels).
// The backward's grad-input (conv1d_bwd_dw_toeplitz_kernel below) is the same product on dy with the
// taps reversed; toeplitz_a / toeplitz_outputs / store_warp_outputs serve both.
template <typename T, int K, int D, int V>
struct ToeplitzCfg {
  static constexpr int VE = VecOf<T>::kElems;
  static constexpr int KD = (K - 1) * D;
  static constexpr int kTile = kThreads * V;
  static constexpr int kWarpOut = 32 * V;
  static constexpr int kGroups = kWarpOut / 128;           // 128 outputs per MMA column group
  static constexpr int kSteps = (16 + KD + 1 + 15) / 16;   // 16-deep steps of the window
  static constexpr int kHalo = (KD + VE - 1) / VE;
  // elements read: up to kHalo*VE + 128*(kGroups-1) + 16*7 + 16*(kSteps-1) + 6 + 8 + 2
  static constexpr int kUnits = (kHalo * VE + kWarpOut + 16 * kSteps + VE - 1) / VE;
  static_assert(sizeof(T) == 2 && kWarpOut % 128 == 0, "16-bit types, whole column groups per warp");
};

// The A fragments of channel c's Toeplitz matrix: a[s][r] holds A[row][col], A[row][col + 1] with
// row = g + 8*(r & 1), col = 16s + c2 + 8*(r >> 1). kReverse: the taps in reverse order (grad-input).
template <int K, int D, int kSteps, bool kReverse>
__device__ __forceinline__ void toeplitz_a(uint32_t (&a)[kSteps][4], const Conv1dParams& p, int64_t c, int off) {
  constexpr int KD = (K - 1) * D;
  const int lane = threadIdx.x % 32, g = lane / 4, c2 = 2 * (lane % 4);
  const unsigned short* wbits = static_cast<const unsigned short*>(p.w);
  auto tap = [&](int i, int t) -> uint32_t {
    const int d = t - off - i;
    if (d < 0 || d > KD || d % D != 0) return 0u;
    const int k = kReverse ? K - 1 - d / D : d / D;
    return __ldg(wbits + c * p.w_stride_o + k * p.w_stride_k);
  };
#pragma unroll
  for (int s = 0; s < kSteps; ++s)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int i = g + 8 * (r & 1), t = 16 * s + c2 + 8 * (r >> 1);
      a[s][r] = tap(i, t) | (tap(i, t + 1) << 16);
    }
}

// The warp's kGroups * 128 outputs into ob (16-bit, in order): output (r, n, i) = 128r + 16n + i is
// sum_t A[i, t] * xb[e0 + 128r + 16n + t], plus bias, through the activation.
template <typename T, int kSteps, int kGroups>
__device__ __forceinline__ void toeplitz_outputs(const uint32_t (&a)[kSteps][4], const unsigned short* xb, int e0,
                                                 float bias, int activation, unsigned short* ob) {
  const int lane = threadIdx.x % 32, g = lane / 4, c2 = 2 * (lane % 4);
#pragma unroll
  for (int r = 0; r < kGroups; ++r) {
    float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      // B[t][n] = window element e0 + 128r + 16n + t: b0 = rows t = 16s + c2, +1 of column n = g; b1 = rows + 8.
      const uint32_t* wp = reinterpret_cast<const uint32_t*>(xb + e0 + 128 * r + 16 * g + 16 * s + c2);
      tc::mma16816<T>(c, a[s], wp[0], wp[4]);
    }
    // c0, c1: outputs i = g of columns n = c2, c2 + 1; c2, c3: i = g + 8. Output (n, i) is 128r + 16n + i.
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = c[e] + bias;
      if (activation != kActNone) v = activate(activation, v);
      const int n = c2 + (e & 1), i = g + 8 * (e >> 1);
      ob[128 * r + 16 * n + i] = static_cast<unsigned short>(tc::bits16<T>(v));
    }
  }
}

// The warp's staged outputs [jw, jw + 8 * kUnits) of a row (elements of `stride` apart), those below
// `len`: 16-byte stores where the row allows them.
template <int kUnits>
__device__ __forceinline__ void store_warp_outputs(const uint4* obuf, unsigned short* yrow, int64_t stride, int64_t jw,
                                                   int64_t len) {
  const unsigned short* ob = reinterpret_cast<const unsigned short*>(obuf);
#pragma unroll
  for (int u = threadIdx.x % 32; u < kUnits; u += 32) {
    const int64_t j = jw + 8 * u;
    if (stride == 1 && j + 8 <= len && reinterpret_cast<uintptr_t>(yrow + j) % 16 == 0) {
      *reinterpret_cast<uint4*>(yrow + j) = obuf[u];
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (j + e < len) yrow[(j + e) * stride] = ob[8 * u + e];
    }
  }
}

template <typename T, int K, int D, int V>
__global__ void __launch_bounds__(kThreads, CONVKIT_DW_TOEPLITZ_FWD_MIN_BLOCKS) conv1d_fwd_dw_toeplitz_kernel(const Conv1dParams p) {
  using Cfg = ToeplitzCfg<T, K, D, V>;
  constexpr int VE = Cfg::VE;
  __shared__ uint4 buf[kThreads / 32][Cfg::kUnits];
  __shared__ uint4 obuf[kThreads / 32][Cfg::kWarpOut / 8];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t l_tiles = ceil_div(p.out_length, int64_t{Cfg::kTile});
  int64_t row, lt, b, co;
  divmod(blockIdx.x, l_tiles, row, lt);
  const int64_t jw = lt * Cfg::kTile + warp * Cfg::kWarpOut;
  if (jw >= p.out_length) return;
  divmod(row, p.out_channels, b, co);
  const int64_t ci = depthwise_in_channel(p, co);
  issue_window<T>(buf[warp], static_cast<const T*>(p.x) + b * p.x_stride_b + ci * p.x_stride_c,
                  jw - Cfg::kHalo * VE, p.in_length, Cfg::kUnits, lane, 32);
  cp_async_commit();

  const int e_raw = Cfg::kHalo * VE - static_cast<int>(p.pad_left);  // window element of x[jw - P]
  const int off = e_raw & 1;
  uint32_t a[Cfg::kSteps][4];
  toeplitz_a<K, D, Cfg::kSteps, false>(a, p, co, off);
  const float bias = p.bias != nullptr ? load_param<T>(p, p.bias, co) : 0.0f;
  cp_async_wait<0>();
  __syncwarp();

  toeplitz_outputs<T, Cfg::kSteps, Cfg::kGroups>(a, reinterpret_cast<const unsigned short*>(buf[warp]), e_raw - off,
                                                 bias, p.activation, reinterpret_cast<unsigned short*>(obuf[warp]));
  __syncwarp();
  store_warp_outputs<Cfg::kWarpOut / 8>(obuf[warp],
                                        static_cast<unsigned short*>(p.y) + b * p.y_stride_b + co * p.y_stride_c,
                                        p.y_stride_l, jw, p.out_length);
}

// The Toeplitz forward with each warp streaming a contiguous run of 32V-output chunks through a ring of
// kRing cp.async slots (forward variant 10): the loads of the next kRing - 1 chunks are in flight while
// a chunk's MMAs and stores run, and a row's A fragments are built once for all its chunks. The grid is
// what fits on the GPU at once (resident_grid); warp w of W takes chunks [w * U / W, (w + 1) * U / W)
// of the U = rows * ceil(Lout / 32V) chunks, rows (b, co) in order.
template <typename T, int K, int D, int V, int kRing>
__global__ void __launch_bounds__(kThreads, CONVKIT_DW_TOEPLITZ_FWD_MIN_BLOCKS)
    conv1d_fwd_dw_toeplitz_ring_kernel(const Conv1dParams p) {
  using Cfg = ToeplitzCfg<T, K, D, V>;
  constexpr int VE = Cfg::VE;
  __shared__ uint4 ring[kThreads / 32][kRing][Cfg::kUnits];
  __shared__ uint4 obuf[kThreads / 32][Cfg::kWarpOut / 8];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t chunks = ceil_div(p.out_length, int64_t{Cfg::kWarpOut});
  const int64_t units = p.batch * p.out_channels * chunks;
  const int64_t warps = int64_t{gridDim.x} * (kThreads / 32), wid = int64_t{blockIdx.x} * (kThreads / 32) + warp;
  const int64_t u0 = wid * units / warps, u1 = (wid + 1) * units / warps;
  const int64_t mult = p.out_channels / p.in_channels;
  const T* xp = static_cast<const T*>(p.x);
  auto issue = [&](int64_t u, int slot) {
    int64_t row, ch, b, co;
    divmod(u, chunks, row, ch);
    divmod(row, p.out_channels, b, co);
    const int64_t ci = mult == 1 ? co : co / mult;
    issue_window<T>(ring[warp][slot], xp + b * p.x_stride_b + ci * p.x_stride_c,
                    ch * Cfg::kWarpOut - Cfg::kHalo * VE, p.in_length, Cfg::kUnits, lane, 32);
  };
#pragma unroll
  for (int s = 0; s < kRing - 1; ++s) {
    if (u0 + s < u1) issue(u0 + s, s);
    cp_async_commit();
  }
  const int e_raw = Cfg::kHalo * VE - static_cast<int>(p.pad_left);  // window element of x[jw - P]
  const int off = e_raw & 1;
  uint32_t a[Cfg::kSteps][4];
  float bias = 0.0f;
  int64_t cur_row = -1;
  int slot = 0;
  for (int64_t u = u0; u < u1; ++u) {
    const int ahead = slot == 0 ? kRing - 1 : slot - 1;  // the slot of chunk u + kRing - 1 (read at u - 1)
    if (u + kRing - 1 < u1) issue(u + kRing - 1, ahead);
    cp_async_commit();
    int64_t row, ch, b, co;
    divmod(u, chunks, row, ch);
    divmod(row, p.out_channels, b, co);
    if (row != cur_row) {
      cur_row = row;
      toeplitz_a<K, D, Cfg::kSteps, false>(a, p, co, off);
      bias = p.bias != nullptr ? load_param<T>(p, p.bias, co) : 0.0f;
    }
    cp_async_wait<kRing - 1>();
    __syncwarp();
    toeplitz_outputs<T, Cfg::kSteps, Cfg::kGroups>(a, reinterpret_cast<const unsigned short*>(ring[warp][slot]),
                                                   e_raw - off, bias, p.activation,
                                                   reinterpret_cast<unsigned short*>(obuf[warp]));
    __syncwarp();
    store_warp_outputs<Cfg::kWarpOut / 8>(obuf[warp],
                                          static_cast<unsigned short*>(p.y) + b * p.y_stride_b + co * p.y_stride_c,
                                          p.y_stride_l, ch * Cfg::kWarpOut, p.out_length);
    __syncwarp();  // the slot and obuf are reused
    slot = slot + 1 == kRing ? 0 : slot + 1;
  }
  cp_async_wait<0>();
}

// Forward on tensor cores with the data as the MMA's A operand (16-bit, stride 1; forward variant 11).
// Variants 8 / 10 put the weights' Toeplitz matrix in A, read the window as B with 32-bit shared loads
// and stage the outputs in shared memory for 16-byte stores: 63 instructions per HMMA on conformer K31
// bf16 (ncu, session 9), issue-bound at ~41 % of the byte floor. Here the roles swap. For 256
// consecutive outputs j0 + 16i + o (i, o < 16) of a row,
//   y[j0 + 16i + o] = sum_t A[i][t] * W[t][o],   A[i][t] = xs[16i + t],
//   W[t][o] = w[k] where t = o + e + k*D (0 <= k < K), else 0,
// with xs the window staged from the 16-byte aligned position j0 - P - e, e = -P mod 8. A row of A is
// 16 consecutive window elements, so one ldmatrix.x4 loads a whole 16 x 16 A fragment; W (kSteps
// 16-deep blocks, two halves of 8 columns) stays in registers while a warp works on one channel.
// Column n of half h is output o = 4*(n/2) + 2h + n%2, so a thread's accumulators are four consecutive
// outputs per row of C and the epilogue writes 8 bytes per thread straight to global memory (one store
// instruction of a warp covers 256 contiguous bytes), without staging. Window slot u (16 bytes) is
// stored at u ^ ((u >> 3) & 1) (issue_window<T, true>): the 8 rows one ldmatrix phase reads are slots
// 2i + c, 32 bytes apart, which unswizzled hit each bank twice.
// The products are exact in fp32, as in the FMA kernels; the sums run in another order. An Inf/NaN input
// reaches (through zero coefficients) every output of the 16-output blocks whose A rows hold it, not
// only those whose taps touch it. Weights must be of the input's dtype (fp32 weights take the FMA kernels).
template <int K, int D, int V>
struct HankelCfg {
  static constexpr int KD = (K - 1) * D;
  // 16-deep blocks of W that hold a tap for window offset e (outputs reach t = 15 + e + KD); kSteps for any e < 8
  __host__ __device__ static constexpr int steps(int e) { return (16 + e + KD + 15) / 16; }
  static constexpr int kSteps = steps(7);
  static_assert(steps(0) >= kSteps - 1, "a launch uses kSteps or kSteps - 1 blocks (hankel_outputs)");
  static constexpr int kChunk = 32 * V;                   // outputs per warp and ring slot
  static constexpr int kGroups = kChunk / 256;
  // ldmatrix reads slots up to 32 * (kGroups - 1) + 31 + 2 * (kSteps - 1); an even count keeps the
  // swizzle (which swaps slot pairs) inside the window.
  static constexpr int kUnits = 2 * (kChunk / 16 - 1 + kSteps);
  static_assert(kChunk % 256 == 0, "whole 256-output groups per warp");
};

// The W fragments of channel c (mma B operand: b[s][h][r] holds rows 16s + 2q + 8r, +1 of column
// g = lane / 4 of half h, q = lane % 4). kReverse: the taps in reverse order (a grad-input).
// Lane k loads tap k and the fragments gather them by shuffles (scalar loads per fragment element kept
// 32 addresses live: ~150 registers).
template <int K, int D, int kSteps, bool kReverse>
__device__ __forceinline__ void hankel_w(uint32_t (&b)[kSteps][2][2], const Conv1dParams& p, int64_t c, int e) {
  static_assert(K <= 32, "a lane per tap");
  constexpr int KD = (K - 1) * D;
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const unsigned short* wbits = static_cast<const unsigned short*>(p.w) + c * p.w_stride_o;
  const uint32_t mine = lane < K ? __ldg(wbits + (kReverse ? K - 1 - lane : lane) * p.w_stride_k) : 0u;
  auto tap = [&](int t, int o) -> uint32_t {
    const int d = t - o - e;
    const bool hit = d >= 0 && d <= KD && d % D == 0;
    const uint32_t v = __shfl_sync(0xffffffffu, mine, hit ? d / D : 0);
    return hit ? v : 0u;
  };
  const int o0 = 4 * (g / 2) + g % 2;  // output of column g, half 0 (half 1: + 2)
#pragma unroll
  for (int s = 0; s < kSteps; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int t = 16 * s + 2 * q + 8 * r;
        b[s][h][r] = tap(t, o0 + 2 * h) | (tap(t + 1, o0 + 2 * h) << 16);
      }
}

// Four consecutive 16-bit values (lo: elements 0, 1; hi: 2, 3) to row[j..j+3] (element stride `stride`),
// those below len: one 8-byte store where the row allows it.
__device__ __forceinline__ void store4_16bit(unsigned short* row, int64_t stride, int64_t j, int64_t len, uint32_t lo,
                                             uint32_t hi) {
  if (stride == 1 && j + 4 <= len) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(row + j);
    if ((a & 7) == 0) {
      *reinterpret_cast<uint2*>(row + j) = make_uint2(lo, hi);
      return;
    }
    if ((a & 3) == 0) {
      reinterpret_cast<uint32_t*>(row + j)[0] = lo;
      reinterpret_cast<uint32_t*>(row + j)[1] = hi;
      return;
    }
  }
  const uint32_t w[2] = {lo, hi};
#pragma unroll
  for (int e = 0; e < 4; ++e)
    if (j + e < len) row[(j + e) * stride] = static_cast<unsigned short>(w[e / 2] >> (16 * (e % 2)));
}

// Calls f(std::true_type{}) or f(std::false_type{}): a run-time flag as a template argument.
template <typename F> __device__ __forceinline__ void with_flag(bool on, F&& f) {
  if (on) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

// hankel_outputs with its per-chunk choices as template arguments: kN blocks of W (the others are zero
// for this window offset) and kDirect (the whole chunk lies in an 8-byte aligned contiguous row: plain 8-byte
// stores without checks). Per-store checks and per-block branches were a large part of the Hankel forward's
// instructions (ncu, session 11: 523 per 512-output chunk, 12 of them HMMA). (The activation as a third
// template flag made the forward spill at its 80-register cap.)
template <typename T, int kSteps, int kGroups, int kN, bool kDirect>
__device__ __forceinline__ void hankel_chunk(const uint32_t (&b)[kSteps][2][2], uint32_t win, int base, float bias,
                                             int activation, unsigned short* row, int64_t stride, int64_t j0,
                                             int64_t len) {
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  // ldmatrix.x4: lane l gives the address of row l % 8 of matrix l / 8, and the matrices (rows 0-7 | 8-15)
  // x (t 0-7 | 8-15) are the A fragment's registers in order: the lane's A row is i = l % 8 + 8 * ((l / 8) % 2),
  // its 8 columns start at t = 8 * (l / 16), i.e. slot base + 2i + l / 16 (+ 2s for block s, + 32 per
  // group). Adding 32 keeps a slot's swizzle, so the lane's addresses are fixed per block s.
  const int slot0 = base + 2 * (lane % 8 + 8 * ((lane / 8) % 2)) + lane / 16;
  uint32_t addr[kN];
#pragma unroll
  for (int s = 0; s < kN; ++s) addr[s] = win + 16 * swizzled_slot(slot0 + 2 * s);
#pragma unroll
  for (int r = 0; r < kGroups; ++r) {
    float c[2][4];
#pragma unroll
    for (int e = 0; e < 8; ++e) c[e / 4][e % 4] = bias;
#pragma unroll
    for (int s = 0; s < kN; ++s) {
      uint32_t a[4];
      tc::ldsm_x4(addr[s] + 512 * r, a[0], a[1], a[2], a[3]);
      tc::mma16816<T>(c[0], a, b[s][0][0], b[s][0][1]);
      tc::mma16816<T>(c[1], a, b[s][1][0], b[s][1][1]);
    }
    // c[h][0], c[h][1]: row g, columns 2q, 2q + 1 of half h = outputs 16g + 4q + 2h, +1; c[h][2..3]: row g + 8.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float v[4] = {c[0][2 * half], c[0][2 * half + 1], c[1][2 * half], c[1][2 * half + 1]};
      if (activation != kActNone) {
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = activate(activation, v[e]);
      }
      const uint32_t lo = tc::bits16<T>(v[0]) | (tc::bits16<T>(v[1]) << 16);
      const uint32_t hi = tc::bits16<T>(v[2]) | (tc::bits16<T>(v[3]) << 16);
      if constexpr (kDirect) {
        *reinterpret_cast<uint2*>(row + j0 + 256 * r + 128 * half + 16 * g + 4 * q) = make_uint2(lo, hi);
      } else {
        store4_16bit(row, stride, j0 + 256 * r + 128 * half + 16 * g + 4 * q, len, lo, hi);
      }
    }
  }
}

// The warp's outputs [j0, j0 + 256 * kGroups) of one row (those below len) from its swizzled window at
// shared address win, whose slot `base` starts at x[j0 - P - e]: A W + bias, through the activation.
// Blocks s >= n_steps of W are zero for this e and skipped (n_steps is kSteps or kSteps - 1).
template <typename T, int kSteps, int kGroups>
__device__ __forceinline__ void hankel_outputs(const uint32_t (&b)[kSteps][2][2], int n_steps, uint32_t win, int base,
                                               float bias, int activation, unsigned short* row, int64_t stride,
                                               int64_t j0, int64_t len) {
  const bool direct = stride == 1 && j0 + 256 * kGroups <= len && (reinterpret_cast<uintptr_t>(row + j0) & 7) == 0;
  with_flag(n_steps == kSteps, [&](auto all_steps) {
    with_flag(direct, [&](auto direct_c) {
      hankel_chunk<T, kSteps, kGroups, decltype(all_steps)::value ? kSteps : kSteps - 1, decltype(direct_c)::value>(
          b, win, base, bias, activation, row, stride, j0, len);
    });
  });
}

// A warp's position (b, c, chunk) in units u = (b * C + c) * chunks + chunk, stepped without divisions.
struct ChunkCursor {
  int64_t b, c, ch;
  __device__ ChunkCursor(int64_t u, int64_t C, int64_t chunks) {
    int64_t row;
    divmod(u, chunks, row, ch);
    divmod(row, C, b, c);
  }
  __device__ void advance(int64_t C, int64_t chunks) {
    if (++ch == chunks) {
      ch = 0;
      if (++c == C) {
        c = 0;
        ++b;
      }
    }
  }
};

// Persistent warps as in the ring Toeplitz forward (variant 10): warp w of W takes the chunks
// [w * U / W, (w + 1) * U / W) of the U = rows * ceil(Lout / 32V) chunks of 32V outputs, rows (b, c)
// in order, with the next kRing - 1 windows in flight; W is rebuilt when the channel changes.
template <typename T, int K, int D, int V, int kRing>
__global__ void __launch_bounds__(kThreads, CONVKIT_DW_HANKEL_FWD_MIN_BLOCKS)
    conv1d_fwd_dw_hankel_kernel(const Conv1dParams p) {
  using Cfg = HankelCfg<K, D, V>;
  __shared__ uint4 ring[kThreads / 32][kRing][Cfg::kUnits];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t C = p.out_channels, chunks = ceil_div(p.out_length, int64_t{Cfg::kChunk});
  const int64_t units = p.batch * C * chunks;
  const int64_t warps = int64_t{gridDim.x} * (kThreads / 32), wid = int64_t{blockIdx.x} * (kThreads / 32) + warp;
  const int64_t u0 = wid * units / warps, u1 = (wid + 1) * units / warps;
  if (u0 >= u1) return;
  const int e = static_cast<int>(-p.pad_left & 7);  // window element of x[j0 - P]
  const int n_steps = Cfg::steps(e);
  const T* xp = static_cast<const T*>(p.x);
  ChunkCursor fetch(u0, C, chunks), cur = fetch;
  auto issue = [&](int slot) {
    const int64_t ci = depthwise_in_channel(p, fetch.c);
    issue_window<T, true>(ring[warp][slot], xp + fetch.b * p.x_stride_b + ci * p.x_stride_c,
                          fetch.ch * Cfg::kChunk - p.pad_left - e, p.in_length, Cfg::kUnits, lane, 32);
    fetch.advance(C, chunks);
  };
#pragma unroll
  for (int s = 0; s < kRing - 1; ++s) {
    if (u0 + s < u1) issue(s);
    cp_async_commit();
  }
  uint32_t wf[Cfg::kSteps][2][2];
  float bias = 0.0f;
  int64_t w_channel = -1;
  const uint32_t ring0 = tc::smem_u32(ring[warp][0]);
  int slot = 0;
  for (int64_t u = u0; u < u1; ++u) {
    if (u + kRing - 1 < u1) issue(slot == 0 ? kRing - 1 : slot - 1);  // the slot read at u - 1
    cp_async_commit();
    if (cur.c != w_channel) {
      w_channel = cur.c;
      hankel_w<K, D, Cfg::kSteps, false>(wf, p, cur.c, e);
      bias = p.bias != nullptr ? load_param<T>(p, p.bias, cur.c) : 0.0f;
    }
    cp_async_wait<kRing - 1>();
    __syncwarp();
    hankel_outputs<T, Cfg::kSteps, Cfg::kGroups>(
        wf, n_steps, ring0 + slot * (16 * Cfg::kUnits), 0, bias, p.activation,
        static_cast<unsigned short*>(p.y) + cur.b * p.y_stride_b + cur.c * p.y_stride_c, p.y_stride_l,
        cur.ch * Cfg::kChunk, p.out_length);
    __syncwarp();  // the slot is refilled next
    cur.advance(C, chunks);
    slot = slot + 1 == kRing ? 0 : slot + 1;
  }
  cp_async_wait<0>();
}

// The fused backward kernels' conditions on everything but the stride and the grid (direct and
// streaming): no activation, multiplier 1, aligned contiguous x and dy rows, left padding <= (K-1)*D.
// The element size comes from p.dtype, since plan_bwd is not a template.
inline bool bwd_fused_rows_ok(const Conv1dParams& p) {
  const int size = dtype_bytes(p.dtype);
  const int64_t ve = 16 / size;
  return size < 8 && p.activation == kActNone && p.out_channels == p.in_channels &&
         p.pad_left <= (p.kernel_size - 1) * p.dilation &&
         rows_vec_aligned(p.x, p.x_stride_b, p.x_stride_c, p.x_stride_l, ve) &&
         rows_vec_aligned(p.y, p.y_stride_b, p.y_stride_c, p.y_stride_l, ve);
}

// Whether the direct backward runs these params (with V outputs per thread): stride 1, the rows'
// conditions above and a grid that fits.
inline bool bwd_direct_ok(const Conv1dParams& p, int V) {
  return p.stride == 1 && bwd_fused_rows_ok(p) &&
         direct_tiles(p.batch * p.out_channels, std::max(p.in_length, p.out_length), V) > 0;
}

// Grad-weight / grad-bias partial sums per (b, tile): see plan_bwd.
inline int64_t direct_bwd_splits(const Conv1dParams& p, int V) {
  return p.batch * ceil_div(std::max(p.in_length, p.out_length), int64_t{kThreads} * V);
}

// The block-level half of write_block_partials: after sums[warp][k] (k < K: grad-weight tap k, k = K: grad-bias)
// of every warp, the block's sums over its warps in order, to the workspace as split `split`.
template <int K>
__device__ __forceinline__ void store_block_partials(const Conv1dParams& p, float (&sums)[kThreads / 32][K + 1],
                                                     int64_t split, int64_t c) {
  __syncthreads();
  if (threadIdx.x <= K) {
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kThreads / 32; ++i) s += sums[i][threadIdx.x];
    const int64_t C = p.out_channels, n_weight = C * K;
    float* partial = static_cast<float*>(p.workspace);
    if (threadIdx.x < K) partial[split * n_weight + c * K + threadIdx.x] = s;
    else partial[p.weight_splits * n_weight + split * C + c] = s;
  }
}

// The block's grad-weight / grad-bias sums, added in a fixed order (over the warp by butterfly, then
// over the warps in order), written to the workspace as split `split` of channel c (sum_partials_kernel
// adds the splits). Every thread of the block calls it; `sums` is the block's scratch.
template <int K>
__device__ __forceinline__ void write_block_partials(const Conv1dParams& p, const float (&gw)[K], float gb,
                                                     float (&sums)[kThreads / 32][K + 1], int64_t split, int64_t c) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int k = 0; k <= K; ++k) {
    float v = k < K ? gw[k] : gb;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0) sums[warp][k] = v;
  }
  store_block_partials<K>(p, sums, split, c);
}

// The fused backward kernels' block in a grid of blockIdx.x = (b * C + c) * tiles + t over
// len = max(Lin, Lout) positions in tiles of kTile: its row (b, c) and tile t; its grad-weight split
// (plan_bwd) is b * tiles + t.
struct BwdBlock {
  int64_t b, c, t, len, tiles;
  __device__ int64_t split() const { return b * tiles + t; }
};
__device__ __forceinline__ BwdBlock bwd_block(const Conv1dParams& p, int64_t kTile) {
  BwdBlock k;
  k.len = max(p.in_length, p.out_length);
  k.tiles = ceil_div(k.len, kTile);
  int64_t row;
  divmod(blockIdx.x, k.tiles, row, k.t);
  divmod(row, p.out_channels, k.b, k.c);
  return k;
}

// The warp's dy and x windows of row (b, c), both from position q0, nslots 16-byte units each, zero
// outside the rows (cp.async, not committed): what the fused backward kernels read. kSwizzle: see issue_window.
template <typename T, bool kSwizzle = false>
__device__ __forceinline__ void issue_dy_x_windows(uint4* dyw, uint4* xw, const Conv1dParams& p, int64_t b, int64_t c,
                                                   int64_t q0, int nslots, int lane) {
  issue_window<T, kSwizzle>(dyw, static_cast<const T*>(p.y) + b * p.y_stride_b + c * p.y_stride_c, q0, p.out_length,
                            nslots, lane, 32);
  issue_window<T, kSwizzle>(xw, static_cast<const T*>(p.x) + b * p.x_stride_b + c * p.x_stride_c, q0, p.in_length,
                            nslots, lane, 32);
}

template <typename T, int K, int D, int V>
__global__ void __launch_bounds__(kThreads) conv1d_bwd_dw_direct_kernel(const Conv1dParams p) {
  using Cfg = DirectCfg<T, K, 1, D, V>;
  constexpr int VE = Cfg::VE, KD = Cfg::KD, kHalo = Cfg::kHalo;
  __shared__ uint4 dybuf[kThreads / 32][Cfg::kWarpUnits];
  __shared__ uint4 xbuf[kThreads / 32][Cfg::kWarpUnits];
  __shared__ float sums[kThreads / 32][K + 1];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const BwdBlock blk = bwd_block(p, Cfg::kTile);
  const int64_t b = blk.b, c = blk.c, t = blk.t, len = blk.len;
  const int P = static_cast<int>(p.pad_left);
  const int64_t jw = t * Cfg::kTile + warp * 32 * V;  // the warp's first output / input
  const int64_t j0 = jw + lane * V;

  float gw[K], gb = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) gw[k] = 0.0f;
  if (jw < len) {
    // dy[jw - kHalo*VE ...) and x[jw - kHalo*VE ...), zero outside the rows.
    issue_dy_x_windows<T>(dybuf[warp], xbuf[warp], p, b, c, jw - kHalo * VE, Cfg::kWarpUnits, lane);
    cp_async_commit();
    cp_async_wait<0>();
    __syncwarp();
    if (j0 < len) {
      // grad-weight / grad-bias over outputs [j0, j0 + V): dy[j] * x[j + k*D - P]
      float g[V], xin[V + KD];
      read_window<T>(dybuf[warp], kHalo + lane * (V / VE), 0, g);
      const int ex = kHalo * VE + lane * V - P;
      read_window<T>(xbuf[warp], ex / VE, ex % VE, xin);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        gb += g[i];
#pragma unroll
        for (int k = 0; k < K; ++k) gw[k] += g[i] * xin[i + k * D];
      }
      // grad-input over inputs [j0, j0 + V): dx[i] = sum_k w[k] * dy[i + P - k*D]
      if (p.grad_x != nullptr) {
        float dyin[V + KD], acc[V];
        const int ed = kHalo * VE + lane * V + P - KD;
        read_window<T>(dybuf[warp], ed / VE, ed % VE, dyin);
        float w[K];
#pragma unroll
        for (int k = 0; k < K; ++k) w[k] = load_param<T>(p, p.w, c * p.w_stride_o + k * p.w_stride_k);
#pragma unroll
        for (int i = 0; i < V; ++i) {
          acc[i] = 0.0f;
#pragma unroll
          for (int k = 0; k < K; ++k) acc[i] += w[k] * dyin[i + KD - k * D];
        }
        store_run<T, V>(p.grad_x, b * p.gx_stride_b + c * p.gx_stride_c, p.gx_stride_l, j0, p.in_length, acc);
      }
    }
  }

  write_block_partials<K>(p, gw, gb, sums, blk.split(), c);
}

// Backward on tensor cores for 16-bit types and long kernels (stride 1; backward variant 5), tiled as
// the direct backward: a block computes grad-input for inputs [t*kTile, +kTile) and the grad-weight /
// grad-bias sums of outputs [t*kTile, +kTile) of one (b, c) row, written as split b * n_tiles + t.
//  * grad-input: dx[s] = sum_k w[k] * dy[s + P - k*D] is the forward's Toeplitz product on the dy
//    window, with the taps reversed and padding (K-1)*D - P.
//  * grad-weight: cut the warp's 32V outputs into blocks of 16, t = jw + 16n + i. Then
//      C[j][i] = sum_n x[xs + 16n + j] * dy[jw + 16n + i]      (xs = jw - P - off, off in [0, 8))
//    is one GEMM (rows j < 16 * kMT, 16 columns i, reduction over the blocks n), and
//      gw[k] = sum_t dy[t] * x[t + k*D - P] = sum_i C[i + k*D + off][i],
//    the sum of one diagonal of C. Both operands are read from the staged windows by ldmatrix.trans
//    (xs is 16-byte aligned), and 2 * kMT MMAs per 256 outputs replace 256 * K FMAs. The products are
//    exact in fp32 and C[j][i] holds only products of the x / dy pairs torch's sum has (or pairs that
//    no tap uses, which are dropped), so, unlike the forward, no Inf/NaN reaches other taps.
template <typename T, int K, int D, int V>
struct ToeplitzBwdCfg : ToeplitzCfg<T, K, D, V> {
  using F = ToeplitzCfg<T, K, D, V>;
  static constexpr int kMT = (F::KD + 23 + 15) / 16;  // 16-row tiles of C: j <= 15 + KD + 7
  static constexpr int kNSteps = F::kWarpOut / 256;   // reduction steps of 16 blocks
  static constexpr int kXUnits = (F::kHalo * F::VE + F::kWarpOut + 16 * kMT) / F::VE;
  static constexpr int kUnits = F::kUnits > kXUnits ? F::kUnits : kXUnits;  // per window (dy, x)
  static constexpr int kCPitch = 17;                  // floats per staged row of C: conflict-free diagonals
  static_assert(K <= 32 && F::kWarpOut % 256 == 0, "a lane per tap; whole reduction steps per warp");
};

// Whether the Toeplitz backward runs these params (with V outputs per thread).
inline bool bwd_toeplitz_ok(const Conv1dParams& p, int V) {
  return dtype_bytes(p.dtype) == 2 && p.w_dtype == p.dtype && bwd_direct_ok(p, V);
}

// Grad-weight pieces of the Toeplitz backward (see conv1d_bwd_dw_toeplitz_kernel below): the C
// accumulators of one warp, the MMAs of one (x, dy) window pair into them, and the diagonal sums.
template <int kMT>
__device__ __forceinline__ void toeplitz_gw_zero(float (&cacc)[kMT][2][4]) {
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int e = 0; e < 8; ++e) cacc[mt][e / 4][e % 4] = 0.0f;
}

// C[j][i] += sum_n x[xs + 16n + j] * dy[jw + 16n + i] over the warp's 32V outputs, from windows that
// start kHalo vectors before x[jw] / dy[jw]; xs = the x window element of x[jw - P], rounded down to 8.
// kSwizzle: windows staged by issue_window<T, true> (16-byte slot u at swizzled_slot(u)).
template <typename T, int K, int D, int V, int kMT, bool kSwizzle = false>
__device__ __forceinline__ void toeplitz_gw_mma(float (&cacc)[kMT][2][4], const uint4* xwin, const uint4* dywin, int P) {
  using Cfg = ToeplitzCfg<T, K, D, V>;
  constexpr int H = Cfg::kHalo * Cfg::VE;
  const int lane = threadIdx.x % 32, q = lane / 8, r8 = lane % 8;  // lane group q addresses matrix q
  const int xs = (H - P) & ~7;
  const uint32_t xa = tc::smem_u32(xwin), da = tc::smem_u32(dywin);
#pragma unroll
  for (int ks = 0; ks < Cfg::kWarpOut / 256; ++ks) {
    // B[n][i] = dy[jw + 16n + i], stored rows n: matrices (n + 8*(q & 1), i + 8*(q >> 1)) are
    // b0, b1 of columns i < 8, then b0, b1 of columns i >= 8.
    uint32_t bq[4];
    if constexpr (kSwizzle) {
      tc::ldsm_x4_trans(da + 16 * swizzled_slot(H / 8 + 2 * (16 * ks + r8 + 8 * (q & 1)) + (q >> 1)), bq[0], bq[1],
                        bq[2], bq[3]);
    } else {
      tc::ldsm_x4_trans(da + 2 * (H + 16 * (16 * ks + r8 + 8 * (q & 1)) + 8 * (q >> 1)), bq[0], bq[1], bq[2], bq[3]);
    }
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      // A[j][n] = x window element xs + 16n + j, stored rows n: matrices (j + 8*(q & 1), n + 8*(q >> 1)).
      uint32_t af[4];
      if constexpr (kSwizzle) {
        tc::ldsm_x4_trans(xa + 16 * swizzled_slot(xs / 8 + 2 * (16 * ks + r8 + 8 * (q >> 1)) + 2 * mt + (q & 1)), af[0],
                          af[1], af[2], af[3]);
      } else {
        tc::ldsm_x4_trans(xa + 2 * (xs + 16 * (16 * ks + r8 + 8 * (q >> 1)) + 16 * mt + 8 * (q & 1)), af[0], af[1], af[2],
                          af[3]);
      }
      tc::mma16816<T>(cacc[mt][0], af, bq[0], bq[1]);
      tc::mma16816<T>(cacc[mt][1], af, bq[2], bq[3]);
    }
  }
}

// gw[k] = sum_i C[i + k*D + off][i] (off = (H - P) mod 8), returned to lane k < K (0 elsewhere): C is
// staged one 16-row tile at a time in cb (16 x kCPitch floats, the warp's own), lane k walks its diagonal.
template <int K, int D, int kMT>
__device__ __forceinline__ float toeplitz_gw_diagonals(const float (&cacc)[kMT][2][4], float* cb, int P) {
  constexpr int kCP = 17;  // floats per staged row: conflict-free diagonal reads
  constexpr int H = ((K - 1) * D + 7) / 8 * 8;
  const int lane = threadIdx.x % 32, g = lane / 4, c2 = 2 * (lane % 4);
  const int offx = (H - P) & 7;
  float gwk = 0.0f;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int e = 0; e < 8; ++e)  // c0, c1: row g, columns c2, c2 + 1 of column tile e / 4; c2, c3: row g + 8
      cb[(g + 8 * ((e % 4) >> 1)) * kCP + 8 * (e / 4) + c2 + (e & 1)] = cacc[mt][e / 4][e % 4];
    __syncwarp();
    if (lane < K) {
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int jl = i + lane * D + offx - 16 * mt;
        if (jl >= 0 && jl < 16) gwk += cb[jl * kCP + i];
      }
    }
    __syncwarp();
  }
  return gwk;
}

template <typename T, int K, int D, int V>
__global__ void __launch_bounds__(kThreads, CONVKIT_DW_TOEPLITZ_BWD_MIN_BLOCKS) conv1d_bwd_dw_toeplitz_kernel(const Conv1dParams p) {
  using Cfg = ToeplitzBwdCfg<T, K, D, V>;
  constexpr int VE = Cfg::VE, KD = Cfg::KD, kHalo = Cfg::kHalo, kMT = Cfg::kMT;
  __shared__ uint4 dybuf[kThreads / 32][Cfg::kUnits];
  __shared__ uint4 xbuf[kThreads / 32][Cfg::kUnits];
  __shared__ uint4 obuf[kThreads / 32][Cfg::kWarpOut / 8];
  __shared__ float cbuf[kThreads / 32][16 * 17];
  __shared__ float sums[kThreads / 32][K + 1];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const BwdBlock blk = bwd_block(p, Cfg::kTile);
  const int64_t b = blk.b, c = blk.c, t = blk.t, len = blk.len;
  const int P = static_cast<int>(p.pad_left);
  const int64_t jw = t * Cfg::kTile + warp * Cfg::kWarpOut;  // the warp's first output / input

  float gwk = 0.0f, gb = 0.0f;  // lane k's grad-weight tap k (k < K); the lane's part of grad-bias
  if (jw < len) {
    // dy[jw - kHalo*VE ...) and x[jw - kHalo*VE ...), zero outside the rows.
    issue_dy_x_windows<T>(dybuf[warp], xbuf[warp], p, b, c, jw - kHalo * VE, Cfg::kUnits, lane);
    cp_async_commit();
    const int e_gi = kHalo * VE - (KD - P);  // dy window element of dy[jw - ((K-1)*D - P)]
    const int off_gi = e_gi & 1;
    uint32_t a[Cfg::kSteps][4];
    if (p.grad_x != nullptr) toeplitz_a<K, D, Cfg::kSteps, true>(a, p, c, off_gi);
    cp_async_wait<0>();
    __syncwarp();

    // grad-input first: its A fragments are then dead while grad-weight's accumulators live.
    if (p.grad_x != nullptr) {
      toeplitz_outputs<T, Cfg::kSteps, Cfg::kGroups>(a, reinterpret_cast<const unsigned short*>(dybuf[warp]),
                                                     e_gi - off_gi, 0.0f, kActNone,
                                                     reinterpret_cast<unsigned short*>(obuf[warp]));
      __syncwarp();
      store_warp_outputs<Cfg::kWarpOut / 8>(
          obuf[warp], static_cast<unsigned short*>(p.grad_x) + b * p.gx_stride_b + c * p.gx_stride_c, p.gx_stride_l,
          jw, p.in_length);
    }

    // grad-weight
    float cacc[kMT][2][4];
    toeplitz_gw_zero<kMT>(cacc);
    toeplitz_gw_mma<T, K, D, V>(cacc, xbuf[warp], dybuf[warp], P);
    gwk = toeplitz_gw_diagonals<K, D, kMT>(cacc, cbuf[warp], P);
    // grad-bias: the lane's V outputs (zero past the row)
    float dyv[V];
    read_window<T>(dybuf[warp], kHalo + lane * (V / VE), 0, dyv);
#pragma unroll
    for (int i = 0; i < V; ++i) gb += dyv[i];

  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) gb += __shfl_xor_sync(0xffffffffu, gb, off);
  if (lane < K) sums[warp][lane] = gwk;
  if (lane == 0) sums[warp][K] = gb;
  store_block_partials<K>(p, sums, blk.split(), c);
}

// The sum of the 16-bit elements of N window slots from slot s0 of a swizzled window (issue_window<T, true>).
template <typename T, int N>
__device__ __forceinline__ float sum_swizzled_slots(const uint4* win, int s0) {
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint4 u = win[swizzled_slot(s0 + i)];
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j)
      sum += to_acc(from_bits<T>(static_cast<unsigned short>(w[j] & 0xffffu))) +
             to_acc(from_bits<T>(static_cast<unsigned short>(w[j] >> 16)));
  }
  return sum;
}

// The Toeplitz backward with each warp streaming a contiguous run of 32V-position chunks through a ring
// of kRing cp.async slot pairs (x, dy) (backward variant 6): the loads of the next kRing - 1 chunks are
// in flight while a chunk's MMAs run, and a row's grad-input A fragments are built, and its grad-weight
// accumulators reduced, once per row. Warp w of W takes chunks [w * U / W, (w + 1) * U / W) of the
// U = rows * ceil(max(Lin, Lout) / 32V) chunks, rows (b, c) in order. With at least W rows every warp
// has at least a row's worth of chunks, so a row is cut at most once: its sums go to split 2b (the
// part from the row's start) and 2b + 1 (the rest, or zeros when the row is not cut).
// kHankel (backward variant 7): grad-input by the Hankel product (hankel_outputs on the dy window, taps
// reversed) instead of toeplitz_outputs + store_warp_outputs, and both windows swizzled, which also makes
// grad-weight's ldmatrix.trans reads conflict-free.
template <typename T, int K, int D, int V, int kRing, bool kHankel = false>
__global__ void __launch_bounds__(kThreads, CONVKIT_DW_TOEPLITZ_BWD_MIN_BLOCKS)
    conv1d_bwd_dw_toeplitz_ring_kernel(const Conv1dParams p) {
  using Cfg = ToeplitzBwdCfg<T, K, D, V>;
  using HCfg = HankelCfg<K, D, V>;
  constexpr int VE = Cfg::VE, KD = Cfg::KD, kHalo = Cfg::kHalo, kMT = Cfg::kMT;
  // The Hankel grad-input reads the dy window from slot e_gi / 8 <= kHalo on; swizzled slots swap in pairs,
  // so the count is even.
  constexpr int kHankelNeed = kHalo + HCfg::kUnits > Cfg::kUnits ? kHalo + HCfg::kUnits : Cfg::kUnits;
  constexpr int kHankelUnits = (kHankelNeed + 1) / 2 * 2;
  constexpr int kUnits = kHankel ? kHankelUnits : Cfg::kUnits;
  __shared__ uint4 ring[kThreads / 32][kRing][2][kUnits];  // [slot][0: dy, 1: x]
  __shared__ uint4 obuf[kThreads / 32][kHankel ? 1 : Cfg::kWarpOut / 8];
  __shared__ float cbuf[kThreads / 32][16 * 17];
  static_assert(sizeof(ring) + sizeof(obuf) + sizeof(cbuf) <= 48 * 1024, "static shared memory: at most 48 KB");
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t C = p.out_channels;
  const int64_t chunks = ceil_div(max(p.in_length, p.out_length), int64_t{Cfg::kWarpOut});
  const int64_t units = p.batch * C * chunks;
  const int64_t warps = int64_t{gridDim.x} * (kThreads / 32), wid = int64_t{blockIdx.x} * (kThreads / 32) + warp;
  const int64_t u0 = wid * units / warps, u1 = (wid + 1) * units / warps;
  const int P = static_cast<int>(p.pad_left);
  // Chunk u's (b, c, chunk) for the loads in flight (fetch) and the chunk being computed (cur), advanced
  // by one per chunk: no divisions in the loop (three per chunk took ~10 % of the instructions, ncu).
  ChunkCursor fetch(u0, C, chunks), cur = fetch;
  auto issue = [&](int slot) {
    issue_dy_x_windows<T, kHankel>(ring[warp][slot][0], ring[warp][slot][1], p, fetch.b, fetch.c,
                                   fetch.ch * Cfg::kWarpOut - kHalo * VE, kUnits, lane);
    fetch.advance(C, chunks);
  };
#pragma unroll
  for (int s = 0; s < kRing - 1; ++s) {
    if (u0 + s < u1) issue(s);
    cp_async_commit();
  }
  const int e_gi = kHalo * VE - (KD - P);  // dy window element of dy[jw - ((K-1)*D - P)]
  const int off_gi = e_gi & 1;
  const int n_steps_gi = HCfg::steps(e_gi & 7);  // (kHankel)
  const int64_t n_weight = C * K;
  float* partial = static_cast<float*>(p.workspace);
  uint32_t a[Cfg::kSteps][4];
  uint32_t wf[HCfg::kSteps][2][2];
  float cacc[kMT][2][4];
  float gb = 0.0f;
  int64_t b = 0, c = 0, seg0 = 0;  // the row in progress and the chunk its segment started at
  // The row's sums so far (segment [seg0, end) of its chunks) to its split; `cut`: the row goes on in
  // the next warp, which writes the other split.
  auto flush = [&](bool cut) {
    const float gwk = toeplitz_gw_diagonals<K, D, kMT>(cacc, cbuf[warp], P);
    float s = gb;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    const int64_t split = 2 * b + (seg0 == 0 ? 0 : 1);
    if (lane < K) partial[split * n_weight + c * K + lane] = gwk;
    if (lane == 0) partial[p.weight_splits * n_weight + split * C + c] = s;
    if (seg0 == 0 && !cut) {  // the row is whole here: its second split is zero
      if (lane < K) partial[(split + 1) * n_weight + c * K + lane] = 0.0f;
      if (lane == 0) partial[p.weight_splits * n_weight + (split + 1) * C + c] = 0.0f;
    }
  };
  int slot = 0;
  for (int64_t u = u0; u < u1; ++u) {
    const int ahead = slot == 0 ? kRing - 1 : slot - 1;  // the slot of chunk u + kRing - 1 (read at u - 1)
    if (u + kRing - 1 < u1) issue(ahead);
    cp_async_commit();
    const int64_t ch = cur.ch;
    if (u == u0 || ch == 0) {  // a new row (the warp's chunks are consecutive)
      if (u != u0) flush(false);
      b = cur.b;
      c = cur.c;
      seg0 = ch;
      if (p.grad_x != nullptr) {
        if constexpr (kHankel) {
          hankel_w<K, D, HCfg::kSteps, true>(wf, p, c, e_gi & 7);
        } else {
          toeplitz_a<K, D, Cfg::kSteps, true>(a, p, c, off_gi);
        }
      }
      toeplitz_gw_zero<kMT>(cacc);
      gb = 0.0f;
    }
    cp_async_wait<kRing - 1>();
    __syncwarp();
    const uint4* dyw = ring[warp][slot][0];
    const int64_t jw = ch * Cfg::kWarpOut;
    if (p.grad_x != nullptr) {
      if constexpr (kHankel) {
        hankel_outputs<T, HCfg::kSteps, HCfg::kGroups>(
            wf, n_steps_gi, tc::smem_u32(dyw), e_gi / 8, 0.0f, kActNone,
            static_cast<unsigned short*>(p.grad_x) + b * p.gx_stride_b + c * p.gx_stride_c, p.gx_stride_l, jw,
            p.in_length);
      } else {
        toeplitz_outputs<T, Cfg::kSteps, Cfg::kGroups>(a, reinterpret_cast<const unsigned short*>(dyw), e_gi - off_gi,
                                                       0.0f, kActNone, reinterpret_cast<unsigned short*>(obuf[warp]));
        __syncwarp();
        store_warp_outputs<Cfg::kWarpOut / 8>(
            obuf[warp], static_cast<unsigned short*>(p.grad_x) + b * p.gx_stride_b + c * p.gx_stride_c, p.gx_stride_l,
            jw, p.in_length);
      }
    }
    toeplitz_gw_mma<T, K, D, V, kMT, kHankel>(cacc, ring[warp][slot][1], dyw, P);
    if constexpr (kHankel) {
      gb += sum_swizzled_slots<T, V / VE>(dyw, kHalo + lane * (V / VE));
    } else {
      float dyv[V];
      read_window<T>(dyw, kHalo + lane * (V / VE), 0, dyv);
#pragma unroll
      for (int i = 0; i < V; ++i) gb += dyv[i];
    }
    __syncwarp();  // the slot and obuf are reused
    cur.advance(C, chunks);
    slot = slot + 1 == kRing ? 0 : slot + 1;
  }
  if (u0 < u1) flush(u1 % chunks != 0);  // u1 inside the row: the next warp has its rest
  cp_async_wait<0>();
}

// Whether the ring backward runs these params: the Toeplitz backward's conditions, and at least as many
// rows as the grid can have warps (kThreads / 32 per block, at most 2048 threads per SM), so a row is cut
// at most once (weight_splits = 2 * B).
inline bool bwd_toeplitz_ring_ok(const Conv1dParams& p, int V) {
  return bwd_toeplitz_ok(p, V) && p.batch * p.out_channels >= int64_t{p.num_sms} * (2048 / 32);
}

}  // namespace dw
}  // namespace convkit
