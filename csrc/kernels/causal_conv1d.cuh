// The index and mask logic of convkit.causal_conv1d / causal_conv1d_update (issue 6), one output or one
// gradient element at a time, written once for the CUDA kernels (kernels/causal_conv1d.cu) and for a
// host harness (tests/causal_host_harness.cpp, compiled by the tests with the system C++ compiler and
// driven from Python against a float64 reference), so the arithmetic the kernels run is checked on a
// machine without a GPU. No CUDA or torch header here: the caller passes an accessor `src` with
//   x(b, c, t)  state(b, c, j)  seq(b, t)  w(c, k)  g(b, c, t)          (causal call)
//   x(b, c, i)  state(r, c, j)  set_state(r, c, j, v)  w(c, k)           (update)
// returning / taking the accumulator type A.
//
// Causal call (K taps, dilation d, halo W = (K - 1) * d):
//   z[b, c, t] = sum_k w[c, k] * v(b, c, t - (K - 1 - k) * d, q = seq[b, t])
//   v(b, c, s, q) = x[b, c, s]             for s >= 0, when seq[b, s] == q
//                 = state[b, c, W + s]     for -W <= s < 0, when there is a state and seq[b, 0] == q
//                 = 0                      otherwise
// (without seq_idx every sequence test is true): the initial state is the left context of the row's first
// sequence, and no output reads a position of another sequence.
#pragma once

#include <cstdint>

#include "index_math.h"

#if defined(__CUDACC__)
#define CONVKIT_ELEM __device__ __forceinline__
#else
#define CONVKIT_ELEM inline
#endif

namespace convkit {
namespace causal {

struct Shape {
  int64_t batch, channels, length, taps, dilation, halo;  // halo = (taps - 1) * dilation
  bool has_state, has_seq;
};

// Element idx of a (B, C, n) range as (b, c, i): channels fastest when x is channels-last (coalesced there),
// else positions fastest. The kernels' grid-stride loops visit idx = 0 .. B * C * n - 1.
CONVKIT_ELEM void split_index(int64_t idx, int64_t C, int64_t n, bool c_fastest, int64_t& b, int64_t& c, int64_t& i) {
  int64_t rest;
  if (c_fastest) {
    divmod(idx, C, rest, c);
    divmod(rest, n, b, i);
  } else {
    divmod(idx, n, rest, i);
    divmod(rest, C, b, c);
  }
}

// The positions n = b * L + t that split `split` of the grad-weight reduction sums: [begin, end).
CONVKIT_ELEM void split_range(int64_t split, int64_t split_len, int64_t n_total, int64_t& begin, int64_t& end) {
  begin = split * split_len;
  end = begin + split_len < n_total ? begin + split_len : n_total;
}

// The sequence of input position s (-halo <= s < length); state positions belong to the first sequence.
template <typename Src> CONVKIT_ELEM int32_t seq_of(const Src& src, const Shape& sh, int64_t b, int64_t s) {
  return sh.has_seq ? src.seq(b, s >= 0 ? s : 0) : 0;
}

// v(b, c, s, q) above.
template <typename A, typename Src>
CONVKIT_ELEM A input_value(const Src& src, const Shape& sh, int64_t b, int64_t c, int64_t s, int32_t q) {
  if (sh.has_seq && seq_of(src, sh, b, s) != q) return A(0);
  if (s >= 0) return src.x(b, c, s);
  return sh.has_state ? src.state(b, c, sh.halo + s) : A(0);
}

// z[b, c, t] without bias.
template <typename A, typename Src>
CONVKIT_ELEM A forward_value(const Src& src, const Shape& sh, int64_t b, int64_t c, int64_t t) {
  const int32_t q = seq_of(src, sh, b, t);
  A acc = A(0);
  for (int64_t k = 0; k < sh.taps; ++k) {
    acc += src.w(c, k) * input_value<A>(src, sh, b, c, t - (sh.taps - 1 - k) * sh.dilation, q);
  }
  return acc;
}

// d loss / d v at input position s (-halo <= s < length): grad-input for s >= 0, grad of the initial state
// at j = halo + s for s < 0. g = d loss / d z. Output t = s + (K - 1 - k) * d reads s through tap k.
template <typename A, typename Src>
CONVKIT_ELEM A input_grad(const Src& src, const Shape& sh, int64_t b, int64_t c, int64_t s) {
  const int32_t q = seq_of(src, sh, b, s);
  A acc = A(0);
  for (int64_t k = 0; k < sh.taps; ++k) {
    const int64_t t = s + (sh.taps - 1 - k) * sh.dilation;
    if (t < 0 || t >= sh.length) continue;
    if (sh.has_seq && src.seq(b, t) != q) continue;
    acc += src.w(c, k) * src.g(b, c, t);
  }
  return acc;
}

// The term output (b, t) adds to d loss / d w[c, k].
template <typename A, typename Src>
CONVKIT_ELEM A weight_grad_term(const Src& src, const Shape& sh, int64_t b, int64_t c, int64_t t, int64_t k) {
  return src.g(b, c, t) * input_value<A>(src, sh, b, c, t - (sh.taps - 1 - k) * sh.dilation, seq_of(src, sh, b, t));
}

// ---- causal_conv1d_update: one (batch row b, channel c), all of its new tokens ------------------------------
// x (B, C, T) new tokens; state row r = state_index (or b) of conv_state (rows, C, S), S >= halo.
// Linear buffer (circular == false): the sequence so far ends with state[.., S - 1]; after the call the
// state holds the last S values of [state, x]. Circular (cache_seqlens): the token before new token 0 is at
// (cache_seqlen - 1) mod S, new token i is written to (cache_seqlen + i) mod S (as causal-conv1d).
// Writes z (pre-activation, without bias) of token i through out(i, z); the caller adds bias and activation.
struct UpdateShape {
  int64_t tokens, channels, taps, dilation, halo, state_len;
  bool circular;
};

CONVKIT_ELEM int64_t pos_mod(int64_t a, int64_t n) {
  const int64_t r = a % n;
  return r < 0 ? r + n : r;
}

// The conv_state row batch row b reads and writes: state_indices[b] (b without indices); -1 for a padding row
// (an index < 0, or >= rows, which the Python layer rejects outside graph capture): its output is zero and
// no row is touched.
CONVKIT_ELEM int64_t state_row(const int32_t* state_indices, int64_t index_stride, int64_t b, int64_t rows) {
  const int64_t r = state_indices != nullptr ? state_indices[b * index_stride] : b;
  return r >= 0 && r < rows ? r : -1;
}

template <typename A, typename Src, typename Out>
CONVKIT_ELEM void update_row(Src& src, const UpdateShape& sh, int64_t b, int64_t r, int64_t c, int64_t cache_seqlen,
                             Out&& out) {
  const int64_t S = sh.state_len, T = sh.tokens;
  for (int64_t i = 0; i < T; ++i) {
    A acc = A(0);
    for (int64_t k = 0; k < sh.taps; ++k) {
      const int64_t p = i - (sh.taps - 1 - k) * sh.dilation;  // >= -halo >= -S
      A v;
      if (p >= 0) {
        v = src.x(b, c, p);
      } else {
        v = src.state(r, c, sh.circular ? pos_mod(cache_seqlen + p, S) : S + p);
      }
      acc += src.w(c, k) * v;
    }
    out(i, acc);
  }
  // Every output above read the old state; now the new one. Only the last S tokens survive.
  const int64_t first = T > S ? T - S : 0;
  if (sh.circular) {
    for (int64_t i = first; i < T; ++i) src.set_state(r, c, pos_mod(cache_seqlen + i, S), src.x(b, c, i));
  } else {
    for (int64_t j = 0; j + T < S; ++j) src.set_state(r, c, j, src.state(r, c, j + T));  // ascending: reads ahead
    for (int64_t j = S - (T - first); j < S; ++j) src.set_state(r, c, j, src.x(b, c, T - S + j));
  }
}

}  // namespace causal
}  // namespace convkit
