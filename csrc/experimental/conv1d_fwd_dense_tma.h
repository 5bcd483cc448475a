// The TMA-fed wgmma dense forward (conv1d_fwd_dense_tma.cu). EXPERIMENTAL: not built into the package
// (setup.py compiles csrc/kernels/*.cu only) until ci/dense_mma_check.cu --tma has shown it correct and fast
// on the GPU; `bash ci/gpu_check.sh tma` builds and runs that check.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../conv1d_params.h"

namespace convkit {

// True when the kernel runs p: 16-bit x and weights of the same dtype, Cin/groups % 16 == 0 (% 8 when built with
// -DCONVKIT_TMA_SW32=0), stride <= 8,
// sm_90a code (CONVKIT_SM90A build, p.code_arch 90), and x in the channels-last memory a TMA tensor map can
// describe: x_stride_c == 1, x_stride_l and x_stride_b multiples of 8 elements, x 16-byte aligned, strides
// ordered (x_stride_l >= in_channels, x_stride_b >= in_length * x_stride_l). Weights may have any strides.
bool conv1d_fwd_dense_tma_supports(const Conv1dParams& p);

// Bytes of the packed weight buffer launch_conv1d_fwd_dense_tma needs for p (0 when unsupported).
int64_t conv1d_fwd_dense_tma_workspace_bytes(const Conv1dParams& p);

// Packs p.w into `workspace` (16-byte aligned, workspace_bytes(p) bytes; the weights of each stage of each
// output tile as one contiguous block) and runs the forward. cudaErrorInvalidValue when unsupported.
cudaError_t launch_conv1d_fwd_dense_tma(const Conv1dParams& p, void* workspace, cudaStream_t stream);

}  // namespace convkit
