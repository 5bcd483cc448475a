// Integer index helpers the kernels share, with no CUDA header: tests/causal_host_harness.cpp compiles them
// (through causal_conv1d.cuh) with the system C++ compiler.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define CONVKIT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CONVKIT_HOST_DEVICE inline
#endif

namespace convkit {

// q = a / b, r = a % b; in 32 bits when both fit, since 64-bit division costs many instructions
// (tile decomposition calls it once per tile, the causal kernels once per element).
CONVKIT_HOST_DEVICE void divmod(int64_t a, int64_t b, int64_t& q, int64_t& r) {
  if (((a | b) >> 31) == 0) {
    q = static_cast<uint32_t>(a) / static_cast<uint32_t>(b);
  } else {
    q = a / b;
  }
  r = a - q * b;
}

}  // namespace convkit
