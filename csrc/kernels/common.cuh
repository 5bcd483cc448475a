// Device-side helpers shared by every kernel file: dtype mapping, loads/stores through the
// accumulator type, block reductions, grid sizing. CUDA headers only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_set>

#include "../conv1d_params.h"
#include "index_math.h"

namespace convkit {

template <DType dt> struct ScalarOf;
template <> struct ScalarOf<DType::kFloat32> { using type = float; };
template <> struct ScalarOf<DType::kFloat16> { using type = __half; };
template <> struct ScalarOf<DType::kBFloat16> { using type = __nv_bfloat16; };
template <> struct ScalarOf<DType::kFloat64> { using type = double; };

// Bytes of one element of a dtype (host code that is not templated on the type).
inline int dtype_bytes(DType dt) { return dt == DType::kFloat64 ? 8 : dt == DType::kFloat32 ? 4 : 2; }

// fp16/bf16/fp32 accumulate in fp32; fp64 stays fp64 so gradcheck can run on the real kernels.
template <typename T> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };

__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ float to_acc(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_acc(float v);
template <> __device__ __forceinline__ float from_acc<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_acc<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <typename T> __device__ __forceinline__ T from_acc(double v) { return v; }

// A 16-bit float type from its bits (the types' conversions may be compiled out by torch's flags).
template <typename T> __device__ __forceinline__ T from_bits(unsigned short bits);
template <> __device__ __forceinline__ __half from_bits<__half>(unsigned short bits) { return __ushort_as_half(bits); }
template <> __device__ __forceinline__ __nv_bfloat16 from_bits<__nv_bfloat16>(unsigned short bits) {
  return __ushort_as_bfloat16(bits);
}

// One element as stored (no conversion). __ldg has no overload for the 16-bit float types on every
// toolkit: they are read as raw shorts.
template <typename T> __device__ __forceinline__ T raw_load(const T* p, int64_t idx) {
  if constexpr (sizeof(T) == 2) {
    return from_bits<T>(__ldg(reinterpret_cast<const unsigned short*>(p) + idx));
  } else {
    return __ldg(p + idx);
  }
}

// One element, converted to the accumulator type.
template <typename T> __device__ __forceinline__ auto load(const void* base, int64_t idx) {
  return to_acc(raw_load(static_cast<const T*>(base), idx));
}

// +0 of a storage type.
template <typename T> __device__ __forceinline__ T zero_value() {
  if constexpr (sizeof(T) == 2) {
    return from_bits<T>(0);
  } else {
    return T(0);
  }
}

// Weights and bias: the input's dtype, or fp32 beside fp16/bf16 input (one uniform branch).
template <typename T, typename Params>  // Conv1dParams or CausalParams
__device__ __forceinline__ auto load_param(const Params& p, const void* base, int64_t idx) {
  if constexpr (sizeof(T) == 2) {
    if (p.w_dtype == DType::kFloat32) return load<float>(base, idx);
  }
  return load<T>(base, idx);
}

// Runs `body` with param_t = the type grad-weight / grad-bias are stored in.
#define CONVKIT_DISPATCH_PARAM_TYPE(p, scalar, ...)                                         \
  if ((p).w_dtype == DType::kFloat32) { using param_t = float; __VA_ARGS__; }                \
  else { using param_t = scalar; __VA_ARGS__; }

template <typename T, typename A> __device__ __forceinline__ void store(void* base, int64_t idx, A v) {
  static_cast<T*>(base)[idx] = from_acc<T>(v);
}

// Sum over the block; every thread gets the result. `scratch` holds one value per warp.
template <typename A> __device__ __forceinline__ A block_sum(A v, A* scratch) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  A total = 0;
  for (int i = 0; i < nwarps; ++i) total += scratch[i];  // fixed order: deterministic
  return total;
}

// out[i] = sum over s of partial[s * n + i], s ascending: the second, deterministic half of every
// split reduction (grad-weight, grad-bias).
template <typename T>
__global__ void __launch_bounds__(256)
    sum_partials_kernel(const void* partials, int64_t splits, int64_t n, void* out) {
  using A = typename AccOf<T>::type;
  const A* part = static_cast<const A*>(partials);
  for (int64_t i = blockIdx.x * int64_t{256} + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * 256) {
    A v = 0;
    for (int64_t s = 0; s < splits; ++s) v += part[s * n + i];
    store<T>(out, i, v);
  }
}

// The same for a grad-weight and a grad-bias reduction in one launch (one launch fewer per backward):
// w_out[i] = sum over s of partial[s * n_w + i], then b_out[i] = sum over s of the bias partials
// partial[splits * n_w + s * n_b + i] that follow; either output may be null.
template <typename T>
__global__ void __launch_bounds__(256) sum_weight_bias_partials_kernel(const void* partials, int64_t splits, int64_t n_w,
                                                                      void* w_out, int64_t n_b, void* b_out) {
  using A = typename AccOf<T>::type;
  const A* part = static_cast<const A*>(partials);
  const int64_t first = w_out != nullptr ? 0 : n_w, end = b_out != nullptr ? n_w + n_b : n_w;
  for (int64_t i = first + blockIdx.x * int64_t{256} + threadIdx.x; i < end; i += static_cast<int64_t>(gridDim.x) * 256) {
    const bool is_w = i < n_w;
    const int64_t j = is_w ? i : i - n_w, n = is_w ? n_w : n_b;
    const A* src = part + (is_w ? 0 : splits * n_w) + j;
    A v = 0;
    for (int64_t s = 0; s < splits; ++s) v += src[s * n];
    store<T>(is_w ? w_out : b_out, j, v);
  }
}

// Grids are 1-D with a grid-stride loop over tiles, so no launch ever hits the 65535 limit of
// gridDim.y/z whatever B * C is, and a launch never asks for more blocks than can usefully run.
inline unsigned grid_for(int64_t tiles, int num_sms, int blocks_per_sm = 16) {
  int64_t cap = static_cast<int64_t>(num_sms > 0 ? num_sms : 1) * blocks_per_sm;
  int64_t g = tiles < cap ? tiles : cap;
  return static_cast<unsigned>(g > 0 ? g : 1);
}

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The input channel depthwise output channel co reads (channel multiplier Cout / Cin), without a
// division in the usual multiplier-1 case: the one-tile-per-block kernels computed Cout / Cin, a 64-bit
// division, in every block's prologue (ncu, mamba K4 forward: the prologue held ~17 % of stall samples).
__device__ __forceinline__ int64_t depthwise_in_channel(const Conv1dParams& p, int64_t co) {
  return p.out_channels == p.in_channels ? co : co / (p.out_channels / p.in_channels);
}

// Runs `body` with the scalar type named by `dt`.
#define CONVKIT_DISPATCH_DTYPE(dt, ...)                                 \
  switch (dt) {                                                         \
    case DType::kFloat32: { using scalar_t = float; __VA_ARGS__; break; } \
    case DType::kFloat16: { using scalar_t = __half; __VA_ARGS__; break; } \
    case DType::kBFloat16: { using scalar_t = __nv_bfloat16; __VA_ARGS__; break; } \
    case DType::kFloat64: { using scalar_t = double; __VA_ARGS__; break; } \
    default: return cudaErrorInvalidValue;                              \
  }

// The most splits whose fp32 partial sums (floats_per_split each) fit in ~256 MB of workspace (at least one).
inline int64_t split_cap(int64_t floats_per_split) {
  const int64_t cap = (int64_t{64} << 20) / floats_per_split;
  return cap > 1 ? cap : 1;
}

// Splits of a deterministic split reduction (grad-weight): about `want` splits, never more than the
// reduction's `chunks` units nor `cap`, and pairs * splits < 2^31 (one 1-D grid of (tile pair, split)
// blocks). Sets per_split = the units of one split; returns the number of non-empty splits.
inline int64_t plan_splits(int64_t want, int64_t chunks, int64_t cap, int64_t pairs, int64_t& per_split) {
  int64_t splits = want < chunks ? want : chunks;
  splits = splits < cap ? splits : cap;
  splits = splits > 1 ? splits : 1;
  const int64_t max_grid = (int64_t{1} << 31) - 1;
  if (pairs * splits > max_grid) splits = max_grid / pairs > 1 ? max_grid / pairs : 1;
  per_split = ceil_div(chunks, splits);
  return ceil_div(chunks, per_split);
}

// The second half of the grad-weight split reductions: the splits x n_w fp32 weight partials summed
// into w_out, then the splits x n_b bias partials that follow them into b_out (either output may be
// null), in the type of the weights: T, or fp32 beside fp16/bf16 input.
template <typename T, typename Params>  // Conv1dParams or CausalParams (its w_dtype)
cudaError_t sum_weight_bias_partials(const Params& p, const void* part, int64_t splits, int64_t n_w,
                                     int64_t n_b, void* w_out, void* b_out, cudaStream_t stream) {
  const int64_t n = (w_out != nullptr ? n_w : 0) + (b_out != nullptr ? n_b : 0);
  if (n == 0) return cudaGetLastError();
  CONVKIT_DISPATCH_PARAM_TYPE(p, T, {
    sum_weight_bias_partials_kernel<param_t><<<grid_for(ceil_div(n, 256), p.num_sms, 8), 256, 0, stream>>>(
        part, splits, n_w, w_out, n_b, b_out);
  })
  return cudaGetLastError();
}

// Whether a tensor's rows (element strides sb, sc, sl) are contiguous and start on 16-byte
// boundaries, with `ve` elements per 16 bytes: a row's whole 16-byte vectors can be loaded and stored.
__host__ __device__ inline bool rows_vec_aligned(const void* ptr, int64_t sb, int64_t sc, int64_t sl, int64_t ve) {
  return sl == 1 && sc % ve == 0 && sb % ve == 0 && reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
}

// Eight consecutive 16-bit values, packed two per word (w[i] = elements 2i, 2i + 1), to dst with the
// widest stores its alignment allows (16 / 8 / 4 / 2 bytes): y rows of odd length are not 16-byte aligned.
__device__ __forceinline__ void store8_16bit(unsigned short* dst, const uint32_t (&w)[4]) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(dst);
  if ((a & 15) == 0) {
    *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
  } else if ((a & 7) == 0) {
    reinterpret_cast<uint2*>(dst)[0] = make_uint2(w[0], w[1]);
    reinterpret_cast<uint2*>(dst)[1] = make_uint2(w[2], w[3]);
  } else if ((a & 3) == 0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) reinterpret_cast<uint32_t*>(dst)[i] = w[i];
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) dst[i] = static_cast<unsigned short>(w[i >> 1] >> ((i & 1) * 16));
  }
}

// The device's opt-in shared memory per block (cached per device; atomics because host threads can ask at once):
// 227 KB on the H100 / H200, 163 KB on the A100, 99 KB on other sm_8x parts that run the sm_80 code.
inline int smem_optin_bytes() {
  static std::atomic<int> cache[64];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 48 * 1024;
  int v = cache[dev].load(std::memory_order_relaxed);
  if (v == 0) {
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) v = 48 * 1024;
    cache[dev].store(v, std::memory_order_relaxed);
  }
  return v;
}

// Lets `kernel` launch with any dynamic shared memory that fits on the current device beside its static shared
// memory: sets its cudaFuncAttributeMaxDynamicSharedMemorySize to the opt-in limit less its static part (read from
// the kernel). The attribute belongs to the kernel (per device), not to a launch: set to each launch's own size,
// host threads launching one kernel with different sizes at once could lower it under each other's launches
// (cudaErrorInvalidValue); one value for every launch cannot. The plans keep static + dynamic within the opt-in
// limit, so every launch stays under it. Set once per kernel and device (the value never changes), so launches after
// the first make no driver call for it.
template <typename Kernel> cudaError_t allow_max_dynamic_smem(Kernel kernel) {
  static std::mutex mutex;
  static std::unordered_set<uint64_t> done;  // (kernel address, device)
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  const uint64_t key = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(kernel)) * 64 + static_cast<uint64_t>(dev & 63);
  std::lock_guard<std::mutex> lock(mutex);
  if (done.count(key)) return cudaSuccess;
  cudaFuncAttributes attr{};
  err = cudaFuncGetAttributes(&attr, kernel);
  if (err != cudaSuccess) return err;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             smem_optin_bytes() - static_cast<int>(attr.sharedSizeBytes));
  if (err == cudaSuccess) done.insert(key);
  return err;
}

// ---- cp.async (sm_80+): the depthwise pipelines and the dense forward's x ring ----------------------
// Copies `bytes` (0..16) from global to shared and zero-fills the rest of the 16 bytes.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes) : "memory");
}
// Copies `bytes` (0..4) from global to shared and zero-fills the rest of the 4 bytes (both 4-byte aligned).
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, int bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes) : "memory");
}
// Positions pos .. pos + 3 of a row of n floats (row + pos 16-byte aligned wherever the unit lies inside the row) to
// 16-byte aligned shared memory, zero outside [0, n): one 16-byte copy, a zero fill, or four 4-byte copies for a unit
// across the row's start or end. `zeros`: any valid global address (read for 0 bytes).
__device__ __forceinline__ void cp_async16_row(float* smem, const float* row, int64_t pos, int64_t n,
                                               const float* zeros) {
  if (pos >= 0 && pos + 4 <= n) {
    cp_async16(smem, row + pos, 16);
  } else if (pos >= n || pos + 4 <= 0) {
    cp_async16(smem, zeros, 0);
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const bool ok = pos + e >= 0 && pos + e < n;
      cp_async4(smem + e, ok ? row + pos + e : zeros, ok ? 4 : 0);
    }
  }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Eight 16-bit elements as one 16-byte vector (element 0 in the low half of .x).
__device__ __forceinline__ uint4 pack8(const unsigned short (&e)[8]) {
  auto two = [&](int j) { return static_cast<unsigned>(e[j]) | (static_cast<unsigned>(e[j + 1]) << 16); };
  return make_uint4(two(0), two(2), two(4), two(6));
}

}  // namespace convkit
