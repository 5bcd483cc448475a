// Building blocks of the Hopper wgmma kernels (conv1d_fwd_dense_wgmma.cu, conv1d_bwd_weight_dense_wgmma.cu):
// the wgmma calls and fences (PTX ISA, "asynchronous warpgroup-level matrix instructions"), shared-memory
// matrix descriptors for the no-swizzle layouts, and the staging of an x window, which both kernels share:
//
//   x window: CC input channels x the positions a run of outputs touches, in shared memory as
//   [channel group of 8][position row][8 channels] (16-byte rows), positions phase-split
//   (row = (t % S) * Wq + t / S) so that for every tap k the outputs j0 .. j0 + n read the CONSECUTIVE rows
//   rb[k] .. rb[k] + n. For the forward that is the B operand (K-major: reduction = channels, N = outputs),
//   for grad-weight the B operand too (N-major: reduction = outputs, N = channels), at another start row
//   per tap. Large dilations get one window per tap ("segments").
//
// Only sm_90a device code has the instructions (CONVKIT_WGMMA_DEVICE); elsewhere they compile to nothing
// and the kernels trap (the host never picks them there).
#pragma once
#include <cstdint>
#include <type_traits>

#include "activation.cuh"
#include "common.cuh"
#include "mma_common.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CONVKIT_WGMMA_DEVICE 1
#endif

namespace convkit {
namespace wg {

// Shared-memory matrix descriptor, no swizzle: start address, leading byte offset (between core matrices
// adjacent in K), stride byte offset (between core matrices adjacent in M / N), all in 16-byte units. The same
// fields for K-major and (no-swizzle) MN-major operands: canonical layouts ((8,m),(T,2k)):((1T,SBO),(1,LBO))
// and ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)), T = 8 16-bit elements.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr >> 4) & 0x3FFFu) | (static_cast<uint64_t>((lbo >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFFu) << 32);
}

#define CONVKIT_WG_D32                                                                                      \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "  \
  "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define CONVKIT_WG_D64                                                                                      \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "  \
  "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "   \
  "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "   \
  "%62, %63}"
#define CONVKIT_WG_ACC32(d)                                                                                 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),          \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),    \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),  \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define CONVKIT_WG_ACC64(d)                                                                                 \
  CONVKIT_WG_ACC32(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]),       \
  "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]),  \
  "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),  \
  "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]),  \
  "+f"(d[62]), "+f"(d[63])

// d (64 x 128 fp32, the warpgroup's accumulator fragment) += A (64 x 16, descriptor da) * B (16 x 128, db),
// both K-major (the forward).
template <typename T>
__device__ __forceinline__ void mma_m64n128k16(float (&d)[64], uint64_t da, uint64_t db) {
#ifdef CONVKIT_WGMMA_DEVICE
  if constexpr (std::is_same<T, __half>::value) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " CONVKIT_WG_D64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : CONVKIT_WG_ACC64(d)
        : "l"(da), "l"(db), "r"(1));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " CONVKIT_WG_D64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : CONVKIT_WG_ACC64(d)
        : "l"(da), "l"(db), "r"(1));
  }
#endif
}

// d (64 x 64 fp32) += A (64 x 16, K-major) * B (16 x 64): TransB 0 K-major (the grad-input of
// conv1d_bwd_input_dense_tma.cu, the TMA grad-weight), 1 N-major (imm-trans-b = 1: the register-staged grad-weight).
template <typename T, int TransB>
__device__ __forceinline__ void mma_m64n64k16_t(float (&d)[32], uint64_t da, uint64_t db) {
#ifdef CONVKIT_WGMMA_DEVICE
  if constexpr (std::is_same<T, __half>::value) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " CONVKIT_WG_D32 ", %32, %33, p, 1, 1, 0, %35;\n}\n"
        : CONVKIT_WG_ACC32(d)
        : "l"(da), "l"(db), "r"(1), "n"(TransB));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " CONVKIT_WG_D32 ", %32, %33, p, 1, 1, 0, %35;\n}\n"
        : CONVKIT_WG_ACC32(d)
        : "l"(da), "l"(db), "r"(1), "n"(TransB));
  }
#endif
}
// d (64 x 8 fp32) += A (64 x 16) * B (16 x 8), both K-major (the TMA grad-weight's grad-bias: B all ones).
template <typename T>
__device__ __forceinline__ void mma_m64n8k16(float (&d)[4], uint64_t da, uint64_t db) {
#ifdef CONVKIT_WGMMA_DEVICE
  if constexpr (std::is_same<T, __half>::value) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "l"(da), "l"(db), "r"(1));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "l"(da), "l"(db), "r"(1));
  }
#endif
}
#undef CONVKIT_WG_D32
#undef CONVKIT_WG_D64
#undef CONVKIT_WG_ACC32
#undef CONVKIT_WG_ACC64

__device__ __forceinline__ void fence() {
#ifdef CONVKIT_WGMMA_DEVICE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void commit() {
#ifdef CONVKIT_WGMMA_DEVICE
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void wait() {
#ifdef CONVKIT_WGMMA_DEVICE
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Makes this thread's generic-proxy shared-memory writes (st.shared, cp.async) visible to the async
// proxy wgmma reads through (with the barrier that follows).
__device__ __forceinline__ void fence_proxy_async() {
#ifdef CONVKIT_WGMMA_DEVICE
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Raises (kInc) or lowers this warpgroup's per-thread register limit to N (a multiple of 8 in 24..256); every warp of
// the warpgroup executes it. sm_90a.
template <bool kInc, int N> __device__ __forceinline__ void set_max_regs() {
#ifdef CONVKIT_WGMMA_DEVICE
  if (kInc) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
  else asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
// Keeps the compiler from moving accumulator accesses across the wgmma fences / waits.
template <int N> __device__ __forceinline__ void fence_acc(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// ---- the x window ------------------------------------------------------------------------------------
struct XWindow {
  int nseg;      // 1: one contiguous window; K: one window per tap
  int wls;       // positions staged per segment (multiple of 8)
  int wq;        // rows per phase
  int seg_rows;  // s * wq
  int cgs;       // rows between channel groups (== 1 mod 8: spreads the transposing stores over the banks)
};

inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// The window for `outs` consecutive outputs (k taps, stride s, dilation d): one contiguous window, or one
// per tap when that stages fewer rows; false when the contiguous one would exceed max_wls positions.
inline bool plan_x_window(int outs, int k, int s, int d, int64_t max_wls, XWindow& w) {
  const int64_t span_one = static_cast<int64_t>(outs - 1) * s + 1;
  const int64_t wls_contig = round_up(7 + span_one + static_cast<int64_t>(k - 1) * d, 8);
  const int64_t wls_seg = round_up(7 + span_one, 8);
  const int64_t wq_contig = ceil_div(wls_contig, s), wq_seg = ceil_div(wls_seg, s);
  if (k > 1 && k * wq_seg < wq_contig) {
    w.nseg = k;
    w.wls = static_cast<int>(wls_seg);
    w.wq = static_cast<int>(wq_seg);
  } else {
    if (wls_contig > max_wls) return false;
    w.nseg = 1;
    w.wls = static_cast<int>(wls_contig);
    w.wq = static_cast<int>(wq_contig);
  }
  w.seg_rows = s * w.wq;
  w.cgs = static_cast<int>(round_up(static_cast<int64_t>(w.nseg) * w.seg_rows, 8)) + 1;
  return true;
}

// The window row of output 0's tap k, for a run of outputs whose first reads position start0 (= j0 * S - P).
__device__ __forceinline__ int window_row(const XWindow& w, int64_t start0, int64_t k, int64_t S, int64_t D) {
  int64_t o, seg;
  if (w.nseg > 1) {
    const int64_t st = start0 + k * D;
    o = st - tc::floor8(st);
    seg = k;
  } else {
    o = start0 - tc::floor8(start0) + k * D;
    seg = 0;
  }
  return static_cast<int>(seg * w.seg_rows + (o % S) * w.wq + o / S);
}

// One thread's unit of a window: 8 channels (rows row0, row0 + stride_c, ...; n_ch of them exist) x the 8
// positions pos .. pos + 7 (element stride stride_l; zero outside [0, len)) into rx = [channel][4 words].
// vec: stride_l == 1 and the 8 positions inside the row, so two 16-byte loads per channel cover them (one
// when aligned). All loads are issued before the realignment uses any (one memory round trip).
__device__ __forceinline__ void load_x_unit(const unsigned short* xr, int64_t row0, int64_t stride_c,
                                            int64_t stride_l, int64_t pos, int64_t len, int n_ch, bool vec,
                                            uint32_t (&rx)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) rx[i] = 0u;
  if (vec) {
    uint4 lo[8], hi[8];
    int mis[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const uintptr_t addr = reinterpret_cast<uintptr_t>(xr + row0 + c * stride_c);
      mis[c] = static_cast<int>((addr & 15) >> 1);
      const uint4* a = reinterpret_cast<const uint4*>(addr - 2 * mis[c]);
      lo[c] = make_uint4(0u, 0u, 0u, 0u);
      hi[c] = lo[c];
      if (c < n_ch) {
        lo[c] = tc::ldg_stream(a);
        // Both 16-byte chunks hold an element of the range, so neither read leaves the allocation.
        if (mis[c] != 0) hi[c] = tc::ldg_stream(a + 1);
      }
    }
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      uint32_t w[8] = {lo[c].x, lo[c].y, lo[c].z, lo[c].w, hi[c].x, hi[c].y, hi[c].z, hi[c].w};
      const int m = mis[c];
      if (m & 4) {
#pragma unroll
        for (int i = 0; i < 6; ++i) w[i] = w[i + 2];
      }
      if (m & 2) {
#pragma unroll
        for (int i = 0; i < 5; ++i) w[i] = w[i + 1];
      }
      if (m & 1) {
#pragma unroll
        for (int i = 0; i < 4; ++i) w[i] = __byte_perm(w[i], w[i + 1], 0x5432);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) rx[4 * c + i] = w[i];
    }
  } else {
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      if (c >= n_ch) break;
      const int64_t row = row0 + c * stride_c;
      uint32_t h[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int64_t pp = pos + e;
        h[e] = (pp >= 0 && pp < len) ? __ldg(xr + row + e * stride_l) : 0u;
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) rx[4 * c + e] = h[2 * e] | (h[2 * e + 1] << 16);
    }
  }
}

// rx (8 channels x positions t0 .. t0 + 7 of a segment), transposed into 8 position rows of 8 channels at their
// phase-split rows; base = the shared address of the unit's channel group and segment.
__device__ __forceinline__ void store_x_unit(uint32_t base, int t0, int s, int wq, const uint32_t (&rx)[32]) {
  int ph = t0 % s, qq = t0 / s;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const uint32_t sel = hi ? 0x7632u : 0x5410u;
      const uint32_t w0 = __byte_perm(rx[0 * 4 + j], rx[1 * 4 + j], sel);
      const uint32_t w1 = __byte_perm(rx[2 * 4 + j], rx[3 * 4 + j], sel);
      const uint32_t w2 = __byte_perm(rx[4 * 4 + j], rx[5 * 4 + j], sel);
      const uint32_t w3 = __byte_perm(rx[6 * 4 + j], rx[7 * 4 + j], sel);
      tc::sts128(base + (ph * wq + qq) * 16, w0, w1, w2, w3);
      if (++ph == s) { ph = 0; ++qq; }
    }
  }
}

using ::convkit::smem_optin_bytes;  // (common.cuh)

// The forward kernels' epilogue (wgmma and TMA-fed): coalesced stores of a C tile in shared memory (rows x cols
// 16-bit values of type T at c_base, pitch elements per row) to y rows co_first + row (those < cout_g) of group g,
// positions j_first + col (those < out_length): thread t of nt, 8 columns (16 bytes) per unit. `act` (the call's
// activation, kActNone for none) is applied here, to the rounded values, as torch's unfused activation(conv(x) + b)
// would: one copy of its code in this rolled loop instead of one per accumulator pair in the fully unrolled walk
// that fills the tile, which made the TMA forward's code 2-5x larger (session 38: 11096 against 2304 instructions,
// and GELU runs 3.3x slower in ci/tx_harness.cu on kb67).
//
// Rows of y that do not start on a 16-byte unit (an odd or not-multiple-of-8 out_length: kb76, kb67, w2v_k3s2) get
// 2-, 4- or 8-byte stores 16 bytes apart that way (store8_16bit), partial sectors: ci/store_micro.cu wrote such 2-byte
// stores at 0.32 TB/s on the H100, against 2.0-2.9 TB/s for whole 16-byte units. With p.realign_stores (CONVKIT_REALIGN_STORES=1, an experiment
// not yet run on a GPU), y rows contiguous and y 16-byte aligned, thread t takes instead the units of y itself: unit
// k of a row covers columns 8k - sh .. 8k - sh + 7, sh = how far column 0 sits past a unit of y, read from the tile by
// two 16-byte loads and a shift (store_units_realigned below); the unit at either end of the tile's columns, shared
// with the neighbouring tile, goes element by element.
// activation(v) of one rounded 16-bit value of type T, rounded again (the caller skips kActNone).
template <typename T>
__device__ __forceinline__ uint32_t activate_bits(int act, unsigned short v) {
  return tc::bits16<T>(activate(act, to_acc(from_bits<T>(v))));
}

template <typename T>
__device__ __forceinline__ void activate_words(int act, uint32_t (&w)[4]) {
  if (act == kActNone) return;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    w[i] = activate_bits<T>(act, static_cast<unsigned short>(w[i] & 0xffffu)) |
           (activate_bits<T>(act, static_cast<unsigned short>(w[i] >> 16)) << 16);
}

// Columns jl0 .. jl0 + 7 of a C tile row at shared address rbase (16-byte aligned; both 16-byte units touched lie
// inside the row when jl0 % 8 != 0, as store_units_realigned's interior units do) into w.
__device__ __forceinline__ void load8_columns(uint32_t rbase, int jl0, uint32_t (&w)[4]) {
  const int kq = jl0 >> 3, s = jl0 & 7;
  uint32_t W[8];
  asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(W[0]), "=r"(W[1]), "=r"(W[2]), "=r"(W[3])
               : "r"(rbase + kq * 16));
  if (s == 0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = W[i];
    return;
  }
  asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(W[4]), "=r"(W[5]), "=r"(W[6]), "=r"(W[7])
               : "r"(rbase + kq * 16 + 16));
  // the words W[wo] .. W[wo + 4] by selects (no dynamic register index), then a 16-bit funnel shift for odd s
  const int wo = s >> 1;
  uint32_t X[6], Y[5];
#pragma unroll
  for (int j = 0; j < 6; ++j) X[j] = (wo & 2) ? W[j + 2] : W[j];
#pragma unroll
  for (int j = 0; j < 5; ++j) Y[j] = (wo & 1) ? X[j + 1] : X[j];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = (s & 1) ? __funnelshift_r(Y[i], Y[i + 1], 16) : Y[i];
}

template <typename T>
__device__ __forceinline__ void store_units_realigned(const Conv1dParams& p, int64_t cout_g, uint32_t c_base,
                                                      int pitch, int rows, int cols, int t, int nt, int64_t b,
                                                      int64_t g, int64_t co_first, int64_t j_first, int act) {
  unsigned short* yr = static_cast<unsigned short*>(p.y);
  const int ncols = static_cast<int>(min(static_cast<int64_t>(cols), p.out_length - j_first));  // valid columns
  const int units_row = (cols >> 3) + 1;
#pragma unroll 1
  for (int u = t; u < rows * units_row; u += nt) {
    const int row = u / units_row, k = u - row * units_row;
    const int64_t co = co_first + row;
    if (co >= cout_g) continue;
    const int64_t row0 = b * p.y_stride_b + (g * cout_g + co) * p.y_stride_c + j_first;  // element of column 0
    const int jl0 = 8 * k - static_cast<int>(row0 & 7);  // the unit's first column (< 0 for the first unit)
    if (jl0 >= ncols) continue;
    const uint32_t rbase = c_base + row * pitch * 2;
    if (jl0 >= 0 && jl0 + 8 <= ncols) {
      uint32_t w[4];
      load8_columns(rbase, jl0, w);
      activate_words<T>(act, w);
      *reinterpret_cast<uint4*>(yr + row0 + jl0) = make_uint4(w[0], w[1], w[2], w[3]);
    } else {  // a unit shared with the neighbouring tile (or past out_length): this tile's columns only
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int jl = jl0 + i;
        if (jl < 0 || jl >= ncols) continue;
        unsigned short v;
        asm volatile("ld.shared.u16 %0, [%1];\n" : "=h"(v) : "r"(rbase + jl * 2));
        if (act != kActNone) v = static_cast<unsigned short>(activate_bits<T>(act, v));
        yr[row0 + jl] = v;
      }
    }
  }
}

template <typename T>
__device__ __forceinline__ void store_c_tile(const Conv1dParams& p, int64_t cout_g, uint32_t c_base, int pitch, int rows,
                                             int cols, int t, int nt, int64_t b, int64_t g, int64_t co_first,
                                             int64_t j_first, int act) {
  if (p.realign_stores && p.y_stride_l == 1 && (reinterpret_cast<uintptr_t>(p.y) & 15) == 0) {
    store_units_realigned<T>(p, cout_g, c_base, pitch, rows, cols, t, nt, b, g, co_first, j_first, act);
    return;
  }
  unsigned short* yr = static_cast<unsigned short*>(p.y);
  const int units_row = cols >> 3;
  const int64_t jn = p.out_length - j_first;  // valid columns of the tile
#pragma unroll 1
  for (int u = t; u < rows * units_row; u += nt) {
    const int row = u / units_row, jl = (u - row * units_row) * 8;
    const int64_t co = co_first + row;
    if (co >= cout_g || jl >= jn) continue;
    uint32_t w[4];
    asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "r"(c_base + (row * pitch + jl) * 2));
    activate_words<T>(act, w);
    const int64_t off = b * p.y_stride_b + (g * cout_g + co) * p.y_stride_c + (j_first + jl) * p.y_stride_l;
    if (p.y_stride_l == 1 && jl + 8 <= jn) {
      store8_16bit(yr + off, w);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i)
        if (jl + i < jn) yr[off + i * p.y_stride_l] = static_cast<unsigned short>(w[i >> 1] >> ((i & 1) * 16));
    }
  }
}

}  // namespace wg
}  // namespace convkit
