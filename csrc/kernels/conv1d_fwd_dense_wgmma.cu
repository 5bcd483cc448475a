// Dense and grouped forward on Hopper's warpgroup tensor-core instructions (wgmma.mma_async, sm_90a),
// fp16/bf16 input and weights, fp32 accumulation. The implicit GEMM of conv1d_fwd_dense_mma.cu:
//
//   out[co, n] = sum_r A[co, r] * B[r, n]          n = output position j, r = (k, ci) tap-major per stage
//   A[co, r]   = w[g*Cout_g + co, ci, k]           B[r, n] = x[b, g*Cin_g + ci, j*S + k*D - P]
//
// A block (two warpgroups, 256 threads) computes a BM x BN tile (co x j; one batch row b, one group):
// BM = 128 * MW, each warpgroup MW x 64 rows, BN = 128 * NB positions, as m64n128k16 wgmma calls whose
// operands both come from shared memory. The reduction runs in stages of CC input channels x all K taps,
// through a ring of three shared buffers:
//   * A, the stage's weights: [r / 8][BM rows][8] (16-byte rows: the "core matrices" of the no-swizzle
//     K-major layout), copied by 16-byte cp.async from the tap-major weight copy dispatch.cpp passes
//     ((Cout, K, Cin_g) in memory, x's dtype): no register round trip.
//   * B, the x window of those CC channels covering every position the BN outputs touch, as
//     [channel group of 8][position row][8 channels]: loaded 8 positions x 8 channels per thread,
//     transposed in registers (byte_perm), stored as 16-byte rows. Positions are stored phase-split
//     (row = (t % S) * Wq + t / S), so for any tap k the BN outputs read BN CONSECUTIVE 16-byte rows
//     starting at row rb[k]: the operand of tap k is the same buffer at another start address, any
//     stride and dilation. (Large dilations get one window per tap, "segments", as in the mma kernel.)
//     The channel-group stride is 1 mod 8 rows, which spreads the transposing stores over the banks.
// The wgmma calls of stage c are asynchronous: while they run, the threads issue stage c + 1's weight
// copies, store its x window (in registers since the previous step), load stage c + 2's x window into
// registers (all loads issued before the realignment uses any: one memory round trip per step), then
// wait for stage c - 1's wgmma group (never c's), so the tensor cores have the next stage queued as long
// as the staging is shorter than a stage's MMAs. Epilogue: accumulators + bias, rounded to T into a shared C
// tile (reusing the stage buffers), then 16-byte coalesced y stores, activated on the way (wg::store_c_tile).
//
// STATUS (H200, bf16, ci/dense_mma_check.cu, session 13): w2v_k3s2 4.15 ms (mma.sync kernel 11.2),
// tcn_k3_d8 0.71 (0.98), wavenet_k2_d512 0.61 (0.76): 100-150 TFLOP/s. The wgmma calls alone (staging
// left out, ci/wg_experiment.sh) ran w2v_k3s2 in 1.53 ms (410 TFLOP/s), the staging alone in 3.6 ms: the staging (weight
// copies, x loads, transposes) sets the time. Next: more stages in flight (a deeper ring, weights by TMA or
// bulk copies instead of 3072 16-byte cp.async per stage), a producer warp.
//
// Built only into sm_90a code (the kernels trap elsewhere; the host picks this path only where the
// package was built with a 9.0a architecture, CONVKIT_SM90A, and the device runs that code).
// CONVKIT_DENSE_WGMMA=0 switches it off (the mma.sync kernel runs instead).
#include <cstdint>

#include "activation.cuh"
#include "common.cuh"
#include "launchers.h"
#include "mma_common.cuh"
#include "wgmma_common.cuh"

// Timing experiments (ci/wg_experiment.sh; wrong results): 1 leaves out the wgmma calls of the main loop,
// 2 its staging (weight copies, x loads and stores after the prologue). 0 in every build of the package.
#ifndef CONVKIT_DENSE_WGMMA_EXPERIMENT
#define CONVKIT_DENSE_WGMMA_EXPERIMENT 0
#endif

namespace convkit {
namespace {
using namespace tc;

constexpr int kThreads = 256;  // two warpgroups
constexpr int kStages = 3;     // shared buffers of the stage ring
constexpr int kMaxK = 8;       // taps handled
constexpr int kMinCin = 128;   // input channels per group below which the mma.sync kernel is faster (make_plan)

struct WgPlan {
  int mw, nb;        // 64-row blocks per warpgroup (BM = 128 * mw), 128-position blocks (BN = 128 * nb)
  int bm, bn, bm_shift;
  int cc, cc_shift;  // input channels per stage (16 or 32)
  int k, s, d;
  wg::XWindow win;   // the x window of a tile's BN outputs (wgmma_common.cuh)
  int x_units;       // (cc / 8) * nseg * wls / 8 <= kThreads
  int a_rg;          // bytes between the A row groups (8 reduction elements of every row): BM * 16 + 64
  int a_bytes, stage_bytes, c_pitch, smem_bytes;
  int64_t cin_g, cout_g, chunks, m_tiles, j_tiles, num_tiles;
};

template <typename T, int MW, int NB>
__global__ void __launch_bounds__(kThreads, 1)
    conv1d_fwd_dense_wgmma_kernel(const Conv1dParams p, const WgPlan q) {
#ifndef CONVKIT_WGMMA_DEVICE
  __trap();  // (sm_90a only: see the file comment)
#else
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int rb[kMaxK];  // first x row of output 0 for each tap, this tile
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5, wgi = warp >> 2;  // wgi: this thread's warpgroup
  const unsigned short* xr = static_cast<const unsigned short*>(p.x);
  const unsigned short* wr = static_cast<const unsigned short*>(p.w);
  const int64_t S = q.s, D = q.d, P = p.pad_left;
  const uint32_t smem0 = smem_u32(smem);

  // This thread's x unit: 8 channels (channel group x_cg) x 8 positions (from x_t0 of segment x_seg).
  const int cgn = q.cc >> 3;
  const bool x_active = tid < q.x_units;
  const int x_cg = tid % cgn, x_grp = tid / cgn;
  const int x_seg = x_grp / (q.win.wls >> 3);
  const int x_t0 = (x_grp % (q.win.wls >> 3)) * 8;
  uint32_t rx[32];  // [channel][4 words of 8 positions]

  float acc[MW][NB][64];
  const int steps = q.k * q.cc / 16;  // k16 steps per stage

  for (int64_t tile = blockIdx.x; tile < q.num_tiles; tile += gridDim.x) {
    // tile = ((b * j_tiles + jt) * groups + g) * m_tiles + mt: the m tiles of one x window are neighbours.
    int64_t rest, mt, g, jt, b;
    divmod(tile, q.m_tiles, rest, mt);
    divmod(rest, p.groups, rest, g);
    divmod(rest, q.j_tiles, b, jt);
    const int64_t j0 = jt * q.bn, co0 = mt * q.bm;
    const int64_t start0 = j0 * S - P;
    if (tid < q.k) rb[tid] = wg::window_row(q.win, start0, tid, S, D);
    const int64_t pos = floor8(start0 + (q.win.nseg > 1 ? x_seg * D : 0)) + x_t0;
    const bool x_vec = p.x_stride_l == 1 && pos >= 0 && pos + 8 <= p.in_length;
    const int64_t x_row0 = b * p.x_stride_b + (g * q.cin_g + x_cg * 8) * p.x_stride_c + pos * p.x_stride_l;
    const int64_t w_row0 = (g * q.cout_g + co0) * p.w_stride_o;
    // The tile walks its chunks from chunk `rot` on (wrapping): tiles that run at the same time on other SMs
    // then read other parts of the weights, not all the same L2 lines at once.
    const int nch = static_cast<int>(q.chunks);
    const int rot = static_cast<int>(tile % nch);
    auto chunk_of = [&](int c) { return c + rot < nch ? c + rot : c + rot - nch; };

    // This thread's 8 x 8 unit of stage `chunk` into rx. All loads are issued before any is used (the
    // realignment of rows that are not 16-byte aligned waits for them), so a stage costs one memory round
    // trip, overlapped with the running wgmma calls.
    auto load_x = [&](int chunk) {
      const int64_t c_loc0 = static_cast<int64_t>(chunk) * q.cc + x_cg * 8;
      const int n_ch = x_active ? static_cast<int>(min(int64_t{8}, q.cin_g - c_loc0)) : 0;  // 8 or 0 (Cin_g % 8 == 0)
      wg::load_x_unit(xr, x_row0 + static_cast<int64_t>(chunk) * q.cc * p.x_stride_c, p.x_stride_c, p.x_stride_l,
                      pos, p.in_length, n_ch, x_vec, rx);
    };
    auto store_x = [&](int buf) {  // rx, transposed to 8 position rows of 8 channels, into stage buffer buf
      if (!x_active) return;
      wg::store_x_unit(smem0 + buf * q.stage_bytes + q.a_bytes + (x_cg * q.win.cgs + x_seg * q.win.seg_rows) * 16,
                       x_t0, q.s, q.win.wq, rx);
    };
    // Stage `chunk`'s weights into buffer buf (one commit group). Unit u: the low bit picks one of the two
    // 16-byte halves of a 32-byte sector of a weight row (so a warp's copies read whole sectors), then the row,
    // then the rest of (tap, channel group); row group rg = r / 8 lives at a_rg bytes apart (BM * 16 + 64:
    // the two halves of a sector land 4 bank groups apart, no conflict within a quarter warp).
    auto issue_a = [&](int buf, int chunk) {
      const int cu_shift = q.cc_shift - 3;  // 16-byte units per (row, tap): cc / 8 (2 or 4)
      const int per = (q.bm * q.k) << cu_shift;
      const int64_t ci_base = static_cast<int64_t>(chunk) * q.cc;
      unsigned char* const dst = smem + buf * q.stage_bytes;
#pragma unroll 1
      for (int u = tid; u < per; u += kThreads) {
        const int row = (u >> 1) & (q.bm - 1);
        const int rg = (((u >> 1) >> q.bm_shift) << 1) | (u & 1);  // = k * cc / 8 + c8
        const int k = rg >> cu_shift, c8 = rg & ((1 << cu_shift) - 1);
        const int64_t ci = ci_base + c8 * 8;
        const bool ok = co0 + row < q.cout_g && ci < q.cin_g;
        const unsigned short* src = ok ? wr + w_row0 + row * p.w_stride_o + k * p.w_stride_k + ci : wr;
        cp_async16(dst + rg * q.a_rg + row * 16, src, ok ? 16 : 0);
      }
      cp_async_commit();
    };
    auto compute = [&](int buf) {  // issue stage buf's wgmma calls (asynchronous)
      const uint32_t a_base = smem0 + buf * q.stage_bytes;
      const uint32_t x_base = a_base + q.a_bytes;
      const uint32_t a_lbo = q.a_rg, x_lbo = q.win.cgs * 16;
#pragma unroll 1
      for (int s = 0; s < steps; ++s) {
        const int k = s >> (q.cc_shift - 4);                      // tap of this k16 step
        const int cg0 = (s & ((1 << (q.cc_shift - 4)) - 1)) * 2;  // its first channel group
        const uint32_t b_addr = x_base + (cg0 * q.win.cgs + rb[k]) * 16;
#pragma unroll
        for (int mb = 0; mb < MW; ++mb) {
          const uint64_t da = wg::smem_desc(a_base + (2 * s) * q.a_rg + (wgi * MW + mb) * 64 * 16, a_lbo, 128);
#pragma unroll
          for (int nb = 0; nb < NB; ++nb)
            wg::mma_m64n128k16<T>(acc[mb][nb], da, wg::smem_desc(b_addr + nb * 128 * 16, x_lbo, 128));
        }
      }
    };

    // Prologue: stage 0 complete in buffer 0, stage 1's x in registers.
    issue_a(0, chunk_of(0));
    load_x(chunk_of(0));
    store_x(0);
    if (nch > 1) load_x(chunk_of(1));
    cp_async_wait<0>();
    wg::fence_proxy_async();
    __syncthreads();
#pragma unroll
    for (int mb = 0; mb < MW; ++mb)
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[mb][nb][i] = 0.f;

    int buf = 0;
    for (int c = 0; c < nch; ++c) {
      // Buffer buf holds stage c. Buffer nbuf was last read by stage c - 2's wgmma calls, which every
      // warpgroup waited for before the barrier that ended the previous step. rx holds stage c + 1's x.
      const int nbuf = buf + 1 == kStages ? 0 : buf + 1;
#pragma unroll
      for (int mb = 0; mb < MW; ++mb)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) wg::fence_acc(acc[mb][nb]);
      wg::fence();
      if (CONVKIT_DENSE_WGMMA_EXPERIMENT != 1) compute(buf);
      wg::commit();
      // While stage c's calls run: stage c + 1's weights and x window (buffer nbuf was freed by the barrier
      // that ended the previous step), then stage c + 2's x window into registers.
      if (CONVKIT_DENSE_WGMMA_EXPERIMENT != 2 && c + 1 < nch) {
        issue_a(nbuf, chunk_of(c + 1));
        store_x(nbuf);
      }
      if (CONVKIT_DENSE_WGMMA_EXPERIMENT != 2 && c + 2 < nch) load_x(chunk_of(c + 2));
      wg::wait<1>();  // stage c - 1's calls are done (buffer c - 1 is free after the barrier); stage c's run on
      cp_async_wait<0>();
      wg::fence_proxy_async();
      __syncthreads();
      buf = nbuf;
    }
    wg::wait<0>();
#pragma unroll
    for (int mb = 0; mb < MW; ++mb)
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) wg::fence_acc(acc[mb][nb]);
    __syncthreads();  // every warpgroup is done with the stage buffers: the C tile reuses them

    // Epilogue: bias, rounded to T, into the C tile [BM][c_pitch], then coalesced stores (the activation on the way
    // out, wg::store_c_tile).
    {
      const int rw = (warp & 3) * 16 + (lane >> 2);
#pragma unroll
      for (int mb = 0; mb < MW; ++mb) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = (wgi * MW + mb) * 64 + rw + 8 * h;
          const int64_t co = co0 + row;
          float bv = 0.f;
          if (p.bias != nullptr && co < q.cout_g) bv = load_param<T>(p, p.bias, g * q.cout_g + co);
#pragma unroll
          for (int nb = 0; nb < NB; ++nb) {
#pragma unroll
            for (int i = 0; i < 16; ++i) {
              const float v0 = acc[mb][nb][4 * i + 2 * h] + bv, v1 = acc[mb][nb][4 * i + 2 * h + 1] + bv;
              const int col = nb * 128 + 8 * i + 2 * (lane & 3);
              asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(smem0 + (row * q.c_pitch + col) * 2),
                           "r"(bits16<T>(v0) | (bits16<T>(v1) << 16)));
            }
          }
        }
      }
    }
    __syncthreads();
    wg::store_c_tile<T>(p, q.cout_g, smem0, q.c_pitch, q.bm, q.bn, tid, kThreads, b, g, co0, j0, p.activation);
    __syncthreads();  // the next tile's prologue overwrites the C tile and rb
  }
#endif
}

bool wgmma_switched_off() {
  static const bool off = env_equals("CONVKIT_DENSE_WGMMA", "0");
  return off;
}

// Fills q for p; false when this kernel cannot run p. check_weights: also require the tap-major weight
// layout the A copies need (dispatch.cpp passes such a copy when conv1d_fwd_dense_mma_stages_weights).
bool make_plan(const Conv1dParams& p, WgPlan& q, bool check_weights) {
#ifndef CONVKIT_SM90A
  (void)p; (void)q; (void)check_weights;
  return false;
#else
  if (wgmma_switched_off() || p.code_arch != 90) return false;
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) return false;
  if (p.w_dtype != p.dtype) return false;
  if (p.groups < 1 || p.in_channels % p.groups || p.out_channels % p.groups) return false;
  if (p.kernel_size < 1 || p.kernel_size > kMaxK || p.stride < 1 || p.stride > 64) return false;
  if (p.dilation < 1 || p.dilation > (1 << 20) || p.pad_left < 0) return false;
  const int64_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
  // Short reductions leave the per-tile prologue (one memory round trip before the first wgmma) and epilogue
  // unhidden: kb67 / kb76 / grouped_g8 (Cin_g 64) ran 1.0-1.35x slower than the mma.sync kernel (H200,
  // ci/dense_mma_check.cu), w2v_k3s2 (512), tcn / wavenet (256) 1.2-2.7x faster.
  // Cout_g <= 64 fills half of the 128-row tile (zero rows still cost wgmma time): kb67 / kb76's grad-input
  // phases (Cout' = Cin = 64) took their fwd+bwd from 7.06 / 32.9 ms (mma.sync) to 7.90 / 38.2 (session 14).
  if (cin_g < kMinCin || cin_g % 8 != 0 || cout_g <= 64) return false;
  if (check_weights && !(p.w_stride_i == 1 && p.w_stride_k % 8 == 0 && p.w_stride_o % 8 == 0 &&
                         (reinterpret_cast<uintptr_t>(p.w) & 15) == 0))
    return false;
  q.k = static_cast<int>(p.kernel_size);
  q.s = static_cast<int>(p.stride);
  q.d = static_cast<int>(p.dilation);
  q.cin_g = cin_g;
  q.cout_g = cout_g;
  const int limit = wg::smem_optin_bytes();
  // Shapes, preferred first: BM 128 when Cout_g <= 128 (x read once) else 256; the widest BN and CC that fit.
  q.mw = cout_g > 128 ? 2 : 1;
  const int tries[4][2] = {{2, 32}, {1, 32}, {2, 16}, {1, 16}};  // (nb, cc)
  for (const auto& tr : tries) {
    q.nb = tr[0];
    q.cc = tr[1];
    if (q.mw * q.nb > 2) continue;  // at most 128 accumulators per thread
    q.bm = 128 * q.mw;
    q.bm_shift = q.mw == 2 ? 8 : 7;
    q.bn = 128 * q.nb;
    q.cc_shift = q.cc == 32 ? 5 : 4;
    if (!wg::plan_x_window(q.bn, q.k, q.s, q.d, 4096, q.win)) continue;
    q.x_units = (q.cc / 8) * q.win.nseg * (q.win.wls / 8);
    if (q.x_units > kThreads) continue;
    const int rows = q.win.nseg * q.win.seg_rows;
    q.a_rg = q.bm * 16 + 64;
    q.a_bytes = (q.k * q.cc / 8) * q.a_rg;
    const int x_bytes = (q.cc / 8) * q.win.cgs * 16;
    q.stage_bytes = static_cast<int>(wg::round_up(q.a_bytes + x_bytes, 128));
    q.c_pitch = q.bn + 8;
    const int64_t c_bytes = static_cast<int64_t>(q.bm) * q.c_pitch * 2;
    const int64_t total = std::max<int64_t>(static_cast<int64_t>(kStages) * q.stage_bytes, c_bytes);
    if (total + static_cast<int64_t>(sizeof(int)) * kMaxK > limit) continue;  // (+ the static rb table)
    if ((rows + 16) * 16 > (1 << 18) || q.win.cgs * 16 >= (1 << 18)) continue;  // descriptor fields (14 bits of 16 B)
    q.smem_bytes = static_cast<int>(total);
    q.chunks = ceil_div(cin_g, q.cc);
    q.m_tiles = ceil_div(cout_g, q.bm);
    q.j_tiles = ceil_div(p.out_length, q.bn);
    q.num_tiles = p.batch * q.j_tiles * p.groups * q.m_tiles;
    return true;
  }
  return false;
#endif
}

template <typename T, int MW, int NB>
cudaError_t launch_variant(const Conv1dParams& p, const WgPlan& q, cudaStream_t stream) {
  auto kernel = conv1d_fwd_dense_wgmma_kernel<T, MW, NB>;
  cudaError_t err = allow_max_dynamic_smem(kernel);  // (q.smem_bytes + static <= the opt-in limit: make_plan)
  if (err != cudaSuccess) return err;
  const unsigned grid = grid_for(q.num_tiles, p.num_sms, 1);  // persistent: one block per SM
  kernel<<<grid, kThreads, q.smem_bytes, stream>>>(p, q);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_typed(const Conv1dParams& p, const WgPlan& q, cudaStream_t stream) {
  if (q.mw == 2) return launch_variant<T, 2, 1>(p, q, stream);
  if (q.nb == 2) return launch_variant<T, 1, 2>(p, q, stream);
  return launch_variant<T, 1, 1>(p, q, stream);
}

}  // namespace

bool conv1d_fwd_dense_wgmma_supports(const Conv1dParams& p, bool check_weights) {
  WgPlan q;
  return make_plan(p, q, check_weights);
}

cudaError_t launch_conv1d_fwd_dense_wgmma(const Conv1dParams& p, cudaStream_t stream) {
  WgPlan q;
  if (!make_plan(p, q, true)) return cudaErrorInvalidValue;
  if (q.num_tiles == 0 || p.out_length <= 0) return cudaSuccess;
  if (p.dtype == DType::kFloat16) return launch_typed<__half>(p, q, stream);
  return launch_typed<__nv_bfloat16>(p, q, stream);
}

}  // namespace convkit
