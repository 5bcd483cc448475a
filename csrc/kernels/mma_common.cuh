// Tensor-core building blocks shared by the dense kernels (conv1d_fwd_dense_mma.cu,
// conv1d_bwd_weight_dense_mma.cu; the fp32 ones, conv1d_fwd_dense_f32.cu and conv1d_dense_f32.cu: the TF32 mma and
// conversion): inline PTX for ldmatrix / mma.sync (sm_80+), 16-byte loads and the 16-bit conversions.
// CUDA headers only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace convkit {
namespace tc {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
// The same for matrices stored transposed (rows of 8 consecutive column elements).
__device__ __forceinline__ void ldsm_x4_trans(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
template <typename T>
__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  if constexpr (sizeof(T) == 2 && std::is_same<T, __half>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}
// fp32 -> TF32 (cvt.rna: to nearest, ties away from zero), as bits / as a float.
__device__ __forceinline__ uint32_t tf32_bits(float v) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
  return r;
}
__device__ __forceinline__ float to_tf32(float v) { return __uint_as_float(tf32_bits(v)); }
// c += a * b, m16n8k8, TF32 operands (a: 4 registers, b: 2), fp32 accumulators.
__device__ __forceinline__ void mma1688_tf32(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                             uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void sts128(uint32_t addr, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d));
}
__device__ __forceinline__ uint4 ldg_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <typename T> __device__ __forceinline__ uint32_t bits16(float v);
template <> __device__ __forceinline__ uint32_t bits16<__half>(float v) { return __half_as_ushort(__float2half_rn(v)); }
template <> __device__ __forceinline__ uint32_t bits16<__nv_bfloat16>(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

__device__ __forceinline__ int64_t floor8(int64_t v) { return v & ~int64_t{7}; }  // two's complement: floor

// Eight consecutive 16-bit elements of x starting at element `off` (contiguous, all in range),
// as 4 words; the row may have any 2-byte alignment.
__device__ __forceinline__ void load8_contig(const unsigned short* base, int64_t off, uint32_t* out) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(base + off);
  const int m = static_cast<int>((addr & 15) >> 1);
  const uint4* a = reinterpret_cast<const uint4*>(addr - 2 * m);
  uint4 lo = ldg_stream(a);
  if (m == 0) {
    out[0] = lo.x; out[1] = lo.y; out[2] = lo.z; out[3] = lo.w;
    return;
  }
  // Both 16-byte chunks hold an element of the range, so neither read leaves the allocation.
  uint4 hi = ldg_stream(a + 1);
  uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
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
  out[0] = w[0]; out[1] = w[1]; out[2] = w[2]; out[3] = w[3];
}

// IEEE fp32: acc[i * 8 + jn] += a[i] * b[jn], an 8 x 8 register tile from rows a = (a0, a1) and columns b = (b0, b1)
// (the FFMA inner step of both fp32 dense kernels).
__device__ __forceinline__ void ffma_8x8(float* acc, float4 a0, float4 a1, float4 b0, float4 b1) {
  const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
  const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int jn = 0; jn < 8; ++jn) acc[i * 8 + jn] = fmaf(av[i], bv[jn], acc[i * 8 + jn]);
}

}  // namespace tc
}  // namespace convkit
