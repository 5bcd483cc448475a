// Depthwise conv1d (groups == in_channels; out_channels = multiplier * in_channels), the
// memory-bound family: forward, and a fused backward that produces grad-input, grad-weight and
// grad-bias in one pass over x and dy.
//
// Template arguments K_, S_, D_ fix kernel size, stride and dilation at compile time; 0 means "read
// it from Conv1dParams at run time", which is the generic depthwise kernel (still tiled and
// vectorised). Instantiations: generated/conv1d_dw_*.cu (from csrc/specializations.json) and
// conv1d_depthwise_generic.cu (0, 0, 0).
//
// Tiles: one (b, c) row segment of kTile = kThreads * kVec outputs. The input window of a tile is
// staged in shared memory with 16-byte loads where the row is aligned; each thread then computes
// kVec consecutive outputs from it (so taps are reused from registers) and writes them with 16-byte
// stores where aligned.
#pragma once

#include <cstdint>

#include "activation.cuh"
#include "common.cuh"
#include "launchers.h"

namespace convkit {
namespace dw {

constexpr int kThreads = 128;

// Consecutive outputs per thread (kVec); each kernel defines kVec = vec_for<T>() and
// kTile = kThreads * kVec. Measured on the H200 (benchmarks/NOTES.md): 8 gives fp32 forward 73 % of
// the floor and bf16 33 %; 16 gave bf16 the same 33 % and fp32 only 19 %, so 8 for every type.
template <typename T> __host__ __device__ constexpr int vec_for() { return 8; }
inline int tile_for(DType) { return kThreads * 8; }

// Threads read the window at stride V (* stride); one pad word every V makes that stride odd in
// banks, so those reads are conflict-free.
template <int V> __device__ __forceinline__ int padded(int a) { return a + a / V; }
__host__ __device__ constexpr int64_t padded_size(int64_t n, int V) { return n + n / V + 1; }

template <typename T> struct VecOf {
  static constexpr int kElems = 16 / sizeof(T);  // elements per 16-byte access
};

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
  const int64_t q0 = pos0 >= 0 ? pos0 - pos0 % VE : -((-pos0 + VE - 1) / VE) * VE;
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
__host__ __device__ inline int window_len(int outs, int K, int S, int D) { return (outs - 1) * S + (K - 1) * D + 1; }

template <typename T, int K_, int S_, int D_>
__global__ void __launch_bounds__(kThreads) conv1d_fwd_dw_kernel(const Conv1dParams p) {
  using A = typename AccOf<T>::type;
  constexpr int kVec = vec_for<T>();
  constexpr int kTile = kThreads * kVec;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  A* win = reinterpret_cast<A*>(smem_raw);
  const int K = K_ > 0 ? K_ : static_cast<int>(p.kernel_size);
  const int S = S_ > 0 ? S_ : static_cast<int>(p.stride);
  const int D = D_ > 0 ? D_ : static_cast<int>(p.dilation);
  const int W = window_len(kTile, K, S, D);
  const int64_t mult = p.out_channels / p.in_channels;
  const int64_t l_tiles = ceil_div(p.out_length, kTile);
  const int64_t num_tiles = p.batch * p.out_channels * l_tiles;

  for (int64_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    int64_t row, lt, b, co;
    divmod(tile, l_tiles, row, lt);
    divmod(row, p.out_channels, b, co);
    const int64_t j0 = lt * kTile;
    const int64_t w_off = co * p.w_stride_o;

    __syncthreads();  // the previous tile is done with `win`
    stage_row<T, kVec>(win, p.x, b * p.x_stride_b + (co / mult) * p.x_stride_c, p.x_stride_l, j0 * S - p.pad_left, W,
                 p.in_length);
    __syncthreads();

    const int jl = threadIdx.x * kVec;
    if (j0 + jl >= p.out_length) continue;
    const A bias = p.bias != nullptr ? load_param<T>(p, p.bias, co) : A(0);
    A acc[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc[i] = bias;
    if constexpr (K_ > 0 && S_ > 0 && D_ > 0) {
      A w[K_];
#pragma unroll
      for (int k = 0; k < K_; ++k) w[k] = load_param<T>(p, p.w, w_off + k * p.w_stride_k);
      // Fully unrolled: repeated window positions (i*S + k*D) are loaded once.
#pragma unroll
      for (int i = 0; i < kVec; ++i)
#pragma unroll
        for (int k = 0; k < K_; ++k) acc[i] += w[k] * win[padded<kVec>((jl + i) * S_ + k * D_)];
    } else {
      for (int k = 0; k < K; ++k) {
        const A wk = load_param<T>(p, p.w, w_off + k * p.w_stride_k);
#pragma unroll
        for (int i = 0; i < kVec; ++i) acc[i] += wk * win[padded<kVec>((jl + i) * S + k * D)];
      }
    }
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc[i] = activate(p.activation, acc[i]);
    store_run<T, kVec>(p.y, b * p.y_stride_b + co * p.y_stride_c, p.y_stride_l, j0 + jl, p.out_length, acc);
  }
}

}  // namespace dw
}  // namespace convkit

namespace convkit {
namespace dw {

constexpr int kMaxRuntimeK = 32;  // the runtime-K backward keeps K tap sums in registers

// Elements of shared memory (in accumulator units) the fused backward needs for one tile.
// The dy window spans the outputs a tile owns plus those its grad-input reads; see the kernel.
__host__ __device__ inline int64_t bwd_dy_window(int64_t tile, int64_t K, int64_t S, int64_t D, int64_t P) {
  return tile + ((K - 1) * D + S - 1) / S + (P + S - 1) / S + 2;
}
__host__ __device__ inline int64_t bwd_x_window(int64_t tile, int64_t K, int64_t S, int64_t D, int64_t P) {
  return (bwd_dy_window(tile, K, S, D, P) - 1) * S + (K - 1) * D + 1;
}

__device__ __forceinline__ int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
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
template <typename T, int K_, int S_, int D_>
__global__ void __launch_bounds__(kThreads) conv1d_bwd_dw_kernel(const Conv1dParams p) {
  using A = typename AccOf<T>::type;
  constexpr int KR = K_ > 0 ? K_ : kMaxRuntimeK;  // register slots for tap sums
  constexpr int kVec = vec_for<T>();
  constexpr int kTile = kThreads * kVec;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int64_t K = K_ > 0 ? K_ : p.kernel_size;
  const int64_t S = S_ > 0 ? S_ : p.stride;
  const int64_t D = D_ > 0 ? D_ : p.dilation;
  const int64_t P = p.pad_left;
  const int WD = static_cast<int>(bwd_dy_window(kTile, K, S, D, P));
  const int WX = static_cast<int>(bwd_x_window(kTile, K, S, D, P));
  A* dyw = reinterpret_cast<A*>(smem_raw);
  A* xw = dyw + padded_size(WD, kVec);
  __shared__ A scratch[kThreads / 32];

  const int64_t C = p.out_channels;
  const int64_t n_tiles = max(ceil_div(p.out_length, kTile), ceil_div(p.in_length, kTile * S));
  const int64_t per_channel = p.batch * n_tiles;
  const int64_t splits = p.weight_splits;
  const int64_t chunk = ceil_div(per_channel, splits);
  const bool want_dx = p.grad_x != nullptr;
  A* partial = static_cast<A*>(p.workspace);

  for (int64_t unit = blockIdx.x; unit < C * splits; unit += gridDim.x) {
    int64_t split, c;
    divmod(unit, C, split, c);
    A w[KR];
#pragma unroll
    for (int k = 0; k < KR; ++k) w[k] = k < K ? load_param<T>(p, p.w, c * p.w_stride_o + k * p.w_stride_k) : A(0);
    const A bias = p.bias != nullptr ? load_param<T>(p, p.bias, c) : A(0);
    A gw[KR];
#pragma unroll
    for (int k = 0; k < KR; ++k) gw[k] = 0;
    A gb = 0;

    const int64_t n_end = min((split + 1) * chunk, per_channel);
    for (int64_t n = split * chunk; n < n_end; ++n) {
      int64_t b, t;
      divmod(n, n_tiles, b, t);
      const int64_t j0 = t * kTile;
      const int64_t i0 = j0 * S;
      const int64_t dlo = min(j0, floor_div(i0 + P - (K - 1) * D, S));
      const int64_t xlo = dlo * S - P;

      __syncthreads();
      stage_row<T, kVec>(dyw, p.y, b * p.y_stride_b + c * p.y_stride_c, p.y_stride_l, dlo, WD, p.out_length);
      stage_row<T, kVec>(xw, p.x, b * p.x_stride_b + c * p.x_stride_c, p.x_stride_l, xlo, WX, p.in_length);
      __syncthreads();
      if (p.activation != kActNone) {
        for (int a = threadIdx.x; a < WD; a += kThreads) {
          A z = bias;
#pragma unroll
          for (int k = 0; k < KR; ++k)
            if (k < K) z += w[k] * xw[padded<kVec>(static_cast<int>(a * S + k * D))];
          dyw[padded<kVec>(a)] *= activate_grad(p.activation, z);
        }
        __syncthreads();
      }

      // grad-weight / grad-bias over the outputs this tile owns
      const int jl = threadIdx.x * kVec;
      const int a0 = static_cast<int>(j0 - dlo) + jl;
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        if (j0 + jl + i >= p.out_length) break;
        const A g = dyw[padded<kVec>(a0 + i)];
        gb += g;
#pragma unroll
        for (int k = 0; k < KR; ++k)
          if (k < K) gw[k] += g * xw[padded<kVec>(static_cast<int>((a0 + i) * S + k * D))];
      }

      // grad-input for inputs [i0, i0 + S*kTile), in S passes of kTile
      if (want_dx) {
        for (int64_t r = 0; r < S; ++r) {
          const int64_t ib = i0 + r * kTile + jl;
          if (ib >= p.in_length) break;
          A acc[kVec];
#pragma unroll
          for (int e = 0; e < kVec; ++e) {
            A v = 0;
#pragma unroll
            for (int k = 0; k < KR; ++k) {
              if (k >= K) break;
              const int64_t tt = ib + e + P - k * D;
              if (S_ == 1 || tt % S == 0) v += w[k] * dyw[padded<kVec>(static_cast<int>(tt / S - dlo))];
            }
            acc[e] = v;
          }
          store_run<T, kVec>(p.grad_x, b * p.gx_stride_b + c * p.gx_stride_c, p.gx_stride_l, ib, p.in_length, acc);
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

namespace convkit {
namespace dw {

// Windows are computed in 64 bits: a huge stride, dilation or padding must make the depthwise path
// ineligible (too much shared memory), never wrap around to a small size.
constexpr int64_t kTooLarge = int64_t{1} << 40;
inline int acc_bytes(DType dt) { return dt == DType::kFloat64 ? 8 : 4; }
inline int64_t window_bytes(int64_t elems, const Conv1dParams& p) {
  const int v = tile_for(p.dtype) / kThreads;
  return elems > (int64_t{1} << 24) ? kTooLarge : padded_size(elems, v) * acc_bytes(p.dtype);
}
inline int64_t fwd_smem_bytes(const Conv1dParams& p) {
  return window_bytes((tile_for(p.dtype) - 1) * p.stride + (p.kernel_size - 1) * p.dilation + 1, p);
}
// Includes the kernel's static `scratch` (block_sum), which counts against the same limit.
inline int64_t bwd_smem_bytes(const Conv1dParams& p) {
  const int64_t tile = tile_for(p.dtype);
  const int64_t wd = bwd_dy_window(tile, p.kernel_size, p.stride, p.dilation, p.pad_left);
  const int64_t wx = bwd_x_window(tile, p.kernel_size, p.stride, p.dilation, p.pad_left);
  return window_bytes(wd, p) + window_bytes(wx, p) + acc_bytes(p.dtype) * (kThreads / 32);
}

// Shared memory above 48 KB (dynamic + static) must be opted into per kernel; `total` includes the
// static part, `dynamic` is what the launch asks for.
template <typename Kernel> cudaError_t allow_smem(Kernel kernel, int64_t total, int64_t dynamic) {
  if (total <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(dynamic));
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

}  // namespace dw

template <DType dt, int K, int S, int D>
cudaError_t launch_conv1d_fwd_depthwise(const Conv1dParams& p, cudaStream_t stream) {
  using T = typename ScalarOf<dt>::type;
  using A = typename AccOf<T>::type;
  const int64_t tiles = p.batch * p.out_channels * ceil_div(p.out_length, dw::kThreads * dw::vec_for<T>());
  if (tiles == 0) return cudaSuccess;
  const int64_t smem = dw::fwd_smem_bytes(p);
  auto kernel = dw::conv1d_fwd_dw_kernel<T, K, S, D>;
  cudaError_t err = dw::allow_smem(kernel, smem, smem);
  if (err != cudaSuccess) return err;
  kernel<<<dw::resident_grid(kernel, tiles, smem, p.num_sms), dw::kThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

template <DType dt, int K, int S, int D>
cudaError_t launch_conv1d_bwd_depthwise(const Conv1dParams& p, cudaStream_t stream) {
  using T = typename ScalarOf<dt>::type;
  using A = typename AccOf<T>::type;
  const int64_t C = p.out_channels;
  const int64_t total = dw::bwd_smem_bytes(p);
  const int64_t smem = total - static_cast<int64_t>(sizeof(A)) * (dw::kThreads / 32);  // less static scratch
  auto kernel = dw::conv1d_bwd_dw_kernel<T, K, S, D>;
  cudaError_t err = dw::allow_smem(kernel, total, smem);
  if (err != cudaSuccess) return err;
  kernel<<<dw::resident_grid(kernel, C * p.weight_splits, smem, p.num_sms), dw::kThreads, smem, stream>>>(p);
  const A* part = static_cast<const A*>(p.workspace);
  const int64_t n_weight = C * p.kernel_size;
  CONVKIT_DISPATCH_PARAM_TYPE(p, T, {
    if (p.grad_w != nullptr)
      sum_partials_kernel<param_t><<<grid_for(ceil_div(n_weight, 256), p.num_sms, 8), 256, 0, stream>>>(
          part, p.weight_splits, n_weight, p.grad_w);
    if (p.grad_bias != nullptr)
      sum_partials_kernel<param_t><<<grid_for(ceil_div(C, 256), p.num_sms, 8), 256, 0, stream>>>(
          part + p.weight_splits * n_weight, p.weight_splits, C, p.grad_bias);
  })
  return cudaGetLastError();
}

#define CONVKIT_INSTANTIATE_DEPTHWISE(K, S, D)                                                          \
  template cudaError_t launch_conv1d_fwd_depthwise<DType::kFloat32, K, S, D>(const Conv1dParams&, cudaStream_t);  \
  template cudaError_t launch_conv1d_fwd_depthwise<DType::kFloat16, K, S, D>(const Conv1dParams&, cudaStream_t);  \
  template cudaError_t launch_conv1d_fwd_depthwise<DType::kBFloat16, K, S, D>(const Conv1dParams&, cudaStream_t); \
  template cudaError_t launch_conv1d_fwd_depthwise<DType::kFloat64, K, S, D>(const Conv1dParams&, cudaStream_t);  \
  template cudaError_t launch_conv1d_bwd_depthwise<DType::kFloat32, K, S, D>(const Conv1dParams&, cudaStream_t);  \
  template cudaError_t launch_conv1d_bwd_depthwise<DType::kFloat16, K, S, D>(const Conv1dParams&, cudaStream_t);  \
  template cudaError_t launch_conv1d_bwd_depthwise<DType::kBFloat16, K, S, D>(const Conv1dParams&, cudaStream_t); \
  template cudaError_t launch_conv1d_bwd_depthwise<DType::kFloat64, K, S, D>(const Conv1dParams&, cudaStream_t);

}  // namespace convkit
