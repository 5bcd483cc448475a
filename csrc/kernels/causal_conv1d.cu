// convkit.causal_conv1d with seq_idx (packed sequences, optionally an initial state) and
// convkit.causal_conv1d_update (one decode step on a conv_state cache). Issue 6.
//
// These are direct kernels, one output (or gradient) element per thread with runtime K and dilation; the
// per-element logic lives in causal_conv1d.cuh, shared with the host harness the tests drive. A causal call
// without seq_idx does not come here: python/convkit/causal.py runs it on the depthwise kernels (causal
// padding, or the initial state placed in front of x).
//
//   causal_fwd_kernel           y = act(z + bias), z as in causal_conv1d.cuh
//   causal_bwd_input_kernel     grad-input and grad of the initial state, from g = d loss / d z
//   causal_bwd_weight_kernel    grad-weight / grad-bias partial sums, a (channel group, split of B * L) per block;
//                               summed in a fixed order by sum_weight_bias_partials_kernel: deterministic
//   causal_update_kernel        one (batch row, channel) per thread, all of its new tokens in order
#include "activation.cuh"
#include "causal_conv1d.cuh"
#include "common.cuh"
#include "launchers.h"

namespace convkit {
namespace {

constexpr int kThreads = 256;

template <typename T> struct CausalSrc {
  using A = typename AccOf<T>::type;
  const CausalParams& p;
  __device__ A x(int64_t b, int64_t c, int64_t t) const { return load<T>(p.x, b * p.x_sb + c * p.x_sc + t * p.x_sl); }
  __device__ A state(int64_t b, int64_t c, int64_t j) const {
    return load<T>(p.state, b * p.st_sb + c * p.st_sc + j * p.st_sl);
  }
  __device__ int32_t seq(int64_t b, int64_t t) const { return __ldg(p.seq_idx + b * p.seq_sb + t * p.seq_sl); }
  __device__ A w(int64_t c, int64_t k) const { return load_param<T>(p, p.w, c * p.w_sc + k * p.w_sk); }
  __device__ A g(int64_t b, int64_t c, int64_t t) const { return load<T>(p.y, b * p.y_sb + c * p.y_sc + t * p.y_sl); }
};

// The update reads and writes conv_state in one kernel: plain loads there, not the read-only path.
template <typename T> struct UpdateSrc {
  using A = typename AccOf<T>::type;
  const CausalParams& p;
  __device__ A x(int64_t b, int64_t c, int64_t i) const { return load<T>(p.x, b * p.x_sb + c * p.x_sc + i * p.x_sl); }
  __device__ A state(int64_t r, int64_t c, int64_t j) const {
    return to_acc(static_cast<const T*>(p.state)[r * p.st_sb + c * p.st_sc + j * p.st_sl]);
  }
  __device__ void set_state(int64_t r, int64_t c, int64_t j, A v) const {
    store<T>(p.state, r * p.st_sb + c * p.st_sc + j * p.st_sl, v);
  }
  __device__ A w(int64_t c, int64_t k) const { return load_param<T>(p, p.w, c * p.w_sc + k * p.w_sk); }
};

causal::Shape shape_of(const CausalParams& p) {
  return causal::Shape{p.batch, p.channels, p.length, p.kernel_size, p.dilation, p.halo, p.state != nullptr,
                       p.seq_idx != nullptr};
}

template <typename T>
__global__ void __launch_bounds__(kThreads) causal_fwd_kernel(const CausalParams p, const causal::Shape sh) {
  using A = typename AccOf<T>::type;
  const CausalSrc<T> src{p};
  const int64_t total = p.batch * p.channels * p.length;
  for (int64_t idx = blockIdx.x * int64_t{kThreads} + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * kThreads) {
    int64_t b, c, t;
    causal::split_index(idx, p.channels, p.length, p.c_fastest, b, c, t);
    A z = causal::forward_value<A>(src, sh, b, c, t);
    if (p.bias != nullptr) z += load_param<T>(p, p.bias, c);
    store<T>(p.y, b * p.y_sb + c * p.y_sc + t * p.y_sl, activate(p.activation, z));
  }
}

// Positions s in [lo, hi): lo = -halo when grad_state is wanted, hi = L when grad_x is.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    causal_bwd_input_kernel(const CausalParams p, const causal::Shape sh, int64_t lo, int64_t hi) {
  using A = typename AccOf<T>::type;
  const CausalSrc<T> src{p};
  const int64_t n = hi - lo, total = p.batch * p.channels * n;
  for (int64_t idx = blockIdx.x * int64_t{kThreads} + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * kThreads) {
    int64_t b, c, i;
    causal::split_index(idx, p.channels, n, p.c_fastest, b, c, i);
    const int64_t s = lo + i;
    const A v = causal::input_grad<A>(src, sh, b, c, s);
    if (s >= 0) {
      store<T>(p.grad_x, b * p.gx_sb + c * p.gx_sc + s * p.gx_sl, v);
    } else {
      store<T>(p.grad_state, b * p.gs_sb + c * p.gs_sc + (p.halo + s) * p.gs_sl, v);
    }
  }
}

// Block (channel group, split): CW channels x kThreads / CW position lanes; each thread sums its channel's
// terms over the split's (b, t) positions n = begin + lane, + lanes, ... (every tap, and g for the bias), then
// one thread per channel adds the lanes' sums in lane order: a fixed order, so deterministic. CW = 32 when
// x's channels are innermost (a warp then reads 32 consecutive channels of one position: coalesced), else 1
// (a warp reads 32 consecutive positions of one channel). KMAX > 0: K <= KMAX taps summed in one pass over the
// positions, in registers; KMAX = 0: one pass per tap (any K), then one for the bias.
template <typename T, int CW, int KMAX>
__global__ void __launch_bounds__(kThreads) causal_bwd_weight_kernel(const CausalParams p, const causal::Shape sh) {
  using A = typename AccOf<T>::type;
  constexpr int kLanes = kThreads / CW;
  __shared__ A scratch[kThreads];
  const CausalSrc<T> src{p};
  const int64_t C = p.channels, K = p.kernel_size, n_total = p.batch * p.length, groups = ceil_div(C, CW);
  const int cl = threadIdx.x % CW, lane = threadIdx.x / CW;
  A* part = static_cast<A*>(p.workspace);
  for (int64_t blk = blockIdx.x; blk < groups * p.weight_splits; blk += gridDim.x) {
    const int64_t split = blk / groups, c = (blk % groups) * CW + cl;
    int64_t begin, end;
    causal::split_range(split, p.split_len, n_total, begin, end);
    // the lanes' sums of tap k (k == K: the bias) into the partials; called by every thread, k uniform
    const auto finish = [&](int64_t k, A acc) {
      __syncthreads();  // the previous sums have been read
      scratch[threadIdx.x] = acc;
      __syncthreads();
      if (lane == 0 && c < C) {
        A total = A(0);
        for (int i = 0; i < kLanes; ++i) total += scratch[i * CW + cl];
        if (k < K) {
          part[split * C * K + c * K + k] = total;
        } else {
          part[p.weight_splits * C * K + split * C + c] = total;
        }
      }
    };
    if constexpr (KMAX > 0) {  // launched with p.grad_w set and K <= KMAX
      A acc[KMAX + 1];
#pragma unroll
      for (int k = 0; k <= KMAX; ++k) acc[k] = A(0);
      if (c < C) {
        for (int64_t n = begin + lane; n < end; n += kLanes) {
          int64_t b, t;
          divmod(n, p.length, b, t);
          const A gv = src.g(b, c, t);
          const int32_t q = causal::seq_of(src, sh, b, t);
#pragma unroll
          for (int k = 0; k < KMAX; ++k) {
            if (k < K) acc[k] += gv * causal::input_value<A>(src, sh, b, c, t - (K - 1 - k) * sh.dilation, q);
          }
          acc[KMAX] += gv;
        }
      }
#pragma unroll
      for (int k = 0; k < KMAX; ++k) {
        if (k < K) finish(k, acc[k]);
      }
      if (p.grad_bias != nullptr) finish(K, acc[KMAX]);
    } else {
      for (int64_t k = p.grad_w != nullptr ? 0 : K; k <= K; ++k) {
        if (k == K && p.grad_bias == nullptr) break;
        A acc = A(0);
        if (c < C) {
          for (int64_t n = begin + lane; n < end; n += kLanes) {
            int64_t b, t;
            divmod(n, p.length, b, t);
            acc += k < K ? causal::weight_grad_term<A>(src, sh, b, c, t, k) : src.g(b, c, t);
          }
        }
        finish(k, acc);
      }
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) causal_update_kernel(const CausalParams p, const causal::UpdateShape sh) {
  using A = typename AccOf<T>::type;
  const UpdateSrc<T> src{p};
  const int64_t total = p.batch * p.channels;
  for (int64_t idx = blockIdx.x * int64_t{kThreads} + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * kThreads) {
    int64_t b, c;
    divmod(idx, p.channels, b, c);
    const int64_t r = causal::state_row(p.state_indices, p.index_stride, b, p.state_batch);
    const int64_t y_row = b * p.y_sb + c * p.y_sc;
    if (r < 0) {  // a padding row (continuous batching): zeros, the cache untouched
      for (int64_t i = 0; i < p.length; ++i) store<T>(p.y, y_row + i * p.y_sl, A(0));
      continue;
    }
    const int64_t cache_seqlen = p.cache_seqlens != nullptr ? p.cache_seqlens[b * p.cache_stride] : 0;
    const A bias = p.bias != nullptr ? load_param<T>(p, p.bias, c) : A(0);
    causal::update_row<A>(src, sh, b, r, c, cache_seqlen, [&](int64_t i, A z) {
      store<T>(p.y, y_row + i * p.y_sl, activate(p.activation, z + bias));
    });
  }
}

unsigned blocks_for(int64_t elements, int num_sms) { return grid_for(ceil_div(elements, kThreads), num_sms, 8); }

// Channels per grad-weight block: 32 when x's channels are innermost, else 1 (causal_bwd_weight_kernel).
int64_t weight_channels_per_block(const CausalParams& p) { return p.c_fastest ? 32 : 1; }

// causal_bwd_weight_kernel for p: one pass over the positions for K <= 4 (Mamba's) and K <= 16; one per tap
// above that, or for a bias gradient alone.
template <typename T, int CW>
void launch_bwd_weight(const CausalParams& p, const causal::Shape& sh, cudaStream_t stream) {
  const unsigned grid = grid_for(ceil_div(p.channels, CW) * p.weight_splits, p.num_sms, 8);
  if (p.grad_w != nullptr && p.kernel_size <= 4) {
    causal_bwd_weight_kernel<T, CW, 4><<<grid, kThreads, 0, stream>>>(p, sh);
  } else if (p.grad_w != nullptr && p.kernel_size <= 16) {
    causal_bwd_weight_kernel<T, CW, 16><<<grid, kThreads, 0, stream>>>(p, sh);
  } else {
    causal_bwd_weight_kernel<T, CW, 0><<<grid, kThreads, 0, stream>>>(p, sh);
  }
}

}  // namespace

cudaError_t launch_causal_conv1d_fwd(const CausalParams& p, cudaStream_t stream) {
  const int64_t total = p.batch * p.channels * p.length;
  if (total == 0) return cudaSuccess;
  CONVKIT_DISPATCH_DTYPE(p.dtype, {
    causal_fwd_kernel<scalar_t><<<blocks_for(total, p.num_sms), kThreads, 0, stream>>>(p, shape_of(p));
  })
  return cudaGetLastError();
}

int64_t plan_causal_conv1d_bwd_weight(CausalParams& p) {
  const int64_t n_total = p.batch * p.length, chunk = 1024;
  const int64_t groups = ceil_div(p.channels, weight_channels_per_block(p));
  int64_t per_split = 1;
  const int64_t want = ceil_div(int64_t{8} * (p.num_sms > 0 ? p.num_sms : 1), groups > 0 ? groups : 1);
  p.weight_splits = plan_splits(want, ceil_div(n_total, chunk), 4096, groups, per_split);
  p.split_len = per_split * chunk;
  return p.weight_splits * p.channels * (p.kernel_size + 1);
}

cudaError_t launch_causal_conv1d_bwd(const CausalParams& p, cudaStream_t stream) {
  const int64_t lo = p.grad_state != nullptr ? -p.halo : 0, hi = p.grad_x != nullptr ? p.length : 0;
  CONVKIT_DISPATCH_DTYPE(p.dtype, {
    const causal::Shape sh = shape_of(p);
    const int64_t n_in = p.batch * p.channels * (hi - lo);
    if (n_in > 0) {
      causal_bwd_input_kernel<scalar_t><<<blocks_for(n_in, p.num_sms), kThreads, 0, stream>>>(p, sh, lo, hi);
    }
    if (p.grad_w != nullptr || p.grad_bias != nullptr) {
      if (weight_channels_per_block(p) == 32) {
        launch_bwd_weight<scalar_t, 32>(p, sh, stream);
      } else {
        launch_bwd_weight<scalar_t, 1>(p, sh, stream);
      }
      const cudaError_t err = sum_weight_bias_partials<scalar_t>(p, p.workspace, p.weight_splits,
                                                                 p.channels * p.kernel_size, p.channels, p.grad_w,
                                                                 p.grad_bias, stream);
      if (err != cudaSuccess) return err;
    }
  })
  return cudaGetLastError();
}

cudaError_t launch_causal_conv1d_update(const CausalParams& p, cudaStream_t stream) {
  const int64_t total = p.batch * p.channels;
  if (total == 0) return cudaSuccess;
  const causal::UpdateShape sh{p.length, p.channels, p.kernel_size, p.dilation, p.halo, p.state_len,
                               p.cache_seqlens != nullptr};
  CONVKIT_DISPATCH_DTYPE(p.dtype, {
    causal_update_kernel<scalar_t><<<blocks_for(total, p.num_sms), kThreads, 0, stream>>>(p, sh);
  })
  return cudaGetLastError();
}

}  // namespace convkit
