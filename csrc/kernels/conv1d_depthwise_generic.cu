// The generic depthwise kernels: kernel size, stride and dilation read at run time (template
// arguments 0). Every depthwise call that matches no entry of csrc/specializations.json runs these.
#include <algorithm>

#include "conv1d_depthwise.cuh"

namespace convkit {
CONVKIT_INSTANTIATE_DEPTHWISE(0, 0, 0)

static_assert(kDepthwiseBwdMaxRuntimeK == dw::kMaxRuntimeK, "launchers.h and the kernel disagree");

int64_t depthwise_fwd_smem_bytes(const Conv1dParams& p) { return dw::fwd_smem_bytes(p); }

int64_t depthwise_bwd_smem_bytes(const Conv1dParams& p) { return dw::bwd_smem_bytes(p); }

int64_t plan_depthwise_bwd(Conv1dParams& p) {
  const int64_t C = p.out_channels;
  const int64_t tile = dw::tile_for(p.dtype);
  const int64_t n_tiles = std::max(ceil_div(p.out_length, tile), ceil_div(p.in_length, tile * p.stride));
  const int64_t per_channel = std::max<int64_t>(p.batch * n_tiles, 1);
  // About 8 blocks per SM, but never more splits than a channel has tiles.
  const int64_t wanted = ceil_div(static_cast<int64_t>(p.num_sms) * 8, C);
  p.weight_splits = std::max<int64_t>(1, std::min(wanted, per_channel));
  return p.weight_splits * (C * p.kernel_size + C);
}
}  // namespace convkit
