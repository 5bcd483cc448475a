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
//
// Strides 2, 3 and 4 (session 28) take interleave_rows_kernel instead: one row (b, c) per grid row, so no thread
// divides to find its row, and a thread moves one 16-byte vector of each of the S phase rows into S consecutive
// 16-byte vectors of dx, transposed in registers (the stride is a template argument). Where the phase rows or dx's
// row are not 16-byte aligned it reads element by element and still stores 16 bytes at a time from dx's first 16-byte
// boundary; strided dx, a row's first elements before that boundary and its last piece go element by element,
// CONVKIT_GI_INTERLEAVE=elements keeps the kernel above at every stride (comparisons). The one above
// did three 64-bit divisions and eight 4-byte loads for every 8 elements (H100, TF32 kb76's fwd+bwd: 10.45 ms for
// 8.6 GB read and 8.6 GB written, ~1.6 TB/s).
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

// dx[b, c, i] = buf[b, i % S, c, i / S] for one row (b, c) per grid row (a grid-stride loop over rows past 65535).
// Where dx's row has unit stride, the first `head` elements (up to a 16-byte boundary of dx) go one by one, and then
// thread piece u writes dx elements i0 = head + u * kVec * S .. + kVec * S as S 16-byte vectors; with head 0 and
// 16-byte aligned phase rows its elements are elements m0 = u * kVec .. + kVec of each phase row (one 16-byte load
// each, transposed in registers), otherwise they are read one by one (neighbouring threads read neighbouring phase
// elements: the loads coalesce through L1). A row's last partial piece, and strided dx rows, go one by one.
// kVec = 16 / sizeof(E) elements as one 16-byte vector (2-byte elements paired into 32-bit words by shifts: with
// memcpy ptxas put a byte-wise copy of them on the stack)
template <typename E>
__device__ __forceinline__ uint4 pack16(const E* e) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (sizeof(E) == 2) w[i] = uint32_t{e[2 * i]} | uint32_t{e[2 * i + 1]} << 16;
    else if constexpr (sizeof(E) == 4) w[i] = e[i];
    else w[i] = static_cast<uint32_t>(e[i / 2] >> (32 * (i & 1)));
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}
// ... and back: e[0 .. kVec) from one 16-byte vector
template <typename E>
__device__ __forceinline__ void unpack16(const uint4& v, E* e) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 16 / static_cast<int>(sizeof(E)); ++j) {
    if constexpr (sizeof(E) == 2) e[j] = static_cast<E>(w[j / 2] >> (16 * (j & 1)));
    else if constexpr (sizeof(E) == 4) e[j] = w[j];
    else e[j] = E{w[2 * j]} | E{w[2 * j + 1]} << 32;
  }
}

template <typename E, int S>
__global__ void __launch_bounds__(kThreads) interleave_rows_kernel(const E* __restrict__ buf, E* __restrict__ dx,
                                                                    InterleaveParams q) {
  constexpr int kVec = 16 / sizeof(E), kPiece = kVec * S;
  const int64_t rows = q.batch * q.channels;
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const int64_t b = row / q.channels, c = row - b * q.channels;
    const E* src = buf + b * q.buf_stride_b + c * q.buf_stride_c;
    E* dst = dx + b * q.dx_stride_b + c * q.dx_stride_c;
    const auto element = [&](int64_t i) { dst[i * q.dx_stride_l] = src[(i % S) * q.buf_stride_rho + i / S]; };
    const bool unit = q.dx_stride_l == 1;
    int64_t head = unit ? ((16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15) / sizeof(E) : 0;
    if (head > q.in_length) head = q.in_length;
    if (blockIdx.x == 0 && threadIdx.x < head) element(threadIdx.x);
    // head 0, every phase row of this (b, c) on a 16-byte boundary: vector loads
    const bool vec_src = head == 0 && q.buf_stride_rho % kVec == 0 && (reinterpret_cast<uintptr_t>(src) & 15) == 0;
    const int64_t pieces = ceil_div(q.in_length - head, int64_t{kPiece});
    for (int64_t u = int64_t{blockIdx.x} * kThreads + threadIdx.x; u < pieces; u += int64_t{gridDim.x} * kThreads) {
      const int64_t i0 = head + u * kPiece;
      if (!unit || i0 + kPiece > q.in_length) {
#pragma unroll 1
        for (int64_t i = i0; i < i0 + kPiece && i < q.in_length; ++i) element(i);
        continue;
      }
      E out[kPiece];
      if (vec_src) {
        const int64_t m0 = u * kVec;
#pragma unroll
        for (int r = 0; r < S; ++r) {  // element j of phase row r is dx element j * S + r of the piece
          E ph[kVec];
          unpack16(__ldg(reinterpret_cast<const uint4*>(src + r * q.buf_stride_rho + m0)), ph);
#pragma unroll
          for (int j = 0; j < kVec; ++j) out[j * S + r] = ph[j];
        }
      } else {
        const int64_t m = i0 / S;
        const int rho0 = static_cast<int>(i0 - m * S);
        const E* sp = src + m;
#pragma unroll
        for (int e = 0; e < kPiece; ++e) {  // dx element i0 + e: phase (rho0 + e) % S, element m + (rho0 + e) / S
          const int r = rho0 + e;
          out[e] = sp[(r % S) * q.buf_stride_rho + r / S];
        }
      }
      uint4* d4 = reinterpret_cast<uint4*>(dst + i0);
#pragma unroll
      for (int t = 0; t < S; ++t) d4[t] = pack16(&out[t * kVec]);
    }
  }
}

template <typename E, int S>
cudaError_t launch_rows(const void* buf, void* dx, const InterleaveParams& q, cudaStream_t stream) {
  const int64_t rows = q.batch * q.channels, pieces = ceil_div(q.in_length, int64_t{16 / sizeof(E)} * S) + 1;
  const dim3 grid(static_cast<unsigned>(ceil_div(pieces, kThreads)),
                  static_cast<unsigned>(rows < 65535 ? rows : 65535));
  interleave_rows_kernel<E, S><<<grid, kThreads, 0, stream>>>(static_cast<const E*>(buf), static_cast<E*>(dx), q);
  return cudaGetLastError();
}

template <typename E>
cudaError_t launch_typed(const void* buf, void* dx, const InterleaveParams& q, cudaStream_t stream) {
  const int64_t total = q.batch * q.channels * ceil_div(q.in_length, int64_t{kRun});
  if (total == 0) return cudaSuccess;
  // CONVKIT_GI_INTERLEAVE=elements: interleave_phases_kernel at every stride (for comparisons; read once)
  static const bool elements = env_equals("CONVKIT_GI_INTERLEAVE", "elements");
  switch (elements ? 0 : q.stride) {
    case 2: return launch_rows<E, 2>(buf, dx, q, stream);
    case 3: return launch_rows<E, 3>(buf, dx, q, stream);
    case 4: return launch_rows<E, 4>(buf, dx, q, stream);
    default: break;
  }
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
