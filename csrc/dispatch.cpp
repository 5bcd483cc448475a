// Host side of convkit: shape checks, Conv1dParams set-up, the choice between a specialised and a
// generic kernel, and the pybind11 module convkit._C. The only file that sees torch; the kernels see
// only Conv1dParams. Python (python/convkit/) has already validated and normalised every argument;
// the checks here are the last line of defence, so a bad call from anywhere is an exception, never a
// CUDA fault.
#include <torch/extension.h>

// c10's stream and guard headers only: ATen/cuda/CUDAContext.h would pull in cuBLAS/cuSPARSE headers,
// which a bare CUDA toolkit may lack and which cost compile time.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "conv1d_params.h"
#include "kernels/launchers.h"
#include "spec_table.h"

namespace convkit {
namespace {

DType dtype_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::kFloat32;
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    case at::kDouble: return DType::kFloat64;
    default: TORCH_CHECK(false, "convkit: unsupported dtype ", t.scalar_type(),
                         " (supported: float32, float16, bfloat16, float64)");
  }
  return DType::kFloat32;
}

bool force_generic() {
  const char* v = std::getenv("CONVKIT_FORCE_GENERIC");
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

// Multiprocessors of the current device (the caller holds a device guard), cached per device.
int sm_count() {
  static int cache[64] = {0};
  int dev = 0;
  C10_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 64) return 132;
  if (cache[dev] == 0) C10_CUDA_CHECK(cudaDeviceGetAttribute(&cache[dev], cudaDevAttrMultiProcessorCount, dev));
  return cache[dev];
}

cudaStream_t current_stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

// Testing aid: CONVKIT_POISON_OUTPUTS=1 fills every output with NaN before the kernel runs, so an
// element a kernel forgets to write shows up as NaN instead of as stale memory.
bool poison_outputs() {
  const char* v = std::getenv("CONVKIT_POISON_OUTPUTS");
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

at::Tensor new_output(at::IntArrayRef sizes, const at::TensorOptions& options) {
  at::Tensor t = at::empty(sizes, options);
  if (poison_outputs() && t.numel() > 0) t.fill_(std::numeric_limits<double>::quiet_NaN());
  return t;
}

void check_cuda(const at::Tensor& t, const char* name, const at::Tensor& ref) {
  TORCH_CHECK(t.is_cuda(), "convkit: ", name, " must be a CUDA tensor");
  TORCH_CHECK(t.device() == ref.device(), "convkit: ", name, " is on ", t.device(), " but the input is on ",
              ref.device());
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "convkit: ", name, " has dtype ", t.scalar_type(),
              " but the input has dtype ", ref.scalar_type());
}

int64_t out_length_of(int64_t L, int64_t K, int64_t stride, int64_t pl, int64_t pr, int64_t dilation) {
  return (L + pl + pr - dilation * (K - 1) - 1) / stride + 1;
}

// Everything but pointers and tensor strides, shared by the three directions.
Conv1dParams make_params(int64_t B, int64_t Cin, int64_t Cout, int64_t L, int64_t K, int64_t stride,
                         int64_t pl, int64_t pr, int64_t dilation, int64_t groups, const at::Tensor& like) {
  TORCH_CHECK(stride >= 1 && dilation >= 1, "convkit: stride and dilation must be >= 1");
  TORCH_CHECK(pl >= 0 && pr >= 0, "convkit: padding must be non-negative");
  TORCH_CHECK(groups >= 1 && Cin % groups == 0 && Cout % groups == 0,
              "convkit: groups must divide in_channels and out_channels");
  const int64_t lout = out_length_of(L, K, stride, pl, pr, dilation);
  TORCH_CHECK(L + pl + pr >= dilation * (K - 1) + 1 && lout >= 1,
              "convkit: output length would be < 1 (input length ", L, " + padding ", pl + pr,
              " is shorter than the dilated kernel ", dilation * (K - 1) + 1, ")");
  Conv1dParams p{};
  p.batch = B;
  p.in_channels = Cin;
  p.out_channels = Cout;
  p.in_length = L;
  p.out_length = lout;
  p.kernel_size = K;
  p.stride = stride;
  p.pad_left = pl;
  p.dilation = dilation;
  p.groups = groups;
  p.dtype = dtype_of(like);
  p.num_sms = sm_count();
  return p;
}

void set_x(Conv1dParams& p, const at::Tensor& x) {
  p.x = const_cast<void*>(x.data_ptr());
  p.x_stride_b = x.stride(0);
  p.x_stride_c = x.stride(1);
  p.x_stride_l = x.stride(2);
}
void set_w(Conv1dParams& p, const at::Tensor& w) {
  p.w = const_cast<void*>(w.data_ptr());
  p.w_stride_o = w.stride(0);
  p.w_stride_i = w.stride(1);
  p.w_stride_k = w.stride(2);
}
void set_y(Conv1dParams& p, const at::Tensor& y) {
  p.y = const_cast<void*>(y.data_ptr());
  p.y_stride_b = y.stride(0);
  p.y_stride_c = y.stride(1);
  p.y_stride_l = y.stride(2);
}

void check_launch(cudaError_t err, const std::string& kernel) {
  TORCH_CHECK(err == cudaSuccess, "convkit: kernel ", kernel, " failed: ", cudaGetErrorString(err));
}

struct Choice {
  LaunchFn launch;
  std::string name;
};

// The single place where a forward call is matched against the specialisation table.
Choice choose_forward(const Conv1dParams& p) {
  const bool depthwise = p.groups == p.in_channels && p.groups == p.out_channels;
  if (depthwise && !force_generic()) {
    for (int i = 0; i < kNumSpecEntries; ++i) {
      const SpecEntry& e = kSpecEntries[i];
      if (std::strcmp(e.family, "fwd_depthwise") == 0 && e.kernel_size == p.kernel_size &&
          e.stride == p.stride && e.dilation == p.dilation) {
        return {e.launch[static_cast<int>(p.dtype)],
                "conv1d_fwd_depthwise<K=" + std::to_string(e.kernel_size) + ",S=" + std::to_string(e.stride) +
                    ",D=" + std::to_string(e.dilation) + ">"};
      }
    }
  }
  return {&launch_conv1d_fwd_generic, "conv1d_fwd_generic"};
}

void check_shapes(const at::Tensor& x, const at::Tensor& w, int64_t groups) {
  TORCH_CHECK(x.dim() == 3, "convkit: input must be 3-D (B, C, L), got ", x.dim(), "-D");
  TORCH_CHECK(w.dim() == 3, "convkit: weight must be 3-D (Cout, Cin/groups, K), got ", w.dim(), "-D");
  TORCH_CHECK(groups >= 1 && x.size(1) == w.size(1) * groups, "convkit: input has ", x.size(1),
              " channels, weight expects ", w.size(1) * groups);
  TORCH_CHECK(w.size(2) >= 1, "convkit: kernel size must be >= 1");
}

}  // namespace

at::Tensor conv1d_forward(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias,
                          int64_t stride, int64_t pl, int64_t pr, int64_t dilation, int64_t groups) {
  TORCH_CHECK(x.is_cuda(), "convkit: input must be a CUDA tensor");
  check_cuda(w, "weight", x);
  check_shapes(x, w, groups);
  c10::cuda::CUDAGuard guard(x.device());
  Conv1dParams p = make_params(x.size(0), x.size(1), w.size(0), x.size(2), w.size(2), stride, pl, pr, dilation,
                               groups, x);
  at::Tensor y = new_output({p.batch, p.out_channels, p.out_length}, x.options());
  if (bias.has_value()) {
    check_cuda(*bias, "bias", x);
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == p.out_channels, "convkit: bias must have shape (",
                p.out_channels, ",)");
  }
  at::Tensor b = bias.has_value() ? bias->contiguous() : at::Tensor();
  if (y.numel() == 0) return y;
  set_x(p, x);
  set_w(p, w);
  set_y(p, y);
  p.bias = b.defined() ? b.data_ptr() : nullptr;
  const Choice c = choose_forward(p);
  check_launch(c.launch(p, current_stream()), c.name);
  return y;
}

at::Tensor conv1d_backward_input(const at::Tensor& dy, const at::Tensor& w, int64_t in_length, int64_t stride,
                                 int64_t pl, int64_t pr, int64_t dilation, int64_t groups) {
  TORCH_CHECK(dy.is_cuda(), "convkit: grad_output must be a CUDA tensor");
  check_cuda(w, "weight", dy);
  TORCH_CHECK(dy.dim() == 3 && w.dim() == 3, "convkit: grad_output and weight must be 3-D");
  TORCH_CHECK(dy.size(1) == w.size(0), "convkit: grad_output has ", dy.size(1), " channels, weight has ",
              w.size(0), " output channels");
  c10::cuda::CUDAGuard guard(dy.device());
  Conv1dParams p = make_params(dy.size(0), w.size(1) * groups, w.size(0), in_length, w.size(2), stride, pl, pr,
                               dilation, groups, dy);
  TORCH_CHECK(p.out_length == dy.size(2), "convkit: grad_output has length ", dy.size(2), ", expected ",
              p.out_length);
  at::Tensor dx = new_output({p.batch, p.in_channels, in_length}, dy.options());
  if (dx.numel() == 0) return dx;
  set_x(p, dx);
  set_w(p, w);
  set_y(p, dy);
  check_launch(launch_conv1d_bwd_input_generic(p, current_stream()), "conv1d_bwd_input_generic");
  return dx;
}

// Returns (grad_weight, grad_bias); a gradient that is not asked for comes back as an empty tensor.
std::tuple<at::Tensor, at::Tensor> conv1d_backward_params(const at::Tensor& dy, const at::Tensor& x,
                                                         int64_t kernel_size, int64_t stride, int64_t pl,
                                                         int64_t pr, int64_t dilation, int64_t groups,
                                                         bool need_weight, bool need_bias) {
  TORCH_CHECK(dy.is_cuda(), "convkit: grad_output must be a CUDA tensor");
  check_cuda(x, "input", dy);
  TORCH_CHECK(dy.dim() == 3 && x.dim() == 3, "convkit: grad_output and input must be 3-D");
  TORCH_CHECK(dy.size(0) == x.size(0), "convkit: grad_output and input batch sizes differ");
  c10::cuda::CUDAGuard guard(dy.device());
  Conv1dParams p = make_params(x.size(0), x.size(1), dy.size(1), x.size(2), kernel_size, stride, pl, pr, dilation,
                               groups, dy);
  TORCH_CHECK(p.out_length == dy.size(2), "convkit: grad_output has length ", dy.size(2), ", expected ",
              p.out_length);
  at::Tensor dw = need_weight ? new_output({p.out_channels, p.in_channels / groups, kernel_size}, dy.options())
                              : at::empty({0}, dy.options());
  at::Tensor db = need_bias ? new_output({p.out_channels}, dy.options()) : at::empty({0}, dy.options());
  if (!need_weight && !need_bias) return {dw, db};
  set_x(p, x);
  set_y(p, dy);
  p.w = need_weight ? dw.data_ptr() : nullptr;
  p.bias = need_bias ? db.data_ptr() : nullptr;
  const int64_t ws_elems = plan_conv1d_bwd_weight(p, need_bias);
  at::Tensor ws = at::empty({ws_elems}, dy.options().dtype(dy.scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
  p.workspace = ws.data_ptr();
  check_launch(launch_conv1d_bwd_weight_generic(p, current_stream()), "conv1d_bwd_weight_generic");
  return {dw, db};
}

// Which kernels a call with these arguments would run (for convkit.explain).
std::vector<std::string> explain(const at::Tensor& x, const at::Tensor& w, int64_t stride, int64_t pl, int64_t pr,
                                 int64_t dilation, int64_t groups) {
  TORCH_CHECK(x.is_cuda(), "convkit: explain needs a CUDA input");
  check_shapes(x, w, groups);
  c10::cuda::CUDAGuard guard(x.device());
  Conv1dParams p = make_params(x.size(0), x.size(1), w.size(0), x.size(2), w.size(2), stride, pl, pr, dilation,
                               groups, x);
  return {choose_forward(p).name, "conv1d_bwd_input_generic", "conv1d_bwd_weight_generic"};
}

std::vector<std::tuple<std::string, int, int, int>> spec_entries() {
  std::vector<std::tuple<std::string, int, int, int>> out;
  for (int i = 0; i < kNumSpecEntries; ++i)
    out.emplace_back(kSpecEntries[i].family, kSpecEntries[i].kernel_size, kSpecEntries[i].stride,
                     kSpecEntries[i].dilation);
  return out;
}

}  // namespace convkit

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "convkit CUDA kernels (use the convkit package, not this module directly)";
  m.def("conv1d_forward", &convkit::conv1d_forward);
  m.def("conv1d_backward_input", &convkit::conv1d_backward_input);
  m.def("conv1d_backward_params", &convkit::conv1d_backward_params);
  m.def("explain", &convkit::explain);
  m.def("spec_entries", &convkit::spec_entries);
  m.attr("cuda_runtime_version") = CUDART_VERSION;
}
