// Depthwise kernel micro-benchmark: times the depthwise kernels of csrc/kernels/conv1d_depthwise.cuh
// directly (no torch), for several outputs-per-thread values V, so design choices can be compared
// in one short GPU call. Not part of the package; the product benchmark is `python -m convkit.bench`.
//
//   for n in 1 2 3 4 5 6 7 8; do nvcc -O3 -std=c++17 -arch=sm_90 -I csrc -DPART=$n ci/dw_micro.cu -o /tmp/dw_micro$n & done; wait
//   for n in 1 2 3 4 5 6 7 8; do /tmp/dw_micro$n; done
//
// -DLONG_K: the Toeplitz kernels (sweep -DCONVKIT_DW_TOEPLITZ_{FWD,BWD}_MIN_BLOCKS=n) against the pipelined
// ones; -DQUICK: only the library's previous choices against the streaming kernels; -DSTREAM_ONLY: only the
// streaming kernels (with -DCONVKIT_DW_STREAM_{FWD,BWD}_MIN_BLOCKS=n to sweep their register caps).
// For the streaming variants (fwd 9, bwd 4) V is the base width: 16-bit rows long enough for a block
// of 2V run 2V (stream_vec), as in the library.
//
// Prints, per case, dtype, V and direction: median ms and percent of the byte floor at 4.26 TB/s
// (forward: x + y; backward: x + dy + dx), and the max relative error against a direct reference
// kernel (forward output and grad-input on the full case; grad-weight on the first channels).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/conv1d_depthwise.cuh"

using namespace convkit;

#define CHECK(x)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

struct Case {
  const char* name;
  int64_t B, C, L;
  int K, S, D;
  int64_t P;  // -1: causal
};

template <typename T> __global__ void fill(T* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = from_acc<T>(static_cast<float>(h % 2001) / 1000.0f - 1.0f);
  }
}

// Direct references in fp32: y[b,c,j], dx[b,c,i], dw[c,k] (dw for channel c only, one block).
template <typename T> __global__ void ref_fwd(const T* x, const T* w, float* y, int64_t B, int64_t C, int64_t L,
                                              int64_t Lo, int K, int S, int D, int64_t P) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < B * C * Lo; o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = o % Lo, bc = o / Lo, c = bc % C;
    float acc = 0;
    for (int k = 0; k < K; ++k) {
      const int64_t i = j * S + k * D - P;
      if (i >= 0 && i < L) acc += to_acc(w[c * K + k]) * to_acc(x[bc * L + i]);
    }
    y[o] = acc;
  }
}
template <typename T> __global__ void ref_dx(const T* dy, const T* w, float* dx, int64_t B, int64_t C, int64_t L,
                                             int64_t Lo, int K, int S, int D, int64_t P) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < B * C * L; o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = o % L, bc = o / L, c = bc % C;
    float acc = 0;
    for (int k = 0; k < K; ++k) {
      const int64_t t = i + P - k * D;
      if (t >= 0 && t % S == 0 && t / S < Lo) acc += to_acc(w[c * K + k]) * to_acc(dy[bc * Lo + t / S]);
    }
    dx[o] = acc;
  }
}
template <typename T> __global__ void ref_dw(const T* x, const T* dy, float* dw, int64_t B, int64_t C, int64_t L,
                                             int64_t Lo, int K, int S, int D, int64_t P) {
  const int64_t c = blockIdx.x / K;
  const int k = blockIdx.x % K;
  __shared__ float part[256];
  float acc = 0;
  for (int64_t o = threadIdx.x; o < B * Lo; o += blockDim.x) {
    const int64_t b = o / Lo, j = o % Lo, i = j * S + k * D - P;
    if (i >= 0 && i < L) acc += to_acc(dy[(b * C + c) * Lo + j]) * to_acc(x[(b * C + c) * L + i]);
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0;
    for (int t = 0; t < 256; ++t) s += part[t];
    dw[blockIdx.x] = s;
  }
}

template <typename T> std::vector<float> to_host_f(const void* d, int64_t n) {
  std::vector<T> h(n);
  CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (sizeof(T) == 2) {
      uint16_t bits;
      std::memcpy(&bits, &h[i], 2);
      if constexpr (std::is_same<T, __half>::value) {
        f[i] = __half2float(h[i]);
      } else {
        uint32_t u = static_cast<uint32_t>(bits) << 16;
        std::memcpy(&f[i], &u, 4);
      }
    } else {
      f[i] = static_cast<float>(h[i]);
    }
  }
  return f;
}

// max |a - ref| / max |ref| over a sample of at most 2^22 leading elements (NaN counts as failure)
double rel_err(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num = std::max(num, static_cast<double>(std::fabs(a[i] - ref[i])));
    den = std::max(den, static_cast<double>(std::fabs(ref[i])));
  }
  return num / std::max(den, 1e-30);
}

template <typename F> float time_ms(F&& f, int reps) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  f();
  CHECK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    CHECK(cudaEventRecord(a));
    f();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <typename T, int TK, int TS, int TD, int V, int FV, int BV> void run(const Case& cs, const char* tname, int num_sms) {
  const int K = cs.K, S = cs.S, D = cs.D;  // TK/TS/TD pick the kernel (0: runtime shape)
  const int64_t P = cs.P < 0 ? int64_t{K - 1} * D : cs.P;
  const int64_t Lo = (cs.L + 2 * (cs.P < 0 ? 0 : P) + (cs.P < 0 ? P : 0) - int64_t{K - 1} * D - 1) / S + 1;
  const int64_t nx = cs.B * cs.C * cs.L, ny = cs.B * cs.C * Lo;
  void *x, *w, *y, *dy, *dx, *ws, *dwt, *dbt;
  float *ry, *rdx, *rdw;
  CHECK(cudaMalloc(&x, nx * sizeof(T)));
  CHECK(cudaMalloc(&dx, nx * sizeof(T)));
  CHECK(cudaMalloc(&y, ny * sizeof(T)));
  CHECK(cudaMalloc(&dy, ny * sizeof(T)));
  CHECK(cudaMalloc(&w, cs.C * K * sizeof(T)));
  CHECK(cudaMalloc(&dwt, cs.C * K * sizeof(T)));
  CHECK(cudaMalloc(&dbt, cs.C * sizeof(T)));
  fill<<<1024, 256>>>(static_cast<T*>(x), nx, 1);
  fill<<<1024, 256>>>(static_cast<T*>(dy), ny, 2);
  fill<<<64, 256>>>(static_cast<T*>(w), cs.C * K, 3);
  CHECK(cudaMemset(y, 0xff, ny * sizeof(T)));   // NaN poison
  CHECK(cudaMemset(dx, 0xff, nx * sizeof(T)));

  Conv1dParams p{};
  p.batch = cs.B; p.in_channels = cs.C; p.out_channels = cs.C; p.in_length = cs.L; p.out_length = Lo;
  p.kernel_size = K; p.stride = S; p.pad_left = P; p.dilation = D; p.groups = cs.C;
  p.x_stride_b = cs.C * cs.L; p.x_stride_c = cs.L; p.x_stride_l = 1;
  p.w_stride_o = K; p.w_stride_i = K; p.w_stride_k = 1;
  p.y_stride_b = cs.C * Lo; p.y_stride_c = Lo; p.y_stride_l = 1;
  p.x = x; p.w = w; p.bias = nullptr; p.y = y;
  p.dtype = sizeof(T) == 4 ? DType::kFloat32 : (std::is_same<T, __half>::value ? DType::kFloat16 : DType::kBFloat16);
  p.w_dtype = p.dtype;
  p.num_sms = num_sms;
  p.code_arch = 90;  // built for sm_90a: the streaming kernels' extra widths exist, as in the library there
  p.activation = kActNone;
  Conv1dParams q = p;  // backward: y holds dy; writes grad_x, grad_w, grad_bias
  q.y = dy; q.grad_x = dx; q.gx_stride_b = p.x_stride_b; q.gx_stride_c = p.x_stride_c; q.gx_stride_l = 1;
  q.grad_w = dwt; q.grad_bias = dbt;
  const int64_t ws_elems = dw::plan_bwd(q, V, BV, TK > 0);
  CHECK(cudaMalloc(&ws, ws_elems * sizeof(float)));
  q.workspace = ws;

  auto fwd = [&] { CHECK((dw::launch_fwd<T, TK, TS, TD, V, FV>(p, 0))); };
  auto bwd = [&] { CHECK((dw::launch_bwd<T, TK, TS, TD, V, BV>(q, 0))); };
  fwd();
  bwd();
  CHECK(cudaDeviceSynchronize());

  // correctness on a leading sample
  const int64_t ns = std::min<int64_t>(ny, 1 << 22), nsx = std::min<int64_t>(nx, 1 << 22);
  CHECK(cudaMalloc(&ry, ny * sizeof(float)));
  CHECK(cudaMalloc(&rdx, nx * sizeof(float)));
  const int64_t cw = std::min<int64_t>(cs.C, 16);
  CHECK(cudaMalloc(&rdw, cw * K * sizeof(float)));
  ref_fwd<T><<<4096, 256>>>(static_cast<T*>(x), static_cast<T*>(w), ry, cs.B, cs.C, cs.L, Lo, K, S, D, P);
  ref_dx<T><<<4096, 256>>>(static_cast<T*>(dy), static_cast<T*>(w), rdx, cs.B, cs.C, cs.L, Lo, K, S, D, P);
  ref_dw<T><<<cw * K, 256>>>(static_cast<T*>(x), static_cast<T*>(dy), rdw, cs.B, cs.C, cs.L, Lo, K, S, D, P);
  CHECK(cudaDeviceSynchronize());
  std::vector<float> hy = to_host_f<T>(y, ns), hdx = to_host_f<T>(dx, nsx), hdw = to_host_f<T>(dwt, cw * K);
  std::vector<float> hry(ns), hrdx(nsx), hrdw(cw * K);
  CHECK(cudaMemcpy(hry.data(), ry, ns * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hrdx.data(), rdx, nsx * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hrdw.data(), rdw, cw * K * 4, cudaMemcpyDeviceToHost));
  const double ey = rel_err(hy, hry), edx = rel_err(hdx, hrdx), edw = rel_err(hdw, hrdw);

  const double bytes_f = static_cast<double>(nx + ny) * sizeof(T);
  const double bytes_b = static_cast<double>(2 * nx + ny) * sizeof(T);
  const int reps = bytes_f > 4e9 ? 5 : 20;
  const float tf = time_ms(fwd, reps), tb = time_ms(bwd, reps);
  const double floor_f = bytes_f / 4.26e12 * 1e3, floor_b = bytes_b / 4.26e12 * 1e3;
  std::printf("%-22s %-5s fv%d bv%d V=%-2d fwd %8.4f ms %5.1f %% floor | bwd %8.4f ms %5.1f %% floor | err y %.1e dx %.1e dw %.1e%s\n",
              cs.name, tname, FV, BV, V, tf, 100 * floor_f / tf, tb, 100 * floor_b / tb, ey, edx, edw,
              (ey > 2e-2 || edx > 2e-2 || edw > 2e-2) ? "  <-- WRONG" : "");
  for (void* ptr : {x, w, y, dy, dx, ws, dwt, dbt}) CHECK(cudaFree(ptr));
  CHECK(cudaFree(ry));
  CHECK(cudaFree(rdx));
  CHECK(cudaFree(rdw));
}

// Variants (see launch_fwd / launch_bwd): fwd 0 staged, 1 pipelined, 2 + interleaved runs,
// 3 + grid-stride tile order, 4 both, 5 warp-coalesced stores, 6 + grid-stride, 7 direct, 8 Toeplitz
// on tensor cores (16-bit, stride 1), 9 streaming, 10 Toeplitz with a per-warp cp.async ring, 11 Hankel
// (the window as the A operand, stride 1); bwd 0 staged,
// 1 pipelined, 2 + interleaved runs, 3 direct, 4 streaming, 5 Toeplitz (16-bit, stride 1; else 1),
// 6 Toeplitz with a per-warp ring (else 5), 7 the same with a Hankel grad-input on swizzled windows (else 5). Earlier runs' clear losers (0, 2, 3 and V=8 of the
// pipelined kernels, benchmarks/NOTES.md) are left out to keep `gpu_check.sh tune` short.
template <typename T, int K, int S, int D> void variants(const Case& c, const char* tn, int sms) {
#ifdef STREAM_ONLY  // the streaming kernels only (e.g. with -DCONVKIT_DW_STREAM_FWD_MIN_BLOCKS=12)
  run<T, K, S, D, 16, 9, 4>(c, tn, sms);
  if constexpr (sizeof(T) == 2) run<T, K, S, D, 32, 9, 4>(c, tn, sms);
  return;
#endif
#ifdef LONG_K  // the Toeplitz (tensor-core) kernels against the pipelined ones (K >= 15, 16-bit)
  if constexpr (sizeof(T) == 2) {
    run<T, K, S, D, 16, 8, 1>(c, tn, sms);
    run<T, K, S, D, 16, 8, 5>(c, tn, sms);
    run<T, K, S, D, 8, 8, 5>(c, tn, sms);
    run<T, K, S, D, 16, 10, 6>(c, tn, sms);
    run<T, K, S, D, 8, 10, 6>(c, tn, sms);
    run<T, K, S, D, 16, 11, 7>(c, tn, sms);  // Hankel forward (data as the A operand), Hankel grad-input
    run<T, K, S, D, 8, 11, 7>(c, tn, sms);
    run<T, K, S, D, 32, 11, 1>(c, tn, sms);  // (the ring backward at V = 32 needs > 48 KB of static shared memory)
  } else {
    run<T, K, S, D, 16, 6, 1>(c, tn, sms);
  }
  return;
#endif
#ifdef QUICK  // the library's current choices against the streaming kernels only
  if constexpr (sizeof(T) == 2) {
    run<T, K, S, D, 32, 7, 1>(c, tn, sms);
    run<T, K, S, D, 16, 8, 3>(c, tn, sms);
    run<T, K, S, D, 32, 9, 4>(c, tn, sms);
  } else {
    run<T, K, S, D, 16, 6, 1>(c, tn, sms);
    run<T, K, S, D, 4, 9, 4>(c, tn, sms);
  }
  run<T, K, S, D, 16, 9, 4>(c, tn, sms);
  run<T, K, S, D, 8, 9, 4>(c, tn, sms);
  return;
#endif
  run<T, K, S, D, 16, 1, 1>(c, tn, sms);
  run<T, K, S, D, 16, 4, 2>(c, tn, sms);
  run<T, K, S, D, 16, 5, 1>(c, tn, sms);  // warp-coalesced stores
  run<T, K, S, D, 16, 6, 2>(c, tn, sms);
  run<T, K, S, D, 8, 7, 3>(c, tn, sms);   // direct kernels
  run<T, K, S, D, 16, 7, 3>(c, tn, sms);
  // streaming kernels (conv1d_depthwise_stream.cuh): V / VE 16-byte units per thread
  run<T, K, S, D, 16, 9, 4>(c, tn, sms);
  run<T, K, S, D, 8, 9, 4>(c, tn, sms);
  if constexpr (sizeof(T) == 2) {
    run<T, K, S, D, 32, 9, 4>(c, tn, sms);
  } else {
    run<T, K, S, D, 4, 9, 4>(c, tn, sms);
  }
  if constexpr (sizeof(T) == 2) {
    run<T, K, S, D, 32, 7, 3>(c, tn, sms);
    run<T, K, S, D, 16, 8, 3>(c, tn, sms);  // tensor-core Toeplitz forward (stride 1; else direct)
    run<T, K, S, D, 32, 8, 3>(c, tn, sms);
  } else {
    run<T, K, S, D, 4, 7, 3>(c, tn, sms);
  }
}

// Build with -DPART=n (1..8) to compile one case per binary (they compile in parallel).
int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const Case mamba{"mamba_dw_k4_causal", 8, 4096, 2048, 4, 1, 1, -1};
  const Case kb{"kb_dw_k3", 32, 512, 8192, 3, 1, 1, 1};
  const Case conf{"conformer_dw_k31", 32, 512, 2048, 31, 1, 1, 15};
  const Case shortc{"shortconv_dw_k4", 16, 12288, 16384, 4, 1, 1, -1};
  const Case s2{"k4_s2 (B8 C4096 L4096)", 8, 4096, 4096, 4, 2, 1, 1};
  const Case d2{"k5 d2 same L=4096", 8, 4096, 4096, 5, 1, 2, 4};
#if PART == 1
  variants<__nv_bfloat16, 4, 1, 1>(mamba, "bf16", sms);
#elif PART == 2
  variants<float, 4, 1, 1>(mamba, "fp32", sms);
#elif PART == 3
  variants<__nv_bfloat16, 3, 1, 1>(kb, "bf16", sms);
#elif PART == 4
  variants<float, 3, 1, 1>(kb, "fp32", sms);
#elif PART == 5
  variants<__nv_bfloat16, 31, 1, 1>(conf, "bf16", sms);
#elif PART == 6
  variants<float, 31, 1, 1>(conf, "fp32", sms);
#elif PART == 7
  variants<__nv_bfloat16, 4, 1, 1>(shortc, "bf16", sms);
#elif PART == 8
  variants<__nv_bfloat16, 4, 2, 1>(s2, "bf16", sms);
  variants<__half, 5, 1, 2>(d2, "fp16", sms);
  variants<float, 0, 0, 0>(d2, "fp32", sms);
#elif PART == 9  // the table's longer streaming entries ("same" padding), rows of 4096 and 2048
  const Case k7{"k7 same L=4096", 8, 4096, 4096, 7, 1, 1, 3};
  const Case k9{"k9 same L=4096", 8, 4096, 4096, 9, 1, 1, 4};
  const Case k9s{"k9 same L=2048", 8, 4096, 2048, 9, 1, 1, 4};
  const Case k7s2{"k7 s2 P3 L=4096", 8, 4096, 4096, 7, 2, 1, 3};
  variants<__nv_bfloat16, 7, 1, 1>(k7, "bf16", sms);
  variants<__nv_bfloat16, 9, 1, 1>(k9, "bf16", sms);
  variants<__nv_bfloat16, 9, 1, 1>(k9s, "bf16", sms);
  variants<__nv_bfloat16, 7, 2, 1>(k7s2, "bf16", sms);
#endif
  return 0;
}
