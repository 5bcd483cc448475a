// Generic grad-weight and grad-bias: reductions over (b, j), B * L_out terms each.
//   dw[co, ci, k] = sum_{b, j} dy[b, co, j] * x[b, g*Cin_g + ci, j*S + k*D - P]
//   db[co]        = sum_{b, j} dy[b, co, j]
// The (b, j) range is cut into `splits` chunks so that the grid fills the GPU even when the weight is
// small; each block writes its chunk's partial sums to the workspace, and a second kernel adds the
// partials in a fixed order. No atomics: the result is the same bits on every run.
#include "common.cuh"
#include "launchers.h"

namespace convkit {
namespace {

constexpr int kThreads = 256;
constexpr int kTapChunk = 8;  // taps accumulated in registers per pass over the chunk

template <typename T>
__global__ void __launch_bounds__(kThreads) conv1d_bwd_weight_partial_kernel(const Conv1dParams p) {
  using A = typename AccOf<T>::type;
  __shared__ A scratch[kThreads / 32];
  const int64_t cin_g = p.in_channels / p.groups;
  const int64_t cout_g = p.out_channels / p.groups;
  const int64_t rows = p.out_channels * cin_g;
  const int64_t n_weight = rows * p.kernel_size;
  const int64_t n_terms = p.batch * p.out_length;
  const int64_t chunk = ceil_div(n_terms, p.weight_splits);
  A* partial = static_cast<A*>(p.workspace);

  for (int64_t tile = blockIdx.x; tile < rows * p.weight_splits; tile += gridDim.x) {
    const int64_t row = tile % rows;
    const int64_t split = tile / rows;
    const int64_t co = row / cin_g;
    const int64_t ci = (co / cout_g) * cin_g + row % cin_g;
    const int64_t begin = split * chunk;
    const int64_t end = min(begin + chunk, n_terms);

    for (int64_t k0 = 0; k0 < p.kernel_size; k0 += kTapChunk) {
      A acc[kTapChunk];
#pragma unroll
      for (int t = 0; t < kTapChunk; ++t) acc[t] = 0;
      for (int64_t n = begin + threadIdx.x; n < end; n += kThreads) {
        const int64_t b = n / p.out_length;
        const int64_t j = n - b * p.out_length;
        const A dy = load<T>(p.y, b * p.y_stride_b + co * p.y_stride_c + j * p.y_stride_l);
        const int64_t x_row = b * p.x_stride_b + ci * p.x_stride_c;
        const int64_t base = j * p.stride - p.pad_left + k0 * p.dilation;
#pragma unroll
        for (int t = 0; t < kTapChunk; ++t) {
          const int64_t pos = base + t * p.dilation;
          if (k0 + t < p.kernel_size && pos >= 0 && pos < p.in_length)
            acc[t] += dy * load<T>(p.x, x_row + pos * p.x_stride_l);
        }
      }
#pragma unroll
      for (int t = 0; t < kTapChunk; ++t) {
        const A s = block_sum(acc[t], scratch);
        if (threadIdx.x == 0 && k0 + t < p.kernel_size)
          partial[split * n_weight + row * p.kernel_size + k0 + t] = s;
      }
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) conv1d_bwd_bias_partial_kernel(const Conv1dParams p) {
  using A = typename AccOf<T>::type;
  __shared__ A scratch[kThreads / 32];
  const int64_t n_weight = p.out_channels * (p.in_channels / p.groups) * p.kernel_size;
  const int64_t n_terms = p.batch * p.out_length;
  const int64_t chunk = ceil_div(n_terms, p.bias_splits);
  A* partial = static_cast<A*>(p.workspace) + p.weight_splits * n_weight;

  for (int64_t tile = blockIdx.x; tile < p.out_channels * p.bias_splits; tile += gridDim.x) {
    const int64_t co = tile % p.out_channels;
    const int64_t split = tile / p.out_channels;
    const int64_t begin = split * chunk;
    const int64_t end = min(begin + chunk, n_terms);
    A acc = 0;
    for (int64_t n = begin + threadIdx.x; n < end; n += kThreads) {
      const int64_t b = n / p.out_length;
      const int64_t j = n - b * p.out_length;
      acc += load<T>(p.y, b * p.y_stride_b + co * p.y_stride_c + j * p.y_stride_l);
    }
    const A s = block_sum(acc, scratch);
    if (threadIdx.x == 0) partial[split * p.out_channels + co] = s;
  }
}

int64_t splits_for(int64_t outputs, int64_t n_terms, int num_sms) {
  // Enough blocks for ~8 per SM, but each keeps at least ~2048 terms so partials stay cheap.
  const int64_t wanted = ceil_div(static_cast<int64_t>(num_sms) * 8, outputs > 0 ? outputs : 1);
  const int64_t most = n_terms / 2048 > 1 ? n_terms / 2048 : 1;
  return wanted < most ? wanted : most;
}

}  // namespace

int64_t plan_conv1d_bwd_weight(Conv1dParams& p, bool with_bias) {
  const int64_t rows = p.out_channels * (p.in_channels / p.groups);
  const int64_t n_terms = p.batch * p.out_length;
  const int64_t n_weight = rows * p.kernel_size;
  p.weight_splits = p.w != nullptr ? splits_for(rows, n_terms, p.num_sms) : 0;
  // Bound the workspace to ~64 M accumulators whatever the weight size.
  const int64_t cap = (int64_t{1} << 26) / (n_weight > 0 ? n_weight : 1);
  if (p.weight_splits > cap) p.weight_splits = cap > 1 ? cap : 1;
  p.bias_splits = with_bias ? splits_for(p.out_channels, n_terms, p.num_sms) : 0;
  return p.weight_splits * n_weight + p.bias_splits * p.out_channels;
}

// Expects dw (p.w) and db (p.bias) contiguous, either may be null; p.workspace sized by
// plan_conv1d_bwd_weight, called after p.w and p.bias are set.
cudaError_t launch_conv1d_bwd_weight_generic(const Conv1dParams& p, cudaStream_t stream) {
  const int64_t rows = p.out_channels * (p.in_channels / p.groups);
  const int64_t n_weight = rows * p.kernel_size;
  CONVKIT_DISPATCH_DTYPE(p.dtype, {
    if (p.w != nullptr && n_weight > 0) {
      conv1d_bwd_weight_partial_kernel<scalar_t>
          <<<grid_for(rows * p.weight_splits, p.num_sms, 8), kThreads, 0, stream>>>(p);
      CONVKIT_DISPATCH_PARAM_TYPE(p, scalar_t, {
        sum_partials_kernel<param_t><<<grid_for(ceil_div(n_weight, kThreads), p.num_sms, 8), kThreads, 0, stream>>>(
            p.workspace, p.weight_splits, n_weight, p.w);
      })
    }
    if (p.bias != nullptr && p.out_channels > 0) {
      conv1d_bwd_bias_partial_kernel<scalar_t>
          <<<grid_for(p.out_channels * p.bias_splits, p.num_sms, 8), kThreads, 0, stream>>>(p);
      using A = typename AccOf<scalar_t>::type;
      const A* bias_part = static_cast<const A*>(p.workspace) + p.weight_splits * n_weight;
      CONVKIT_DISPATCH_PARAM_TYPE(p, scalar_t, {
        sum_partials_kernel<param_t><<<grid_for(ceil_div(p.out_channels, kThreads), p.num_sms, 8), kThreads, 0,
                                       stream>>>(bias_part, p.bias_splits, p.out_channels, p.bias);
      })
    }
  });
  return cudaGetLastError();
}

}  // namespace convkit
