// Depthwise conv1d, streaming kernels: no shared-memory staging of the input, every global access a
// 16-byte vector in warp-coalesced order. Forward variant 9 and backward variant 4 of launch_fwd /
// launch_bwd; same eligibility as the pipelined / direct kernels (fixed (K, S, D), stride 1 or 2,
// fp32/fp16/bf16, 16-byte aligned contiguous rows, left padding <= (K-1)*D; the backward also channel
// multiplier 1, no activation).
//
// Layout of the work: a block covers kTile = kThreads * V outputs of one (b, c) row as U = V / VE
// "units" of VE outputs (one 16-byte vector) per thread, unit u of the block's first at
// u0 + i * kThreads + threadIdx.x for i < U. So every load and store instruction of a warp touches 512
// contiguous bytes, all U loads of a thread are issued before any is used, and a thread keeps only
// a few dozen registers, so the SM holds 16 blocks: the structure of a device-to-device copy.
//
// The window a unit needs (its VE outputs' taps: (VE - 1) * S + (K - 1) * D + 1 inputs) spans its own
// S input vectors and a few neighbours'. Those are the own vectors of lanes a few places up or down,
// fetched with warp shuffles; lanes at the warp's edges load the missing vectors themselves (they
// are in L1/L2: the neighbouring warp reads them too). The window's start is misaligned by the
// launch-uniform shift (-pad mod VE), which window_from_words applies on registers.
#pragma once

#include <cstdint>
#include <type_traits>

#include "activation.cuh"
#include "common.cuh"
#include "conv1d_depthwise_config.h"

namespace convkit {
namespace dw {

template <typename T, int K, int S, int D, int V>
struct StreamCfg {
  static constexpr int VE = VecOf<T>::kElems;
  static constexpr int KD = (K - 1) * D;
  static constexpr int U = V / VE;                     // units (16-byte output vectors) per thread
  static constexpr int kTile = kThreads * V;           // outputs per block
  static constexpr int kWin = (VE - 1) * S + KD + 1;   // inputs behind one unit
  static constexpr int NV = window_vecs<T>(kWin);      // input vectors covering the window + shift
  static_assert(V % VE == 0 && (S == 1 || S == 2), "whole units per thread; stride 1 or 2");
};

// Resident blocks per SM asked of the compiler (it caps the registers to fit): `short_rows` for the
// 16-bit kernels with 2 units per thread (what rows too short for the doubled tile run, e.g. L 2048),
// else 1 (no cap). Measured on the H200 (benchmarks/NOTES.md, session 5): capping the 16-bit 2-unit
// kernels (fwd 16 blocks, bwd 10) made mamba's bf16 fwd 83 -> 87 % and bwd 76 -> 81 % of the floor;
// capping the 4-unit kernels made kb_dw_k3 up to 11 % slower. `max_kd`: windows longer than that
// ((K-1)*D > max_kd) are not capped: the forward's cap of 16 blocks is 32 registers, where the K4 D2
// forward spilled 28 bytes and ran at 73 % of the floor on mamba's shape (session 6; uncapped it
// needs 40 registers and does not spill).
template <typename T, int V> __host__ __device__ constexpr int stream_min_blocks(int short_rows, int kd = 0, int max_kd = 1 << 30) {
  return sizeof(T) == 2 && V / VecOf<T>::kElems <= 2 && kd <= max_kd ? short_rows : 1;
}

// Input vector g (elements [g*VE, g*VE + VE)) of a 16-byte aligned row of length len, zero outside;
// kFast: the caller knows it is inside. Row-internal indices are 32-bit (stream_ok bounds the lengths).
template <typename T, bool kFast = false>
__device__ __forceinline__ uint4 load_vec(const T* row, int g, int len) {
  constexpr int VE = VecOf<T>::kElems;
  if (kFast) return __ldg(reinterpret_cast<const uint4*>(row) + g);
  const int q = g * VE;
  if (q >= 0 && q + VE <= len) return __ldg(reinterpret_cast<const uint4*>(row) + g);
  uint4 r = make_uint4(0u, 0u, 0u, 0u);
  T* e = reinterpret_cast<T*>(&r);
#pragma unroll
  for (int m = 0; m < VE; ++m)
    if (q + m >= 0 && q + m < len) e[m] = raw_load(row, q + m);
  return r;
}

// VE values to a 16-byte aligned vector of a row.
template <typename T>
__device__ __forceinline__ void store_vec(T* row, int g, const float (&v)[VecOf<T>::kElems]) {
  uint4 raw;
  T* out = reinterpret_cast<T*>(&raw);
#pragma unroll
  for (int e = 0; e < VecOf<T>::kElems; ++e) out[e] = from_acc<T>(v[e]);
  reinterpret_cast<uint4*>(row)[g] = raw;
}

// The VE elements of a 16-byte vector, as float.
template <typename T>
__device__ __forceinline__ void unpack_vec(const uint4& v, float (&out)[VecOf<T>::kElems]) {
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int m = 0; m < VecOf<T>::kElems; ++m) out[m] = to_acc(e[m]);
}

__device__ __forceinline__ uint4 shfl_vec(const uint4& v, int src) {
  uint4 r;
  r.x = __shfl_sync(0xffffffffu, v.x, src);
  r.y = __shfl_sync(0xffffffffu, v.y, src);
  r.z = __shfl_sync(0xffffffffu, v.z, src);
  r.w = __shfl_sync(0xffffffffu, v.w, src);
  return r;
}

// Words of input vectors [gu + first, gu + first + NV) of a row, where gu = unit * S is the first of
// this lane's own S vectors `own` (lane l + q owns [gu + q*S, + S)). The whole warp calls it with its
// 32 consecutive units; vectors owned outside the warp are loaded.
template <typename T, int S, int NV>
__device__ __forceinline__ void gather_window(const uint4 (&own)[S], int first, int lane, const T* row, int gu,
                                              int len, uint32_t (&w)[NV * 4]) {
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    const int r = first + v;                            // vector relative to gu
    const int q = S == 1 ? r : (r >= 0 ? r / S : -((-r + S - 1) / S));  // owning lane, relative
    const int slot = r - q * S;
    const int src = lane + q;
    const int src_c = src < 0 ? 0 : (src > 31 ? 31 : src);
    uint4 val = shfl_vec(own[0], src_c);
    if constexpr (S == 2) {
      const uint4 val1 = shfl_vec(own[1], src_c);
      if (slot == 1) val = val1;
    }
    if (src != src_c) val = load_vec(row, gu + r, len);
    w[4 * v] = val.x; w[4 * v + 1] = val.y; w[4 * v + 2] = val.z; w[4 * v + 3] = val.w;
  }
}

// The kWin = (VE - 1) * S + (K - 1) * D + 1 inputs behind unit u (first input u*VE*S - pad) as float,
// xin[m] = x[u*VE*S - pad + m]. gu = u * S; `own` are this lane's S vectors. kPad >= 0: the padding
// is that compile-time value (the kernels' causal and "same" instances), so only the words the
// window touches are fetched and the shift is free; kPad < 0: `pad` at run time (window_from_words).
template <typename T, int K, int S, int D, int kPad>
__device__ __forceinline__ void unit_window(const uint4 (&own)[S], int lane, const T* row, int gu, int len, int pad, float (&xin)[StreamCfg<T, K, S, D, VecOf<T>::kElems>::kWin]) {
  using Cfg = StreamCfg<T, K, S, D, VecOf<T>::kElems>;
  constexpr int VE = Cfg::VE, NV = Cfg::NV, kWin = Cfg::kWin;
  if constexpr (kPad < 0) {
    const int pv = (pad + VE - 1) / VE;
    uint32_t words[NV * 4];
    gather_window<T, S, NV>(own, -pv, lane, row, gu, len, words);
    window_from_words<T>(words, pv * VE - pad, xin);
  } else {
    constexpr int kPerWord = 4 / sizeof(T);
    constexpr int PV = (kPad + VE - 1) / VE, SH = PV * VE - kPad;  // window starts SH into vector gu - PV
    constexpr int W0 = SH / kPerWord, W1 = (SH + kWin - 1) / kPerWord;  // words [W0, W1] are read
    uint32_t w[NV * 4];
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      if (4 * v + 3 < W0 || 4 * v > W1) continue;  // compile-time: the window misses this vector
      const int r = v - PV;                           // vector gu + r
      const int q = r >= 0 ? r / S : -((-r + S - 1) / S), slot = r - q * S;  // owner lane + q, own[slot]
      const uint32_t* ow = reinterpret_cast<const uint32_t*>(&own[slot]);
      if (q == 0) {
#pragma unroll
        for (int e = 0; e < 4; ++e) w[4 * v + e] = ow[e];
      } else {
        const int src = lane + q;
        const bool outside = src < 0 || src > 31;
        uint4 lv = make_uint4(0u, 0u, 0u, 0u);
        if (outside) lv = load_vec<T>(row, gu + r, len);  // one or two lanes: always guarded
        const uint32_t* lw = reinterpret_cast<const uint32_t*>(&lv);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (4 * v + e < W0 || 4 * v + e > W1) continue;
          const uint32_t got = __shfl_sync(0xffffffffu, ow[e], src & 31);
          w[4 * v + e] = outside ? lw[e] : got;
        }
      }
    }
#pragma unroll
    for (int m = 0; m < kWin; ++m) {
      const int e = SH + m;
      if constexpr (kPerWord == 2) {
        const uint32_t word = w[e / 2];
        xin[m] = to_acc(from_bits<T>(static_cast<unsigned short>((e & 1) ? (word >> 16) : (word & 0xffffu))));
      } else {
        xin[m] = __uint_as_float(w[e]);
      }
    }
  }
}

// The compile-time paddings the streaming kernels are instantiated for (kPadMode 1, 2), besides
// any padding at run time (0): causal (K-1)*D and "same" ((K-1)*D / 2, torch's padding='same').
template <int K, int D, int kPadMode> __host__ __device__ constexpr int stream_pad() {
  return kPadMode == 1 ? (K - 1) * D : kPadMode == 2 ? (K - 1) * D / 2 : -1;
}
inline int stream_pad_mode(int64_t pad, int K, int D) {
  return pad == int64_t{K - 1} * D ? 1 : pad == int64_t{K - 1} * D / 2 ? 2 : 0;
}

// Blocks of a streaming launch over rows of `len` (outputs, or the backward's max(in, out) length);
// 0 when they do not fit a 1-D grid or a row is too long for the kernels' 32-bit row indices.
inline int64_t stream_blocks(int64_t rows, int64_t len, int V) {
  return len < (int64_t{1} << 30) ? direct_tiles(rows, len, V) : 0;
}

// The streaming kernels at the extra widths of stream_vec (2V, V/2) exist in code for compute_90 and newer
// (the sm_90 SASS and the compute_90 PTX); code for sm_80 has only the configured width V. The widths were
// tuned on the H200, and leaving them out of the sm_80 pass keeps the package's build within its budget
// on the 2-core CI machine (they are most of the streaming kernels).
constexpr int kStreamWidthsMinArch = 90;

// Whether this compilation pass builds the streaming kernel of width V whose configured width is kBase
// (the kernels trap otherwise; stream_vec never picks them there).
template <int V, int kBase> __host__ __device__ constexpr bool stream_width_built() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  return V == kBase;
#else
  return true;
#endif
}

// Outputs per thread of a streaming launch over rows of `len`: the configured V, doubled for 16-bit
// types when a row fills a block of the doubled size (on the H200 that was 5-15 % faster on rows of
// 4096+ outputs, 10-19 % for K 7 and 9, and up to 40 % slower on rows of 2048, where half of the bigger
// block idles), halved at stride 2 when a row fits in half a block (stride 2 halves the output rows:
// mamba's shape at stride 2, 1024 outputs, left half of each V = 16 block idle and ran at 22-39 % of
// the floor); always V where the device runs code for an architecture before 90 (`arch`:
// Conv1dParams::code_arch, the code's and not the device's, see device_code_arch). launch_fwd / launch_bwd
// and plan_bwd must agree, hence one function.
inline int stream_vec(int elem_size, int64_t len, int V, int64_t stride, int arch) {
  if (arch < kStreamWidthsMinArch) return V;
  const int ve = 16 / elem_size;
  if (elem_size == 2 && ceil_div(len, ve) >= int64_t{kThreads} * (2 * V / ve)) return 2 * V;
  if (stride == 2 && V / 2 >= ve && V % (2 * ve) == 0 && len <= int64_t{kThreads} * (V / 2)) return V / 2;
  return V;
}

// Calls f(std::integral_constant<int, v>{}) for v = stream_vec's choice from the configured V (V, 2V
// for 16-bit types, V/2 at stride 2): the instantiations launch_fwd / launch_bwd need, in one place.
template <typename T, int S, int V, typename F>
void with_stream_vec(int v, F&& f) {
  if (v == V) {
    f(std::integral_constant<int, V>{});
  } else if (v > V) {
    if constexpr (sizeof(T) == 2) f(std::integral_constant<int, 2 * V>{});
  } else if constexpr (S == 2 && (V / 2) % VecOf<T>::kElems == 0) {
    f(std::integral_constant<int, V / 2>{});
  }
}

// One block's units of one row; kFast: every vector read and written is inside its row and the
// output rows are aligned, so no access is guarded.
template <typename T, int K, int S, int D, int V, int kPadMode, bool kFast>
__device__ __forceinline__ void fwd_stream_block(const Conv1dParams& p, const T* xrow, T* yrow, int64_t y_off, int64_t co,
                                                 int ub, int n_units) {
  using Cfg = StreamCfg<T, K, S, D, V>;
  constexpr int VE = Cfg::VE, U = Cfg::U, kWin = Cfg::kWin;
  const int lane = threadIdx.x % 32;
  const int u0 = ub + threadIdx.x;
  const int len = static_cast<int>(p.in_length);
  uint4 own[U][S];
#pragma unroll
  for (int i = 0; i < U; ++i)
#pragma unroll
    for (int o = 0; o < S; ++o) own[i][o] = load_vec<T, kFast>(xrow, (u0 + i * kThreads) * S + o, len);

  float w[K];
#pragma unroll
  for (int k = 0; k < K; ++k) w[k] = load_param<T>(p, p.w, co * p.w_stride_o + k * p.w_stride_k);
  const float bias = p.bias != nullptr ? load_param<T>(p, p.bias, co) : 0.0f;
  const int pad = static_cast<int>(p.pad_left);

#pragma unroll
  for (int i = 0; i < U; ++i) {
    const int u = u0 + i * kThreads;
    if (!kFast && u - lane >= n_units) break;  // warp-uniform
    float xin[kWin];
    unit_window<T, K, S, D, stream_pad<K, D, kPadMode>()>(own[i], lane, xrow, u * S, len, pad, xin);
    if (!kFast && u >= n_units) continue;
    float acc[VE];
    fwd_taps<K, S, D>(w, xin, bias, p.activation, acc);
    if constexpr (kFast) {
      store_vec<T>(yrow, u, acc);
    } else {
      store_run<T, VE>(p.y, y_off, p.y_stride_l, int64_t{u} * VE, p.out_length, acc);
    }
  }
}

template <typename T, int K, int S, int D, int V, int kPadMode>
__global__ void __launch_bounds__(kThreads, stream_min_blocks<T, V>(CONVKIT_DW_STREAM_FWD_MIN_BLOCKS, (K - 1) * D, 3))
    conv1d_fwd_dw_stream_kernel(const Conv1dParams p, bool edge_only) {
  if constexpr (!stream_width_built<V, fwd_vec<T>()>()) {
    __trap();  // (not built for this architecture: see kStreamWidthsMinArch)
  } else {
  using Cfg = StreamCfg<T, K, S, D, V>;
  constexpr int VE = Cfg::VE, kBlockUnits = Cfg::kTile / VE;
  const int64_t n_segs = ceil_div(p.out_length, int64_t{Cfg::kTile});
  const int n_units = static_cast<int>(ceil_div(p.out_length, int64_t{VE}));
  int64_t row, seg, b, co;
  divmod(blockIdx.x, n_segs, row, seg);
  const int ub = static_cast<int>(seg) * kBlockUnits;  // the block's first unit
  if (ub + (threadIdx.x & ~31) >= n_units) return;     // the whole warp is past the row
  divmod(row, p.out_channels, b, co);
  const int64_t ci = depthwise_in_channel(p, co);
  const T* xrow = static_cast<const T*>(p.x) + b * p.x_stride_b + ci * p.x_stride_c;
  const int64_t y_off = b * p.y_stride_b + co * p.y_stride_c;
  // Unguarded: the threads' own loads and the stores (halo loads at warp edges are always guarded).
  const int ue = ub + kBlockUnits;
  const bool fast = int64_t{ue} * S * VE <= p.in_length && int64_t{ue} * VE <= p.out_length &&
                    rows_vec_aligned(p.y, p.y_stride_b, p.y_stride_c, p.y_stride_l, VE);
  T* yrow = static_cast<T*>(p.y) + y_off;
  if (fast) {
    if (!edge_only) fwd_stream_block<T, K, S, D, V, kPadMode, true>(p, xrow, yrow, y_off, co, ub, n_units);
  } else if constexpr (kPadMode == 0) {
    fwd_stream_block<T, K, S, D, V, 0, false>(p, xrow, yrow, y_off, co, ub, n_units);
  }
  }
}

// Backward (stride 1 or 2, multiplier 1, no activation: bwd_stream_ok). A unit is VE outputs (one dy
// vector) and the S * VE inputs they start from (S vectors of x and of dx); a block covers units of
// one (b, c) row up to bwd_stream_len. For its unit u a thread computes
//   grad-weight / grad-bias sums over outputs j in unit u: dy[j] * x[j*S - P + k*D] (the forward's
//               window of x) and dy[j];
//   grad-input  dx[i] = sum over taps k with (i + P - k*D) % S == 0 of w[k] * dy[(i + P - k*D) / S],
//               i in unit u. Stride 1: a forward window of dy with left padding P2 = (K-1)*D - P >= 0
//               and the taps reversed. Stride 2: with P = S*Pq + Pr, the dy window
//               [u*VE + Pq - A, u*VE + Pq + VE], A = ceil((K-1)*D / S), and for each input the taps
//               of its phase (compile-time for a compile-time Pr; kPadMode 0 branches on Pr once);
// and writes its block's sums to the workspace as split b * n_segs + seg, which sum_partials_kernel
// adds in a fixed order (deterministic), like the direct kernel.
template <int K, int S, int D> struct BwdStreamDx {
  static constexpr int KD = (K - 1) * D;
  static constexpr int A = (KD + S - 1) / S;  // dy elements of the window before the unit's (stride 2)
  static constexpr int K2 = A + 2;            // the window as unit_window<K2, 1, 1>: VE + A + 1 elements
};

// Stride 2: dx of unit u's S*VE inputs from the dy window (dyin[m] = dy[u*VE + Pq - A + m]) for the
// remainder kPr = P % S.
template <int K, int S, int D, int VE, int kPr, int kWin2>
__device__ __forceinline__ void strided_dx(const float (&w)[K], const float (&dyin)[kWin2], float (&acc)[S * VE]) {
  constexpr int A = BwdStreamDx<K, S, D>::A;
#pragma unroll
  for (int r = 0; r < S * VE; ++r) {
    acc[r] = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int t = r + kPr - k * D;  // compile-time after unrolling; t / S is exact when t % S == 0
      if (t % S == 0) acc[r] += w[k] * dyin[A + t / S];
    }
  }
}

template <typename T, int K, int S, int D, int V, int kPadMode, bool kFast>
__device__ __forceinline__ void bwd_stream_block(const Conv1dParams& p, const T* xrow, const T* dyrow, T* dxrow,
                                                 int64_t dx_off, int64_t c, int ub, int n_units, float (&gw)[K],
                                                 float& gb) {
  using Cfg = StreamCfg<T, K, S, D, V>;
  constexpr int VE = Cfg::VE, U = Cfg::U, kWin = Cfg::kWin, KD = Cfg::KD;
  constexpr int kPad = stream_pad<K, D, kPadMode>();
  const int lane = threadIdx.x % 32;
  const int u0 = ub + threadIdx.x;
  const int len_x = static_cast<int>(p.in_length), len_y = static_cast<int>(p.out_length);
  const int pad = static_cast<int>(p.pad_left);
  uint4 xo[U][S], dyo[U][1];
#pragma unroll
  for (int i = 0; i < U; ++i) {
#pragma unroll
    for (int o = 0; o < S; ++o) xo[i][o] = load_vec<T, kFast>(xrow, (u0 + i * kThreads) * S + o, len_x);
    dyo[i][0] = load_vec<T, kFast>(dyrow, u0 + i * kThreads, len_y);
  }
  float w[K];
  if (p.grad_x != nullptr) {
#pragma unroll
    for (int k = 0; k < K; ++k) w[k] = load_param<T>(p, p.w, c * p.w_stride_o + k * p.w_stride_k);
  }
#pragma unroll
  for (int i = 0; i < U; ++i) {
    const int u = u0 + i * kThreads;
    if (!kFast && u - lane >= n_units) break;  // warp-uniform
    float xin[kWin], g[VE];
    unit_window<T, K, S, D, kPad>(xo[i], lane, xrow, u * S, len_x, pad, xin);
    unpack_vec<T>(dyo[i][0], g);
#pragma unroll
    for (int m = 0; m < VE; ++m) {
      gb += g[m];
#pragma unroll
      for (int k = 0; k < K; ++k) gw[k] += g[m] * xin[m * S + k * D];
    }
    if (p.grad_x == nullptr) {
    } else if constexpr (S == 1) {
      constexpr int kPad2 = kPad < 0 ? -1 : KD - kPad;
      float dyin[kWin], acc[VE];
      unit_window<T, K, 1, D, kPad2>(dyo[i], lane, dyrow, u, len_y, KD - pad, dyin);
#pragma unroll
      for (int m = 0; m < VE; ++m) {
        acc[m] = 0.0f;
#pragma unroll
        for (int k = 0; k < K; ++k) acc[m] += w[k] * dyin[m + KD - k * D];
      }
      if constexpr (kFast) {
        store_vec<T>(dxrow, u, acc);
      } else if (u * VE < len_x) {
        store_run<T, VE>(p.grad_x, dx_off, p.gx_stride_l, int64_t{u} * VE, p.in_length, acc);
      }
    } else {
      using G = BwdStreamDx<K, S, D>;
      constexpr int kWin2 = StreamCfg<T, G::K2, 1, 1, VE>::kWin;
      float dyin[kWin2], acc[S * VE];
      if constexpr (kPad >= 0) {
        unit_window<T, G::K2, 1, 1, G::A - kPad / S>(dyo[i], lane, dyrow, u, len_y, 0, dyin);
        strided_dx<K, S, D, VE, kPad % S>(w, dyin, acc);
      } else {
        unit_window<T, G::K2, 1, 1, -1>(dyo[i], lane, dyrow, u, len_y, G::A - pad / S, dyin);
        if (pad % S == 0) {
          strided_dx<K, S, D, VE, 0>(w, dyin, acc);
        } else {
          strided_dx<K, S, D, VE, 1>(w, dyin, acc);
        }
      }
#pragma unroll
      for (int o = 0; o < S; ++o) {
        float part[VE];
#pragma unroll
        for (int m = 0; m < VE; ++m) part[m] = acc[o * VE + m];
        const int gv = u * S + o;  // dx vector
        if constexpr (kFast) {
          store_vec<T>(dxrow, gv, part);
        } else if (gv * VE < len_x) {
          store_run<T, VE>(p.grad_x, dx_off, p.gx_stride_l, int64_t{gv} * VE, p.in_length, part);
        }
      }
    }
  }
}

// The backward's row length in outputs: its blocks cover units up to max(out_length, in_length / S).
inline int64_t bwd_stream_len(const Conv1dParams& p) {
  return std::max(p.out_length, ceil_div(p.in_length, p.stride));
}

template <typename T, int K, int S, int D, int V, int kPadMode>
__global__ void __launch_bounds__(kThreads, stream_min_blocks<T, V>(CONVKIT_DW_STREAM_BWD_MIN_BLOCKS))
    conv1d_bwd_dw_stream_kernel(const Conv1dParams p, bool edge_only) {
  if constexpr (!stream_width_built<V, bwd_vec<T>()>()) {
    __trap();  // (not built for this architecture: see kStreamWidthsMinArch)
  } else {
  using Cfg = StreamCfg<T, K, S, D, V>;
  constexpr int VE = Cfg::VE, kBlockUnits = Cfg::kTile / VE;
  __shared__ float sums[kThreads / 32][K + 1];
  const int warp = threadIdx.x / 32;
  const int64_t C = p.out_channels;
  // bwd_stream_len (written out as max(in, out) at stride 1, which compiles to 8 registers fewer)
  const int64_t len = S == 1 ? max(p.in_length, p.out_length) : max(p.out_length, ceil_div(p.in_length, int64_t{S}));
  const int64_t n_segs = ceil_div(len, int64_t{Cfg::kTile});
  const int n_units = static_cast<int>(ceil_div(len, int64_t{VE}));
  int64_t row, seg, b, c;
  divmod(blockIdx.x, n_segs, row, seg);
  divmod(row, C, b, c);
  const int ub = static_cast<int>(seg) * kBlockUnits, ue = ub + kBlockUnits;
  const T* xrow = static_cast<const T*>(p.x) + b * p.x_stride_b + c * p.x_stride_c;
  const T* dyrow = static_cast<const T*>(p.y) + b * p.y_stride_b + c * p.y_stride_c;
  const int64_t dx_off = b * p.gx_stride_b + c * p.gx_stride_c;
  T* dxrow = p.grad_x != nullptr ? static_cast<T*>(p.grad_x) + dx_off : nullptr;
  // Unguarded: the threads' own loads of x and dy and the grad-input stores (halo loads at warp
  // edges are always guarded).
  const bool fast = int64_t{ue} * VE * S <= p.in_length && int64_t{ue} * VE <= p.out_length &&
                    (p.grad_x == nullptr ||
                     rows_vec_aligned(p.grad_x, p.gx_stride_b, p.gx_stride_c, p.gx_stride_l, VE));

  float gw[K], gb = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) gw[k] = 0.0f;
  if ((fast && edge_only) || (!fast && kPadMode != 0)) return;  // block-uniform: another launch's block
  if (ub + warp * 32 < n_units) {  // warp-uniform: the warp has units in the row
    if (fast) {
      bwd_stream_block<T, K, S, D, V, kPadMode, true>(p, xrow, dyrow, dxrow, dx_off, c, ub, n_units, gw, gb);
    } else if constexpr (kPadMode == 0) {
      bwd_stream_block<T, K, S, D, V, 0, false>(p, xrow, dyrow, dxrow, dx_off, c, ub, n_units, gw, gb);
    }
  }

  write_block_partials<K>(p, gw, gb, sums, b * n_segs + seg, c);
  }
}

}  // namespace dw
}  // namespace convkit

namespace convkit {
namespace dw {

// Launches. Blocks whose own loads and stores are all inside their rows (and whose output rows are
// aligned) run the unguarded body of the padding mode's kernel (stream_pad); the others ("edge"
// blocks: the last segment of ragged rows, unaligned outputs) are left to a second launch of the
// runtime-padding kernel with edge_only, made only when such blocks exist. So the guarded body is
// compiled once per (T, K, S, D, V), not once per padding mode, which keeps the build time down.
// The host's test mirrors the kernels' per-block test: the last segment is the least inside.
// `covered`: the row length (in outputs) the launch's blocks cover.
inline bool stream_has_edge_blocks(int64_t covered, int64_t in_len, int64_t out_len, int64_t stride, int64_t tile,
                                   bool out_aligned) {
  const int64_t end = ceil_div(covered, tile) * tile;  // one past the last segment's last output
  return !(end * stride <= in_len && end <= out_len && out_aligned);
}

template <typename T, int K, int S, int D, int V>
void launch_fwd_stream(const Conv1dParams& p, int mode, unsigned blocks, cudaStream_t stream) {
#ifdef CONVKIT_DW_STREAM_RUNTIME_PAD_ONLY  // (micro-benchmark: the run-time padding kernel for every padding)
  mode = 0;
#endif
  if (mode == 1) conv1d_fwd_dw_stream_kernel<T, K, S, D, V, 1><<<blocks, kThreads, 0, stream>>>(p, false);
  if (mode == 2) conv1d_fwd_dw_stream_kernel<T, K, S, D, V, 2><<<blocks, kThreads, 0, stream>>>(p, false);
  const bool edges = stream_has_edge_blocks(p.out_length, p.in_length, p.out_length, S, int64_t{kThreads} * V,
                                            rows_aligned<T>(p.y, p.y_stride_b, p.y_stride_c, p.y_stride_l));
  if (mode == 0 || edges)
    conv1d_fwd_dw_stream_kernel<T, K, S, D, V, 0><<<blocks, kThreads, 0, stream>>>(p, mode != 0);
}
template <typename T, int K, int S, int D, int V>
void launch_bwd_stream(const Conv1dParams& p, int mode, unsigned blocks, cudaStream_t stream) {
#ifdef CONVKIT_DW_STREAM_RUNTIME_PAD_ONLY
  mode = 0;
#endif
  const bool dx_aligned = p.grad_x == nullptr || rows_aligned<T>(p.grad_x, p.gx_stride_b, p.gx_stride_c, p.gx_stride_l);
  // The backward's blocks cover bwd_stream_len and need both rows to reach their end.
  const bool edges =
      stream_has_edge_blocks(bwd_stream_len(p), p.in_length, p.out_length, S, int64_t{kThreads} * V, dx_aligned);
  if (mode == 1) conv1d_bwd_dw_stream_kernel<T, K, S, D, V, 1><<<blocks, kThreads, 0, stream>>>(p, false);
  if (mode == 2) conv1d_bwd_dw_stream_kernel<T, K, S, D, V, 2><<<blocks, kThreads, 0, stream>>>(p, false);
  if (mode == 0 || edges) conv1d_bwd_dw_stream_kernel<T, K, S, D, V, 0><<<blocks, kThreads, 0, stream>>>(p, mode != 0);
}

// The streaming backward's conditions: the direct backward's row conditions (bwd_fused_rows_ok) at
// stride 1 or 2, and rows short enough for 32-bit row indices.
inline bool bwd_stream_ok(const Conv1dParams& p, int V) {
  return (p.stride == 1 || p.stride == 2) && bwd_fused_rows_ok(p) &&
         stream_blocks(p.batch * p.out_channels, bwd_stream_len(p), V) > 0;
}

// Grad-weight / grad-bias partial sums of a streaming backward: one per (b, block).
inline int64_t stream_bwd_splits(const Conv1dParams& p, int V) {
  return p.batch * ceil_div(bwd_stream_len(p), int64_t{kThreads} * V);
}

}  // namespace dw
}  // namespace convkit
