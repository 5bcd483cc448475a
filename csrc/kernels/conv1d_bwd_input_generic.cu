// Generic grad-input, written as a gather so that no atomics are needed and every dx element is
// written exactly once (also the ones no output depends on, which get 0):
//   dx[b, ci, i] = sum_{co in group, k} w[co, ci, k] * dy[b, co, (i + P - k*D) / S]
// over the k for which (i + P - k*D) is a non-negative multiple of S below L_out.
#include "common.cuh"
#include "launchers.h"

namespace convkit {
namespace {

constexpr int kThreads = 128;
constexpr int kCinTile = 4;  // input channels per thread: each dy value loaded is used this often

template <typename T>
__global__ void __launch_bounds__(kThreads) conv1d_bwd_input_generic_kernel(const Conv1dParams p) {
  using A = typename AccOf<T>::type;
  const int64_t cin_g = p.in_channels / p.groups;
  const int64_t cout_g = p.out_channels / p.groups;
  const int64_t ci_tiles = ceil_div(cin_g, kCinTile);
  const int64_t l_tiles = ceil_div(p.in_length, kThreads);
  const int64_t num_tiles = p.batch * p.groups * ci_tiles * l_tiles;
  const int64_t K = p.kernel_size;

  for (int64_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    const int64_t lt = tile % l_tiles;
    int64_t rest = tile / l_tiles;
    const int64_t ct = rest % ci_tiles;
    rest /= ci_tiles;
    const int64_t g = rest % p.groups;
    const int64_t b = rest / p.groups;

    const int64_t i = lt * kThreads + threadIdx.x;
    if (i >= p.in_length) continue;
    const int64_t ci_l0 = ct * kCinTile;
    const int64_t n_ci = min(static_cast<int64_t>(kCinTile), cin_g - ci_l0);

    A acc[kCinTile];
#pragma unroll
    for (int c = 0; c < kCinTile; ++c) acc[c] = 0;

    for (int64_t k = 0; k < K; ++k) {
      const int64_t t = i + p.pad_left - k * p.dilation;
      if (t < 0) break;  // t only decreases with k
      if (t % p.stride != 0) continue;
      const int64_t j = t / p.stride;
      if (j >= p.out_length) continue;
      for (int64_t co_l = 0; co_l < cout_g; ++co_l) {
        const int64_t co = g * cout_g + co_l;
        const A dy = load<T>(p.y, b * p.y_stride_b + co * p.y_stride_c + j * p.y_stride_l);
        const int64_t w_idx = co * p.w_stride_o + ci_l0 * p.w_stride_i + k * p.w_stride_k;
#pragma unroll
        for (int c = 0; c < kCinTile; ++c)
          if (c < n_ci) acc[c] += dy * load_param<T>(p, p.w, w_idx + c * p.w_stride_i);
      }
    }
#pragma unroll
    for (int c = 0; c < kCinTile; ++c) {
      if (c >= n_ci) break;
      const int64_t ci = g * cin_g + ci_l0 + c;
      store<T>(p.x, b * p.x_stride_b + ci * p.x_stride_c + i * p.x_stride_l, acc[c]);
    }
  }
}

}  // namespace

cudaError_t launch_conv1d_bwd_input_generic(const Conv1dParams& p, cudaStream_t stream) {
  const int64_t cin_g = p.in_channels / p.groups;
  const int64_t tiles = p.batch * p.groups * ceil_div(cin_g, kCinTile) * ceil_div(p.in_length, kThreads);
  if (tiles == 0) return cudaSuccess;
  CONVKIT_DISPATCH_DTYPE(p.dtype, {
    conv1d_bwd_input_generic_kernel<scalar_t><<<grid_for(tiles, p.num_sms), kThreads, 0, stream>>>(p);
  });
  return cudaGetLastError();
}

}  // namespace convkit
