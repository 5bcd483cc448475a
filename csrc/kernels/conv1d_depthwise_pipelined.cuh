// Depthwise conv1d, pipelined kernels for the common case: fixed (K, S, D) from the specialisation
// table, fp32/fp16/bf16, rows contiguous and 16-byte aligned (x.stride(2) == 1 and the other strides
// multiples of 16 bytes), left padding <= (K - 1) * D. Everything else runs the staged kernels of
// conv1d_depthwise.cuh.
//
// Why a second design: the staged kernels spend dozens of instructions per element (per-element
// conversion and shared stores with bank-padding arithmetic, 64-bit tile decoding, a barrier pair
// per tile) and bf16 runs no faster than fp32 there (28-36 % of the floor on the H200,
// benchmarks/NOTES.md). Here:
//   - the input window of a tile is copied global -> shared with cp.async, 16 bytes per instruction,
//     raw (no conversion), kStages tiles ahead, so loads are always in flight without registers;
//   - windows start at a 16-byte boundary; the remaining shift (-pad mod 16 bytes) is the same for
//     every tile of a launch, and each thread applies it to the 16-byte words it reads with a few
//     selects / byte permutes (read_window), so shared reads are 16-byte and conflict-free;
//   - one barrier per tile.
#pragma once

#include <cstdint>

#include "activation.cuh"
#include "common.cuh"

namespace convkit {
namespace dw {

// The forward of N consecutive outputs from their inputs (xin[m*S + k*D] is output m's tap k): bias
// plus the taps, then the fused activation. The pipelined, direct and streaming forwards share it.
template <int K, int S, int D, int N, int NW>
__device__ __forceinline__ void fwd_taps(const float (&w)[K], const float (&xin)[NW], float bias, int activation,
                                         float (&acc)[N]) {
#pragma unroll
  for (int m = 0; m < N; ++m) {
    acc[m] = bias;
#pragma unroll
    for (int k = 0; k < K; ++k) acc[m] += w[k] * xin[m * S + k * D];
  }
  if (activation != kActNone) {
#pragma unroll
    for (int m = 0; m < N; ++m) acc[m] = activate(activation, acc[m]);
  }
}

// Issues the copies of `nslots` 16-byte slots of one row into `dst`: slot s holds row elements
// [q0 + s*VE, +VE), zero outside [0, len). q0 is a multiple of VE and the row is 16-byte aligned,
// so a slot is inside, outside, or cut by the row's end (then its valid prefix is copied).
// The block's threads share the slots; a warp alone passes (lane, 32).
// kSwizzle: slot s is stored at swizzled_slot(s) (the Hankel kernels' ldmatrix reads, direct.cuh).
__device__ __forceinline__ int swizzled_slot(int s) { return s ^ ((s >> 3) & 1); }
template <typename T, bool kSwizzle = false>
__device__ __forceinline__ void issue_window(uint4* dst, const T* row, int64_t q0, int64_t len, int nslots,
                                             int first = threadIdx.x, int step = blockDim.x) {
  constexpr int VE = VecOf<T>::kElems;
  // The window's elements before the row (lead) and up to the row's end (avail), clamped to the window so
  // that the per-slot bounds run in 32 bits (the 64-bit form cost the Hankel forward ~25 instructions a slot).
  const int64_t span = int64_t{nslots} * VE;
  const int lead = static_cast<int>(q0 < 0 ? (-q0 < span ? -q0 : span) : 0);
  const int avail = static_cast<int>(len - q0 < 0 ? 0 : (len - q0 < span ? len - q0 : span));
  const T* win = row + q0;
  for (int s = first; s < nslots; s += step) {
    const int o = s * VE;
    const int valid = o < lead ? 0 : min(max(avail - o, 0), VE);
    cp_async16(dst + (kSwizzle ? swizzled_slot(s) : s),
               valid > 0 ? static_cast<const void*>(win + o) : static_cast<const void*>(row),
               valid * static_cast<int>(sizeof(T)));
  }
}

// out[m] = element (shift + m) of the 32-bit words w (16-byte vectors' words in order), m < N, as
// float. `shift` is in [0, VE) and uniform over the launch; the shift is done on registers: select
// stages for whole 32-bit words, then (16-bit types) a byte permute for an odd element. w is clobbered.
template <typename T, int N, int NW>
__device__ __forceinline__ void window_from_words(uint32_t (&w)[NW], int shift, float (&out)[N]) {
  constexpr int kPerWord = 4 / sizeof(T);  // elements per 32-bit word
  static_assert(NW * kPerWord >= N + 16 / sizeof(T) - 1, "words cover shift + N");
  const int wshift = shift / kPerWord;  // whole words: 0..3
#pragma unroll
  for (int i = 0; i + 1 < NW; ++i) w[i] = (wshift & 1) ? w[i + 1] : w[i];
#pragma unroll
  for (int i = 0; i + 2 < NW; ++i) w[i] = (wshift & 2) ? w[i + 2] : w[i];
  if constexpr (kPerWord == 2) {
    const unsigned sel = (shift & 1) ? 0x5432u : 0x3210u;
#pragma unroll
    for (int i = 0; i + 1 < NW; ++i) w[i] = __byte_perm(w[i], w[i + 1], sel);
#pragma unroll
    for (int m = 0; m < N; ++m)
      out[m] = to_acc(from_bits<T>(static_cast<unsigned short>((m & 1) ? (w[m / 2] >> 16) : (w[m / 2] & 0xffffu))));
  } else {
#pragma unroll
    for (int m = 0; m < N; ++m) out[m] = __uint_as_float(w[m]);
  }
}

// 16-byte vectors covering `shift` (< VE) + N elements.
template <typename T> __host__ __device__ constexpr int window_vecs(int n) {
  return (n + 2 * VecOf<T>::kElems - 2) / VecOf<T>::kElems;
}

// out[m] = element (VE * vec0 + shift + m) of the staged buffer, m < N, as float (see window_from_words).
template <typename T, int N>
__device__ __forceinline__ void read_window(const uint4* buf, int vec0, int shift, float (&out)[N]) {
  constexpr int NV = window_vecs<T>(N);
  uint32_t w[NV * 4];
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    const uint4 u = buf[vec0 + v];
    w[4 * v] = u.x; w[4 * v + 1] = u.y; w[4 * v + 2] = u.z; w[4 * v + 3] = u.w;
  }
  window_from_words<T>(w, shift, out);
}

// Walks tiles (b, co, lt), lt fastest, then the output channel co (whose input channel is
// ci = co / mult), then b, `step` tiles at a time: one division at the start, then counting.
struct TileIter {
  int64_t b, co, ci, lt;
  int64_t l_tiles, channels, mult;
  int64_t d_lt, d_co, d_b;  // `step` as (b, co, lt) digits
  __device__ TileIter(int64_t tile, int64_t step, int64_t l_tiles_, int64_t channels_, int64_t mult_)
      : l_tiles(l_tiles_), channels(channels_), mult(mult_) {
    int64_t row = tile / l_tiles;
    lt = tile - row * l_tiles;
    b = row / channels;
    co = row - b * channels;
    ci = mult == 1 ? co : co / mult;
    row = step / l_tiles;
    d_lt = step - row * l_tiles;
    d_b = row / channels;
    d_co = row - d_b * channels;
  }
  __device__ __forceinline__ void advance() {
    lt += d_lt;
    int64_t carry = lt >= l_tiles;
    if (carry) lt -= l_tiles;
    co += d_co + carry;
    b += d_b;
    if (co >= channels) { co -= channels; ++b; }
    ci = mult == 1 ? co : co / mult;
  }
};

// Forward. Tile = (b, co, kTile consecutive outputs), kTile = kThreads * V. Thread t computes
//   kInterleave = false: outputs [t*V, t*V + V) of the tile (one window read, 2 stores of 16 bytes
//                        at a 32-byte stride when V is two vectors);
//   kInterleave = true:  V / VE chunks of VE outputs, chunk c at [c*kThreads*VE + t*VE, +VE): each
//                        warp store and shared read is 512 contiguous bytes.
// kGridStride: a block takes tiles blockIdx.x, + gridDim.x, ... (neighbouring blocks stream
// neighbouring memory) instead of one contiguous run of tiles.
// kCoalesce (contiguous runs only): outputs go to global memory through a per-warp shared buffer.
template <typename T, int K, int S, int D, int V, int kStages, bool kInterleave, bool kCoalesce = false>
struct FwdPipelined {
  static constexpr int VE = VecOf<T>::kElems;
  static constexpr int kTile = kThreads * V;
  static constexpr int KD = (K - 1) * D;
  static constexpr int kWin = (kTile - 1) * S + KD + 1;                       // window elements
  static constexpr int kRun = kInterleave ? VE : V;                           // outputs per window read
  static constexpr int kThreadWin = (kRun - 1) * S + KD + 1;
  static constexpr int kThreadVecs = (kThreadWin + VE - 1 + VE - 1) / VE;     // what read_window reads
  static constexpr int kLastVec = kInterleave ? (kTile / VE - 1) * S : (kThreads - 1) * V * S / VE;
  static constexpr int kSlots = kLastVec + kThreadVecs;
  // kCoalesce: each warp passes its outputs through shared memory so that every store instruction
  // writes 512 contiguous bytes (a thread's run of V outputs is two or more 16-byte vectors).
  static constexpr int kOutVecs = V * static_cast<int>(sizeof(T)) / 16;  // 16-byte vectors per thread
  static constexpr bool kStaged = kCoalesce && !kInterleave && kOutVecs > 1;
  static constexpr int kOutBytes = kStaged ? kThreads * kOutVecs * 16 : 0;
  static constexpr int kSmemBytes = kStages * kSlots * 16 + kOutBytes;
  static_assert((kRun * S) % VE == 0 && V % VE == 0, "a thread's window must start on a 16-byte boundary");
  static_assert(kSlots * VE >= VE - 1 + kWin, "slots cover the window");
};

template <typename T, int K, int S, int D, int V, int kStages, bool kInterleave, bool kGridStride, bool kCoalesce = false>
__global__ void __launch_bounds__(kThreads) conv1d_fwd_dw_pipelined_kernel(const Conv1dParams p) {
  using Cfg = FwdPipelined<T, K, S, D, V, kStages, kInterleave, kCoalesce>;
  constexpr int VE = Cfg::VE, kTile = Cfg::kTile, kSlots = Cfg::kSlots, kRun = Cfg::kRun;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint4* stages = reinterpret_cast<uint4*>(smem_raw);

  // Window of the tile starting at output j0: input [j0*S - P, ...); it is staged from the 16-byte
  // boundary below, j0*S - align_up(P), and `shift` = align_up(P) - P elements into the buffer.
  const int64_t pad_up = (p.pad_left + VE - 1) / VE * VE;
  const int shift = static_cast<int>(pad_up - p.pad_left);
  const int64_t l_tiles = ceil_div(p.out_length, kTile);
  const int64_t num_tiles = p.batch * p.out_channels * l_tiles;
  const int64_t first = kGridStride ? blockIdx.x : num_tiles * blockIdx.x / gridDim.x;
  const int64_t last = kGridStride ? num_tiles : num_tiles * (blockIdx.x + 1) / gridDim.x;
  const int64_t step = kGridStride ? gridDim.x : 1;
  const T* x = static_cast<const T*>(p.x);

  TileIter fetch(first, step, l_tiles, p.out_channels, p.out_channels / p.in_channels);
  TileIter cur = fetch;
  int64_t fetch_tile = first;
  auto issue = [&](int stage) {
    if (fetch_tile < last) {
      issue_window<T>(stages + stage * kSlots, x + fetch.b * p.x_stride_b + fetch.ci * p.x_stride_c,
                      fetch.lt * kTile * S - pad_up, p.in_length, kSlots);
      fetch.advance();
      fetch_tile += step;
    }
    cp_async_commit();  // an empty group past the end keeps the wait counts uniform
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s);

  int stage = 0;
  for (int64_t tile = first; tile < last; tile += step, cur.advance()) {
    cp_async_wait<kStages - 2>();  // this thread's copies of `tile` have landed
    __syncthreads();               // everyone's have; everyone is done with the stage refilled next
    issue(stage == 0 ? kStages - 1 : stage - 1);

    const int64_t j0 = cur.lt * kTile;
    const int64_t w_off = cur.co * p.w_stride_o;
    float w[K];
#pragma unroll
    for (int k = 0; k < K; ++k) w[k] = load_param<T>(p, p.w, w_off + k * p.w_stride_k);
    const float bias = p.bias != nullptr ? load_param<T>(p, p.bias, cur.co) : 0.0f;
#pragma unroll
    for (int c = 0; c < V / kRun; ++c) {
      const int jl = kInterleave ? c * kThreads * VE + threadIdx.x * VE : threadIdx.x * V;
      if (j0 + jl < p.out_length) {
        float xin[Cfg::kThreadWin];
        read_window<T>(stages + stage * kSlots, jl * S / VE, shift, xin);
        float acc[kRun];
        fwd_taps<K, S, D>(w, xin, bias, p.activation, acc);
        bool stored = false;
        if constexpr (Cfg::kStaged) {
          // Whole warp inside the row, row contiguous and aligned: store through shared memory.
          const int lane = threadIdx.x % 32;
          const int64_t wbase = j0 + (threadIdx.x - lane) * V;
          T* yrow = static_cast<T*>(p.y) + cur.b * p.y_stride_b + cur.co * p.y_stride_c;
          if (p.y_stride_l == 1 && wbase + 32 * V <= p.out_length &&
              reinterpret_cast<uintptr_t>(yrow + wbase) % 16 == 0) {
            constexpr int NR = Cfg::kOutVecs;
            uint4* wbuf = reinterpret_cast<uint4*>(smem_raw + kStages * kSlots * 16) + (threadIdx.x - lane) * NR;
#pragma unroll
            for (int r = 0; r < NR; ++r) {
              uint4 u;
              T* e = reinterpret_cast<T*>(&u);
#pragma unroll
              for (int m = 0; m < VE; ++m) e[m] = from_acc<T>(acc[r * VE + m]);
              wbuf[lane * NR + r] = u;
            }
            __syncwarp();
#pragma unroll
            for (int r = 0; r < NR; ++r)
              *reinterpret_cast<uint4*>(yrow + wbase + static_cast<int64_t>(r * 32 + lane) * VE) = wbuf[r * 32 + lane];
            __syncwarp();
            stored = true;
          }
        }
        if (!stored)
          store_run<T, kRun>(p.y, cur.b * p.y_stride_b + cur.co * p.y_stride_c, p.y_stride_l, j0 + jl, p.out_length,
                             acc);
      }
    }
    stage = stage == kStages - 1 ? 0 : stage + 1;
  }
  cp_async_wait<0>();  // no copy may still be writing shared memory when the block exits
}

// Fused backward (multiplier 1, stride 1, no activation): block = (channel c, split), walking the
// tiles (b, t) of its split like the staged kernel (conv1d_bwd_dw_kernel), with both windows
// staged by cp.async kStages tiles ahead:
//   dy window: outputs [j0 - HD, j0 + kTile + HD), HD = (K-1)*D rounded up to 16 bytes: dy for the
//              tile's own outputs (grad-weight) and for the grad-input of its inputs [j0, j0 + kTile);
//   x window:  inputs [j0 - align_up(P), ...): x[j + k*D - P] for the tile's outputs j.
// Zero-filled beyond the rows' ends, so sums need no bounds checks; only the stores are clipped.
template <typename T, int K, int D, int V, int kStages, bool kInterleave>
struct BwdPipelined {
  static constexpr int VE = VecOf<T>::kElems;
  static constexpr int kTile = kThreads * V;
  static constexpr int KD = (K - 1) * D;
  static constexpr int HD = (KD + VE - 1) / VE * VE;
  static constexpr int kRun = kInterleave ? VE : V;                        // outputs per window read
  static constexpr int kWinIn = kRun + KD;                                 // per-thread window
  static constexpr int kVecsIn = (kWinIn + VE - 1 + VE - 1) / VE;
  static constexpr int kLastVec = kInterleave ? kTile / VE - 1 : (kThreads - 1) * V / VE;
  // dy: a thread reads from vector (its first) + (HD + P - KD)/VE <= (its first) + 2*HD/VE
  static constexpr int kDySlots = kLastVec + 2 * HD / VE + kVecsIn;
  static constexpr int kXSlots = kLastVec + kVecsIn;
  static constexpr int kStageSlots = kDySlots + kXSlots;
  static constexpr int kSmemBytes = kStages * kStageSlots * 16;
  static_assert(V % VE == 0, "a thread's outputs must start on a 16-byte boundary");
};

template <typename T, int K, int D, int V, int kStages, bool kInterleave>
__global__ void __launch_bounds__(kThreads) conv1d_bwd_dw_pipelined_kernel(const Conv1dParams p) {
  using Cfg = BwdPipelined<T, K, D, V, kStages, kInterleave>;
  constexpr int VE = Cfg::VE, kTile = Cfg::kTile, KD = Cfg::KD, HD = Cfg::HD, kRun = Cfg::kRun;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint4* stages = reinterpret_cast<uint4*>(smem_raw);
  __shared__ float scratch[kThreads / 32];

  const int64_t P = p.pad_left;
  const int64_t pad_up = (P + VE - 1) / VE * VE;
  const int x_shift = static_cast<int>(pad_up - P);
  const int dy_base = static_cast<int>(HD + P - KD);  // dy window index of dy[j0 + P - KD]
  const int64_t C = p.out_channels;
  const int64_t n_tiles = max(ceil_div(p.out_length, kTile), ceil_div(p.in_length, kTile));
  const int64_t per_channel = p.batch * n_tiles;
  const int64_t splits = p.weight_splits;
  const int64_t chunk = ceil_div(per_channel, splits);
  const bool want_dx = p.grad_x != nullptr;
  const T* dyp = static_cast<const T*>(p.y);
  const T* xp = static_cast<const T*>(p.x);
  float* partial = static_cast<float*>(p.workspace);

  for (int64_t unit = blockIdx.x; unit < C * splits; unit += gridDim.x) {
    const int64_t split = unit / C, c = unit - split * C;
    const int64_t n_begin = split * chunk, n_end = min((split + 1) * chunk, per_channel);
    float w[K];
#pragma unroll
    for (int k = 0; k < K; ++k) w[k] = load_param<T>(p, p.w, c * p.w_stride_o + k * p.w_stride_k);
    float gw[K];
#pragma unroll
    for (int k = 0; k < K; ++k) gw[k] = 0.0f;
    float gb = 0.0f;

    int64_t fb = n_begin / n_tiles, ft = n_begin - fb * n_tiles;  // next tile to fetch
    auto issue = [&](int64_t n, int stage) {
      if (n < n_end) {
        uint4* dst = stages + stage * Cfg::kStageSlots;
        const int64_t j0 = ft * kTile;
        issue_window<T>(dst, dyp + fb * p.y_stride_b + c * p.y_stride_c, j0 - HD, p.out_length, Cfg::kDySlots);
        issue_window<T>(dst + Cfg::kDySlots, xp + fb * p.x_stride_b + c * p.x_stride_c, j0 - pad_up, p.in_length,
                        Cfg::kXSlots);
        if (++ft == n_tiles) { ft = 0; ++fb; }
      }
      cp_async_commit();
    };
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) issue(n_begin + s, s);

    int64_t b = n_begin / n_tiles, t = n_begin - b * n_tiles;
    int stage = 0;
    for (int64_t n = n_begin; n < n_end; ++n) {
      cp_async_wait<kStages - 2>();
      __syncthreads();
      issue(n + kStages - 1, stage == 0 ? kStages - 1 : stage - 1);
      const uint4* dyw = stages + stage * Cfg::kStageSlots;
      const uint4* xw = dyw + Cfg::kDySlots;
#pragma unroll
      for (int ch = 0; ch < V / kRun; ++ch) {
        const int jl = kInterleave ? ch * kThreads * VE + threadIdx.x * VE : threadIdx.x * V;
        const int tv = jl / VE;  // this run's first vector

        // grad-weight / grad-bias: outputs j0 + jl + i
        float g[kRun], xin[Cfg::kWinIn];
        read_window<T>(dyw, tv + HD / VE, 0, g);
        read_window<T>(xw, tv, x_shift, xin);
#pragma unroll
        for (int i = 0; i < kRun; ++i) {
          gb += g[i];
#pragma unroll
          for (int k = 0; k < K; ++k) gw[k] += g[i] * xin[i + k * D];
        }
        // grad-input: inputs i = j0 + jl + e take dy[i + P - k*D]
        if (want_dx) {
          float dyin[Cfg::kWinIn], acc[kRun];
          read_window<T>(dyw, tv + dy_base / VE, dy_base % VE, dyin);
#pragma unroll
          for (int e = 0; e < kRun; ++e) {
            acc[e] = 0.0f;
#pragma unroll
            for (int k = 0; k < K; ++k) acc[e] += w[k] * dyin[e + KD - k * D];
          }
          store_run<T, kRun>(p.grad_x, b * p.gx_stride_b + c * p.gx_stride_c, p.gx_stride_l, t * kTile + jl,
                             p.in_length, acc);
        }
      }
      if (++t == n_tiles) { t = 0; ++b; }
      stage = stage == kStages - 1 ? 0 : stage + 1;
    }
    cp_async_wait<0>();

    // Fixed-order block reductions: grad-weight is the same bits on every run.
    const int64_t n_weight = C * K;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const float s = block_sum(gw[k], scratch);
      if (threadIdx.x == 0) partial[split * n_weight + c * K + k] = s;
    }
    const float s = block_sum(gb, scratch);
    if (threadIdx.x == 0) partial[splits * n_weight + split * C + c] = s;
  }
}

// Rows contiguous and starting on 16-byte boundaries: what cp.async of whole slots needs.
template <typename T> inline bool rows_aligned(const void* ptr, int64_t sb, int64_t sc, int64_t sl) {
  return rows_vec_aligned(ptr, sb, sc, sl, VecOf<T>::kElems);
}

// Whether the pipelined forward can run these params (the kernel's assumptions above).
template <typename T> inline bool fwd_pipelined_ok(const Conv1dParams& p, int K, int D) {
  return rows_aligned<T>(p.x, p.x_stride_b, p.x_stride_c, p.x_stride_l) &&
         p.pad_left <= static_cast<int64_t>(K - 1) * D;
}

// Whether the pipelined backward can run these params (the kernel's assumptions above).
template <typename T> inline bool bwd_pipelined_ok(const Conv1dParams& p, int K, int S, int D) {
  return S == 1 && p.activation == kActNone && p.out_channels == p.in_channels &&
         p.pad_left <= static_cast<int64_t>(K - 1) * D && rows_aligned<T>(p.x, p.x_stride_b, p.x_stride_c, p.x_stride_l) &&
         rows_aligned<T>(p.y, p.y_stride_b, p.y_stride_c, p.y_stride_l);
}

}  // namespace dw
}  // namespace convkit
