// Dense and grouped grad-weight (+ grad-bias) on wgmma with both operands brought in by TMA from (B, C, L) rows of x
// and dy, sm_90a, fp16/bf16 in, fp32 accumulation (session 23). dispatch.cpp
// (dense_grad_weight) runs it first wherever conv1d_bwd_weight_dense_tma_supports(p) holds; CONVKIT_DENSE_TMA_WGRAD=0
// switches it off. Checked by test_dense_tma_grad_weight (a child process). H100, bf16 (session 24): tcn 0.293 ms
// against 0.63 for the register-staged wgmma kernel, wavenet 0.216 against 0.53 (mma.sync); fwd+bwd tcn 1.645 ->
// 1.321 ms, wavenet 1.465 -> 1.147.
//
// Why: the register-staged wgmma grad-weight (conv1d_bwd_weight_dense_wgmma.cu) spends its time staging (loads,
// realignment, transposes by the threads), not in its MMAs (session 14); at stride 1 both operands are already in
// the layout wgmma wants when x and dy rows are 16-byte aligned and the taps' shifts k*D - P are multiples of 8
// positions (the copy engine's boxes start 16-byte aligned along the innermost dimension). Elsewhere (stride > 1,
// other shifts, x or dy rows a map cannot describe) the launcher first copies them into that form in the workspace
// (session 29, tap_rows_kernel: x's K tap rows, dy's rows padded to whole 16-byte units; session 32,
// tap_rows_staged_kernel: the same through shared memory where a block's span fits), where K <= 4 and Cout/groups >=
// 256 by default (w2v_k3s2; taps_mode).
//
//   dw[co, ci, k] = sum over r = (b, j) of dy[b, g*Cout_g + co, j] * x[b, g*Cin_g + ci, j + k*D - P]
//
// A (M = co, reduction = j) is dy rows: K-major; B of tap k (N = ci, reduction = j) is x rows shifted by k*D - P:
// K-major too. A stage is one chunk of 64 positions j0 .. j0 + 63 of one batch row: a TMA box of dy (64 positions x
// 128 channels: 128-byte rows, 128-byte swizzle, the canonical K-major SW128 layout: 8-row atoms, SBO 1024) and one
// box of x per tap (64 positions from j0 + k*D - P x 64 channels); positions outside [0, L) / [0, Lout) arrive as
// zeros. Per 16-position step each warpgroup (64 rows of co) issues one m64n64k16 per tap (acc[k]) and one
// m64n8k16 against a shared block of ones (grad-bias: the row sums of dy, column 0). A block owns co0 .. co0 + 127
// x ci0 .. ci0 + 63 x all taps of one group and a contiguous range of chunks (its split); a producer warp issues the
// stages through a ring (full / empty mbarriers, tma::produce_stages). Where Cout/groups <= 64 ("half" blocks: BM
// 64, grouped_g8) both warpgroups take the same 64 rows and each half of every chunk's positions, writing their
// sums as two partial sets. The fp32 partial sums go to the workspace and sum_weight_bias_partials adds them in a
// fixed order (the same bits on every run), as the other grad-weight kernels do.
#include <algorithm>
#include <cstdint>

#include "kernels/common.cuh"
#include "kernels/launchers.h"
#include "kernels/mma_common.cuh"
#include "kernels/tma_common.cuh"
#include "kernels/wgmma_common.cuh"

#pragma nv_diag_suppress 177

namespace convkit {
namespace {
using namespace tc;
using namespace tma;

constexpr int kThreads = 256;                 // two consumer warpgroups
constexpr int kBlockThreads = kThreads + 32;  // and the producer warp
constexpr int kMaxTaps = 4;                    // acc: K x 32 fp32 per thread (K 5 spills: 160 registers)
constexpr int kMaxSplitTaps = 8;               // half blocks with the taps split between the warpgroups (KW <= 4)
constexpr int BM = 128, BN = 64, J = 64;       // co x ci per block (BM 64 for half blocks), positions per chunk
constexpr int kBBytes = BN * J * 2;
constexpr int kOnesBytes = 8 * 128;            // B of the grad-bias MMA: 8 rows of 64 ones

struct GwTmaPlan {
  int k, d, p;
  int taps;     // 1: x read from its tap rows (tap_rows_kernel's copy in the workspace), every box at position j0
  int dy_rows;  // 1: dy read from a copy with rows of lt elements (its own rows are not whole 16-byte units)
  int64_t lt;   // the copies' row length (Lout rounded up to 8: whole 16-byte units)
  int64_t ws_floats, xt_offset, dyt_offset;  // the partial sums' floats; where the copies start (floats)
  int half;     // 1: BM 64, warpgroup wgi takes 16-position steps 2 wgi, 2 wgi + 1 of each chunk (partial set wgi)
  int bm, a_bytes, stage_bytes, ns, ones_off, bar_off, smem_bytes;
  int64_t cin_g, cout_g, n_g, m_tiles, n_tiles, chunks_per_row, total_chunks, splits, per_split;
  int tsplit;   // 1 (half blocks, K 5..8, opt-in): warpgroup wgi takes taps wgi * KW .. of every step instead (one set)
};

// HALF: the half-block form (q.half); a template argument so that each warpgroup's steps are a fixed count from a
// warpgroup-dependent start (a runtime trip count made ptxas serialise the wgmma calls, C7520). KW < K (with HALF:
// q.tsplit): each warpgroup accumulates KW taps (wgi * KW ..; a tap past K repeats tap K - 1 and is not written) over
// every step of the chunk, so K up to 8 fits the registers; both write one partial set, the grad-bias warpgroup 0's.
template <typename T, int K, bool HALF, int KW = K>
__global__ void __launch_bounds__(kBlockThreads, 1)
    conv1d_bwd_weight_dense_tma_kernel(const __grid_constant__ CUtensorMap dymap, const __grid_constant__ CUtensorMap xmap,
                                       const Conv1dParams p, const GwTmaPlan q) {
#ifndef CONVKIT_WGMMA_DEVICE
  __trap();  // sm_90a only
#else
  extern __shared__ unsigned char smem_raw[];
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5, wgi = warp >> 2;
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;  // 128-byte swizzled destinations: 1024-aligned
  const uint32_t bar0 = base + q.bar_off, ones = base + q.ones_off;
  // blockIdx.x = ((g * m_tiles + mt) * n_tiles + nt) * splits + split
  int64_t rest, split, nt, mt, g;
  divmod(static_cast<int64_t>(blockIdx.x), q.splits, rest, split);
  divmod(rest, q.n_tiles, rest, nt);
  divmod(rest, q.m_tiles, g, mt);
  const int64_t co0 = mt * q.bm, ci0 = nt * BN;
  const int64_t c_begin = split * q.per_split;
  const int64_t c_end = c_begin + q.per_split < q.total_chunks ? c_begin + q.per_split : q.total_chunks;
  const int64_t n = c_end > c_begin ? c_end - c_begin : 0;  // stages of this block

  // Stage i: chunk c_begin + i (batch row b, positions j0 ..): dy's box, then one x box per tap.
  auto issue = [&](int64_t i) {
    int64_t b, jc;
    divmod(c_begin + i, q.chunks_per_row, b, jc);
    const int j0 = static_cast<int>(jc * J);
    const int slot = static_cast<int>(i % q.ns);
    const uint32_t bar = bar0 + 8u * slot, dst = base + slot * q.stage_bytes;
    mbar_arrive_expect_tx(bar, static_cast<uint32_t>(q.a_bytes + K * kBBytes));
    load_4d(dst, &dymap, j0, static_cast<int>(co0), static_cast<int>(g), static_cast<int>(b), bar);
#pragma unroll
    for (int k = 0; k < K; ++k) {  // tap rows: row set g * K + k, already shifted
      const int xj = q.taps ? j0 : j0 + k * q.d - q.p, xg = q.taps ? static_cast<int>(g) * K + k : static_cast<int>(g);
      load_4d(dst + q.a_bytes + k * kBBytes, &xmap, xj, static_cast<int>(ci0), xg, static_cast<int>(b), bar);
    }
  };

  if (tid == 0) {
    prefetch_map(&dymap);
    prefetch_map(&xmap);
    init_ring(bar0, q.ns, 1, kMaxSlots, 2);
  }
  if (tid < kOnesBytes / 4) {  // the ones block (1.0 in T, two per word; the swizzle permutes ones into ones)
    const uint32_t one = bits16<T>(1.f);
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(ones + 4 * tid), "r"(one | (one << 16)));
  }
  wg::fence_proxy_async();  // the ones, read by wgmma
  __syncthreads();
  if (warp == 8) {  // the producer warp
    if (lane == 0) produce_stages(n, q.ns, bar0, kMaxSlots, issue);
    return;
  }

  constexpr bool kSplit = KW < K;
  static_assert(!kSplit || (HALF && 2 * KW >= K), "taps split between the warpgroups of half blocks only");
  float acc[KW][32], accb[4];
#pragma unroll
  for (int k = 0; k < KW; ++k)
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[k][i] = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) accb[i] = 0.f;
  constexpr uint64_t kSw128 = uint64_t{1} << 62;
  const int row0 = HALF ? 0 : wgi * 64;           // this warpgroup's rows of the A box
  const int h0 = HALF && !kSplit ? 2 * wgi : 0;   // and its first 16-position step
  constexpr int kSteps = HALF && !kSplit ? J / 32 : J / 16;
  const int k0 = kSplit ? wgi * KW : 0;           // and its first tap
  for (int64_t s = 0; s < n; ++s) {
    const int slot = static_cast<int>(s % q.ns);
    mbar_wait(bar0 + 8u * slot, static_cast<uint32_t>((s / q.ns) & 1));
#pragma unroll
    for (int k = 0; k < KW; ++k) wg::fence_acc(acc[k]);
    wg::fence_acc(accb);
    wg::fence();
    const uint32_t a_base = base + slot * q.stage_bytes + row0 * 128, b_base = base + slot * q.stage_bytes + q.a_bytes;
#pragma unroll
    for (int hh = 0; hh < kSteps; ++hh) {  // 16 positions (32 bytes of every row) per step
      const int h = h0 + hh;
      const uint64_t da = wg::smem_desc(a_base + h * 32, 16, 1024) | kSw128;
#pragma unroll
      for (int k = 0; k < KW; ++k) {
        const int tap = kSplit ? min(k0 + k, K - 1) : k;
        wg::mma_m64n64k16_t<T, 0>(acc[k], da, wg::smem_desc(b_base + tap * kBBytes + h * 32, 16, 1024) | kSw128);
      }
      wg::mma_m64n8k16<T>(accb, da, wg::smem_desc(ones + h * 32, 16, 1024) | kSw128);
    }
    wg::commit();
    wg::wait<1>();  // this warpgroup's calls of stage s - 1 are done: release its slot
    release_previous_slot(bar0, kMaxSlots, s, q.ns, tid);
  }
  wg::wait<0>();
#pragma unroll
  for (int k = 0; k < KW; ++k) wg::fence_acc(acc[k]);
  wg::fence_acc(accb);

  // Partial sums of this split (half blocks: partial set 2 split + wgi). acc[k][4i + 2h + e] = (row
  // 16 * (warp % 4) + lane / 4 + 8h, column 8i + 2 * (lane % 4) + e) of the warpgroup's 64 x 64 tile of tap k;
  // accb[2h] = column 0 (the row sum).
  float* part = static_cast<float*>(p.workspace);
  const int64_t n_weight = p.out_channels * q.n_g, sets = q.splits * (HALF && !kSplit ? 2 : 1);
  const int64_t set = HALF && !kSplit ? 2 * split + wgi : split;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t co = co0 + row0 + (warp & 3) * 16 + (lane >> 2) + 8 * h;
    if (co >= q.cout_g) continue;
    if (p.w != nullptr) {
      float* dst = part + set * n_weight + (g * q.cout_g + co) * q.n_g;
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t ci = ci0 + 8 * i + 2 * (lane & 3) + e;
          if (ci >= q.cin_g) continue;
#pragma unroll
          for (int k = 0; k < KW; ++k)
            if (k0 + k < K) dst[ci * K + k0 + k] = acc[k][4 * i + 2 * h + e];
        }
    }
    if (p.bias != nullptr && nt == 0 && (lane & 3) == 0 && (!kSplit || wgi == 0))
      part[sets * n_weight + set * p.out_channels + g * q.cout_g + co] = accb[2 * h];
  }
#endif
}

bool switched_on() {
  static const bool on = !env_equals("CONVKIT_DENSE_TMA_WGRAD", "0");
  return on;
}

// Where x cannot be read straight from its rows (stride > 1, tap shifts k*D - P that are not whole 16-byte units,
// x rows a map cannot describe: kb67, w2v_k3s2, views), the launcher first copies x's tap rows (tap_rows_kernel)
// into the workspace: K * Cin * Lout elements a batch row written, read back by TMA, which pays where many output
// channels share them (w2v_k3s2: Cout 512). CONVKIT_DENSE_TMA_WGRAD_TAPS=0: never; =1: wherever the kernel's other
// conditions hold, K 5..8 in half blocks (q.tsplit) included; default: K <= 4 and Cout/groups >= kTapsMinCout, or
// K 5..8 with Cout/groups <= 64 where x's tap rows are copied through shared memory (grouped_g8_k5, H100, session 33:
// staged copy 0.345 + this kernel 0.376 ms against the mma.sync grad-weight's 1.021 ms of session 32).
constexpr int64_t kTapsMinCout = 256;
enum class TapsMode { kNever, kAlways, kDefaultRule };
TapsMode taps_mode() {
  static const TapsMode mode = env_equals("CONVKIT_DENSE_TMA_WGRAD_TAPS", "0")   ? TapsMode::kNever
                               : env_equals("CONVKIT_DENSE_TMA_WGRAD_TAPS", "1") ? TapsMode::kAlways
                                                                                  : TapsMode::kDefaultRule;
  return mode;
}

// The tap rows of x (16-bit elements moved as raw bits; a = the launch's arguments):
//   xt[b, g, k, ci, j] = x[b, g * Cin_g + ci, j * S + k * D - P] for j < Lout (zero outside the row), 0 for j >= Lout
// up to the row length lt, so that tap k's box of a chunk starts at j0 in row set g * K + k. With one tap, stride 1
// and no shift the same kernel gives dy rows of lt elements.
struct TapRowsArgs {
  const uint16_t* __restrict__ src;
  uint16_t* __restrict__ dst;
  int64_t sb, sc, sl, len, lout, lt, s, d, p, batch;
  int channels, ch_g, groups, k;
};

// Where row c of batch b goes: tap 0's row (channel ci of group g) in xt's layout above; tap k's is k * ch_g * lt on.
__device__ inline uint16_t* tap_row(const TapRowsArgs& a, int64_t b, int c) {
  const int g = c / a.ch_g, ci = c - g * a.ch_g;
  return a.dst + (((b * a.groups + g) * a.k) * a.ch_g + ci) * a.lt;
}

// A thread copies kTapRowsUnroll positions 256 apart, a tap at a time, each tap's loads issued before its stores (a
// load, then its store, one at a time, would leave a few KB in flight per SM, far below what DRAM needs).
constexpr int kTapRowsUnroll = 8;

__global__ void __launch_bounds__(256) tap_rows_kernel(const TapRowsArgs a) {
  constexpr int U = kTapRowsUnroll;
  for (int64_t b = blockIdx.z; b < a.batch; b += gridDim.z)
    for (int c = blockIdx.y; c < a.channels; c += gridDim.y) {
      const uint16_t* row = a.src + b * a.sb + c * a.sc;
      uint16_t* out = tap_row(a, b, c);
      const int64_t tap_stride = static_cast<int64_t>(a.ch_g) * a.lt;
      for (int64_t j0 = static_cast<int64_t>(blockIdx.x) * 256 * U + threadIdx.x; j0 < a.lt;
           j0 += int64_t{gridDim.x} * 256 * U) {
        uint16_t* o = out;
        for (int k = 0; k < a.k; ++k, o += tap_stride) {
          const int64_t t0 = j0 * a.s - a.p + k * a.d;
          uint16_t v[U];
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const int64_t t = t0 + u * 256 * a.s;
            v[u] = j0 + u * 256 < a.lout && t >= 0 && t < a.len ? __ldg(row + t * a.sl) : uint16_t{0};
          }
#pragma unroll
          for (int u = 0; u < U; ++u)
            if (j0 + u * 256 < a.lt) o[j0 + u * 256] = v[u];
        }
      }
    }
}

// The same copy with the source staged in shared memory (session 32): tap_rows_kernel ran at ~1.5 TB/s on an H100
// (w2v_k3s2: 1.30 ms for x's tap rows, 0.54 ms for dy's rows), reading every tap's elements from global memory (a
// stride-2 warp load brings 128 bytes for 64 used) with at most 8 loads in flight per thread and only the first
// tap's loads reaching DRAM. Here a block takes kStagedJ output positions of one (batch, channel) row: its threads
// first load the span of source elements every tap of those positions reads, (n - 1) * S + (K - 1) * D + 1 of them,
// into shared memory, then write each tap's row from there. Spans over kStagedSpanMax elements (large strides or
// dilations) keep tap_rows_kernel. H100 (session 33, 2-byte loads and stores; CONVKIT_TAP_ROWS_STAGED=0 for the old
// copy): x's tap rows w2v_k3s2 1.307 -> 1.171 ms, kb67 1.642 -> 1.069, grouped_g8 0.658 -> 0.345; dy's plain rows
// (one tap, stride 1) lost: w2v 0.546 -> 0.642, kb67 1.363 -> 1.584.
// Session 34: 16-byte accesses both ways (H100, one process: x's tap rows w2v_k3s2 0.770 ms, kb67 0.862, grouped_g8
// 0.323; dy's plain rows w2v 0.473, kb67 1.139, now staged too). Where the source positions are contiguous (sl == 1)
// the span is loaded in aligned 16-byte units from the unit holding its first element (o elements before it; units
// that reach past either end of the row element by element, zeros outside); a warp then gathers 256 positions of a
// tap into its own 512 bytes of shared memory (lane-consecutive 2-byte reads: no bank conflicts for S <= 2) and
// stores them as 16-byte units (the workspace rows start 16-byte aligned and lt is a multiple of 8).
constexpr int kStagedJ = 2048;
constexpr int kStagedSpanMax = 12288;  // 24 KB of shared memory
constexpr int kStagedUnroll = 16;       // 2-byte loads in flight per thread (strided source)
constexpr int kStagedOutBytes = 8 * 512;  // a warp's 256 positions

int64_t staged_span(int64_t s, int64_t d, int k) { return (kStagedJ - 1) * s + (k - 1) * d + 1; }
int64_t staged_smem_bytes(int64_t span) { return (ceil_div(span, int64_t{8}) + 1) * 16 + kStagedOutBytes; }

// MinBlocks 6 (40 registers) with 3 16-byte loads in flight per thread (w2v_k3s2: 513 units a block; up to 1537
// for the widest spans, in rounds); 4 (64 registers) with 6: CONVKIT_TAP_ROWS_OCC=4, to time both.
template <int MinBlocks, int VecUnroll>
__global__ void __launch_bounds__(256, MinBlocks) tap_rows_staged_kernel(const TapRowsArgs a) {
  extern __shared__ uint4 smem4[];
  uint16_t* const out_buf = reinterpret_cast<uint16_t*>(smem4) + (threadIdx.x >> 5) * 256;
  uint16_t* const raw = reinterpret_cast<uint16_t*>(smem4) + kStagedOutBytes / 2;  // the span, o elements in
  uint4* const raw4 = smem4 + kStagedOutBytes / 16;
  const int lane = threadIdx.x & 31, wj = (threadIdx.x >> 5) * 256;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kStagedJ;
  const int jn = static_cast<int>(min(int64_t{kStagedJ}, a.lt - j0));  // positions this block writes (8s)
  const int jv = static_cast<int>(max(int64_t{0}, min(int64_t{kStagedJ}, a.lout - j0)));  // of them inside Lout
  const int n = jv > 0 ? static_cast<int>((jv - 1) * a.s + (a.k - 1) * a.d + 1) : 0;   // <= kStagedSpanMax
  const int64_t t_first = j0 * a.s - a.p;
  const int s = static_cast<int>(a.s), d = static_cast<int>(a.d);
  const int64_t tap_stride = static_cast<int64_t>(a.ch_g) * a.lt;
  for (int64_t b = blockIdx.z; b < a.batch; b += gridDim.z)
    for (int c = blockIdx.y; c < a.channels; c += gridDim.y) {
      const uint16_t* row = a.src + b * a.sb + c * a.sc;
      int o = 0;  // raw[o + i] holds source position t_first + i
      __syncthreads();  // the previous row's taps are written
      if (a.sl == 1) {
        o = static_cast<int>(((reinterpret_cast<uintptr_t>(row) + static_cast<uintptr_t>(t_first * 2)) & 15) >> 1);
        const int64_t tu = t_first - o;  // the first unit's first position: row + tu is 16-byte aligned
        const int units = n > 0 ? (o + n + 7) >> 3 : 0;
        for (int q0 = 0; q0 < units; q0 += 256 * VecUnroll) {
          uint4 v[VecUnroll];
#pragma unroll
          for (int u = 0; u < VecUnroll; ++u) {
            const int q = q0 + u * 256 + threadIdx.x;
            const int64_t t = tu + int64_t{8} * q;
            if (q >= units) {
              v[u] = make_uint4(0, 0, 0, 0);
            } else if (t >= 0 && t + 8 <= a.len) {
              v[u] = __ldg(reinterpret_cast<const uint4*>(row + t));
            } else {  // a unit at either end of the row
              uint16_t e[8];
#pragma unroll
              for (int i = 0; i < 8; ++i) e[i] = t + i >= 0 && t + i < a.len ? __ldg(row + t + i) : uint16_t{0};
              v[u] = pack8(e);
            }
          }
#pragma unroll
          for (int u = 0; u < VecUnroll; ++u)
            if (q0 + u * 256 + threadIdx.x < units) raw4[q0 + u * 256 + threadIdx.x] = v[u];
        }
      } else {
        for (int i0 = 0; i0 < n; i0 += 256 * kStagedUnroll) {
          uint16_t v[kStagedUnroll];
#pragma unroll
          for (int u = 0; u < kStagedUnroll; ++u) {
            const int i = i0 + u * 256 + threadIdx.x;
            const int64_t t = t_first + i;
            v[u] = i < n && t >= 0 && t < a.len ? __ldg(row + t * a.sl) : uint16_t{0};
          }
#pragma unroll
          for (int u = 0; u < kStagedUnroll; ++u)
            if (i0 + u * 256 + threadIdx.x < n) raw[i0 + u * 256 + threadIdx.x] = v[u];
        }
      }
      __syncthreads();
      uint16_t* dst = tap_row(a, b, c) + j0 + wj + 8 * lane;
      const uint16_t* src = raw + o + (wj + lane) * s;
      for (int k = 0; k < a.k; ++k, dst += tap_stride, src += d) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const int j = wj + 32 * i + lane;
          out_buf[32 * i + lane] = j < jv ? src[32 * i * s] : uint16_t{0};
        }
        __syncwarp();
        if (wj + 8 * lane < jn) *reinterpret_cast<uint4*>(dst) = reinterpret_cast<const uint4*>(out_buf)[lane];
        __syncwarp();
      }
    }
}

// Rows a 4-D map (position, channel in group, group, batch) can describe: positions contiguous, channel and batch
// strides multiples of 16 bytes, 16-byte aligned, strides ordered.
bool rows_ok(const void* ptr, int64_t sb, int64_t sc, int64_t sl, int64_t c, int64_t l) {
  return sl == 1 && sc % 8 == 0 && sb % 8 == 0 && sc >= l && sb >= c * sc && (reinterpret_cast<uintptr_t>(ptr) & 15) == 0;
}

// Partial sets a split writes: two for half blocks that split the positions, else one.
int sets_per_split(const GwTmaPlan& q) { return q.half && !q.tsplit ? 2 : 1; }

bool make_plan(const Conv1dParams& p, GwTmaPlan& q) {
#ifndef CONVKIT_SM90A
  (void)p;
  (void)q;
  return false;
#else
  if (!switched_on() || !sm90a_16bit_whole_groups(p)) return false;
  if (p.stride < 1 || p.kernel_size < 1 || p.kernel_size > kMaxSplitTaps) return false;
  if (p.dilation < 1 || p.dilation > (1 << 20) || p.pad_left < 0 || p.pad_left > (1 << 20)) return false;
  if (p.batch < 1 || p.in_length < 1 || p.out_length < 1) return false;
  if (p.out_length + J >= (int64_t{1} << 31) || p.batch >= (int64_t{1} << 31))
    return false;  // TMA coordinates are 32-bit
  q.cin_g = p.in_channels / p.groups;
  q.cout_g = p.out_channels / p.groups;
  if (q.cin_g < 32 || q.cout_g < 32) return false;  // narrower tiles waste most of the 128 x 64 tile
  if (encode_tiled() == nullptr) return false;
  // x straight from its rows: every x box starts at position j0 + k*D - P, its innermost coordinate: the copy engine
  // needs that start 16-byte aligned (an unaligned one is an illegal instruction, as Triton found (issue 7385) and,
  // most likely, this project's reverted direct-dy grad-input did: b8c1fc1), so k*D - P must be a multiple of 8 for
  // every tap (tcn: D 8, P 8; wavenet: D 512, P 0). Else from tap rows (taps_mode).
  const bool direct = p.stride == 1 && p.pad_left % 8 == 0 && (p.kernel_size == 1 || p.dilation % 8 == 0) &&
                      rows_ok(p.x, p.x_stride_b, p.x_stride_c, p.x_stride_l, p.in_channels, p.in_length) &&
                      p.in_length + (p.kernel_size - 1) * p.dilation + J < (int64_t{1} << 31);
  const bool dy_direct = rows_ok(p.y, p.y_stride_b, p.y_stride_c, p.y_stride_l, p.out_channels, p.out_length);
  q.taps = direct ? 0 : 1;
  q.dy_rows = dy_direct ? 0 : 1;
  q.lt = ceil_div(p.out_length, 8) * 8;
  const bool copies = q.taps || q.dy_rows;
  const bool tsplit = p.kernel_size > kMaxTaps;
  const TapsMode mode = taps_mode();
  if (copies) {
    if (mode == TapsMode::kNever) return false;
    if (mode == TapsMode::kDefaultRule) {
      const bool wide = !tsplit && q.cout_g >= kTapsMinCout;
      const bool split = tsplit && q.cout_g <= 64 && q.taps &&
                         staged_span(p.stride, p.dilation, static_cast<int>(p.kernel_size)) <= kStagedSpanMax;
      if (!wide && !split) return false;
    }
    if (p.in_channels >= (int64_t{1} << 31) || p.out_channels >= (int64_t{1} << 31) ||
        p.groups * p.kernel_size >= (int64_t{1} << 31))
      return false;
    const int64_t elements = p.batch * q.lt * (q.taps * p.in_channels * p.kernel_size + q.dy_rows * p.out_channels);
    if (elements > (int64_t{1} << 31)) return false;  // at most 4 GiB of copies
  }
  q.k = static_cast<int>(p.kernel_size);
  q.d = static_cast<int>(p.dilation);
  q.p = static_cast<int>(p.pad_left);
  q.half = q.cout_g <= 64 ? 1 : 0;
  q.tsplit = tsplit ? 1 : 0;  // K 5..8: half blocks only; read straight from the rows only where opted in
  if (q.tsplit && (!q.half || (mode != TapsMode::kAlways && !copies))) return false;
  q.bm = q.half ? 64 : BM;
  q.a_bytes = q.bm * J * 2;
  q.stage_bytes = q.a_bytes + q.k * kBBytes;  // a multiple of 1024
  const int avail = wg::smem_optin_bytes() - 1024 - kOnesBytes - 16 * kMaxSlots;
  q.ns = std::min(6, avail / q.stage_bytes);
  if (q.ns < 3) return false;
  q.ones_off = q.ns * q.stage_bytes;
  q.bar_off = q.ones_off + kOnesBytes;
  q.smem_bytes = q.bar_off + 16 * kMaxSlots + 1024;
  q.n_g = q.cin_g * q.k;
  q.m_tiles = ceil_div(q.cout_g, q.bm);
  q.n_tiles = ceil_div(q.cin_g, BN);
  q.chunks_per_row = ceil_div(p.out_length, int64_t{J});
  q.total_chunks = p.batch * q.chunks_per_row;
  const int64_t pairs = p.groups * q.m_tiles * q.n_tiles;
  if (pairs >= (int64_t{1} << 31)) return false;
  // about two blocks' worth of work per SM; workspace <= ~256 MB (half blocks write two partial sets per split)
  const int64_t n_weight = p.out_channels * q.n_g;
  const int64_t cap = split_cap((n_weight + p.out_channels) * sets_per_split(q));
  const int64_t want = std::max<int64_t>(1, 2 * int64_t{p.num_sms > 0 ? p.num_sms : 1} / pairs);
  q.splits = plan_splits(want, q.total_chunks, cap, pairs, q.per_split);
  q.ws_floats = q.splits * sets_per_split(q) * (n_weight + p.out_channels);
  // the copies after the sums (two 16-bit elements a float, 256-byte aligned)
  q.xt_offset = ceil_div(q.ws_floats, 64) * 64;
  q.dyt_offset = q.xt_offset + (q.taps ? ceil_div(p.batch * p.in_channels * q.k * q.lt, 128) * 64 : 0);
  return true;
#endif
}

// The 4-D map of (B, C, L) rows: (position, channel in group, group, batch), box J positions x rows channels.
bool make_rows_map(CUtensorMap& map, bool fp16, const void* ptr, int64_t len, int64_t ch_g, int64_t groups,
                   int64_t batch, int64_t sc, int64_t sb, int rows) {
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(len), static_cast<cuuint64_t>(ch_g),
                              static_cast<cuuint64_t>(groups), static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(sc * 2), static_cast<cuuint64_t>(ch_g * sc * 2),
                                 static_cast<cuuint64_t>(sb * 2)};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(J), static_cast<cuuint32_t>(rows), 1, 1};
  const cuuint32_t estr[4] = {1, 1, 1, 1};
  return encode_tiled()(&map, fp16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4,
                        const_cast<void*>(ptr), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// tap_rows_kernel over rows of `channels` channels (groups of ch_g), taps from row position j * s + k * d - pad.
cudaError_t launch_tap_rows(const void* src, uint16_t* dst, int64_t sb, int64_t sc, int64_t sl, int64_t len,
                            int64_t channels, int64_t ch_g, int64_t s, int64_t d, int64_t pad, int k,
                            const Conv1dParams& p, const GwTmaPlan& q, cudaStream_t stream) {
  TapRowsArgs a;
  a.src = static_cast<const uint16_t*>(src);
  a.dst = dst;
  a.sb = sb, a.sc = sc, a.sl = sl, a.len = len, a.lout = p.out_length, a.lt = q.lt, a.s = s, a.d = d, a.p = pad;
  a.batch = p.batch;
  a.channels = static_cast<int>(channels), a.ch_g = static_cast<int>(ch_g);
  a.groups = static_cast<int>(p.groups), a.k = k;
  const unsigned gy = static_cast<unsigned>(std::min<int64_t>(channels, 65535));
  const unsigned gz = static_cast<unsigned>(std::min<int64_t>(p.batch, 65535));
  const int64_t span = staged_span(s, d, k);
  // CONVKIT_TAP_ROWS_STAGED=0: always the per-element copy (to time both copies in one process). With 16-byte
  // accesses the staged copy also wins on dy's plain rows (one tap, stride 1; session 34, H100: w2v 0.546 -> 0.473
  // ms, kb67 1.373 -> 1.139), which session 33's 2-byte form lost.
  static const bool staged_on = !env_equals("CONVKIT_TAP_ROWS_STAGED", "0");
  // (one kStagedJ range of positions a block)
  if (staged_on && span <= kStagedSpanMax && ceil_div(q.lt, int64_t{kStagedJ}) <= 65535 &&
      (reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
    const dim3 grid(static_cast<unsigned>(ceil_div(q.lt, int64_t{kStagedJ})), gy, gz);
    static const bool occ4 = env_equals("CONVKIT_TAP_ROWS_OCC", "4");
    if (occ4)
      tap_rows_staged_kernel<4, 6><<<grid, 256, staged_smem_bytes(span), stream>>>(a);
    else
      tap_rows_staged_kernel<6, 3><<<grid, 256, staged_smem_bytes(span), stream>>>(a);
  } else {
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>(ceil_div(q.lt, 256 * kTapRowsUnroll), 65535)), gy, gz);
    tap_rows_kernel<<<grid, 256, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

template <typename T, int K, bool HALF, int KW>
cudaError_t launch_form(const CUtensorMap& dymap, const CUtensorMap& xmap, const Conv1dParams& p, const GwTmaPlan& q,
                        cudaStream_t stream) {
  auto kernel = conv1d_bwd_weight_dense_tma_kernel<T, K, HALF, KW>;
  cudaError_t err = allow_max_dynamic_smem(kernel);  // (q.smem_bytes <= the opt-in limit: make_plan)
  if (err != cudaSuccess) return err;
  const int64_t grid = p.groups * q.m_tiles * q.n_tiles * q.splits;
  kernel<<<static_cast<unsigned>(grid), kBlockThreads, q.smem_bytes, stream>>>(dymap, xmap, p, q);
  return cudaGetLastError();
}

template <typename T, int K>
cudaError_t launch_taps(const CUtensorMap& dymap, const CUtensorMap& xmap, const Conv1dParams& p, const GwTmaPlan& q,
                        cudaStream_t stream) {
  if constexpr (K > kMaxTaps)  // q.tsplit: half blocks only (make_plan)
    return launch_form<T, K, true, (K + 1) / 2>(dymap, xmap, p, q, stream);
  else if (q.half)
    return launch_form<T, K, true, K>(dymap, xmap, p, q, stream);
  else
    return launch_form<T, K, false, K>(dymap, xmap, p, q, stream);
}

template <typename T>
cudaError_t launch_typed(const CUtensorMap& dymap, const CUtensorMap& xmap, const Conv1dParams& p, const GwTmaPlan& q,
                         cudaStream_t stream) {
  cudaError_t err;
  switch (q.k) {
    case 1: err = launch_taps<T, 1>(dymap, xmap, p, q, stream); break;
    case 2: err = launch_taps<T, 2>(dymap, xmap, p, q, stream); break;
    case 3: err = launch_taps<T, 3>(dymap, xmap, p, q, stream); break;
    case 4: err = launch_taps<T, 4>(dymap, xmap, p, q, stream); break;
    case 5: err = launch_taps<T, 5>(dymap, xmap, p, q, stream); break;
    case 6: err = launch_taps<T, 6>(dymap, xmap, p, q, stream); break;
    case 7: err = launch_taps<T, 7>(dymap, xmap, p, q, stream); break;
    default: err = launch_taps<T, 8>(dymap, xmap, p, q, stream); break;
  }
  if (err != cudaSuccess) return err;
  // p.w / p.bias are the grad-weight / grad-bias outputs here (see conv1d_params.h).
  return sum_weight_bias_partials<T>(p, p.workspace, q.splits * sets_per_split(q), p.out_channels * q.n_g,
                                     p.out_channels, p.w, p.bias, stream);
}

}  // namespace

bool conv1d_bwd_weight_dense_tma_supports(const Conv1dParams& p) {
  GwTmaPlan q;
  return make_plan(p, q);
}

bool conv1d_bwd_weight_dense_tma_taps(const Conv1dParams& p) {
  GwTmaPlan q;
  return make_plan(p, q) && (q.taps || q.dy_rows);
}

int64_t plan_conv1d_bwd_weight_dense_tma(Conv1dParams& p) {
  GwTmaPlan q;
  if (!make_plan(p, q)) return 0;
  p.weight_splits = q.splits * sets_per_split(q);  // partial sets (conv1d_params.h)
  p.bias_splits = p.weight_splits;
  return q.dy_rows ? q.dyt_offset + ceil_div(p.batch * p.out_channels * q.lt, 2) : q.taps ? q.dyt_offset : q.ws_floats;
}

cudaError_t launch_conv1d_bwd_weight_dense_tma(const Conv1dParams& p, cudaStream_t stream) {
  GwTmaPlan q;
  if (!make_plan(p, q) || q.splits * sets_per_split(q) != p.weight_splits || p.workspace == nullptr)
    return cudaErrorInvalidValue;
  CUtensorMap dymap, xmap;
  const bool fp16 = p.dtype == DType::kFloat16;
  float* ws = static_cast<float*>(p.workspace);
  if (q.taps) {  // x's tap rows into the workspace after the partial sums, then a map of them
    uint16_t* xt = reinterpret_cast<uint16_t*>(ws + q.xt_offset);
    const cudaError_t err = launch_tap_rows(p.x, xt, p.x_stride_b, p.x_stride_c, p.x_stride_l, p.in_length,
                                            p.in_channels, q.cin_g, p.stride, p.dilation, p.pad_left, q.k, p, q,
                                            stream);
    const int64_t sets = p.groups * q.k;
    if (err != cudaSuccess) return err;
    if (!make_rows_map(xmap, fp16, xt, q.lt, q.cin_g, sets, p.batch, q.lt, sets * q.cin_g * q.lt, BN))
      return cudaErrorInvalidValue;
  } else if (!make_rows_map(xmap, fp16, p.x, p.in_length, q.cin_g, p.groups, p.batch, p.x_stride_c, p.x_stride_b, BN)) {
    return cudaErrorInvalidValue;
  }
  if (q.dy_rows) {  // dy in rows of lt elements (one tap: stride 1, no shift)
    uint16_t* dyt = reinterpret_cast<uint16_t*>(ws + q.dyt_offset);
    const cudaError_t err = launch_tap_rows(p.y, dyt, p.y_stride_b, p.y_stride_c, p.y_stride_l, p.out_length,
                                            p.out_channels, q.cout_g, 1, 1, 0, 1, p, q, stream);
    if (err != cudaSuccess) return err;
    if (!make_rows_map(dymap, fp16, dyt, q.lt, q.cout_g, p.groups, p.batch, q.lt, p.out_channels * q.lt, q.bm))
      return cudaErrorInvalidValue;
  } else if (!make_rows_map(dymap, fp16, p.y, p.out_length, q.cout_g, p.groups, p.batch, p.y_stride_c, p.y_stride_b,
                            q.bm)) {
    return cudaErrorInvalidValue;
  }
  if (fp16) return launch_typed<__half>(dymap, xmap, p, q, stream);
  return launch_typed<__nv_bfloat16>(dymap, xmap, p, q, stream);
}

}  // namespace convkit
