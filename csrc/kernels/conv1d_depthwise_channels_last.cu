// Depthwise forward (multiplier 1) for the (B, L, C) memory layout: x and y are `t.transpose(1, 2)`
// views of channels-last tensors (channel stride 1), so one position of one row is C contiguous
// elements. Threads run along the channels, 16 bytes (8 bf16/fp16 or 4 fp32 channels) each, a warp
// covering 32 such vectors; the 8 warps of a block take 8 consecutive outputs each of the same
// channels. Every x load is a fully coalesced 512-byte warp access; the K taps of consecutive outputs
// overlap, so after the first output each further one reads mostly L1-resident data. The taps of the
// block's channels are staged in shared memory as fp32 ([k][channel]). K, S and D are runtime values
// (no template instantiations per table entry: this file builds in seconds).
// dispatch.cpp allocates y in the same layout for such inputs (python/convkit/ops.py's fake agrees).
#include <algorithm>
#include <cstdint>

#include "activation.cuh"
#include "common.cuh"
#include "launchers.h"

namespace convkit {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kOutPerWarp = 8;
constexpr int kOutPerBlock = kWarps * kOutPerWarp;
constexpr int kMaxK = 48;  // taps staged: kMaxK * 256 channels * 4 bytes = 48 KB

template <typename T> __host__ __device__ constexpr int vec_elems() { return 16 / static_cast<int>(sizeof(T)); }
template <typename T> __host__ __device__ constexpr int block_channels() { return 32 * vec_elems<T>(); }

template <typename T> __device__ __forceinline__ void unpack16(const uint4& v, float* out) {
  if constexpr (sizeof(T) == 4) {
    out[0] = __uint_as_float(v.x); out[1] = __uint_as_float(v.y);
    out[2] = __uint_as_float(v.z); out[3] = __uint_as_float(v.w);
  } else {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = to_acc(from_bits<T>(static_cast<unsigned short>(w[i] & 0xffffu)));
      out[2 * i + 1] = to_acc(from_bits<T>(static_cast<unsigned short>(w[i] >> 16)));
    }
  }
}

template <typename T> __device__ __forceinline__ uint32_t bits_of(float v) {
  const T t = from_acc<T>(v);
  return *reinterpret_cast<const unsigned short*>(&t);
}

template <typename T> __device__ __forceinline__ uint4 pack16(const float* in) {
  if constexpr (sizeof(T) == 4) {
    return make_uint4(__float_as_uint(in[0]), __float_as_uint(in[1]), __float_as_uint(in[2]), __float_as_uint(in[3]));
  } else {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = bits_of<T>(in[2 * i]) | (bits_of<T>(in[2 * i + 1]) << 16);
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    conv1d_fwd_dw_channels_last_kernel(const Conv1dParams p, int64_t l_tiles, int64_t c_tiles) {
  constexpr int VE = vec_elems<T>();
  constexpr int CT = block_channels<T>();
  __shared__ float w_s[kMaxK * 256];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t C = p.out_channels, K = p.kernel_size;
  const int64_t tiles = p.batch * l_tiles * c_tiles;

  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int64_t rest, ct, lt, b;
    divmod(tile, c_tiles, rest, ct);
    divmod(rest, l_tiles, b, lt);
    const int64_t c0 = ct * CT;
    __syncthreads();  // the previous tile's taps are no longer read
    for (int i = tid; i < K * CT; i += kThreads) {
      const int k = i / CT, cl = i - k * CT;
      const int64_t c = c0 + cl;
      w_s[i] = c < C ? load_param<T>(p, p.w, c * p.w_stride_o + k * p.w_stride_k) : 0.f;
    }
    __syncthreads();

    const int64_t c = c0 + lane * VE;
    if (c >= C) continue;  // C is a multiple of VE: a vector is wholly in or out
    float bias[VE];
#pragma unroll
    for (int e = 0; e < VE; ++e) bias[e] = p.bias != nullptr ? load_param<T>(p, p.bias, c + e) : 0.f;
    const T* xb = static_cast<const T*>(p.x) + b * p.x_stride_b + c;
    T* yb = static_cast<T*>(p.y) + b * p.y_stride_b + c;
    const int64_t j_begin = lt * kOutPerBlock + warp * kOutPerWarp;
#pragma unroll 1
    for (int jj = 0; jj < kOutPerWarp; ++jj) {
      const int64_t j = j_begin + jj;
      if (j >= p.out_length) break;
      float acc[VE];
#pragma unroll
      for (int e = 0; e < VE; ++e) acc[e] = bias[e];
      const int64_t start = j * p.stride - p.pad_left;
#pragma unroll 4
      for (int k = 0; k < K; ++k) {
        const int64_t pos = start + k * p.dilation;
        if (pos < 0 || pos >= p.in_length) continue;
        float xv[VE];
        unpack16<T>(__ldg(reinterpret_cast<const uint4*>(xb + pos * p.x_stride_l)), xv);
        const float* wk = w_s + k * CT + lane * VE;
#pragma unroll
        for (int e = 0; e < VE; ++e) acc[e] = fmaf(wk[e], xv[e], acc[e]);
      }
#pragma unroll
      for (int e = 0; e < VE; ++e) acc[e] = activate(p.activation, acc[e]);
      *reinterpret_cast<uint4*>(yb + j * p.y_stride_l) = pack16<T>(acc);
    }
  }
}

// Grad-weight and grad-bias on the same layout (multiplier 1, any stride):
//   dw[c, k] = sum over (b, j) of dy[b, j, c] * x[b, j*S + k*D - P, c],   db[c] = sum of dy[b, j, c].
// Block = (256 or 128 channels, one split = a contiguous range of the flattened (b, j)); warp w takes
// positions r0 + w, r0 + w + 8, ... so the 8 warps read neighbouring rows; each thread keeps 8 taps x
// its 16-byte vector of channels in registers and the taps are walked in chunks of 8. The block's
// warps are summed in a fixed order through shared memory into the split's partial sums, which
// sum_partials_kernel adds in split order: the same bits on every run.
constexpr int kTapChunk = 8;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    conv1d_bwd_weight_dw_channels_last_kernel(const Conv1dParams p, int64_t c_tiles, int64_t per_split) {
  constexpr int VE = vec_elems<T>();
  constexpr int CT = block_channels<T>();
  __shared__ float red[kWarps * 256];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t C = p.out_channels, K = p.kernel_size;
  int64_t split, ct;
  divmod(static_cast<int64_t>(blockIdx.x), c_tiles, split, ct);
  const int64_t c0 = ct * CT, c = c0 + lane * VE;
  const bool active = c < C;
  const int64_t total = p.batch * p.out_length;
  const int64_t r_begin = split * per_split;
  const int64_t r_end = r_begin + per_split < total ? r_begin + per_split : total;
  float* part_w = static_cast<float*>(p.workspace);
  float* part_b = part_w + p.weight_splits * C * K;

  // Fixed-order sum over the warps of v (this thread's VE values) into dst[channel] for the block's
  // channels (dst indexed by the channel offset c0 + i).
  auto block_sum_to = [&](const float* v, float* dst, int64_t dst_stride) {
#pragma unroll
    for (int e = 0; e < VE; ++e) red[warp * CT + lane * VE + e] = v[e];
    __syncthreads();
    for (int i = tid; i < CT; i += kThreads) {
      float s = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) s += red[w * CT + i];
      if (c0 + i < C) dst[(c0 + i) * dst_stride] = s;
    }
    __syncthreads();
  };

  for (int64_t k0 = 0; k0 < K; k0 += kTapChunk) {
    float acc[kTapChunk][VE];
    float bsum[VE];
#pragma unroll
    for (int t = 0; t < kTapChunk; ++t)
#pragma unroll
      for (int e = 0; e < VE; ++e) acc[t][e] = 0.f;
#pragma unroll
    for (int e = 0; e < VE; ++e) bsum[e] = 0.f;
    if (active) {
      int64_t b, j;
      divmod(r_begin + warp, p.out_length, b, j);
#pragma unroll 1
      for (int64_t r = r_begin + warp; r < r_end; r += kWarps) {
        const T* xb = static_cast<const T*>(p.x) + b * p.x_stride_b + c;
        float g[VE];
        unpack16<T>(__ldg(reinterpret_cast<const uint4*>(static_cast<const T*>(p.y) + b * p.y_stride_b +
                                                          j * p.y_stride_l + c)), g);
#pragma unroll
        for (int e = 0; e < VE; ++e) bsum[e] += g[e];
        const int64_t start = j * p.stride - p.pad_left + k0 * p.dilation;
#pragma unroll
        for (int t = 0; t < kTapChunk; ++t) {
          const int64_t pos = start + t * p.dilation;
          if (k0 + t < K && pos >= 0 && pos < p.in_length) {
            float xv[VE];
            unpack16<T>(__ldg(reinterpret_cast<const uint4*>(xb + pos * p.x_stride_l)), xv);
#pragma unroll
            for (int e = 0; e < VE; ++e) acc[t][e] = fmaf(g[e], xv[e], acc[t][e]);
          }
        }
        j += kWarps;  // next position of this warp (rows may wrap into the next batch entry)
        while (j >= p.out_length) { j -= p.out_length; ++b; }
      }
    }
#pragma unroll
    for (int t = 0; t < kTapChunk; ++t)  // (k0 + t < K is the same for the whole block: barriers are safe)
      if (k0 + t < K) block_sum_to(acc[t], part_w + split * C * K + (k0 + t), K);
    if (k0 == 0 && p.bias != nullptr) block_sum_to(bsum, part_b + split * C, 1);
  }
}

template <typename T> bool supports_typed(const Conv1dParams& p) {
  constexpr int VE = vec_elems<T>();
  auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  return p.x_stride_c == 1 && p.y_stride_c == 1 && p.in_channels % VE == 0 && p.x_stride_b % VE == 0 &&
         p.x_stride_l % VE == 0 && p.y_stride_b % VE == 0 && p.y_stride_l % VE == 0 && aligned(p.x) &&
         aligned(p.y);
}

}  // namespace

bool conv1d_fwd_depthwise_channels_last_supports(const Conv1dParams& p) {
  if (p.groups != p.in_channels || p.out_channels != p.in_channels || p.kernel_size > kMaxK) return false;
  switch (p.dtype) {
    case DType::kFloat32: return p.w_dtype == DType::kFloat32 && supports_typed<float>(p);
    case DType::kFloat16: return supports_typed<__half>(p);
    case DType::kBFloat16: return supports_typed<__nv_bfloat16>(p);
    default: return false;
  }
}

cudaError_t launch_conv1d_fwd_depthwise_channels_last(const Conv1dParams& p, cudaStream_t stream) {
  const int64_t l_tiles = ceil_div(p.out_length, kOutPerBlock);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const int64_t c_tiles = ceil_div(p.out_channels, block_channels<T>());
    const int64_t tiles = p.batch * l_tiles * c_tiles;
    if (tiles == 0) return;
    const unsigned grid = static_cast<unsigned>(tiles < (int64_t{1} << 30) ? tiles : (int64_t{1} << 30));
    conv1d_fwd_dw_channels_last_kernel<T><<<grid, kThreads, 0, stream>>>(p, l_tiles, c_tiles);
  };
  switch (p.dtype) {
    case DType::kFloat32: run(float{}); break;
    case DType::kFloat16: run(__half{}); break;
    case DType::kBFloat16: run(__nv_bfloat16{}); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

namespace {
template <typename T> int64_t wgrad_splits(const Conv1dParams& p) {
  const int64_t c_tiles = ceil_div(p.out_channels, block_channels<T>());
  const int64_t total = p.batch * p.out_length;
  // about 4 blocks per SM, at least 64 positions per warp, workspace <= ~64 M floats
  const int64_t want = ceil_div(int64_t{p.num_sms > 0 ? p.num_sms : 1} * 4, c_tiles);
  const int64_t cap = std::min(std::max<int64_t>(1, total / (64 * kWarps)),
                               split_cap(p.out_channels * (p.kernel_size + 1)));
  int64_t per_split;
  return plan_splits(want, std::max<int64_t>(total, 1), cap, c_tiles, per_split);
}

template <typename F> auto by_dtype(DType dt, F f) {
  switch (dt) {
    case DType::kFloat16: return f(__half{});
    case DType::kBFloat16: return f(__nv_bfloat16{});
    default: return f(float{});
  }
}
}  // namespace

bool conv1d_bwd_weight_depthwise_channels_last_supports(const Conv1dParams& p) {
  // p as for the forward, with p.y = dy: the same layout conditions on x and dy.
  return conv1d_fwd_depthwise_channels_last_supports(p);
}

int64_t plan_conv1d_bwd_weight_depthwise_channels_last(Conv1dParams& p) {
  p.weight_splits = by_dtype(p.dtype, [&](auto tag) { return wgrad_splits<decltype(tag)>(p); });
  p.bias_splits = p.weight_splits;
  return p.weight_splits * p.out_channels * (p.kernel_size + 1);
}

cudaError_t launch_conv1d_bwd_weight_depthwise_channels_last(const Conv1dParams& p, cudaStream_t stream) {
  const int64_t total = p.batch * p.out_length;
  if (total == 0 || p.weight_splits < 1) return cudaErrorInvalidValue;
  const int64_t per_split = ceil_div(total, p.weight_splits);
  const int64_t n_w = p.out_channels * p.kernel_size;
  const float* part = static_cast<const float*>(p.workspace);
  return by_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t c_tiles = ceil_div(p.out_channels, block_channels<T>());
    conv1d_bwd_weight_dw_channels_last_kernel<T>
        <<<static_cast<unsigned>(c_tiles * p.weight_splits), kThreads, 0, stream>>>(p, c_tiles, per_split);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    // p.grad_w / p.grad_bias: the outputs, in the weights' dtype.
    return sum_weight_bias_partials<T>(p, part, p.weight_splits, n_w, p.out_channels, p.grad_w, p.grad_bias, stream);
  });
}

}  // namespace convkit
