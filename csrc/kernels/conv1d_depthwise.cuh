// Depthwise conv1d (groups == in_channels; out_channels = multiplier * in_channels), the
// memory-bound family: forward, and a fused backward that produces grad-input, grad-weight and
// grad-bias in one pass over x and dy.
//
// Template arguments K_, S_, D_ fix kernel size, stride and dilation at compile time; 0 means "read
// it from Conv1dParams at run time", which is the generic depthwise kernel (still tiled and
// vectorised). Instantiations: generated/conv1d_dw_*.cu (from csrc/specializations.json) and
// conv1d_depthwise_generic.cu (0, 0, 0).
//
// Two designs, chosen per call in launch_fwd / launch_bwd:
//   - pipelined (conv1d_depthwise_pipelined.cuh): fixed (K, S, D), fp32/fp16/bf16, 16-byte aligned
//     contiguous rows, left padding <= (K-1)*D; windows copied by cp.async several tiles ahead.
//     This is what the suite's shapes run.
//   - staged (this file): everything else (runtime shapes, odd lengths, strided views, fp64, and
//     in the backward stride > 1, channel multiplier > 1 and fused activations). Tiles are one
//     (b, c) row segment of kTile = kThreads * V outputs; the tile's input window is converted to
//     the accumulator type into bank-padded shared memory, the next tile's window is prefetched
//     into registers meanwhile, and each thread computes V consecutive outputs (taps reused from
//     registers) and writes them with 16-byte stores where aligned.
#pragma once

#include <algorithm>
#include <cstdint>

#include "activation.cuh"
#include "common.cuh"
#include "conv1d_depthwise_config.h"
#include "launchers.h"

namespace convkit {
namespace dw {

constexpr int kThreads = 128;

// Outputs per thread (V, a tile is kThreads * V outputs) and kernel variant: the library's choices
// per direction and element size are in conv1d_depthwise_config.h, measured on the H200.
template <typename T> __host__ __device__ constexpr int fwd_vec() {
  return sizeof(T) == 2 ? CONVKIT_DW_FWD_V_16BIT : sizeof(T) == 4 ? CONVKIT_DW_FWD_V_FP32 : 8;
}
template <typename T> __host__ __device__ constexpr int bwd_vec() {
  return sizeof(T) == 2 ? CONVKIT_DW_BWD_V_16BIT : sizeof(T) == 4 ? CONVKIT_DW_BWD_V_FP32 : 8;
}
template <typename T> constexpr int fwd_variant() {
  return sizeof(T) == 2 ? CONVKIT_DW_FWD_VARIANT_16BIT : sizeof(T) == 4 ? CONVKIT_DW_FWD_VARIANT_FP32 : 0;
}
// Long kernels (K >= CONVKIT_DW_FWD_LONG_K) have their own forward choice per element size.
template <typename T, int K> constexpr bool fwd_long_k() { return sizeof(T) < 8 && K >= CONVKIT_DW_FWD_LONG_K; }
template <typename T, int K> constexpr int fwd_vec_for() {
  return !fwd_long_k<T, K>() ? fwd_vec<T>() : sizeof(T) == 2 ? CONVKIT_DW_FWD_V_16BIT_LONG_K : CONVKIT_DW_FWD_V_FP32_LONG_K;
}
template <typename T, int K> constexpr int fwd_variant_for() {
  return !fwd_long_k<T, K>() ? fwd_variant<T>()
         : sizeof(T) == 2    ? CONVKIT_DW_FWD_VARIANT_16BIT_LONG_K
                             : CONVKIT_DW_FWD_VARIANT_FP32_LONG_K;
}
template <typename T> constexpr int bwd_variant() {
  return sizeof(T) == 2 ? CONVKIT_DW_BWD_VARIANT_16BIT : sizeof(T) == 4 ? CONVKIT_DW_BWD_VARIANT_FP32 : 0;
}
// Long kernels (K >= CONVKIT_DW_BWD_LONG_K) have their own backward choice; plan_bwd (not a
// template) uses the runtime twin, which must agree.
template <typename T, int K> constexpr int bwd_variant_for() {
  return sizeof(T) == 8 || K < CONVKIT_DW_BWD_LONG_K ? bwd_variant<T>()
         : sizeof(T) == 2                            ? CONVKIT_DW_BWD_VARIANT_16BIT_LONG_K
                                                     : CONVKIT_DW_BWD_VARIANT_FP32_LONG_K;
}
inline int bwd_variant(DType dt, int64_t K) {
  if (dt != DType::kFloat64 && K >= CONVKIT_DW_BWD_LONG_K)
    return dt == DType::kFloat32 ? CONVKIT_DW_BWD_VARIANT_FP32_LONG_K : CONVKIT_DW_BWD_VARIANT_16BIT_LONG_K;
  return dt == DType::kFloat16 || dt == DType::kBFloat16 ? CONVKIT_DW_BWD_VARIANT_16BIT
         : dt == DType::kFloat32                         ? CONVKIT_DW_BWD_VARIANT_FP32
                                                         : 0;
}
// The staged kernels keep every output of a thread in registers: at most 16 (32 costs 128-168
// registers per thread); only the pipelined forward's interleaved runs go wider.
__host__ __device__ constexpr int staged_vec(int v) { return v > 16 ? 16 : v; }
inline int fwd_vec(DType dt) {
  return dt == DType::kFloat16 || dt == DType::kBFloat16 ? CONVKIT_DW_FWD_V_16BIT
         : dt == DType::kFloat32                         ? CONVKIT_DW_FWD_V_FP32
                                                         : 8;
}
inline int bwd_vec(DType dt) {
  return dt == DType::kFloat16 || dt == DType::kBFloat16 ? CONVKIT_DW_BWD_V_16BIT
         : dt == DType::kFloat32                         ? CONVKIT_DW_BWD_V_FP32
                                                         : 8;
}

// Threads read the window at stride V (* stride); one pad word every V makes that stride odd in
// banks, so those reads are conflict-free.
template <int V> __device__ __forceinline__ int padded(int a) { return a + a / V; }
__host__ __device__ constexpr int64_t padded_size(int64_t n, int V) { return n + n / V + 1; }

template <typename T> struct VecOf {
  static constexpr int kElems = 16 / sizeof(T);  // elements per 16-byte access
};

__device__ __forceinline__ int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// Loads elements [pos0, pos0 + n) of one row (element stride `sl`, row length `len`) into
// win[padded(0 .. n)], zero outside [0, len). 16-byte loads when sl == 1 and the row is aligned.
template <typename T, int V, typename A>
__device__ __forceinline__ void stage_row(A* win, const void* base, int64_t row_off, int64_t sl, int64_t pos0,
                                          int n, int64_t len) {
  constexpr int VE = VecOf<T>::kElems;
  const T* row = static_cast<const T*>(base) + row_off;
  const bool vec_ok = sl == 1 && (reinterpret_cast<uintptr_t>(row) % 16 == 0);
  if (!vec_ok) {
    for (int a = threadIdx.x; a < n; a += kThreads) {
      const int64_t pos = pos0 + a;
      win[padded<V>(a)] = (pos >= 0 && pos < len) ? load<T>(row, pos * sl) : A(0);
    }
    return;
  }
  // Slots of VE elements aligned to the row start; slot s covers positions [q0 + s*VE, +VE).
  const int64_t q0 = floor_div(pos0, VE) * VE;
  const int nslots = static_cast<int>((pos0 + n - q0 + VE - 1) / VE);
  for (int s = threadIdx.x; s < nslots; s += kThreads) {
    const int64_t q = q0 + static_cast<int64_t>(s) * VE;
    if (q >= 0 && q + VE <= len) {
      uint4 raw = __ldg(reinterpret_cast<const uint4*>(row + q));
      const T* v = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int e = 0; e < VE; ++e) {
        const int a = static_cast<int>(q + e - pos0);
        if (a >= 0 && a < n) win[padded<V>(a)] = to_acc(v[e]);
      }
    } else {
#pragma unroll
      for (int e = 0; e < VE; ++e) {
        const int a = static_cast<int>(q + e - pos0);
        const int64_t pos = q + e;
        if (a >= 0 && a < n) win[padded<V>(a)] = (pos >= 0 && pos < len) ? load<T>(row, pos) : A(0);
      }
    }
  }
}

// Register-staged prefetch of a window: `fetch` issues the global loads of a tile's window into
// registers (raw 16-byte slots, no waiting), `commit` converts them into shared memory later. A
// kernel fetches tile n+1 before computing tile n, so every thread keeps loads in flight while it
// computes and stores: without this the kernels are latency-bound (benchmarks/NOTES.md, runs 1-3).
//
// Slots are VE elements (16 bytes). When the row is contiguous and 16-byte aligned, slots are
// aligned to the row start and fetched with one 16-byte load each (or element by element at the
// row's ends); otherwise slots start at the window start and every element is loaded on its own,
// still all issued before any is used. R slots per thread bound the window: R * kThreads slots
// (`fits`); the kernels check that once per launch and otherwise use stage_row.
template <typename T, int R> struct WindowPrefetch {
  static constexpr int VE = VecOf<T>::kElems;
  uint4 buf[R];
  int64_t q0;
  int nslots;

  __host__ __device__ static constexpr bool fits(int64_t n) { return (n + VE - 1) / VE + 1 <= int64_t{R} * kThreads; }

  __device__ __forceinline__ void fetch(const void* base, int64_t row_off, int64_t sl, int64_t pos0, int n,
                                        int64_t len) {
    const T* row = static_cast<const T*>(base) + row_off;
    const bool vec_ok = sl == 1 && (reinterpret_cast<uintptr_t>(row) % 16 == 0);
    q0 = vec_ok ? floor_div(pos0, VE) * VE : pos0;
    nslots = static_cast<int>((pos0 + n - q0 + VE - 1) / VE);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int s = threadIdx.x + r * kThreads;
      if (s >= nslots) break;
      const int64_t q = q0 + static_cast<int64_t>(s) * VE;
      if (vec_ok && q >= 0 && q + VE <= len) {
        buf[r] = __ldg(reinterpret_cast<const uint4*>(row + q));
      } else {
        T* v = reinterpret_cast<T*>(&buf[r]);
#pragma unroll
        for (int e = 0; e < VE; ++e) {
          const int64_t pos = q + e;
          v[e] = (pos >= 0 && pos < len) ? raw_load(row, pos * sl) : zero_value<T>();
        }
      }
    }
  }

  // Writes the fetched elements [pos0, pos0 + n) to win[padded<V>(0 .. n)].
  template <int V, typename A>
  __device__ __forceinline__ void commit(A* win, int64_t pos0, int n) const {
    const int skip = static_cast<int>(pos0 - q0);  // 0 <= skip < VE
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int s = threadIdx.x + r * kThreads;
      if (s >= nslots) break;
      const T* v = reinterpret_cast<const T*>(&buf[r]);
#pragma unroll
      for (int e = 0; e < VE; ++e) {
        const int a = s * VE + e - skip;
        if (a >= 0 && a < n) win[padded<V>(a)] = to_acc(v[e]);
      }
    }
  }
};

// Writes V consecutive values to positions [j, j + V) of a row, clipped at `len`.
template <typename T, int V, typename A>
__device__ __forceinline__ void store_run(void* base, int64_t row_off, int64_t sl, int64_t j, int64_t len,
                                          const A (&v)[V]) {
  T* row = static_cast<T*>(base) + row_off;
  constexpr int VE = VecOf<T>::kElems;
  if (sl == 1 && j + V <= len && reinterpret_cast<uintptr_t>(row + j) % 16 == 0) {
#pragma unroll
    for (int c = 0; c < V; c += VE) {
      uint4 raw;
      T* out = reinterpret_cast<T*>(&raw);
#pragma unroll
      for (int e = 0; e < VE; ++e) out[e] = from_acc<T>(v[c + e]);
      *reinterpret_cast<uint4*>(row + j + c) = raw;
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < V; ++e)
    if (j + e < len) row[(j + e) * sl] = from_acc<T>(v[e]);
}

// Window (in elements) of the input a tile of `outs` outputs reads.
__host__ __device__ constexpr int window_len(int outs, int K, int S, int D) { return (outs - 1) * S + (K - 1) * D + 1; }

// Register slots (16 bytes each) per thread that hold a prefetched window of `elems` elements of T;
// the runtime-shape kernels (elems unknown at compile time) use `fallback`.
template <typename T> __host__ __device__ constexpr int prefetch_slots(int elems, int fallback) {
  return elems > 0 ? ((elems + VecOf<T>::kElems - 1) / VecOf<T>::kElems + 1 + kThreads - 1) / kThreads : fallback;
}

// The outputs [j0 + V*threadIdx.x, +V) of row (b, co) from the staged window `win`.
template <typename T, int K_, int S_, int D_, int V, typename A>
__device__ __forceinline__ void fwd_dw_outputs(const Conv1dParams& p, const A* win, int64_t b, int64_t co, int64_t j0,
                                               int K, int S, int D) {
  const int jl = threadIdx.x * V;
  if (j0 + jl >= p.out_length) return;
  const int64_t w_off = co * p.w_stride_o;
  const A bias = p.bias != nullptr ? load_param<T>(p, p.bias, co) : A(0);
  A acc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = bias;
  if constexpr (K_ > 0 && S_ > 0 && D_ > 0) {
    A w[K_];
#pragma unroll
    for (int k = 0; k < K_; ++k) w[k] = load_param<T>(p, p.w, w_off + k * p.w_stride_k);
    // Fully unrolled: repeated window positions (i*S + k*D) are loaded once.
#pragma unroll
    for (int i = 0; i < V; ++i)
#pragma unroll
      for (int k = 0; k < K_; ++k) acc[i] += w[k] * win[padded<V>((jl + i) * S_ + k * D_)];
  } else {
    for (int k = 0; k < K; ++k) {
      const A wk = load_param<T>(p, p.w, w_off + k * p.w_stride_k);
#pragma unroll
      for (int i = 0; i < V; ++i) acc[i] += wk * win[padded<V>((jl + i) * S + k * D)];
    }
  }
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = activate(p.activation, acc[i]);
  store_run<T, V>(p.y, b * p.y_stride_b + co * p.y_stride_c, p.y_stride_l, j0 + jl, p.out_length, acc);
}

// Forward. Tiles are (b, co, segment of V * kThreads outputs), walked grid-stride; each block
// prefetches the next tile's input window into registers while it computes the current one.
template <typename T, int K_, int S_, int D_, int V>
__global__ void __launch_bounds__(kThreads) conv1d_fwd_dw_kernel(const Conv1dParams p) {
  using A = typename AccOf<T>::type;
  constexpr int kTile = kThreads * V;
  constexpr bool kFixed = K_ > 0 && S_ > 0 && D_ > 0;
  // Runtime shapes: room for stride <= 2 and a halo of up to kThreads slots.
  using Prefetch = WindowPrefetch<T, prefetch_slots<T>(kFixed ? window_len(kTile, K_, S_, D_) : 0,
                                                      2 * ((V * sizeof(T) + 15) / 16) + 1)>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  A* win = reinterpret_cast<A*>(smem_raw);
  const int K = K_ > 0 ? K_ : static_cast<int>(p.kernel_size);
  const int S = S_ > 0 ? S_ : static_cast<int>(p.stride);
  const int D = D_ > 0 ? D_ : static_cast<int>(p.dilation);
  const int W = window_len(kTile, K, S, D);
  const int64_t mult = p.out_channels / p.in_channels;
  const int64_t l_tiles = ceil_div(p.out_length, kTile);
  const int64_t num_tiles = p.batch * p.out_channels * l_tiles;
  const void* x = p.x;
  auto x_row = [&](int64_t b, int64_t co) { return b * p.x_stride_b + (co / mult) * p.x_stride_c; };
  auto decode = [&](int64_t tile, int64_t& b, int64_t& co, int64_t& j0) {
    int64_t row, lt;
    divmod(tile, l_tiles, row, lt);
    divmod(row, p.out_channels, b, co);
    j0 = lt * kTile;
  };

  if (!Prefetch::fits(W)) {  // runtime shapes with a very wide window: stage without prefetch
    for (int64_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
      int64_t b, co, j0;
      decode(tile, b, co, j0);
      __syncthreads();  // the previous tile is done with `win`
      stage_row<T, V>(win, x, x_row(b, co), p.x_stride_l, j0 * S - p.pad_left, W, p.in_length);
      __syncthreads();
      fwd_dw_outputs<T, K_, S_, D_, V>(p, win, b, co, j0, K, S, D);
    }
    return;
  }

  Prefetch pf;
  int64_t tile = blockIdx.x, b = 0, co = 0, j0 = 0;
  if (tile < num_tiles) {
    decode(tile, b, co, j0);
    pf.fetch(x, x_row(b, co), p.x_stride_l, j0 * S - p.pad_left, W, p.in_length);
  }
  for (; tile < num_tiles; tile += gridDim.x) {
    __syncthreads();  // the previous tile is done with `win`
    pf.template commit<V>(win, j0 * S - p.pad_left, W);
    __syncthreads();
    const int64_t cb = b, cco = co, cj0 = j0;
    if (tile + gridDim.x < num_tiles) {
      decode(tile + gridDim.x, b, co, j0);
      pf.fetch(x, x_row(b, co), p.x_stride_l, j0 * S - p.pad_left, W, p.in_length);
    }
    fwd_dw_outputs<T, K_, S_, D_, V>(p, win, cb, cco, cj0, K, S, D);
  }
}

}  // namespace dw
}  // namespace convkit

namespace convkit {
namespace dw {

constexpr int kMaxRuntimeK = 32;  // the runtime-K backward keeps K tap sums in registers

// Elements of shared memory (in accumulator units) the fused backward needs for one tile.
// The dy window spans the outputs a tile owns plus those its grad-input reads; see the kernel.
__host__ __device__ constexpr int64_t bwd_dy_window(int64_t tile, int64_t K, int64_t S, int64_t D, int64_t P) {
  return tile + ((K - 1) * D + S - 1) / S + (P + S - 1) / S + 2;
}
__host__ __device__ constexpr int64_t bwd_x_window(int64_t tile, int64_t K, int64_t S, int64_t D, int64_t P) {
  return (bwd_dy_window(tile, K, S, D, P) - 1) * S + (K - 1) * D + 1;
}

// Fused depthwise backward (multiplier 1). Block = (channel c, split): it walks the tiles (b, t) of
// its split in order, and for each:
//   - stages x and dy windows in shared memory (dy scaled by activation'(z), z recomputed, when an
//     activation was fused in the forward),
//   - writes grad-input for inputs [t*kTile*S, (t+1)*kTile*S),
//   - adds dy[j] * x[j*S + k*D - P] over the outputs j in [t*kTile, (t+1)*kTile) to per-thread tap
//     sums (and dy[j] to the bias sum).
// At the end the tap sums are reduced over the block in a fixed order into the workspace, so
// grad-weight is deterministic; sum_partials_kernel adds the splits.
template <typename T, int K_, int S_, int D_, int V>
__global__ void __launch_bounds__(kThreads) conv1d_bwd_dw_kernel(const Conv1dParams p) {
  using A = typename AccOf<T>::type;
  constexpr int KR = K_ > 0 ? K_ : kMaxRuntimeK;  // register slots for tap sums
  constexpr int kTile = kThreads * V;
  constexpr bool kFixed = K_ > 0 && S_ > 0 && D_ > 0;
  // Prefetch room for padding up to (K - 1) * D (causal, 'same' and less); larger padding and the
  // runtime shapes' wide windows fall back to stage_row.
  constexpr int kFallbackSlots = (V * sizeof(T) + 15) / 16 + 1;  // stride 1 and a halo of <= kThreads slots
  using PrefetchDy =
      WindowPrefetch<T, prefetch_slots<T>(kFixed ? bwd_dy_window(kTile, K_, S_, D_, (K_ - 1) * D_) : 0, kFallbackSlots)>;
  using PrefetchX =
      WindowPrefetch<T, prefetch_slots<T>(kFixed ? bwd_x_window(kTile, K_, S_, D_, (K_ - 1) * D_) : 0, kFallbackSlots)>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int64_t K = K_ > 0 ? K_ : p.kernel_size;
  const int64_t S = S_ > 0 ? S_ : p.stride;
  const int64_t D = D_ > 0 ? D_ : p.dilation;
  const int64_t P = p.pad_left;
  const int WD = static_cast<int>(bwd_dy_window(kTile, K, S, D, P));
  const int WX = static_cast<int>(bwd_x_window(kTile, K, S, D, P));
  A* dyw = reinterpret_cast<A*>(smem_raw);
  A* xw = dyw + padded_size(WD, V);
  __shared__ A scratch[kThreads / 32];

  const int64_t C = p.out_channels;
  const int64_t n_tiles = max(ceil_div(p.out_length, kTile), ceil_div(p.in_length, kTile * S));
  const int64_t per_channel = p.batch * n_tiles;
  const int64_t splits = p.weight_splits;
  const int64_t chunk = ceil_div(per_channel, splits);
  const bool want_dx = p.grad_x != nullptr;
  const bool prefetch = PrefetchDy::fits(WD) && PrefetchX::fits(WX);
  A* partial = static_cast<A*>(p.workspace);
  // Tile n of a channel: batch b, outputs [j0, j0 + kTile), inputs [j0 * S, (j0 + kTile) * S); the
  // dy window starts at dlo, the x window at dlo * S - P.
  auto origin = [&](int64_t n, int64_t& b, int64_t& j0, int64_t& dlo) {
    int64_t t;
    divmod(n, n_tiles, b, t);
    j0 = t * kTile;
    dlo = min(j0, floor_div(j0 * S + P - (K - 1) * D, S));
  };

  for (int64_t unit = blockIdx.x; unit < C * splits; unit += gridDim.x) {
    int64_t split, c;
    divmod(unit, C, split, c);
    const int64_t dy_row = c * p.y_stride_c, x_row = c * p.x_stride_c;
    // Fixed K: taps in registers. Runtime K: tap loops run K times (not KR guarded slots), the
    // weight is re-read per tap (an L1 hit) and the tap sums live in a small local array.
    A w[kFixed ? KR : 1];
    if constexpr (kFixed) {
#pragma unroll
      for (int k = 0; k < KR; ++k) w[k] = load_param<T>(p, p.w, c * p.w_stride_o + k * p.w_stride_k);
    }
    auto tap = [&](int64_t k) -> A {
      if constexpr (kFixed) return w[k];
      else return load_param<T>(p, p.w, c * p.w_stride_o + k * p.w_stride_k);
    };
    const A bias = p.bias != nullptr ? load_param<T>(p, p.bias, c) : A(0);
    A gw[KR];
#pragma unroll
    for (int k = 0; k < KR; ++k) gw[k] = 0;
    A gb = 0;

    PrefetchDy pf_dy;
    PrefetchX pf_x;
    const int64_t n_begin = split * chunk, n_end = min((split + 1) * chunk, per_channel);
    int64_t b = 0, j0 = 0, dlo = 0;
    if (n_begin < n_end) origin(n_begin, b, j0, dlo);
    if (prefetch && n_begin < n_end) {
      pf_dy.fetch(p.y, b * p.y_stride_b + dy_row, p.y_stride_l, dlo, WD, p.out_length);
      pf_x.fetch(p.x, b * p.x_stride_b + x_row, p.x_stride_l, dlo * S - P, WX, p.in_length);
    }
    for (int64_t n = n_begin; n < n_end; ++n) {
      const int64_t cb = b, cj0 = j0, cdlo = dlo;
      __syncthreads();  // the previous tile is done with the windows
      if (prefetch) {
        pf_dy.template commit<V>(dyw, cdlo, WD);
        pf_x.template commit<V>(xw, cdlo * S - P, WX);
      } else {
        stage_row<T, V>(dyw, p.y, cb * p.y_stride_b + dy_row, p.y_stride_l, cdlo, WD, p.out_length);
        stage_row<T, V>(xw, p.x, cb * p.x_stride_b + x_row, p.x_stride_l, cdlo * S - P, WX, p.in_length);
      }
      __syncthreads();
      if (n + 1 < n_end) {
        origin(n + 1, b, j0, dlo);
        if (prefetch) {  // the next tile's loads stay in flight while this one computes
          pf_dy.fetch(p.y, b * p.y_stride_b + dy_row, p.y_stride_l, dlo, WD, p.out_length);
          pf_x.fetch(p.x, b * p.x_stride_b + x_row, p.x_stride_l, dlo * S - P, WX, p.in_length);
        }
      }
      if (p.activation != kActNone) {
        for (int a = threadIdx.x; a < WD; a += kThreads) {
          A z = bias;
          if constexpr (kFixed) {
#pragma unroll
            for (int k = 0; k < KR; ++k) z += w[k] * xw[padded<V>(static_cast<int>(a * S + k * D))];
          } else {
            for (int64_t k = 0; k < K; ++k) z += tap(k) * xw[padded<V>(static_cast<int>(a * S + k * D))];
          }
          dyw[padded<V>(a)] *= activate_grad(p.activation, z);
        }
        __syncthreads();
      }

      // grad-weight / grad-bias over the outputs this tile owns
      const int jl = threadIdx.x * V;
      const int a0 = static_cast<int>(cj0 - cdlo) + jl;
      if constexpr (kFixed) {
#pragma unroll
        for (int i = 0; i < V; ++i) {
          if (cj0 + jl + i >= p.out_length) break;
          const A g = dyw[padded<V>(a0 + i)];
          gb += g;
#pragma unroll
          for (int k = 0; k < KR; ++k) gw[k] += g * xw[padded<V>(static_cast<int>((a0 + i) * S + k * D))];
        }
      } else {
        const int64_t n_valid = min(static_cast<int64_t>(V), p.out_length - (cj0 + jl));
        A g[V];
#pragma unroll
        for (int i = 0; i < V; ++i) {
          g[i] = i < n_valid ? dyw[padded<V>(a0 + i)] : A(0);
          gb += g[i];
        }
        if (n_valid > 0) {
          for (int64_t k = 0; k < K; ++k) {
            A s = 0;
#pragma unroll
            for (int i = 0; i < V; ++i)
              if (i < n_valid) s += g[i] * xw[padded<V>(static_cast<int>((a0 + i) * S + k * D))];
            gw[k] += s;
          }
        }
      }

      // grad-input for inputs [i0, i0 + S*kTile), in S passes of kTile
      if (want_dx) {
        const int64_t i0 = cj0 * S;
        for (int64_t r = 0; r < S; ++r) {
          const int64_t ib = i0 + r * kTile + jl;
          if (ib >= p.in_length) break;
          A acc[V];
          if constexpr (kFixed) {
#pragma unroll
            for (int e = 0; e < V; ++e) {
              A v = 0;
#pragma unroll
              for (int k = 0; k < KR; ++k) {
                const int64_t tt = ib + e + P - k * D;
                if (S_ == 1 || tt % S == 0) v += w[k] * dyw[padded<V>(static_cast<int>(tt / S - cdlo))];
              }
              acc[e] = v;
            }
          } else {
#pragma unroll
            for (int e = 0; e < V; ++e) acc[e] = 0;
            for (int64_t k = 0; k < K; ++k) {
              const A wk = tap(k);
#pragma unroll
              for (int e = 0; e < V; ++e) {
                const int64_t tt = ib + e + P - k * D;
                if (tt % S == 0) acc[e] += wk * dyw[padded<V>(static_cast<int>(tt / S - cdlo))];
              }
            }
          }
          store_run<T, V>(p.grad_x, cb * p.gx_stride_b + c * p.gx_stride_c, p.gx_stride_l, ib, p.in_length, acc);
        }
      }
    }

    const int64_t n_weight = C * K;
#pragma unroll
    for (int k = 0; k < KR; ++k) {
      if (k >= K) break;
      const A s = block_sum(gw[k], scratch);
      if (threadIdx.x == 0) partial[split * n_weight + c * K + k] = s;
    }
    const A s = block_sum(gb, scratch);
    if (threadIdx.x == 0) partial[splits * n_weight + split * C + c] = s;
  }
}

}  // namespace dw
}  // namespace convkit

#include "conv1d_depthwise_pipelined.cuh"
#include "conv1d_depthwise_direct.cuh"
#include "conv1d_depthwise_stream.cuh"

namespace convkit {
namespace dw {

// Windows are computed in 64 bits: a huge stride, dilation or padding must make the depthwise path
// ineligible (too much shared memory), never wrap around to a small size.
constexpr int64_t kTooLarge = int64_t{1} << 40;
inline int acc_bytes(DType dt) { return dt == DType::kFloat64 ? 8 : 4; }
inline int64_t window_bytes(int64_t elems, const Conv1dParams& p, int v) {
  return elems > (int64_t{1} << 24) ? kTooLarge : padded_size(elems, v) * acc_bytes(p.dtype);
}
inline int64_t fwd_smem_bytes(const Conv1dParams& p, int v) {
  return window_bytes((int64_t{kThreads} * v - 1) * p.stride + (p.kernel_size - 1) * p.dilation + 1, p, v);
}
// Includes the kernel's static `scratch` (block_sum), which counts against the same limit.
inline int64_t bwd_smem_bytes(const Conv1dParams& p, int v) {
  const int64_t tile = int64_t{kThreads} * v;
  const int64_t wd = bwd_dy_window(tile, p.kernel_size, p.stride, p.dilation, p.pad_left);
  const int64_t wx = bwd_x_window(tile, p.kernel_size, p.stride, p.dilation, p.pad_left);
  return window_bytes(wd, p, v) + window_bytes(wx, p, v) + acc_bytes(p.dtype) * (kThreads / 32);
}

// Shared memory above 48 KB (dynamic + static: `total`) must be opted into per kernel: the opt-in maximum, the
// same for every launch (allow_max_dynamic_smem). dispatch.cpp takes the staged kernels only where their total
// fits in the opt-in limit; the pipelined kernels' are constants (about 50 KB at most where the library uses them).
template <typename Kernel> cudaError_t allow_smem(Kernel kernel, int64_t total) {
  if (total <= 48 * 1024) return cudaSuccess;
  return allow_max_dynamic_smem(kernel);
}

// A grid-stride loop wants every block resident at once (a block that starts late finishes late):
// as many blocks as fit on the GPU, or fewer when there are fewer tiles.
template <typename Kernel> unsigned resident_grid(Kernel kernel, int64_t tiles, int64_t smem, int num_sms) {
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, static_cast<size_t>(smem)) !=
          cudaSuccess || per_sm < 1)
    per_sm = 1;
  return grid_for(tiles, num_sms, per_sm);
}

// The persistent-warp kernels (a warp per run of `chunks` consecutive chunks: the ring Toeplitz and
// Hankel kernels): as many blocks as fit, no more warps than chunks.
template <typename Kernel>
void launch_warp_runs(Kernel kernel, int64_t chunks, const Conv1dParams& p, cudaStream_t stream) {
  kernel<<<resident_grid(kernel, ceil_div(chunks, int64_t{kThreads / 32}), 0, p.num_sms), kThreads, 0, stream>>>(p);
}


// The launches, with the outputs-per-thread V as a parameter (ci/dw_micro.cu compares values of V;
// the library uses fwd_vec / bwd_vec and fwd_variant / bwd_variant).
// kVariant (ci/dw_micro.cu compares them): 0 staged kernel only; otherwise pipelined where it
// applies, see below.
template <typename T, int K, int S, int D, int V, int kVariant>
cudaError_t launch_fwd(const Conv1dParams& p, cudaStream_t stream) {
  const int64_t tiles = p.batch * p.out_channels * ceil_div(p.out_length, int64_t{kThreads} * V);
  if (tiles == 0) return cudaSuccess;
  if constexpr (kVariant == 11 && K > 0 && S == 1 && D > 0 && sizeof(T) == 2 && V % 8 == 0) {
    if (fwd_pipelined_ok<T>(p, K, D) && p.w_dtype == p.dtype) {
      launch_warp_runs(conv1d_fwd_dw_hankel_kernel<T, K, D, V, 3>,
                       p.batch * p.out_channels * ceil_div(p.out_length, int64_t{32} * V), p, stream);
      return cudaGetLastError();
    }
  }
  if constexpr (kVariant == 8 && K > 0 && S == 1 && D > 0 && sizeof(T) == 2) {
    const int64_t n = direct_tiles(p.batch * p.out_channels, p.out_length, V);
    if (fwd_pipelined_ok<T>(p, K, D) && p.w_dtype == p.dtype && n > 0) {
      conv1d_fwd_dw_toeplitz_kernel<T, K, D, V><<<static_cast<unsigned>(n), kThreads, 0, stream>>>(p);
      return cudaGetLastError();
    }
  }
  if constexpr (kVariant == 10 && K > 0 && S == 1 && D > 0 && sizeof(T) == 2) {
    if (fwd_pipelined_ok<T>(p, K, D) && p.w_dtype == p.dtype) {
      launch_warp_runs(conv1d_fwd_dw_toeplitz_ring_kernel<T, K, D, V, 3>,
                       p.batch * p.out_channels * ceil_div(p.out_length, int64_t{32} * V), p, stream);
      return cudaGetLastError();
    }
  }
  if constexpr (kVariant == 9 && K > 0 && S > 0 && S <= 2 && D > 0 && sizeof(T) < 8) {
    const int v = stream_vec(sizeof(T), p.out_length, V, S, p.code_arch);
    const int64_t n = stream_blocks(p.batch * p.out_channels, p.out_length, v);
    if (fwd_pipelined_ok<T>(p, K, D) && n > 0) {
      const int mode = stream_pad_mode(p.pad_left, K, D);
      with_stream_vec<T, S, V>(v, [&](auto vc) {
        launch_fwd_stream<T, K, S, D, decltype(vc)::value>(p, mode, static_cast<unsigned>(n), stream);
      });
      return cudaGetLastError();
    }
  }
  if constexpr (kVariant >= 7 && kVariant != 9 && K > 0 && S > 0 && D > 0 && sizeof(T) < 8) {  // (7, 8, 10, 11)
    const int64_t n = direct_tiles(p.batch * p.out_channels, p.out_length, V);
    if (fwd_pipelined_ok<T>(p, K, D) && n > 0) {
      conv1d_fwd_dw_direct_kernel<T, K, S, D, V><<<static_cast<unsigned>(n), kThreads, 0, stream>>>(p);
      return cudaGetLastError();
    }
  }
  // (9: the streaming kernel covers every call the pipelined one could take but rows of 2^30+
  // elements, which take the staged kernel: not compiling the pipelined one keeps the build short.
  // 11: likewise the direct kernel above leaves the pipelined one only grids of 2^31+ blocks.)
  if constexpr (kVariant > 0 && kVariant != 9 && kVariant != 11 && K > 0 && S > 0 && D > 0 && sizeof(T) < 8) {
    if (fwd_pipelined_ok<T>(p, K, D)) {
      constexpr int kStages = 4;
      // 1-4: interleaved runs (2, 4), grid-stride order (3, 4); 5, 6: contiguous runs with
      // warp-coalesced stores, in contiguous (5) or grid-stride (6) tile order.
      // (7, 8, 10, 11: the direct / Toeplitz / Hankel kernels above where they fit, else this with variant 1's choices.)
      constexpr int kV = kVariant >= 7 ? 1 : kVariant;
      constexpr bool kCoalesce = kV >= 5;
      constexpr bool kInterleave = !kCoalesce && ((kV - 1) & 1) != 0;
      constexpr bool kGridStride = kCoalesce ? kV == 6 : ((kV - 1) & 2) != 0;
      constexpr int smem = FwdPipelined<T, K, S, D, V, kStages, kInterleave, kCoalesce>::kSmemBytes;
      auto kernel = conv1d_fwd_dw_pipelined_kernel<T, K, S, D, V, kStages, kInterleave, kGridStride, kCoalesce>;
      cudaError_t err = allow_smem(kernel, smem);
      if (err != cudaSuccess) return err;
      kernel<<<resident_grid(kernel, tiles, smem, p.num_sms), kThreads, smem, stream>>>(p);
      return cudaGetLastError();
    }
  }
  constexpr int VS = staged_vec(V);
  const int64_t smem = fwd_smem_bytes(p, VS);
  auto kernel = conv1d_fwd_dw_kernel<T, K, S, D, VS>;
  cudaError_t err = allow_smem(kernel, smem);
  if (err != cudaSuccess) return err;
  const int64_t staged_tiles = p.batch * p.out_channels * ceil_div(p.out_length, int64_t{kThreads} * VS);
  kernel<<<resident_grid(kernel, staged_tiles, smem, p.num_sms), kThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

// Needs p.workspace and p.weight_splits from plan_depthwise_bwd (with the same V).
// kVariant: 0 staged kernel only; 1 pipelined where it applies; 2 pipelined, interleaved runs.
template <typename T, int K, int S, int D, int V, int kVariant>
cudaError_t launch_bwd(const Conv1dParams& p, cudaStream_t stream) {
  using A = typename AccOf<T>::type;
  const int64_t C = p.out_channels;
  bool launched = false;
  if constexpr (kVariant == 4 && K > 0 && S <= 2 && D > 0 && sizeof(T) < 8) {
    const int64_t len = bwd_stream_len(p);
    const int v = stream_vec(sizeof(T), len, V, S, p.code_arch);
    if (bwd_stream_ok(p, v)) {
      const unsigned n = static_cast<unsigned>(stream_blocks(p.batch * C, len, v));
      const int mode = stream_pad_mode(p.pad_left, K, D);
      with_stream_vec<T, S, V>(v, [&](auto vc) { launch_bwd_stream<T, K, S, D, decltype(vc)::value>(p, mode, n, stream); });
      launched = true;
    }
  }
  if constexpr ((kVariant == 6 || kVariant == 7) && K > 0 && S == 1 && D > 0 && sizeof(T) == 2) {
    if (bwd_toeplitz_ring_ok(p, V)) {
      const int64_t chunks = p.batch * C * ceil_div(std::max(p.in_length, p.out_length), int64_t{32} * V);
      launch_warp_runs(conv1d_bwd_dw_toeplitz_ring_kernel<T, K, D, V, 3, kVariant == 7>, chunks, p, stream);
      launched = true;
    }
  }
  if constexpr ((kVariant >= 5 && kVariant <= 7) && K > 0 && S == 1 && D > 0 && sizeof(T) == 2) {
    if (!launched && bwd_toeplitz_ok(p, V)) {
      conv1d_bwd_dw_toeplitz_kernel<T, K, D, V>
          <<<static_cast<unsigned>(direct_tiles(p.batch * C, std::max(p.in_length, p.out_length), V)), kThreads, 0,
             stream>>>(p);
      launched = true;
    }
  }
  if constexpr (kVariant == 3 && K > 0 && S == 1 && D > 0 && sizeof(T) < 8) {
    if (bwd_direct_ok(p, V)) {
      conv1d_bwd_dw_direct_kernel<T, K, D, V>
          <<<static_cast<unsigned>(direct_tiles(p.batch * C, std::max(p.in_length, p.out_length), V)), kThreads, 0,
             stream>>>(p);
      launched = true;
    }
  }
  // (4: as fwd 9; 5 to 7 fall back to 1 where the Toeplitz kernels do not apply)
  if constexpr (kVariant > 0 && kVariant != 4 && K > 0 && S == 1 && D > 0 && sizeof(T) < 8) {
    if (!launched && bwd_pipelined_ok<T>(p, K, S, D)) {
      constexpr int kStages = sizeof(T) == 4 ? 3 : 4;
      constexpr bool kInterleave = kVariant == 2;  // (3: the direct kernel, else variant 1)
      constexpr int smem = BwdPipelined<T, K, D, V, kStages, kInterleave>::kSmemBytes;
      constexpr int total = smem + sizeof(float) * (kThreads / 32);
      auto kernel = conv1d_bwd_dw_pipelined_kernel<T, K, D, V, kStages, kInterleave>;
      cudaError_t err = allow_smem(kernel, total);
      if (err != cudaSuccess) return err;
      kernel<<<resident_grid(kernel, C * p.weight_splits, smem, p.num_sms), kThreads, smem, stream>>>(p);
      launched = true;
    }
  }
  if (!launched) {
    const int64_t total = bwd_smem_bytes(p, V);
    const int64_t smem = total - static_cast<int64_t>(sizeof(A)) * (kThreads / 32);  // less static scratch
    auto kernel = conv1d_bwd_dw_kernel<T, K, S, D, V>;
    cudaError_t err = allow_smem(kernel, total);
    if (err != cudaSuccess) return err;
    kernel<<<resident_grid(kernel, C * p.weight_splits, smem, p.num_sms), kThreads, smem, stream>>>(p);
  }
  // grad-weight and grad-bias from the partial sums (p.workspace: weight_splits x C*K, then weight_splits x C)
  return sum_weight_bias_partials<T>(p, p.workspace, p.weight_splits, C * p.kernel_size, C, p.grad_w, p.grad_bias,
                                     stream);
}

// Splits of the fused backward: about 8 blocks per SM, never more splits than a channel has tiles;
// the direct and Toeplitz kernels (backward variants 3, 5) make one split per (b, tile).
// Sets p.weight_splits; returns the accumulator values p.workspace must hold.
// `specialised`: the launch is a fixed-(K, S, D) kernel (the direct and streaming kernels exist only there).
inline int64_t plan_bwd(Conv1dParams& p, int v, int variant, bool specialised) {
  const int64_t C = p.out_channels;
  if (specialised && (variant == 6 || variant == 7) && bwd_toeplitz_ring_ok(p, v)) {
    p.weight_splits = 2 * p.batch;
    return p.weight_splits * (C * p.kernel_size + C);
  }
  if (specialised && ((variant == 3 && bwd_direct_ok(p, v)) || (variant >= 5 && bwd_toeplitz_ok(p, v)))) {
    p.weight_splits = direct_bwd_splits(p, v);
    return p.weight_splits * (C * p.kernel_size + C);
  }
  if (specialised && variant == 4) {
    const int size = dtype_bytes(p.dtype);
    const int vs = stream_vec(size, bwd_stream_len(p), v, p.stride, p.code_arch);
    if (bwd_stream_ok(p, vs)) {
      p.weight_splits = stream_bwd_splits(p, vs);
      return p.weight_splits * (C * p.kernel_size + C);
    }
  }
  const int64_t tile = int64_t{kThreads} * v;
  const int64_t n_tiles = std::max(ceil_div(p.out_length, tile), ceil_div(p.in_length, tile * p.stride));
  const int64_t per_channel = std::max<int64_t>(p.batch * n_tiles, 1);
  const int64_t wanted = ceil_div(static_cast<int64_t>(p.num_sms) * 8, C);
  p.weight_splits = std::max<int64_t>(1, std::min(wanted, per_channel));
  return p.weight_splits * (C * p.kernel_size + C);
}

}  // namespace dw

template <DType dt, int K, int S, int D>
cudaError_t launch_conv1d_fwd_depthwise(const Conv1dParams& p, cudaStream_t stream) {
  using T = typename ScalarOf<dt>::type;
  return dw::launch_fwd<T, K, S, D, dw::fwd_vec_for<T, K>(), dw::fwd_variant_for<T, K>()>(p, stream);
}

template <DType dt, int K, int S, int D>
cudaError_t launch_conv1d_bwd_depthwise(const Conv1dParams& p, cudaStream_t stream) {
  using T = typename ScalarOf<dt>::type;
  return dw::launch_bwd<T, K, S, D, dw::bwd_vec<T>(), dw::bwd_variant_for<T, K>()>(p, stream);
}

// One table entry's launchers. float64 has none: it takes the runtime-shape kernels
// (conv1d_depthwise_generic.cu), which keeps float64 (a reference and gradcheck dtype, not a speed one)
// out of every entry's compile time.
#define CONVKIT_INSTANTIATE_DEPTHWISE(K, S, D)                                                          \
  template cudaError_t launch_conv1d_fwd_depthwise<DType::kFloat32, K, S, D>(const Conv1dParams&, cudaStream_t);  \
  template cudaError_t launch_conv1d_fwd_depthwise<DType::kFloat16, K, S, D>(const Conv1dParams&, cudaStream_t);  \
  template cudaError_t launch_conv1d_fwd_depthwise<DType::kBFloat16, K, S, D>(const Conv1dParams&, cudaStream_t); \
  template cudaError_t launch_conv1d_bwd_depthwise<DType::kFloat32, K, S, D>(const Conv1dParams&, cudaStream_t);  \
  template cudaError_t launch_conv1d_bwd_depthwise<DType::kFloat16, K, S, D>(const Conv1dParams&, cudaStream_t);  \
  template cudaError_t launch_conv1d_bwd_depthwise<DType::kBFloat16, K, S, D>(const Conv1dParams&, cudaStream_t);

}  // namespace convkit
