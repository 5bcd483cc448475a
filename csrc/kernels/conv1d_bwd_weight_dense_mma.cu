// Dense and grouped grad-weight (fp16/bf16 in, fp32 accumulate) as a GEMM on tensor cores
// (mma.sync.m16n8k16 + ldmatrix, helpers in mma_common.cuh). Per group g:
//
//   dw[co, n] = sum_r A[co, r] * B[r, n]        n = ci*K + k (the weight's own layout), r = (b, j)
//   A[co, r]  = dy[b, g*Cout_g + co, j]         B[r, n] = x[b, g*Cin_g + ci, j*S + k*D - P]
//
// The reduction runs over every (b, j): chunks of kChunk consecutive outputs j of one row b. A block
// owns a BM x BN tile of (co, n) and one contiguous range of chunks (its split); its fp32 sums go to
// the workspace and sum_partials_kernel adds the splits in a fixed order, so grad-weight is the same
// bits on every run. Grad-bias (the sum of dy over r) is taken from the A tiles of the n-tile-0 blocks.
//
// Per chunk: A = dy[co0 .. +BM][j0 .. +kChunk] and B = [n][j] (the x gather, j contiguous: for stride 1
// a shifted copy of x row ci per tap k) go to shared memory as 16-bit rows of kChunk + 8 elements
// (80- or 144-byte pitch: conflict-free ldmatrix), so both fragments are plain ldmatrix.x4. The next chunk's global
// loads are issued into registers before the current chunk's MMAs (two shared buffers, one barrier
// per chunk). Loads: 8 consecutive elements per thread (two 16-byte loads realigned in registers when
// the row is not 16-byte aligned), scalar with bounds at row ends, for stride > 1 and strided views.
//
// Block 256 threads = 8 warps as 4 (co) x 2 (n), warp tile 32 x 32, block tile 128 x 64.
#include <algorithm>
#include <cstdint>

#include "common.cuh"
#include "launchers.h"
#include "mma_common.cuh"

namespace convkit {
namespace {
using namespace tc;

constexpr int kThreads = 256;
constexpr int BM = 128, BN = 64;

// Shared bytes of a block: two buffers of BM + BN rows of kChunk + 8 elements.
constexpr int smem_bytes(int chunk) { return 2 * (BM + BN) * (chunk + 8) * 2; }

struct WgradPlan {
  int64_t cin_g, cout_g, n_g;  // n_g = cin_g * K columns per group
  int chunk;                   // kChunk: 64, or 32 with CONVKIT_WGRAD_CHUNK=32
  int64_t m_tiles, n_tiles, chunks_per_row, total_chunks, per_split, splits;
};

// Eight 16-bit elements at positions pos, pos + step, ... of a row (element stride sl, length len),
// zero outside [0, len) and for a row that does not exist.
__device__ __forceinline__ void load8(const unsigned short* base, int64_t row, int64_t pos, int64_t step, int64_t sl,
                                      int64_t len, bool row_ok, uint32_t (&out)[4]) {
  if (row_ok && step * sl == 1 && pos >= 0 && pos + 8 <= len) {
    load8_contig(base, row + pos, out);
    return;
  }
  uint32_t h[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int64_t pp = pos + e * step;
    h[e] = (row_ok && pp >= 0 && pp < len) ? __ldg(base + row + pp * sl) : 0u;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) out[e] = h[2 * e] | (h[2 * e + 1] << 16);
}

template <typename T> __device__ __forceinline__ float lo_f(uint32_t w);
template <> __device__ __forceinline__ float lo_f<__half>(uint32_t w) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu)));
}
template <> __device__ __forceinline__ float lo_f<__nv_bfloat16>(uint32_t w) { return __uint_as_float(w << 16); }

// kChunk outputs j per chunk (one barrier and 16 * kChunk / 32 MMAs per warp): each loader thread takes
// kChunk / 32 runs of 8 positions of its rows.
template <typename T, int kChunk>
__global__ void __launch_bounds__(kThreads, 2)
    conv1d_bwd_weight_dense_mma_kernel(const Conv1dParams p, const WgradPlan q) {
  constexpr int kPitch = kChunk + 8, kRuns = kChunk / 32;
  extern __shared__ __align__(16) unsigned short wgrad_smem[];
  unsigned short* const As = wgrad_smem;                    // [2][BM * kPitch]
  unsigned short* const Bs = wgrad_smem + 2 * BM * kPitch;  // [2][BN * kPitch]
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp % 4, wn = warp / 4;

  // blockIdx.x = ((split * groups + g) * m_tiles + mt) * n_tiles + nt: the blocks of one split (same
  // x and dy ranges) are neighbours, so they share those reads through L2.
  int64_t rest = blockIdx.x, nt, mt, g, split;
  divmod(rest, q.n_tiles, rest, nt);
  divmod(rest, q.m_tiles, rest, mt);
  divmod(rest, p.groups, split, g);
  const int64_t c_begin = split * q.per_split;
  const int64_t c_end = min(c_begin + q.per_split, q.total_chunks);

  const unsigned short* dy = static_cast<const unsigned short*>(p.y);
  const unsigned short* x = static_cast<const unsigned short*>(p.x);
  const int seg = tid % 4, lrow = tid / 4;  // loader: 8 positions (segment) of row lrow (and lrow + 64 for A)
  const int64_t co_a = mt * BM + lrow;      // A rows co_a and co_a + 64
  const bool a_ok0 = co_a < q.cout_g, a_ok1 = co_a + 64 < q.cout_g;
  const int64_t a_row0 = (g * q.cout_g + co_a) * p.y_stride_c, a_row1 = a_row0 + 64 * p.y_stride_c;
  const int64_t n_b = nt * BN + lrow;       // B row (column n of the GEMM)
  const bool b_ok = n_b < q.n_g;
  const int64_t ci = n_b / p.kernel_size, k = n_b - ci * p.kernel_size;
  const int64_t b_row = (g * q.cin_g + ci) * p.x_stride_c;
  const int64_t b_shift = k * p.dilation - p.pad_left;
  const bool want_bias = p.bias != nullptr && nt == 0;

  uint32_t ra0[kRuns][4], ra1[kRuns][4], rb[kRuns][4];
  float bsum0 = 0.f, bsum1 = 0.f;
  // (b, jc) of the chunk to load next: one division at the start, then stepped (the 64-bit divmod per
  // chunk was ~40 instructions per thread against 16 MMAs per warp).
  int64_t ld_b = 0, ld_jc = 0;
  divmod(c_begin, q.chunks_per_row, ld_b, ld_jc);
  auto load = [&]() {
    const int64_t b = ld_b, jc = ld_jc;
    if (++ld_jc == q.chunks_per_row) {
      ld_jc = 0;
      ++ld_b;
    }
#pragma unroll
    for (int u = 0; u < kRuns; ++u) {
      const int64_t j = jc * kChunk + u * 32 + seg * 8;
      load8(dy, b * p.y_stride_b + a_row0, j, 1, p.y_stride_l, p.out_length, a_ok0, ra0[u]);
      load8(dy, b * p.y_stride_b + a_row1, j, 1, p.y_stride_l, p.out_length, a_ok1, ra1[u]);
      load8(x, b * p.x_stride_b + b_row, j * p.stride + b_shift, p.stride, p.x_stride_l, p.in_length, b_ok, rb[u]);
      if (want_bias) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          bsum0 += lo_f<T>(ra0[u][e]) + lo_f<T>(ra0[u][e] >> 16);
          bsum1 += lo_f<T>(ra1[u][e]) + lo_f<T>(ra1[u][e] >> 16);
        }
      }
    }
  };
  auto store = [&](int buf) {
    unsigned short* const as = As + buf * BM * kPitch;
    unsigned short* const bs = Bs + buf * BN * kPitch;
#pragma unroll
    for (int u = 0; u < kRuns; ++u) {
      const int c = u * 32 + seg * 8;
      sts128(smem_u32(&as[lrow * kPitch + c]), ra0[u][0], ra0[u][1], ra0[u][2], ra0[u][3]);
      sts128(smem_u32(&as[(lrow + 64) * kPitch + c]), ra1[u][0], ra1[u][1], ra1[u][2], ra1[u][3]);
      sts128(smem_u32(&bs[lrow * kPitch + c]), rb[u][0], rb[u][1], rb[u][2], rb[u][3]);
    }
  };

  float acc[2][4][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;

  // ldmatrix.x4 lane addresses (element offsets in a buffer, before the 16-column k step):
  //   A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) = a0..a3
  //   B: matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) = b0, b1 of two n8 tiles
  const int a_off = (wm * 32 + (lane % 8) + ((lane / 8) % 2) * 8) * kPitch + (lane / 16) * 8;
  const int b_off = (wn * 32 + (lane % 8) + (lane / 16) * 8) * kPitch + ((lane / 8) % 2) * 8;

  if (c_begin < c_end) {
    load();  // chunk c_begin
    store(0);
  }
  __syncthreads();
  for (int64_t c = c_begin; c < c_end; ++c) {
    const int buf = static_cast<int>((c - c_begin) & 1);
    const bool more = c + 1 < c_end;
    if (more) load();  // chunk c + 1
    const uint32_t a_s = smem_u32(As + buf * BM * kPitch), b_s = smem_u32(Bs + buf * BN * kPitch);
#pragma unroll
    for (int ks = 0; ks < kChunk / 16; ++ks) {
      uint32_t a[2][4], bf[4][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
        ldsm_x4(a_s + 2 * (a_off + mi * 16 * kPitch + ks * 16), a[mi][0], a[mi][1], a[mi][2], a[mi][3]);
#pragma unroll
      for (int nj = 0; nj < 2; ++nj)
        ldsm_x4(b_s + 2 * (b_off + nj * 16 * kPitch + ks * 16), bf[2 * nj][0], bf[2 * nj][1], bf[2 * nj + 1][0],
                bf[2 * nj + 1][1]);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma16816<T>(acc[mi][ni], a[mi], bf[ni][0], bf[ni][1]);
    }
    if (more) store(buf ^ 1);
    __syncthreads();
  }

  // Partial sums of this split: fragment c0, c1 = (row lane/4, columns 2*(lane%4), +1), c2, c3 = row + 8.
  float* part = static_cast<float*>(p.workspace);
  const int64_t n_weight = p.out_channels * q.n_g;
  if (p.w != nullptr) {
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t co = mt * BM + wm * 32 + mi * 16 + lane / 4 + h * 8;
        if (co >= q.cout_g) continue;
        float* dst = part + split * n_weight + (g * q.cout_g + co) * q.n_g;
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          const int64_t n = nt * BN + wn * 32 + ni * 8 + 2 * (lane % 4);
          if (n < q.n_g) dst[n] = acc[mi][ni][2 * h];
          if (n + 1 < q.n_g) dst[n + 1] = acc[mi][ni][2 * h + 1];
        }
      }
  }
  if (want_bias) {
    // the four threads of a loader row are lanes 4r .. 4r+3: fixed-order butterfly
    bsum0 += __shfl_xor_sync(0xffffffffu, bsum0, 1);
    bsum0 += __shfl_xor_sync(0xffffffffu, bsum0, 2);
    bsum1 += __shfl_xor_sync(0xffffffffu, bsum1, 1);
    bsum1 += __shfl_xor_sync(0xffffffffu, bsum1, 2);
    float* bpart = part + q.splits * n_weight + split * p.out_channels + g * q.cout_g;
    if (seg == 0 && a_ok0) bpart[co_a] = bsum0;
    if (seg == 0 && a_ok1) bpart[co_a + 64] = bsum1;
  }
}

// 64-output chunks unless CONVKIT_WGRAD_CHUNK=32 (read once). H200, bf16 fwd+bwd with 64 vs 32 (session
// 9, same build): kb76 35.5 vs 36.5 ms, w2v_k3s2 40.0 vs 41.3, grouped_g8 1.76 vs 1.83, kb67 / tcn /
// wavenet within 1 %. (The 64 kernel spills 28 bytes at the 128-register cap of two blocks per SM.)
bool wgrad_chunk64() {
  static const bool off = env_equals("CONVKIT_WGRAD_CHUNK", "32");
  return !off;
}

bool make_plan(const Conv1dParams& p, WgradPlan& q) {
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) return false;
  if (p.groups < 1 || p.in_channels % p.groups || p.out_channels % p.groups || p.kernel_size < 1) return false;
  q.cin_g = p.in_channels / p.groups;
  q.cout_g = p.out_channels / p.groups;
  q.n_g = q.cin_g * p.kernel_size;
  q.m_tiles = ceil_div(q.cout_g, BM);
  q.n_tiles = ceil_div(q.n_g, BN);
  q.chunk = wgrad_chunk64() ? 64 : 32;
  q.chunks_per_row = ceil_div(p.out_length, int64_t{q.chunk});
  q.total_chunks = p.batch * q.chunks_per_row;
  const int64_t pairs = p.groups * q.m_tiles * q.n_tiles;
  if (q.total_chunks == 0 || pairs >= (int64_t{1} << 31)) return false;
  // About 8 blocks per SM in all (2 resident), never more splits than chunks; workspace <= ~256 MB.
  const int64_t n_weight = p.out_channels * q.n_g;
  const int64_t cap = split_cap(n_weight + p.out_channels);
  const int64_t want = ceil_div(int64_t{p.num_sms > 0 ? p.num_sms : 1} * 8, pairs);
  q.splits = plan_splits(want, q.total_chunks, cap, pairs, q.per_split);
  return true;
}

template <typename T, int kChunk>
cudaError_t launch_chunk(const Conv1dParams& p, const WgradPlan& q, int64_t grid, cudaStream_t stream) {
  auto kernel = conv1d_bwd_weight_dense_mma_kernel<T, kChunk>;
  constexpr int bytes = smem_bytes(kChunk);
  cudaError_t err = allow_max_dynamic_smem(kernel);  // (bytes: 55 KB or 30 KB, no static shared memory)
  if (err != cudaSuccess) return err;
  kernel<<<static_cast<unsigned>(grid), kThreads, bytes, stream>>>(p, q);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_typed(const Conv1dParams& p, const WgradPlan& q, int64_t grid, cudaStream_t stream) {
  return q.chunk == 64 ? launch_chunk<T, 64>(p, q, grid, stream) : launch_chunk<T, 32>(p, q, grid, stream);
}

}  // namespace

bool conv1d_bwd_weight_dense_mma_supports(const Conv1dParams& p) {
  WgradPlan q;
  return make_plan(p, q);
}

int64_t plan_conv1d_bwd_weight_dense_mma(Conv1dParams& p) {
  WgradPlan q;
  if (!make_plan(p, q)) return 0;
  p.weight_splits = q.splits;
  p.bias_splits = q.splits;
  return q.splits * (p.out_channels * q.n_g + p.out_channels);
}

cudaError_t launch_conv1d_bwd_weight_dense_mma(const Conv1dParams& p, cudaStream_t stream) {
  WgradPlan q;
  if (!make_plan(p, q) || q.splits != p.weight_splits) return cudaErrorInvalidValue;
  const int64_t grid = p.groups * q.m_tiles * q.n_tiles * q.splits;
  cudaError_t err = p.dtype == DType::kFloat16 ? launch_typed<__half>(p, q, grid, stream)
                                               : launch_typed<__nv_bfloat16>(p, q, grid, stream);
  if (err != cudaSuccess) return err;
  // p.w / p.bias are the grad-weight / grad-bias outputs here (see conv1d_params.h).
  const float* part = static_cast<const float*>(p.workspace);
  const int64_t n_weight = p.out_channels * q.n_g;
  if (p.dtype == DType::kFloat16)
    return sum_weight_bias_partials<__half>(p, part, q.splits, n_weight, p.out_channels, p.w, p.bias, stream);
  return sum_weight_bias_partials<__nv_bfloat16>(p, part, q.splits, n_weight, p.out_channels, p.w, p.bias, stream);
}

}  // namespace convkit
