// Dense and grouped grad-weight (+ grad-bias) on Hopper's wgmma (sm_90a), fp16/bf16 in, fp32 accumulation.
// The GEMM of conv1d_bwd_weight_dense_mma.cu, per group g:
//
//   dw[co, ci, k] = sum over r = (b, j) of dy[b, g*Cout_g + co, j] * x[b, g*Cin_g + ci, j*S + k*D - P]
//
// A block (two warpgroups, 256 threads) owns co0 .. co0 + 127 (warpgroup w: 64 rows) x ci0 .. ci0 + 63 x
// the K = 3 taps, and one contiguous range of reduction chunks (its split). A chunk is J = 64 consecutive
// outputs j of one row b. Its wgmma operands (two shared "operand" buffers: chunk c's are read while c + 1's
// are written):
//   * A = dy[co0 .., j0 .. j0 + 63] as [j / 8][128 rows][8] (K-major core matrices);
//   * B = the x window of the 64 channels that the chunk's outputs touch, the forward's layout
//     (wgmma_common.cuh: [channel group][phase-split position row][8 channels]). For tap k the outputs
//     j0 .. j0 + 63 read the consecutive rows rb[k] .. rb[k] + 63, so B of tap k (16 positions x 64 channels,
//     N-major: channels contiguous) is the same buffer at another start row; J * S is a multiple of 8, so rb
//     is the same for every chunk.
// Both come from "landing" buffers (a ring of kLand): the raw 16-byte-aligned chunks of global memory that
// cover each dy row's 64 positions and each x row's window, copied by cp.async kLand - 1 chunks ahead
// (no registers held, so the loads of two chunks are in flight while a third is computed); chunks that reach
// past a row's ends are read element by element with zeros outside (the padding), as are rows of strided
// views. A "convert" pass then realigns each row (its misalignment is stored beside the landing buffer),
// transposes x, and writes the operand buffer: shared-to-shared, while the previous chunk's wgmma run.
// Per 16-position step each warpgroup issues one m64n64k16 per tap (accumulators acc[k]: 32 fp32 per tap).
// The block's fp32 sums go to the workspace; sum_weight_bias_partials adds the splits in a fixed order (the
// same bits on every run). Grad-bias: the n-tile-0 blocks sum their dy units in the convert pass.
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
constexpr int kLand = 3;       // landing buffers (cp.async two chunks ahead of the convert)
constexpr int BM = 128;        // output channels per block (64 per warpgroup)
constexpr int CB = 64;         // input channels per block (the N of each wgmma)
constexpr int J = 64;          // outputs per chunk (four 16-deep steps)
constexpr int kTaps = 3;       // K handled (see make_plan)
constexpr int kARg = BM * 16 + 16;   // bytes between A's row groups (8 positions); +16: the unit stores of a
                                     // quarter warp (8 position groups of one row) fall on different banks
constexpr int kDyChunks = J / 8 + 1;  // landing chunks of a dy row (64 positions at any alignment)
constexpr int kDyPitch = kDyChunks * 16;
constexpr int kMisBytes = BM + CB * kTaps;  // misalignments of a landing buffer: dy rows, then (x channel, segment)

struct GwPlan {
  int k, s, d;
  wg::XWindow win;
  int x_units;   // 8 x 8 x-window units of a chunk (<= kThreads)
  int lx_seg;    // landing chunks per x segment (wls / 8 + 1)
  int lx_pitch;  // bytes per landing x row (nseg * lx_seg * 16)
  int a_bytes, op_bytes, land_bytes, smem_bytes;
  int64_t cin_g, cout_g, n_g;  // n_g = Cin_g * K (a weight row)
  int64_t m_tiles, n_tiles, chunks_per_row, total_chunks, per_split, splits;
};

#ifdef CONVKIT_WGMMA_DEVICE
template <typename T> __device__ __forceinline__ float lo_f(uint32_t w);
template <> __device__ __forceinline__ float lo_f<__half>(uint32_t w) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu)));
}
template <> __device__ __forceinline__ float lo_f<__nv_bfloat16>(uint32_t w) { return __uint_as_float(w << 16); }

__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// Eight 16-bit elements starting m (0..7) elements into the 32 bytes lo, hi, as four words.
__device__ __forceinline__ void realign8(const uint4& lo, const uint4& hi, int m, uint32_t (&out)[4]) {
  uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
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
  for (int e = 0; e < 4; ++e) out[e] = w[e];
}

__device__ __forceinline__ void cp_async_16(uint32_t dst, const unsigned short* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

// One 16-byte landing chunk: elements first .. first + 7 of a row (element stride sl) whose positions
// [0, len) start at element row0, where p0 is `first`'s position. Whole chunks inside the row go by cp.async;
// the others element by element (zero outside the row).
__device__ __forceinline__ void land_chunk(uint32_t dst, const unsigned short* base, int64_t row0, int64_t p0,
                                           int64_t sl, int64_t len) {
  if (sl == 1 && p0 >= 0 && p0 + 8 <= len) {
    cp_async_16(dst, base + row0 + p0);
    return;
  }
  uint32_t h[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) h[e] = (p0 + e >= 0 && p0 + e < len) ? __ldg(base + row0 + (p0 + e) * sl) : 0u;
  sts128(dst, h[0] | (h[1] << 16), h[2] | (h[3] << 16), h[4] | (h[5] << 16), h[6] | (h[7] << 16));
}
#endif

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    conv1d_bwd_weight_dense_wgmma_kernel(const Conv1dParams p, const GwPlan q) {
#ifndef CONVKIT_WGMMA_DEVICE
  __trap();  // (sm_90a only: see the file comment)
#else
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int rb[kTaps];
  __shared__ unsigned char lmis[kLand][kMisBytes];
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5, wgi = warp >> 2;
  const uint32_t smem0 = smem_u32(smem);
  const uint32_t land0 = smem0 + 2 * q.op_bytes;
  const unsigned short* xr = static_cast<const unsigned short*>(p.x);
  const unsigned short* dyr = static_cast<const unsigned short*>(p.y);
  const int64_t S = q.s, D = q.d, P = p.pad_left;
  const int nseg = q.win.nseg;

  // blockIdx.x = ((split * groups + g) * m_tiles + mt) * n_tiles + nt: the blocks of one split read the same
  // x and dy ranges at about the same time (shared through L2).
  int64_t rest = blockIdx.x, nt, mt, g, split;
  divmod(rest, q.n_tiles, rest, nt);
  divmod(rest, q.m_tiles, rest, mt);
  divmod(rest, p.groups, split, g);
  const int64_t c_begin = split * q.per_split;
  const int64_t n_chunks = min(c_begin + q.per_split, q.total_chunks) - c_begin;
  const int64_t co0 = mt * BM, ci0 = nt * CB;
  if (tid < kTaps) rb[tid] = wg::window_row(q.win, -P, tid, S, D);  // the same for every chunk (J * S % 8 == 0)

  // Landing copies: dy row ld_r (two threads per row: chunks ld_h, ld_h + 2, ...); x channel lx_c (four threads
  // per channel: chunks lx_h, lx_h + 4, ... of each segment).
  const int ld_r = tid >> 1, ld_h = tid & 1;
  const bool ld_ok = co0 + ld_r < q.cout_g;
  const int64_t ld_row = (g * q.cout_g + co0 + ld_r) * p.y_stride_c;
  const int lx_c = tid >> 2, lx_h = tid & 3;
  const bool lx_ok = ci0 + lx_c < q.cin_g;
  const int64_t lx_row = (g * q.cin_g + ci0 + lx_c) * p.x_stride_c;
  // landing x row of channel c: c * lx_pitch + (c / 8) * 16 (the skew puts the eight channel groups a convert
  // quarter-warp reads on different banks)
  const uint32_t lx_off = static_cast<uint32_t>(BM * kDyPitch + lx_c * q.lx_pitch + (lx_c >> 3) * 16);
  int64_t is_b = 0, is_jc = 0;  // the next chunk to land
  divmod(c_begin, q.chunks_per_row, is_b, is_jc);
  auto issue = [&](int slot) {
    const int64_t b = is_b, j0 = is_jc * J;
    if (++is_jc == q.chunks_per_row) {
      is_jc = 0;
      ++is_b;
    }
    const uint32_t lbase = land0 + slot * q.land_bytes;
    if (ld_ok) {
      const int64_t row0 = b * p.y_stride_b + ld_row;
      int m = 0;  // dy element j0 sits m elements into its 16-byte chunk
      if (p.y_stride_l == 1) m = static_cast<int>((reinterpret_cast<uintptr_t>(dyr + row0 + j0) >> 1) & 7);
      if (ld_h == 0) lmis[slot][ld_r] = static_cast<unsigned char>(m);
      const int64_t first = j0 - m;  // position of landing chunk 0
      if (p.y_stride_l == 1 && first >= 0 && first + 8 * kDyChunks <= p.out_length) {  // all inside the row
        const unsigned short* src = dyr + row0 + first;
#pragma unroll
        for (int i = ld_h; i < kDyChunks; i += 2) cp_async_16(lbase + ld_r * kDyPitch + i * 16, src + 8 * i);
      } else {
#pragma unroll
        for (int i = ld_h; i < kDyChunks; i += 2)
          land_chunk(lbase + ld_r * kDyPitch + i * 16, dyr, row0, first + 8 * i, p.y_stride_l, p.out_length);
      }
    }
    if (lx_ok) {
      const int64_t row0 = b * p.x_stride_b + lx_row;
      const int64_t start0 = j0 * S - P;
#pragma unroll 1
      for (int sg = 0; sg < nseg; ++sg) {
        const int64_t wpos = floor8(start0 + (nseg > 1 ? sg * D : 0));
        int m = 0;
        if (p.x_stride_l == 1) m = static_cast<int>((reinterpret_cast<uintptr_t>(xr + row0 + wpos) >> 1) & 7);
        if (lx_h == 0) lmis[slot][BM + lx_c * kTaps + sg] = static_cast<unsigned char>(m);
        const uint32_t dst = lbase + lx_off + sg * q.lx_seg * 16;
        const int64_t first = wpos - m;
        if (p.x_stride_l == 1 && first >= 0 && first + 8 * q.lx_seg <= p.in_length) {  // all inside the row
          const unsigned short* src = xr + row0 + first;
#pragma unroll 1
          for (int i = lx_h; i < q.lx_seg; i += 4) cp_async_16(dst + i * 16, src + 8 * i);
        } else {
#pragma unroll 1
          for (int i = lx_h; i < q.lx_seg; i += 4)
            land_chunk(dst + i * 16, xr, row0, first + 8 * i, p.x_stride_l, p.in_length);
        }
      }
    }
    cp_async_commit();
  };

  // Convert: dy unit = rows ur + 32 i (i < 4) of the tile, positions 8 * useg .. + 7; x unit = 8 channels
  // (group x_cg) x 8 positions (from x_t0 of segment x_seg).
  const int useg = tid & 7, ur = tid >> 3;
  const bool want_bias = p.bias != nullptr && nt == 0;
  float bsum[4] = {0.f, 0.f, 0.f, 0.f};
  const bool x_active = tid < q.x_units && ci0 + (tid & 7) * 8 < q.cin_g;  // (Cin_g % 8 == 0)
  const int x_cg = tid & 7, x_grp = tid >> 3;
  const int x_seg = x_grp / (q.win.wls >> 3);
  const int x_t0 = (x_grp % (q.win.wls >> 3)) * 8;
  auto convert = [&](int slot, int op) {
    const uint32_t lbase = land0 + slot * q.land_bytes;
    const uint32_t obase = smem0 + op * q.op_bytes;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = ur + 32 * i;
      uint32_t w[4] = {0u, 0u, 0u, 0u};
      if (co0 + r < q.cout_g) {
        const uint32_t src = lbase + r * kDyPitch + useg * 16;
        realign8(lds128(src), lds128(src + 16), lmis[slot][r], w);
        if (want_bias) {
#pragma unroll
          for (int e = 0; e < 4; ++e) bsum[i] += lo_f<T>(w[e]) + lo_f<T>(w[e] >> 16);
        }
      }
      sts128(obase + useg * kARg + r * 16, w[0], w[1], w[2], w[3]);
    }
    const uint32_t xdst = obase + q.a_bytes + (x_cg * q.win.cgs + x_seg * q.win.seg_rows) * 16;
    if (x_active) {
      uint32_t rx[32];
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const int ch = x_cg * 8 + c;
        const uint32_t src = lbase + BM * kDyPitch + ch * q.lx_pitch + x_cg * 16 + (x_seg * q.lx_seg + (x_t0 >> 3)) * 16;
        uint32_t w[4];
        realign8(lds128(src), lds128(src + 16), lmis[slot][BM + ch * kTaps + x_seg], w);
#pragma unroll
        for (int e = 0; e < 4; ++e) rx[4 * c + e] = w[e];
      }
      wg::store_x_unit(xdst, x_t0, q.s, q.win.wq, rx);
    } else if (tid < q.x_units) {  // a channel group past Cin_g: zeros
      const uint32_t zero[32] = {};
      wg::store_x_unit(xdst, x_t0, q.s, q.win.wq, zero);
    }
  };

  float acc[kTaps][32];
#pragma unroll
  for (int k = 0; k < kTaps; ++k)
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[k][i] = 0.f;

  auto compute = [&](int op) {  // issue operand buffer op's wgmma calls (asynchronous)
    const uint32_t a_base = smem0 + op * q.op_bytes + wgi * 64 * 16;
    const uint32_t x_base = smem0 + op * q.op_bytes + q.a_bytes;
    const uint32_t x_sbo = q.win.cgs * 16;
#pragma unroll
    for (int s = 0; s < J / 16; ++s) {
      const uint64_t da = wg::smem_desc(a_base + 2 * s * kARg, kARg, 128);
#pragma unroll
      for (int k = 0; k < kTaps; ++k)
        wg::mma_m64n64k16_t<T, 1>(acc[k], da, wg::smem_desc(x_base + (rb[k] + 16 * s) * 16, 128, x_sbo));
    }
  };

  // Prologue: chunks 0 .. kLand - 2 landing (one commit group each, empty past the split), chunk 0 converted.
#pragma unroll
  for (int i = 0; i < kLand - 1; ++i) {
    if (i < n_chunks) issue(i);
    else cp_async_commit();
  }
  cp_async_wait<kLand - 2>();
  __syncthreads();
  if (n_chunks > 0) convert(0, 0);
  wg::fence_proxy_async();
  __syncthreads();
  for (int64_t c = 0; c < n_chunks; ++c) {
    // Operand buffer c % 2 holds chunk c. Landing slot (c + kLand - 1) % kLand held chunk c - 1, converted in
    // step c - 2.
    const int op = static_cast<int>(c & 1);
    if (c + kLand - 1 < n_chunks) issue(static_cast<int>((c + kLand - 1) % kLand));
    else cp_async_commit();
#pragma unroll
    for (int k = 0; k < kTaps; ++k) wg::fence_acc(acc[k]);
    wg::fence();
    compute(op);
    wg::commit();
    if (c + 1 < n_chunks) {
      wg::wait<1>();               // chunk c - 1's calls (operand buffer op ^ 1) are done, for this warpgroup
      cp_async_wait<kLand - 2>();  // chunk c + 1 has landed (this thread's copies)
      __syncthreads();             // ... every thread's; and both warpgroups are done with op ^ 1
      convert(static_cast<int>((c + 1) % kLand), op ^ 1);
      wg::fence_proxy_async();
      __syncthreads();
    }
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
          for (int k = 0; k < kTaps; ++k) dst[ci * kTaps + k] = acc[k][4 * i + 2 * h + e];
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
      if (useg == 0 && co0 + ur + 32 * i < q.cout_g) bpart[co0 + ur + 32 * i] = v;
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
  q.op_bytes = static_cast<int>(wg::round_up(q.a_bytes + (CB / 8) * q.win.cgs * 16, 128));
  q.lx_seg = q.win.wls / 8 + 1;
  q.lx_pitch = q.win.nseg * q.lx_seg * 16;
  q.land_bytes = static_cast<int>(wg::round_up(BM * kDyPitch + CB * q.lx_pitch + (CB / 8) * 16, 128));
  q.smem_bytes = 2 * q.op_bytes + kLand * q.land_bytes;
  const int static_bytes = static_cast<int>(sizeof(int)) * kTaps + kLand * kMisBytes;
  if (q.smem_bytes + static_bytes > wg::smem_optin_bytes()) return false;
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
  const int64_t cap = split_cap(n_weight + p.out_channels);
  const int64_t want = std::max<int64_t>(1, int64_t{p.num_sms > 0 ? p.num_sms : 1} / pairs);
  q.splits = plan_splits(want, q.total_chunks, cap, pairs, q.per_split);
  return true;
#endif
}

template <typename T>
cudaError_t launch_typed(const Conv1dParams& p, const GwPlan& q, cudaStream_t stream) {
  auto kernel = conv1d_bwd_weight_dense_wgmma_kernel<T>;
  cudaError_t err = allow_max_dynamic_smem(kernel);  // (q.smem_bytes + static <= the opt-in limit: make_plan)
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
