// The last step of the dense grad-input at stride S > 1 (dispatch.cpp): its S phase kernels write whole
// rows of a buffer buf (S, B, C, Lq), Lq = ceil(Lin / S), and this interleaves them:
//
//   dx[b, c, i] = buf[i % S, b, c, i / S]          0 <= i < Lin
//
// (or, from the one-launch grad-input of CONVKIT_GI_UNIFIED=1, buf (B, S, C, Lq): buf[b, i % S, c, i / S];
// the buffer's strides are parameters).
// torch's strided copy did it (buf.permute(1, 2, 3, 0) into dx viewed as (B, C, Lq, S)). kb76's bf16
// fwd+bwd kernel times show four copy launches (1.25 + 1.95 + 1.25 + 1.95 ms) after the grad-input
// phases: most likely that copy, split for 32-bit indexing (buf has more than 2^31 elements), i.e.
// 8.6 GB read + written at ~1.3 TB/s (not yet confirmed by a trace). Here a thread builds 8 consecutive
// dx elements from the S phase rows (neighbouring threads read neighbouring phase elements, so the loads
// coalesce through L1) and writes them with 16-byte stores where dx's row allows. Any element size (2, 4, 8 bytes: the
// grad-input runs this path for every dtype), any dx strides. The default since session 11 (H200: kb76 bf16
// fwd+bwd 35.5 -> 33.0 ms); CONVKIT_GI_INTERLEAVE=torch takes torch's copy instead (dispatch.cpp).
#include <cstdint>
#include <cstring>

#include "common.cuh"
#include "launchers.h"

namespace convkit {
namespace {

constexpr int kThreads = 256;
constexpr int kRun = 8;  // dx elements per thread

template <typename E>
__global__ void __launch_bounds__(kThreads) interleave_phases_kernel(const E* __restrict__ buf, E* __restrict__ dx,
                                                                      InterleaveParams q) {
  const int64_t runs = ceil_div(q.in_length, int64_t{kRun});
  const int64_t total = q.batch * q.channels * runs;
  for (int64_t t = int64_t{blockIdx.x} * kThreads + threadIdx.x; t < total; t += int64_t{gridDim.x} * kThreads) {
    const int64_t row = t / runs;  // b * C + c
    const int64_t i0 = (t - row * runs) * kRun;
    const int64_t b = row / q.channels, c = row - b * q.channels;
    const E* src = buf + b * q.buf_stride_b + c * q.buf_stride_c;
    int64_t m = i0 / q.stride;
    int rho = static_cast<int>(i0 - m * q.stride);
    E v[kRun];
#pragma unroll
    for (int e = 0; e < kRun; ++e) {
      v[e] = i0 + e < q.in_length ? src[rho * q.buf_stride_rho + m] : E(0);
      if (++rho == q.stride) {
        rho = 0;
        ++m;
      }
    }
    E* dst = dx + b * q.dx_stride_b + c * q.dx_stride_c + i0 * q.dx_stride_l;
    const bool whole = q.dx_stride_l == 1 && i0 + kRun <= q.in_length &&
                       (reinterpret_cast<uintptr_t>(dst) & 15) == 0;
    if (whole) {
      constexpr int kPer = 16 / sizeof(E);  // elements per 16-byte store
#pragma unroll
      for (int s = 0; s < kRun / kPer; ++s) {
        uint4 w;
        memcpy(&w, &v[s * kPer], 16);
        reinterpret_cast<uint4*>(dst)[s] = w;
      }
    } else {
#pragma unroll
      for (int e = 0; e < kRun; ++e)
        if (i0 + e < q.in_length) dst[e * q.dx_stride_l] = v[e];
    }
  }
}

template <typename E>
cudaError_t launch_typed(const void* buf, void* dx, const InterleaveParams& q, cudaStream_t stream) {
  const int64_t total = q.batch * q.channels * ceil_div(q.in_length, int64_t{kRun});
  if (total == 0) return cudaSuccess;
  interleave_phases_kernel<E><<<grid_for(ceil_div(total, kThreads), q.num_sms, 8), kThreads, 0, stream>>>(
      static_cast<const E*>(buf), static_cast<E*>(dx), q);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_interleave_phases(const void* buf, void* dx, const InterleaveParams& q, int element_size,
                                     cudaStream_t stream) {
  if (q.stride < 1 || q.lq * q.stride < q.in_length) return cudaErrorInvalidValue;
  switch (element_size) {
    case 2: return launch_typed<uint16_t>(buf, dx, q, stream);
    case 4: return launch_typed<uint32_t>(buf, dx, q, stream);
    case 8: return launch_typed<uint64_t>(buf, dx, q, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace convkit
