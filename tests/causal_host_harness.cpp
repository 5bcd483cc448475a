// The element functions of csrc/kernels/causal_conv1d.cuh (what the CUDA kernels of causal_conv1d.cu run
// per output) on the CPU, in float64, for tests/test_causal.py: it compiles this file with the system C++
// compiler and compares the results with torch. Loops visit every element the kernels' grids visit; the
// kernels' own parts (thread mapping, partial sums, bias, activation, padding rows) are tested on the GPU.
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

// z (B, C, L) contiguous: the pre-activation output without bias.
void causal_forward(int64_t B, int64_t C, int64_t L, int64_t K, int64_t d, const double* x, const int64_t* xs,
                    double* state, const int64_t* ss, const int32_t* seq, const int64_t* qs, const double* w,
                    const int64_t* ws, double* z) {
  const Src src{x, xs, state, ss, seq, qs, w, ws, nullptr, C, L};
  const auto sh = shape(B, C, L, K, d, src);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t t = 0; t < L; ++t) z[(b * C + c) * L + t] = convkit::causal::forward_value<double>(src, sh, b, c, t);
}

// From g (B, C, L) contiguous: dx (B, C, L) and, when dstate is set, the initial state's grad (B, C, halo);
// dw (C, K) and db (C,) summed over (b, t) in the weight kernel's order.
void causal_backward(int64_t B, int64_t C, int64_t L, int64_t K, int64_t d, const double* x, const int64_t* xs,
                     double* state, const int64_t* ss, const int32_t* seq, const int64_t* qs, const double* w,
                     const int64_t* ws, const double* g, double* dx, double* dstate, double* dw, double* db) {
  const Src src{x, xs, state, ss, seq, qs, w, ws, g, C, L};
  const auto sh = shape(B, C, L, K, d, src);
  const int64_t H = sh.halo;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t s = dstate != nullptr ? -H : 0; s < L; ++s) {
        const double v = convkit::causal::input_grad<double>(src, sh, b, c, s);
        if (s >= 0) dx[(b * C + c) * L + s] = v;
        else dstate[(b * C + c) * H + H + s] = v;
      }
    }
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t k = 0; k < K; ++k) {
      double acc = 0;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < L; ++t) acc += convkit::causal::weight_grad_term<double>(src, sh, b, c, t, k);
      dw[c * K + k] = acc;
    }
    double acc = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < L; ++t) acc += src.g(b, c, t);
    db[c] = acc;
  }
}

// One update over x (B, C, T): row r = rows_of[b] of state (any strides), circular when cache_seqlens is set.
// z (B, C, T) contiguous, pre-activation without bias. Rows must be valid (the kernel's padding rule is its own).
void causal_update(int64_t B, int64_t C, int64_t T, int64_t K, int64_t d, const double* x, const int64_t* xs,
                   double* state, const int64_t* ss, int64_t S, const double* w, const int64_t* ws,
                   const int32_t* cache_seqlens, const int32_t* rows_of, double* z) {
  const Src src{x, xs, state, ss, nullptr, nullptr, w, ws, nullptr, C, T};
  const convkit::causal::UpdateShape sh{T, C, K, d, (K - 1) * d, S, cache_seqlens != nullptr};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t r = rows_of != nullptr ? rows_of[b] : b;
      const int64_t cs = cache_seqlens != nullptr ? cache_seqlens[b] : 0;
      convkit::causal::update_row<double>(src, sh, b, r, c, cs,
                                          [&](int64_t i, double v) { z[(b * C + c) * T + i] = v; });
    }
}

}  // extern "C"
