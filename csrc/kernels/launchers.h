// Host-callable entry points of every kernel family. Plain C++ (cuda_runtime.h for the stream and
// error types), so dispatch.cpp and the generated specialisation table can include it.
#pragma once

#include <cuda_runtime.h>

#include "../conv1d_params.h"

namespace convkit {

using LaunchFn = cudaError_t (*)(const Conv1dParams&, cudaStream_t);

// Generic kernels: kernel size, stride, padding, dilation and groups are runtime values.
cudaError_t launch_conv1d_fwd_generic(const Conv1dParams& p, cudaStream_t stream);
cudaError_t launch_conv1d_bwd_input_generic(const Conv1dParams& p, cudaStream_t stream);
// grad-weight needs fp32 (fp64 for fp64) partial sums: this sets p.weight_splits / p.bias_splits and
// returns how many accumulator values p.workspace must hold.
int64_t plan_conv1d_bwd_weight(Conv1dParams& p, bool with_bias);
cudaError_t launch_conv1d_bwd_weight_generic(const Conv1dParams& p, cudaStream_t stream);

// Specialised kernels, instantiated by csrc/kernels/generated/*.cu from csrc/specializations.json.
template <DType dt, int K, int S, int D>
cudaError_t launch_conv1d_fwd_depthwise(const Conv1dParams& p, cudaStream_t stream);

}  // namespace convkit
