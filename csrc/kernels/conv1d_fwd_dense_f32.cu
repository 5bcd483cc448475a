// Dense and grouped forward for fp32 input and weights (also run by grad-input, per stride phase): TF32 tensor
// cores (mma.sync.m16n8k8) or IEEE FFMA, as an implicit GEMM whose x operand is a staged window. Per group g
//
//   out[co, j] = sum over ci, k of w[g*Cout_g + co, ci, k] * x[b, g*Cin_g + ci, j*S + k*D - P]
//
// One block (8 warps) computes a 128 (co) x 128 (j) tile of one batch row and group, or a 64 x 256 tile where
// Cout/groups <= 64 (the "wide" tile: grouped_g8's 64-channel groups, the grad-input phases of Cin 64 like kb76's, which
// would leave half of a 128-row tile's MMAs, weight copies and x windows on rows past Cout/groups), and walks the
// reduction in stages of CC input channels x all K taps. A stage holds
//   * the x window of its CC channels: every position the tile's 128 outputs (wide: 256) touch, stored phase-split
//     (row (t % S) * Wq + t / S), so that tap k of outputs j0 .. j0 + 127 is 128 consecutive floats of a
//     channel's row at a per-tap offset (tap_off): the K taps share one window (x is read once per tile, not K
//     times as an im2col gather would), any stride reads conflict-free. Where the dilation makes the contiguous
//     window much longer than K separate ones (wavenet, D = 512), each tap gets its own window (segments);
//   * the weights of the stage, packed once per call (pack_f32_weights_kernel) into the exact shared-memory
//     image the inner loop reads: the TF32 A fragments of a warp as one 16-byte load each (rounded to TF32 by
//     the pack), or for FFMA rows of 128 (wide: 64) output channels (two 16-byte loads per thread and reduction
//     index).
// Both arrive by cp.async (x 16 bytes at a time at stride 1 with aligned rows, else 4 bytes a position, zero-filled
// outside [0, L) and past Cin/groups; weights 16
// bytes), NS stages in flight; the stage sequence runs across the block's tiles (persistent blocks), so the next
// tile's first stages load while this tile finishes. The epilogue writes y from the accumulators (bias,
// activation; 8- or 16-byte stores where y's rows allow), with no shared memory, for the same reason.
// TF32 rounds each x window element once in shared memory (round_tf32: cvt.rna's rounding; the pack rounds the
// weights), so the result is the fp32-accumulated product of TF32-rounded inputs, as cuDNN's TF32 convolutions
// compute it; dispatch.cpp picks TF32 only where torch.backends.cudnn.allow_tf32 is True.
// Shapes outside the plan (K > 16, stages that do not fit in shared memory) keep the im2col kernel of
// conv1d_dense_f32.cu (conv1d_fwd_dense_f32_im2col).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "activation.cuh"
#include "common.cuh"
#include "f32_window.cuh"
#include "index_math.h"
#include "launchers.h"
#include "mma_common.cuh"

namespace convkit {
namespace {
using namespace tc;
using f32win::window_lead;

constexpr int kThreads = 256;
// Tile rows (output channels) x columns (output positions): kBM x kBN, or kBM / 2 x 2 kBN in a wide tile.
constexpr int kBM = 128, kBN = 128;
constexpr int kMaxK = 16;
constexpr int kStaticSmem = kMaxK * 4;
// Timing experiments of ci/f32_window_check.cu (where the time goes; wrong results): 1 no MMA / FFMA, 2 no copies into
// shared memory, 3 no TF32 rounding, 4 no y stores. The package builds 0.
#ifndef CONVKIT_F32_EXP
#define CONVKIT_F32_EXP 0
#endif  // tap_off: the dynamic shared memory is at most the opt-in limit less this

struct WindowPlan {
  int cc, k, s, d;
  int nseg;        // 1: one window for all taps; K: one per tap
  int wlen;        // positions per segment
  int wq;          // rows per phase (a multiple of 4: 16-byte aligned phase rows)
  int xp;          // floats per channel row of the window: >= nseg * S * wq, = 8 (mod 32): conflict-free fragments
  int a_floats;    // weights per stage: bm * cc * K
  int slot_floats; // a_floats + cc * xp
  int ns;          // stages in flight
  int blocks_per_sm, smem_bytes;
  int vec;         // 1: stride 1, x rows of unit stride starting on 16-byte boundaries: 16-byte window copies
  int y_vec;       // 1: y rows of unit stride starting on 16-byte boundaries: vector stores for whole tiles
  int64_t cin_g, cout_g, chunks, m_tiles, j_tiles, num_tiles;
  int wide;        // 1: 64 x 256 tiles (Cout/groups <= 64), else kBM x kBN = 128 x 128
  int shift;       // FFMA, taps whose window rows are not 16-byte aligned: 1 reads them by aligned 16- / 8-byte
                   // loads and picks the thread's four floats (shifted_quad), 0 by four 4-byte loads a quad
};

// Floats of the packed weights: every stage's image, for every group and m tile.
__host__ __device__ inline int64_t packed_floats(const Conv1dParams& p, const WindowPlan& q) {
  return p.groups * q.m_tiles * q.chunks * q.a_floats;
}

// packed[((g * m_tiles + mt) * chunks + ch) * a_floats + e]: stage (g, mt, ch)'s weights in the order the kernel
// reads them. TF32: e = (((k * CC/8 + s8) * bm/16 + i) * 32 + lane) * 4 + f is fragment register f of lane `lane` for
// m16 tile i and the k8 step (tap k, channels s8 * 8 ..): row i * 16 + lane / 4 + 8 (f & 1), channel
// s8 * 8 + lane % 4 + 4 (f >> 1), rounded to TF32. FFMA: e = (k * CC + c) * bm + m.
__global__ void __launch_bounds__(256)
    pack_f32_weights_kernel(const Conv1dParams p, const WindowPlan q, bool tf32, float* __restrict__ packed) {
  const int64_t total = packed_floats(p, q);
  const float* w = static_cast<const float*>(p.w);
  for (int64_t idx = blockIdx.x * int64_t{256} + threadIdx.x; idx < total; idx += int64_t{gridDim.x} * 256) {
    int64_t blk, e, ch, mt, g;
    divmod(idx, q.a_floats, blk, e);
    divmod(blk, q.chunks, blk, ch);
    divmod(blk, q.m_tiles, g, mt);
    const int ei = static_cast<int>(e);
    int m, c, k;
    const int bm_log2 = q.wide ? 6 : 7, bm = 1 << bm_log2;  // the tile's rows
    if (tf32) {
      const int f = ei & 3, lane = (ei >> 2) & 31, i = (ei >> 7) & ((bm >> 4) - 1), step = ei >> (bm_log2 + 3);
      const int steps_per_tap = q.cc / 8;
      k = step / steps_per_tap;
      const int s8 = step - k * steps_per_tap;
      m = i * 16 + (lane >> 2) + 8 * (f & 1);
      c = s8 * 8 + (lane & 3) + 4 * (f >> 1);
    } else {
      m = ei & (bm - 1);
      const int kc = ei >> bm_log2;
      k = kc / q.cc;
      c = kc - k * q.cc;
    }
    const int64_t co = mt * bm + m, ci = ch * q.cc + c;
    float v = 0.f;
    if (co < q.cout_g && ci < q.cin_g)
      v = __ldg(w + (g * q.cout_g + co) * p.w_stride_o + ci * p.w_stride_i + k * p.w_stride_k);
    packed[idx] = tf32 ? __uint_as_float(tf32_bits(v)) : v;
  }
}

// The tile a block loads next, advanced stage by stage (the loads run NS - 1 stages ahead of the math).
struct Cursor {
  int64_t tile, ch;  // tile index (grid-stride), chunk of the reduction
  int64_t b, j0, g, mt;
};
template <int BN>  // the tile's columns
__device__ __forceinline__ void decode(const WindowPlan& q, int64_t groups, Cursor& c) {
  // tile = ((b * j_tiles + jt) * groups + g) * m_tiles + mt: the m tiles of one x window are neighbours (L2).
  int64_t rest, jt;
  divmod(c.tile, q.m_tiles, rest, c.mt);
  divmod(rest, groups, rest, c.g);
  divmod(rest, q.j_tiles, c.b, jt);
  c.j0 = jt * BN;
}

// fp32 -> TF32 with cvt.rna's rounding (to nearest, ties away from zero) in integer operations: the tensor cores read
// the top 19 bits. Infinities stay; a NaN becomes the canonical NaN (its payload may lie in the dropped bits).
__device__ __forceinline__ float round_tf32(float v) {
  const uint32_t b = __float_as_uint(v);
  return __uint_as_float((b & 0x7fffffffu) > 0x7f800000u ? 0x7fffffffu : (b + 0x1000u) & 0xffffe000u);
}

// Floats u[R .. R + 3] of the 16-byte aligned u (R 1..3): the four window positions of an FFMA quad whose tap row
// starts R floats into a 16-byte unit, from aligned loads only (R 2: two 8-byte loads; R 1, 3: two 16-byte ones).
template <int R>
__device__ __forceinline__ float4 shifted_quad(const float* u) {
  if constexpr (R == 2) {
    const float2 lo = *reinterpret_cast<const float2*>(u + 2), hi = *reinterpret_cast<const float2*>(u + 4);
    return make_float4(lo.x, lo.y, hi.x, hi.y);
  } else {
    const float4 lo = *reinterpret_cast<const float4*>(u), hi = *reinterpret_cast<const float4*>(u + 4);
    return R == 1 ? make_float4(lo.y, lo.z, lo.w, hi.x) : make_float4(lo.w, hi.x, hi.y, hi.z);
  }
}

// kBlocks: blocks per SM the registers are capped for (TF32: 2, <= 128 registers; FFMA: 2 where the plan pairs
// blocks, 128 registers (sm_90a: no spills; sm_80: 128 bytes), else 1, 168 registers). kWide: 64 x 256 tiles
// (q.wide), else 128 x 128.
template <bool kTF32, int CC, int kBlocks, bool kWide>
__global__ void __launch_bounds__(kThreads, kBlocks)
    conv1d_fwd_dense_f32_window_kernel(const Conv1dParams p, const WindowPlan q, const float* __restrict__ wpack) {
  constexpr int BM = kWide ? kBM / 2 : kBM, BN = kWide ? 2 * kBN : kBN;
  extern __shared__ __align__(16) float smem_f[];
  __shared__ int tap_off[kMaxK];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int K = q.k, S = q.s;
  if (tid < K) {
    // output n of tap k reads window position n*S + k*D (one window) or n*S in segment k
    const int t = q.nseg == 1 ? tid * q.d : 0, sg = q.nseg == 1 ? 0 : tid;
    tap_off[tid] = sg * S * q.wq + window_lead(p, q, sg) + (t % S) * q.wq + t / S;
  }
  const float* __restrict__ x = static_cast<const float*>(p.x);

  const int64_t my_tiles = q.num_tiles > blockIdx.x ? ceil_div(q.num_tiles - blockIdx.x, gridDim.x) : 0;
  const int64_t total = my_tiles * q.chunks;

  // Loader: warp w copies window rows w, w + 8, ... (row = channel * nseg + segment). q.vec (stride 1, 16-byte
  // aligned rows of unit stride): lane l copies 16-byte units l, l + 32, ... of positions from the 16-byte grid
  // point at or before the window's start. Otherwise lane l copies positions t = l, l + 32, ... one by one into their
  // phase rows, (t / S, t % S) stepped without divisions.
  const int q0 = lane / S, r0 = lane - q0 * S, dq = 32 / S, dr = 32 - dq * S;
  const int rows = CC * q.nseg;
  Cursor ld{blockIdx.x, 0, 0, 0, 0, 0};
  if (my_tiles > 0) decode<BN>(q, p.groups, ld);
  auto load = [&](int slot) {
    if constexpr (CONVKIT_F32_EXP == 2) return;
    float* As = smem_f + slot * q.slot_floats;
    float* Xs = As + q.a_floats;
    const float* src = wpack + ((ld.g * q.m_tiles + ld.mt) * q.chunks + ld.ch) * q.a_floats;
    for (int u = tid; u < q.a_floats / 4; u += kThreads) cp_async16(As + 4 * u, src + 4 * u, 16);
    for (int r = warp; r < rows; r += kThreads / 32) {
      const int c = r / q.nseg, sg = r - c * q.nseg;
      const int64_t ci = ld.ch * CC + c;
      const bool c_ok = ci < q.cin_g;
      const float* row = x + ld.b * p.x_stride_b + (ld.g * q.cin_g + ci) * p.x_stride_c;
      const int64_t p0 = ld.j0 * S - p.pad_left + static_cast<int64_t>(sg) * q.d;  // window position 0
      float* dst = Xs + c * q.xp + sg * S * q.wq;
      if (q.vec) {
        const int lead = window_lead(p, q, sg);
        const int64_t g0 = p0 - lead;  // a multiple of 4
        const int units = (lead + q.wlen + 3) >> 2;
        if (c_ok && g0 >= 0 && g0 + 4 * units <= p.in_length) {
          // every unit inside the row (every tile but a row's first and last): no bounds
          const float* sp = row + g0;
#pragma unroll 1
          for (int u = lane; u < units; u += 32) cp_async16(dst + 4 * u, sp + 4 * u, 16);
        } else {
          for (int u = lane; u < units; u += 32) {
            const int64_t pos = g0 + 4 * u;
            float* d = dst + 4 * u;
            if (c_ok && pos >= 0 && pos + 4 <= p.in_length) {
              cp_async16(d, row + pos, 16);
            } else if (!c_ok || pos >= p.in_length || pos + 4 <= 0) {
              cp_async16(d, x, 0);
            } else {  // a unit across the start or the end of the row
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const bool ok = pos + e >= 0 && pos + e < p.in_length;
                cp_async4(d + e, ok ? row + pos + e : x, ok ? 4 : 0);
              }
            }
          }
        }
      } else {
        // window positions t in [t_lo, t_hi) lie inside the row
        const int64_t lo = -p0, hi = c_ok ? p.in_length - p0 : 0;
        const int t_lo = static_cast<int>(lo < 0 ? 0 : lo > q.wlen ? q.wlen : lo);
        const int t_hi = static_cast<int>(hi < 0 ? 0 : hi > q.wlen ? q.wlen : hi);
        const float* rp = row + p0 * p.x_stride_l;  // dereferenced only for t in [t_lo, t_hi)
        int off = r0 * q.wq + q0;
        const int step = dq + dr * q.wq, wrap = 1 - S * q.wq;
        int rt = r0;
        const auto next_position = [&]() {  // t += 32: its phase row (rt = t % S) and offset in it
          off += step;
          rt += dr;
          if (rt >= S) {
            rt -= S;
            off += wrap;
          }
        };
        // The whole window inside a row of unit stride (every tile but a row's first and last): no bounds, no
        // stride multiply (a general loop of ~35 instructions a copy was most of this kernel's issue slots at
        // S > 1). Only in the builds where it costs no spills (ptxas, sm_90a: the paired FFMA builds and the paired
        // 16-channel TF32 build would spill; S > 1 plans pair blocks at 8 channels); the others take the general
        // loop below, which steps its source pointer and checks both bounds with one compare (no spills anywhere).
        if ((kTF32 ? CC == 8 : kBlocks == 1) && t_lo == 0 && t_hi == q.wlen && p.x_stride_l == 1) {
#pragma unroll 1
          for (int t = lane; t < q.wlen; t += 32) {
            cp_async4(dst + off, rp + t, 4);
            next_position();
          }
        } else {
          // the general loop: the source steps by 32 strides (no multiply), one unsigned compare for both bounds
          const int64_t sstep = 32 * p.x_stride_l;
          const float* sp = rp + lane * p.x_stride_l;
          const unsigned n_in = t_hi > t_lo ? static_cast<unsigned>(t_hi - t_lo) : 0u;  // (a missing channel: hi = 0)
          for (int t = lane; t < q.wlen; t += 32) {
            const bool ok = static_cast<unsigned>(t - t_lo) < n_in;
            cp_async4(dst + off, ok ? sp : x, ok ? 4 : 0);
            sp += sstep;
            next_position();
          }
        }
      }
    }
  };
  auto advance = [&]() {
    if (++ld.ch == q.chunks) {
      ld.ch = 0;
      ld.tile += gridDim.x;
      if (ld.tile < q.num_tiles) decode<BN>(q, p.groups, ld);
    }
  };
  // TF32: the x window of stage s rounded in place, once per element (instead of at every fragment read)
  auto round_window = [&](int64_t s) {
    if constexpr (CONVKIT_F32_EXP == 3) return;
    // as 16-byte vectors: the window starts 16-byte aligned (a_floats and xp are multiples of 4)
    float4* X4 = reinterpret_cast<float4*>(smem_f + (s % q.ns) * q.slot_floats + q.a_floats);
    for (int e = tid; e < CC * q.xp / 4; e += kThreads) {
      float4 v = X4[e];
      v.x = round_tf32(v.x);
      v.y = round_tf32(v.y);
      v.z = round_tf32(v.z);
      v.w = round_tf32(v.w);
      X4[e] = v;
    }
  };

  // TF32: warp (wm, wn) = (warp % 2, warp / 2) owns rows wm*64 .. +64 x columns wn*32 .. +32 (wide: (0, warp)),
  // acc[(i * 4 + jn) * 4 + f] for m16 tile i, n8 tile jn and the mma's c layout. FFMA: thread (tm, tn) =
  // (tid % 16, tid / 16) owns rows {tm*4.., 64 + tm*4..} x columns {tn*4.., 64 + tn*4..} (wide: (tid % 8, tid / 8),
  // rows {tm*4.., 32 + tm*4..} x columns {tn*4.., 128 + tn*4..}), acc[i * 8 + jn].
  constexpr int kTM = BM / 8;  // FFMA: threads along the rows (16, wide 8)
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.f;
  Cursor cur = ld;  // the tile the math is on

#pragma unroll 1
  for (int s = 0; s < q.ns - 1; ++s) {
    if (s < total) {
      load(s);
      advance();
    }
    cp_async_commit();
  }
  // TF32 rounds each stage's window before its multiplication. With four stages the loop rounds stage gs + 1 while
  // it multiplies stage gs (stage 0 here), so a copy still has two iterations to land; with three that would leave
  // it one, so the loop rounds stage gs itself, between two barriers.
  const bool round_ahead = kTF32 && q.ns == 4;
  if (round_ahead) {
    cp_async_wait<2>();
    __syncthreads();
    if (total > 0) round_window(0);
  }
  __syncthreads();  // tap_off

#pragma unroll 1
  for (int64_t gs = 0; gs < total; ++gs) {
    // ns - 2 groups may stay pending: stage gs has landed (round_ahead: ns - 3, stage gs + 1 too, for its
    // rounding). The barrier makes the stages every thread's, and says that every thread is done with stage gs - 1,
    // whose slot the next load refills (round_ahead: and done rounding stage gs).
    if (round_ahead || q.ns == 3) cp_async_wait<1>(); else if (q.ns == 2) cp_async_wait<0>(); else cp_async_wait<2>();
    __syncthreads();
    if (gs + q.ns - 1 < total) {
      load(static_cast<int>((gs + q.ns - 1) % q.ns));
      advance();
    }
    cp_async_commit();
    if constexpr (kTF32) {
      if (round_ahead) {
        if (gs + 1 < total) round_window(gs + 1);
      } else {
        round_window(gs);
        __syncthreads();
      }
    }

    const float* As = smem_f + (gs % q.ns) * q.slot_floats;
    const float* Xs = As + q.a_floats;
    if constexpr (CONVKIT_F32_EXP == 1) {
    } else if constexpr (kTF32) {
      const int wm = kWide ? 0 : warp & 1, wn = kWide ? warp : warp >> 1, lr = lane >> 2, lc = lane & 3;
      const float4* A4 = reinterpret_cast<const float4*>(As) + wm * 4 * 32 + lane;
#pragma unroll 1
      for (int k = 0; k < K; ++k) {
        const float* xk = Xs + tap_off[k] + wn * 32 + lr + lc * q.xp;
#pragma unroll
        for (int s8 = 0; s8 < CC / 8; ++s8) {
          const float4* ap = A4 + (k * (CC / 8) + s8) * (BM / 16) * 32;
          float4 a[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) a[i] = ap[i * 32];
          const float* x0 = xk + s8 * 8 * q.xp;
          const float* x1 = x0 + 4 * q.xp;
          uint32_t b0[4], b1[4];
#pragma unroll
          for (int jn = 0; jn < 4; ++jn) {
            b0[jn] = __float_as_uint(x0[jn * 8]);
            b1[jn] = __float_as_uint(x1[jn * 8]);
          }
#pragma unroll
          for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int jn = 0; jn < 4; ++jn)
              mma1688_tf32(&acc[(i * 4 + jn) * 4], __float_as_uint(a[i].x), __float_as_uint(a[i].y),
                           __float_as_uint(a[i].z), __float_as_uint(a[i].w), b0[jn], b1[jn]);
        }
      }
    } else {
      // a weight row of BM floats is BM / 4 float4s; the thread's second row quad is half a tile further, as is its
      // second column quad
      constexpr int kRow4 = BM / 4, kHalfN = BN / 2;
      const int tm = tid & (kTM - 1), tn = tid >> (kWide ? 3 : 4);
      const float4* A4 = reinterpret_cast<const float4*>(As) + tm;
#pragma unroll 1
      for (int k = 0; k < K; ++k) {
        const int off = tap_off[k];
        const float* xk = Xs + off + tn * 4;
        const float4* ak = A4 + k * CC * kRow4;
        if ((off & 3) == 0) {  // the tap's window rows are 16-byte aligned (xp and wq are multiples of 4)
#pragma unroll 4
          for (int c = 0; c < CC; ++c) {
            const float4 a0 = ak[c * kRow4], a1 = ak[c * kRow4 + kRow4 / 2];
            const float4 x0 = *reinterpret_cast<const float4*>(xk + c * q.xp);
            const float4 x1 = *reinterpret_cast<const float4*>(xk + c * q.xp + kHalfN);
            ffma_8x8(acc, a0, a1, x0, x1);
          }
        } else if (q.shift) {
          // the tap's rows start r = off % 4 floats into a 16-byte unit: each quad of the thread's positions is
          // read from the aligned unit(s) around it (r 2: two 8-byte loads; r 1, 3: two 16-byte loads) and the
          // four floats picked at compile time, in place of four 4-byte loads. The last unit read ends at or
          // before the end of the tap's phase row (phase rows are whole 16-byte units), so it stays in the window.
          const float* xa = xk - (off & 3);
          const auto quads = [&](auto shift) {
            constexpr int R = decltype(shift)::value;
#pragma unroll 4
            for (int c = 0; c < CC; ++c) {
              const float4 a0 = ak[c * kRow4], a1 = ak[c * kRow4 + kRow4 / 2];
              const float* xr = xa + c * q.xp;
              ffma_8x8(acc, a0, a1, shifted_quad<R>(xr), shifted_quad<R>(xr + kHalfN));
            }
          };
          const int r = off & 3;
          if (r == 2) quads(std::integral_constant<int, 2>{});
          else if (r == 1) quads(std::integral_constant<int, 1>{});
          else quads(std::integral_constant<int, 3>{});
        } else {
#pragma unroll 4
          for (int c = 0; c < CC; ++c) {
            const float4 a0 = ak[c * kRow4], a1 = ak[c * kRow4 + kRow4 / 2];
            const float* xr = xk + c * q.xp;
            ffma_8x8(acc, a0, a1, make_float4(xr[0], xr[1], xr[2], xr[3]),
                     make_float4(xr[kHalfN], xr[kHalfN + 1], xr[kHalfN + 2], xr[kHalfN + 3]));
          }
        }
      }
    }

    if (cur.ch + 1 < q.chunks) {
      ++cur.ch;
      continue;
    }
    // ---- epilogue of the tile: y straight from the accumulators ----
    // The thread's 8 output rows: TF32 wm*64 + i*16 + lr (+ 8 for h = 1), FFMA h*BM/2 + tm*4 + i.
    const int lr = lane >> 2, lc = lane & 3, tm = tid & (kTM - 1), tn = tid >> (kWide ? 3 : 4);
    auto row_of = [&](int i, int h) {
      return kTF32 ? (kWide ? 0 : (warp & 1) * 64) + i * 16 + lr + 8 * h : h * (BM / 2) + tm * 4 + i;
    };
    const float* bias = static_cast<const float*>(p.bias);
    auto bias_of = [&](int row) {
      const int64_t co = cur.mt * BM + row;
      return bias != nullptr && co < q.cout_g ? __ldg(bias + cur.g * q.cout_g + co) : 0.f;
    };
    float* y = static_cast<float*>(p.y);
    float* yt = y + cur.b * p.y_stride_b + (cur.g * q.cout_g + cur.mt * BM) * p.y_stride_c + cur.j0 * p.y_stride_l;
    // whole tile inside y, rows of unit stride with 16-byte aligned starts: vector stores without checks
    const bool whole = q.y_vec && cur.j0 + BN <= p.out_length && cur.mt * BM + BM <= q.cout_g;
    // n values v (n = 2 or 4) of tile row `row` at columns col ..
    auto put = [&](int row, int col, const float* v, float b, int n) {
      float o[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) o[e] = e < n ? activate(p.activation, v[e] + b) : 0.f;
      float* dst = yt + row * p.y_stride_c + col * p.y_stride_l;
      if constexpr (CONVKIT_F32_EXP == 4) {  // keep the sums alive without storing them
        if (o[0] == 1234.5f && o[1] == -1234.5f) *dst = o[0];
        return;
      }
      if (whole) {
        if (n == 4) *reinterpret_cast<float4*>(dst) = make_float4(o[0], o[1], o[2], o[3]);
        else *reinterpret_cast<float2*>(dst) = make_float2(o[0], o[1]);
        return;
      }
      if (cur.mt * BM + row >= q.cout_g) return;
      // rows of odd length (kb67: Lout 131070) start 8-byte aligned every other row: vectors where they can
      const uintptr_t a = reinterpret_cast<uintptr_t>(dst);
      if (p.y_stride_l == 1 && cur.j0 + col + n <= p.out_length && (a & (4 * n - 1)) == 0) {
        if (n == 4) *reinterpret_cast<float4*>(dst) = make_float4(o[0], o[1], o[2], o[3]);
        else *reinterpret_cast<float2*>(dst) = make_float2(o[0], o[1]);
        return;
      }
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (e < n && cur.j0 + col + e < p.out_length) dst[e * p.y_stride_l] = o[e];
    };
    if constexpr (kTF32) {
      const int wn = kWide ? warp : warp >> 1;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float b0 = bias_of(row_of(i, 0)), b1 = bias_of(row_of(i, 1));
#pragma unroll
        for (int jn = 0; jn < 4; ++jn) {
          const float* f = &acc[(i * 4 + jn) * 4];
          const int col = wn * 32 + jn * 8 + 2 * lc;
          put(row_of(i, 0), col, f, b0, 2);
          put(row_of(i, 1), col, f + 2, b1, 2);
        }
      }
    } else {
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float b = bias_of(row_of(i, h));
          put(row_of(i, h), tn * 4, &acc[(h * 4 + i) * 8], b, 4);
          put(row_of(i, h), BN / 2 + tn * 4, &acc[(h * 4 + i) * 8 + 4], b, 4);
        }
    }
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    cur.ch = 0;
    cur.tile += gridDim.x;
    if (cur.tile < q.num_tiles) decode<BN>(q, p.groups, cur);
  }
  cp_async_wait<0>();  // no copy outlives the block
}

bool make_plan_tiles(const Conv1dParams& p, bool tf32, bool wide, WindowPlan& q) {
  q.wide = wide;
  const int bm = wide ? kBM / 2 : kBM, bn = wide ? 2 * kBN : kBN;  // the tile
  // the window of bn outputs, channel rows of xp = 8 (mod 32) floats: conflict-free B fragments and FFMA rows
  if (!f32win::plan_window(p, bn, kMaxK, 8, q)) return false;
  q.y_vec = rows_vec_aligned(p.y, p.y_stride_b, p.y_stride_c, p.y_stride_l, 4);
  // CONVKIT_DENSE_F32_SHIFT=1: the FFMA kernel reads unaligned taps by aligned loads (session 40; H100, session 41:
  // within 1 % of the 4-byte loads on kb76 / kb67 / w2v_k3s2 / wavenet, 2 % slower on grouped_g8, so not the default)
  static const bool shift_on = env_equals("CONVKIT_DENSE_F32_SHIFT", "1");
  q.shift = !tf32 && shift_on;
  // 16 channels a stage where three stages fit, else 8 (CONVKIT_DENSE_F32_CC=8: always 8, an experiment). Both
  // kernels are capped at 128 registers and run two blocks per SM where three stages each fit in half the SM's
  // shared memory (per SM: the opt-in limit + 1 KB, less 1 KB per block), otherwise one block with up to four
  // stages. TF32 needs three (it rounds a stage's window after it lands, before its multiplication).
  // CONVKIT_DENSE_F32_FFMA_2BLOCKS=0: IEEE as before session 26, one block of 168 registers, 16-channel stages.
  const int limit = smem_optin_bytes();
  static const bool cc8 = env_equals("CONVKIT_DENSE_F32_CC", "8");
  static const bool ffma1 = env_equals("CONVKIT_DENSE_F32_FFMA_2BLOCKS", "0");
  const bool may_pair = tf32 || !ffma1;
  const auto set_cc = [&](int cc) {
    q.cc = cc;
    q.a_floats = bm * cc * q.k;
    q.slot_floats = q.a_floats + cc * q.xp;
    q.ns = std::min(4, (limit - kStaticSmem) / (q.slot_floats * 4));
  };
  const auto two_blocks = [&]() { return 2 * (3 * q.slot_floats * 4 + 2048) <= limit + 1024; };
  set_cc(cc8 ? 8 : 16);
  if (q.ns < 3) set_cc(8);
  // Both are latency-bound at one block of 8 warps per SM: 8-channel stages where only they allow two (TF32 on
  // the H100, kernel with copies: kb76 17.7 -> 13.6 ms, w2v_k3s2 11.4 -> 9.6, grouped_g8 1.37 -> 1.01; IEEE at
  // two blocks where 16 channels allow them, session 26: kb67 8.59 -> 6.96 ms, tcn 3.38 -> 2.83, wavenet
  // 2.68 -> 2.13).
  if (may_pair && q.cc == 16 && !two_blocks()) {
    const WindowPlan wide = q;
    set_cc(8);
    if (!two_blocks()) q = wide;
  }
  if (q.ns < (tf32 ? 3 : 2)) return false;
  const int slot_bytes = q.slot_floats * 4;
  // Paired blocks take four stages where four fit twice (kb76, w2v_k3s2 at 8 channels): TF32 then rounds stage gs + 1
  // while it multiplies stage gs, one barrier a stage instead of two. CONVKIT_DENSE_F32_STAGES=3: at most three
  // stages everywhere (as before session 26, for comparisons).
  static const bool ns3 = env_equals("CONVKIT_DENSE_F32_STAGES", "3");
  if (ns3) q.ns = std::min(q.ns, 3);
  if (may_pair && two_blocks()) {
    q.blocks_per_sm = 2;
    q.ns = !ns3 && 2 * (4 * slot_bytes + 2048) <= limit + 1024 ? 4 : 3;
  } else {
    q.blocks_per_sm = 1;
  }
  q.smem_bytes = q.ns * slot_bytes;
  q.chunks = ceil_div(q.cin_g, q.cc);
  q.m_tiles = ceil_div(q.cout_g, bm);
  q.j_tiles = ceil_div(p.out_length, bn);
  q.num_tiles = p.batch * q.j_tiles * p.groups * q.m_tiles;
  return true;
}

// 64 x 256 tiles where the output channels of a group fit in 64 rows and such a plan exists (its window is twice as
// long), else 128 x 128 (CONVKIT_DENSE_F32_WIDE=0: always 128 x 128, for comparisons).
bool make_plan(const Conv1dParams& p, bool tf32, WindowPlan& q) {
  static const bool wide_off = env_equals("CONVKIT_DENSE_F32_WIDE", "0");
  if (!wide_off && p.groups >= 1 && p.out_channels / p.groups <= kBM / 2 && make_plan_tiles(p, tf32, true, q))
    return true;
  return make_plan_tiles(p, tf32, false, q);
}

template <bool kTF32, int CC, int kBlocks, bool kWide>
cudaError_t launch_tiles(const Conv1dParams& p, const WindowPlan& q, const float* wpack, cudaStream_t stream) {
  auto kernel = conv1d_fwd_dense_f32_window_kernel<kTF32, CC, kBlocks, kWide>;
  // The attribute belongs to the kernel, not to a launch: the same maximum for every plan (the opt-in limit less
  // the static tap table, which make_plan budgets), so that host threads launching different shapes at once never
  // lower it under each other's launches.
  cudaError_t err = allow_max_dynamic_smem(kernel);
  if (err != cudaSuccess) return err;
  kernel<<<grid_for(q.num_tiles, p.num_sms, q.blocks_per_sm), kThreads, q.smem_bytes, stream>>>(p, q, wpack);
  return cudaGetLastError();
}

template <bool kTF32, int CC, int kBlocks = kTF32 ? 2 : 1>
cudaError_t launch_window(const Conv1dParams& p, const WindowPlan& q, const float* wpack, cudaStream_t stream) {
  if (q.wide) return launch_tiles<kTF32, CC, kBlocks, true>(p, q, wpack, stream);
  return launch_tiles<kTF32, CC, kBlocks, false>(p, q, wpack, stream);
}

// CONVKIT_DENSE_F32_WINDOW=0: every call on the im2col kernel (for comparisons; read once per process).
bool window_enabled() {
  static const bool on = !env_equals("CONVKIT_DENSE_F32_WINDOW", "0");
  return on;
}

cudaError_t launch(const Conv1dParams& p, bool tf32, cudaStream_t stream) {
  WindowPlan q;
  if (!window_enabled() || !make_plan(p, tf32, q) || p.workspace == nullptr)
    return launch_conv1d_fwd_dense_f32_im2col(p, tf32, stream);
  if (q.num_tiles == 0 || p.out_length <= 0) return cudaSuccess;
  float* wpack = static_cast<float*>(p.workspace);
  pack_f32_weights_kernel<<<grid_for(ceil_div(packed_floats(p, q), 256), p.num_sms, 8), 256, 0, stream>>>(p, q, tf32,
                                                                                                       wpack);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  if (tf32)
    return q.cc == 16 ? launch_window<true, 16>(p, q, wpack, stream) : launch_window<true, 8>(p, q, wpack, stream);
  if (q.blocks_per_sm == 2)
    return q.cc == 16 ? launch_window<false, 16, 2>(p, q, wpack, stream) : launch_window<false, 8, 2>(p, q, wpack, stream);
  return q.cc == 16 ? launch_window<false, 16, 1>(p, q, wpack, stream) : launch_window<false, 8, 1>(p, q, wpack, stream);
}

int64_t workspace_bytes(const Conv1dParams& p, bool tf32) {
  WindowPlan q;
  return window_enabled() && make_plan(p, tf32, q) ? packed_floats(p, q) * 4 : 0;
}

}  // namespace

int64_t conv1d_fwd_dense_f32_workspace_bytes(const Conv1dParams& p) { return workspace_bytes(p, false); }
int64_t conv1d_fwd_dense_tf32_workspace_bytes(const Conv1dParams& p) { return workspace_bytes(p, true); }

cudaError_t launch_conv1d_fwd_dense_f32(const Conv1dParams& p, cudaStream_t stream) { return launch(p, false, stream); }
cudaError_t launch_conv1d_fwd_dense_tf32(const Conv1dParams& p, cudaStream_t stream) { return launch(p, true, stream); }

}  // namespace convkit
