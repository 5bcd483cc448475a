// Dense and grouped grad-input of a stride S = 2..4 convolution in ONE pass, on wgmma with every operand brought
// in by TMA, sm_90a, fp16/bf16, fp32 accumulation (session 23). dispatch.cpp (dense_grad_input_fused) runs it where
// conv1d_bwd_input_dense_tma_supports(p) holds and Cin/groups >= 32; CONVKIT_GI_FUSED=0 switches it off (then the
// stride phases run one by one as forward convolutions and an interleave kernel merges them, as before).
//
// Why: dx[b, ci, i] = sum over co, k of w[co, ci, k] * dy[b, co, j] with i = j * S + k * D - P. Output i of phase
// rho = i mod S only meets the taps k with (k * D - P) mod S = rho, at dy position j = i / S + o_k with
// o_k = (rho + P - k * D) / S (exact). The earlier path ran one forward convolution per phase, each reading all of
// dy, into a (S, B, Cin, L / S) buffer that a fourth kernel interleaved into dx (kb76, H100, bf16: 3 x 4.45 ms +
// 4.1 ms). Here a block computes all S phases of one tile, so dy is read once and dx written once, in place:
//   * dy in channels-last memory ((B, L, C) storage; the launcher copies a (B, C, L) dy there first, a slab of
//     batches at a time, with the forward's x_to_channels_last kernel), by TMA as rows of XR bytes (XR / 2
//     channels at one position, 64- or 32-byte swizzled, as the forward's x): a window of the dy positions
//     j0 + o_min .. j0 + BNJ - 1 + o_max, where the tile's outputs are dx positions S * j0 .. S * (j0 + BNJ) - 1.
//   * For tap k (of phase rho_k), the B operand of output column m is window row o_k - o_min + m: BNJ consecutive
//     rows, a K-major descriptor at that row (as the forward's taps).
//   * The weights, transposed (rows = input channels, reduction = output channels), packed once per call into the
//     shared-memory image of each stage (tma::pack_weights_kernel), one bulk copy per stage.
// Stride 1 (session 35, CONVKIT_GI_FUSED_S1=1 only, opt-in): one phase whose taps all read the one window, i.e. the
// forward convolution of dy by the transposed weights, with the 64-row tiles that the TMA forward lacks (kb67's
// grad-input has Cin 64 output rows: the mma.sync forward, 1.94 ms on the H100). Session 36, H100, bf16, CUDA graphs:
// kb67 fwd+bwd 4.83 -> 4.42 ms, tcn 1.19 / 1.21.
//   * Each consumer warpgroup holds one accumulator per phase, 64 rows x NW columns (NW = 128 for S <= 2, else 64:
//     at most 128 registers); the taps of phase rho accumulate into acc[rho]. Cin/groups <= 64: both warpgroups
//     take the same 64 rows and NW columns each (BM 64, BNJ = 2 NW); else 64 rows each (BM 128, BNJ = NW).
//   * Epilogue: the phases interleave in the warpgroup's band of shared memory (dx position S * m + rho of the
//     band), then coalesced 16-byte stores of whole dx rows (wg::store_c_tile).
// A producer warp issues the copies through a ring of stages (full / empty mbarriers), persistent blocks, as in
// conv1d_fwd_dense_tma.cu.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/common.cuh"
#include "kernels/launchers.h"
#include "kernels/mma_common.cuh"
#include "kernels/tma_common.cuh"
#include "kernels/wgmma_common.cuh"

#pragma nv_diag_suppress 177

namespace convkit {
namespace {
using namespace tc;
using namespace tma;

constexpr int kThreads = 256;                 // two consumer warpgroups
constexpr int kBlockThreads = kThreads + 32;  // and the producer warp
constexpr int kMaxTaps = 16;
constexpr int kMaxPhases = 4;
constexpr int kBandBytes = 64 * (128 + 8) * 2;  // one warpgroup's epilogue band, the largest (S 2 and 4)

struct GiPlan {
  int s, k;                       // stride (phases), taps
  int split_n;                    // 1: BM 64, warpgroup wgi takes columns wgi * NW; 0: BM 128, rows wgi * 64
  int bm, bnj;                    // tile: bm input channels x bnj positions per phase (s * bnj dx positions)
  int xr, cc;                     // bytes per dy row in shared memory (64 or 32); output channels per stage (xr / 2)
  int o_min;                      // the smallest dy offset of a tap
  int wq, piece_rows, npieces;    // window rows (dy positions j0 + o_min + row), rows per TMA load
  int a_bytes, x_bytes, stage_bytes, ns, c_off, bar_off, smem_bytes;
  int ph_first[kMaxPhases + 1];   // the taps of phase rho: slots ph_first[rho] .. ph_first[rho + 1] - 1
  int slot_tap[kMaxTaps];         // the weight tap of a slot
  int slot_row[kMaxTaps];         // the window row of its output column 0: o_k - o_min
  int64_t cin_g, cout_g, chunks, m_tiles, j_tiles, num_tiles;
};

template <typename T, int NW>
__device__ __forceinline__ void mma_phase(float (&d)[NW / 2], uint64_t da, uint64_t db) {
  if constexpr (NW == 128) {
    wg::mma_m64n128k16<T>(d, da, db);
  } else {
    wg::mma_m64n64k16_t<T, 0>(d, da, db);
  }
}

// p: the dx view (y = dx with dx's strides, out_length = Lin, out_channels = Cin, batch = this launch's batches).
template <typename T, int S, int XR>
__global__ void __launch_bounds__(kBlockThreads, 1)
    conv1d_bwd_input_dense_tma_kernel(const __grid_constant__ CUtensorMap dymap, const Conv1dParams p, const GiPlan q,
                                      const unsigned short* __restrict__ wpack) {
#ifndef CONVKIT_WGMMA_DEVICE
  __trap();  // sm_90a only
#else
  constexpr int NW = S <= 2 ? 128 : 64;  // columns per phase and warpgroup
  constexpr int kSteps = XR / 32;        // k16 steps per tap and stage (cc / 16)
  constexpr uint64_t kSwizzleMode = XR == 64 ? 2 : 3;
  extern __shared__ unsigned char smem_raw[];
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5, wgi = warp >> 2;
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;  // swizzled TMA destinations: 1024-byte aligned
  const uint32_t bar0 = base + q.bar_off;
  const int nch = static_cast<int>(q.chunks);
  const int64_t my_tiles = block_tiles(q.num_tiles);
  const int64_t total = my_tiles * nch;

  auto tile_coords = [&](int64_t tile, int64_t& b, int64_t& g, int64_t& jt, int64_t& mt) {
    tma::tile_coords(tile, q.m_tiles, p.groups, q.j_tiles, b, g, jt, mt);
  };

  // Stage sidx (tile sidx / nch of this block, chunk sidx % nch): one bulk copy of the packed weights, one TMA
  // load per window piece. The producer warp's lane 0 only.
  auto issue = [&](int64_t sidx) {
    const Stage st = stage_of(q, p.groups, sidx, base, bar0);
    issue_weights(q, st, wpack, static_cast<uint32_t>(q.x_bytes));
    const int64_t pos0 = st.jt * q.bnj + q.o_min;
    for (int pc = 0; pc < q.npieces; ++pc)
      load_5d(st.x_dst + pc * q.piece_rows * XR, &dymap, 0, st.chunk, static_cast<int>(st.g),
              static_cast<int>(pos0 + static_cast<int64_t>(pc) * q.piece_rows), static_cast<int>(st.b), st.bar);
  };

  if (tid == 0) {
    prefetch_map(&dymap);
    init_ring(bar0, q.ns, 1, kMaxSlots, 2);
  }
  __syncthreads();
  if (warp == 8) {  // the producer warp
    if (lane == 0) produce_stages(total, q.ns, bar0, kMaxSlots, issue);
    return;
  }

  float acc[S][NW / 2];
  const int a_row0 = q.split_n ? 0 : wgi * 64;  // this warpgroup's rows of the tile
  const int col0 = q.split_n ? wgi * NW : 0;    // and its first column (output position of each phase)
  const uint32_t a_lbo = q.bm * 16;
  // The descriptors' constant halves (A no-swizzle K-major: LBO a_lbo, SBO 128; B swizzled K-major: LBO 16, SBO 8
  // rows, the layout type in bits 62-63): a step's descriptors are then an add and an or on the 16-byte address
  // units (session 24: as the forward's step table, fewer instructions per wgmma; the same descriptor values).
  const uint32_t a_lo = static_cast<uint32_t>(q.bm) << 16, a_hi = 128 >> 4;
  const uint32_t b_lo = 1u << 16, b_hi = ((8 * XR) >> 4) | (static_cast<uint32_t>(kSwizzleMode) << 30);

  int64_t s = 0;  // this block's stage index (over all its tiles)
  for (int64_t ti = 0; ti < my_tiles; ++ti) {
#pragma unroll
    for (int r = 0; r < S; ++r)
#pragma unroll
      for (int i = 0; i < NW / 2; ++i) acc[r][i] = 0.f;
    for (int c = 0; c < nch; ++c, ++s) {
      const int slot = static_cast<int>(s % q.ns);
      mbar_wait(bar0 + 8u * slot, static_cast<uint32_t>((s / q.ns) & 1));
#pragma unroll
      for (int r = 0; r < S; ++r) wg::fence_acc(acc[r]);
      wg::fence();
      const uint32_t a_base = base + slot * q.stage_bytes, x_base = a_base + q.a_bytes;
#pragma unroll
      for (int r = 0; r < S; ++r) {
#pragma unroll 1
        for (int t = q.ph_first[r]; t < q.ph_first[r + 1]; ++t) {
          const int k = q.slot_tap[t];
          // 16-byte units: A's core-matrix block rg = k * cc / 8 (+ 2h) of this warpgroup's rows; B's window row of
          // the tap's output column col0 (+ the stage's channels 16h .. 16h + 15 of each row: 32 bytes)
          const uint32_t a16 = ((a_base + a_row0 * 16) >> 4) + 2 * k * kSteps * q.bm;
          const uint32_t b16 = (x_base >> 4) + (q.slot_row[t] + col0) * (XR / 16);
#pragma unroll
          for (int h = 0; h < kSteps; ++h) {
            const uint64_t da = (static_cast<uint64_t>(a_hi) << 32) | (a_lo | (a16 + 2 * h * q.bm));
            const uint64_t db = (static_cast<uint64_t>(b_hi) << 32) | (b_lo | (b16 + 2 * h));
            mma_phase<T, NW>(acc[r], da, db);
          }
        }
      }
      wg::commit();
      wg::wait<1>();  // this warpgroup's calls of stage s - 1 are done: release its slot
      release_previous_slot(bar0, kMaxSlots, s, q.ns, tid);
    }

    // Epilogue (the ring meanwhile holds the next tile's first stages): two bands per warpgroup, each NW / 2
    // columns of every phase = S * NW / 2 consecutive dx positions of 64 rows.
    wg::wait<0>();
#pragma unroll
    for (int r = 0; r < S; ++r) wg::fence_acc(acc[r]);
    int64_t b, g, jt, mt;
    tile_coords(blockIdx.x + ti * static_cast<int64_t>(gridDim.x), b, g, jt, mt);
    constexpr int kHalf = NW / 2, kBandCols = S * kHalf, kPitch = kBandCols + 8;
    const int64_t i0 = (jt * q.bnj + col0) * S;  // this warpgroup's first dx position
    const int64_t ci0 = mt * q.bm + a_row0;
    const uint32_t band = base + q.c_off + wgi * kBandBytes;
    const int rw = (warp & 3) * 16 + (lane >> 2);
#pragma unroll
    for (int hb = 0; hb < 2; ++hb) {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int row = rw + 8 * hr;
#pragma unroll
        for (int i = hb * (NW / 16); i < (hb + 1) * (NW / 16); ++i) {
          // columns c, c + 1 of every phase: band positions S * c .. S * c + 2S - 1, element u = e * S + rho
          // holding acc[rho][4i + 2hr + e]; S words of two elements (S * c is even)
          const int c = 8 * i + 2 * (lane & 3) - hb * kHalf;
#pragma unroll
          for (int wv = 0; wv < S; ++wv) {
            const int u0 = 2 * wv, u1 = 2 * wv + 1;
            const float v0 = acc[u0 % S][4 * i + 2 * hr + u0 / S];
            const float v1 = acc[u1 % S][4 * i + 2 * hr + u1 / S];
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(band + (row * kPitch + S * c + u0) * 2),
                         "r"(bits16<T>(v0) | (bits16<T>(v1) << 16)));
          }
        }
      }
      warpgroup_sync(wgi);
      wg::store_c_tile<T>(p, q.cin_g, band, kPitch, 64, kBandCols, tid & 127, 128, b, g, ci0, i0 + hb * kBandCols,
                          kActNone);
      warpgroup_sync(wgi);  // the band's next write
    }
  }
#endif
}

// ---- host -----------------------------------------------------------------------------------------------
bool dy_channels_last(const Conv1dParams& p) {
  return channels_last_map_ok(p.y, p.y_stride_b, p.y_stride_l, p.y_stride_c, p.out_channels, p.out_length);
}

// Batches per dy copy slab.
int64_t slab_batches(const Conv1dParams& p) {
  return copy_slab_batches(p.batch, p.out_length * p.out_channels * 2, p.batch);
}

// p: the forward problem (x's shape, dy = p.y); fills q for all of p.batch.
bool make_plan(const Conv1dParams& p, GiPlan& q) {
#ifndef CONVKIT_SM90A
  (void)p;
  (void)q;
  return false;
#else
  if (!sm90a_16bit_whole_groups(p) || p.w_dtype != p.dtype) return false;
  if (p.batch < 1 || p.in_length < 1 || p.out_length < 1) return false;
  if (p.stride < 1 || p.stride > kMaxPhases || p.kernel_size < 1 || p.kernel_size > kMaxTaps) return false;
  if (p.dilation < 1 || p.dilation > (1 << 16) || p.pad_left < 0 || p.pad_left > (1 << 20)) return false;
  const int64_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
  if (cout_g % 16 != 0) return false;
  if (!dy_channels_last(p) && p.out_channels > 65535 * 32) return false;  // the copy's grid (launch_x_to_channels_last)
  if (p.in_length + 4096 >= (int64_t{1} << 31) || p.out_length + p.kernel_size * p.dilation + 4096 >= (int64_t{1} << 31))
    return false;
  if (p.batch >= (int64_t{1} << 31) || p.groups >= (int64_t{1} << 31)) return false;
  if (encode_tiled() == nullptr) return false;

  q.s = static_cast<int>(p.stride);
  q.k = static_cast<int>(p.kernel_size);
  q.cin_g = cin_g;
  q.cout_g = cout_g;
  q.xr = cout_g % 32 == 0 ? 64 : 32;
  q.cc = q.xr / 2;
  // taps by phase: rho_k = (k D - P) mod S, o_k = (rho_k + P - k D) / S
  const int64_t S = p.stride, D = p.dilation, P = p.pad_left;
  int64_t o_min = 0, o_max = 0;
  int n = 0;
  for (int rho = 0; rho < q.s; ++rho) {
    q.ph_first[rho] = n;
    for (int k = 0; k < q.k; ++k) {
      if ((((k * D - P) % S) + S) % S != rho) continue;
      const int64_t o = (rho + P - k * D) / S;
      if (n == 0 || o < o_min) o_min = o;
      if (n == 0 || o > o_max) o_max = o;
      q.slot_tap[n] = k;
      q.slot_row[n] = static_cast<int>(o);  // made relative to o_min below
      ++n;
    }
  }
  q.ph_first[q.s] = n;
  for (int rho = q.s + 1; rho <= kMaxPhases; ++rho) q.ph_first[rho] = n;
  for (int t = 0; t < n; ++t) q.slot_row[t] -= static_cast<int>(o_min);
  q.o_min = static_cast<int>(o_min);
  const int nw = q.s <= 2 ? 128 : 64;  // (as the kernel's NW)
  q.split_n = cin_g <= 64 ? 1 : 0;
  q.bm = q.split_n ? 64 : 128;
  q.bnj = q.split_n ? 2 * nw : nw;
  // window: bnj + o_max - o_min rows, in pieces of at most 256 rows of whole swizzle patterns (1024 bytes)
  const int ra = 1024 / q.xr;
  const int64_t wq_min = q.bnj + o_max - o_min;
  if (wq_min > 2048) return false;
  q.npieces = static_cast<int>(ceil_div(wq_min, 256));
  q.piece_rows = static_cast<int>(ceil_div(ceil_div(wq_min, q.npieces), ra) * ra);
  q.wq = q.npieces * q.piece_rows;
  q.a_bytes = q.k * q.cc * q.bm * 2;
  q.x_bytes = q.wq * q.xr;
  q.stage_bytes = static_cast<int>(wg::round_up(q.a_bytes + q.x_bytes, 1024));
  if (q.a_bytes + q.x_bytes >= (1 << 20)) return false;  // mbarrier transaction count
  const int limit = wg::smem_optin_bytes();
  const int avail = limit - 1024 - 16 * kMaxSlots - 2 * kBandBytes;
  q.ns = std::min(6, std::max(0, avail) / q.stage_bytes);
  if (q.ns < 2) return false;
  q.c_off = q.ns * q.stage_bytes;
  q.bar_off = q.c_off + 2 * kBandBytes;
  q.smem_bytes = q.bar_off + 16 * kMaxSlots + 1024;
  q.chunks = ceil_div(cout_g, q.cc);
  q.m_tiles = ceil_div(cin_g, q.bm);
  q.j_tiles = ceil_div(p.in_length, q.s * static_cast<int64_t>(q.bnj));
  q.num_tiles = p.batch * q.j_tiles * p.groups * q.m_tiles;
  return true;
#endif
}

template <typename T, int S, int XR>
cudaError_t launch_variant(const CUtensorMap& map, const Conv1dParams& v, const GiPlan& q, const void* wpack,
                           cudaStream_t stream) {
  auto kernel = conv1d_bwd_input_dense_tma_kernel<T, S, XR>;
  cudaError_t err = allow_max_dynamic_smem(kernel);  // (q.smem_bytes <= the opt-in limit: make_plan)
  if (err != cudaSuccess) return err;
  const unsigned grid = grid_for(q.num_tiles, v.num_sms, 1);  // persistent: one block per SM
  kernel<<<grid, kBlockThreads, q.smem_bytes, stream>>>(map, v, q, static_cast<const unsigned short*>(wpack));
  return cudaGetLastError();
}
template <typename T, int XR>
cudaError_t launch_strided(const CUtensorMap& map, const Conv1dParams& v, const GiPlan& q, const void* wpack,
                           cudaStream_t stream) {
  if (q.s == 1) return launch_variant<T, 1, XR>(map, v, q, wpack, stream);
  if (q.s == 2) return launch_variant<T, 2, XR>(map, v, q, wpack, stream);
  if (q.s == 3) return launch_variant<T, 3, XR>(map, v, q, wpack, stream);
  return launch_variant<T, 4, XR>(map, v, q, wpack, stream);
}
template <typename T>
cudaError_t launch_typed(const CUtensorMap& map, const Conv1dParams& v, const GiPlan& q, const void* wpack,
                         cudaStream_t stream) {
  if (q.xr == 64) return launch_strided<T, 64>(map, v, q, wpack, stream);
  return launch_strided<T, 32>(map, v, q, wpack, stream);
}

}  // namespace

bool conv1d_bwd_input_dense_tma_supports(const Conv1dParams& p) {
  GiPlan q;
  return make_plan(p, q);
}

int64_t conv1d_bwd_input_dense_tma_workspace_bytes(const Conv1dParams& p) {
  GiPlan q;
  if (!make_plan(p, q)) return 0;
  const int64_t w = packed_weight_bytes(p, q);
  if (dy_channels_last(p)) return w;
  return wg::round_up(w, 256) + slab_batches(p) * p.out_length * p.out_channels * 2;
}

cudaError_t launch_conv1d_bwd_input_dense_tma(const Conv1dParams& p, cudaStream_t stream) {
  GiPlan q;
  if (!make_plan(p, q) || p.workspace == nullptr || (reinterpret_cast<uintptr_t>(p.workspace) & 15) != 0 ||
      p.grad_x == nullptr)
    return cudaErrorInvalidValue;
  const PackSpec ps{static_cast<const unsigned short*>(p.w), q.cout_g * p.w_stride_o, p.w_stride_i, p.w_stride_o,
                    p.w_stride_k, q.cin_g, q.cout_g, p.groups, q.m_tiles, q.chunks, q.k, q.cc, q.bm};
  cudaError_t err = launch_pack_weights(ps, p.workspace, p.num_sms, stream);
  if (err != cudaSuccess) return err;
  // dx as the kernel's "y": Cin channels, Lin positions
  Conv1dParams v = p;
  v.y = p.grad_x;
  v.y_stride_b = p.gx_stride_b;
  v.y_stride_c = p.gx_stride_c;
  v.y_stride_l = p.gx_stride_l;
  v.out_channels = p.in_channels;
  v.out_length = p.in_length;
  auto run = [&](void* dy, int64_t batch, int64_t stride_l, int64_t stride_b, int64_t b0) {
    GiPlan qv = q;
    qv.num_tiles = batch * q.j_tiles * p.groups * q.m_tiles;
    CUtensorMap map;
    if (!make_x_map(map, p.dtype == DType::kFloat16, dy, q.xr, q.cout_g, p.groups, p.out_length, batch, stride_l,
                    stride_b, q.piece_rows, 1))
      return cudaErrorInvalidValue;
    Conv1dParams vb = v;
    vb.batch = batch;
    vb.y = static_cast<unsigned short*>(v.y) + b0 * v.y_stride_b;
    if (p.dtype == DType::kFloat16) return launch_typed<__half>(map, vb, qv, p.workspace, stream);
    return launch_typed<__nv_bfloat16>(map, vb, qv, p.workspace, stream);
  };
  if (dy_channels_last(p)) return run(p.y, p.batch, p.y_stride_l, p.y_stride_b, 0);
  unsigned short* const buf =
      static_cast<unsigned short*>(p.workspace) + wg::round_up(packed_weight_bytes(p, q), 256) / 2;
  const unsigned short* const dy = static_cast<const unsigned short*>(p.y);
  const int64_t nb = slab_batches(p);
  for (int64_t b0 = 0; b0 < p.batch; b0 += nb) {
    const int64_t n = std::min(nb, p.batch - b0);
    err = launch_x_to_channels_last(dy + b0 * p.y_stride_b, n, p.y_stride_b, p.y_stride_c, p.y_stride_l,
                                    p.out_channels, p.out_length, buf, stream);
    if (err != cudaSuccess) return err;
    if ((err = run(buf, n, p.out_channels, p.out_length * p.out_channels, b0)) != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace convkit
