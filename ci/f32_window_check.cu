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
#include "kernels/launchers.h"

#ifndef CONVKIT_F32_EXP
#define CONVKIT_F32_EXP 0
#endif

using namespace convkit;

#define CK(call)                                                                                            \
  do {                                                                                                      \
    cudaError_t e_ = (call);                                                                                \
    if (e_ != cudaSuccess) {                                                                                \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, #call); \
      std::exit(2);                                                                                         \
    }                                                                                                       \
  } while (0)

struct Case {
  const char* name;
  int64_t B, Cin, Cout, K, L, S, D, P, G;
  bool timed;
};

__global__ void fill_kernel(float* p, int64_t n, float scale, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t z = i * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    p[i] = scale * ((static_cast<uint32_t>(z ^ (z >> 31)) >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
}

__global__ void ref_kernel(const float* x, const float* w, const float* bias, double* ref, Conv1dParams p) {
  const int64_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
  const int64_t total = p.batch * p.out_channels * p.out_length;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = i % p.out_length, co = (i / p.out_length) % p.out_channels;
    const int64_t b = i / (p.out_length * p.out_channels), g = co / cout_g;
    double acc = bias[co];
    for (int64_t ci = 0; ci < cin_g; ++ci)
      for (int64_t k = 0; k < p.kernel_size; ++k) {
        const int64_t pos = j * p.stride + k * p.dilation - p.pad_left;
        if (pos >= 0 && pos < p.in_length)
          acc += double(x[(b * p.in_channels + g * cin_g + ci) * p.in_length + pos]) *
                 w[(co * cin_g + ci) * p.kernel_size + k];
      }
    ref[i] = acc;
  }
}

int main(int argc, char** argv) {
  const char* only = nullptr;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
  const Case cases[] = {
      {"small_s1", 2, 64, 128, 3, 1000, 1, 1, 1, 1, false},
      {"small_s2", 2, 48, 96, 3, 1001, 2, 1, 1, 1, false},
      {"small_g2_d2", 1, 32, 80, 5, 777, 1, 2, 4, 2, false},
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
    Conv1dParams p{};
    p.batch = c.B, p.in_channels = c.Cin, p.out_channels = c.Cout, p.in_length = c.L, p.kernel_size = c.K;
    p.stride = c.S, p.dilation = c.D, p.pad_left = c.P, p.groups = c.G;
    p.out_length = (c.L + 2 * c.P - c.D * (c.K - 1) - 1) / c.S + 1;
    const int64_t cin_g = c.Cin / c.G;
    p.x_stride_b = c.Cin * c.L, p.x_stride_c = c.L, p.x_stride_l = 1;
    p.w_stride_o = cin_g * c.K, p.w_stride_i = c.K, p.w_stride_k = 1;
    p.y_stride_b = c.Cout * p.out_length, p.y_stride_c = p.out_length, p.y_stride_l = 1;
    p.dtype = p.w_dtype = DType::kFloat32;
    p.num_sms = sms;
    p.code_arch = 90;
    const int64_t nx = c.B * c.Cin * c.L, nw = c.Cout * cin_g * c.K, ny = c.B * c.Cout * p.out_length;
    float *x, *w, *bias, *y;
    CK(cudaMalloc(&x, nx * 4));
    CK(cudaMalloc(&w, nw * 4));
    CK(cudaMalloc(&bias, c.Cout * 4));
    CK(cudaMalloc(&y, ny * 4));
    fill_kernel<<<1024, 256>>>(x, nx, 1.f, 1);
    fill_kernel<<<64, 256>>>(w, nw, 1.f / std::sqrt(float(cin_g * c.K)), 2);
    fill_kernel<<<1, 256>>>(bias, c.Cout, 1.f, 3);
    p.x = x, p.w = w, p.bias = bias, p.y = y;
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
        ref_kernel<<<256, 256>>>(x, w, bias, ref, p);
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
        for (int i = 0; i < 3; ++i) run();
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        std::vector<float> ts;
        for (int i = 0; i < 15; ++i) {
          CK(cudaEventRecord(e0));
          run();
          CK(cudaEventRecord(e1));
          CK(cudaEventSynchronize(e1));
          float ms;
          CK(cudaEventElapsedTime(&ms, e0, e1));
          ts.push_back(ms);
        }
        std::sort(ts.begin(), ts.end());
        std::printf("TIME %-18s %-5s exp %d  %8.3f ms\n", c.name, tf32 ? "tf32" : "ieee", CONVKIT_F32_EXP,
                    ts[ts.size() / 2]);
        CK(cudaEventDestroy(e0));
        CK(cudaEventDestroy(e1));
      }
      if (wsp) CK(cudaFree(wsp));
    }
    CK(cudaFree(x));
    CK(cudaFree(w));
    CK(cudaFree(bias));
    CK(cudaFree(y));
  }
  std::printf("%s\n", failures ? "FAILED" : "cases passed");
  return failures ? 1 : 0;
}
