// Standalone correctness + speed check of the dense grad-weight (+ grad-bias) kernels: the wgmma one
// (csrc/kernels/conv1d_bwd_weight_dense_wgmma.cu, sm_90a) against a direct fp32 reference on the GPU, and
// its time against the mma.sync one (conv1d_bwd_weight_dense_mma.cu) on the same tensors.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A -I csrc ci/dense_wgrad_check.cu \
//        csrc/kernels/conv1d_bwd_weight_dense_wgmma.cu csrc/kernels/conv1d_bwd_weight_dense_mma.cu -o /tmp/wgrad \
//        && /tmp/wgrad                     [--only NAME]
//
// Every case: random x and dy (values in [-1, 1), rounded to the 16-bit type), dw and db poisoned with NaN,
// then compared with the reference (fp32 sums of the same rounded values; the larger suite shapes compare
// with the mma.sync kernel's result instead, a direct sum over 10^7 positions per weight being too slow):
// max |dw - ref| / max |ref| <= 8e-3 bf16, 2e-3 fp16 (both sides accumulate in fp32; the output roundings differ).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
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

using namespace convkit;

#define CK(call)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "CUDA error %s (%s) at %s:%d: %s\n", cudaGetErrorName(e_),              \
                   cudaGetErrorString(e_), __FILE__, __LINE__, #call);                             \
      std::exit(2);                                                                                \
    }                                                                                              \
  } while (0)

struct Case {
  const char* name;
  bool bf16;
  int64_t B, Cin, Cout, K, L, S, D, padL, padR, groups;
  int64_t xsl;   // x element stride along L (1, or 3: a strided view)
  int64_t ypad;  // extra elements per dy channel row
  bool big;      // compare with the mma.sync kernel and time both
};

__device__ __forceinline__ uint32_t hash32(uint64_t i, uint32_t seed) {
  uint64_t z = i * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<uint32_t>(z ^ (z >> 31));
}
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T>
__global__ void fill_kernel(T* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    p[i] = from_f<T>((hash32(i, seed) >> 8) * (2.0f / 16777216.0f) - 1.0f);
}

// ref_w[co][ci][k], ref_b[co]: direct fp32 sums (one thread per weight).
template <typename T>
__global__ void ref_kernel(const T* x, const T* dy, float* ref_w, float* ref_b, Conv1dParams p) {
  const int64_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
  const int64_t n_w = p.out_channels * cin_g * p.kernel_size;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n_w + p.out_channels;
       i += int64_t(gridDim.x) * blockDim.x) {
    const bool is_b = i >= n_w;
    const int64_t co = is_b ? i - n_w : i / (cin_g * p.kernel_size);
    const int64_t ci = is_b ? 0 : (i / p.kernel_size) % cin_g, k = is_b ? 0 : i % p.kernel_size;
    const int64_t g = co / cout_g;
    float acc = 0.f;
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t j = 0; j < p.out_length; ++j) {
        const float d = to_f(dy[b * p.y_stride_b + co * p.y_stride_c + j * p.y_stride_l]);
        if (is_b) { acc += d; continue; }
        const int64_t pos = j * p.stride + k * p.dilation - p.pad_left;
        if (pos < 0 || pos >= p.in_length) continue;
        acc = fmaf(d, to_f(x[b * p.x_stride_b + (g * cin_g + ci) * p.x_stride_c + pos * p.x_stride_l]), acc);
      }
    if (is_b) ref_b[co] = acc; else ref_w[i] = acc;
  }
}

template <typename T>
__global__ void to_float_kernel(const T* a, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = to_f(a[i]);
}

static int g_sms = 132, g_arch = 90;
static unsigned blocks_for(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, int64_t(g_sms) * 32)); }

// max |a - r| / max |r| over n values (a as 16-bit T on the device, r fp32 on the host), NaN -> inf
template <typename T>
static double rel_err(const T* a_dev, const std::vector<float>& r, int64_t n, float* tmp) {
  to_float_kernel<T><<<blocks_for(n), 256>>>(a_dev, tmp, n);
  CK(cudaGetLastError());
  std::vector<float> a(n);
  CK(cudaMemcpy(a.data(), tmp, n * 4, cudaMemcpyDeviceToHost));
  double err = 0, ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    err = std::max(err, double(std::fabs(a[i] - r[i])));
    ref = std::max(ref, double(std::fabs(r[i])));
  }
  return ref > 0 ? err / ref : err;
}

using LaunchFn = cudaError_t (*)(const Conv1dParams&, cudaStream_t);
using PlanFn = int64_t (*)(Conv1dParams&);

static double time_ms(Conv1dParams p, LaunchFn launch) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 2; ++i) CK(launch(p, 0));
  std::vector<float> t(9);
  for (float& v : t) {
    CK(cudaEventRecord(e0));
    CK(launch(p, 0));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&v, e0, e1));
  }
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return t[t.size() / 2];
}

template <typename T>
static bool run_case(const Case& c) {
  const int64_t Lout = (c.L + c.padL + c.padR - c.D * (c.K - 1) - 1) / c.S + 1;
  const int64_t cin_g = c.Cin / c.groups;
  Conv1dParams p;
  std::memset(&p, 0, sizeof(p));
  p.batch = c.B; p.in_channels = c.Cin; p.out_channels = c.Cout; p.in_length = c.L; p.out_length = Lout;
  p.kernel_size = c.K; p.stride = c.S; p.pad_left = c.padL; p.dilation = c.D; p.groups = c.groups;
  p.x_stride_l = c.xsl; p.x_stride_c = c.L * c.xsl; p.x_stride_b = c.Cin * p.x_stride_c;
  p.y_stride_l = 1; p.y_stride_c = Lout + c.ypad; p.y_stride_b = c.Cout * p.y_stride_c;
  p.w_stride_i = c.K; p.w_stride_k = 1; p.w_stride_o = cin_g * c.K;
  p.dtype = c.bf16 ? DType::kBFloat16 : DType::kFloat16;
  p.w_dtype = p.dtype;
  p.num_sms = g_sms;
  p.code_arch = g_arch;
  const bool sup = conv1d_bwd_weight_dense_wgmma_supports(p);
  std::printf("%-24s %s B%lld Cin%lld Cout%lld K%lld L%lld S%lld D%lld P%lld/%lld G%lld%s%s Lout%lld supports=%d\n",
              c.name, c.bf16 ? "bf16" : "fp16", (long long)c.B, (long long)c.Cin, (long long)c.Cout, (long long)c.K,
              (long long)c.L, (long long)c.S, (long long)c.D, (long long)c.padL, (long long)c.padR, (long long)c.groups,
              c.xsl != 1 ? " xview" : "", c.ypad ? " yview" : "", (long long)Lout, int(sup));
  if (!sup) return true;

  const int64_t x_elems = c.B * p.x_stride_b, y_elems = c.B * p.y_stride_b;
  const int64_t n_w = c.Cout * cin_g * c.K;
  T *x, *dy, *dw, *db;
  float* tmp;
  CK(cudaMalloc(&x, x_elems * sizeof(T)));
  CK(cudaMalloc(&dy, y_elems * sizeof(T)));
  CK(cudaMalloc(&dw, n_w * sizeof(T)));
  CK(cudaMalloc(&db, c.Cout * sizeof(T)));
  CK(cudaMalloc(&tmp, (n_w + c.Cout) * 4));
  fill_kernel<T><<<blocks_for(x_elems), 256>>>(x, x_elems, 1234u);
  fill_kernel<T><<<blocks_for(y_elems), 256>>>(dy, y_elems, 555u);
  CK(cudaGetLastError());
  p.x = x; p.y = dy; p.w = dw; p.bias = db;

  std::vector<float> ref_w(n_w), ref_b(c.Cout);
  void* ws_mma = nullptr;
  Conv1dParams pm = p;
  if (c.big) {  // the mma.sync kernel's result is the reference
    const int64_t ws = plan_conv1d_bwd_weight_dense_mma(pm);
    CK(cudaMalloc(&ws_mma, ws * 4));
    pm.workspace = ws_mma;
    CK(launch_conv1d_bwd_weight_dense_mma(pm, 0));
    CK(cudaDeviceSynchronize());
    to_float_kernel<T><<<blocks_for(n_w), 256>>>(dw, tmp, n_w);
    to_float_kernel<T><<<1, 256>>>(db, tmp + n_w, c.Cout);
    CK(cudaMemcpy(ref_w.data(), tmp, n_w * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ref_b.data(), tmp + n_w, c.Cout * 4, cudaMemcpyDeviceToHost));
  } else {
    float *rw, *rbias;
    CK(cudaMalloc(&rw, n_w * 4));
    CK(cudaMalloc(&rbias, c.Cout * 4));
    ref_kernel<T><<<blocks_for(n_w + c.Cout), 256>>>(x, dy, rw, rbias, p);
    CK(cudaGetLastError());
    CK(cudaMemcpy(ref_w.data(), rw, n_w * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ref_b.data(), rbias, c.Cout * 4, cudaMemcpyDeviceToHost));
    CK(cudaFree(rw));
    CK(cudaFree(rbias));
  }

  const int64_t ws = plan_conv1d_bwd_weight_dense_wgmma(p);
  void* wsp;
  CK(cudaMalloc(&wsp, ws * 4));
  p.workspace = wsp;
  CK(cudaMemset(dw, 0xFF, n_w * sizeof(T)));  // NaN poison
  CK(cudaMemset(db, 0xFF, c.Cout * sizeof(T)));
  CK(launch_conv1d_bwd_weight_dense_wgmma(p, 0));
  CK(cudaDeviceSynchronize());
  const double ew = rel_err<T>(dw, ref_w, n_w, tmp), eb = rel_err<T>(db, ref_b, c.Cout, tmp);
  const double tol = c.bf16 ? 8e-3 : 2e-3;  // one or two roundings of the result to bf16 (2^-9 each)
  const bool pass = ew <= tol && eb <= tol;
  std::printf("    splits %lld  grad-weight rel err %.3e  grad-bias %.3e  %s\n", (long long)p.weight_splits, ew, eb,
              pass ? "PASS" : "FAIL");
  if (c.big && (pass || std::getenv("DC_TIME_ALWAYS"))) {
    const double t_wg = time_ms(p, launch_conv1d_bwd_weight_dense_wgmma), t_mma = time_ms(pm, launch_conv1d_bwd_weight_dense_mma);
    const double flops = 2.0 * c.B * c.Cout * Lout * cin_g * c.K;
    std::printf("    TIME wgmma %.4f ms (%.0f TFLOP/s)  mma.sync %.4f ms (%.0f TFLOP/s)  x%.2f\n", t_wg,
                flops / t_wg * 1e-9, t_mma, flops / t_mma * 1e-9, t_mma / t_wg);
  }
  CK(cudaFree(x)); CK(cudaFree(dy)); CK(cudaFree(dw)); CK(cudaFree(db)); CK(cudaFree(tmp)); CK(cudaFree(wsp));
  if (ws_mma) CK(cudaFree(ws_mma));
  return pass;
}

int main(int argc, char** argv) {
  const char* only = nullptr;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
  int dev = 0;
  CK(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  g_sms = prop.multiProcessorCount;
  g_arch = prop.major * 10 + prop.minor;
  std::printf("device %s, %d SMs, sm_%d%d\n", prop.name, g_sms, prop.major, prop.minor);
  //  name                  bf16   B   Cin  Cout K  L       S  D    pL pR G  xsl ypad big
  const Case cases[] = {
      {"basic_k3",            true,  2,  64,  128, 3, 1000,   1, 1,   1, 1, 1, 1, 0, false},
      {"odd_L_s2_fp16",       false, 3,  128, 96,  3, 1999,   2, 1,   0, 0, 1, 1, 0, false},
      {"k3_d512_segments",    true,  2,  64,  64,  3, 2100,   1, 512, 0, 0, 1, 1, 0, false},
      {"cin40_partial_block", true,  2,  40,  72,  3, 333,    1, 1,   0, 0, 1, 1, 0, false},
      {"s3_d4",               true,  2,  64,  128, 3, 3001,   3, 4,   0, 0, 1, 1, 0, false},
      {"pad_causal_k3_d2",    false, 2,  96,  200, 3, 777,    1, 2,   4, 0, 1, 1, 3, false},
      {"groups_2_partial",    true,  2,  144, 160, 3, 500,    1, 1,   1, 1, 2, 1, 0, false},
      {"xview_stride3",       true,  2,  64,  64,  3, 600,    2, 1,   1, 0, 1, 3, 0, false},
      {"short_L",             true,  5,  64,  64,  3, 7,      1, 1,   1, 1, 1, 1, 0, false},
      {"many_chunks",         true,  8,  64,  128, 3, 30001,  1, 1,   1, 1, 1, 1, 0, false},
      // the suite (bf16); the reference is the mma.sync kernel
      {"kb76_dense_s3d4",     true,  64, 64,  128, 3, 524280, 3, 4,   0, 0, 1, 1, 0, true},
      {"kb67_dense_k3",       true,  32, 64,  128, 3, 131072, 1, 1,   0, 0, 1, 1, 0, true},
      {"w2v_k3s2",            true,  16, 512, 512, 3, 49999,  2, 1,   0, 0, 1, 1, 0, true},
      {"tcn_k3_d8",           true,  16, 256, 256, 3, 16384,  1, 8,   8, 8, 1, 1, 0, true},
      {"wavenet_k2_d512",     true,  16, 256, 256, 2, 16384,  1, 512, 0, 0, 1, 1, 0, true},
  };
  int fails = 0, n = 0;
  for (const Case& c : cases) {
    if (only && !std::strstr(c.name, only)) continue;
    ++n;
    const bool ok = c.bf16 ? run_case<__nv_bfloat16>(c) : run_case<__half>(c);
    if (!ok) ++fails;
  }
  std::printf("\n%d cases, %d failed: %s\n", n, fails, fails ? "FAIL" : "ALL PASS");
  return fails ? 1 : 0;
}
