// Probe: may a tiled TMA load start at an innermost coordinate that is not a whole 16-byte unit?
//
// The TMA grad-weight (kernels/conv1d_bwd_weight_dense_tma.cu) reads x straight from its (B, C, L) rows only where
// every tap's box starts at a position k*D - P that is a multiple of 8 elements; elsewhere (kb67: shifts 0, 1, 2;
// grouped_g8: -2 .. 2) it first copies x's tap rows into the workspace (tap_rows_staged_kernel, 0.32-0.86 ms). The
// reason recorded there is a report (Triton issue 7385) that the address after applying the coordinates must be
// 16-byte aligned, an illegal instruction otherwise. That report built its descriptor on the device with a base
// address moved by the offset, so it does not settle the tiled mode's coordinates. This loads one 64 x 8 box
// (128-byte rows, 128-byte swizzle, as the grad-weight's row maps) of a bf16 [rows, len] tensor at the innermost
// coordinate given on the command line and checks every element (zeros outside the tensor). Run one coordinate per
// process (a fault is sticky):
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A -I csrc ci/tma_unaligned_probe.cu -o /tmp/tma_probe
//   for c in 0 8 -8 1 2 3 5 7 -1 -2 -3 1001; do /tmp/tma_probe $c; done
//
// (a second argument 0: the same without swizzle). Prints "c0 C swizzle S: ok", "... MISMATCH ..." or "... CUDA
// error ...".
//
// Result (session 34, H100, driver 580.159.04): coordinates 0, 8, -8 load correctly; 1, 2, 3, 5, 7, -1, -2, -3 and
// 1001 end in "an illegal instruction was encountered", with the 128-byte swizzle and without. So the tiled mode's
// innermost start must be a whole 16-byte unit, as the grad-weight assumes; the tap-rows copy stays.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/tma_common.cuh"

namespace {

constexpr int kLen = 1024, kRows = 16, kBoxL = 64, kBoxR = 8;

__global__ void probe_kernel(const __grid_constant__ CUtensorMap map, int c0, int r0, uint16_t* out) {
  __shared__ __align__(1024) uint16_t tile[kBoxR * kBoxL];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t sbar = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  const uint32_t stile = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  if (threadIdx.x == 0) {
    convkit::tma::mbar_init(sbar, 1);
    convkit::tma::mbar_fence_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    convkit::tma::mbar_arrive_expect_tx(sbar, kBoxR * kBoxL * 2);
#ifdef CONVKIT_WGMMA_DEVICE
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(stile), "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(r0), "r"(sbar)
        : "memory");
#endif
  }
  convkit::tma::mbar_wait(sbar, 0);
  for (int i = threadIdx.x; i < kBoxR * kBoxL; i += blockDim.x) out[i] = tile[i];
}

}  // namespace

int main(int argc, char** argv) {
  const int c0 = argc > 1 ? std::atoi(argv[1]) : 0;
  const bool swz = argc > 2 ? std::atoi(argv[2]) != 0 : true;  // 0: no swizzle
  const int r0 = 3;
  std::vector<uint16_t> h(kRows * kLen);
  for (int r = 0; r < kRows; ++r)
    for (int l = 0; l < kLen; ++l) h[r * kLen + l] = static_cast<uint16_t>(1 + ((r * 7919 + l * 31) & 0x3fff));
  uint16_t *d = nullptr, *out = nullptr;
  if (cudaMalloc(&d, h.size() * 2) != cudaSuccess || cudaMalloc(&out, kBoxR * kBoxL * 2) != cudaSuccess) {
    std::printf("c0 %d: cudaMalloc failed\n", c0);
    return 1;
  }
  cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice);
  CUtensorMap map;
  const cuuint64_t dims[2] = {kLen, kRows};
  const cuuint64_t strides[1] = {kLen * 2};
  const cuuint32_t box[2] = {kBoxL, kBoxR};
  const cuuint32_t estr[2] = {1, 1};
  if (convkit::tma::encode_tiled() == nullptr ||
      convkit::tma::encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, d, dims, strides, box, estr,
                                   CU_TENSOR_MAP_INTERLEAVE_NONE,
                                   swz ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
    std::printf("c0 %d: encode failed\n", c0);
    return 1;
  }
  cudaMemset(out, 0xff, kBoxR * kBoxL * 2);
  probe_kernel<<<1, 128>>>(map, c0, r0, out);
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::printf("c0 %d swizzle %d: CUDA error %s\n", c0, swz, cudaGetErrorString(e));
    return 2;
  }
  std::vector<uint16_t> got(kBoxR * kBoxL);
  cudaMemcpy(got.data(), out, got.size() * 2, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int r = 0; r < kBoxR; ++r)
    for (int e8 = 0; e8 < kBoxL; ++e8) {
      // 128-byte swizzle: the 16-byte unit u of row r sits at unit u ^ (r % 8)
      const int at = r * kBoxL + (((e8 / 8) ^ (swz ? r % 8 : 0)) * 8) + e8 % 8;
      const int l = c0 + e8, rr = r0 + r;
      const uint16_t want = l >= 0 && l < kLen && rr < kRows ? h[rr * kLen + l] : 0;
      if (got[at] != want && bad++ < 4) std::printf("c0 %d: MISMATCH row %d pos %d got %u want %u\n", c0, r, e8,
                                                    got[at], want);
    }
  if (bad == 0) std::printf("c0 %d swizzle %d: ok\n", c0, swz);
  return bad ? 3 : 0;
}
