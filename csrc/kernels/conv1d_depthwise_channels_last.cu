// Depthwise forward (multiplier 1) for the (B, L, C) memory layout: x and y are `t.transpose(1, 2)`
// views of channels-last tensors (channel stride 1), so one position of one row is C contiguous
// elements. Threads run along the channels, 16 bytes (8 bf16/fp16 or 4 fp32 channels) each, a warp
// covering 32 such vectors; the 8 warps of a block take 8 consecutive outputs each of the same
// channels. Every x load is a fully coalesced 512-byte warp access; the K taps of consecutive outputs
// overlap, so after the first output each further one reads mostly L1-resident data. The taps of the
// block's channels are staged in shared memory as fp32 ([k][channel]). K, S and D are runtime values
// (no template instantiations per table entry: this file builds in seconds).
// dispatch.cpp allocates y in the same layout for such inputs (python/convkit/ops.py's fake agrees).
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

}  // namespace convkit
