// The generic depthwise kernels: kernel size, stride and dilation read at run time (template
// arguments 0). Every depthwise call that matches no entry of csrc/specializations.json runs these.
#include <algorithm>

#include "../spec_table.h"
#include "conv1d_depthwise.cuh"

namespace convkit {
CONVKIT_INSTANTIATE_DEPTHWISE(0, 0, 0)

const SpecEntry kDepthwiseGenericEntry = {
    "depthwise", 0, 0, 0,
    {&launch_conv1d_fwd_depthwise<DType::kFloat32, 0, 0, 0>, &launch_conv1d_fwd_depthwise<DType::kFloat16, 0, 0, 0>,
     &launch_conv1d_fwd_depthwise<DType::kBFloat16, 0, 0, 0>, &launch_conv1d_fwd_depthwise<DType::kFloat64, 0, 0, 0>},
    {&launch_conv1d_bwd_depthwise<DType::kFloat32, 0, 0, 0>, &launch_conv1d_bwd_depthwise<DType::kFloat16, 0, 0, 0>,
     &launch_conv1d_bwd_depthwise<DType::kBFloat16, 0, 0, 0>, &launch_conv1d_bwd_depthwise<DType::kFloat64, 0, 0, 0>}};

static_assert(kDepthwiseBwdMaxRuntimeK == dw::kMaxRuntimeK, "launchers.h and the kernel disagree");

int64_t depthwise_fwd_smem_bytes(const Conv1dParams& p) { return dw::fwd_smem_bytes(p, dw::staged_vec(dw::fwd_vec(p.dtype))); }

int64_t depthwise_bwd_smem_bytes(const Conv1dParams& p) { return dw::bwd_smem_bytes(p, dw::bwd_vec(p.dtype)); }

int64_t plan_depthwise_bwd(Conv1dParams& p, bool specialised) {
  return dw::plan_bwd(p, dw::bwd_vec(p.dtype), dw::bwd_variant(p.dtype, p.kernel_size), specialised);
}

namespace {
__global__ void code_arch_probe_kernel() {}
}  // namespace

int device_code_arch() {
  cudaFuncAttributes a{};
  if (cudaFuncGetAttributes(&a, code_arch_probe_kernel) != cudaSuccess) {
    (void)cudaGetLastError();  // no image for this device: the launches will report it
    return 0;
  }
  return a.ptxVersion;
}
}  // namespace convkit
