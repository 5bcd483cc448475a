// Dense and grouped grad-weight (+ grad-bias) on Hopper's wgmma (sm_90a), fp16/bf16 in, fp32 accumulation.
// The GEMM of conv1d_bwd_weight_dense_mma.cu, per group g:
//
//   dw[co, ci, k] = sum over r = (b, j) of dy[b, g*Cout_g + co, j] * x[b, g*Cin_g + ci, j*S + k*D - P]
//
// A block (two warpgroups, 256 threads) owns co0 .. co0 + 127 (warpgroup w: 64 rows) x ci0 .. ci0 + 63 x
// the K = 3 taps, and one contiguous range of reduction chunks (its split). A chunk is J = 64 consecutive
// outputs j of one row b; it is one stage of a ring of three shared buffers:
//   * A = dy[co0 .., j0 .. j0 + 63] as [j / 8][128 rows][8] (K-major core matrices), loaded 8 positions of a
//     row per unit (realigned in registers: dy rows are rarely 16-byte aligned);
//   * B = the x window of the 64 channels that the chunk's outputs touch, the forward's layout
//     (wgmma_common.cuh: [channel group][phase-split position row][8 channels]). For tap k the outputs
//     j0 .. j0 + 63 read the consecutive rows rb[k] .. rb[k] + 63, so B of tap k (16 positions x 64 channels,
//     N-major: channels contiguous) is the same buffer at another start row; J * S is a multiple of 8, so rb
//     is the same for every chunk.
// Per 16-position step each warpgroup issues one m64n64k16 per tap (accumulators acc[k]: 32 fp32 per tap).
// As in the forward, stage c's wgmma calls run while stage c + 1 is stored from registers and stage c + 2's
// loads are issued. The block's fp32 sums go to the workspace; sum_weight_bias_partials adds the splits in a
// fixed order (the same bits on every run). Grad-bias: the n-tile-0 blocks sum their dy units while loading.
//
// Built only into sm_90a code (the kernel traps elsewhere; the host picks it only where the package was built
// with a 9.0a architecture, CONVKIT_SM90A, and the device runs that code). CONVKIT_DENSE_WGMMA=0 switches it
// off with the wgmma forward (the mma.sync grad-weight runs instead).
#include <algorithm>
#include <cstdint>

#include "common.cuh"
#include "launchers.h"
#include "mma_common.cuh"
#include "wgmma_common.cuh"

namespace convkit {
namespace {
using namespace tc;

constexpr int kThreads = 256;  // two warpgroups
constexpr int kStages = 3;     // shared buffers of the stage ring
constexpr int BM = 128;        // output channels per block (64 per warpgroup)
constexpr int CB = 64;         // input channels per block (the N of each wgmma)
constexpr int J = 64;          // outputs per chunk (four 16-deep steps)
constexpr int kTaps = 3;  // K handled (see make_plan)
constexpr int kARg = BM * 16 + 16;  // bytes between A's row groups (8 positions); +16: the unit stores of a quarter
                                    // warp (8 positions groups of one row) fall on different banks

struct GwPlan {
  int k, s, d;
  wg::XWindow win;
  int x_units;  // 8 x 8 x-window units of a chunk (<= kThreads)
  int a_bytes, stage_bytes, smem_bytes;
  int64_t cin_g, cout_g, n_g;  // n_g = Cin_g * K (a weight row)
  int64_t m_tiles, n_tiles, chunks_per_row, total_chunks, per_split, splits;
};

#ifdef CONVKIT_WGMMA_DEVICE
template <typename T> __device__ __forceinline__ float lo_f(uint32_t w);
template <> __device__ __forceinline__ float lo_f<__half>(uint32_t w) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu)));
}
template <> __device__ __forceinline__ float lo_f<__nv_bfloat16>(uint32_t w) { return __uint_as_float(w << 16); }
#endif

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    conv1d_bwd_weight_dense_wgmma_kernel(const Conv1dParams p, const GwPlan q) {
#ifndef CONVKIT_WGMMA_DEVICE
  __trap();  // (sm_90a only: see the file comment)
#else
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int rb[kTaps];
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5, wgi = warp >> 2;
  const uint32_t smem0 = smem_u32(smem);
  const unsigned short* xr = static_cast<const unsigned short*>(p.x);
  const unsigned short* dyr = static_cast<const unsigned short*>(p.y);
  const int64_t S = q.s, D = q.d, P = p.pad_left;

  // blockIdx.x = ((split * groups + g) * m_tiles + mt) * n_tiles + nt: the blocks of one split read the same
  // x and dy ranges at about the same time (shared through L2).
  int64_t rest = blockIdx.x, nt, mt, g, split;
  divmod(rest, q.n_tiles, rest, nt);
  divmod(rest, q.m_tiles, rest, mt);
  divmod(rest, p.groups, split, g);
  const int64_t c_begin = split * q.per_split;
  const int64_t c_end = min(c_begin + q.per_split, q.total_chunks);
  const int64_t co0 = mt * BM, ci0 = nt * CB;
  if (tid < q.k) rb[tid] = wg::window_row(q.win, -P, tid, S, D);  // the same for every chunk (J * S % 8 == 0)

  // dy units: rows ur + 32 i (i < 4) of the tile, positions 8 * useg .. + 7 of the chunk.
  const int useg = tid & 7, ur = tid >> 3;
  int64_t dy_row[4];
  bool dy_ok[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t co = co0 + ur + 32 * i;
    dy_ok[i] = co < q.cout_g;
    dy_row[i] = (g * q.cout_g + co) * p.y_stride_c;
  }
  const bool want_bias = p.bias != nullptr && nt == 0;
  float bsum[4] = {0.f, 0.f, 0.f, 0.f};
  uint32_t ry[4][4];

  // x unit: 8 channels (group x_cg) x 8 positions (from x_t0 of segment x_seg).
  const bool x_active = tid < q.x_units;
  const int x_cg = tid & 7, x_grp = tid >> 3;
  const int x_seg = x_grp / (q.win.wls >> 3);
  const int x_t0 = (x_grp % (q.win.wls >> 3)) * 8;
  const int64_t x_ch = ci0 + x_cg * 8;
  const int x_nch = x_active ? static_cast<int>(min(int64_t{8}, q.cin_g - x_ch)) : 0;  // 8 or <= 0 (Cin_g % 8 == 0)
  const int64_t x_row_c = (g * q.cin_g + x_ch) * p.x_stride_c;
  uint32_t rx[32];

  // (b, jc) of the next chunk to load: one division, then stepped.
  int64_t ld_b = 0, ld_jc = 0;
  divmod(c_begin, q.chunks_per_row, ld_b, ld_jc);
  auto load = [&]() {  // the next chunk's dy and x units into registers (all loads issued before any is used)
    const int64_t b = ld_b, j0 = ld_jc * J;
    if (++ld_jc == q.chunks_per_row) {
      ld_jc = 0;
      ++ld_b;
    }
    const int64_t j = j0 + useg * 8;
    const bool vec = p.y_stride_l == 1 && j + 8 <= p.out_length;
    uint4 lo[4], hi[4];
    int mis[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const unsigned short* src = dyr + b * p.y_stride_b + dy_row[i] + j * p.y_stride_l;
      const uintptr_t addr = reinterpret_cast<uintptr_t>(src);
      mis[i] = static_cast<int>((addr & 15) >> 1);
      lo[i] = make_uint4(0u, 0u, 0u, 0u);
      hi[i] = lo[i];
      if (dy_ok[i] && vec) {
        const uint4* a = reinterpret_cast<const uint4*>(addr - 2 * mis[i]);
        lo[i] = ldg_stream(a);
        if (mis[i] != 0) hi[i] = ldg_stream(a + 1);  // both chunks hold elements of the row's range
      } else if (dy_ok[i]) {
        mis[i] = 0;
        uint32_t h[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) h[e] = j + e < p.out_length ? __ldg(src + e * p.y_stride_l) : 0u;
        lo[i] = make_uint4(h[0] | (h[1] << 16), h[2] | (h[3] << 16), h[4] | (h[5] << 16), h[6] | (h[7] << 16));
      }
    }
    const int64_t start0 = j0 * S - P;
    const int64_t pos = floor8(start0 + (q.win.nseg > 1 ? x_seg * D : 0)) + x_t0;
    const bool x_vec = p.x_stride_l == 1 && pos >= 0 && pos + 8 <= p.in_length;
    wg::load_x_unit(xr, b * p.x_stride_b + x_row_c + pos * p.x_stride_l, p.x_stride_c, p.x_stride_l, pos,
                    p.in_length, x_nch, x_vec, rx);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t w[8] = {lo[i].x, lo[i].y, lo[i].z, lo[i].w, hi[i].x, hi[i].y, hi[i].z, hi[i].w};
      const int m = mis[i];
      if (m & 4) {
#pragma unroll
        for (int e = 0; e < 6; ++e) w[e] = w[e + 2];
      }
      if (m & 2) {
#pragma unroll
        for (int e = 0; e < 5; ++e) w[e] = w[e + 1];
      }
      if (m & 1) {
#pragma unroll
        for (int e = 0; e < 4; ++e) w[e] = __byte_perm(w[e], w[e + 1], 0x5432);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        ry[i][e] = w[e];
        if (want_bias) bsum[i] += lo_f<T>(w[e]) + lo_f<T>(w[e] >> 16);
      }
    }
  };
  auto store = [&](int buf) {
    const uint32_t base = smem0 + buf * q.stage_bytes;
#pragma unroll
    for (int i = 0; i < 4; ++i) sts128(base + useg * kARg + (ur + 32 * i) * 16, ry[i][0], ry[i][1], ry[i][2], ry[i][3]);
    if (x_active)
      wg::store_x_unit(base + q.a_bytes + (x_cg * q.win.cgs + x_seg * q.win.seg_rows) * 16, x_t0, q.s, q.win.wq, rx);
  };

  float acc[kTaps][32];
#pragma unroll
  for (int k = 0; k < kTaps; ++k)
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[k][i] = 0.f;

  auto compute = [&](int buf) {  // issue stage buf's wgmma calls (asynchronous)
    const uint32_t a_base = smem0 + buf * q.stage_bytes + wgi * 64 * 16;
    const uint32_t x_base = smem0 + buf * q.stage_bytes + q.a_bytes;
    const uint32_t x_sbo = q.win.cgs * 16;
#pragma unroll
    for (int s = 0; s < J / 16; ++s) {
      const uint64_t da = wg::smem_desc(a_base + 2 * s * kARg, kARg, 128);
#pragma unroll
      for (int k = 0; k < kTaps; ++k)
        wg::mma_m64n64k16_bn<T>(acc[k], da, wg::smem_desc(x_base + (rb[k] + 16 * s) * 16, 128, x_sbo));
    }
  };

  if (c_begin < c_end) {
    load();  // chunk c_begin
    store(0);
    if (c_begin + 1 < c_end) load();
    wg::fence_proxy_async();
    __syncthreads();
  }
  int buf = 0;
  for (int64_t c = c_begin; c < c_end; ++c) {
    // Buffer buf holds chunk c; buffer nbuf was last read by chunk c - 2's calls, which every warpgroup
    // waited for before the barrier that ended the previous step. Registers hold chunk c + 1.
    const int nbuf = buf + 1 == kStages ? 0 : buf + 1;
#pragma unroll
    for (int k = 0; k < kTaps; ++k) wg::fence_acc(acc[k]);
    wg::fence();
    compute(buf);
    wg::commit();
    if (c + 1 < c_end) store(nbuf);
    if (c + 2 < c_end) load();
    wg::wait<1>();
    wg::fence_proxy_async();
    __syncthreads();
    buf = nbuf;
  }
  wg::wait<0>();
#pragma unroll
  for (int k = 0; k < kTaps; ++k) wg::fence_acc(acc[k]);

  // Partial sums of this split. Fragment of tap k: acc[k][4i + 2h + e] = (row 16 * (warp % 4) + lane / 4 + 8h,
  // column 8i + 2 * (lane % 4) + e) of the warpgroup's 64 x 64 tile.
  float* part = static_cast<float*>(p.workspace);
  const int64_t n_weight = p.out_channels * q.n_g;
  if (p.w != nullptr) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t co = co0 + wgi * 64 + (warp & 3) * 16 + (lane >> 2) + 8 * h;
      if (co >= q.cout_g) continue;
      float* dst = part + split * n_weight + (g * q.cout_g + co) * q.n_g;
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t ci = ci0 + 8 * i + 2 * (lane & 3) + e;
          if (ci >= q.cin_g) continue;
#pragma unroll
          for (int k = 0; k < kTaps; ++k)
            dst[ci * kTaps + k] = acc[k][4 * i + 2 * h + e];
        }
    }
  }
  if (want_bias) {
    // the eight threads of a dy row are lanes 8r .. 8r + 7: fixed-order butterfly
    float* bpart = part + q.splits * n_weight + split * p.out_channels + g * q.cout_g;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float v = bsum[i];
      v += __shfl_xor_sync(0xffffffffu, v, 1);
      v += __shfl_xor_sync(0xffffffffu, v, 2);
      v += __shfl_xor_sync(0xffffffffu, v, 4);
      if (useg == 0 && dy_ok[i]) bpart[co0 + ur + 32 * i] = v;
    }
  }
#endif
}

bool wgmma_switched_off() {
  static const bool off = env_equals("CONVKIT_DENSE_WGMMA", "0");
  return off;
}

bool make_plan(const Conv1dParams& p, GwPlan& q) {
#ifndef CONVKIT_SM90A
  (void)p; (void)q;
  return false;
#else
  if (wgmma_switched_off() || p.code_arch != 90) return false;
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) return false;
  if (p.groups < 1 || p.in_channels % p.groups || p.out_channels % p.groups) return false;
  // K 3 only: H200, bf16 (ci/dense_wgrad_check.cu, session 14), wgmma / mma.sync: kb76 4.80 / 9.85 ms, kb67 1.53 /
  // 3.10, w2v_k3s2 5.07 / 9.54, tcn_k3_d8 0.76 / 0.78, but wavenet_k2_d512 0.71 / 0.56: a 2-tap chunk has 2/3 of
  // the MMAs for the same staging, which (not the MMAs) sets the time.
  if (p.kernel_size != kTaps || p.stride < 1 || p.stride > 64) return false;
  if (p.dilation < 1 || p.dilation > (1 << 20) || p.pad_left < 0) return false;
  q.cin_g = p.in_channels / p.groups;
  q.cout_g = p.out_channels / p.groups;
  // Narrower tiles waste the 128 x 64 tile: Cin_g 32 and Cout_g 64 use half of it.
  if (q.cin_g < 32 || q.cin_g % 8 != 0 || q.cout_g < 64) return false;
  q.k = static_cast<int>(p.kernel_size);
  q.s = static_cast<int>(p.stride);
  q.d = static_cast<int>(p.dilation);
  if (!wg::plan_x_window(J, q.k, q.s, q.d, 2048, q.win)) return false;
  q.x_units = (CB / 8) * q.win.nseg * (q.win.wls / 8);
  if (q.x_units > kThreads) return false;
  q.a_bytes = (J / 8) * kARg;
  const int x_bytes = (CB / 8) * q.win.cgs * 16;
  q.stage_bytes = static_cast<int>(wg::round_up(q.a_bytes + x_bytes, 128));
  q.smem_bytes = kStages * q.stage_bytes;
  if (q.smem_bytes + static_cast<int>(sizeof(int)) * kTaps > wg::smem_optin_bytes()) return false;
  if (q.win.cgs * 16 >= (1 << 18)) return false;  // descriptor field (14 bits of 16 B)
  q.n_g = q.cin_g * q.k;
  q.m_tiles = ceil_div(q.cout_g, BM);
  q.n_tiles = ceil_div(q.cin_g, CB);
  q.chunks_per_row = ceil_div(p.out_length, int64_t{J});
  q.total_chunks = p.batch * q.chunks_per_row;
  const int64_t pairs = p.groups * q.m_tiles * q.n_tiles;
  if (q.total_chunks == 0 || pairs >= (int64_t{1} << 31)) return false;
  // One block per SM (a single wave) when there are fewer tile pairs than SMs; workspace <= ~256 MB.
  const int64_t n_weight = p.out_channels * q.n_g;
  const int64_t cap = std::max<int64_t>(1, (int64_t{64} << 20) / (n_weight + p.out_channels));
  const int64_t want = std::max<int64_t>(1, int64_t{p.num_sms > 0 ? p.num_sms : 1} / pairs);
  q.splits = plan_splits(want, q.total_chunks, cap, pairs, q.per_split);
  return true;
#endif
}

template <typename T>
cudaError_t launch_typed(const Conv1dParams& p, const GwPlan& q, cudaStream_t stream) {
  auto kernel = conv1d_bwd_weight_dense_wgmma_kernel<T>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, q.smem_bytes);
  if (err != cudaSuccess) return err;
  const int64_t grid = p.groups * q.m_tiles * q.n_tiles * q.splits;
  kernel<<<static_cast<unsigned>(grid), kThreads, q.smem_bytes, stream>>>(p, q);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  // p.w / p.bias are the grad-weight / grad-bias outputs here (see conv1d_params.h).
  return sum_weight_bias_partials<T>(p, p.workspace, q.splits, p.out_channels * q.n_g, p.out_channels, p.w, p.bias,
                                     stream);
}

}  // namespace

bool conv1d_bwd_weight_dense_wgmma_supports(const Conv1dParams& p) {
  GwPlan q;
  return make_plan(p, q);
}

int64_t plan_conv1d_bwd_weight_dense_wgmma(Conv1dParams& p) {
  GwPlan q;
  if (!make_plan(p, q)) return 0;
  p.weight_splits = q.splits;
  p.bias_splits = q.splits;
  return q.splits * (p.out_channels * q.n_g + p.out_channels);
}

cudaError_t launch_conv1d_bwd_weight_dense_wgmma(const Conv1dParams& p, cudaStream_t stream) {
  GwPlan q;
  if (!make_plan(p, q) || q.splits != p.weight_splits) return cudaErrorInvalidValue;
  if (p.dtype == DType::kFloat16) return launch_typed<__half>(p, q, stream);
  return launch_typed<__nv_bfloat16>(p, q, stream);
}

}  // namespace convkit
