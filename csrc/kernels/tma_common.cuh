// Building blocks of the TMA-fed wgmma kernels (conv1d_fwd_dense_tma.cu: the forward; conv1d_bwd_input_dense_tma.cu:
// the grad-input of stride > 1 in one pass; conv1d_bwd_weight_dense_tma.cu: the stride-1 grad-weight): mbarriers and bulk / tensor copies (PTX ISA: mbarrier,
// cp.async.bulk, cp.async.bulk.tensor), the 5-D tensor map of a channels-last operand, and the packing of the
// weights into the shared-memory image of each stage. Device code only on sm_90a (CONVKIT_WGMMA_DEVICE); the
// kernels trap elsewhere and the host never picks them there.
#pragma once
#include <cuda.h>  // CUtensorMap and the encode function's type (the function comes through the runtime)

#include <cstdint>

#include "kernels/common.cuh"
#include "kernels/wgmma_common.cuh"

// 1: an mbarrier wait that spins for seconds traps instead of hanging (a wrong byte count shows up as a launch
// failure in the check, not as a timeout).
#ifndef CONVKIT_TMA_WATCHDOG
#define CONVKIT_TMA_WATCHDOG 1
#endif

namespace convkit {
namespace tma {

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
#ifdef CONVKIT_WGMMA_DEVICE
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
// Makes the initialised barriers visible to the copy engine (with the block barrier that follows).
__device__ __forceinline__ void mbar_fence_init() {
#ifdef CONVKIT_WGMMA_DEVICE
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#ifdef CONVKIT_WGMMA_DEVICE
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#ifdef CONVKIT_WGMMA_DEVICE
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}
// Waits until the barrier's phase of this parity has completed. The loop lives inside the asm: a C++ spin loop
// around try_wait made ptxas serialise the wgmma calls (C7518, "compiler-inserted WG.DP in divergent path").
// With CONVKIT_TMA_WATCHDOG, 2^24 failed tries (seconds) trap instead of hanging.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#ifdef CONVKIT_WGMMA_DEVICE
#if CONVKIT_TMA_WATCHDOG
  asm volatile(
      "{\n.reg .pred P1;\n.reg .u32 n;\nmov.u32 n, 0;\nLAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\nadd.u32 n, n, 1;\nsetp.lt.u32 P1, n, 16777216;\n@P1 bra LAB_WAIT;\ntrap;\nDONE:\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#else
  asm volatile(
      "{\n.reg .pred P1;\nLAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\nbra LAB_WAIT;\nDONE:\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
#endif
}
// bytes (multiple of 16) from global src (16-byte aligned) to shared dst; completion counted on bar.
__device__ __forceinline__ void bulk_copy_g2s(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
#ifdef CONVKIT_WGMMA_DEVICE
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
#endif
}
// One box of the 5-D tensor map at coordinates (c0 .. c4) to shared dst (128-byte aligned); OOB elements zero.
__device__ __forceinline__ void load_5d(uint32_t dst, const CUtensorMap* map, int c0, int c1, int c2, int c3, int c4,
                                        uint32_t bar) {
#ifdef CONVKIT_WGMMA_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, "
      "%6}], [%7];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar)
      : "memory");
#endif
}
// One box of a 4-D tensor map at coordinates (c0 .. c3) to shared dst; OOB elements zero.
__device__ __forceinline__ void load_4d(uint32_t dst, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                        uint32_t bar) {
#ifdef CONVKIT_WGMMA_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
#endif
}
// Barrier 2 + wgi among warpgroup wgi's 128 threads.
__device__ __forceinline__ void warpgroup_sync(int wgi) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wgi) : "memory");
}

// The tile order of the persistent TMA kernels: tile = ((b * j_tiles + jt) * groups + g) * m_tiles + mt, so the m
// tiles of one window (x or dy) are neighbours.
__device__ __forceinline__ void tile_coords(int64_t tile, int64_t m_tiles, int64_t groups, int64_t j_tiles, int64_t& b,
                                            int64_t& g, int64_t& jt, int64_t& mt) {
  int64_t rest;
  divmod(tile, m_tiles, rest, mt);
  divmod(rest, groups, rest, g);
  divmod(rest, j_tiles, b, jt);
}

// Fetches a kernel parameter's tensor map into the descriptor cache ahead of its first copy.
__device__ __forceinline__ void prefetch_map(const CUtensorMap* map) {
#ifdef CONVKIT_WGMMA_DEVICE
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#endif
}

// Ring slots at most: the kernels reserve 2 * kMaxSlots barriers ("full" at bar0 + 8 slot, "empty" at bar0 + 8
// (kMaxSlots + slot)).
constexpr int kMaxSlots = 8;

// The ring's mbarriers (one thread, before the block barrier that follows): "full" slot i at bar0 + 8 i, completed
// by the producer's expect_tx and the copies' bytes (full_count arrivals), "empty" slot i at bar0 + 8 (empty_off + i),
// one arrival per consumer warpgroup (empty_count); then made visible to the copy engine.
__device__ __forceinline__ void init_ring(uint32_t bar0, int ns, uint32_t full_count, int empty_off,
                                          uint32_t empty_count) {
  for (int i = 0; i < ns; ++i) mbar_init(bar0 + 8u * i, full_count);
  for (int i = 0; i < ns; ++i) mbar_init(bar0 + 8u * (empty_off + i), empty_count);
  mbar_fence_init();
}

// A consumer warpgroup after its wgmma.wait<1> in stage s: its calls of stage s - 1 are done, so one of its threads
// (t = its thread index in the block) gives that stage's slot back to the producer.
__device__ __forceinline__ void release_previous_slot(uint32_t bar0, int empty_off, int64_t s, int ns, int t) {
  if (s >= 1 && (t & 127) == 0) mbar_arrive(bar0 + 8u * (empty_off + static_cast<int>((s - 1) % ns)));
}

// Tiles of a persistent block (block blockIdx.x takes tiles blockIdx.x, + gridDim.x, ...).
__device__ __forceinline__ int64_t block_tiles(int64_t num_tiles) {
  return num_tiles > blockIdx.x ? (num_tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;
}

// Stage sidx of a persistent block whose tiles have `chunks` reduction chunks each (tile sidx / chunks of the block,
// chunk sidx % chunks), in ring slot sidx % ns of stage_bytes: its tile, chunk and shared addresses (the packed
// weights at a_dst, the activations' operand at x_dst = a_dst + a_bytes). Plan: the TMA kernels' plans (m_tiles,
// j_tiles, chunks, ns, stage_bytes, a_bytes).
struct Stage {
  int64_t b, g, jt, mt;
  int chunk;
  uint32_t bar, a_dst, x_dst;
};
// stage_slot fills the chunk and the addresses of stage sidx only (a caller with a tile order of its own sets b, g,
// jt, mt).
template <typename Plan>
__device__ __forceinline__ void stage_slot(Stage& st, const Plan& q, int64_t sidx, uint32_t base, uint32_t bar0) {
  st.chunk = static_cast<int>(sidx % q.chunks);
  const int slot = static_cast<int>(sidx % q.ns);
  st.bar = bar0 + 8u * slot;
  st.a_dst = base + slot * q.stage_bytes;
  st.x_dst = st.a_dst + q.a_bytes;
}
template <typename Plan>
__device__ __forceinline__ Stage stage_of(const Plan& q, int64_t groups, int64_t sidx, uint32_t base, uint32_t bar0) {
  Stage st;
  tile_coords(blockIdx.x + (sidx / q.chunks) * static_cast<int64_t>(gridDim.x), q.m_tiles, groups, q.j_tiles, st.b,
              st.g, st.jt, st.mt);
  stage_slot(st, q, sidx, base, bar0);
  return st;
}
// The producer's start of stage st: expect a_bytes + x_bytes on its barrier, then the bulk copy of its packed weights
// (block (g * m_tiles + mt) * chunks + chunk of tma::pack_weights_kernel).
template <typename Plan>
__device__ __forceinline__ void issue_weights(const Plan& q, const Stage& st, const unsigned short* wpack,
                                              uint32_t x_bytes) {
  mbar_arrive_expect_tx(st.bar, static_cast<uint32_t>(q.a_bytes) + x_bytes);
  const int64_t blk = (st.g * q.m_tiles + st.mt) * q.chunks + st.chunk;
  bulk_copy_g2s(st.a_dst, wpack + blk * (q.a_bytes / 2), static_cast<uint32_t>(q.a_bytes), st.bar);
}

// The producer of a ring of ns slots (one thread): stage i goes into slot i % ns once the consumers have released
// that slot's previous stage (the "empty" barrier of slot s at bar0 + 8 * (empty_off + s); its phase i / ns - 1).
template <typename Issue>
__device__ __forceinline__ void produce_stages(int64_t total, int ns, uint32_t bar0, int empty_off, Issue&& issue) {
  for (int64_t i = 0; i < total; ++i) {
    const int slot = static_cast<int>(i % ns);
    if (i >= ns) mbar_wait(bar0 + 8u * (empty_off + slot), static_cast<uint32_t>((i / ns - 1) & 1));
    issue(i);
  }
}

// Bytes of the packed weights of every stage image (pack_weights_kernel's output, at the workspace's start) of a
// plan with m_tiles, chunks and a_bytes (one stage's weights).
template <typename Plan>
int64_t packed_weight_bytes(const Conv1dParams& p, const Plan& q) {
  return p.groups * q.m_tiles * q.chunks * static_cast<int64_t>(q.a_bytes);
}

// The first conditions of every TMA kernel's plan: the device runs this build's sm_90a code, 16-bit x, whole groups.
inline bool sm90a_16bit_whole_groups(const Conv1dParams& p) {
  return p.code_arch == 90 && (p.dtype == DType::kFloat16 || p.dtype == DType::kBFloat16) && p.groups >= 1 &&
         p.in_channels % p.groups == 0 && p.out_channels % p.groups == 0;
}

// Whether a channels-last operand (element (b, l, c) at ptr + b * sb + l * sl + c * sc, c < ch, l < len) can be the
// 5-D tensor map below as it lies: channels contiguous, position and batch strides whole 16-byte units in
// increasing order, a 16-byte aligned start. (The forward's x, the one-pass grad-input's dy.)
inline bool channels_last_map_ok(const void* ptr, int64_t sb, int64_t sl, int64_t sc, int64_t ch, int64_t len) {
  return sc == 1 && sl % 8 == 0 && sb % 8 == 0 && sl >= ch && sb >= len * sl &&
         (reinterpret_cast<uintptr_t>(ptr) & 15) == 0;
}

// The launchers copy a (B, C, L) operand into channels-last memory in the workspace a slab of batches at a time.
constexpr int64_t kCopySlabBytes = int64_t{1} << 30;
// Batches per slab: as many as fit kCopySlabBytes (at least 1, at most batch and max_batches).
inline int64_t copy_slab_batches(int64_t batch, int64_t bytes_per_batch, int64_t max_batches) {
  int64_t n = kCopySlabBytes / bytes_per_batch;
  n = n < batch ? n : batch;
  n = n < max_batches ? n : max_batches;
  return n > 1 ? n : 1;
}

// The weights of every stage in the exact shared-memory image wgmma reads them from (A, K-major): block
// ((g * m_tiles + mt) * chunks + chunk) holds [tap * CC/8 + channel group][BM rows][8 channels], element
// w[g * s_group + row * s_row + c * s_red + k * s_k] for row = mt * BM + r (< rows_g) and reduction channel
// c = chunk * CC + c8 * 8 + e (< red_g), zero outside. The forward packs w (rows = output channels, reduction =
// input channels), the grad-input w transposed (rows = input channels, reduction = output channels).
struct PackSpec {
  const unsigned short* w;
  int64_t s_group, s_row, s_red, s_k;  // element strides
  int64_t rows_g, red_g, groups, m_tiles, chunks;
  int k, cc, bm;
  __host__ __device__ int64_t elements() const { return groups * m_tiles * chunks * static_cast<int64_t>(k) * cc * bm; }
};
namespace {  // one copy of the kernel per translation unit
__global__ void pack_weights_kernel(const PackSpec s, unsigned short* __restrict__ out) {
  const int rgn = s.k * s.cc / 8;
  const int64_t per_blk = static_cast<int64_t>(rgn) * s.bm * 8;
  const int64_t total = s.elements();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int e = static_cast<int>(i & 7);
    const int row = static_cast<int>((i >> 3) % s.bm);
    const int rg = static_cast<int>((i / (8 * s.bm)) % rgn);
    const int64_t blk = i / per_blk;
    const int64_t chunk = blk % s.chunks, rest = blk / s.chunks;
    const int64_t mt = rest % s.m_tiles, g = rest / s.m_tiles;
    const int k = rg / (s.cc / 8), c8 = rg % (s.cc / 8);
    const int64_t c = chunk * s.cc + c8 * 8 + e, r = mt * s.bm + row;
    out[i] = (r < s.rows_g && c < s.red_g) ? s.w[g * s.s_group + r * s.s_row + c * s.s_red + k * s.s_k]
                                            : static_cast<unsigned short>(0);
  }
}
}  // namespace

inline cudaError_t launch_pack_weights(const PackSpec& s, void* out, int num_sms, cudaStream_t stream) {
  pack_weights_kernel<<<grid_for(ceil_div(s.elements(), 256), num_sms, 8), 256, 0, stream>>>(
      s, static_cast<unsigned short*>(out));
  return cudaGetLastError();
}

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled from the driver, through the runtime (no link against libcuda); null if unavailable.
inline EncodeTiledFn encode_tiled() {
  static const EncodeTiledFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult res;
#if CUDART_VERSION >= 12050
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &res);
#else
    const cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &res);
#endif
    if (e != cudaSuccess || res != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<EncodeTiledFn>(nullptr);
    }
    return reinterpret_cast<EncodeTiledFn>(f);
  }();
  return fn;
}

// The 5-D map of a channels-last operand x (16-bit; element (b, l, g * ch_g + c) at b * stride_b + l * stride_l +
// g * ch_g + c): (xr / 2 channels, channel set within the group, group, position, batch); box xr / 2 x 1 x 1 x
// box_rows x 1 with element stride estride along positions, so a load lands box_rows / estride rows of xr bytes
// (positions t, t + estride, ...), swizzled as xr says (64: 64-byte, 32: 32-byte, 16: none).
inline bool make_x_map(CUtensorMap& map, bool fp16, void* x, int xr, int64_t ch_g, int64_t groups, int64_t length,
                       int64_t batch, int64_t stride_l, int64_t stride_b, int box_rows, int estride) {
  const int ce = xr / 2;
  const cuuint64_t dims[5] = {static_cast<cuuint64_t>(ce), static_cast<cuuint64_t>(ch_g / ce),
                              static_cast<cuuint64_t>(groups), static_cast<cuuint64_t>(length),
                              static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[4] = {static_cast<cuuint64_t>(ce * 2), static_cast<cuuint64_t>(ch_g * 2),
                                 static_cast<cuuint64_t>(stride_l * 2), static_cast<cuuint64_t>(stride_b * 2)};
  const cuuint32_t box[5] = {static_cast<cuuint32_t>(ce), 1, 1, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t estr[5] = {1, 1, 1, static_cast<cuuint32_t>(estride), 1};
  const CUresult r = encode_tiled()(&map, fp16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 5,
                                    x, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                    xr == 64   ? CU_TENSOR_MAP_SWIZZLE_64B
                                    : xr == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                               : CU_TENSOR_MAP_SWIZZLE_NONE,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

}  // namespace tma
}  // namespace convkit
