// The phase-split x window of the fp32 window-staged kernels (conv1d_fwd_dense_f32.cu, conv1d_bwd_weight_dense_tf32.cu):
// a tile of `outputs` consecutive outputs j0 .. reads window positions t = j*S + k*D (j local) from x position
// j0*S - P; the window is stored phase-split (position t at row (t % S) * wq + t / S) so that tap k of the outputs is
// consecutive floats at a per-tap offset. Where the dilation makes one window much longer than K separate ones, each
// tap gets its own window (a segment). Both kernels' plans carry the fields set here under the same names.
#pragma once

#include <cstdint>

#include "common.cuh"

namespace convkit {
namespace f32win {

inline int round_up(int v, int m) { return (v + m - 1) / m * m; }

// Checks the call against what the window kernels take (fp32 input and weights, K <= max_k, S and D up to 2^20 so
// that window positions stay in int, windows of at most 8192 positions) and sets plan fields k, s, d, cin_g, cout_g,
// nseg, wlen, vec (16-byte copies: stride 1, x rows of unit stride on 16-byte boundaries), wq (rows per phase, a
// multiple of 4) and xp (floats per channel row, >= nseg * S * wq, = xp_residue mod 32: the residue that makes the
// kernel's fragment reads conflict-free).
template <typename Plan>
bool plan_window(const Conv1dParams& p, int outputs, int max_k, int xp_residue, Plan& q) {
  if (p.dtype != DType::kFloat32 || p.w_dtype != DType::kFloat32 || p.groups < 1) return false;
  if (p.kernel_size < 1 || p.kernel_size > max_k || p.stride < 1 || p.dilation < 1) return false;
  if (p.stride > (1 << 20) || p.dilation > (1 << 20)) return false;
  q.cin_g = p.in_channels / p.groups;
  q.cout_g = p.out_channels / p.groups;
  if (q.cin_g < 1 || q.cout_g < 1) return false;
  q.k = static_cast<int>(p.kernel_size);
  q.s = static_cast<int>(p.stride);
  q.d = static_cast<int>(p.dilation);
  const int64_t one = static_cast<int64_t>(outputs - 1) * q.s + static_cast<int64_t>(q.k - 1) * q.d + 1;
  const int64_t per_tap = static_cast<int64_t>(outputs - 1) * q.s + 1;
  q.nseg = q.k > 1 && q.k * per_tap < one ? q.k : 1;
  const int64_t wlen = q.nseg == 1 ? one : per_tap;
  if (wlen > 8192) return false;
  q.wlen = static_cast<int>(wlen);
  q.vec = q.s == 1 && rows_vec_aligned(p.x, p.x_stride_b, p.x_stride_c, p.x_stride_l, 4);
  // (the 16-byte path loads up to 3 positions before the window and rounds its end up to whole units)
  q.wq = q.vec ? round_up(q.wlen + 3, 4) : round_up((q.wlen + q.s - 1) / q.s, 4);
  const int span = q.nseg * q.s * q.wq;
  q.xp = round_up(span - xp_residue, 32) + xp_residue;
  if (q.xp < span) q.xp += 32;
  return true;
}

// Positions of segment sg loaded before its first window position in the 16-byte path (q.vec): the window starts at
// j0*S - P + sg*D with S = 1 and j0 a multiple of 4, so its offset from the 16-byte grid is the same in every tile.
template <typename Plan>
__device__ __forceinline__ int window_lead(const Conv1dParams& p, const Plan& q, int sg) {
  if (!q.vec) return 0;
  const int64_t o = (static_cast<int64_t>(sg) * q.d - p.pad_left) % 4;
  return static_cast<int>(o < 0 ? o + 4 : o);
}

}  // namespace f32win
}  // namespace convkit
