// Fused epilogue activations (a runtime switch: one branch per output element costs nothing next
// to the memory traffic). The codes are in conv1d_params.h.
#pragma once

#include <cuda_runtime.h>

#include "../conv1d_params.h"

namespace convkit {

template <typename A> __device__ __forceinline__ A activate(int act, A z) {
  switch (act) {
    case kActReLU: return z > A(0) ? z : A(0);
    case kActSiLU: return z / (A(1) + exp(-z));
    case kActGELU: return A(0.5) * z * (A(1) + erf(z * A(0.70710678118654752440)));  // torch's exact GELU
    default: return z;
  }
}

// d activate(z) / dz
template <typename A> __device__ __forceinline__ A activate_grad(int act, A z) {
  switch (act) {
    case kActReLU: return z > A(0) ? A(1) : A(0);
    case kActSiLU: {
      const A s = A(1) / (A(1) + exp(-z));
      return s * (A(1) + z * (A(1) - s));
    }
    case kActGELU: {
      const A cdf = A(0.5) * (A(1) + erf(z * A(0.70710678118654752440)));
      const A pdf = exp(A(-0.5) * z * z) * A(0.39894228040143267794);
      return cdf + z * pdf;
    }
    default: return A(1);
  }
}

}  // namespace convkit
