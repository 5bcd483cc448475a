// Where the fp32 window forward's time goes (csrc/kernels/conv1d_fwd_dense_f32.cu): the suite's dense shapes and
// kb76's grad-input phase, timed (median of cudaEvent times, kernel and weight pack) in TF32 and IEEE. Built once
// per experiment of the kernel (CONVKIT_F32_EXP: 0 the product, 1 no MMA / FFMA, 2 no copies into shared memory,
// 3 no TF32 rounding, 4 no y stores; 1-4 give wrong results by design), so the differences say what each part
// costs. Build 0 also checks a few small shapes against a direct fp32 reference (TF32: relative 2e-3, IEEE 1e-5).
//
//   for e in 0 1 2 3 4; do nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A -DCONVKIT_F32_EXP=$e -I csrc \
//     ci/f32_window_check.cu csrc/kernels/conv1d_fwd_dense_f32.cu csrc/kernels/conv1d_dense_f32.cu -o /tmp/f32w$e; done
//   /tmp/f32w0 [--only NAME]          (bash ci/gpu_check.sh f32exp runs all five)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "conv1d_params.h"
#include "f32_harness.cuh"
#include "kernels/launchers.h"

#ifndef CONVKIT_F32_EXP
#define CONVKIT_F32_EXP 0
#endif

using namespace convkit;

using f32h::Case;

int main(int argc, char** argv) {
  const char* only = nullptr;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
  const Case cases[] = {
      {"small_s1", 2, 64, 128, 3, 1000, 1, 1, 1, 1, false},
      {"small_s2", 2, 48, 96, 3, 1001, 2, 1, 1, 1, false},
      {"small_g2_d2", 1, 32, 80, 5, 777, 1, 2, 4, 2, false},
      {"small_s3_d4_wide", 2, 40, 48, 3, 1201, 3, 4, 0, 1, false},  // 64 x 256 tiles (Cout/groups <= 64), as the
      {"small_d600_wide", 1, 16, 24, 2, 2000, 1, 600, 3, 1, false},  // one above; here one window per tap
      {"kb76_dense_s3d4", 64, 64, 128, 3, 524280, 3, 4, 0, 1, true},
      {"kb76_gi_phase", 64, 128, 64, 1, 174757, 1, 1, 0, 1, true},  // one stride phase of kb76's grad-input
      {"kb67_dense_k3", 32, 64, 128, 3, 131072, 1, 1, 0, 1, true},
      {"w2v_k3s2", 16, 512, 512, 3, 49999, 2, 1, 0, 1, true},
      {"tcn_k3_d8", 16, 256, 256, 3, 16384, 1, 8, 8, 1, true},
      {"wavenet_k2_d512", 16, 256, 256, 2, 16384, 1, 512, 0, 1, true},
      {"grouped_g8_k5", 16, 512, 512, 5, 8192, 1, 1, 2, 8, true},
  };
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  std::printf("experiment %d\n", CONVKIT_F32_EXP);
  int failures = 0;
  for (const Case& c : cases) {
    if (only && std::strcmp(only, c.name)) continue;
    if (!c.timed && CONVKIT_F32_EXP != 0) continue;
    Conv1dParams p = f32h::make_case(c, sms);
    const int64_t ny = p.batch * p.out_channels * p.out_length;
    float* y = static_cast<float*>(p.y);
    for (int tf32 = 1; tf32 >= 0; --tf32) {
      const int64_t ws = tf32 ? conv1d_fwd_dense_tf32_workspace_bytes(p) : conv1d_fwd_dense_f32_workspace_bytes(p);
      void* wsp = nullptr;
      if (ws > 0) CK(cudaMalloc(&wsp, ws));
      p.workspace = wsp;
      auto run = [&]() {
        CK(tf32 ? launch_conv1d_fwd_dense_tf32(p, 0) : launch_conv1d_fwd_dense_f32(p, 0));
      };
      if (!c.timed) {  // correctness against the float64 reference
        CK(cudaMemset(y, 0xFF, ny * 4));
        run();
        double* ref;
        CK(cudaMalloc(&ref, ny * 8));
        f32h::ref_kernel<<<256, 256>>>(static_cast<const float*>(p.x), static_cast<const float*>(p.w),
                                       static_cast<const float*>(p.bias), ref, p);
        std::vector<float> hy(ny);
        std::vector<double> hr(ny);
        CK(cudaMemcpy(hy.data(), y, ny * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hr.data(), ref, ny * 8, cudaMemcpyDeviceToHost));
        CK(cudaFree(ref));
        double err = 0, mx = 0;
        bool nan = false;
        for (int64_t i = 0; i < ny; ++i) {
          nan |= std::isnan(hy[i]);
          err = std::max(err, std::fabs(hy[i] - hr[i]));
          mx = std::max(mx, std::fabs(hr[i]));
        }
        const bool ok = !nan && err <= (tf32 ? 2e-3 : 1e-5) * mx;
        failures += !ok;
        std::printf("%-18s %-5s max rel err %.2e%s  %s\n", c.name, tf32 ? "tf32" : "ieee", err / mx,
                    nan ? " NaN" : "", ok ? "ok" : "FAIL");
      } else {
        std::printf("TIME %-18s %-5s exp %d  %8.3f ms\n", c.name, tf32 ? "tf32" : "ieee", CONVKIT_F32_EXP,
                    f32h::median_ms(run));
      }
      if (wsp) CK(cudaFree(wsp));
    }
    f32h::free_tensors(p);
  }
  std::printf("%s\n", failures ? "FAILED" : "cases passed");
  return failures ? 1 : 0;
}
