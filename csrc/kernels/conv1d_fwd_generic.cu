// Generic forward: out[b, co, j] = bias[co] + sum_{ci in group, k} w[co, ci, k] * x[b, ci, j*S + k*D - P].
// then the fused activation, if any. Correct for every configuration; the specialised kernels exist
// to be faster than this.
#include "activation.cuh"
#include "common.cuh"
#include "launchers.h"

namespace convkit {
namespace {

constexpr int kThreads = 128;
// Output channels per thread: each x value loaded is used COUT_TILE times.
constexpr int kCoutTile = 4;

template <typename T>
__global__ void __launch_bounds__(kThreads) conv1d_fwd_generic_kernel(const Conv1dParams p) {
  using A = typename AccOf<T>::type;
  const int64_t cin_g = p.in_channels / p.groups;
  const int64_t cout_g = p.out_channels / p.groups;
  const int64_t co_tiles = ceil_div(cout_g, kCoutTile);
  const int64_t l_tiles = ceil_div(p.out_length, kThreads);
  const int64_t num_tiles = p.batch * p.groups * co_tiles * l_tiles;
  const int64_t K = p.kernel_size;

  for (int64_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    const int64_t lt = tile % l_tiles;
    int64_t rest = tile / l_tiles;
    const int64_t ct = rest % co_tiles;
    rest /= co_tiles;
    const int64_t g = rest % p.groups;
    const int64_t b = rest / p.groups;

    const int64_t j = lt * kThreads + threadIdx.x;
    if (j >= p.out_length) continue;
    const int64_t co0 = g * cout_g + ct * kCoutTile;
    const int64_t n_co = min(static_cast<int64_t>(kCoutTile), cout_g - ct * kCoutTile);

    A acc[kCoutTile];
#pragma unroll
    for (int c = 0; c < kCoutTile; ++c) acc[c] = 0;

    const int64_t start = j * p.stride - p.pad_left;
    for (int64_t ci_l = 0; ci_l < cin_g; ++ci_l) {
      const int64_t x_row = b * p.x_stride_b + (g * cin_g + ci_l) * p.x_stride_c;
      const int64_t w_row = co0 * p.w_stride_o + ci_l * p.w_stride_i;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t pos = start + k * p.dilation;
        if (pos < 0 || pos >= p.in_length) continue;
        const A xv = load<T>(p.x, x_row + pos * p.x_stride_l);
#pragma unroll
        for (int c = 0; c < kCoutTile; ++c)
          if (c < n_co) acc[c] += xv * load_param<T>(p, p.w, w_row + c * p.w_stride_o + k * p.w_stride_k);
      }
    }
#pragma unroll
    for (int c = 0; c < kCoutTile; ++c) {
      if (c >= n_co) break;
      A v = acc[c];
      if (p.bias != nullptr) v += load_param<T>(p, p.bias, co0 + c);
      v = activate(p.activation, v);
      store<T>(p.y, b * p.y_stride_b + (co0 + c) * p.y_stride_c + j * p.y_stride_l, v);
    }
  }
}

}  // namespace

cudaError_t launch_conv1d_fwd_generic(const Conv1dParams& p, cudaStream_t stream) {
  const int64_t cout_g = p.out_channels / p.groups;
  const int64_t tiles = p.batch * p.groups * ceil_div(cout_g, kCoutTile) * ceil_div(p.out_length, kThreads);
  if (tiles == 0) return cudaSuccess;
  CONVKIT_DISPATCH_DTYPE(p.dtype, {
    conv1d_fwd_generic_kernel<scalar_t><<<grid_for(tiles, p.num_sms), kThreads, 0, stream>>>(p);
  });
  return cudaGetLastError();
}

}  // namespace convkit
