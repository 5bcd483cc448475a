// The epilogue of the narrow dense forward's per-thread shapes (kernels/conv1d_fwd_dense_narrow.cu, runtime K / S / D)
// and of its table entries (kernels/conv1d_fwd_dense_narrow_spec.cuh, compile-time K / S / D): a thread's kV
// consecutive outputs of kCoT channels, bias and activation added, stored with the widest stores their addresses
// allow. Both write bit-identical results (same FMA order per output, same epilogue). CUDA headers only.
#pragma once

#include <cstdint>
#include <cstring>

#include "activation.cuh"
#include "common.cuh"

namespace convkit {
namespace narrow {

// The kV values of one output channel, rounded to T, at dst (contiguous), with the widest stores its
// alignment allows.
template <typename T, int kV, typename A>
__device__ __forceinline__ void store_run(T* dst, const A (&v)[kV]) {
  static_assert(kV == 8, "runs of 8 outputs");
  if constexpr (sizeof(T) == 2) {
    uint32_t w[kV / 2];
#pragma unroll
    for (int i = 0; i < kV / 2; ++i) {
      const T lo = from_acc<T>(v[2 * i]), hi = from_acc<T>(v[2 * i + 1]);
      unsigned short l, h;
      memcpy(&l, &lo, 2);
      memcpy(&h, &hi, 2);
      w[i] = static_cast<uint32_t>(l) | (static_cast<uint32_t>(h) << 16);
    }
    store8_16bit(reinterpret_cast<unsigned short*>(dst), w);
  } else if constexpr (sizeof(T) == 4) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(dst);
    if ((a & 15) == 0) {
      reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
      reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else if ((a & 7) == 0) {
#pragma unroll
      for (int i = 0; i < kV / 2; ++i) reinterpret_cast<float2*>(dst)[i] = make_float2(v[2 * i], v[2 * i + 1]);
    } else {
#pragma unroll
      for (int i = 0; i < kV; ++i) dst[i] = v[i];
    }
  } else {
#pragma unroll
    for (int i = 0; i < kV; ++i) dst[i] = from_acc<T>(v[i]);
  }
}

// The weights of output channels co0 .. co0 + n_co - 1 into ws[r][width] (r = ci * K + k; zeros past n_co) and their
// biases into bs[width], by the block's threads (the caller's barrier follows). The tiled and lanes shapes and the
// table entries' kernel.
template <typename T, typename A>
__device__ __forceinline__ void stage_weights(const Conv1dParams& p, A* ws, A* bs, int64_t co0, int n_co, int red,
                                              int K, int width) {
  for (int i = threadIdx.x; i < red * width; i += blockDim.x) {
    const int r = i / width, c = i - r * width;
    const int ci = r / K, k = r - ci * K;
    ws[i] = c < n_co ? static_cast<A>(load_param<T>(p, p.w, (co0 + c) * p.w_stride_o + ci * p.w_stride_i +
                                                              k * p.w_stride_k))
                     : A(0);
  }
  if (static_cast<int>(threadIdx.x) < width)
    bs[threadIdx.x] = p.bias != nullptr && static_cast<int>(threadIdx.x) < n_co
                          ? static_cast<A>(load_param<T>(p, p.bias, co0 + threadIdx.x))
                          : A(0);
}

// wv[c] = src[c] for c < N: one tap's weights of N output channels from the [tap][channel] array stage_weights
// fills, by 16-byte broadcast reads where A is float and N a multiple of 4 (src is then 16-byte aligned).
template <int N, typename A>
__device__ __forceinline__ void load_tap_weights(const A* src, A (&wv)[N]) {
  if constexpr (sizeof(A) == 4 && N % 4 == 0) {
#pragma unroll
    for (int c = 0; c < N; c += 4) {
      const float4 w4 = *reinterpret_cast<const float4*>(src + c);
      wv[c] = w4.x, wv[c + 1] = w4.y, wv[c + 2] = w4.z, wv[c + 3] = w4.w;
    }
  } else {
#pragma unroll
    for (int c = 0; c < N; ++c) wv[c] = src[c];
  }
}

// y[b, co0 + c, j0 + v] = activation(acc[c][v] + bs[c]) for c < n_co and j0 + v < out_length.
template <typename T, int kV, int kCoT, typename A>
__device__ __forceinline__ void store_outputs(const Conv1dParams& p, A (&acc)[kCoT][kV], const A* bs, int64_t b,
                                              int64_t co0, int n_co, int64_t j0) {
  T* y = static_cast<T*>(p.y);
  const int64_t n_j = min(static_cast<int64_t>(kV), p.out_length - j0);
#pragma unroll
  for (int c = 0; c < kCoT; ++c) {
    if (c >= n_co) break;
#pragma unroll
    for (int v = 0; v < kV; ++v) acc[c][v] = activate(p.activation, acc[c][v] + bs[c]);
    const int64_t off = b * p.y_stride_b + (co0 + c) * p.y_stride_c + j0 * p.y_stride_l;
    if constexpr (kV == 1) {
      y[off] = from_acc<T>(acc[c][0]);  // (n_j == 1) the warp's lanes write consecutive positions
    } else if (p.y_stride_l == 1 && n_j == kV) {
      store_run<T, kV>(y + off, acc[c]);
    } else {
#pragma unroll
      for (int v = 0; v < kV; ++v)
        if (v < n_j) y[off + v * p.y_stride_l] = from_acc<T>(acc[c][v]);
    }
  }
}

}  // namespace narrow
}  // namespace convkit
