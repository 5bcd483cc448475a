// Host-callable entry points of every kernel family. Plain C++ (cuda_runtime.h for the stream and
// error types), so dispatch.cpp and the generated specialisation table can include it.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

#include "../conv1d_params.h"

namespace convkit {

// A runtime switch: whether environment variable `name` is set to exactly `value`. Callers that read a
// switch once per process cache the answer in a function-local static.
inline bool env_equals(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

// A switch that forces something on or off: 1 where `name` is "1", 0 where it is "0", -1 otherwise (the default).
inline int env_forced(const char* name) {
  return env_equals(name, "1") ? 1 : env_equals(name, "0") ? 0 : -1;
}

using LaunchFn = cudaError_t (*)(const Conv1dParams&, cudaStream_t);

// Generic kernels: kernel size, stride, padding, dilation and groups are runtime values.
cudaError_t launch_conv1d_fwd_generic(const Conv1dParams& p, cudaStream_t stream);
cudaError_t launch_conv1d_bwd_input_generic(const Conv1dParams& p, cudaStream_t stream);
// grad-weight needs fp32 (fp64 for fp64) partial sums: this sets p.weight_splits / p.bias_splits and
// returns how many accumulator values p.workspace must hold.
int64_t plan_conv1d_bwd_weight(Conv1dParams& p, bool with_bias);
cudaError_t launch_conv1d_bwd_weight_generic(const Conv1dParams& p, cudaStream_t stream);

// Dense/grouped forward with a narrow reduction, Cin/groups < 8 and Cin/groups * K <= 64, any dtype: direct
// FMAs: x windows and weights in shared memory, 64 channels x 256 positions a block, where Cout/groups >= 64 (and the
// window fits), else per thread from global memory (kernels/conv1d_fwd_dense_narrow.cu); dispatch.cpp also runs
// depthwise calls with a channel multiplier >= 8 on it (wav2vec2's first layer: Cin 1, Cout 512).
bool conv1d_fwd_dense_narrow_supports(const Conv1dParams& p);
cudaError_t launch_conv1d_fwd_dense_narrow(const Conv1dParams& p, cudaStream_t stream);
// ... and the opposite case, Cout/groups <= 4 with Cin/groups >= 8 and Cin/groups * K <= 2048 (1024 in
// fp64): the same kernel with 4 channels per block (grad-input of wav2vec2's first layer).
// CONVKIT_DENSE_NARROW_OUT=0 switches it off (supports() is then false).
bool conv1d_fwd_dense_narrow_out_supports(const Conv1dParams& p);
cudaError_t launch_conv1d_fwd_dense_narrow_out(const Conv1dParams& p, cudaStream_t stream);
// ... and with 5..8 output channels per group, reductions up to 1024 (512 in fp64): for the grad-input's stride
// phases as one convolution (dispatch.cpp, unified_grad_input).
bool conv1d_fwd_dense_narrow_out8_supports(const Conv1dParams& p);
cudaError_t launch_conv1d_fwd_dense_narrow_out8(const Conv1dParams& p, cudaStream_t stream);

// Dense/grouped forward on tensor cores (fp16/bf16 input, weights fp16/bf16 or fp32; mma.sync
// implicit GEMM, kernels/conv1d_fwd_dense_mma.cu); dispatch.cpp also runs stride-1 grad-input on it.
// supports() false -> the caller uses the generic kernel.
bool conv1d_fwd_dense_mma_supports(const Conv1dParams& p);
cudaError_t launch_conv1d_fwd_dense_mma(const Conv1dParams& p, cudaStream_t stream);
// True when p's weight panel does not fit in shared memory and the kernel stages weights per reduction
// step: it then wants them tap-major, (Cout, K, Cin_g) in memory (w_stride_i == 1), of p's dtype, so
// each step's tile is 16-byte cp.async copies (any other layout still runs, slower). Independent of p.w.
bool conv1d_fwd_dense_mma_stages_weights(const Conv1dParams& p);
// The same forward on Hopper's wgmma (kernels/conv1d_fwd_dense_wgmma.cu; built into sm_90a code only, where
// setup.py defines CONVKIT_SM90A): launch_conv1d_fwd_dense_mma runs it where supports(p, true) holds, i.e.
// 16-bit input and weights, Cin/groups >= 128 and a multiple of 8, Cout/groups > 64, K <= 8, tap-major weights (check_weights),
// a device running the sm_90 code. CONVKIT_DENSE_WGMMA=0 switches it off.
bool conv1d_fwd_dense_wgmma_supports(const Conv1dParams& p, bool check_weights);
cudaError_t launch_conv1d_fwd_dense_wgmma(const Conv1dParams& p, cudaStream_t stream);
// The same with every operand copied by TMA (kernels/conv1d_fwd_dense_tma.cu; sm_90a code only) for x in
// channels-last memory. supports(p): 16-bit x and weights of one dtype, Cin/groups >= 16 and % 16 == 0,
// K <= 16, stride <= 8, a device running the sm_90a code, x_stride_c == 1, x_stride_l and x_stride_b multiples
// of 8 elements, x 16-byte aligned, strides ordered (x_stride_l >= Cin, x_stride_b >= L * x_stride_l); weights
// of any strides. Other x (x_stride_c != 1) where Cout/groups * K >= 384 * stride (CONVKIT_DENSE_TMA_COPY=0 / 1:
// never / always): read as it lies and transposed in shared memory where its rows are whole 16-byte units
// (CONVKIT_DENSE_TMA_TX), else launch first copies x into channels-last memory in the workspace, a slab of batches
// at a time.
// launch packs the weights into p.workspace (16-byte aligned, workspace_bytes(p) bytes: each stage's weights one
// contiguous block, then the copy slab) and runs the forward; cudaErrorInvalidValue when unsupported.
bool conv1d_fwd_dense_tma_supports(const Conv1dParams& p);
// How its plan takes x: 0 not at all (supports(p) false), 1 channels-last x as it lies, 2 a (B, C, L) x read as it
// lies and transposed in shared memory (CONVKIT_DENSE_TMA_TX), 3 a (B, C, L) x copied to channels-last memory first.
int conv1d_fwd_dense_tma_form(const Conv1dParams& p);
int64_t conv1d_fwd_dense_tma_workspace_bytes(const Conv1dParams& p);
cudaError_t launch_conv1d_fwd_dense_tma(const Conv1dParams& p, cudaStream_t stream);
// The copy the launcher above makes of (B, C, L) x, alone: x (2-byte elements, any strides) to out[b][l][c]
// (B, L, C contiguous; C % 8 == 0, out 16-byte aligned). The dense grad-input copies dy with it once for all its
// stride phases.
cudaError_t launch_x_to_channels_last(const void* x, int64_t B, int64_t sb, int64_t sc, int64_t sl, int64_t C,
                                      int64_t L, void* out, cudaStream_t stream);
// (Stride 1 too, as one phase: dispatch.cpp takes it where Cin/groups <= 64; CONVKIT_GI_FUSED_S1.)
// The dense / grouped grad-input of stride 2..4 in one pass (kernels/conv1d_bwd_input_dense_tma.cu; sm_90a code
// only): every stride phase of a tile in one block, dx written in place. p is the forward problem with p.y = dy
// (any strides) and p.grad_x = dx (gx strides). supports(p): 16-bit dy and weights of one dtype, Cout/groups % 16
// == 0, K <= 16, stride 2..4, a device running the sm_90a code, a dy window of at most 2048 rows and two ring
// stages in shared memory (not K >= 11 / 12 with Cin/groups > 64). launch packs the transposed weights into
// p.workspace (16-byte aligned, workspace_bytes(p) bytes), copies dy into channels-last memory there (a slab of
// batches at a time) unless it already is, and runs the kernel; cudaErrorInvalidValue when unsupported.
bool conv1d_bwd_input_dense_tma_supports(const Conv1dParams& p);
int64_t conv1d_bwd_input_dense_tma_workspace_bytes(const Conv1dParams& p);
cudaError_t launch_conv1d_bwd_input_dense_tma(const Conv1dParams& p, cudaStream_t stream);

// Dense/grouped forward for fp32 (kernels/conv1d_fwd_dense_f32.cu): an implicit GEMM on a staged x window, IEEE
// FFMA or TF32 tensor cores (dispatch.cpp follows torch's cuDNN TF32 flag); also grad-input's phases. p.workspace:
// (tf32_)workspace_bytes(p) for the packed weights (0: the shape runs the im2col kernel below, which needs none).
bool conv1d_fwd_dense_f32_supports(const Conv1dParams& p);
int64_t conv1d_fwd_dense_f32_workspace_bytes(const Conv1dParams& p);
int64_t conv1d_fwd_dense_tf32_workspace_bytes(const Conv1dParams& p);
cudaError_t launch_conv1d_fwd_dense_f32(const Conv1dParams& p, cudaStream_t stream);
cudaError_t launch_conv1d_fwd_dense_tf32(const Conv1dParams& p, cudaStream_t stream);
// ... the im2col-gather forward (kernels/conv1d_dense_f32.cu) it falls back to
cudaError_t launch_conv1d_fwd_dense_f32_im2col(const Conv1dParams& p, bool tf32, cudaStream_t stream);
// ... and its grad-weight (+ grad-bias), same file, the interface of the mma grad-weight below (any groups;
// dispatch.cpp keeps depthwise calls, groups == Cin, off it by default).
bool conv1d_bwd_weight_dense_f32_supports(const Conv1dParams& p);
int64_t plan_conv1d_bwd_weight_dense_f32(Conv1dParams& p);
cudaError_t launch_conv1d_bwd_weight_dense_f32(const Conv1dParams& p, cudaStream_t stream);
cudaError_t launch_conv1d_bwd_weight_dense_tf32_tiles(const Conv1dParams& p, cudaStream_t stream);
// ... TF32: the window-staged grad-weight (kernels/conv1d_bwd_weight_dense_tf32.cu) where it plans, else the one above
// (same support test; plan with this one: its splits differ)
int64_t plan_conv1d_bwd_weight_dense_tf32(Conv1dParams& p);
cudaError_t launch_conv1d_bwd_weight_dense_tf32(const Conv1dParams& p, cudaStream_t stream);

// Dense/grouped grad-weight (+ grad-bias) on tensor cores (kernels/conv1d_bwd_weight_dense_mma.cu):
// p as for launch_conv1d_bwd_weight_generic (p.w / p.bias are the outputs); plan sets
// p.weight_splits and returns the fp32 values p.workspace must hold.
bool conv1d_bwd_weight_dense_mma_supports(const Conv1dParams& p);
int64_t plan_conv1d_bwd_weight_dense_mma(Conv1dParams& p);
cudaError_t launch_conv1d_bwd_weight_dense_mma(const Conv1dParams& p, cudaStream_t stream);
// The same on Hopper's wgmma (kernels/conv1d_bwd_weight_dense_wgmma.cu; sm_90a code only, as the wgmma
// forward): 16-bit, Cin/groups >= 32 and a multiple of 8, Cout/groups >= 64, K = 3. Same interface.
bool conv1d_bwd_weight_dense_wgmma_supports(const Conv1dParams& p);
int64_t plan_conv1d_bwd_weight_dense_wgmma(Conv1dParams& p);
cudaError_t launch_conv1d_bwd_weight_dense_wgmma(const Conv1dParams& p, cudaStream_t stream);
// The same with both operands by TMA from rows (kernels/conv1d_bwd_weight_dense_tma.cu; sm_90a code only;
// CONVKIT_DENSE_TMA_WGRAD=0 switches it off). supports(p): 16-bit, K <= 4, Cin/groups and Cout/groups >= 32, and
// either x and dy (p.y) read straight from (B, C, L) rows (stride 1, rows contiguous with channel and batch
// strides multiples of 8 elements, 16-byte aligned, padding and (K > 1) dilation multiples of 8) or, where they
// cannot be, from copies into the workspace (x's tap rows, dy in rows of whole 16-byte units; by default where
// Cout/groups >= 256, CONVKIT_DENSE_TMA_WGRAD_TAPS=1: always, and K 5..8 where Cout/groups <= 64; =0: never):
// taps(p) says so.
bool conv1d_bwd_weight_dense_tma_supports(const Conv1dParams& p);
bool conv1d_bwd_weight_dense_tma_taps(const Conv1dParams& p);
int64_t plan_conv1d_bwd_weight_dense_tma(Conv1dParams& p);
cudaError_t launch_conv1d_bwd_weight_dense_tma(const Conv1dParams& p, cudaStream_t stream);

// The dense grad-input's stride phases, interleaved: dx[b, c, i] = buf[b, i % S, c, i / S] for a buf
// with strides (buf_stride_b, buf_stride_rho, buf_stride_c, 1) (the phase launches' (S, B, C, lq) or the
// one-launch (B, S, C, lq) layout), any dx strides, elements of 2, 4 or 8 bytes
// (kernels/conv1d_bwd_input_interleave.cu; dispatch.cpp; CONVKIT_GI_INTERLEAVE=torch for torch's copy instead,
// =elements for the element kernel at every stride).
struct InterleaveParams {
  int64_t batch, channels, in_length, lq;
  int64_t buf_stride_b, buf_stride_rho, buf_stride_c;
  int64_t dx_stride_b, dx_stride_c, dx_stride_l;
  int stride, num_sms;
};
cudaError_t launch_interleave_phases(const void* buf, void* dx, const InterleaveParams& q, int element_size,
                                     cudaStream_t stream);

// Depthwise forward (multiplier 1) on (B, L, C)-layout x and y (channel stride 1), runtime K/S/D
// (kernels/conv1d_depthwise_channels_last.cu).
bool conv1d_fwd_depthwise_channels_last_supports(const Conv1dParams& p);
cudaError_t launch_conv1d_fwd_depthwise_channels_last(const Conv1dParams& p, cudaStream_t stream);
// ... its grad-weight + grad-bias (p.y = dy; outputs p.grad_w / p.grad_bias, grad-bias summed when
// p.bias is set; plan sets p.weight_splits and returns the fp32 values p.workspace must hold).
// Grad-input is the forward above on dy with the taps reversed (dispatch.cpp).
bool conv1d_bwd_weight_depthwise_channels_last_supports(const Conv1dParams& p);
int64_t plan_conv1d_bwd_weight_depthwise_channels_last(Conv1dParams& p);
cudaError_t launch_conv1d_bwd_weight_depthwise_channels_last(const Conv1dParams& p, cudaStream_t stream);

// Depthwise kernels (kernels/conv1d_depthwise.cuh). K, S, D > 0: specialised, instantiated by
// kernels/generated/*.cu from csrc/specializations.json; 0, 0, 0: the generic depthwise kernels
// (kernels/conv1d_depthwise_generic.cu). The backward is fused (grad-input, grad-weight, grad-bias)
// and needs p.workspace sized by depthwise_bwd_workspace.
template <DType dt, int K, int S, int D>
cudaError_t launch_conv1d_fwd_depthwise(const Conv1dParams& p, cudaStream_t stream);
template <DType dt, int K, int S, int D>
cudaError_t launch_conv1d_bwd_depthwise(const Conv1dParams& p, cudaStream_t stream);

// The narrow dense forward with K, S, D fixed (kernels/conv1d_fwd_dense_narrow_spec.cuh; table family "dense_narrow",
// instantiated by kernels/generated/*.cu): takes the calls conv1d_fwd_dense_narrow_supports takes with those K, S, D
// and x's position stride 1. conv1d_fwd_dense_narrow_shape_forced(): CONVKIT_DENSE_NARROW_TILE or
// CONVKIT_DENSE_NARROW_COALESCED is 0 or 1 (read once per process), which asks for a shape of the runtime kernel.
// (The table has no such entry since session 41: K 10 S 5 measured slower than the runtime kernels.)
bool conv1d_fwd_dense_narrow_shape_forced();
template <DType dt, int K, int S, int D>
cudaError_t launch_conv1d_fwd_dense_narrow_spec(const Conv1dParams& p, cudaStream_t stream);

// Shared memory (bytes) the depthwise kernels need for these params; dispatch.cpp compares it with
// the device limit to decide whether the depthwise path can run at all.
int64_t depthwise_fwd_smem_bytes(const Conv1dParams& p);
int64_t depthwise_bwd_smem_bytes(const Conv1dParams& p);
// Sets p.weight_splits for the fused backward; returns the accumulator values p.workspace must hold.
// `specialised`: the launch is a fixed-(K, S, D) entry of the table, not the generic kernel.
int64_t plan_depthwise_bwd(Conv1dParams& p, bool specialised);
// The largest kernel size the generic (runtime-K) depthwise backward supports.
constexpr int kDepthwiseBwdMaxRuntimeK = 32;
// convkit.causal_conv1d with seq_idx, and convkit.causal_conv1d_update (kernels/causal_conv1d.cu; the
// per-element logic in kernels/causal_conv1d.cuh). Any dtype, runtime K and dilation, any strides.
// The backward writes whichever of p.grad_x / p.grad_state / p.grad_w / p.grad_bias is set, from p.y = g
// (d loss / d pre-activation); plan sets p.weight_splits / p.split_len and returns the accumulator values
// (fp32, fp64 for fp64) p.workspace must hold.
cudaError_t launch_causal_conv1d_fwd(const CausalParams& p, cudaStream_t stream);
int64_t plan_causal_conv1d_bwd_weight(CausalParams& p);
cudaError_t launch_causal_conv1d_bwd(const CausalParams& p, cudaStream_t stream);
cudaError_t launch_causal_conv1d_update(const CausalParams& p, cudaStream_t stream);

// The virtual architecture of the convkit code the current device runs (cudaFuncAttributes::ptxVersion of
// a kernel: 80 for the sm_80 SASS or compute_80 PTX, 90 for sm_90's), 0 when it has none:
// Conv1dParams::code_arch.
int device_code_arch();

}  // namespace convkit
