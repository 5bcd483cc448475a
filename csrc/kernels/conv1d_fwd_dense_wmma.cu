// EXPERIMENTAL (opt-in with CONVKIT_EXPERIMENTAL_DENSE=1; correct on the H200 in the tests, 9-10x the
// generic kernel but far below torch, see benchmarks/NOTES.md): dense and
// grouped forward as an implicit GEMM on tensor cores (WMMA 16x16x16, fp16/bf16 in, fp32 accumulate).
//
//   out[co, n] = sum_r A[co, r] * B[r, n],   n = (b, j), r = (ci, k)
//   A[co, r] = w[co, ci, k]                  B[r, n] = x[b, g*Cin_g + ci, j*S + k*D - P]
//
// B is gathered straight from x while the tile is loaded (no im2col buffer). One block computes a
// 64 (co) x 64 (n) tile of one group with 4 warps, each a 32 x 32 quarter as 2 x 2 fragments.
// A first version: no double buffering and scalar gathers; issue 4 is where this gets fast.
#include <mma.h>

#include "activation.cuh"
#include "common.cuh"
#include "launchers.h"

namespace convkit {
namespace {

using namespace nvcuda;

constexpr int kBM = 64, kBN = 64, kBK = 32;
constexpr int kThreads = 128;
constexpr int kPad = 8;  // 16-byte row pad: keeps WMMA's 32-byte row alignment, spreads banks

template <typename T>
__global__ void __launch_bounds__(kThreads) conv1d_fwd_dense_wmma_kernel(const Conv1dParams p) {
  __shared__ __align__(32) T a_tile[kBM][kBK + kPad];
  __shared__ __align__(32) T b_tile[kBK][kBN + kPad];
  __shared__ __align__(32) float c_tile[kBM][kBN + 4];
  __shared__ int64_t col_x[kBN];    // b * x_stride_b, or -1 past the end
  __shared__ int64_t col_y[kBN];    // b * y_stride_b + j * y_stride_l
  __shared__ int64_t col_pos[kBN];  // j * S - P

  const int64_t cin_g = p.in_channels / p.groups;
  const int64_t cout_g = p.out_channels / p.groups;
  const int64_t R = cin_g * p.kernel_size;
  const int64_t N = p.batch * p.out_length;
  const int64_t m_tiles = ceil_div(cout_g, kBM);
  const int64_t n_tiles = ceil_div(N, kBN);
  const int64_t num_tiles = p.groups * m_tiles * n_tiles;
  const int warp = threadIdx.x / 32;
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;

  for (int64_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    int64_t rest, nt, mt, g;
    divmod(tile, n_tiles, rest, nt);
    divmod(rest, m_tiles, g, mt);
    const int64_t co0 = mt * kBM;  // within the group
    const int64_t n0 = nt * kBN;

    __syncthreads();  // previous tile done with the column tables and c_tile
    for (int c = threadIdx.x; c < kBN; c += kThreads) {
      const int64_t n = n0 + c;
      if (n < N) {
        int64_t b, j;
        divmod(n, p.out_length, b, j);
        col_x[c] = b * p.x_stride_b;
        col_y[c] = b * p.y_stride_b + j * p.y_stride_l;
        col_pos[c] = j * p.stride - p.pad_left;
      } else {
        col_x[c] = -1;
      }
    }

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) wmma::fill_fragment(acc[i][jj], 0.0f);

    for (int64_t r0 = 0; r0 < R; r0 += kBK) {
      __syncthreads();  // column tables written / previous step done with the tiles
      for (int e = threadIdx.x; e < kBM * kBK; e += kThreads) {
        const int m = e / kBK, kk = e % kBK;
        const int64_t co = co0 + m, r = r0 + kk;
        float v = 0.f;
        if (co < cout_g && r < R) {
          const int64_t ci = r / p.kernel_size, k = r - ci * p.kernel_size;
          v = load<T>(p.w, (g * cout_g + co) * p.w_stride_o + ci * p.w_stride_i + k * p.w_stride_k);
        }
        a_tile[m][kk] = from_acc<T>(v);
      }
      for (int e = threadIdx.x; e < kBK * kBN; e += kThreads) {
        const int kk = e / kBN, c = e % kBN;  // consecutive threads take consecutive columns
        const int64_t r = r0 + kk;
        float v = 0.f;
        if (r < R && col_x[c] >= 0) {
          const int64_t ci = r / p.kernel_size, k = r - ci * p.kernel_size;
          const int64_t pos = col_pos[c] + k * p.dilation;
          if (pos >= 0 && pos < p.in_length)
            v = load<T>(p.x, col_x[c] + (g * cin_g + ci) * p.x_stride_c + pos * p.x_stride_l);
        }
        b_tile[kk][c] = from_acc<T>(v);
      }
      __syncthreads();
#pragma unroll
      for (int ks = 0; ks < kBK; ks += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[2];
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &a_tile[wm + 16 * i][ks], kBK + kPad);
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) wmma::load_matrix_sync(fb[jj], &b_tile[ks][wn + 16 * jj], kBN + kPad);
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int jj = 0; jj < 2; ++jj) wmma::mma_sync(acc[i][jj], fa[i], fb[jj], acc[i][jj]);
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
        wmma::store_matrix_sync(&c_tile[wm + 16 * i][wn + 16 * jj], acc[i][jj], kBN + 4, wmma::mem_row_major);
    __syncthreads();
    for (int e = threadIdx.x; e < kBM * kBN; e += kThreads) {
      const int m = e / kBN, c = e % kBN;
      const int64_t co = co0 + m;
      if (co >= cout_g || col_x[c] < 0) continue;
      const int64_t oc = g * cout_g + co;
      float v = c_tile[m][c];
      if (p.bias != nullptr) v += load<T>(p.bias, oc);
      store<T>(p.y, col_y[c] + oc * p.y_stride_c, activate(p.activation, v));
    }
  }
}

}  // namespace

bool conv1d_fwd_dense_wmma_supports(const Conv1dParams& p) {
  return (p.dtype == DType::kFloat16 || p.dtype == DType::kBFloat16) && p.w_dtype == p.dtype;
}

cudaError_t launch_conv1d_fwd_dense_wmma(const Conv1dParams& p, cudaStream_t stream) {
  const int64_t cout_g = p.out_channels / p.groups;
  const int64_t tiles = p.groups * ceil_div(cout_g, kBM) * ceil_div(p.batch * p.out_length, kBN);
  if (tiles == 0) return cudaSuccess;
  const unsigned grid = grid_for(tiles, p.num_sms, 4);
  if (p.dtype == DType::kFloat16) {
    conv1d_fwd_dense_wmma_kernel<__half><<<grid, kThreads, 0, stream>>>(p);
  } else if (p.dtype == DType::kBFloat16) {
    conv1d_fwd_dense_wmma_kernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(p);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace convkit
