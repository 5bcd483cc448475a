// The narrow dense forward (Cin/groups < 8, Cin/groups * K <= 64: kernels/conv1d_fwd_dense_narrow.cu) with K, stride
// and dilation fixed at compile time: the table family "dense_narrow" (csrc/specializations.json; the suite's
// wav2vec2 first layer, Cin 1, K 10, stride 5, Cout 512). Instantiated per entry by kernels/generated/*.cu.
//
// The runs shape of the runtime kernel (128 threads, 8 consecutive positions x 8 output channels per thread), but
// each thread first loads its whole x window of one input channel, (8 - 1) S + (K - 1) D + 1 values (45 for K 10,
// S 5), into registers, every load in flight at once, and then runs the K taps' FMAs on registers: no index or
// bounds arithmetic per tap (the runtime kernel spends ~5 instructions per FMA on them, session 39's SASS count:
// 321 instructions for 64 FMAs a tap) and no load latency between taps. Weights are [tap][channel] in shared memory
// (two 16-byte broadcast reads a tap in fp32). Each output's FMAs run in the runtime kernel's order and the epilogue
// is the same (kernels/dense_narrow_common.cuh), so both give the same bits.
#pragma once

#include <cstdint>

#include "activation.cuh"
#include "common.cuh"
#include "dense_narrow_common.cuh"

namespace convkit {
namespace narrow {

constexpr int kSpecThreads = 128, kSpecV = 8, kSpecCoT = 8, kSpecMaxRed = 64;

template <typename T, int K, int S, int D>
__global__ void __launch_bounds__(kSpecThreads) conv1d_fwd_dense_narrow_spec_kernel(const Conv1dParams p) {
  using A = typename AccOf<T>::type;
  constexpr int kV = kSpecV, kCoT = kSpecCoT, kBlockN = kSpecThreads * kSpecV;
  constexpr int kWin = (kV - 1) * S + (K - 1) * D + 1;  // x values of one input channel a thread reads
  __shared__ __align__(16) A ws[kSpecMaxRed][kCoT];     // [ci * K + k][c]
  __shared__ A bs[kCoT];

  const int64_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
  const int red = static_cast<int>(cin_g) * K;
  const int64_t co_tiles = ceil_div(cout_g, int64_t{kCoT}), j_tiles = ceil_div(p.out_length, int64_t{kBlockN});
  // blockIdx.x = ((b * groups + g) * j_tiles + jt) * co_tiles + ct, as the runtime kernel
  int64_t rest, ct, jt, g, b;
  divmod(static_cast<int64_t>(blockIdx.x), co_tiles, rest, ct);
  divmod(rest, j_tiles, rest, jt);
  divmod(rest, p.groups, b, g);
  const int64_t co0 = g * cout_g + ct * kCoT;
  const int n_co = static_cast<int>(min(static_cast<int64_t>(kCoT), cout_g - ct * kCoT));

  stage_weights<T>(p, &ws[0][0], bs, co0, n_co, red, K, kCoT);
  __syncthreads();

  const int64_t j0 = jt * kBlockN + static_cast<int64_t>(threadIdx.x) * kV;  // this thread's first output
  if (j0 >= p.out_length) return;
  const int64_t pos0 = j0 * S - p.pad_left;  // x position of window value 0 (tap 0 of output j0)
  const bool interior = pos0 >= 0 && pos0 + kWin <= p.in_length;

  A acc[kCoT][kV];
#pragma unroll
  for (int c = 0; c < kCoT; ++c)
#pragma unroll
    for (int v = 0; v < kV; ++v) acc[c][v] = A(0);

  // x rows are contiguous (spec_supports): window value i of input channel ci is row ci's element pos0 + i, one base
  // address and constant offsets (outside the interior only the values inside the row are read)
  const T* xrow = static_cast<const T*>(p.x) + b * p.x_stride_b + g * cin_g * p.x_stride_c;
  for (int ci = 0; ci < cin_g; ++ci, xrow += p.x_stride_c) {
    A win[kWin];
    if (interior) {
#pragma unroll
      for (int i = 0; i < kWin; ++i) win[i] = static_cast<A>(to_acc(raw_load(xrow, pos0 + i)));
    } else {
#pragma unroll
      for (int i = 0; i < kWin; ++i)
        win[i] = pos0 + i >= 0 && pos0 + i < p.in_length ? static_cast<A>(to_acc(raw_load(xrow, pos0 + i))) : A(0);
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int r = ci * K + k;
      A wv[kCoT];
      load_tap_weights(&ws[r][0], wv);
#pragma unroll
      for (int c = 0; c < kCoT; ++c)
#pragma unroll
        for (int v = 0; v < kV; ++v) acc[c][v] = fma(wv[c], win[k * D + v * S], acc[c][v]);
    }
  }
  store_outputs<T, kV, kCoT>(p, acc, bs, b, co0, n_co, j0);
}

// Blocks of the entry kernel's grid: (batch row, group, position tile, channel tile).
inline int64_t spec_tiles(const Conv1dParams& p) {
  return p.batch * p.groups * ceil_div(p.out_length, int64_t{kSpecThreads * kSpecV}) *
         ceil_div(p.out_channels / p.groups, int64_t{kSpecCoT});
}

// Whether an entry's kernel takes p: p's K / S / D are the entry's, x rows are contiguous, and the runtime narrow
// kernel's limits hold (dispatch.cpp picks an entry where conv1d_fwd_dense_narrow_supports holds and x's position
// stride is 1).
template <int K, int S, int D>
bool spec_supports(const Conv1dParams& p) {
  if (p.kernel_size != K || p.stride != S || p.dilation != D || p.x_stride_l != 1) return false;
  if (p.groups < 1 || p.in_channels % p.groups || p.out_channels % p.groups) return false;
  const int64_t cin_g = p.in_channels / p.groups;
  return cin_g >= 1 && cin_g * K <= kSpecMaxRed && spec_tiles(p) < (int64_t{1} << 31);
}

}  // namespace narrow

template <DType dt, int K, int S, int D>
cudaError_t launch_conv1d_fwd_dense_narrow_spec(const Conv1dParams& p, cudaStream_t stream) {
  using T = typename ScalarOf<dt>::type;
  if (!narrow::spec_supports<K, S, D>(p)) return cudaErrorInvalidValue;
  const int64_t tiles = narrow::spec_tiles(p);
  if (tiles == 0) return cudaSuccess;
  narrow::conv1d_fwd_dense_narrow_spec_kernel<T, K, S, D>
      <<<static_cast<unsigned>(tiles), narrow::kSpecThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

// One table entry's launchers (fp32, fp16, bf16; fp64 takes the runtime kernel, as the depthwise entries do).
#define CONVKIT_INSTANTIATE_DENSE_NARROW(K, S, D)                                                                 \
  template cudaError_t launch_conv1d_fwd_dense_narrow_spec<DType::kFloat32, K, S, D>(const Conv1dParams&,     \
                                                                                    cudaStream_t);            \
  template cudaError_t launch_conv1d_fwd_dense_narrow_spec<DType::kFloat16, K, S, D>(const Conv1dParams&,     \
                                                                                    cudaStream_t);            \
  template cudaError_t launch_conv1d_fwd_dense_narrow_spec<DType::kBFloat16, K, S, D>(const Conv1dParams&,    \
                                                                                     cudaStream_t);

}  // namespace convkit
