// What the fp32 forward harnesses share (ci/f32_window_check.cu, ci/tf32_wgmma_proto.cu): the error check, a case of
// the suite's shape, random inputs, a float64 direct-convolution reference, contiguous parameters, median timings.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "conv1d_params.h"

#define CK(call)                                                                                            \
  do {                                                                                                      \
    cudaError_t e_ = (call);                                                                                \
    if (e_ != cudaSuccess) {                                                                                \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, #call); \
      std::exit(2);                                                                                         \
    }                                                                                                       \
  } while (0)

namespace f32h {
using convkit::Conv1dParams;

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
          acc += double(x[b * p.x_stride_b + (g * cin_g + ci) * p.x_stride_c + pos]) *
                 w[(co * cin_g + ci) * p.kernel_size + k];
      }
    ref[i] = acc;
  }
}

// Case c on fresh random fp32 tensors (contiguous; x, w, bias, y allocated here, freed by free_tensors).
inline Conv1dParams make_case(const Case& c, int sms) {
  Conv1dParams p{};
  p.batch = c.B, p.in_channels = c.Cin, p.out_channels = c.Cout, p.in_length = c.L, p.kernel_size = c.K;
  p.stride = c.S, p.dilation = c.D, p.pad_left = c.P, p.groups = c.G;
  p.out_length = (c.L + 2 * c.P - c.D * (c.K - 1) - 1) / c.S + 1;
  const int64_t cin_g = c.Cin / c.G;
  p.x_stride_b = c.Cin * c.L, p.x_stride_c = c.L, p.x_stride_l = 1;
  p.w_stride_o = cin_g * c.K, p.w_stride_i = c.K, p.w_stride_k = 1;
  p.y_stride_b = c.Cout * p.out_length, p.y_stride_c = p.out_length, p.y_stride_l = 1;
  p.dtype = p.w_dtype = convkit::DType::kFloat32;
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
  return p;
}

inline void free_tensors(const Conv1dParams& p) {
  CK(cudaFree(p.x));
  CK(cudaFree(p.w));
  CK(cudaFree(p.bias));
  CK(cudaFree(p.y));
}

// Median of 15 cudaEvent timings of run() after 3 warm-up runs, ms.
template <typename Run> float median_ms(Run run) {
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
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

}  // namespace f32h
