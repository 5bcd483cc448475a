#include "shim.h"
#include "csrc/kernels/causal_conv1d.cu"
#include <vector>
using namespace convkit;
extern "C" {
// mirrors dispatch.cpp's causal_params + set_causal_inputs + output strides
static CausalParams base(int dt, int wdt, int64_t B, int64_t C, int64_t L, int64_t K, int64_t d, void* x, const int64_t* xs,
                         void* w, const int64_t* ws, void* bias, int act, int num_sms) {
  CausalParams p{};
  p.batch = B; p.channels = C; p.length = L; p.kernel_size = K; p.dilation = d; p.halo = (K - 1) * d;
  p.x = x; p.x_sb = xs[0]; p.x_sc = xs[1]; p.x_sl = xs[2];
  p.w = w; p.w_sc = ws[0]; p.w_sk = ws[1];
  p.bias = bias;
  p.dtype = (DType)dt; p.w_dtype = (DType)wdt; p.num_sms = num_sms; p.activation = act;
  p.c_fastest = xs[1] == 1 && C > 1;
  return p;
}
static void inputs(CausalParams& p, void* st, const int64_t* ss, int32_t* seq, const int64_t* qs) {
  if (st) { p.state = st; p.st_sb = ss[0]; p.st_sc = ss[1]; p.st_sl = ss[2]; }
  if (seq) { p.seq_idx = seq; p.seq_sb = qs[0]; p.seq_sl = qs[1]; }
}
int emu_fwd(int dt, int wdt, int64_t B, int64_t C, int64_t L, int64_t K, int64_t d, void* x, const int64_t* xs, void* w,
            const int64_t* ws, void* bias, void* st, const int64_t* ss, int32_t* seq, const int64_t* qs, void* y,
            const int64_t* ys, int act, int num_sms) {
  CausalParams p = base(dt, wdt, B, C, L, K, d, x, xs, w, ws, bias, act, num_sms);
  inputs(p, st, ss, seq, qs);
  p.y = y; p.y_sb = ys[0]; p.y_sc = ys[1]; p.y_sl = ys[2];
  return (int)launch_causal_conv1d_fwd(p, nullptr);
}
int emu_bwd(int dt, int wdt, int64_t B, int64_t C, int64_t L, int64_t K, int64_t d, void* x, const int64_t* xs, void* w,
            const int64_t* ws, void* bias, void* st, const int64_t* ss, int32_t* seq, const int64_t* qs, void* g,
            const int64_t* gs, void* dx, const int64_t* dxs, void* dst, const int64_t* dss, void* dw, void* db,
            int num_sms, int64_t* splits_out) {
  CausalParams p = base(dt, wdt, B, C, L, K, d, x, xs, w, ws, bias, 0, num_sms);
  inputs(p, st, ss, seq, qs);
  p.y = g; p.y_sb = gs[0]; p.y_sc = gs[1]; p.y_sl = gs[2];
  if (dx) { p.grad_x = dx; p.gx_sb = dxs[0]; p.gx_sc = dxs[1]; p.gx_sl = dxs[2]; }
  if (dst) { p.grad_state = dst; p.gs_sb = dss[0]; p.gs_sc = dss[1]; p.gs_sl = dss[2]; }
  std::vector<double> wsbuf;
  if (dw || db) {
    p.grad_w = dw; p.grad_bias = db;
    int64_t n = plan_causal_conv1d_bwd_weight(p);
    wsbuf.assign(n, std::nan(""));  // poisoned (enough bytes for fp32 or fp64 accumulators)
    p.workspace = wsbuf.data();
    *splits_out = p.weight_splits;
  }
  return (int)launch_causal_conv1d_bwd(p, nullptr);
}
int emu_update(int dt, int wdt, int64_t B, int64_t C, int64_t T, int64_t K, int64_t d, void* x, const int64_t* xs, void* w,
               const int64_t* ws, void* bias, void* st, const int64_t* ss, int64_t rows, int64_t S, int32_t* cs,
               int32_t* idx, void* y, const int64_t* ys, int act, int num_sms) {
  CausalParams p = base(dt, wdt, B, C, T, K, d, x, xs, w, ws, bias, act, num_sms);
  p.state = st; p.st_sb = ss[0]; p.st_sc = ss[1]; p.st_sl = ss[2]; p.state_batch = rows; p.state_len = S;
  if (cs) { p.cache_seqlens = cs; p.cache_stride = 1; }
  if (idx) { p.state_indices = idx; p.index_stride = 1; }
  p.y = y; p.y_sb = ys[0]; p.y_sc = ys[1]; p.y_sl = ys[2];
  return (int)launch_causal_conv1d_update(p, nullptr);
}
}
