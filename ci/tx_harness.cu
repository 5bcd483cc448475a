// The transposing TMA forward (conv1d_fwd_dense_tma_tx, CONVKIT_DENSE_TMA_TX=1) alone, without building the
// package: the TX test's cases (tests/test_cuda_correctness.py, TMA_TX_SCRIPT; bf16, bias + GELU by default) through
// launch_conv1d_fwd_dense_tma, checked against a CPU sum (rounded inputs, fp32 accumulation). Written by a helper in
// session 36 to name the case that traps. Session 37 (H100): every case with a padding or dilation that is not a
// multiple of 8 trapped (a box starting inside a 16-byte unit); with boxes rounded down, every case OK. Run:
//   nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A -I csrc ci/tx_harness.cu csrc/kernels/conv1d_fwd_dense_tma.cu \
//     -o /tmp/txh && for c in kb76 kb67 odd_rows stride2_odd stride4_k4 rows32_k5 segments k1 k9_d2 grouped \
//     groups_cin16 batch_view channel_slice tail; do CONVKIT_DENSE_TMA_TX=1 timeout 30 /tmp/txh $c; done
// Arguments: case [activation code, 3 = GELU] [batch override]. Cases of more than 2e7 outputs are not checked
// (x filled on the device); TXH_TIME=n then times n launches after a warm-up (ms per launch, and the bytes of x + y
// over that time). ci/tx_time.sh builds it with the timing experiments and times the suite's shapes.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <string>
#include "conv1d_params.h"
#include "kernels/launchers.h"
using namespace convkit;
struct C { const char* name; int64_t B, Cin, Cout, K, L, row, S, P, D, G; };
static C cases[] = {
    {"kb76", 2, 64, 128, 3, 3000, 3000, 3, 0, 4, 1},
    {"kb67", 2, 64, 128, 3, 1024, 1024, 1, 0, 1, 1},
    {"odd_rows", 3, 64, 128, 3, 1001, 1008, 1, 1, 1, 1},
    {"stride2_odd", 2, 128, 256, 3, 2001, 2008, 2, 1, 1, 1},
    {"stride4_k4", 1, 32, 96, 4, 777, 784, 4, 3, 1, 1},
    {"rows32_k5", 2, 48, 128, 5, 999, 1000, 1, 2, 2, 1},
    {"segments", 2, 64, 128, 2, 1500, 1504, 1, 0, 300, 1},
    {"k1", 2, 64, 128, 1, 600, 600, 1, 0, 1, 1},
    {"k9_d2", 1, 64, 80, 9, 700, 704, 1, 8, 2, 1},
    {"grouped", 2, 128, 256, 3, 640, 640, 1, 1, 1, 2},
    {"groups_cin16", 2, 64, 512, 3, 500, 504, 2, 1, 3, 4},
    {"batch_view", 2, 64, 128, 3, 800, 800, 1, 1, 1, 1},
    {"channel_slice", 2, 64, 128, 3, 512, 512, 1, 1, 1, 1},
    {"tail", 1, 64, 128, 3, 20, 24, 3, 9, 1, 1},
    {"BIG_kb67", 32, 64, 128, 3, 131072, 131072, 1, 0, 1, 1},
    {"MID_kb76", 16, 64, 128, 3, 60000, 60000, 3, 0, 4, 1},
    // the suite's shapes (python/convkit/bench_suite.json), for timing (TXH_TIME)
    {"FULL_kb76", 64, 64, 128, 3, 524280, 524280, 3, 0, 4, 1},
    {"FULL_kb67", 32, 64, 128, 3, 131072, 131072, 1, 0, 1, 1},
    {"FULL_tcn", 16, 256, 256, 3, 16384, 16384, 1, 8, 8, 1},
    {"FULL_wavenet", 16, 256, 256, 2, 16384, 16384, 1, 0, 512, 1},
};
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(2);} } while (0)
static float bf(unsigned short h) { unsigned u = unsigned(h) << 16; float f; memcpy(&f, &u, 4); return f; }
static unsigned short tobf(float f) { unsigned u; memcpy(&u, &f, 4); u += 0x7fff + ((u >> 16) & 1); return u >> 16; }
int main(int argc, char** argv) {
  const char* want = argv[1];
  int act = argc > 2 ? atoi(argv[2]) : 3;
  int bbatch = argc > 3 ? atoi(argv[3]) : 0;  // override batch
  for (auto c : cases) {
    if (strcmp(c.name, want)) continue;
    if (bbatch) c.B = bbatch;
    int dev; CK(cudaGetDevice(&dev)); cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, dev));
    const int64_t cin_g = c.Cin / c.G, cout_g = c.Cout / c.G;
    const int64_t lout = (c.L + 2 * c.P - c.D * (c.K - 1) - 1) / c.S + 1;
    Conv1dParams p; memset(&p, 0, sizeof p);
    p.batch = c.B; p.in_channels = c.Cin; p.out_channels = c.Cout; p.in_length = c.L; p.out_length = lout;
    p.kernel_size = c.K; p.stride = c.S; p.pad_left = c.P; p.dilation = c.D; p.groups = c.G;
    int64_t sc = c.row, sb = c.Cin * c.row, off = 0, xel;
    if (!strcmp(c.name, "batch_view")) { sc = c.L; sb = 2 * c.Cin * c.L; }
    if (!strcmp(c.name, "channel_slice")) { sc = c.L; sb = 2 * c.Cin * c.L; off = c.Cin * c.L; }
    xel = off + c.B * sb;
    p.x_stride_b = sb; p.x_stride_c = sc; p.x_stride_l = 1;
    p.w_stride_o = cin_g * c.K; p.w_stride_i = c.K; p.w_stride_k = 1;
    p.y_stride_b = c.Cout * lout; p.y_stride_c = lout; p.y_stride_l = 1;
    p.dtype = DType::kBFloat16; p.w_dtype = DType::kBFloat16; p.num_sms = pr.multiProcessorCount; p.code_arch = 90;
    p.activation = act;
    const bool checked = c.B * c.Cout * lout <= 20000000;
    std::vector<unsigned short> hx(checked ? xel : 0), hw(c.Cout * cin_g * c.K), hb(c.Cout);
    srand(1);
    for (auto& v : hx) v = tobf((rand() / float(RAND_MAX)) * 2 - 1);
    for (auto& v : hw) v = tobf(((rand() / float(RAND_MAX)) * 2 - 1) / sqrtf(float(cin_g * c.K)));
    for (auto& v : hb) v = tobf((rand() / float(RAND_MAX)) * 2 - 1);
    unsigned short *x, *w, *b, *y; void* ws;
    CK(cudaMalloc(&x, xel * 2)); CK(cudaMalloc(&w, hw.size() * 2)); CK(cudaMalloc(&b, hb.size() * 2));
    CK(cudaMalloc(&y, c.B * c.Cout * lout * 2));
    if (checked) CK(cudaMemcpy(x, hx.data(), xel * 2, cudaMemcpyHostToDevice));
    else CK(cudaMemset(x, 0x3c, xel * 2));  // bf16 0x3c3c: 0.0115
    CK(cudaMemcpy(w, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(y, 0xff, c.B * c.Cout * lout * 2));
    p.x = x + off; p.w = w; p.bias = b; p.y = y;
    printf("%s supports=%d transposes=%d ws=%lld\n", c.name, conv1d_fwd_dense_tma_supports(p),
           conv1d_fwd_dense_tma_form(p) == 2, (long long)conv1d_fwd_dense_tma_workspace_bytes(p));
    CK(cudaMalloc(&ws, conv1d_fwd_dense_tma_workspace_bytes(p) + 16)); p.workspace = ws;
    cudaError_t e = launch_conv1d_fwd_dense_tma(p, 0);
    printf("launch: %s\n", cudaGetErrorString(e));
    e = cudaDeviceSynchronize();
    printf("sync: %s\n", cudaGetErrorString(e));
    if (e != cudaSuccess) return 3;
    if (const char* tn = getenv("TXH_TIME")) {
      const int n = atoi(tn);
      cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
      for (int i = 0; i < 3; ++i) CK(launch_conv1d_fwd_dense_tma(p, 0));
      CK(cudaEventRecord(e0));
      for (int i = 0; i < n; ++i) CK(launch_conv1d_fwd_dense_tma(p, 0));
      CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
      float ms = 0; CK(cudaEventElapsedTime(&ms, e0, e1)); ms /= n;
      const double bytes = 2.0 * (c.B * c.Cin * c.L + c.B * c.Cout * lout);
      printf("TIME %s %.3f ms (x + y %.2f GB: %.0f GB/s)\n", c.name, ms, bytes / 1e9, bytes / ms / 1e6);
    }
    if (!checked) { printf("OK (unchecked)\n"); return 0; }
    std::vector<unsigned short> hy(c.B * c.Cout * lout);
    CK(cudaMemcpy(hy.data(), y, hy.size() * 2, cudaMemcpyDeviceToHost));
    double maxerr = 0; int64_t bad = 0;
    for (int64_t bb = 0; bb < c.B; ++bb) for (int64_t co = 0; co < c.Cout; ++co) {
      const int64_t g = co / cout_g;
      for (int64_t j = 0; j < lout; ++j) {
        float s = bf(hb[co]);
        for (int64_t ci = 0; ci < cin_g; ++ci) for (int64_t k = 0; k < c.K; ++k) {
          int64_t pos = j * c.S - c.P + k * c.D;
          if (pos < 0 || pos >= c.L) continue;
          s += bf(hx[off + bb * sb + (g * cin_g + ci) * sc + pos]) * bf(hw[(co * cin_g + ci) * c.K + k]);
        }
        if (act == 3) s = 0.5f * s * (1.f + erff(s / sqrtf(2.f)));
        float got = bf(hy[(bb * c.Cout + co) * lout + j]);
        double err = fabs(got - s);
        if (!(err <= 0.05 + 0.02 * fabs(s))) { if (bad < 5) printf("bad b%lld co%lld j%lld got %f want %f\n", (long long)bb, (long long)co, (long long)j, got, s); ++bad; }
        if (err > maxerr) maxerr = err;
      }
    }
    printf("%s: bad %lld maxerr %g\n", bad ? "FAIL" : "OK", (long long)bad, maxerr);
    return bad ? 1 : 0;
  }
  printf("no case\n"); return 4;
}
