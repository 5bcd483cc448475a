// The element functions of csrc/kernels/causal_conv1d.cuh (what the CUDA kernels of causal_conv1d.cu run
// per output) on the CPU, in float64, for tests/test_causal.py: it compiles this file with the system C++
// compiler and compares the results with torch. The loops follow the kernels' (the same index splitting and
// split reduction, in one thread); what only the GPU tests check: threads and blocks (grid-stride steps,
// block_sum), loads and stores of each dtype, bias, activation, the padding row's zeros.
#include <cstdint>

#include "kernels/causal_conv1d.cuh"

namespace {

struct Src {
  const double* xp;
  const int64_t* xs;  // strides (b, c, t)
  double* sp;
  const int64_t* ss;
  const int32_t* qp;
  const int64_t* qs;  // (b, t)
  const double* wp;
  const int64_t* ws;  // (c, k)
  const double* gp;   // contiguous (B, C, L)
  int64_t C, L;
  double x(int64_t b, int64_t c, int64_t t) const { return xp[b * xs[0] + c * xs[1] + t * xs[2]]; }
  double state(int64_t b, int64_t c, int64_t j) const { return sp[b * ss[0] + c * ss[1] + j * ss[2]]; }
  void set_state(int64_t b, int64_t c, int64_t j, double v) const { sp[b * ss[0] + c * ss[1] + j * ss[2]] = v; }
  int32_t seq(int64_t b, int64_t t) const { return qp[b * qs[0] + t * qs[1]]; }
  double w(int64_t c, int64_t k) const { return wp[c * ws[0] + k * ws[1]]; }
  double g(int64_t b, int64_t c, int64_t t) const { return gp[(b * C + c) * L + t]; }
};

convkit::causal::Shape shape(int64_t B, int64_t C, int64_t L, int64_t K, int64_t d, const Src& s) {
  return {B, C, L, K, d, (K - 1) * d, s.sp != nullptr, s.qp != nullptr};
}

}  // namespace

extern "C" {

// z (B, C, L) contiguous: the pre-activation output without bias, elements visited as the forward kernel's
// grid-stride loop visits them (split_index, channels or positions fastest); `visits` counts each element's.
void causal_forward(int64_t B, int64_t C, int64_t L, int64_t K, int64_t d, const double* x, const int64_t* xs,
                    double* state, const int64_t* ss, const int32_t* seq, const int64_t* qs, const double* w,
                    const int64_t* ws, int64_t c_fastest, double* z, int32_t* visits) {
  const Src src{x, xs, state, ss, seq, qs, w, ws, nullptr, C, L};
  const auto sh = shape(B, C, L, K, d, src);
  for (int64_t idx = 0; idx < B * C * L; ++idx) {
    int64_t b, c, t;
    convkit::causal::split_index(idx, C, L, c_fastest != 0, b, c, t);
    z[(b * C + c) * L + t] = convkit::causal::forward_value<double>(src, sh, b, c, t);
    ++visits[(b * C + c) * L + t];
  }
}

// From g (B, C, L) contiguous, as the backward kernels: dx (B, C, L) and, when dstate is set, the initial
// state's grad (B, C, halo), over positions [-halo or 0, L) by split_index; dw (C, K) and db (C,) as per-split
// partial sums over split_range's positions (split_len of them), then the splits summed in order.
void causal_backward(int64_t B, int64_t C, int64_t L, int64_t K, int64_t d, const double* x, const int64_t* xs,
                     double* state, const int64_t* ss, const int32_t* seq, const int64_t* qs, const double* w,
                     const int64_t* ws, const double* g, int64_t c_fastest, int64_t split_len, double* dx,
                     double* dstate, double* dw, double* db) {
  const Src src{x, xs, state, ss, seq, qs, w, ws, g, C, L};
  const auto sh = shape(B, C, L, K, d, src);
  const int64_t H = sh.halo, lo = dstate != nullptr ? -H : 0, n = L - lo;
  for (int64_t idx = 0; idx < B * C * n; ++idx) {
    int64_t b, c, i;
    convkit::causal::split_index(idx, C, n, c_fastest != 0, b, c, i);
    const int64_t s = lo + i;
    const double v = convkit::causal::input_grad<double>(src, sh, b, c, s);
    if (s >= 0) dx[(b * C + c) * L + s] = v;
    else dstate[(b * C + c) * H + H + s] = v;
  }
  const int64_t n_total = B * L, splits = (n_total + split_len - 1) / split_len;
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t k = 0; k <= K; ++k) {
      double total = 0;
      for (int64_t split = 0; split < splits; ++split) {
        int64_t begin, end;
        convkit::causal::split_range(split, split_len, n_total, begin, end);
        double part = 0;
        for (int64_t pos = begin; pos < end; ++pos) {
          int64_t b, t;
          convkit::divmod(pos, L, b, t);
          part += k < K ? convkit::causal::weight_grad_term<double>(src, sh, b, c, t, k) : src.g(b, c, t);
        }
        total += part;
      }
      if (k < K) dw[c * K + k] = total;
      else db[c] = total;
    }
  }
}

// One update over x (B, C, T): batch row b updates state row state_row(rows_of, b) of state ((rows, C, S), any
// strides), circular when cache_seqlens is set; z (B, C, T) contiguous, pre-activation without bias; a padding
// row's z is left as it was (the kernel writes zeros there).
void causal_update(int64_t B, int64_t C, int64_t T, int64_t K, int64_t d, const double* x, const int64_t* xs,
                   double* state, const int64_t* ss, int64_t rows, int64_t S, const double* w, const int64_t* ws,
                   const int32_t* cache_seqlens, const int32_t* rows_of, double* z) {
  const Src src{x, xs, state, ss, nullptr, nullptr, w, ws, nullptr, C, T};
  const convkit::causal::UpdateShape sh{T, C, K, d, (K - 1) * d, S, cache_seqlens != nullptr};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t r = convkit::causal::state_row(rows_of, 1, b, rows);
      if (r < 0) continue;
      const int64_t cs = cache_seqlens != nullptr ? cache_seqlens[b] : 0;
      convkit::causal::update_row<double>(src, sh, b, r, c, cs,
                                          [&](int64_t i, double v) { z[(b * C + c) * T + i] = v; });
    }
}

}  // extern "C"
