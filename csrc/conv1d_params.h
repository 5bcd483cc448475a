// The only thing that crosses from the host code (dispatch.cpp, which sees torch) to the kernel
// files (which see only CUDA headers): raw pointers, sizes and element strides. Keeping torch out of
// the .cu files is what keeps the build fast (a .cu that includes <torch/extension.h> costs minutes).
#pragma once

#include <cstdint>

namespace convkit {

// Fused epilogue activation; the same codes as python/convkit/functional.py ACTIVATIONS.
enum Activation : int { kActNone = 0, kActReLU = 1, kActSiLU = 2, kActGELU = 3 };

enum class DType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2, kFloat64 = 3 };

// One struct for the three directions, read as:
//   forward       reads x, w, bias      writes y
//   grad-input    reads y (= dy), w     writes x (= dx)
//   grad-weight   reads x, y (= dy)     writes w (= dw) and bias (= db) when bias is non-null,
//                 through fp32/fp64 partial sums in `workspace` (generic kernels)
//   fused depthwise backward: see grad_x / grad_w / grad_bias below.
// Every stride is in elements and every index is 64-bit, so views and tensors of more than 2^31
// elements need no special path.
struct Conv1dParams {
  int64_t batch;
  int64_t in_channels;
  int64_t out_channels;
  int64_t in_length;
  int64_t out_length;
  int64_t kernel_size;
  int64_t stride;
  int64_t pad_left;  // the right pad is implied by out_length
  int64_t dilation;
  int64_t groups;

  int64_t x_stride_b, x_stride_c, x_stride_l;
  int64_t w_stride_o, w_stride_i, w_stride_k;
  int64_t y_stride_b, y_stride_c, y_stride_l;

  void* x;
  void* w;
  void* bias;
  void* y;

  // The fused depthwise backward reads x, w, bias, y (= dy) as the forward would and writes these
  // instead (each may be null when not requested); grad_x has its own strides.
  void* grad_x;
  int64_t gx_stride_b, gx_stride_c, gx_stride_l;
  void* grad_w;
  void* grad_bias;

  // grad-weight only: partial sums, `weight_splits` x (out_channels * in_channels/groups * kernel_size)
  // accumulator values, then `bias_splits` x out_channels.
  void* workspace;
  int64_t weight_splits;
  int64_t bias_splits;

  DType dtype;    // x, y, grad_x
  DType w_dtype;  // w, bias, grad_w, grad_bias: == dtype, or kFloat32 with fp16/bf16 input
  int num_sms;
  int code_arch;   // the virtual architecture of the code the device runs (device_code_arch: 90 on the H200)
  int activation;  // forward epilogue / backward pre-multiplier; see kernels/activation.cuh
  int realign_stores;  // 1: wg::store_c_tile writes y rows as 16-byte units of y (CONVKIT_REALIGN_STORES=1)
};


// convkit.causal_conv1d's masked kernels and convkit.causal_conv1d_update (kernels/causal_conv1d.cu; the
// per-element logic in kernels/causal_conv1d.cuh). Element strides, 64-bit; a pointer not in use is null.
struct CausalParams {
  int64_t batch, channels, length;  // length: L of the causal call, T (new tokens) of the update
  int64_t kernel_size, dilation, halo;  // halo = (kernel_size - 1) * dilation
  const void* x;
  int64_t x_sb, x_sc, x_sl;
  // causal call: initial_state (B, C, halo); update: conv_state (state_batch, C, state_len), read and written
  void* state;
  int64_t st_sb, st_sc, st_sl;
  int64_t state_batch, state_len;
  const int32_t* seq_idx;  // (B, L)
  int64_t seq_sb, seq_sl;
  const int32_t* cache_seqlens;  // update: (B,), the circular buffer's write position per row
  const int32_t* state_indices;  // update: (B,), the conv_state row of each batch row (< 0 or >= rows: skipped)
  int64_t cache_stride, index_stride;
  const void* w;  // (C, K)
  int64_t w_sc, w_sk;
  const void* bias;  // (C,), contiguous
  // forward / update: y (written); backward: g = d loss / d pre-activation (read)
  void* y;
  int64_t y_sb, y_sc, y_sl;
  void* grad_x;
  int64_t gx_sb, gx_sc, gx_sl;
  void* grad_state;  // (B, C, halo)
  int64_t gs_sb, gs_sc, gs_sl;
  void* grad_w;     // (C, K) contiguous
  void* grad_bias;  // (C,)
  void* workspace;  // grad-weight partial sums: weight_splits x C * K, then weight_splits x C
  int64_t weight_splits, split_len;  // split_len: the (b, t) positions one split reduces
  DType dtype;
  DType w_dtype;
  int num_sms;
  int activation;
  bool c_fastest;  // x's channel stride is 1: consecutive threads take consecutive channels
};

}  // namespace convkit
