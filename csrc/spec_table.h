// The specialised kernels that exist in this build, generated from csrc/specializations.json into
// csrc/kernels/generated/spec_table.cpp. dispatch.cpp looks a call up here before falling back to
// the generic kernel of its family.
#pragma once

#include "kernels/launchers.h"

namespace convkit {

struct SpecEntry {
  const char* family;  // e.g. "depthwise"
  int kernel_size;
  int stride;
  int dilation;
  LaunchFn forward[4];   // indexed by DType; nullptr: no kernels for that dtype (float64), the generic ones run
  LaunchFn backward[4];  // indexed by DType
};

extern const SpecEntry kSpecEntries[];
extern const int kNumSpecEntries;

// The runtime-shape kernels of the depthwise family (K, S, D read from the params; 0, 0, 0 here),
// for depthwise calls that match no entry (kernels/conv1d_depthwise_generic.cu).
extern const SpecEntry kDepthwiseGenericEntry;

}  // namespace convkit
