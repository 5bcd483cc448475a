// Depthwise forward (groups == in_channels == out_channels) with kernel size K, stride S and
// dilation D fixed at compile time: the taps live in registers and the input window of a tile is
// staged once in shared memory, so each x element is read from global memory about once.
// Instantiated per (K, S, D) by the generated files in generated/, listed in csrc/specializations.json.
#pragma once

#include "common.cuh"
#include "launchers.h"

namespace convkit {
namespace depthwise {

constexpr int kThreads = 128;
constexpr int kOutPerThread = 4;
constexpr int kTile = kThreads * kOutPerThread;  // outputs of one (b, c) row per tile

template <typename T, int K, int S, int D>
__global__ void __launch_bounds__(kThreads) conv1d_fwd_depthwise_kernel(const Conv1dParams p) {
  using A = typename AccOf<T>::type;
  constexpr int kSpan = (kTile - 1) * S + (K - 1) * D + 1;
  __shared__ A window[kSpan];

  const int64_t l_tiles = ceil_div(p.out_length, kTile);
  const int64_t num_tiles = p.batch * p.out_channels * l_tiles;
  for (int64_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    const int64_t lt = tile % l_tiles;
    const int64_t row = tile / l_tiles;  // b * C + c
    const int64_t c = row % p.out_channels;
    const int64_t b = row / p.out_channels;
    const int64_t j0 = lt * kTile;
    const int64_t in0 = j0 * S - p.pad_left;
    const int64_t x_row = b * p.x_stride_b + c * p.x_stride_c;

    A w[K];
#pragma unroll
    for (int k = 0; k < K; ++k) w[k] = load<T>(p.w, c * p.w_stride_o + k * p.w_stride_k);

    __syncthreads();  // the previous tile is done with `window`
    for (int i = threadIdx.x; i < kSpan; i += kThreads) {
      const int64_t pos = in0 + i;
      window[i] = (pos >= 0 && pos < p.in_length) ? load<T>(p.x, x_row + pos * p.x_stride_l) : A(0);
    }
    __syncthreads();

    const A bias = p.bias != nullptr ? load<T>(p.bias, c) : A(0);
#pragma unroll
    for (int r = 0; r < kOutPerThread; ++r) {
      // Consecutive threads take consecutive outputs, so the stores coalesce.
      const int local = r * kThreads + threadIdx.x;
      const int64_t j = j0 + local;
      if (j >= p.out_length) break;
      A acc = bias;
#pragma unroll
      for (int k = 0; k < K; ++k) acc += w[k] * window[local * S + k * D];
      store<T>(p.y, b * p.y_stride_b + c * p.y_stride_c + j * p.y_stride_l, acc);
    }
  }
}

}  // namespace depthwise

template <DType dt, int K, int S, int D>
cudaError_t launch_conv1d_fwd_depthwise(const Conv1dParams& p, cudaStream_t stream) {
  using T = typename ScalarOf<dt>::type;
  const int64_t tiles = p.batch * p.out_channels * ceil_div(p.out_length, depthwise::kTile);
  if (tiles == 0) return cudaSuccess;
  depthwise::conv1d_fwd_depthwise_kernel<T, K, S, D>
      <<<grid_for(tiles, p.num_sms, 8), depthwise::kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

#define CONVKIT_INSTANTIATE_FWD_DEPTHWISE(K, S, D)                                                   \
  template cudaError_t launch_conv1d_fwd_depthwise<DType::kFloat32, K, S, D>(const Conv1dParams&, cudaStream_t); \
  template cudaError_t launch_conv1d_fwd_depthwise<DType::kFloat16, K, S, D>(const Conv1dParams&, cudaStream_t); \
  template cudaError_t launch_conv1d_fwd_depthwise<DType::kBFloat16, K, S, D>(const Conv1dParams&, cudaStream_t); \
  template cudaError_t launch_conv1d_fwd_depthwise<DType::kFloat64, K, S, D>(const Conv1dParams&, cudaStream_t);

}  // namespace convkit
