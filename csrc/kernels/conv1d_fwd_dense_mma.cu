// Dense and grouped forward (fp16/bf16 in, fp32 accumulate) as an implicit GEMM on tensor cores with
// mma.sync.m16n8k16 (inline PTX) and ldmatrix. Per group g:
//
//   out[co, n] = sum_r A[co, r] * B[r, n]          n = (b, j) output position, r = (k, ci) tap-major
//   A[co, r]   = w[g*Cout_g + co, ci, k]           B[r, n] = x[b, g*Cin_g + ci, j*S + k*D - P]
//
// One block (8 warps) computes a BM x BN tile (co x j, one batch row b, one group) and walks the
// reduction in "stages" of CC input channels x all K taps. For a stage it stages in shared memory
//   * the weights A[BM][k*CC + ci] (converted to T; fp32 weights allowed), and
//   * the x window of those CC channels covering every position the BN outputs touch, TRANSPOSED
//     to [position][channel] (16-byte rows of 8 channels), so that the B fragment of any tap k is one
//     ldmatrix (non-trans) whose 8 row addresses are the 8 output positions: any tap offset k*D,
//     any stride S works without the 16-byte alignment problem of ldmatrix.trans on [ch][pos].
//     Positions are stored phase-split (row = (t % S) * Wq + t / S), so the positions n = 0, 1, 2, ...
//     of one tap are consecutive rows: conflict-free ldmatrix for every stride.
//     When the dilation makes the contiguous window much longer than K separate per-tap windows
//     (wavenet, D = 512), each tap gets its own window ("segments").
//   x is read from DRAM once per tile (the K taps reuse the staged window); all BM = Cout_g <= 128
//   output channels of a position range are in one block, so x is read exactly once in total then.
// Global -> registers (16-byte loads of 8 positions of one channel, 8 channels per thread, realigned
// in registers when a row is not 16-byte aligned) -> 8x8 transpose with byte_perm -> 16-byte shared
// stores. The loads of stage s+1 are issued before the MMAs of stage s (register double buffering,
// two shared buffers). The stage stream runs across tiles (persistent grid-stride loop), so a tile
// with a single stage (Cin_g <= CC) is still overlapped with the previous tile's MMAs.
// Weights: when the whole A panel of the block's (group, m tile), BM x ceil(Cin_g/CC)*CC*K, fits in
// shared memory beside the stages (kb76/kb67/tcn/wavenet/grouped suite shapes), it is loaded once
// (tap-major, converted to T) and a stage holds only the x window; the launcher makes the grid a
// multiple of groups * m_tiles so a block's (group, m tile) never changes, and the kernel reloads the
// panel at a tile boundary when it does (grid smaller than groups * m_tiles). Otherwise (w2v_k3s2:
// Cin_g = 512) the weights of each stage are staged with the x window: by 16-byte cp.async issued
// before the previous stage's MMAs when they are tap-major, (Cout, K, Cin_g) in memory (dispatch.cpp
// passes such a copy, conv1d_fwd_dense_mma_stages_weights), else through registers as described above.
// Epilogue: straight from the accumulators, per warp and 16-row slice: bias + activation, rounded to
// T, staged in a 1.25 KB per-warp buffer (no block barrier), then 16-byte coalesced stores of y rows.
// (The fp32 C tile that used to alias a stage buffer, and forced ~70 KB stages, is gone.)
//
// STATUS (H200, bf16, benchmarks/NOTES.md session 9): kb76 5.9 ms (2.06x cuDNN), kb67 1.92 ms (1.82x),
// grouped_g8 0.36 ms (1.49x), but tcn / wavenet / w2v_k3s2 0.2-0.8x cuDNN. Profile (ci/ncu_source.sh,
// kb67): ~11 warp instructions per MMA, ~1 IPC per SM at 2 warps per scheduler (one 8-warp block of
// 200+ registers per SM), so per-stage and per-tile work and latency, not the MMAs, set the time.
// The cp.async ring (kRing) is on wherever the x rows are 4-byte aligned and the panel is resident;
// CONVKIT_DENSE_RING=0 turns it off.
#include <cstdint>
#include <type_traits>

#include "activation.cuh"
#include "common.cuh"
#include "launchers.h"
#include "mma_common.cuh"

namespace convkit {
namespace {
using namespace tc;

constexpr int kThreads = 256;  // 8 warps
constexpr int kMaxK = 8;       // taps handled (kernel_size <= 8)
constexpr int kAUnits = 8;     // 16-byte A units (8 weights) per thread per stage (fast path)
constexpr int kRingStages = 3; // raw x slots of the cp.async ring (kRing): two stages in flight

struct DensePlan {
  int wm;        // warps along co: 2 -> BM 128 x BN 128, 1 -> BM 64 x BN 256
  int bm, bn;
  int cc;        // input channels per stage (16 or 32)
  int k, s, d;
  int nseg;      // 1: one contiguous window; K: one window per tap
  int wls;       // positions staged per segment (multiple of 8)
  int wq;        // rows per phase
  int seg_rows;  // s * wq
  int x_pitch;   // elements per x row (cc + 8)
  int a_pitch;   // elements per A row (cc*k + 8)
  int a_bytes, x_bytes, rb_off, stage_bytes, smem_bytes;
  int resident;       // 1: the whole A panel (bm x chunks*cc*K) stays in shared memory (a_pitch is its pitch)
  int stage_off;      // offset of stage 0 (after the resident panel, else 0)
  int epi_off;        // offset of the per-warp epilogue buffers
  int blocks_per_sm;  // occupancy the plan was sized for (grid sizing)
  int ring;           // kRingStages: x windows come through a cp.async ring of raw tiles; 0: registers
  int ring_unit;      // bytes per cp.async of the ring: 16 (16-byte aligned x rows) or 4 (4-byte aligned)
  int raw_off;        // offset of raw ring slot 0 ([segment][channel][position], wls positions per row)
  int raw_bytes;      // bytes per raw slot
  // A fast path (weights contiguous (Cout, Cin_g, K), 16-byte aligned rows): a row's stage is
  // cc*K consecutive weights = a_u8 16-byte units; thread -> flat unit tid + i * kThreads.
  int a_vec;
  int a_u8;
  int a_drow, a_dunit;  // kThreads = a_drow * a_u8 + a_dunit
  int a_passes;         // ceil(bm * a_u8 / kThreads) <= kAUnits
  // A tap-major (weights (Cout, K, Cin_g) in memory, w_stride_i == 1, of dtype T, 16-byte aligned
  // units; dispatch.cpp passes such a copy when the panel is not resident): a stage's A tile goes
  // global -> shared by 16-byte cp.async, no registers, no 2-byte scatter.
  int a_tap;
  int x_units;   // (cc/8) * nseg * wls/8, <= kThreads
  int64_t cin_g, cout_g, chunks, m_tiles, j_tiles, num_tiles;
};

struct TileCoord {
  int64_t b, j0, g, co0;
};

__device__ __forceinline__ TileCoord tile_coord(const DensePlan& q, int64_t groups, int64_t tile) {
  // tile = ((b * j_tiles + jt) * groups + g) * m_tiles + mt: the m tiles of one x window are neighbours.
  TileCoord t;
  int64_t rest, mt, g, jt;
  divmod(tile, q.m_tiles, rest, mt);
  divmod(rest, groups, rest, g);
  divmod(rest, q.j_tiles, t.b, jt);
  t.j0 = jt * q.bn;
  t.g = g;
  t.co0 = mt * q.bm;
  return t;
}

// Epilogue staging: per warp, one 16 (co) x 32 (n) slice of its accumulators at a time, as T,
// after bias + activation (row pitch kEpiPitch elements = 80 bytes: conflict-free fragment stores).
constexpr int kEpiPitch = 40;
constexpr int kEpiWarpBytes = 16 * kEpiPitch * 2;
constexpr int kEpiBytes = (kThreads / 32) * kEpiWarpBytes;

// kRes: the whole A panel of the block's (group, m tile) is resident in shared memory
// ([row][chunk][k][ci], loaded once and reloaded only when the tile's (group, m tile) changes);
// a stage then holds only the x window. !kRes: A is staged per stage as before.
//
// kRing (the default where it applies, off with CONVKIT_DENSE_RING=0; resident panel, 16-byte aligned x rows):
// the x windows are copied global -> shared by cp.async into a ring of kRingStages raw slots
// ([segment][channel][position]), issued two stages ahead, and each thread transposes the 16-byte
// chunks it copied itself (so no barrier between the copy and the transpose). The register path
// holds one stage of prefetch in 32 registers and waits for it right after the MMAs (the kb76
// profile: long-scoreboard stalls 2.7 of 9.2 cycles per instruction).
template <typename T, bool kRes, bool kRing>
__global__ void __launch_bounds__(kThreads, 1)
    conv1d_fwd_dense_mma_kernel(const Conv1dParams p, const DensePlan q) {
  static_assert(kRes || !kRing, "the ring runs with the resident weight panel only");
  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int wm = warp % q.wm, wn = warp / q.wm;  // warp tile: 64 (co) x 32 (n)

  const unsigned short* xr = static_cast<const unsigned short*>(p.x);
  const int64_t S = q.s, D = q.d, P = p.pad_left;
  unsigned char* const stages = smem + q.stage_off;

  // ---- per-thread loader geometry (fixed for the whole launch) ----
  const int a_unit0 = tid % q.a_u8;
  const int a_row0 = tid / q.a_u8;
  // X: thread -> (channel group, segment, 8-position group).
  const int cgs = q.cc / 8;
  const bool x_active = tid < q.x_units;
  const int x_cg = tid % cgs;
  const int x_grp = tid / cgs;
  const int x_seg = x_grp / (q.wls / 8);
  const int x_t0 = (x_grp % (q.wls / 8)) * 8;  // first position (window-relative) of this thread

  uint32_t ra[kRes ? 1 : 4 * kAUnits];  // [unit][4 words], global order (ci, k)
  uint32_t rx[32];  // [channel 0..7][4 words of 8 positions]

  // Resident A panel: A[row][chunk * K * cc + k * cc + ci_local] (ci = chunk * cc + ci_local), zero
  // for co >= cout_g or ci >= cin_g. Synchronous; the caller provides the barriers around it.
  auto load_panel = [&](int64_t g, int64_t co0) {
    const int kc = q.k * q.cc;
    const int per_row = static_cast<int>(q.chunks) * kc / 2;  // 32-bit words (ci pairs) per row
    const uint32_t pan = smem_u32(smem);
#pragma unroll 1
    for (int u = tid; u < q.bm * per_row; u += kThreads) {
      const int row = u / per_row;
      const int r = 2 * (u - row * per_row);
      const int ch = r / kc;
      const int w = r - ch * kc;
      const int k = w / q.cc;
      const int64_t ci = static_cast<int64_t>(ch) * q.cc + (w - k * q.cc);
      const int64_t co = co0 + row;
      float v0 = 0.f, v1 = 0.f;
      if (co < q.cout_g) {
        const int64_t o = (g * q.cout_g + co) * p.w_stride_o + ci * p.w_stride_i + k * p.w_stride_k;
        if (ci < q.cin_g) v0 = load_param<T>(p, p.w, o);
        if (ci + 1 < q.cin_g) v1 = load_param<T>(p, p.w, o + p.w_stride_i);
      }
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(pan + (row * q.a_pitch + r) * 2),
                   "r"(bits16<T>(v0) | (bits16<T>(v1) << 16)));
    }
  };

  // Staged weights from a tap-major source (q.a_tap): the stage's A[row][k * cc + ci] straight into
  // stage buffer `buf` by cp.async, 16-byte units (row, tap, 8 channels), zero-filled for co >= cout_g
  // or ci >= cin_g (cin_g % 8 == 0: a unit is all in or all out). One commit group per call.
  auto issue_a = [&](int buf, const TileCoord& tc, int64_t chunk) {
    const unsigned short* wr = static_cast<const unsigned short*>(p.w);
    unsigned char* const a_dst = stages + buf * q.stage_bytes;
    const int cu = q.cc / 8, per_row = q.k * cu;
    const int64_t ci_base = chunk * q.cc;
    const int64_t wrow0 = (tc.g * q.cout_g + tc.co0) * p.w_stride_o + ci_base;
#pragma unroll 1
    for (int u = tid; u < q.bm * per_row; u += kThreads) {
      const int row = u / per_row, r = u - row * per_row;
      const int k = r / cu, c8 = r - k * cu;
      const bool ok = tc.co0 + row < q.cout_g && ci_base + c8 * 8 < q.cin_g;
      const unsigned short* src = ok ? wr + wrow0 + row * p.w_stride_o + k * p.w_stride_k + c8 * 8 : wr;
      cp_async16(a_dst + (row * q.a_pitch + k * q.cc + c8 * 8) * 2, src, ok ? 16 : 0);
    }
    cp_async_commit();
  };

  // The stage helpers and the epilogue take the tile's coordinates, decoded once per tile by the
  // stage stream below (three divisions; the profile of kb76 had them at ~10 % of all instructions
  // when every helper decoded the tile again).
  // This thread's x chunk of a stage: first position `pos` (a multiple of 8), first of its 8 channels
  // (within the group) `c_loc0`, and that channel's row offset.
  auto x_origin = [&](const TileCoord& tc, int64_t chunk, int64_t& pos, int64_t& c_loc0, int64_t& row0) {
    const int64_t start = tc.j0 * S - P + (q.nseg > 1 ? x_seg * D : 0);
    pos = floor8(start) + x_t0;
    c_loc0 = chunk * q.cc + x_cg * 8;
    row0 = tc.b * p.x_stride_b + (tc.g * q.cin_g + c_loc0) * p.x_stride_c;
  };
  // kRing: byte offset of this thread's 8 channel rows (16 bytes each, one row apart) in a raw slot.
  const uint32_t raw_thread = static_cast<uint32_t>(((x_seg * q.cc + x_cg * 8) * q.wls + x_t0) * 2);
  auto issue_stage = [&](int slot, const TileCoord& tc, int64_t chunk) {  // kRing: cp.async the x window
    if (!x_active) return;
    int64_t pos, c_loc0, row0;
    x_origin(tc, chunk, pos, c_loc0, row0);
    unsigned char* dst = smem + q.raw_off + slot * q.raw_bytes + raw_thread;
    // pos is a multiple of 8 and rows are 16-byte (or 4-byte: ring_unit) aligned: a chunk is before the
    // row, inside it, cut by its end (the valid prefix is copied) or after it; cp.async zero-fills what
    // it does not copy.
    const int64_t valid = pos < 0 ? 0 : max(int64_t{0}, min(int64_t{8}, p.in_length - pos));
    if (q.ring_unit == 16) {
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const int bytes = c_loc0 + c < q.cin_g ? static_cast<int>(valid) * 2 : 0;
        const unsigned short* src = bytes > 0 ? xr + row0 + c * p.x_stride_c + pos : xr;
        cp_async16(dst + c * q.wls * 2, src, bytes);
      }
    } else {
      // Rows only 4-byte aligned (even lengths that are not multiples of 8: kb76's dy, Lout 174758, in
      // its grad-input phases): the same chunk as four 4-byte copies, so these rows keep the ring too.
      const int v = static_cast<int>(valid);
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const bool in = c_loc0 + c < q.cin_g;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int bytes = in ? min(max(v - 2 * e, 0), 2) * 2 : 0;
          const unsigned short* src = bytes > 0 ? xr + row0 + c * p.x_stride_c + pos + 2 * e : xr;
          cp_async4(dst + c * q.wls * 2 + 4 * e, src, bytes);
        }
      }
    }
  };
  auto raw_to_rx = [&](int slot) {  // kRing: this thread's own chunks of a landed slot into rx
    if (!x_active) return;
    const uint32_t src = smem_u32(smem + q.raw_off + slot * q.raw_bytes) + raw_thread;
#pragma unroll
    for (int c = 0; c < 8; ++c)
      asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(rx[4 * c]), "=r"(rx[4 * c + 1]), "=r"(rx[4 * c + 2]), "=r"(rx[4 * c + 3])
                   : "r"(src + c * q.wls * 2));
  };

  auto load_stage = [&](const TileCoord& tc, int64_t chunk) {
    const int64_t ci_base = chunk * q.cc;
    // weights (fast path; the general layout is loaded in store_stage)
    if constexpr (!kRes) {
      if (q.a_vec) {
        const int64_t valid = (q.cin_g - ci_base) * q.k;  // weights of this stage that exist per row
        const int64_t wrow0 = (tc.g * q.cout_g + tc.co0) * p.w_stride_o + ci_base * q.k;
        int row = a_row0, unit = a_unit0;
#pragma unroll
        for (int i = 0; i < kAUnits; ++i) {
          uint32_t w4[4] = {0u, 0u, 0u, 0u};
          if (i < q.a_passes && row < q.bm && tc.co0 + row < q.cout_g && unit * 8 < valid) {
            const int64_t o = wrow0 + row * p.w_stride_o + unit * 8;
            if (p.w_dtype == DType::kFloat32) {
              const float4* src = reinterpret_cast<const float4*>(static_cast<const float*>(p.w) + o);
              const float4 f0 = __ldg(src), f1 = __ldg(src + 1);
              w4[0] = bits16<T>(f0.x) | (bits16<T>(f0.y) << 16);
              w4[1] = bits16<T>(f0.z) | (bits16<T>(f0.w) << 16);
              w4[2] = bits16<T>(f1.x) | (bits16<T>(f1.y) << 16);
              w4[3] = bits16<T>(f1.z) | (bits16<T>(f1.w) << 16);
            } else {
              const uint4 v = __ldg(reinterpret_cast<const uint4*>(static_cast<const unsigned short*>(p.w) + o));
              w4[0] = v.x; w4[1] = v.y; w4[2] = v.z; w4[3] = v.w;
            }
          }
          ra[4 * i] = w4[0]; ra[4 * i + 1] = w4[1]; ra[4 * i + 2] = w4[2]; ra[4 * i + 3] = w4[3];
          row += q.a_drow;
          unit += q.a_dunit;
          if (unit >= q.a_u8) { unit -= q.a_u8; ++row; }
        }
      }
    }
    // x window
#pragma unroll
    for (int i = 0; i < 32; ++i) rx[i] = 0u;
    if (x_active) {
      int64_t pos, c_loc0, row0;
      x_origin(tc, chunk, pos, c_loc0, row0);
      const bool vec = p.x_stride_l == 1 && pos >= 0 && pos + 8 <= p.in_length;
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        if (c_loc0 + c < q.cin_g) {
          const int64_t row = row0 + c * p.x_stride_c;
          if (vec) {
            load8_contig(xr, row + pos, &rx[4 * c]);
          } else {
            uint32_t h[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) {
              const int64_t pp = pos + e;
              h[e] = (pp >= 0 && pp < p.in_length) ? __ldg(xr + row + pp * p.x_stride_l) : 0u;
            }
#pragma unroll
            for (int e = 0; e < 4; ++e) rx[4 * c + e] = h[2 * e] | (h[2 * e + 1] << 16);
          }
        }
      }
    }
  };

  auto store_stage = [&](int buf, const TileCoord& tc, int64_t chunk) {
    unsigned char* base = stages + buf * q.stage_bytes;
    const uint32_t a_s = smem_u32(base);
    const uint32_t x_s = smem_u32(base + q.a_bytes);
    if constexpr (!kRes) {
      // weights: A[row][k*cc + ci]
      const int64_t ci_base = chunk * q.cc;
      if (q.a_vec) {
        // element r = ci * K + k of a row's stage -> A[row][k * cc + ci]; ci >= cin_g - ci_base: zero
        const int ci_lim = static_cast<int>(min(static_cast<int64_t>(q.cc), q.cin_g - ci_base));
        int row = a_row0, unit = a_unit0;
#pragma unroll
        for (int i = 0; i < kAUnits; ++i) {
          if (i < q.a_passes && row < q.bm) {
            int ci = (unit * 8) / q.k;
            int k = unit * 8 - ci * q.k;
            const uint32_t rbase = a_s + row * q.a_pitch * 2;
#pragma unroll
            for (int e = 0; e < 8; ++e) {
              uint32_t h = (ra[4 * i + (e >> 1)] >> ((e & 1) * 16)) & 0xFFFFu;
              if (ci >= ci_lim) h = 0u;
              asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(rbase + (k * q.cc + ci) * 2), "h"(static_cast<unsigned short>(h)));
              if (++k == q.k) { k = 0; ++ci; }
            }
          }
          row += q.a_drow;
          unit += q.a_dunit;
          if (unit >= q.a_u8) { unit -= q.a_u8; ++row; }
        }
      } else if (!q.a_tap) {
        // general weight layout / alignment: synchronous scalar loads, (k, ci pair) words
        const int pairs = q.cc / 2, per_row = q.k * pairs;
#pragma unroll 1
        for (int u = tid; u < q.bm * per_row; u += kThreads) {
          const int row = u / per_row, rem = u - row * per_row;
          const int k = rem / pairs, ci = 2 * (rem - k * pairs);
          const int64_t co = tc.co0 + row, c0 = ci_base + ci;
          float v0 = 0.f, v1 = 0.f;
          if (co < q.cout_g) {
            const int64_t o = (tc.g * q.cout_g + co) * p.w_stride_o + c0 * p.w_stride_i + k * p.w_stride_k;
            if (c0 < q.cin_g) v0 = load_param<T>(p, p.w, o);
            if (c0 + 1 < q.cin_g) v1 = load_param<T>(p, p.w, o + p.w_stride_i);
          }
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a_s + (row * q.a_pitch + k * q.cc + ci) * 2),
                       "r"(bits16<T>(v0) | (bits16<T>(v1) << 16)));
        }
      }
    }
    // x: transpose 8 channels x 8 positions -> 8 rows of 8 channels
    if (x_active) {
      int t = x_t0;
      int ph = t % q.s, qq = t / q.s;
      const uint32_t seg_base = x_s + (x_seg * q.seg_rows) * q.x_pitch * 2 + x_cg * 16;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          const uint32_t sel = hi ? 0x7632u : 0x5410u;
          const uint32_t w0 = __byte_perm(rx[0 * 4 + j], rx[1 * 4 + j], sel);
          const uint32_t w1 = __byte_perm(rx[2 * 4 + j], rx[3 * 4 + j], sel);
          const uint32_t w2 = __byte_perm(rx[4 * 4 + j], rx[5 * 4 + j], sel);
          const uint32_t w3 = __byte_perm(rx[6 * 4 + j], rx[7 * 4 + j], sel);
          const int row = ph * q.wq + qq;
          sts128(seg_base + row * q.x_pitch * 2, w0, w1, w2, w3);
          if (++ph == q.s) { ph = 0; ++qq; }
        }
      }
    }
    // row of output position 0 for every tap
    if (tid < q.k) {
      const int64_t k = tid;
      const int64_t start0 = tc.j0 * S - P;
      int64_t o, seg;
      if (q.nseg > 1) {
        const int64_t st = start0 + k * D;
        o = st - floor8(st);
        seg = k;
      } else {
        o = start0 - floor8(start0) + k * D;
        seg = 0;
      }
      reinterpret_cast<int*>(base + q.rb_off)[k] = static_cast<int>(seg * q.seg_rows + (o % S) * q.wq + o / S);
    }
  };

  float acc[4][4][4];

  // ldmatrix lane geometry
  const uint32_t a_lane = ((wm * 64 + (lane & 15)) * q.a_pitch + (lane >> 4) * 8) * 2;
  const int b_nl = wn * 32 + (lane & 7) + ((lane >> 4) << 3);
  const int b_col = ((lane >> 3) & 1) * 8;

  auto compute = [&](int buf, int64_t chunk) {
    unsigned char* base = stages + buf * q.stage_bytes;
    // resident: this stage's columns of the panel start at chunk * K * cc
    const uint32_t a_s = kRes ? smem_u32(smem) + a_lane + static_cast<uint32_t>(chunk) * (q.k * q.cc * 2)
                              : smem_u32(base) + a_lane;
    const uint32_t x_s = smem_u32(base + q.a_bytes);
    const int* rb = reinterpret_cast<const int*>(base + q.rb_off);
    const int kpt_shift = q.cc == 32 ? 1 : 0;  // k-steps per tap: cc / 16
    const int nks = q.k << kpt_shift;
    for (int ks = 0; ks < nks; ++ks) {
      const int k = ks >> kpt_shift;
      const int ci0 = (ks & kpt_shift) * 16;
      const int row = rb[k] + b_nl;
      uint32_t bf[4][2];
#pragma unroll
      for (int nj = 0; nj < 2; ++nj) {
        const uint32_t addr = x_s + ((row + nj * 16) * q.x_pitch + ci0 + b_col) * 2;
        ldsm_x4(addr, bf[2 * nj][0], bf[2 * nj][1], bf[2 * nj + 1][0], bf[2 * nj + 1][1]);
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        uint32_t af[4];
        ldsm_x4(a_s + (mi * 16 * q.a_pitch + ks * 16) * 2, af[0], af[1], af[2], af[3]);
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma16816<T>(acc[mi][ni], af, bf[ni][0], bf[ni][1]);
      }
    }
  };

  // Epilogue straight from the accumulators: per warp and per 16-row slice, bias + activation, round
  // to T, stage the 16 x 32 slice in the warp's own shared buffer (no block barrier: nothing else
  // uses it), then 16-byte coalesced stores of y rows (8 rows x 64 bytes per warp instruction).
  // kAct (a std::bool_constant): whether an activation runs. Without one the unrolled body is straight
  // code; with the activation's switch inlined into each of its 32 value pairs the body spread over so
  // much code that instruction-cache misses stalled ~20 % of kb67's samples (ncu, session 9).
  auto epilogue_body = [&](const TileCoord& tc, auto kAct) {
    const uint32_t eb = smem_u32(smem + q.epi_off) + warp * kEpiWarpBytes;
    unsigned short* yr = static_cast<unsigned short*>(p.y);
    const int64_t jn = p.out_length - tc.j0;  // valid columns of the tile (> 0)
    const int64_t co_w = tc.co0 + wm * 64;    // first co (within the group) of the warp tile
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int rl = (lane >> 2) + h * 8;
        const int64_t co = co_w + mi * 16 + rl;
        float bv = 0.f;
        if (p.bias != nullptr && co < q.cout_g) bv = load_param<T>(p, p.bias, tc.g * q.cout_g + co);
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          float v0 = acc[mi][ni][2 * h] + bv, v1 = acc[mi][ni][2 * h + 1] + bv;
          if constexpr (decltype(kAct)::value) {
            v0 = activate(p.activation, v0);
            v1 = activate(p.activation, v1);
          }
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(eb + (rl * kEpiPitch + ni * 8 + (lane & 3) * 2) * 2),
                       "r"(bits16<T>(v0) | (bits16<T>(v1) << 16)));
        }
      }
      __syncwarp();
#pragma unroll
      for (int it = 0; it < 2; ++it) {
        const int idx = lane + 32 * it;
        const int rl = idx >> 2, c = idx & 3;
        uint32_t w[4];
        asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                     : "r"(eb + (rl * kEpiPitch + c * 8) * 2));
        const int64_t co = co_w + mi * 16 + rl;
        const int jl = wn * 32 + c * 8;  // column within the tile
        if (co < q.cout_g && jl < jn) {
          const int64_t j = tc.j0 + jl;
          const int64_t off = tc.b * p.y_stride_b + (tc.g * q.cout_g + co) * p.y_stride_c;
          unsigned short* dst = yr + off + j * p.y_stride_l;
          if (p.y_stride_l == 1 && jl + 8 <= jn) {
            // The widest stores the row's alignment allows: y rows of an odd multiple of 4 bytes (kb76:
            // Lout 174758) used to take the guarded 2-byte loop below, ~8 % of the kernel's instructions.
            store8_16bit(dst, w);
          } else {
#pragma unroll
            for (int i = 0; i < 8; ++i)
              if (jl + i < jn) yr[off + (j + i) * p.y_stride_l] = static_cast<unsigned short>(w[i >> 1] >> ((i & 1) * 16));
          }
        }
      }
      __syncwarp();  // the next slice overwrites the buffer
    }
  };
  auto epilogue = [&](const TileCoord& tc) {
    if (p.activation == kActNone) {
      epilogue_body(tc, std::false_type{});
    } else {
      epilogue_body(tc, std::true_type{});
    }
  };

  // ---- the stage stream: (tile, chunk) for tile = blockIdx.x, += gridDim.x ----
  int64_t tile = blockIdx.x, chunk = 0;
  if (tile >= q.num_tiles) return;
  TileCoord tc = tile_coord(q, p.groups, tile);
  int64_t pan_g = -1, pan_co0 = -1;  // (group, co0) whose panel is resident (block-uniform)
  if constexpr (kRes) {
    load_panel(tc.g, tc.co0);
    pan_g = tc.g;
    pan_co0 = tc.co0;
  }
  // The stage after (t, c): the next chunk of tile t, or the first of the block's next tile (whose
  // coordinates are decoded into `coord` when it exists).
  auto advance = [&](int64_t& t, int64_t& c, TileCoord& coord) {
    if (++c == q.chunks) {
      c = 0;
      t += gridDim.x;
      if (t < q.num_tiles) coord = tile_coord(q, p.groups, t);
    }
  };
  // kRing: the issue cursor (it, ic) runs kRingStages - 1 stages ahead of the stage being transposed;
  // every call commits a group (empty past the last stage), so cp_async_wait<kRingStages - 2> after
  // an issue means "the oldest stage not yet transposed has landed".
  int64_t it = tile, ic = chunk;
  TileCoord itc = tc;
  int slot_issue = 0, slot_use = 0;
  auto issue_next = [&]() {
    if (it < q.num_tiles) issue_stage(slot_issue, itc, ic);
    cp_async_commit();
    slot_issue = slot_issue + 1 == kRingStages ? 0 : slot_issue + 1;
    advance(it, ic, itc);
  };
  auto take_landed = [&]() {  // the oldest issued stage, into rx
    cp_async_wait<kRingStages - 2>();
    raw_to_rx(slot_use);
    slot_use = slot_use + 1 == kRingStages ? 0 : slot_use + 1;
  };
  if constexpr (kRing) {
    for (int s = 0; s < kRingStages - 1; ++s) issue_next();
    take_landed();
  } else {
    load_stage(tc, chunk);
  }
  if constexpr (!kRes) {
    if (q.a_tap) issue_a(0, tc, chunk);
  }
  store_stage(0, tc, chunk);
  if constexpr (!kRes) {
    if (q.a_tap) cp_async_wait<0>();
  }
  __syncthreads();
  int buf = 0;
  for (;;) {
    int64_t ntile = tile, nchunk = chunk;
    TileCoord nc = tc;
    advance(ntile, nchunk, nc);
    const bool has_next = ntile < q.num_tiles;
    if constexpr (kRing) {
      issue_next();
    } else {
      if (has_next) {
        load_stage(nc, nchunk);
        // buffer buf ^ 1 was last read by the previous stage's MMAs, before the barrier that ended it
        if (!kRes && q.a_tap) issue_a(buf ^ 1, nc, nchunk);
      }
    }
    if (chunk == 0) {
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;
    }
    compute(buf, chunk);
    if (has_next) {
      if constexpr (kRing) take_landed();
      store_stage(buf ^ 1, nc, nchunk);
      if constexpr (!kRes) {
        if (q.a_tap) cp_async_wait<0>();  // this thread's A units of stage buf ^ 1 have landed
      }
    }
    __syncthreads();  // stage buf fully read; stage buf ^ 1 complete
    if (chunk == q.chunks - 1) epilogue(tc);
    if (!has_next) break;
    if constexpr (kRes) {
      if (nchunk == 0) {
        // Every thread has finished its MMAs on the panel (barrier above); the epilogue does not
        // touch it. Reload only when the next tile needs another (group, m tile): never when the
        // grid is a multiple of groups * m_tiles (the launcher arranges that when it can).
        if (nc.g != pan_g || nc.co0 != pan_co0) {
          load_panel(nc.g, nc.co0);
          pan_g = nc.g;
          pan_co0 = nc.co0;
          __syncthreads();
        }
      }
    }
    tile = ntile;
    chunk = nchunk;
    tc = nc;
    buf ^= 1;
  }
  if constexpr (kRing) cp_async_wait<0>();  // (only empty groups can be pending here)
}

int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

bool dense_ring_enabled() {
  static const bool on = !env_equals("CONVKIT_DENSE_RING", "0");
  return on;
}

// CONVKIT_DENSE_STAGE_WEIGHTS=1 (an experiment switch, read once): never keep the weight panel
// resident, stage weights per step (from the tap-major copy dispatch.cpp then passes) on every shape.
bool dense_stage_weights_forced() {
  static const bool on = env_equals("CONVKIT_DENSE_STAGE_WEIGHTS", "1");
  return on;
}

// Geometry of block shape (wm, cc) with resident or staged weights; false when it does not apply
// or does not fit in `limit` bytes of shared memory.
bool make_geometry(const Conv1dParams& p, DensePlan& q, int wm, int cc, bool resident, int limit) {
  if (cc == 32 && (q.k > 4 || q.cin_g <= 16)) return false;
  q.wm = wm;
  q.bm = 64 * wm;
  q.bn = 32 * (8 / wm);
  q.cc = cc;
  q.resident = resident ? 1 : 0;
  // window geometry: contiguous, or one window per tap when that is smaller
  const int64_t span_one = static_cast<int64_t>(q.bn - 1) * q.s + 1;
  const int64_t wls_contig = round_up(7 + span_one + static_cast<int64_t>(q.k - 1) * q.d, 8);
  const int64_t wls_seg = round_up(7 + span_one, 8);
  const int64_t wq_contig = ceil_div(wls_contig, q.s), wq_seg = ceil_div(wls_seg, q.s);
  if (q.k > 1 && q.k * wq_seg < wq_contig) {
    q.nseg = q.k;
    q.wls = static_cast<int>(wls_seg);
    q.wq = static_cast<int>(wq_seg);
  } else {
    if (wls_contig > (1 << 20)) return false;
    q.nseg = 1;
    q.wls = static_cast<int>(wls_contig);
    q.wq = static_cast<int>(wq_contig);
  }
  q.seg_rows = q.s * q.wq;
  q.x_units = (cc / 8) * q.nseg * (q.wls / 8);
  if (q.x_units > kThreads) return false;
  q.x_pitch = cc + 8;
  q.chunks = ceil_div(q.cin_g, cc);
  q.x_bytes = q.nseg * q.seg_rows * q.x_pitch * 2;
  if (resident) {
    // the whole panel: row pitch chunks * K * cc + 8 elements (16 bytes mod 128: conflict-free ldmatrix)
    const int64_t pitch = q.chunks * cc * q.k + 8;
    const int64_t pan_bytes = round_up(static_cast<int64_t>(q.bm) * pitch * 2, 128);
    if (pan_bytes > limit) return false;
    q.a_pitch = static_cast<int>(pitch);
    q.a_u8 = 1;  // unused (staged-weight loader geometry)
    q.a_drow = kThreads;
    q.a_dunit = 0;
    q.a_passes = 0;
    q.a_vec = 0;
    q.a_tap = 0;
    q.a_bytes = 0;
    q.stage_off = static_cast<int>(pan_bytes);
  } else {
    q.a_pitch = cc * q.k + 8;
    q.a_u8 = q.k * cc / 8;
    q.a_drow = kThreads / q.a_u8;
    q.a_dunit = kThreads % q.a_u8;
    q.a_passes = static_cast<int>(ceil_div(static_cast<int64_t>(q.bm) * q.a_u8, kThreads));
    q.a_tap = p.w_dtype == p.dtype && p.w_stride_i == 1 && p.w_stride_k % 8 == 0 && p.w_stride_o % 8 == 0 &&
              q.cin_g % 8 == 0 && (reinterpret_cast<uintptr_t>(p.w) & 15) == 0;
    if (!q.a_tap && q.a_passes > kAUnits) return false;
    q.a_vec = !q.a_tap && p.w_stride_k == 1 && p.w_stride_i == q.k && p.w_stride_o % 8 == 0 &&
              (reinterpret_cast<uintptr_t>(p.w) & 15) == 0;
    q.a_bytes = q.bm * q.a_pitch * 2;
    q.stage_off = 0;
  }
  q.rb_off = q.a_bytes + q.x_bytes;
  q.stage_bytes = static_cast<int>(round_up(q.rb_off + kMaxK * 4, 128));
  q.raw_off = q.stage_off + 2 * q.stage_bytes;
  q.raw_bytes = static_cast<int>(round_up(static_cast<int64_t>(q.nseg) * cc * q.wls * 2, 128));
  q.ring = 0;
  q.epi_off = q.raw_off;
  int64_t total = static_cast<int64_t>(q.epi_off) + kEpiBytes;
  if (total > limit) return false;
  // The cp.async ring (kRing): resident panel, contiguous x rows that are 16-byte aligned (16-byte
  // copies) or 4-byte aligned (4-byte copies), room for the slots; unless CONVKIT_DENSE_RING=0.
  const bool rows16 = rows_vec_aligned(p.x, p.x_stride_b, p.x_stride_c, p.x_stride_l, 8);
  const bool rows4 = p.x_stride_l == 1 && p.x_stride_c % 2 == 0 && p.x_stride_b % 2 == 0 &&
                     reinterpret_cast<uintptr_t>(p.x) % 4 == 0;
  q.ring_unit = rows16 ? 16 : 4;
  const int64_t ring_total = total + static_cast<int64_t>(kRingStages) * q.raw_bytes;
  if (resident && (rows16 || rows4) && dense_ring_enabled() && ring_total <= limit) {
    q.ring = kRingStages;
    q.epi_off = q.raw_off + kRingStages * q.raw_bytes;
    total = ring_total;
  }
  q.smem_bytes = static_cast<int>(total);
  return true;
}

// Fills q for p; false when this kernel cannot run p (then nothing else in q is meaningful).
bool make_plan(const Conv1dParams& p, DensePlan& q) {
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) return false;
  if (p.w_dtype != p.dtype && p.w_dtype != DType::kFloat32) return false;
  if (p.groups < 1 || p.in_channels % p.groups || p.out_channels % p.groups) return false;
  if (p.kernel_size < 1 || p.kernel_size > kMaxK || p.stride < 1 || p.dilation < 1) return false;
  if (p.stride > 64 || p.dilation > (1 << 20) || p.pad_left < 0) return false;
  const int64_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
  if (cin_g < 1 || cout_g < 1) return false;
  q.k = static_cast<int>(p.kernel_size);
  q.s = static_cast<int>(p.stride);
  q.d = static_cast<int>(p.dilation);
  q.cin_g = cin_g;
  q.cout_g = cout_g;
  const int limit = smem_optin_bytes();
  // Block shapes, preferred first: BM 128 (one block covers Cout_g <= 128, so x is read once), wide
  // channel stages. Cout_g <= 64 prefers BM 64 x BN 256.
  // Passes: 0 resident weight panel (any shape that fits), 1 weights staged per stage.
  // (Both variants need > 128 registers without spilling, so a block is alone on its SM.)
  // A resident panel so large that only 16-channel stages fit beside it (tcn_k3_d8: Cin 256, K 3, a
  // 199 KB panel) halves the MMAs per stage and leaves no room for the x ring: there, 32-channel stages
  // with staged tap-major weights (dispatch.cpp copies them when w has x's dtype and Cin_g % 8 == 0)
  // are faster (session 8, H200, tcn bf16 forward 1.29 -> 1.04 ms, measured with
  // CONVKIT_DENSE_STAGE_WEIGHTS=1, which picks the same plan).
  const bool tap_major_ok = p.w_dtype == p.dtype && cin_g % 8 == 0;
  const int tries[2][4][2] = {{{2, 32}, {2, 16}, {1, 32}, {1, 16}}, {{1, 32}, {1, 16}, {2, 32}, {2, 16}}};
  for (int pass = dense_stage_weights_forced() ? 1 : 0; pass < 2; ++pass) {
    for (const auto& tr : tries[cout_g <= 64 ? 1 : 0]) {
      if (!make_geometry(p, q, tr[0], tr[1], pass == 0, limit)) continue;
      if (pass == 0 && q.cc == 16 && cin_g > 16 && tap_major_ok) {
        DensePlan wide = q;
        if (make_geometry(p, wide, tr[0], 32, false, limit)) q = wide;
      }
      q.blocks_per_sm = 1;
      q.m_tiles = ceil_div(cout_g, q.bm);
      q.j_tiles = ceil_div(p.out_length, q.bn);
      q.num_tiles = p.batch * q.j_tiles * p.groups * q.m_tiles;
      return true;
    }
  }
  return false;
}

}  // namespace

bool conv1d_fwd_dense_mma_supports(const Conv1dParams& p) {
  DensePlan q;
  if (!make_plan(p, q)) return false;
  // A reduction of fewer than 8 channels per tap wastes most of each 16-deep MMA step (w2v's first
  // layer, Cin = 1): the generic kernel is the better choice there.
  return q.cin_g >= 8;
}

bool conv1d_fwd_dense_mma_stages_weights(const Conv1dParams& p) {
  if (conv1d_fwd_dense_wgmma_supports(p, false)) return true;  // its weight tiles are tap-major copies too
  DensePlan q;
  return make_plan(p, q) && !q.resident && q.cin_g % 8 == 0;  // tap-major 16-byte units need Cin_g % 8 == 0
}

template <typename T, bool kRes, bool kRing>
cudaError_t launch_variant(const Conv1dParams& p, const DensePlan& q, unsigned grid, cudaStream_t stream) {
  auto kernel = conv1d_fwd_dense_mma_kernel<T, kRes, kRing>;
  cudaError_t err = allow_max_dynamic_smem(kernel);  // (q.smem_bytes <= the opt-in limit: make_geometry)
  if (err != cudaSuccess) return err;
  kernel<<<grid, kThreads, q.smem_bytes, stream>>>(p, q);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_typed(const Conv1dParams& p, const DensePlan& q, unsigned grid, cudaStream_t stream) {
  if (q.ring) return launch_variant<T, true, true>(p, q, grid, stream);
  if (q.resident) return launch_variant<T, true, false>(p, q, grid, stream);
  return launch_variant<T, false, false>(p, q, grid, stream);
}

cudaError_t launch_conv1d_fwd_dense_mma(const Conv1dParams& p, cudaStream_t stream) {
  if (conv1d_fwd_dense_wgmma_supports(p, true)) return launch_conv1d_fwd_dense_wgmma(p, stream);
  DensePlan q;
  if (!make_plan(p, q)) return cudaErrorInvalidValue;
  if (q.num_tiles == 0 || p.out_length <= 0) return cudaSuccess;
  int64_t grid = grid_for(q.num_tiles, p.num_sms, q.blocks_per_sm);
  if (q.resident) {
    // With gridDim.x a multiple of groups * m_tiles, a block's tiles (blockIdx.x + i * gridDim.x) all
    // have the same (group, m tile) (m tile, then group, vary fastest in the tile index), so its panel
    // is loaded once. Otherwise the kernel reloads it when the pair changes (still correct).
    const int64_t gm = p.groups * q.m_tiles;
    if (q.num_tiles > grid && gm <= grid) grid = grid / gm * gm;
  }
  if (p.dtype == DType::kFloat16) return launch_typed<__half>(p, q, static_cast<unsigned>(grid), stream);
  return launch_typed<__nv_bfloat16>(p, q, static_cast<unsigned>(grid), stream);
}

}  // namespace convkit
