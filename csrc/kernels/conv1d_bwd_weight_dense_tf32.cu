// Dense and grouped grad-weight (+ grad-bias) for fp32 input on TF32 tensor cores (mma.sync.m16n8k8), both operands
// staged by cp.async (session 28). Per group g
//
//   dw[co, ci, k] = sum over b, j of dy[b, g*Cout_g + co, j] * x[b, g*Cin_g + ci, j*S + k*D - P]
//
// a GEMM of M = Cout/groups, N = Cin/groups * K and a reduction over (b, j). A block owns 128 output channels x one
// tile of CN input channels x all K taps (CN = 8 * floor(16 / K), balanced over Cin/groups: at most 16 n8 tiles) and
// one contiguous range (its split) of the 32-position chunks (b, j0 .. j0 + 31) of every batch row. A stage holds
//   * dy's 128 x 32 tile (rows of 36 floats: the A fragments read conflict-free), by 16-byte copies where dy's rows are
//     16-byte aligned, else by 4-byte ones (CONVKIT_F32_WGRAD_DY_ALIGN=1, an experiment: by 16-byte copies from the
//     16-byte grid point at or before each row's first position, moved into place by the rounding pass);
//   * the x window of the tile's CN channels for those 32 outputs, stored phase-split as in the window forward
//     (conv1d_fwd_dense_f32.cu: row (t % S) * wq + t / S, so tap k of the 32 outputs is 32 consecutive floats at
//     tap_off[k]; one window per tap where the dilation makes one window much longer), channel rows of xp = 4 (mod 32)
//     floats: the B fragments (8 channels of one tap x 4 positions) read conflict-free.
// NS stages in flight; each stage is rounded to TF32 in shared memory once (cvt.rna, as cuDNN's TF32 convolutions),
// after the n-tile-0 blocks have added its raw dy values to their grad-bias sums. Warp (wm, wn) owns rows wm*64 .. +64
// and n8 tiles wn, wn + 4, wn + 8, wn + 12 (dealt round: 12 tiles give every warp three; tile t is tap t / (CN / 8),
// channels (t % (CN / 8)) * 8 ..). Each block writes its sums to
// the workspace, and sum_weight_bias_partials adds the splits in a fixed order: deterministic, as the tile kernel of
// conv1d_dense_f32.cu (16 positions a stage through registers, per-element gathers and bounds checks).
// Measured (H100, session 28, TF32, kernel times in a fwd+bwd): faster than the tile kernel only where Cout/groups
// <= 64 (grouped_g8_k5 1.91 -> 1.34 ms: the tile kernel computes and loads 128 rows there, this one loads only the
// group's); slower on the suite's other shapes (kb76 14.8 -> 17.1 ms, w2v_k3s2 11.8 -> 16.4, wavenet's fwd+bwd
// 3.73 -> 5.97): its 32-position stages carry two barriers, a rounding pass and 4-byte dy copies where dy's rows
// are not 16-byte aligned (kb76, w2v: output lengths that are not multiples of 4) for only 64 MMAs a warp. So
// make_plan takes it only where Cout/groups <= 64 (window_wanted; otherwise the TF32 entry points below fall back to
// the tile kernel); CONVKIT_F32_WGRAD_WINDOW=1 everywhere it plans, =0 nowhere (IEEE fp32 always runs the tile
// kernel).
#include <algorithm>
#include <cstdint>

#include "common.cuh"
#include "f32_window.cuh"
#include "index_math.h"
#include "launchers.h"
#include "mma_common.cuh"

namespace convkit {
namespace {
using namespace tc;
using f32win::round_up;
using f32win::window_lead;

constexpr int kThreads = 256;
constexpr int kBM = 128, kBJ = 32;  // output channels x positions of one stage
constexpr int kDyPitch = kBJ + 4;   // = 4 (mod 32)
constexpr int kMaxK = 16, kMaxN8 = 16;
constexpr int kStaticSmem = kMaxK * 4;

struct WgradPlan {
  int k, s, d;
  int cn, n8;       // input channels per n tile, n8 tiles (K * cn / 8 <= 16)
  int nseg, wlen, wq, xp;
  int vec;          // x by 16-byte copies: stride 1, rows of unit stride on 16-byte boundaries
  int dy_vec;       // dy rows of unit stride on 16-byte boundaries
  int dy_lead;      // else (CONVKIT_F32_WGRAD_DY_ALIGN=1, unit stride): 16-byte copies from the grid point at or before
                    // each row's j0, realigned in shared memory by the rounding pass
  int slot_floats, ns, blocks_per_sm, smem_bytes;
  int64_t cin_g, cout_g, red, m_tiles, n_tiles, chunks_per_row, total_chunks, per_split, splits;
};

template <int kBlocks>
__global__ void __launch_bounds__(kThreads, kBlocks)
    conv1d_bwd_weight_dense_tf32_window_kernel(const Conv1dParams p, const WgradPlan q) {
  extern __shared__ __align__(16) float smem_f[];
  __shared__ int tap_off[kMaxK];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int K = q.k, S = q.s;
  if (tid < K) {  // output j of tap k reads window position j*S + k*D (one window) or j*S in segment k
    const int t = q.nseg == 1 ? tid * q.d : 0, sg = q.nseg == 1 ? 0 : tid;
    tap_off[tid] = sg * S * q.wq + window_lead(p, q, sg) + (t % S) * q.wq + t / S;
  }
  int64_t rest, nt, mt, g, split;
  divmod(static_cast<int64_t>(blockIdx.x), q.n_tiles, rest, nt);
  divmod(rest, q.m_tiles, rest, mt);
  divmod(rest, p.groups, split, g);
  const int64_t co0 = mt * kBM, c0 = nt * q.cn;
  const int64_t ch_begin = split * q.per_split;
  const int64_t total = q.total_chunks - ch_begin < q.per_split ? q.total_chunks - ch_begin : q.per_split;
  const bool with_bias = p.bias != nullptr && nt == 0;
  const float* __restrict__ x = static_cast<const float*>(p.x);
  const float* __restrict__ dy = static_cast<const float*>(p.y);
  const float* dyg = dy + (g * q.cout_g + co0) * p.y_stride_c;
  const float* xg = x + (g * q.cin_g + c0) * p.x_stride_c;

  const int dy_rows = static_cast<int>(q.cout_g - co0 < kBM ? q.cout_g - co0 : kBM);
  const int x_rows = static_cast<int>(q.cin_g - c0 < q.cn ? q.cin_g - c0 : q.cn) * q.nseg;
  // the chunk the loads are on: batch row lb, positions lj0 .. lj0 + 31
  int64_t lb, ljc;
  divmod(ch_begin, q.chunks_per_row, lb, ljc);
  int64_t mjc = ljc, mb = lb;  // ... and the chunk the math is on
  const int q0 = lane / S, r0 = lane - q0 * S, dq = 32 / S, dr = 32 - dq * S;
  auto load = [&](int slot) {
    float* Ds = smem_f + slot * q.slot_floats;
    float* Xs = Ds + kBM * kDyPitch;
    const int64_t j0 = ljc * kBJ;
    const float* dyb = dyg + lb * p.y_stride_b + j0 * p.y_stride_l;
    // (rows past Cout/groups and channels past Cin/groups are not loaded: they only reach sums that are not written)
    if (q.dy_vec && j0 + kBJ <= p.out_length) {
      for (int u = tid; u < dy_rows * (kBJ / 4); u += kThreads) {  // row u / 8, 16-byte unit u % 8
        const int r = u >> 3, e = u & 7;
        cp_async16(Ds + r * kDyPitch + 4 * e, dyb + r * p.y_stride_c + 4 * e, 16);
      }
    } else if (q.dy_lead) {
      // row r's positions j0 - lead .. j0 - lead + 35 as nine 16-byte units (lead = the row's offset from the
      // 16-byte grid, 0..3: j0 is a multiple of 32), zero outside [0, Lout); round_stage moves them to j0 .. j0 + 31
      for (int u = tid; u < dy_rows * 9; u += kThreads) {
        const int r = u / 9, e = u - r * 9;
        const float* rowp = dyg + lb * p.y_stride_b + r * p.y_stride_c;  // position 0 of the row
        const int lead = static_cast<int>(reinterpret_cast<uintptr_t>(rowp) >> 2) & 3;
        cp_async16_row(Ds + r * kDyPitch + 4 * e, rowp, j0 - lead + 4 * e, p.out_length, dy);
      }
    } else {
      for (int u = tid; u < dy_rows * kBJ; u += kThreads) {  // row u / 32, position u % 32
        const int r = u >> 5, e = u & 31;
        const bool ok = j0 + e < p.out_length;
        cp_async4(Ds + r * kDyPitch + e, ok ? dyb + r * p.y_stride_c + e * p.y_stride_l : dy, ok ? 4 : 0);
      }
    }
    // x window rows (channel c, segment sg), warp w copies rows w, w + 8, ...
    for (int r = warp; r < x_rows; r += kThreads / 32) {
      const int c = r / q.nseg, sg = r - c * q.nseg;
      const float* row = xg + lb * p.x_stride_b + c * p.x_stride_c;
      const int64_t p0 = j0 * S - p.pad_left + static_cast<int64_t>(sg) * q.d;  // window position 0
      float* dst = Xs + c * q.xp + sg * S * q.wq;
      if (q.vec) {
        const int lead = window_lead(p, q, sg);
        const int64_t a0 = p0 - lead;  // a multiple of 4
        const int units = (lead + q.wlen + 3) >> 2;
        for (int u = lane; u < units; u += 32) cp_async16_row(dst + 4 * u, row, a0 + 4 * u, p.in_length, x);
      } else {
        // window positions t in [t_lo, t_hi) lie inside the row; lane l copies t = l, l + 32, ... into their phase
        // rows, (t / S, t % S) stepped without divisions, the source pointer stepped by 32 strides
        const int64_t lo = -p0, hi = p.in_length - p0;
        const int t_lo = static_cast<int>(lo < 0 ? 0 : lo > q.wlen ? q.wlen : lo);
        const int t_hi = static_cast<int>(hi < 0 ? 0 : hi > q.wlen ? q.wlen : hi);
        const unsigned n_in = t_hi > t_lo ? static_cast<unsigned>(t_hi - t_lo) : 0u;
        const float* sp = row + (p0 + lane) * p.x_stride_l;  // dereferenced only for t in [t_lo, t_hi)
        const int64_t sstep = 32 * p.x_stride_l;
        int off = r0 * q.wq + q0, rt = r0;
        const int step = dq + dr * q.wq, wrap = 1 - S * q.wq;
        for (int t = lane; t < q.wlen; t += 32) {
          const bool ok = static_cast<unsigned>(t - t_lo) < n_in;
          cp_async4(dst + off, ok ? sp : x, ok ? 4 : 0);
          sp += sstep;
          off += step;
          rt += dr;
          if (rt >= S) {
            rt -= S;
            off += wrap;
          }
        }
      }
    }
  };
  auto advance = [&]() {
    if (++ljc == q.chunks_per_row) {
      ljc = 0;
      ++lb;
    }
  };

  // Before its multiplication, stage s is rounded to TF32 in place; thread t rounds dy row t / 2, positions
  // (t % 2) * 16 .. + 16 (and adds them to its grad-bias sum first), then its share of the x window.
  float bsum = 0.f;
  auto round_stage = [&](int slot) {
    float4* D4 = reinterpret_cast<float4*>(smem_f + slot * q.slot_floats) + (tid >> 1) * (kDyPitch / 4) + (tid & 1) * 4;
    float4 raw[4];
    if (q.dy_lead) {  // the row's values start `lead` floats in: read them all (the warp), then store them aligned
      const float* rowp = dyg + mb * p.y_stride_b + (tid >> 1) * p.y_stride_c;
      const int lead = static_cast<int>(reinterpret_cast<uintptr_t>(rowp) >> 2) & 3;
      const float* src = reinterpret_cast<const float*>(D4) + lead;
#pragma unroll
      for (int i = 0; i < 4; ++i) raw[i] = make_float4(src[4 * i], src[4 * i + 1], src[4 * i + 2], src[4 * i + 3]);
      __syncwarp();  // (the row's other half, the neighbouring lane, reads up to 3 floats of this half's destination)
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) raw[i] = D4[i];
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float4 v = raw[i];
      if (with_bias) bsum += (v.x + v.y) + (v.z + v.w);
      v.x = to_tf32(v.x);
      v.y = to_tf32(v.y);
      v.z = to_tf32(v.z);
      v.w = to_tf32(v.w);
      D4[i] = v;
    }
    float4* X4 = reinterpret_cast<float4*>(smem_f + slot * q.slot_floats + kBM * kDyPitch);
    for (int e = tid; e < q.cn * q.xp / 4; e += kThreads) {
      float4 v = X4[e];
      v.x = to_tf32(v.x);
      v.y = to_tf32(v.y);
      v.z = to_tf32(v.z);
      v.w = to_tf32(v.w);
      X4[e] = v;
    }
  };

  const int wm = warp & 1, wn = warp >> 1, gq = lane >> 2, tq = lane & 3;
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.f;

#pragma unroll 1
  for (int s = 0; s < q.ns - 1; ++s) {
    if (s < total) {
      load(s);
      advance();
    }
    cp_async_commit();
  }
  __syncthreads();  // tap_off
  // the warp's n8 tiles: x window offset of lane (gq, .)'s channel at the tile's tap (-1: past the tile's n8 tiles)
  int xoff[4];
#pragma unroll
  for (int jn = 0; jn < 4; ++jn) {
    const int t = jn * 4 + wn, per_tap = q.cn / 8;
    xoff[jn] = t < q.n8 ? ((t % per_tap) * 8 + gq) * q.xp + tap_off[t / per_tap] + tq : -1;
  }

#pragma unroll 1
  for (int64_t gs = 0; gs < total; ++gs) {
    // ns - 2 groups may stay pending: stage gs has landed; the barrier also says every thread is done with stage
    // gs - 1, whose slot the next load refills
    if (q.ns == 2) cp_async_wait<0>(); else if (q.ns == 3) cp_async_wait<1>(); else cp_async_wait<2>();
    __syncthreads();
    if (gs + q.ns - 1 < total) {
      load(static_cast<int>((gs + q.ns - 1) % q.ns));
      advance();
    }
    cp_async_commit();
    const int slot = static_cast<int>(gs % q.ns);
    round_stage(slot);
    __syncthreads();
    const float* Ds = smem_f + slot * q.slot_floats;
    const float* Xs = Ds + kBM * kDyPitch;
    // positions of this chunk inside y: past them dy is zero, and so is the x operand (an x value there may feed no
    // output at all, and an Inf there times dy's zero would give NaN where torch's gradient is finite)
    const int64_t left = p.out_length - mjc * kBJ;
    const int valid = left < kBJ ? static_cast<int>(left) : kBJ;
    if (++mjc == q.chunks_per_row) {
      mjc = 0;
      ++mb;
    }
#pragma unroll
    for (int ks = 0; ks < kBJ / 8; ++ks) {
      uint32_t a[4][4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float* ap = Ds + (wm * 64 + i * 16 + gq) * kDyPitch + ks * 8 + tq;
        a[i][0] = __float_as_uint(ap[0]);
        a[i][1] = __float_as_uint(ap[8 * kDyPitch]);
        a[i][2] = __float_as_uint(ap[4]);
        a[i][3] = __float_as_uint(ap[8 * kDyPitch + 4]);
      }
#pragma unroll
      for (int jn = 0; jn < 4; ++jn) {
        if (xoff[jn] < 0) continue;  // (warp-uniform)
        uint32_t b0 = __float_as_uint(Xs[xoff[jn] + ks * 8]), b1 = __float_as_uint(Xs[xoff[jn] + ks * 8 + 4]);
        if (ks * 8 + tq >= valid) b0 = 0;
        if (ks * 8 + tq + 4 >= valid) b1 = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) mma1688_tf32(&acc[(i * 4 + jn) * 4], a[i][0], a[i][1], a[i][2], a[i][3], b0, b1);
      }
    }
  }
  cp_async_wait<0>();

  // partial sums: part[split][g*Cout_g + co][ci * K + k], then the grad-bias partials after all splits' weights
  float* part = static_cast<float*>(p.workspace);
  const int64_t n_weight = p.out_channels * q.red;
  if (with_bias) {
    const float v = bsum + __shfl_xor_sync(0xffffffffu, bsum, 1);  // the row's two halves, in a fixed order
    const int64_t co = co0 + (tid >> 1);
    if ((tid & 1) == 0 && co < q.cout_g) part[q.splits * n_weight + split * p.out_channels + g * q.cout_g + co] = v;
  }
  float* dst = part + split * n_weight + g * q.cout_g * q.red;
  const int per_tap = q.cn / 8;
#pragma unroll
  for (int jn = 0; jn < 4; ++jn) {
    const int t = jn * 4 + wn;
    if (t >= q.n8) continue;
    const int k = t / per_tap;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        const int64_t co = co0 + wm * 64 + i * 16 + gq + 8 * (f >> 1);
        const int64_t ci = c0 + (t % per_tap) * 8 + 2 * tq + (f & 1);
        if (co < q.cout_g && ci < q.cin_g) dst[co * q.red + ci * K + k] = acc[(i * 4 + jn) * 4 + f];
      }
  }
}

// Where this kernel runs (CONVKIT_F32_WGRAD_WINDOW, read once): Cout/groups <= 64 by default (see the top), =1 every
// shape it plans, =0 none (the tile kernel of conv1d_dense_f32.cu everywhere).
bool window_wanted(const Conv1dParams& p) {
  static const bool all = env_equals("CONVKIT_F32_WGRAD_WINDOW", "1"), none = env_equals("CONVKIT_F32_WGRAD_WINDOW", "0");
  return !none && (all || (p.groups >= 1 && p.out_channels / p.groups <= 64));
}

bool make_plan(const Conv1dParams& p, WgradPlan& q) {
  // the window of a stage's 32 outputs, channel rows of xp = 4 (mod 32) floats: conflict-free B fragments
  if (!window_wanted(p) || !f32win::plan_window(p, kBJ, kMaxK, 4, q)) return false;
  q.red = q.cin_g * q.k;
  // channels per n tile: 8 * floor(16 / K) at most (16 n8 tiles), spread evenly over the tiles Cin/groups needs
  const int cn_max = 8 * (kMaxN8 / q.k);
  q.n_tiles = ceil_div(q.cin_g, cn_max);
  q.cn = round_up(static_cast<int>(ceil_div(q.cin_g, q.n_tiles)), 8);
  q.n8 = q.k * q.cn / 8;
  q.dy_vec = rows_vec_aligned(p.y, p.y_stride_b, p.y_stride_c, p.y_stride_l, 4);
  static const bool dy_align = env_equals("CONVKIT_F32_WGRAD_DY_ALIGN", "1");
  q.dy_lead = dy_align && !q.dy_vec && p.y_stride_l == 1 && reinterpret_cast<uintptr_t>(p.y) % 4 == 0;
  q.slot_floats = kBM * kDyPitch + q.cn * q.xp;
  // two blocks per SM where three stages fit twice (four where four do), else one with up to four
  const int limit = smem_optin_bytes(), slot_bytes = q.slot_floats * 4;
  if (2 * (3 * slot_bytes + 2048) <= limit + 1024) {
    q.blocks_per_sm = 2;
    q.ns = 2 * (4 * slot_bytes + 2048) <= limit + 1024 ? 4 : 3;
  } else {
    q.blocks_per_sm = 1;
    q.ns = std::min(4, (limit - kStaticSmem) / slot_bytes);
    if (q.ns < 2) return false;
  }
  q.smem_bytes = q.ns * slot_bytes;
  q.m_tiles = ceil_div(q.cout_g, kBM);
  q.chunks_per_row = ceil_div(p.out_length, kBJ);
  q.total_chunks = p.batch * q.chunks_per_row;
  const int64_t pairs = p.groups * q.m_tiles * q.n_tiles;
  if (q.total_chunks == 0 || pairs >= (int64_t{1} << 31)) return false;
  // about four blocks per resident block slot in all, never more splits than chunks; workspace <= ~256 MB
  const int64_t cap = split_cap(p.out_channels * q.red + p.out_channels);
  const int64_t want = ceil_div(int64_t{p.num_sms > 0 ? p.num_sms : 1} * q.blocks_per_sm * 4, pairs);
  q.splits = plan_splits(want, q.total_chunks, cap, pairs, q.per_split);
  return true;
}

template <int kBlocks>
cudaError_t launch_window(const Conv1dParams& p, const WgradPlan& q, cudaStream_t stream) {
  auto kernel = conv1d_bwd_weight_dense_tf32_window_kernel<kBlocks>;
  cudaError_t err = allow_max_dynamic_smem(kernel);
  if (err != cudaSuccess) return err;
  const unsigned grid = static_cast<unsigned>(p.groups * q.m_tiles * q.n_tiles * q.splits);
  kernel<<<grid, kThreads, q.smem_bytes, stream>>>(p, q);
  return cudaGetLastError();
}

}  // namespace

int64_t plan_conv1d_bwd_weight_dense_tf32(Conv1dParams& p) {
  WgradPlan q;
  if (!make_plan(p, q)) return plan_conv1d_bwd_weight_dense_f32(p);
  p.weight_splits = q.splits;
  p.bias_splits = q.splits;
  return q.splits * (p.out_channels * q.red + p.out_channels);
}

cudaError_t launch_conv1d_bwd_weight_dense_tf32(const Conv1dParams& p, cudaStream_t stream) {
  WgradPlan q;
  if (!make_plan(p, q)) return launch_conv1d_bwd_weight_dense_tf32_tiles(p, stream);
  if (q.splits != p.weight_splits) return cudaErrorInvalidValue;
  cudaError_t err = q.blocks_per_sm == 2 ? launch_window<2>(p, q, stream) : launch_window<1>(p, q, stream);
  if (err != cudaSuccess) return err;
  // p.w / p.bias are the grad-weight / grad-bias outputs here (see conv1d_params.h).
  return sum_weight_bias_partials<float>(p, static_cast<const float*>(p.workspace), q.splits, p.out_channels * q.red,
                                         p.out_channels, p.w, p.bias, stream);
}

}  // namespace convkit
