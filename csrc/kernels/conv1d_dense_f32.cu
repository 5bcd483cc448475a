// Dense and grouped conv1d for fp32 input and weights: grad-weight (+ grad-bias), and the forward for the shapes
// the window-staged forward (conv1d_fwd_dense_f32.cu: K > 16, windows too long for shared memory) does not take,
// as tiled implicit GEMMs. The forward (conv1d_fwd_dense_f32_im2col), per group g
//
//   out[co, n] = sum_r A[co, r] * B[r, n]          n = j (output position of one batch row b)
//   A[co, r]   = w[g*Cout_g + co, ci, k]           B[r, n] = x[b, g*Cin_g + ci, j*S + k*D - P]
//   r = ci * K + k (the weight's own order), gathered from x while a tile is loaded (no im2col buffer).
//
// Two inner products on one tile machinery (template kTF32):
//   * IEEE: FFMA, each thread an 8 x 8 register tile (the classic SGEMM layout: rows tm*4 and
//     64 + tm*4, columns tn*4 and 64 + tn*4, float4 shared loads);
//   * TF32: mma.sync.m16n8k8 (tensor cores), each warp a 64 x 32 tile; tiles are rounded to TF32
//     (cvt.rna) when they are stored to shared memory, fp32 accumulation. dispatch.cpp picks it only
//     where torch.backends.cudnn.allow_tf32 is True, as torch does for its convolutions.
// Block: 256 threads, BM 128 (co) x BN 128 (j) x BK 16 (r) per stage; global -> registers for stage
// s+1 while stage s is multiplied, two shared buffers, one barrier per stage. Every index goes
// through the tensors' element strides, so views, strided outputs (grad-input writes dx[..., rho::S]
// through this kernel) and > 2^31-element tensors need no special path. K, S, D are runtime values:
// the gather costs a few integer operations per loaded element, next to 128 FMAs per element.
// Epilogue: the accumulators go through shared memory (64 rows at a time) so that bias +
// activation + the stores run along j, coalesced.
#include <algorithm>
#include <cstdint>

#include "activation.cuh"
#include "common.cuh"
#include "launchers.h"
#include "mma_common.cuh"

namespace convkit {
namespace {
using namespace tc;

constexpr int kThreads = 256;
constexpr int kBM = 128, kBN = 128, kBK = 16;
constexpr int kPitch = kBM + 8;  // A and B rows: = 8 (mod 32) words, conflict-free TF32 fragment loads
constexpr int kStageFloats = 2 * kBK * kPitch;       // A then B
constexpr int kCPitch = kBN + 4;                     // epilogue rows
constexpr int kSmemBytes = 2 * kStageFloats * 4;     // two stages (34,816 B) >= 64 epilogue rows
static_assert(64 * kCPitch <= 2 * kStageFloats, "the epilogue half-tile must fit in the stage buffers");
constexpr int kPerThread = kBK * kBM / kThreads;     // elements of A (and of B) each thread loads: 8

struct F32Plan {
  int64_t cin_g, cout_g, red;  // red = cin_g * K
  int64_t m_tiles, j_tiles, num_tiles, stages;
};

// acc += As^T Bs for one stage (As[kBK][kPitch] over rows m, Bs[kBK][kPitch] over columns n).
// IEEE: thread (tm, tn) = (tid % 16, tid / 16) owns rows {tm*4.., 64 + tm*4..} x columns {tn*4.., 64 + tn*4..},
// acc[i * 8 + jn]. TF32: warp (wm, wn) = (warp % 2, warp / 2) owns rows wm*64 .. +64 x columns wn*32 .. +32,
// acc[(i * 4 + jn) * 4 + c] for m16 tile i, n8 tile jn and the mma's c layout.
template <bool kTF32>
__device__ __forceinline__ void multiply_stage(const float* As, const float* Bs, float* acc) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if constexpr (kTF32) {
    const int wm = warp & 1, wn = warp >> 1, lr = lane >> 2, lc = lane & 3;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 8) {
      uint32_t af[4][4], bf[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = wm * 64 + i * 16 + lr;
        af[i][0] = __float_as_uint(As[(kk + lc) * kPitch + row]);
        af[i][1] = __float_as_uint(As[(kk + lc) * kPitch + row + 8]);
        af[i][2] = __float_as_uint(As[(kk + lc + 4) * kPitch + row]);
        af[i][3] = __float_as_uint(As[(kk + lc + 4) * kPitch + row + 8]);
      }
#pragma unroll
      for (int jn = 0; jn < 4; ++jn) {
        const int col = wn * 32 + jn * 8 + lr;
        bf[jn][0] = __float_as_uint(Bs[(kk + lc) * kPitch + col]);
        bf[jn][1] = __float_as_uint(Bs[(kk + lc + 4) * kPitch + col]);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int jn = 0; jn < 4; ++jn) mma1688_tf32(&acc[(i * 4 + jn) * 4], af[i][0], af[i][1], af[i][2], af[i][3], bf[jn][0], bf[jn][1]);
    }
  } else {
    const int tm = tid & 15, tn = tid >> 4;
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      const float4 a0 = *reinterpret_cast<const float4*>(As + kk * kPitch + tm * 4);
      const float4 a1 = *reinterpret_cast<const float4*>(As + kk * kPitch + 64 + tm * 4);
      const float4 b0 = *reinterpret_cast<const float4*>(Bs + kk * kPitch + tn * 4);
      const float4 b1 = *reinterpret_cast<const float4*>(Bs + kk * kPitch + 64 + tn * 4);
      tc::ffma_8x8(acc, a0, a1, b0, b1);
    }
  }
}

// Writes rows h*64 .. h*64 + 63 of the block's accumulator tile to Cs[64][kCPitch] (no barrier).
template <bool kTF32>
__device__ __forceinline__ void stage_half(const float* acc, float* Cs, int h) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if constexpr (kTF32) {
    const int wm = warp & 1, wn = warp >> 1, lr = lane >> 2, lc = lane & 3;
    if (wm != h) return;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int jn = 0; jn < 4; ++jn) {
        const float* c = &acc[(i * 4 + jn) * 4];
        const int row = i * 16 + lr, col = wn * 32 + jn * 8 + 2 * lc;
        *reinterpret_cast<float2*>(Cs + row * kCPitch + col) = make_float2(c[0], c[1]);
        *reinterpret_cast<float2*>(Cs + (row + 8) * kCPitch + col) = make_float2(c[2], c[3]);
      }
  } else {
    const int tm = tid & 15, tn = tid >> 4;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float* c = &acc[(h * 4 + i) * 8];
      *reinterpret_cast<float4*>(Cs + (tm * 4 + i) * kCPitch + tn * 4) = make_float4(c[0], c[1], c[2], c[3]);
      *reinterpret_cast<float4*>(Cs + (tm * 4 + i) * kCPitch + 64 + tn * 4) = make_float4(c[4], c[5], c[6], c[7]);
    }
  }
}

template <bool kTF32>
__global__ void __launch_bounds__(kThreads, kTF32 ? 2 : 1)
    conv1d_fwd_dense_f32_kernel(const Conv1dParams p, const F32Plan q) {
  extern __shared__ __align__(16) float smem_f[];
  const int tid = threadIdx.x;
  const float* __restrict__ x = static_cast<const float*>(p.x);
  const float* __restrict__ w = static_cast<const float*>(p.w);
  const int64_t K = p.kernel_size, S = p.stride, D = p.dilation, P = p.pad_left;

  // Loader geometry: A element i of this thread is (r = a_r, co = a_m + 16 i); B element i is
  // (r = b_r + 2 i, j = b_n). Consecutive threads read consecutive r (A) / consecutive j (B).
  const int a_r = tid & 15, a_m = tid >> 4;
  const int b_n = tid & 127, b_r = tid >> 7;

  float acc[64];
  float ra[kPerThread], rb[kPerThread];

  for (int64_t tile = blockIdx.x; tile < q.num_tiles; tile += gridDim.x) {
    int64_t rest, mt, g, jt, b;
    divmod(tile, q.m_tiles, rest, mt);
    divmod(rest, p.groups, rest, g);
    divmod(rest, q.j_tiles, b, jt);
    const int64_t co0 = mt * kBM, j0 = jt * kBN;
    const int64_t j = j0 + b_n;
    const bool j_ok = j < p.out_length;
    const float* xb = x + b * p.x_stride_b + g * q.cin_g * p.x_stride_c;
    const float* wg = w + g * q.cout_g * p.w_stride_o;

    auto load = [&](int64_t stage) {
      const int64_t r0 = stage * kBK;
      {  // A: one r per thread
        const int64_t r = r0 + a_r;
        const int64_t ci = r / K, k = r - ci * K;
        const bool r_ok = r < q.red;
#pragma unroll
        for (int i = 0; i < kPerThread; ++i) {
          const int64_t co = co0 + a_m + 16 * i;
          ra[i] = (r_ok && co < q.cout_g) ? __ldg(wg + co * p.w_stride_o + ci * p.w_stride_i + k * p.w_stride_k) : 0.f;
        }
      }
      {  // B: the im2col gather, rows r, r + 2, ...
        int64_t r = r0 + b_r;
        int64_t ci = r / K, k = r - ci * K;
        const int64_t base = j * S - P;
#pragma unroll
        for (int i = 0; i < kPerThread; ++i) {
          const int64_t pos = base + k * D;
          rb[i] = (j_ok && r < q.red && pos >= 0 && pos < p.in_length)
                      ? __ldg(xb + ci * p.x_stride_c + pos * p.x_stride_l) : 0.f;
          r += 2;
          k += 2;
          while (k >= K) { k -= K; ++ci; }
        }
      }
    };
    auto store = [&](int buf) {
      float* As = smem_f + buf * kStageFloats;
      float* Bs = As + kBK * kPitch;
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        As[a_r * kPitch + a_m + 16 * i] = kTF32 ? to_tf32(ra[i]) : ra[i];
        Bs[(b_r + 2 * i) * kPitch + b_n] = kTF32 ? to_tf32(rb[i]) : rb[i];
      }
    };

#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;

    load(0);
    store(0);
    __syncthreads();
    for (int64_t s = 0; s < q.stages; ++s) {
      if (s + 1 < q.stages) load(s + 1);
      const float* As = smem_f + (s & 1) * kStageFloats;
      multiply_stage<kTF32>(As, As + kBK * kPitch, acc);
      if (s + 1 < q.stages) store((s + 1) & 1);
      __syncthreads();
    }

    // Epilogue, 64 rows (co0 + h*64 ...) at a time through shared memory.
    float* Cs = smem_f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      stage_half<kTF32>(acc, Cs, h);
      __syncthreads();
      if (j_ok) {
#pragma unroll 4
        for (int row = b_r; row < 64; row += 2) {
          const int64_t co = co0 + h * 64 + row;
          if (co >= q.cout_g) break;
          const int64_t c = g * q.cout_g + co;
          float v = Cs[row * kCPitch + b_n];
          if (p.bias != nullptr) v += __ldg(static_cast<const float*>(p.bias) + c);
          v = activate(p.activation, v);
          static_cast<float*>(p.y)[b * p.y_stride_b + c * p.y_stride_c + j * p.y_stride_l] = v;
        }
      }
      __syncthreads();
    }
  }
}

// Grad-weight (+ grad-bias) on the same tiles: per group g
//   dw[co, n] = sum_r A[co, r] * B[r, n]        n = ci*K + k (the weight's layout), r = (b, j)
//   A[co, r]  = dy[b, g*Cout_g + co, j]         B[r, n] = x[b, g*Cin_g + ci, j*S + k*D - P]
// A block owns a 128 (co) x 128 (n) tile and one contiguous range (its split) of the 16-output chunks
// of every row b; its sums go to the workspace and sum_partials_kernel adds the splits in a fixed
// order (deterministic). Loads: thread (kk = tid % 16, row/column (tid / 16) + 16 i): 16 consecutive j
// of one dy row or one gathered x column per 16 threads. Grad-bias: the n-tile-0 blocks add up the
// dy values they load (before any TF32 rounding) and reduce them over the 16 threads of a row.
struct WgradF32Plan {
  int64_t cin_g, cout_g, red, m_tiles, n_tiles, chunks_per_row, total_chunks, per_split, splits;
};

template <bool kTF32>
__global__ void __launch_bounds__(kThreads, 1)
    conv1d_bwd_weight_dense_f32_kernel(const Conv1dParams p, const WgradF32Plan q) {
  extern __shared__ __align__(16) float smem_f[];
  __shared__ int64_t col_x[kBN];   // ci * x_stride_c + k * D * x_stride_l of column n
  __shared__ int64_t col_kd[kBN];  // k * D; a huge negative value for a column past the reduction
  const int tid = threadIdx.x;
  const float* __restrict__ x = static_cast<const float*>(p.x);
  const float* __restrict__ dy = static_cast<const float*>(p.y);
  const int64_t S = p.stride, P = p.pad_left;

  int64_t rest, nt, mt, g, split;
  divmod(static_cast<int64_t>(blockIdx.x), q.n_tiles, rest, nt);
  divmod(rest, q.m_tiles, rest, mt);
  divmod(rest, p.groups, split, g);
  const int64_t co0 = mt * kBM, n0 = nt * kBN;
  const int64_t c_begin = split * q.per_split;
  const int64_t c_end = c_begin + q.per_split < q.total_chunks ? c_begin + q.per_split : q.total_chunks;
  const bool with_bias = p.bias != nullptr && nt == 0;

  if (tid < kBN) {
    const int64_t n = n0 + tid;
    const int64_t ci = n / p.kernel_size, k = n - ci * p.kernel_size;
    col_x[tid] = n < q.red ? ci * p.x_stride_c + k * p.dilation * p.x_stride_l : 0;
    col_kd[tid] = n < q.red ? k * p.dilation : -(int64_t{1} << 62);
  }
  __syncthreads();

  const int kk = tid & 15, rc = tid >> 4;
  const float* xg = x + g * q.cin_g * p.x_stride_c;
  const float* dyg = dy + (g * q.cout_g + co0) * p.y_stride_c;
  float acc[64], ra[kPerThread], rb[kPerThread], bsum[kPerThread];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.f;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) bsum[i] = 0.f;

  auto load = [&](int64_t chunk) {
    int64_t b, jc;
    divmod(chunk, q.chunks_per_row, b, jc);
    const int64_t j = jc * kBK + kk;
    const bool j_ok = j < p.out_length;
    const int64_t base = j * S - P;
    const float* xb = xg + b * p.x_stride_b + base * p.x_stride_l;
    const float* dyb = dyg + b * p.y_stride_b + j * p.y_stride_l;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = rc + 16 * i;
      ra[i] = (j_ok && co0 + c < q.cout_g) ? __ldg(dyb + c * p.y_stride_c) : 0.f;
      const int64_t pos = base + col_kd[c];
      rb[i] = (j_ok && pos >= 0 && pos < p.in_length) ? __ldg(xb + col_x[c]) : 0.f;
    }
  };
  auto store = [&](int buf) {
    float* As = smem_f + buf * kStageFloats;
    float* Bs = As + kBK * kPitch;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      As[kk * kPitch + rc + 16 * i] = kTF32 ? to_tf32(ra[i]) : ra[i];
      Bs[kk * kPitch + rc + 16 * i] = kTF32 ? to_tf32(rb[i]) : rb[i];
      if (with_bias) bsum[i] += ra[i];
    }
  };

  if (c_begin < c_end) {
    load(c_begin);
    store(0);
  }
  __syncthreads();
  for (int64_t c = c_begin; c < c_end; ++c) {
    const bool more = c + 1 < c_end;
    if (more) load(c + 1);
    const float* As = smem_f + ((c - c_begin) & 1) * kStageFloats;
    multiply_stage<kTF32>(As, As + kBK * kPitch, acc);
    if (more) store((c - c_begin + 1) & 1);
    __syncthreads();
  }

  float* part = static_cast<float*>(p.workspace);
  const int64_t n_weight = p.out_channels * q.red;
  if (with_bias) {  // the 16 threads of one co are 16 consecutive lanes: fixed-order butterfly
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      float v = bsum[i];
#pragma unroll
      for (int off = 1; off < 16; off <<= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
      const int64_t co = co0 + rc + 16 * i;
      if (kk == 0 && co < q.cout_g) part[q.splits * n_weight + split * p.out_channels + g * q.cout_g + co] = v;
    }
  }
  float* Cs = smem_f;
  const int n_l = tid & 127, r0 = tid >> 7;
  float* dst = part + split * n_weight + (g * q.cout_g + co0) * q.red + n0 + n_l;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    stage_half<kTF32>(acc, Cs, h);
    __syncthreads();
    if (n0 + n_l < q.red) {
#pragma unroll 4
      for (int row = r0; row < 64; row += 2) {
        if (co0 + h * 64 + row >= q.cout_g) break;
        dst[(h * 64 + row) * q.red] = Cs[row * kCPitch + n_l];
      }
    }
    __syncthreads();
  }
}

bool make_plan(const Conv1dParams& p, F32Plan& q) {
  if (p.dtype != DType::kFloat32 || p.w_dtype != DType::kFloat32 || p.groups < 1) return false;
  q.cin_g = p.in_channels / p.groups;
  q.cout_g = p.out_channels / p.groups;
  q.red = q.cin_g * p.kernel_size;
  if (q.red < 1 || q.cout_g < 1) return false;
  q.m_tiles = ceil_div(q.cout_g, kBM);
  q.j_tiles = ceil_div(p.out_length, kBN);
  q.num_tiles = p.batch * q.j_tiles * p.groups * q.m_tiles;
  q.stages = ceil_div(q.red, kBK);
  return true;
}

cudaError_t launch(const Conv1dParams& p, bool tf32, cudaStream_t stream) {
  F32Plan q;
  if (!make_plan(p, q)) return cudaErrorInvalidValue;
  if (q.num_tiles == 0 || p.out_length <= 0) return cudaSuccess;
  const unsigned grid = grid_for(q.num_tiles, p.num_sms, tf32 ? 2 : 1);  // the occupancy each variant has
  if (tf32) {
    conv1d_fwd_dense_f32_kernel<true><<<grid, kThreads, kSmemBytes, stream>>>(p, q);
  } else {
    conv1d_fwd_dense_f32_kernel<false><<<grid, kThreads, kSmemBytes, stream>>>(p, q);
  }
  return cudaGetLastError();
}


bool make_wgrad_plan(const Conv1dParams& p, WgradF32Plan& q) {
  F32Plan f;
  if (!make_plan(p, f)) return false;
  q.cin_g = f.cin_g;
  q.cout_g = f.cout_g;
  q.red = f.red;
  q.m_tiles = ceil_div(q.cout_g, kBM);
  q.n_tiles = ceil_div(q.red, kBN);
  q.chunks_per_row = ceil_div(p.out_length, kBK);
  q.total_chunks = p.batch * q.chunks_per_row;
  const int64_t pairs = p.groups * q.m_tiles * q.n_tiles;
  if (q.total_chunks == 0 || pairs >= (int64_t{1} << 31)) return false;
  // About 8 blocks per SM in all (1 resident), never more splits than chunks; workspace <= ~256 MB.
  const int64_t cap = split_cap(p.out_channels * q.red + p.out_channels);
  const int64_t want = ceil_div(int64_t{p.num_sms > 0 ? p.num_sms : 1} * 8, pairs);
  q.splits = plan_splits(want, q.total_chunks, cap, pairs, q.per_split);
  return true;
}

cudaError_t launch_wgrad(const Conv1dParams& p, bool tf32, cudaStream_t stream) {
  WgradF32Plan q;
  if (!make_wgrad_plan(p, q) || q.splits != p.weight_splits) return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(p.groups * q.m_tiles * q.n_tiles * q.splits);
  if (tf32) {
    conv1d_bwd_weight_dense_f32_kernel<true><<<grid, kThreads, kSmemBytes, stream>>>(p, q);
  } else {
    conv1d_bwd_weight_dense_f32_kernel<false><<<grid, kThreads, kSmemBytes, stream>>>(p, q);
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  // p.w / p.bias are the grad-weight / grad-bias outputs here (see conv1d_params.h).
  return sum_weight_bias_partials<float>(p, static_cast<const float*>(p.workspace), q.splits, p.out_channels * q.red,
                                         p.out_channels, p.w, p.bias, stream);
}

}  // namespace

// A reduction (Cin/groups * K) under 8 would leave most of each 16-deep stage empty; depthwise has its
// own kernels.
bool conv1d_fwd_dense_f32_supports(const Conv1dParams& p) {
  F32Plan q;
  return make_plan(p, q) && q.red >= 8 && p.groups != p.in_channels;
}

cudaError_t launch_conv1d_fwd_dense_f32_im2col(const Conv1dParams& p, bool tf32, cudaStream_t stream) {
  return launch(p, tf32, stream);
}

bool conv1d_bwd_weight_dense_f32_supports(const Conv1dParams& p) {
  WgradF32Plan q;
  return make_wgrad_plan(p, q);
}

int64_t plan_conv1d_bwd_weight_dense_f32(Conv1dParams& p) {
  WgradF32Plan q;
  if (!make_wgrad_plan(p, q)) return 0;
  p.weight_splits = q.splits;
  p.bias_splits = q.splits;
  return q.splits * (p.out_channels * q.red + p.out_channels);
}

cudaError_t launch_conv1d_bwd_weight_dense_f32(const Conv1dParams& p, cudaStream_t stream) {
  return launch_wgrad(p, false, stream);
}
cudaError_t launch_conv1d_bwd_weight_dense_tf32_tiles(const Conv1dParams& p, cudaStream_t stream) {
  return launch_wgrad(p, true, stream);
}

}  // namespace convkit
