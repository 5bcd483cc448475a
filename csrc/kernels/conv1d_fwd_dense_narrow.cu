// Dense / grouped forward with a narrow reduction: Cin/groups < 8 and Cin/groups * K <= 64; dispatch.cpp
// also sends depthwise calls with a channel multiplier >= 8 here (wav2vec2's first layer: Cin 1, K 10,
// stride 5, Cout 512: groups = Cin = 1). Such a call is all output: each y element is a handful
// of FMAs, so the time is the y write, and tensor-core tiles (16-deep reductions) would idle. Any dtype
// (fp32 is IEEE FMA), weights of the input's dtype or fp32, any K / stride / dilation / padding, any
// strides of x and y.
//
// A block of kThreads threads covers kCoT output channels of one group and kThreads * kV output
// positions of one batch row; a thread computes kV consecutive positions x kCoT channels: for every
// (ci, k) of the reduction it loads the kV x values its positions need (one L1-resident window per
// warp) and does kV * kCoT FMAs with weights broadcast from shared memory; bias + activation in the
// epilogue. Where the group has 64 output channels or more, the tiled shape below (x window and weights in shared
// memory, lanes on consecutive positions) runs instead by default (CONVKIT_DENSE_NARROW_TILE=0 / =1: never / wherever
// it fits); the per-thread shapes serve the other calls. Two per-thread shapes:
//  * 128 threads, kV 8, kCoT 8 (16-bit dtypes; w2v_first bf16 1.27 ms on the H200): each channel's
//    8 outputs leave as the widest stores their address allows. y rows of odd length (w2v: Lout 49999)
//    are mostly 2-byte aligned, so a warp's store instruction writes 2 bytes into each of 16 sectors,
//    which is what 1.27 ms (15 % of the floor) looks like.
//  * 256 threads, kV 1, kCoT 16 (fp32 and fp64): lanes hold consecutive positions, so every store
//    instruction writes contiguous bytes of one row. Measured on w2v_first: fp32 1.84 -> 1.60 ms, but
//    bf16 1.27 -> 1.62 ms (x loads and FMAs per output grow 8x where 2-byte stores were the cost), hence
//    the choice by dtype. CONVKIT_DENSE_NARROW_COALESCED=1 / =0 forces one shape for every dtype.
// The same kernel with 4 channels per block (1 when Cout/groups is 1) and room for a reduction of up
// to 2048 (1024 in fp64) serves the opposite case, few output channels and a long reduction
// (Cout/groups <= 4, Cin/groups >= 8), where a tensor-core tile would compute 64 or 128 rows to keep
// 1-4 of them: the grad-input of wav2vec2's first layer (Cin 1 -> Cout 512: each phase is Cin 512 ->
// Cout 1). "narrow_out" in the kernel names; w2v_first fwd+bwd bf16 13.19 -> 7.14 ms, fp32 32.6 ->
// 16.8 ms on the H200. CONVKIT_DENSE_NARROW_OUT=0 switches it off.
// Calls whose (K, S, D) has an entry of the table family "dense_narrow" (csrc/specializations.json) run that entry's
// kernel instead (kernels/conv1d_fwd_dense_narrow_spec.cuh: the runs shape with compile-time taps, same bits).
#include <algorithm>
#include <cstdint>

#include "activation.cuh"
#include "common.cuh"
#include "dense_narrow_common.cuh"
#include "launchers.h"

namespace convkit {
namespace {

constexpr int kMaxRed = 64;              // Cin/groups * K
constexpr int kMaxCinG = 7;              // Cin/groups (8 and more: the tensor-core / fp32 tile kernels)
constexpr int kMaxCoutGOut = 4;          // narrow_out: Cout/groups
constexpr int kMaxRedOut = 2048;         // narrow_out: Cin/groups * K (fp32 accumulators; half for fp64)
constexpr int kMaxCoutGOut8 = 8;         // narrow_out8: Cout/groups (the grad-input's phases as channels)
constexpr int kMaxRedOut8 = 1024;        // narrow_out8: Cin/groups * K (the weights' 32 KB)

// kThreads threads; kV consecutive positions x kCoT channels per thread; reductions up to kMaxR
// (above kMaxRed: x 4 bytes / sizeof(A), so that the weights' shared array stays within 32 KB).
template <typename T, int kThreads, int kV, int kCoT, int kMaxR>
__global__ void __launch_bounds__(kThreads) conv1d_fwd_dense_narrow_kernel(const Conv1dParams p) {
  using A = typename AccOf<T>::type;
  constexpr int kBlockN = kThreads * kV;  // output positions per block
  constexpr int kR = kMaxR <= kMaxRed ? kMaxR : kMaxR * 4 / static_cast<int>(sizeof(A));
  __shared__ A ws[kCoT][kR];  // the block's weights, [co][ci * K + k]
  __shared__ A bs[kCoT];

  const int64_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
  const int K = static_cast<int>(p.kernel_size);
  const int red = static_cast<int>(cin_g) * K;
  const int64_t co_tiles = ceil_div(cout_g, kCoT), j_tiles = ceil_div(p.out_length, kBlockN);
  // blockIdx.x = ((b * groups + g) * j_tiles + jt) * co_tiles + ct: the channel tiles of one x window
  // run next to each other (its reads hit L1 / L2).
  int64_t rest, ct, jt, g, b;
  divmod(static_cast<int64_t>(blockIdx.x), co_tiles, rest, ct);
  divmod(rest, j_tiles, rest, jt);
  divmod(rest, p.groups, b, g);
  const int64_t co0 = g * cout_g + ct * kCoT;  // first output channel (absolute)
  const int n_co = static_cast<int>(min(static_cast<int64_t>(kCoT), cout_g - ct * kCoT));

  for (int i = threadIdx.x; i < kCoT * red; i += kThreads) {
    const int c = i / red, r = i - c * red;
    const int ci = r / K, k = r - ci * K;
    ws[c][r] = c < n_co ? static_cast<A>(load_param<T>(p, p.w, (co0 + c) * p.w_stride_o + ci * p.w_stride_i +
                                                                   k * p.w_stride_k))
                        : A(0);
  }
  if (threadIdx.x < kCoT)
    bs[threadIdx.x] = p.bias != nullptr && static_cast<int>(threadIdx.x) < n_co
                          ? static_cast<A>(load_param<T>(p, p.bias, co0 + threadIdx.x))
                          : A(0);
  __syncthreads();

  const int64_t j0 = jt * kBlockN + static_cast<int64_t>(threadIdx.x) * kV;  // this thread's first output
  if (j0 >= p.out_length) return;
  const int64_t S = p.stride, D = p.dilation;
  const int64_t pos0 = j0 * S - p.pad_left;  // x position of tap 0 of output j0
  // every position this thread reads inside the row: no bounds checks
  const bool interior = pos0 >= 0 && pos0 + (kV - 1) * S + (K - 1) * D < p.in_length;

  A acc[kCoT][kV];
#pragma unroll
  for (int c = 0; c < kCoT; ++c)
#pragma unroll
    for (int v = 0; v < kV; ++v) acc[c][v] = A(0);

  const int64_t x_row0 = b * p.x_stride_b + g * cin_g * p.x_stride_c;
  // One step of the reduction: r = ci * K + k.
  auto step = [&](int r, int ci, int k) {
    const int64_t base = pos0 + k * D;
    const int64_t row = x_row0 + ci * p.x_stride_c;
    A xv[kV];
    if (interior) {
#pragma unroll
      for (int v = 0; v < kV; ++v) xv[v] = load<T>(p.x, row + (base + v * S) * p.x_stride_l);
    } else {
#pragma unroll
      for (int v = 0; v < kV; ++v) {
        const int64_t pos = base + v * S;
        xv[v] = pos >= 0 && pos < p.in_length ? static_cast<A>(load<T>(p.x, row + pos * p.x_stride_l)) : A(0);
      }
    }
#pragma unroll
    for (int c = 0; c < kCoT; ++c) {
      const A wv = ws[c][r];
#pragma unroll
      for (int v = 0; v < kV; ++v) acc[c][v] = fma(wv, xv[v], acc[c][v]);
    }
  };
  if constexpr (kMaxR <= kMaxRed) {
    for (int r = 0; r < red; ++r) {
      const int ci = r / K;
      step(r, ci, r - ci * K);
    }
  } else {  // long reductions (narrow_out): no division per step
    for (int ci = 0, r = 0; ci < cin_g; ++ci)
      for (int k = 0; k < K; ++k, ++r) step(r, ci, k);
  }

  narrow::store_outputs<T, kV, kCoT>(p, acc, bs, b, co0, n_co, j0);
}

// The tiled shape (session 38, opt-in: CONVKIT_DENSE_NARROW_TILE=1): a block of kTileWarps warps covers kTileCo = 8 *
// kTileWarps output channels x kTileN = 256 positions of one batch row and group. Its x window (every position its
// outputs read, per input channel) and its weights go to shared memory first (fp32 / fp64, zeros outside x), so the
// loop has no bounds checks and no global loads; warp w computes channels 8w .. 8w + 7, lane l the positions
// l + 32 i (i < 8): 64 accumulators, 64 FMAs per reduction step on 8 x values and 8 broadcast weights. Every store
// instruction then writes 32 consecutive positions of one row (64 contiguous bytes in 16-bit, 128 in fp32),
// whatever the row's alignment; the runs shape above wrote 2-byte pieces 16 bytes apart where rows are odd.
// Shared memory: red * kTileCo weights + Cin/groups * ((kTileN - 1) S + (K - 1) D + 1) x values, at most
// kTileSmem bytes less the static bias array (else the shapes above).
// Measured: H200, bf16, session 38, with the channel tiles of one window next to each other in the grid: w2v_first
// forward 1.322 ms against 1.274 for the runs shape. With the grid as now (the position tiles of one row band next
// to each other), H100, session 41: bf16 1.251 ms against 1.640 for the runs shape (the table entry), fp32 1.199
// against 2.516 for the coalesced shape; hence the default above. What still bounds it: ci/store_micro.cu (H100) wrote
// this y shape (rows of 99998 bytes) at 0.96-1.02 TB/s with this kernel's stores (a warp writes 64 contiguous
// bytes), 0.32 TB/s with the runs shape's 2-byte stores 16 bytes apart, 1.8 TB/s with 4-byte aligned pairs and
// 2.0 TB/s with rows staged in shared memory and written as aligned 16-byte units, against 2.9 TB/s for flat
// 16-byte stores.
constexpr int kTileWarps = 8, kTileCo = 8 * kTileWarps, kTileN = 256, kTileSmem = 48 * 1024;
// The staged epilogue (opt-in, CONVKIT_DENSE_NARROW_STAGED=1; 16-bit y with contiguous, 16-byte aligned rows): each
// warp writes its 8 rows in two halves of 128 positions through its own shared-memory rows of kStageW elements,
// each row placed so that the element at a 16-byte unit of y lands on a 16-byte unit of shared memory; then lane u
// moves unit u of the row with one 16-byte load and one 16-byte store (a warp store writes up to 512 contiguous
// bytes), element by element only in the two units a piece shares with its neighbours. Why: ci/store_micro.cu
// (H100) wrote w2v_first's y (rows of 99998 bytes) at 2.0 TB/s so, against ~1.0 TB/s with lanes writing 2-byte
// elements (this kernel's stores otherwise). Not yet run on a GPU.
constexpr int kStageHalf = kTileN / 2, kStageW = kStageHalf + 8;
constexpr int kStageBytes = kTileWarps * 8 * kStageW * 2;  // shared memory the staged epilogue adds

// The staged epilogue's shared-memory rows start here (bytes from the dynamic array's start): after the weights and
// the x window, rounded up to 16 bytes.
__host__ __device__ inline size_t narrow_stage_offset(int64_t red, int64_t cin_g, int64_t span, size_t elt) {
  return (static_cast<size_t>(red * kTileCo + cin_g * span) * elt + 15) & ~size_t{15};
}

template <typename T, bool kStaged>
__global__ void __launch_bounds__(32 * kTileWarps) conv1d_fwd_dense_narrow_tile_kernel(const Conv1dParams p, int span) {
  using A = typename AccOf<T>::type;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int64_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
  const int K = static_cast<int>(p.kernel_size), S = static_cast<int>(p.stride), D = static_cast<int>(p.dilation);
  const int red = static_cast<int>(cin_g) * K;
  A* ws = reinterpret_cast<A*>(smem_raw);  // [red][kTileCo]
  A* xs = ws + red * kTileCo;              // [cin_g][span]
  __shared__ A bs[kTileCo];

  const int64_t co_tiles = ceil_div(cout_g, int64_t{kTileCo}), j_tiles = ceil_div(p.out_length, int64_t{kTileN});
  int64_t rest, ct, jt, g, b;  // the position tiles of one band of rows next to each other
  divmod(static_cast<int64_t>(blockIdx.x), j_tiles, rest, jt);
  divmod(rest, co_tiles, rest, ct);
  divmod(rest, p.groups, b, g);
  const int64_t co0 = g * cout_g + ct * kTileCo;
  const int n_co = static_cast<int>(min(int64_t{kTileCo}, cout_g - ct * kTileCo));
  const int64_t j0 = jt * kTileN;
  const int64_t pos0 = j0 * S - p.pad_left;  // x position of local window index 0

  narrow::stage_weights<T>(p, ws, bs, co0, n_co, red, K, kTileCo);
  const int64_t x_row0 = b * p.x_stride_b + g * cin_g * p.x_stride_c;
  for (int ci = 0; ci < cin_g; ++ci) {
    const int64_t row = x_row0 + ci * p.x_stride_c;
    for (int t = threadIdx.x; t < span; t += blockDim.x) {
      const int64_t pos = pos0 + t;
      xs[ci * span + t] = pos >= 0 && pos < p.in_length ? static_cast<A>(load<T>(p.x, row + pos * p.x_stride_l)) : A(0);
    }
  }
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = warp * 8;
  if (c0 >= n_co) return;
  A acc[8][8];  // [channel][position i: lane + 32 i]
#pragma unroll
  for (int c = 0; c < 8; ++c)
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[c][i] = A(0);
  for (int ci = 0, r = 0; ci < cin_g; ++ci) {
    const A* xrow = xs + ci * span + lane * S;
    for (int k = 0; k < K; ++k, ++r) {
      A wv[8];
      narrow::load_tap_weights(ws + r * kTileCo + c0, wv);
      A xv[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) xv[i] = xrow[k * D + 32 * i * S];
#pragma unroll
      for (int c = 0; c < 8; ++c)
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[c][i] = fma(wv[c], xv[i], acc[c][i]);
    }
  }

  T* y = static_cast<T*>(p.y);
  if constexpr (kStaged) {
    static_assert(sizeof(T) == 2, "the staged epilogue moves 16-bit elements");
    unsigned short* st = reinterpret_cast<unsigned short*>(smem_raw + narrow_stage_offset(red, cin_g, span, sizeof(A))) +
                         warp * 8 * kStageW;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t js = j0 + h * kStageHalf;  // the piece [js, je) of each of the warp's rows
      if (js >= p.out_length) break;
      const int64_t je = min(js + kStageHalf, p.out_length);
      int sh[8];  // row c's position js sits sh[c] elements past a 16-byte unit of y
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        sh[c] = static_cast<int>((b * p.y_stride_b + (co0 + c0 + c) * p.y_stride_c + js) & 7);
        if (c0 + c >= n_co) continue;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const T v = from_acc<T>(activate(p.activation, acc[c][4 * h + i] + bs[c0 + c]));
          unsigned short u16;
          memcpy(&u16, &v, 2);
          st[c * kStageW + sh[c] + lane + 32 * i] = u16;  // position js + lane + 32 i
        }
      }
      __syncwarp();
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        if (c0 + c >= n_co) break;
        unsigned short* yrow = reinterpret_cast<unsigned short*>(y + b * p.y_stride_b + (co0 + c0 + c) * p.y_stride_c);
        const int64_t a0 = js - sh[c];  // the unit holding js; unit u covers positions a0 + 8u .. a0 + 8u + 7
        const int units = static_cast<int>((je - a0 + 7) / 8);  // <= 17
        const unsigned short* src = st + c * kStageW;           // position a0 + t at src[t]
        for (int u = lane; u < units; u += 32) {
          const int64_t pu = a0 + 8 * u;
          if (pu >= js && pu + 8 <= je) {
            *reinterpret_cast<uint4*>(yrow + pu) = *reinterpret_cast<const uint4*>(src + 8 * u);
          } else {  // a unit shared with the neighbouring piece: this piece's elements only
#pragma unroll
            for (int v = 0; v < 8; ++v)
              if (pu + v >= js && pu + v < je) yrow[pu + v] = src[8 * u + v];
          }
        }
      }
      __syncwarp();  // the next half reuses the rows
    }
  } else {
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      if (c0 + c >= n_co) break;
      T* yrow = y + b * p.y_stride_b + (co0 + c0 + c) * p.y_stride_c;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int64_t j = j0 + lane + 32 * i;
        if (j < p.out_length) yrow[j * p.y_stride_l] = from_acc<T>(activate(p.activation, acc[c][i] + bs[c0 + c]));
      }
    }
  }
}

// CONVKIT_DENSE_NARROW_TILE (read once per process): 1 / 0 = "1" / "0", -1 unset.
int narrow_tile_forced() {
  static const int forced = env_forced("CONVKIT_DENSE_NARROW_TILE");
  return forced;
}

// The tiled shape's accumulator size in bytes (fp32, or fp64 for fp64): its weights, x window and bias array.
int64_t narrow_tile_elt(const Conv1dParams& p) { return p.dtype == DType::kFloat64 ? 8 : 4; }

// The tiled shape's dynamic shared memory for an x window of `span` positions: weights and window, and the staged
// epilogue's rows after them where `staged`.
int64_t narrow_tile_smem(const Conv1dParams& p, int64_t span, bool staged) {
  const int64_t cin_g = p.in_channels / p.groups, red = cin_g * p.kernel_size, elt = narrow_tile_elt(p);
  return staged ? static_cast<int64_t>(narrow_stage_offset(red, cin_g, span, elt)) + kStageBytes
                : (red * kTileCo + cin_g * span) * elt;
}

// The tiled shape's x window per input channel, or 0 where its shared memory (with the staged epilogue's rows where
// `staged`) would pass kTileSmem.
int64_t narrow_tile_span(const Conv1dParams& p, bool staged) {
  const int64_t span = (kTileN - 1) * p.stride + (p.kernel_size - 1) * p.dilation + 1;
  if (span >= (int64_t{1} << 20)) return 0;
  // (kTileSmem less the static bias array: the dynamic part's default limit is 48 KB with it)
  return narrow_tile_smem(p, span, staged) + kTileCo * narrow_tile_elt(p) > kTileSmem ? 0 : span;
}

// The staged epilogue: asked for (CONVKIT_DENSE_NARROW_STAGED=1, read once per process) and possible (16-bit y,
// contiguous rows, y 16-byte aligned).
bool narrow_staged(const Conv1dParams& p) {
  static const bool on = env_equals("CONVKIT_DENSE_NARROW_STAGED", "1");
  return on && (p.dtype == DType::kFloat16 || p.dtype == DType::kBFloat16) && p.y_stride_l == 1 &&
         reinterpret_cast<uintptr_t>(p.y) % 16 == 0;
}

// The few-output-channel use (narrow_out, narrow_out8) with lanes on consecutive positions (session 38, opt-in:
// CONVKIT_DENSE_NARROW_OUT_LANES=1): a warp computes 256 outputs (lane + 32 i, i < 8) of every output channel of the
// group (kCoT >= Cout/groups: 1, 4 or 8), a block four warps on consecutive ranges, the weights in shared memory.
// Each x load instruction of a warp then reads 32 consecutive positions of one row (64 contiguous bytes in 16-bit
// at stride 1) where the per-thread shape's (8 consecutive positions per thread) touched 16 sectors 16 bytes apart.
// Aim: w2v_first's grad-input (its five phases as one convolution, narrow_out8), 1.392 ms on the H200 for 819 MB of
// dy, about 590 GB/s. Measured (H100, session 41): w2v_first fwd+bwd bf16 4.20 ms against 4.00 without it, fp32 5.77
// against 5.78; it stays opt-in.
constexpr int kLanesWarps = 4, kLanesN = 256 * kLanesWarps;

template <typename T, int kCoT>
__global__ void __launch_bounds__(32 * kLanesWarps) conv1d_fwd_dense_narrow_out_lanes_kernel(const Conv1dParams p) {
  using A = typename AccOf<T>::type;
  constexpr int kR = static_cast<int>(32768 / sizeof(A)) / kCoT;  // reductions up to kR: 32 KB of weights
  __shared__ __align__(16) A ws[kR * kCoT];                        // [ci * K + k][c]
  __shared__ A bs[kCoT];
  const int64_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
  const int K = static_cast<int>(p.kernel_size);
  const int red = static_cast<int>(cin_g) * K;
  const int n_co = static_cast<int>(cout_g);  // <= kCoT (the launcher)
  const int64_t j_tiles = ceil_div(p.out_length, int64_t{kLanesN});
  int64_t rest, jt, g, b;
  divmod(static_cast<int64_t>(blockIdx.x), j_tiles, rest, jt);
  divmod(rest, p.groups, b, g);
  const int64_t co0 = g * cout_g;
  narrow::stage_weights<T>(p, ws, bs, co0, n_co, red, K, kCoT);
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t jw = jt * kLanesN + warp * 256;  // the warp's first output
  if (jw >= p.out_length) return;
  const int64_t S = p.stride, D = p.dilation, L = p.in_length, sl = p.x_stride_l;
  // every x position the warp's 256 outputs read (also those past out_length) inside the row: no bounds checks
  const bool interior = jw * S - p.pad_left >= 0 && (jw + 255) * S - p.pad_left + (K - 1) * D < L;
  A acc[kCoT][8];
#pragma unroll
  for (int c = 0; c < kCoT; ++c)
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[c][i] = A(0);
  const T* xg = static_cast<const T*>(p.x) + b * p.x_stride_b + g * cin_g * p.x_stride_c;
  const int64_t pos_lane = (jw + lane) * S - p.pad_left;  // tap 0's x position for the lane's first output
  const int64_t step = 32 * S;                             // positions between the lane's outputs
  for (int ci = 0, r = 0; ci < cin_g; ++ci) {
    const T* xrow = xg + ci * p.x_stride_c;
    for (int k = 0; k < K; ++k, ++r) {
      const int64_t pos = pos_lane + k * D;
      A xv[8];
      if (interior) {
        const T* xp = xrow + pos * sl;
#pragma unroll
        for (int i = 0; i < 8; ++i) xv[i] = static_cast<A>(to_acc(raw_load(xp, i * step * sl)));
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const int64_t q = pos + i * step;
          xv[i] = q >= 0 && q < L ? static_cast<A>(load<T>(xrow, q * sl)) : A(0);
        }
      }
      A wv[kCoT];
      narrow::load_tap_weights(ws + r * kCoT, wv);
#pragma unroll
      for (int c = 0; c < kCoT; ++c)
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[c][i] = fma(wv[c], xv[i], acc[c][i]);
    }
  }

  T* y = static_cast<T*>(p.y);
#pragma unroll
  for (int c = 0; c < kCoT; ++c) {
    if (c >= n_co) break;
    T* yrow = y + b * p.y_stride_b + (co0 + c) * p.y_stride_c;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int64_t j = jw + lane + 32 * i;
      if (j < p.out_length) yrow[j * p.y_stride_l] = from_acc<T>(activate(p.activation, acc[c][i] + bs[c]));
    }
  }
}

bool narrow_out_lanes_enabled() {
  static const bool on = env_equals("CONVKIT_DENSE_NARROW_OUT_LANES", "1");
  return on;
}

// The lanes shape for a call narrow_out or narrow_out8 supports (their reduction limits are within kR).
cudaError_t launch_narrow_out_lanes(const Conv1dParams& p, cudaStream_t stream) {
  const int64_t cout_g = p.out_channels / p.groups;
  const int64_t tiles = p.batch * p.groups * ceil_div(p.out_length, int64_t{kLanesN});
  if (tiles == 0) return cudaSuccess;
  if (tiles >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  CONVKIT_DISPATCH_DTYPE(p.dtype, {
    const auto run = [&](auto kernel) { kernel<<<static_cast<unsigned>(tiles), 32 * kLanesWarps, 0, stream>>>(p); };
    if (cout_g == 1)
      run(conv1d_fwd_dense_narrow_out_lanes_kernel<scalar_t, 1>);
    else if (cout_g <= 4)
      run(conv1d_fwd_dense_narrow_out_lanes_kernel<scalar_t, 4>);
    else
      run(conv1d_fwd_dense_narrow_out_lanes_kernel<scalar_t, 8>);
  });
  return cudaGetLastError();
}

// The two block shapes (see the top of the file): threads, positions and channels per thread.
struct NarrowShape {
  int threads, v, cot;
};
constexpr NarrowShape kRuns{128, 8, 8};
constexpr NarrowShape kCoalesced{256, 1, 16};
constexpr NarrowShape kOut{128, 8, kMaxCoutGOut};
constexpr NarrowShape kOut8{128, 8, kMaxCoutGOut8};
constexpr NarrowShape kOut1{128, 8, 1};  // narrow_out with Cout/groups == 1 (no FMAs on zero weights)

// The kV = 1 shape for 4- and 8-byte dtypes; CONVKIT_DENSE_NARROW_COALESCED=1 / =0 forces it on / off
// for every dtype (read once per process).
// 1 / 0: CONVKIT_DENSE_NARROW_COALESCED=1 / =0; -1: unset.
int narrow_coalesced_forced() {
  static const int forced = env_forced("CONVKIT_DENSE_NARROW_COALESCED");
  return forced;
}
bool narrow_coalesced(DType dtype) {
  if (narrow_coalesced_forced() >= 0) return narrow_coalesced_forced() == 1;
  return dtype == DType::kFloat32 || dtype == DType::kFloat64;
}

// The tiled shape (where its window fits, narrow_tile_span): by default where the group has a whole tile of output
// channels (Cout/groups >= 64: every warp of the block busy) and no per-thread shape is forced;
// CONVKIT_DENSE_NARROW_TILE=1 wherever it fits, =0 never. Measured on w2v_first_k10s5 (Cout 512; H100, CUDA graphs,
// session 41): bf16 forward 1.251 ms against 1.640 for the per-thread 8 x 8 shape (the table's K 10 S 5 entry then),
// fp32 1.199 against 2.516 (the 1 x 16 shape).
bool narrow_tile_wanted(const Conv1dParams& p) {
  if (narrow_tile_forced() >= 0) return narrow_tile_forced() == 1;
  return narrow_coalesced_forced() < 0 && p.out_channels / p.groups >= kTileCo;
}

// The few-output-channel use, on unless CONVKIT_DENSE_NARROW_OUT=0 (read once per process).
bool narrow_out_enabled() {
  static const bool off = env_equals("CONVKIT_DENSE_NARROW_OUT", "0");
  return !off;
}

int64_t narrow_tiles(const Conv1dParams& p, const NarrowShape& s) {
  const int64_t cout_g = p.out_channels / p.groups;
  return p.batch * p.groups * ceil_div(p.out_length, int64_t{s.threads} * s.v) * ceil_div(cout_g, int64_t{s.cot});
}

template <int kThreads, int kV, int kCoT, int kMaxR>
cudaError_t launch_shape(const Conv1dParams& p, int64_t tiles, cudaStream_t stream) {
  CONVKIT_DISPATCH_DTYPE(p.dtype, {
    conv1d_fwd_dense_narrow_kernel<scalar_t, kThreads, kV, kCoT, kMaxR>
        <<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(p);
  });
  return cudaGetLastError();
}

}  // namespace

bool conv1d_fwd_dense_narrow_shape_forced() { return narrow_tile_forced() >= 0 || narrow_coalesced_forced() >= 0; }

bool conv1d_fwd_dense_narrow_supports(const Conv1dParams& p) {
  if (p.groups < 1 || p.in_channels % p.groups || p.out_channels % p.groups) return false;
  const int64_t cin_g = p.in_channels / p.groups;
  return cin_g >= 1 && cin_g <= kMaxCinG && p.kernel_size >= 1 && cin_g * p.kernel_size <= kMaxRed &&
         narrow_tiles(p, kRuns) < (int64_t{1} << 31) && narrow_tiles(p, kCoalesced) < (int64_t{1} << 31) &&
         narrow_tiles(p, NarrowShape{kTileN, 1, kTileCo}) < (int64_t{1} << 31);
}

cudaError_t launch_conv1d_fwd_dense_narrow(const Conv1dParams& p, cudaStream_t stream) {
  if (!conv1d_fwd_dense_narrow_supports(p)) return cudaErrorInvalidValue;
  bool staged = narrow_staged(p);
  int64_t span = 0;
  if (narrow_tile_wanted(p)) {
    span = narrow_tile_span(p, staged);
    if (span == 0 && staged) {  // the staging rows do not fit beside this window: the tiled shape unstaged
      staged = false;
      span = narrow_tile_span(p, false);
    }
  }
  if (span > 0) {
    const int64_t cout_g = p.out_channels / p.groups;
    const int64_t tiles =
        p.batch * p.groups * ceil_div(p.out_length, int64_t{kTileN}) * ceil_div(cout_g, int64_t{kTileCo});
    if (tiles == 0) return cudaSuccess;
    // (fewer warps where the group has fewer channels than a tile: idle warps would only load)
    const int warps = static_cast<int>(std::min<int64_t>(kTileWarps, ceil_div(cout_g, int64_t{8})));
    const size_t smem = static_cast<size_t>(narrow_tile_smem(p, span, staged));
    CONVKIT_DISPATCH_DTYPE(p.dtype, {
      constexpr bool k16 = sizeof(scalar_t) == 2;  // (staged only holds for 16-bit dtypes)
      if (staged)
        conv1d_fwd_dense_narrow_tile_kernel<scalar_t, k16>
            <<<static_cast<unsigned>(tiles), 32 * warps, smem, stream>>>(p, static_cast<int>(span));
      else
        conv1d_fwd_dense_narrow_tile_kernel<scalar_t, false>
            <<<static_cast<unsigned>(tiles), 32 * warps, smem, stream>>>(p, static_cast<int>(span));
    });
    return cudaGetLastError();
  }
  const bool coalesced = narrow_coalesced(p.dtype);
  const int64_t tiles = narrow_tiles(p, coalesced ? kCoalesced : kRuns);
  if (tiles == 0) return cudaSuccess;
  if (coalesced) return launch_shape<kCoalesced.threads, kCoalesced.v, kCoalesced.cot, kMaxRed>(p, tiles, stream);
  return launch_shape<kRuns.threads, kRuns.v, kRuns.cot, kMaxRed>(p, tiles, stream);
}

bool conv1d_fwd_dense_narrow_out_supports(const Conv1dParams& p) {
  if (!narrow_out_enabled()) return false;
  if (p.groups < 1 || p.in_channels % p.groups || p.out_channels % p.groups || p.kernel_size < 1) return false;
  const int64_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
  const int64_t max_red = p.dtype == DType::kFloat64 ? kMaxRedOut / 2 : kMaxRedOut;
  return cin_g > kMaxCinG && cout_g <= kMaxCoutGOut && cin_g * p.kernel_size <= max_red &&
         narrow_tiles(p, kOut) < (int64_t{1} << 31);  // (kOut1: the same tile count when Cout/groups == 1)
}

cudaError_t launch_conv1d_fwd_dense_narrow_out(const Conv1dParams& p, cudaStream_t stream) {
  if (!conv1d_fwd_dense_narrow_out_supports(p)) return cudaErrorInvalidValue;
  if (narrow_out_lanes_enabled()) return launch_narrow_out_lanes(p, stream);
  const bool one = p.out_channels == p.groups;
  const int64_t tiles = narrow_tiles(p, one ? kOut1 : kOut);
  if (tiles == 0) return cudaSuccess;
  if (one) return launch_shape<kOut1.threads, kOut1.v, kOut1.cot, kMaxRedOut>(p, tiles, stream);
  return launch_shape<kOut.threads, kOut.v, kOut.cot, kMaxRedOut>(p, tiles, stream);
}

// 5..8 output channels per group (dispatch.cpp gives it only the grad-input's stride phases as one convolution,
// unified_grad_input: wav2vec2's first layer, Cin 1 at stride 5, reads dy once instead of once per phase).
bool conv1d_fwd_dense_narrow_out8_supports(const Conv1dParams& p) {
  if (!narrow_out_enabled()) return false;
  if (p.groups < 1 || p.in_channels % p.groups || p.out_channels % p.groups || p.kernel_size < 1) return false;
  const int64_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
  const int64_t max_red = p.dtype == DType::kFloat64 ? kMaxRedOut8 / 2 : kMaxRedOut8;
  return cin_g > kMaxCinG && cout_g > kMaxCoutGOut && cout_g <= kMaxCoutGOut8 && cin_g * p.kernel_size <= max_red &&
         narrow_tiles(p, kOut8) < (int64_t{1} << 31);
}

cudaError_t launch_conv1d_fwd_dense_narrow_out8(const Conv1dParams& p, cudaStream_t stream) {
  if (!conv1d_fwd_dense_narrow_out8_supports(p)) return cudaErrorInvalidValue;
  if (narrow_out_lanes_enabled()) return launch_narrow_out_lanes(p, stream);
  const int64_t tiles = narrow_tiles(p, kOut8);
  if (tiles == 0) return cudaSuccess;
  return launch_shape<kOut8.threads, kOut8.v, kOut8.cot, kMaxRedOut8>(p, tiles, stream);
}

}  // namespace convkit
