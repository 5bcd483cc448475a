// Host side of convkit: shape checks, Conv1dParams set-up, the choice between a specialised and a
// generic kernel, and the pybind11 module convkit._C. The only file that sees torch; the kernels see
// only Conv1dParams. Python (python/convkit/) has already validated and normalised every argument;
// the checks here are the last line of defence, so a bad call from anywhere is an exception, never a
// CUDA fault.
// ATen's tensor class and the few operators used here, and torch's pybind11 casters: not
// <torch/extension.h>, which pulls in the whole C++ frontend and tripled this file's compile time.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu_backward.h>
#include <ATen/ops/silu_backward.h>
#include <ATen/ops/threshold_backward.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/utils/pybind.h>

// c10's stream and guard headers only: ATen/cuda/CUDAContext.h would pull in cuBLAS/cuSPARSE headers,
// which a bare CUDA toolkit may lack and which cost compile time.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
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


// read(dev) for the current device (the caller holds a device guard), read once per device and kept in
// `cache` (the value + 1; 0: not read yet). Atomics because calls can come from several threads. Devices
// 64 and up get `beyond(dev)`.
template <typename Read, typename Beyond>
int once_per_device(std::atomic<int> (&cache)[64], Read read, Beyond beyond) {
  int dev = 0;
  C10_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 64) return beyond(dev);
  const int cached = cache[dev].load(std::memory_order_relaxed);
  if (cached != 0) return cached - 1;
  const int v = read(dev);
  cache[dev].store(v + 1, std::memory_order_relaxed);
  return v;
}
// An attribute of the current device (64 devices at most; beyond that the fallback).
template <cudaDeviceAttr kAttr> int device_attribute(int fallback) {
  static std::atomic<int> cache[64];
  return once_per_device(
      cache,
      [](int dev) {
        int v = 0;
        C10_CUDA_CHECK(cudaDeviceGetAttribute(&v, kAttr, dev));
        return v;
      },
      [fallback](int) { return fallback; });
}
int sm_count() { return device_attribute<cudaDevAttrMultiProcessorCount>(132); }
// device_code_arch() of the current device: not the compute capability, since an H200 runs compute_80 PTX
// in a build for "8.0+PTX", and code built for sm_80 lacks some kernels (kStreamWidthsMinArch in
// kernels/conv1d_depthwise_stream.cuh).
int code_arch() {
  static std::atomic<int> cache[64];
  const auto read = [](int) { return device_code_arch(); };
  return once_per_device(cache, read, read);
}
int smem_optin_limit() { return device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(48 * 1024); }

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

void check_device(const at::Tensor& t, const char* name, const at::Tensor& ref) {
  TORCH_CHECK(t.is_cuda(), "convkit: ", name, " must be a CUDA tensor");
  TORCH_CHECK(t.device() == ref.device(), "convkit: ", name, " is on ", t.device(), " but the input is on ",
              ref.device());
}

void check_cuda(const at::Tensor& t, const char* name, const at::Tensor& ref) {
  check_device(t, name, ref);
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "convkit: ", name, " has dtype ", t.scalar_type(),
              " but the input has dtype ", ref.scalar_type());
}

// Weights (and bias) may be the input's dtype, or fp32 beside fp16/bf16 input.
void check_param_dtype(const at::Tensor& t, const char* name, const at::Tensor& x) {
  check_device(t, name, x);
  const bool same = t.scalar_type() == x.scalar_type();
  const bool fp32_master = t.scalar_type() == at::kFloat && (x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16);
  TORCH_CHECK(same || fp32_master, "convkit: ", name, " has dtype ", t.scalar_type(), " but the input has dtype ",
              x.scalar_type(), " (allowed: the same dtype, or float32 with float16/bfloat16 input)");
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
  p.code_arch = code_arch();
  // CONVKIT_REALIGN_STORES=1 (an experiment, read once per process): the 16-bit wgmma / TMA forwards store y rows
  // that do not start on a 16-byte unit as whole units of y (wg::store_c_tile)
  static const bool realign = env_equals("CONVKIT_REALIGN_STORES", "1");
  p.realign_stores = realign ? 1 : 0;
  return p;
}

void set_x(Conv1dParams& p, const at::Tensor& x) {
  p.x = const_cast<void*>(x.data_ptr());
  p.x_stride_b = x.stride(0);
  p.x_stride_c = x.stride(1);
  p.x_stride_l = x.stride(2);
}
// x = t from its element `shift` along L on (the grad-input's dy, moved right instead of a negative padding).
void set_x_shifted(Conv1dParams& p, const at::Tensor& t, int64_t shift) {
  set_x(p, t);
  p.x = static_cast<char*>(p.x) + shift * t.stride(2) * t.element_size();
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

// CONVKIT_FORCE_GENERIC: unset/0 = normal dispatch; 1 = ignore the specialisation table (each
// family's runtime-shape kernel); all = the any-configuration generic kernels for everything.
enum class Force { kNone, kNoSpecialised, kAllGeneric };
Force forced() {
  const char* v = std::getenv("CONVKIT_FORCE_GENERIC");
  if (v == nullptr || v[0] == '\0' || std::strcmp(v, "0") == 0) return Force::kNone;
  return std::strcmp(v, "all") == 0 ? Force::kAllGeneric : Force::kNoSpecialised;
}

// CONVKIT_GI_PHASE_BUFFER=0: the dense grad-input's stride phases write dx directly instead of through
// a buffer (see conv1d_backward).
bool gi_phase_buffer() { return !env_equals("CONVKIT_GI_PHASE_BUFFER", "0"); }

// That buffer is interleaved into dx by convkit's kernel (kernels/conv1d_bwd_input_interleave.cu);
// CONVKIT_GI_INTERLEAVE=torch (read once) uses torch's strided copy instead (=elements: the kernel's element path at
// every stride, read in the kernel file). H200, bf16 fwd+bwd, session 11:
// kb76 35.5 -> 33.0 ms with the kernel (torch's copy of a > 2^31-element buffer runs split in four launches).
bool gi_interleave_kernel() {
  static const bool on = !env_equals("CONVKIT_GI_INTERLEAVE", "torch");
  return on;
}

struct Choice {
  LaunchFn launch;
  std::string name;
  bool specialised = false;  // a fixed-(K, S, D) entry of the table (choose_backward)
  // Bytes of scratch memory the launch wants in p.workspace (nullptr: none); the caller allocates it.
  int64_t (*workspace_bytes)(const Conv1dParams&) = nullptr;
};

// Launches c on p with the scratch memory c asks for in p.workspace (bytes on the device of `options`), freed
// once the launch is queued: the allocator orders its reuse on the stream.
void launch_choice(const Choice& c, Conv1dParams& p, const at::TensorOptions& options) {
  at::Tensor ws;
  if (c.workspace_bytes != nullptr) {
    ws = at::empty({c.workspace_bytes(p)}, options.dtype(at::kByte));
    p.workspace = ws.data_ptr();
  }
  check_launch(c.launch(p, current_stream()), c.name);
}

// The table entry for p's (K, S, D) with kernels for p's dtype, or nullptr.
const SpecEntry* find_spec(const char* family, const Conv1dParams& p) {
  for (int i = 0; i < kNumSpecEntries; ++i) {
    const SpecEntry& e = kSpecEntries[i];
    if (std::strcmp(e.family, family) == 0 && e.kernel_size == p.kernel_size && e.stride == p.stride &&
        e.dilation == p.dilation && e.forward[static_cast<int>(p.dtype)] != nullptr)
      return &e;
  }
  return nullptr;
}

std::string spec_name(const char* what, const SpecEntry& e) {
  return std::string(what) + "<K=" + std::to_string(e.kernel_size) + ",S=" + std::to_string(e.stride) +
         ",D=" + std::to_string(e.dilation) + ">";
}

bool is_depthwise(const Conv1dParams& p) { return p.groups == p.in_channels; }

// A depthwise call with a channel multiplier of 8 or more (wav2vec2's first layer: Cin 1, Cout 512) is a
// dense conv with one input channel per group: it runs the dense kernels (the narrow forward, the dense
// grad-weight), which beat the depthwise ones, built for a few outputs per input channel.
bool dense_like_depthwise(const Conv1dParams& p) { return is_depthwise(p) && p.out_channels >= 8 * p.in_channels; }

// torch's flag for TF32 in fp32 convolutions (torch.backends.cudnn.allow_tf32, or the newer
// torch.backends.cudnn.conv.fp32_precision), read at every call as cuDNN does.
bool allow_tf32() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 9)
  return at::globalContext().allowTF32CuDNN(at::Float32Op::CONV);
#else
  return at::globalContext().allowTF32CuDNN();
#endif
}

// The narrow forward (conv1d_fwd_dense_narrow_supports(p) holds): the table entry of family "dense_narrow" for p's
// (K, S, D) where there is one (fp32 / fp16 / bf16, contiguous x rows; CONVKIT_FORCE_GENERIC=1 skips it, and so does
// an environment that forces one of the runtime kernel's shapes), else the runtime-shape kernel. Only for a call's
// own forward: the grad-input's phases (`what` "conv1d_bwd_input") differ in their tap counts, and dense_grad_input
// wants one kernel for all of them.
Choice narrow_forward_choice(const Conv1dParams& p, const std::string& what) {
  const bool table = what == "conv1d_fwd" && forced() == Force::kNone && p.x_stride_l == 1 &&
                     !conv1d_fwd_dense_narrow_shape_forced();
  const SpecEntry* e = table ? find_spec("dense_narrow", p) : nullptr;
  if (e != nullptr)
    return {e->forward[static_cast<int>(p.dtype)], spec_name((what + "_dense_narrow").c_str(), *e), true};
  return {&launch_conv1d_fwd_dense_narrow, what + "_dense_narrow"};
}

// The dense / grouped forward for p, or {nullptr, ""}: direct FMAs when the reduction is narrow (Cin/groups
// < 8, any dtype), else the implicit GEMM: tensor cores (mma.sync) for fp16/bf16, the fp32 kernel with
// TF32 tensor cores or IEEE FFMA for fp32. `what` prefixes the name
// ("conv1d_fwd", or "conv1d_bwd_input" when grad-input runs on it).
Choice choose_dense_forward(const Conv1dParams& p, const std::string& what, bool allow_narrow_out = true) {
  if (is_depthwise(p) || forced() == Force::kAllGeneric) return {nullptr, ""};
  if (conv1d_fwd_dense_narrow_supports(p)) return narrow_forward_choice(p, what);
  if (allow_narrow_out && conv1d_fwd_dense_narrow_out_supports(p))  // off with CONVKIT_DENSE_NARROW_OUT=0
    return {&launch_conv1d_fwd_dense_narrow_out, what + "_dense_narrow_out"};
  if (conv1d_fwd_dense_mma_supports(p)) {
    // launch_conv1d_fwd_dense_mma runs the wgmma kernel where it applies; it does whenever supports(p, false)
    // holds, since wants_tap_major_weight then passes it the tap-major weights it needs.
    const bool wgmma = conv1d_fwd_dense_wgmma_supports(p, false);
    return {&launch_conv1d_fwd_dense_mma, what + (wgmma ? "_dense_wgmma" : "_dense_mma")};
  }
  if (conv1d_fwd_dense_f32_supports(p)) {
    if (allow_tf32())
      return {&launch_conv1d_fwd_dense_tf32, what + "_dense_tf32", false, &conv1d_fwd_dense_tf32_workspace_bytes};
    return {&launch_conv1d_fwd_dense_f32, what + "_dense_f32", false, &conv1d_fwd_dense_f32_workspace_bytes};
  }
  return {nullptr, ""};
}

// The dense tensor-core forward stages weights per reduction step when its whole weight panel does not
// fit in shared memory (w2v_k3s2: Cin_g = 512); it copies them by 16-byte cp.async when they are
// tap-major, (Cout, K, Cin_g) in memory, of the input's dtype. True when `c` is that kernel, p is such a
// call and its weights have the input's dtype (fp32 master weights keep the register path: w_dtype also
// says how the kernel reads the bias).
bool wants_tap_major_weight(const Choice& c, const Conv1dParams& p) {
  return c.launch == &launch_conv1d_fwd_dense_mma && p.w_dtype == p.dtype && conv1d_fwd_dense_mma_stages_weights(p);
}
// w (Cout, Cin_g, K) as a (Cout, Cin_g, K) view of a fresh (Cout, K, Cin_g) tensor.
at::Tensor tap_major_weight(const at::Tensor& w) {
  const at::Tensor v = w.permute({0, 2, 1});
  return at::empty(v.sizes(), w.options()).copy_(v).permute({0, 2, 1});
}

// A depthwise call (multiplier 1) on a (B, L, C) tensor seen as (B, C, L) gets its output in the same
// layout, for the channels-last kernel (python/convkit/ops.py's fake follows the same rule).
// x (B, C, L) is a (B, L, C) tensor seen through .transpose(1, 2): channel stride 1, position stride C.
bool is_blc(const at::Tensor& x) { return x.size(1) > 1 && x.stride(1) == 1 && x.stride(2) == x.size(1); }

bool channels_last_depthwise(const at::Tensor& x, const at::Tensor& w, int64_t groups) {
  const int64_t C = x.size(1);
  return groups == C && w.size(0) == C && is_blc(x);
}

// A new (B, C, L) output (the forward's y, the backward's dx): contiguous, or in (B, L, C) memory
// when `blc` (the rule above).
at::Tensor new_bcl_output(int64_t B, int64_t C, int64_t L, const at::TensorOptions& options, bool blc) {
  return blc ? new_output({B, L, C}, options).transpose(1, 2) : new_output({B, C, L}, options);
}

// Grad-input of a stride-1 (B, L, C) depthwise call as the channels-last forward of dy with the taps
// reversed: dx[i] = sum_k w[k] dy[i + P - k*D] is a convolution with left padding (K-1)*D - P. The
// reversed taps are w read backwards (negative tap stride), no copy. Pointers of dy / dx not set.
Conv1dParams channels_last_grad_input_params(const Conv1dParams& p, const at::Tensor& w) {
  Conv1dParams q = p;
  q.in_length = p.out_length;
  q.out_length = p.in_length;
  q.pad_left = (p.kernel_size - 1) * p.dilation - p.pad_left;
  q.w = static_cast<char*>(w.data_ptr()) + (p.kernel_size - 1) * w.stride(2) * w.element_size();
  q.w_stride_k = -w.stride(2);
  q.bias = nullptr;
  q.activation = kActNone;
  return q;
}
bool channels_last_grad_input_ok(const Conv1dParams& q) {
  return q.stride == 1 && q.pad_left >= 0 && conv1d_fwd_depthwise_channels_last_supports(q);
}

// The channels-last backward of a (B, L, C) depthwise call: grad-input as the channels-last forward
// of dy (gi: x = dy, y = dx) and the channels-last grad-weight (gw: y = dy), with dy at `dy` with
// strides dys[0..2] (b, c, l) and dx in (B, L, C) memory at `dx`; `ok` says whether those kernels run them.
// conv1d_backward and explain both decide through this (explain with placeholder pointers).
struct ChannelsLastBackward {
  Conv1dParams gi, gw;
  bool ok;
};
ChannelsLastBackward channels_last_backward(const Conv1dParams& p, const at::Tensor& w, void* dy, const int64_t* dys,
                                            void* dx, bool need_input, bool need_wb) {
  ChannelsLastBackward r;
  r.gi = channels_last_grad_input_params(p, w);
  r.gi.x = dy;
  r.gi.x_stride_b = dys[0];
  r.gi.x_stride_c = dys[1];
  r.gi.x_stride_l = dys[2];
  r.gi.y = dx;
  r.gi.y_stride_b = p.in_length * p.in_channels;
  r.gi.y_stride_c = 1;
  r.gi.y_stride_l = p.in_channels;
  r.gw = p;
  r.gw.y = dy;
  r.gw.y_stride_b = dys[0];
  r.gw.y_stride_c = dys[1];
  r.gw.y_stride_l = dys[2];
  r.ok = (!need_input || channels_last_grad_input_ok(r.gi)) &&
         (!need_wb || conv1d_bwd_weight_depthwise_channels_last_supports(r.gw));
  return r;
}
// A placeholder address for eligibility tests: aligned like a fresh allocation, never dereferenced.
void* const kFreshPointer = reinterpret_cast<void*>(uintptr_t{256});

// The TMA-fed wgmma forward (kernels/conv1d_fwd_dense_tma.cu) for a dense / grouped call whose x is in
// channels-last memory, where it beats the kernels below (H100, bf16, kernel ms, session 15: w2v_k3s2 2.95 vs
// 4.12, kb76 3.95 vs 5.84, kb67 1.54 vs 1.91, tcn 0.47 vs 0.72; with its 32-channel stages, session 22, H200, kernel
// only: w2v_k3s2 2.23, tcn 0.39, kb67 1.45); not for Cout/groups <= 64 (half-empty 128-row tiles: grouped_g8 0.43
// vs 0.36). (B, C, L) x too where the kernel's launcher finds that copying x to
// channels-last memory first pays (Cout/groups * K / stride >= 384; CONVKIT_DENSE_TMA_COPY=0 / 1: never / always);
// there x rows of whole 16-byte units are read as they lie and transposed in shared memory instead of copied
// ("conv1d_fwd_dense_tma_tx", session 37; CONVKIT_DENSE_TMA_TX=0 / 1: never / also where the copy does not pay).
// CONVKIT_DENSE_TMA=0 (or CONVKIT_DENSE_WGMMA=0) switches it off (read once per process). dense_tma_forward_allowed:
// the conditions besides the kernel's own plan (conv1d_fwd_dense_tma_supports / _form).
bool dense_tma_forward_allowed(const Conv1dParams& p) {
  static const bool on = !env_equals("CONVKIT_DENSE_TMA", "0") && !env_equals("CONVKIT_DENSE_WGMMA", "0");
  return on && !is_depthwise(p) && forced() != Force::kAllGeneric && p.out_channels / p.groups > 64;
}
bool dense_tma_forward(const Conv1dParams& p) {
  return dense_tma_forward_allowed(p) && conv1d_fwd_dense_tma_supports(p);
}

// The single place where a forward call is matched to a kernel.
Choice choose_forward(const Conv1dParams& p) {
  const Force f = forced();
  if (dense_like_depthwise(p) && f != Force::kAllGeneric && conv1d_fwd_dense_narrow_supports(p))
    return narrow_forward_choice(p, "conv1d_fwd");
  if (is_depthwise(p) && f != Force::kAllGeneric && conv1d_fwd_depthwise_channels_last_supports(p))
    return {&launch_conv1d_fwd_depthwise_channels_last, "conv1d_fwd_depthwise_channels_last"};
  if (is_depthwise(p) && f != Force::kAllGeneric && depthwise_fwd_smem_bytes(p) <= smem_optin_limit()) {
    const SpecEntry* e = f == Force::kNone ? find_spec("depthwise", p) : nullptr;
    if (e != nullptr) return {e->forward[static_cast<int>(p.dtype)], spec_name("conv1d_fwd_depthwise", *e)};
    return {kDepthwiseGenericEntry.forward[static_cast<int>(p.dtype)], "conv1d_fwd_depthwise_generic"};
  }
  if (dense_tma_forward_allowed(p)) {  // (one plan: whether the kernel takes p, and how it takes x)
    static const char* const kTmaForwardNames[4] = {"", "conv1d_fwd_dense_tma", "conv1d_fwd_dense_tma_tx",
                                                    "x_to_channels_last + conv1d_fwd_dense_tma"};
    const int form = conv1d_fwd_dense_tma_form(p);
    if (form != 0)
      return {&launch_conv1d_fwd_dense_tma, kTmaForwardNames[form], false,
              &conv1d_fwd_dense_tma_workspace_bytes};
  }
  const Choice dense = choose_dense_forward(p, "conv1d_fwd");
  if (dense.launch != nullptr) return dense;
  return {&launch_conv1d_fwd_generic, "conv1d_fwd_generic"};
}

// Dense / grouped grad-input as forward convolutions on the tensor-core kernel, one per output phase
// rho = i mod S (no zero-stuffing). For inputs i = m*S + rho,
//   dx[b, ci, i] = sum over taps k with (rho + P - k*D) divisible by S of w[co, ci, k] * dy[b, co, m + (rho + P - k*D)/S].
// Those taps are k0, k0 + S', ... (S' = S / gcd(S, D)) and their dy offsets fall by D' = D / gcd(S, D)
// per tap, so phase rho is a forward convolution of dy with the per-group transposed weight at those
// taps in reverse order (dilation D', stride 1, left padding -offset of the last tap), written to
// dx[..., rho::S]. Stride 1 is one phase: the transposed, K-flipped weight with padding (K-1)*D - P.
// A phase with no tap is zero. The dy pointer moves right instead of a negative padding.
struct GradInputPhase {
  int64_t rho;
  std::vector<int64_t> taps;  // weight taps in the order of the phase's kernel
  int64_t dil, pad, shift, len;  // dilation, left padding, dy elements skipped, outputs m
};

// The dy offset (from output m of phase rho) that weight tap k of phase rho reads; exact for a tap of
// that phase, (rho + P - k*D) % S == 0.
int64_t phase_tap_offset(const Conv1dParams& p, int64_t rho, int64_t k) {
  return (rho + p.pad_left - k * p.dilation) / p.stride;
}

std::vector<GradInputPhase> grad_input_phases(const Conv1dParams& p) {
  std::vector<GradInputPhase> out;
  const int64_t S = p.stride, D = p.dilation, P = p.pad_left, K = p.kernel_size;
  int64_t g = S, h = D;
  while (h != 0) { const int64_t t = g % h; g = h; h = t; }
  for (int64_t rho = 0; rho < S && rho < p.in_length; ++rho) {
    GradInputPhase ph{rho, {}, D / g, 0, 0, (p.in_length - rho + S - 1) / S};
    for (int64_t k = K - 1; k >= 0; --k)
      if (((rho + P - k * D) % S + S) % S == 0) ph.taps.push_back(k);
    if (!ph.taps.empty()) {
      const int64_t first = phase_tap_offset(p, rho, ph.taps.front());  // kernel tap 0 (weight tap k_last)
      ph.pad = first < 0 ? -first : 0;
      ph.shift = first > 0 ? first : 0;
    }
    out.push_back(std::move(ph));
  }
  return out;
}

// The transposed problem of one phase (pointers not set).
Conv1dParams grad_input_phase_params(const Conv1dParams& p, const GradInputPhase& ph) {
  Conv1dParams q = p;
  q.in_channels = p.out_channels;
  q.out_channels = p.in_channels;
  q.in_length = p.out_length - ph.shift;
  q.out_length = ph.len;
  q.kernel_size = static_cast<int64_t>(ph.taps.size());
  q.stride = 1;
  q.dilation = ph.dil;
  q.pad_left = ph.pad;
  q.bias = nullptr;
  q.activation = kActNone;
  return q;
}

// The dense forward kernel every phase of p's grad-input (`phases` = grad_input_phases(p)) can run
// on, or {nullptr, ""} (generic).
Choice dense_grad_input(const Conv1dParams& p, const std::vector<GradInputPhase>& phases) {
  // Phases differ in their number of taps, so the narrow_out kernel's reduction limit may take some of
  // them and not others: then all of them go to the kernels without it.
  for (const bool narrow_out : {true, false}) {
    Choice c{nullptr, ""};
    bool same = true;
    for (const GradInputPhase& ph : phases) {
      if (ph.taps.empty()) continue;
      const Conv1dParams q = grad_input_phase_params(p, ph);
      if (q.in_length < 1) return {nullptr, ""};
      const Choice k = choose_dense_forward(q, "conv1d_bwd_input", narrow_out);
      if (k.launch == nullptr) return {nullptr, ""};
      if (c.launch != nullptr && k.launch != c.launch) {
        same = false;
        break;
      }
      c = k;
    }
    if (same) return c;
  }
  return {nullptr, ""};
}

// The dense grad-input on the TMA forward, or {nullptr, ""}: dy copied once into channels-last memory (at most
// kGradInputCopyBytes), then every phase with taps on conv1d_fwd_dense_tma, where the forward's own rule would
// copy dy for each phase alone (dense_tma_forward on the phase with dy as it is, (B, C, L): Cout/groups * K' >=
// 384, the kernel's conditions on the channels-last copy or its transposing form; CONVKIT_DENSE_TMA_TX=1 widens
// this to every phase that form takes). One copy serves all S phases.
// At stride 1 (one phase) the forward may read dy as it lies instead (its transposing form, session 37: x rows of
// whole 16-byte units): then no copy (kTxGradInputName; p.y is dy, or kFreshPointer with dy's strides in explain).
constexpr int64_t kGradInputCopyBytes = int64_t{1} << 30;
const char* const kTmaGradInputName = "x_to_channels_last + conv1d_bwd_input_dense_tma";
const char* const kTxGradInputName = "conv1d_bwd_input_dense_tma_tx";
Choice dense_grad_input_tma(const Conv1dParams& p, const std::vector<GradInputPhase>& phases) {
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) return {nullptr, ""};
  if (p.batch * p.out_channels * p.out_length * 2 > kGradInputCopyBytes || p.out_channels % 16 != 0) return {nullptr, ""};
  if (p.stride == 1 && phases.size() == 1 && !phases[0].taps.empty()) {
    Conv1dParams q = grad_input_phase_params(p, phases[0]);
    q.x = static_cast<char*>(p.y) + phases[0].shift * p.y_stride_l * 2;
    q.x_stride_b = p.y_stride_b;
    q.x_stride_c = p.y_stride_c;
    q.x_stride_l = p.y_stride_l;
    if (q.in_length >= 1 && dense_tma_forward_allowed(q) && conv1d_fwd_dense_tma_form(q) == 2)
      return {&launch_conv1d_fwd_dense_tma, kTxGradInputName, false, &conv1d_fwd_dense_tma_workspace_bytes};
  }
  bool any = false;
  for (const GradInputPhase& ph : phases) {
    if (ph.taps.empty()) continue;
    Conv1dParams q = grad_input_phase_params(p, ph);
    if (q.in_length < 1) return {nullptr, ""};
    q.x = kFreshPointer;  // dy, (B, C, L) contiguous
    q.x_stride_b = p.out_channels * p.out_length;
    q.x_stride_c = p.out_length;
    q.x_stride_l = 1;
    if (!dense_tma_forward(q)) return {nullptr, ""};
    any = true;
  }
  if (!any) return {nullptr, ""};
  return {&launch_conv1d_fwd_dense_tma, kTmaGradInputName, false, &conv1d_fwd_dense_tma_workspace_bytes};
}

// The dense grad-input of stride 2..4 in one pass (kernels/conv1d_bwd_input_dense_tma.cu, session 23): every
// stride phase of a tile in one block, dy (copied into channels-last memory unless it is) read once, dx written
// in place; instead of one forward per phase plus the interleave. Cin/groups >= 32 (its tiles are 64 input
// channels high). CONVKIT_GI_FUSED=0 (or CONVKIT_DENSE_TMA=0, CONVKIT_DENSE_WGMMA=0) switches it off.
// Stride 1 too (one phase, session 35), by default where Cin/groups <= 64 (its 64-row tiles): H100, bf16, CUDA graphs
// (session 36), kb67 fwd+bwd 4.83 -> 4.42 ms; tcn (Cin 256, 128-row tiles) 1.19 -> 1.21, so not there.
// CONVKIT_GI_FUSED_S1=1: every stride-1 shape the kernel takes; =0: no stride-1 shape.
const char* const kFusedGradInputName = "conv1d_bwd_input_dense_tma_fused";
bool dense_grad_input_fused(const Conv1dParams& p) {
  static const bool on = !env_equals("CONVKIT_GI_FUSED", "0") && !env_equals("CONVKIT_DENSE_TMA", "0") &&
                         !env_equals("CONVKIT_DENSE_WGMMA", "0");
  static const bool stride1_all = env_equals("CONVKIT_GI_FUSED_S1", "1");
  static const bool stride1_none = env_equals("CONVKIT_GI_FUSED_S1", "0");
  if (p.stride == 1 && (stride1_none || (!stride1_all && p.in_channels / p.groups > 64))) return false;
  return on && !is_depthwise(p) && forced() != Force::kAllGeneric && p.in_channels / p.groups >= 32 &&
         conv1d_bwd_input_dense_tma_supports(p);
}

// The dense grad-input's kernel: the one-pass kernel (dense_grad_input_fused), else the TMA forward phase by phase
// on a channels-last copy of dy where it applies, else the kernel every phase can run on (dense_grad_input), or
// {nullptr, ""} (generic).
Choice choose_dense_grad_input(const Conv1dParams& p, const std::vector<GradInputPhase>& phases) {
  if (dense_grad_input_fused(p))
    return {&launch_conv1d_bwd_input_dense_tma, kFusedGradInputName, false, &conv1d_bwd_input_dense_tma_workspace_bytes};
  const Choice tma = dense_grad_input_tma(p, phases);
  return tma.launch != nullptr ? tma : dense_grad_input(p, phases);
}

// dy (any strides) as a (B, C, L) view of a fresh (B, L, C) tensor, copied by convkit's kernel; dy itself when it
// already is one (16-byte aligned).
at::Tensor channels_last_copy(const at::Tensor& dy) {
  if (dy.stride(1) == 1 && dy.stride(2) == dy.size(1) && dy.stride(0) == dy.size(1) * dy.size(2) &&
      (reinterpret_cast<uintptr_t>(dy.data_ptr()) & 15) == 0)
    return dy;
  at::Tensor out = at::empty({dy.size(0), dy.size(2), dy.size(1)}, dy.options());
  check_launch(launch_x_to_channels_last(dy.data_ptr(), dy.size(0), dy.stride(0), dy.stride(1), dy.stride(2),
                                         dy.size(1), dy.size(2), out.data_ptr(), current_stream()),
               "x_to_channels_last");
  return out.transpose(1, 2);
}

// w (Cout, Cin/G, K) -> wt (Cin, Cout/G, n) with wt[g*Cin_g + ci, co, t] = w[g*Cout_g + co, ci, taps[t]].
// taps descend in equal steps (grad_input_phases), so this is a strided slice and a flip: device work
// only, no host-to-device copy (which would synchronise). `tap_major`: wt is a view of a fresh
// (Cin, n, Cout/G) tensor (wants_tap_major_weight); otherwise contiguous.
at::Tensor transposed_weight(const at::Tensor& w, int64_t groups, const std::vector<int64_t>& taps, bool tap_major) {
  const int64_t cout_g = w.size(0) / groups, cin_g = w.size(1), n = static_cast<int64_t>(taps.size());
  const int64_t step = n > 1 ? taps[0] - taps[1] : 1;
  const at::Tensor sel = w.slice(2, taps.back(), taps.front() + 1, step).flip({2});
  const at::Tensor g4 = sel.reshape({groups, cout_g, cin_g, n});
  if (tap_major) {
    const at::Tensor v = g4.permute({0, 2, 3, 1});  // (G, Cin_g, n, Cout_g)
    return at::empty(v.sizes(), w.options()).copy_(v).reshape({groups * cin_g, n, cout_g}).transpose(1, 2);
  }
  return g4.transpose(1, 2).reshape({groups * cin_g, cout_g, n}).contiguous();
}

// CONVKIT_GI_UNIFIED=1 (an experiment, read once; measured slower on the H200 in session 11: kb76 bf16
// fwd+bwd 35.5 -> 37.9 ms, w2v_k3s2 39.9 -> 40.6, so off by default): the dense grad-input at stride
// S > 1 as ONE forward convolution of dy instead of one per phase. Phase rho's tap k reads dy at offset
// o = (rho + P - k*D) / S from its output m (see grad_input_phases); with o_min / o_max over all phases'
// taps, output channel rho * Cin + ci of a convolution with K' = o_max - o_min + 1 taps (dilation 1,
// stride 1) and weight W'[rho * Cin + ci, co, o - o_min] = w[co, ci, k] (zero where a phase has no tap)
// computes every phase: dy is read once instead of S times, for K' / (taps per phase) times the MMAs
// (kb76: S 3, D 4: offsets 0, -1, -2, one tap per phase, K' 3). Its output (B, S * Cin, lq) is the
// (B, S, Cin, lq) phase buffer the interleave reads. Only groups == 1, only where the same kernel as
// the phases runs it, K' <= 8 and at most 3x the phases' MMAs (S * K' against their taps in all).
// Where the phases run the narrow_out kernel (few input channels: wav2vec2's first layer, Cin 1 at stride 5), the
// unified form is the default (session 38): each phase there reads all of dy for a few FMAs per element, so S
// passes over dy become one; S * Cin up to 8 (narrow_out8). CONVKIT_GI_UNIFIED=0 turns that off too.
// `narrow`: the phases run the narrow_out kernel.
bool gi_unified(bool narrow) {
  static const bool on = env_equals("CONVKIT_GI_UNIFIED", "1");
  static const bool off = env_equals("CONVKIT_GI_UNIFIED", "0");
  return on || (narrow && !off);
}

struct UnifiedGradInput {
  LaunchFn launch = nullptr;  // nullptr: the phases run one by one
  int64_t o_min = 0, taps = 0, shift = 0, pad = 0;
};

Conv1dParams unified_grad_input_params(const Conv1dParams& p, const UnifiedGradInput& u, int64_t lq) {
  Conv1dParams q = p;
  q.in_channels = p.out_channels;
  q.out_channels = p.stride * p.in_channels;
  q.groups = 1;
  q.in_length = p.out_length - u.shift;
  q.out_length = lq;
  q.kernel_size = u.taps;
  q.stride = 1;
  q.dilation = 1;
  q.pad_left = u.pad;
  q.bias = nullptr;
  q.activation = kActNone;
  return q;
}

UnifiedGradInput unified_grad_input(const Conv1dParams& p, const std::vector<GradInputPhase>& phases,
                                    const Choice& gi, int64_t lq) {
  UnifiedGradInput u;
  const bool narrow = gi.launch == &launch_conv1d_fwd_dense_narrow_out;
  if (p.stride < 2 || p.groups != 1 || !gi_unified(narrow)) return u;
  int64_t o_min = 0, o_max = 0, n_taps = 0;
  bool any = false;
  for (const GradInputPhase& ph : phases) {
    n_taps += static_cast<int64_t>(ph.taps.size());
    for (const int64_t k : ph.taps) {
      const int64_t o = phase_tap_offset(p, ph.rho, k);
      o_min = any ? std::min(o_min, o) : o;
      o_max = any ? std::max(o_max, o) : o;
      any = true;
    }
  }
  if (!any) return u;
  const int64_t taps = o_max - o_min + 1;
  if (taps > 8 || p.stride * taps > 3 * n_taps) return u;
  UnifiedGradInput c;
  c.o_min = o_min;
  c.taps = taps;
  c.shift = o_min > 0 ? o_min : 0;
  c.pad = o_min < 0 ? -o_min : 0;
  if (p.out_length - c.shift < 1) return u;
  if (narrow) {
    const Conv1dParams uq = unified_grad_input_params(p, c, lq);
    c.launch = conv1d_fwd_dense_narrow_out_supports(uq)    ? &launch_conv1d_fwd_dense_narrow_out
               : conv1d_fwd_dense_narrow_out8_supports(uq) ? &launch_conv1d_fwd_dense_narrow_out8
                                                           : nullptr;
    return c.launch != nullptr ? c : u;
  }
  const Choice k = choose_dense_forward(unified_grad_input_params(p, c, lq), "conv1d_bwd_input", false);
  if (k.launch == nullptr || k.launch != gi.launch) return u;
  c.launch = k.launch;
  return c;
}

// W' of unified_grad_input: (S * Cin, Cout, K'), tap-major storage when the kernel stages weights.
at::Tensor unified_weight(const at::Tensor& w, const Conv1dParams& p, const std::vector<GradInputPhase>& phases,
                          const UnifiedGradInput& u, bool tap_major) {
  const int64_t cout = w.size(0), cin = w.size(1);
  at::Tensor wt = at::zeros({p.stride * cin, cout, u.taps}, w.options());
  for (const GradInputPhase& ph : phases)
    for (const int64_t k : ph.taps) {
      wt.narrow(0, ph.rho * cin, cin).select(2, phase_tap_offset(p, ph.rho, k) - u.o_min).copy_(w.select(2, k).t());
    }
  return tap_major ? tap_major_weight(wt) : wt;
}

// Dense / grouped grad-weight (and grad-bias with it): tensor cores for fp16/bf16 (wgmma on Hopper where it
// applies, else mma.sync), the fp32 tile kernel
// (TF32 or IEEE, as the forward) for fp32; launch == nullptr: the generic kernel.
struct WeightGradChoice {
  LaunchFn launch;
  int64_t (*plan)(Conv1dParams&);
  std::string name;
};
// fp32 calls with one input channel per group and a channel multiplier of 8 or more (w2v_first_k10s5: Cin 1,
// Cout 512) take the fp32 tile grad-weight (TF32 / IEEE) instead of the generic kernel, which dense_grad_weight
// otherwise leaves every depthwise (groups == Cin) fp32 call to. Measured (session 21): w2v_first fp32 (TF32)
// fwd+bwd 16.49 ms with the generic grad-weight, 8.40 with the tile kernel on an H100 (torch 5.85 in the same
// processes); on the H200 8.40 (TF32) and 9.84 (IEEE) against 16.55 / 16.57 in session 14 (torch 5.70).
// CONVKIT_F32_WGRAD_DENSE_LIKE=0 (read once) gives such calls the generic kernel again.
bool f32_wgrad_dense_like() {
  static const bool on = !env_equals("CONVKIT_F32_WGRAD_DENSE_LIKE", "0");
  return on;
}

const char* const kTapRowsGradWeightName = "tap_rows + conv1d_bwd_weight_dense_tma";

WeightGradChoice dense_grad_weight(const Conv1dParams& p) {
  if ((is_depthwise(p) && !dense_like_depthwise(p)) || forced() == Force::kAllGeneric)
    return {nullptr, nullptr, ""};
  if (conv1d_bwd_weight_dense_tma_supports(p))  // rows by TMA (CONVKIT_DENSE_TMA_WGRAD=0: off), copied where needed
    return {&launch_conv1d_bwd_weight_dense_tma, &plan_conv1d_bwd_weight_dense_tma,
            conv1d_bwd_weight_dense_tma_taps(p) ? kTapRowsGradWeightName : "conv1d_bwd_weight_dense_tma"};
  if (conv1d_bwd_weight_dense_wgmma_supports(p))  // Hopper, sm_90a builds (CONVKIT_DENSE_WGMMA=0: off)
    return {&launch_conv1d_bwd_weight_dense_wgmma, &plan_conv1d_bwd_weight_dense_wgmma, "conv1d_bwd_weight_dense_wgmma"};
  if (conv1d_bwd_weight_dense_mma_supports(p))
    return {&launch_conv1d_bwd_weight_dense_mma, &plan_conv1d_bwd_weight_dense_mma, "conv1d_bwd_weight_dense_mma"};
  // (only dense-like depthwise calls get this far: the first test above)
  if (conv1d_bwd_weight_dense_f32_supports(p) && (!is_depthwise(p) || f32_wgrad_dense_like())) {
    if (allow_tf32())
      return {&launch_conv1d_bwd_weight_dense_tf32, &plan_conv1d_bwd_weight_dense_tf32, "conv1d_bwd_weight_dense_tf32"};
    return {&launch_conv1d_bwd_weight_dense_f32, &plan_conv1d_bwd_weight_dense_f32, "conv1d_bwd_weight_dense_f32"};
  }
  return {nullptr, nullptr, ""};
}

// The fused depthwise backward, or {nullptr, ...} when the call needs the generic backward kernels.
Choice choose_backward(const Conv1dParams& p) {
  const Force f = forced();
  const bool eligible = is_depthwise(p) && p.out_channels == p.in_channels && f != Force::kAllGeneric &&
                        depthwise_bwd_smem_bytes(p) <= smem_optin_limit();
  if (eligible) {
    const SpecEntry* e = f == Force::kNone ? find_spec("depthwise", p) : nullptr;
    if (e != nullptr) return {e->backward[static_cast<int>(p.dtype)], spec_name("conv1d_bwd_depthwise", *e), true};
    if (p.kernel_size <= kDepthwiseBwdMaxRuntimeK)
      return {kDepthwiseGenericEntry.backward[static_cast<int>(p.dtype)], "conv1d_bwd_depthwise_generic"};
  }
  return {nullptr, ""};
}

void check_shapes(const at::Tensor& x, const at::Tensor& w, int64_t groups) {
  TORCH_CHECK(x.dim() == 3, "convkit: input must be 3-D (B, C, L), got ", x.dim(), "-D");
  TORCH_CHECK(w.dim() == 3, "convkit: weight must be 3-D (Cout, Cin/groups, K), got ", w.dim(), "-D");
  TORCH_CHECK(groups >= 1 && x.size(1) == w.size(1) * groups, "convkit: input has ", x.size(1),
              " channels, weight expects ", w.size(1) * groups);
  TORCH_CHECK(w.size(2) >= 1, "convkit: kernel size must be >= 1");
}

void check_activation(int64_t activation) {
  TORCH_CHECK(activation >= kActNone && activation <= kActGELU, "convkit: unknown activation code ", activation);
}

// Checks the tensors of a call and returns its params (pointers of x, w, bias set).
Conv1dParams prepare(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias, int64_t stride,
                     int64_t pl, int64_t pr, int64_t dilation, int64_t groups, int64_t activation) {
  TORCH_CHECK(x.is_cuda(), "convkit: input must be a CUDA tensor");
  check_param_dtype(w, "weight", x);
  check_shapes(x, w, groups);
  check_activation(activation);
  Conv1dParams p = make_params(x.size(0), x.size(1), w.size(0), x.size(2), w.size(2), stride, pl, pr, dilation,
                               groups, x);
  p.w_dtype = dtype_of(w);
  if (bias.has_value()) {
    check_cuda(*bias, "bias", w);
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == p.out_channels, "convkit: bias must have shape (",
                p.out_channels, ",)");
    TORCH_CHECK(bias->stride(0) == 1, "convkit: bias must be contiguous");
  }
  set_x(p, x);
  set_w(p, w);
  p.bias = bias.has_value() ? bias->data_ptr() : nullptr;
  p.activation = static_cast<int>(activation);
  return p;
}

c10::optional<at::Tensor> contiguous_bias(const c10::optional<at::Tensor>& bias) {
  if (!bias.has_value()) return bias;
  return bias->contiguous();
}

}  // namespace

at::Tensor conv1d_forward(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias_in,
                          int64_t stride, int64_t pl, int64_t pr, int64_t dilation, int64_t groups,
                          int64_t activation) {
  c10::cuda::CUDAGuard guard(x.device());
  const c10::optional<at::Tensor> bias = contiguous_bias(bias_in);
  Conv1dParams p = prepare(x, w, bias, stride, pl, pr, dilation, groups, activation);
  at::Tensor y =
      new_bcl_output(p.batch, p.out_channels, p.out_length, x.options(), channels_last_depthwise(x, w, groups));
  if (y.numel() == 0) return y;
  set_y(p, y);
  const Choice c = choose_forward(p);
  at::Tensor wt;  // kept alive until the launch is queued (the allocator orders its reuse on the stream)
  if (wants_tap_major_weight(c, p)) {
    wt = tap_major_weight(w);
    set_w(p, wt);
  }
  launch_choice(c, p, x.options());
  return y;
}

namespace {

// dy * activation'(z) for a fused activation (not kActNone), by torch's elementwise backward ops (they keep
// dy's layout).
at::Tensor activation_backward(const at::Tensor& dy, const at::Tensor& z, int64_t activation) {
  if (activation == kActReLU) return at::threshold_backward(dy, z, 0);
  if (activation == kActSiLU) return at::silu_backward(dy, z);
  return at::gelu_backward(dy, z, "none");
}

// dy * activation'(z), z = conv(x) + bias recomputed by convkit's forward kernel.
at::Tensor undo_activation(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& w,
                           const c10::optional<at::Tensor>& bias, int64_t stride, int64_t pl, int64_t pr,
                           int64_t dilation, int64_t groups, int64_t activation) {
  return activation_backward(dy, conv1d_forward(x, w, bias, stride, pl, pr, dilation, groups, kActNone), activation);
}

}  // namespace

// Returns (grad_input, grad_weight, grad_bias); a gradient not asked for is an empty tensor.
std::tuple<at::Tensor, at::Tensor, at::Tensor> conv1d_backward(
    const at::Tensor& dy_in, const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias_in,
    int64_t stride, int64_t pl, int64_t pr, int64_t dilation, int64_t groups, int64_t activation, bool need_input,
    bool need_weight, bool need_bias) {
  c10::cuda::CUDAGuard guard(x.device());
  const c10::optional<at::Tensor> bias = contiguous_bias(bias_in);
  Conv1dParams p = prepare(x, w, bias, stride, pl, pr, dilation, groups, activation);
  check_cuda(dy_in, "grad_output", x);
  TORCH_CHECK(dy_in.dim() == 3 && dy_in.size(0) == p.batch && dy_in.size(1) == p.out_channels &&
                  dy_in.size(2) == p.out_length,
              "convkit: grad_output has shape ", dy_in.sizes(), ", expected (", p.batch, ", ", p.out_channels, ", ",
              p.out_length, ")");
  need_bias = need_bias && bias.has_value();
  const auto opts = x.options();
  const bool cl = channels_last_depthwise(x, w, groups);
  at::Tensor dx = need_input ? new_bcl_output(p.batch, p.in_channels, p.in_length, opts, cl) : at::empty({0}, opts);
  const auto wopts = w.options();
  at::Tensor dw = need_weight ? new_output({p.out_channels, p.in_channels / groups, p.kernel_size}, wopts)
                              : at::empty({0}, wopts);
  at::Tensor db = need_bias ? new_output({p.out_channels}, wopts) : at::empty({0}, wopts);
  if (!need_input && !need_weight && !need_bias) return {dx, dw, db};
  const auto acc_dtype = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;

  if (cl && forced() != Force::kAllGeneric) {
    // dy in the (B, L, C) layout, times activation'(z) when the forward fused one (z recomputed by the
    // channels-last forward), then the channels-last grad-input and grad-weight kernels. Whether they
    // run is decided first, with dy where it will be: dy_in itself, or a fresh (B, L, C) tensor when an
    // activation is undone or dy_in has another layout (so no work is done for a fallthrough).
    const int64_t C = p.out_channels;
    const bool blc_in = dy_in.stride(1) == 1 && dy_in.stride(2) == C;
    const bool fresh = activation != kActNone || !blc_in;
    const int64_t fresh_strides[3] = {p.out_length * C, 1, C};
    const int64_t in_strides[3] = {dy_in.stride(0), dy_in.stride(1), dy_in.stride(2)};
    const ChannelsLastBackward plan =
        channels_last_backward(p, w, fresh ? kFreshPointer : dy_in.data_ptr(), fresh ? fresh_strides : in_strides,
                               kFreshPointer, need_input, need_weight || need_bias);
    if (plan.ok) {
      at::Tensor dy = dy_in;
      if (activation != kActNone) dy = undo_activation(dy_in, x, w, bias, stride, pl, pr, dilation, groups, activation);
      if (fresh && !(dy.stride(0) == fresh_strides[0] && dy.stride(1) == 1 && dy.stride(2) == C)) {
        // exactly the planned (B, L, C) strides (a (B, C, 1) dy is "contiguous" in both layouts, so
        // .contiguous() would keep it as it is)
        dy = at::empty({p.batch, p.out_length, C}, dy.options()).transpose(1, 2).copy_(dy);
      }
      const int64_t dys[3] = {dy.stride(0), dy.stride(1), dy.stride(2)};
      ChannelsLastBackward run = channels_last_backward(p, w, dy.data_ptr(), dys,
                                                        need_input ? dx.data_ptr() : kFreshPointer, need_input,
                                                        need_weight || need_bias);
      if (run.ok) {  // as planned, unless an allocation is less aligned than the plan assumed
        if (need_input)
          check_launch(launch_conv1d_fwd_depthwise_channels_last(run.gi, current_stream()),
                       "conv1d_bwd_input_depthwise_channels_last");
        if (need_weight || need_bias) {
          Conv1dParams& gw = run.gw;
          gw.grad_w = need_weight ? dw.data_ptr() : nullptr;
          gw.grad_bias = need_bias ? db.data_ptr() : nullptr;
          gw.bias = gw.grad_bias;  // the kernel sums dy for grad-bias when this is set
          at::Tensor ws = at::empty({plan_conv1d_bwd_weight_depthwise_channels_last(gw)}, opts.dtype(at::kFloat));
          gw.workspace = ws.data_ptr();
          check_launch(launch_conv1d_bwd_weight_depthwise_channels_last(gw, current_stream()),
                       "conv1d_bwd_weight_depthwise_channels_last");
        }
        return {dx, dw, db};
      }
    }
  }

  const Choice fused = choose_backward(p);
  if (fused.launch != nullptr) {
    set_y(p, dy_in);
    p.grad_x = need_input ? dx.data_ptr() : nullptr;
    if (need_input) {
      p.gx_stride_b = dx.stride(0);
      p.gx_stride_c = dx.stride(1);
      p.gx_stride_l = dx.stride(2);
    }
    p.grad_w = need_weight ? dw.data_ptr() : nullptr;
    p.grad_bias = need_bias ? db.data_ptr() : nullptr;
    at::Tensor ws = at::empty({plan_depthwise_bwd(p, fused.specialised)}, opts.dtype(acc_dtype));
    p.workspace = ws.data_ptr();
    check_launch(fused.launch(p, current_stream()), fused.name);
    return {dx, dw, db};
  }

  // Generic path. A fused activation is undone first: dy * act'(z), with z = conv(x) + bias
  // recomputed by convkit's forward kernel.
  const at::Tensor dy = activation == kActNone
                           ? dy_in
                           : undo_activation(dy_in, x, w, bias, stride, pl, pr, dilation, groups, activation);
  set_y(p, dy);
  const std::vector<GradInputPhase> phases = need_input ? grad_input_phases(p) : std::vector<GradInputPhase>{};
  const Choice gi = need_input ? choose_dense_grad_input(p, phases) : Choice{nullptr, ""};
  const bool gi_tma = gi.launch == &launch_conv1d_fwd_dense_tma;
  const at::Tensor dy_gi = gi.name == kTmaGradInputName ? channels_last_copy(dy) : dy;  // what the phases read
  if (gi.launch == &launch_conv1d_bwd_input_dense_tma) {  // every phase in one pass, dx written in place
    Conv1dParams q = p;
    q.grad_x = dx.data_ptr();
    q.gx_stride_b = dx.stride(0);
    q.gx_stride_c = dx.stride(1);
    q.gx_stride_l = dx.stride(2);
    launch_choice(gi, q, opts);
  } else if (gi.launch != nullptr) {
    // At stride S > 1 each phase would write dx[..., rho::S]: every S-th element, with 2-byte stores,
    // and S kernels each touching every sector of dx. The phases write whole rows of a
    // (S, B, Cin, ceil(Lin / S)) buffer instead, and one copy interleaves them (session 7, kb76 bf16
    // fwd+bwd 60.8 -> 47.6 ms); CONVKIT_GI_PHASE_BUFFER=0 writes dx directly.
    const bool buffered = p.stride > 1 && gi_phase_buffer();
    const int64_t lq = (p.in_length + p.stride - 1) / p.stride;
    // phases4: the phase outputs as a (B, S, Cin, lq) view, to be interleaved into dx
    at::Tensor phases4;
    const UnifiedGradInput u = buffered && !gi_tma ? unified_grad_input(p, phases, gi, lq) : UnifiedGradInput{};
    if (u.launch != nullptr) {
      Conv1dParams q = unified_grad_input_params(p, u, lq);
      set_x_shifted(q, dy, u.shift);
      const at::Tensor wt = unified_weight(w, p, phases, u, wants_tap_major_weight(gi, q));
      set_w(q, wt);
      const at::Tensor ubuf = new_output({p.batch, p.stride * p.in_channels, lq}, dx.options());
      set_y(q, ubuf);
      launch_choice(Choice{u.launch, gi.name, false, gi.workspace_bytes}, q, opts);
      phases4 = ubuf.view({p.batch, p.stride, p.in_channels, lq});
    } else {
      // rows padded to 16 bytes: the phase kernels' epilogues store whole 16-byte vectors only into aligned rows
      // (H100, session 26: kb76's TF32 grad-input phases 11.19 -> 10.6 ms each)
      const int64_t lq_pad = (lq * dx.element_size() + 15) / 16 * 16 / dx.element_size();
      const at::Tensor buf =
          buffered ? new_output({p.stride, p.batch, p.in_channels, lq_pad}, dx.options()).narrow(3, 0, lq) : at::Tensor();
      for (const GradInputPhase& ph : phases) {
        at::Tensor dx_phase = buffered ? buf[ph.rho].narrow(2, 0, ph.len) : dx.slice(2, ph.rho, p.in_length, p.stride);
        if (ph.taps.empty()) {
          dx_phase.zero_();
          continue;
        }
        Conv1dParams q = grad_input_phase_params(p, ph);
        set_x_shifted(q, dy_gi, ph.shift);
        const bool tap_major = wants_tap_major_weight(gi, q);
        const at::Tensor wt = transposed_weight(w, groups, ph.taps, tap_major);
        set_w(q, wt);
        set_y(q, dx_phase);
        launch_choice(gi, q, opts);
      }
      if (buffered) phases4 = buf.permute({1, 0, 2, 3});
    }
    if (buffered && gi_interleave_kernel()) {
      const InterleaveParams iq{p.batch,           p.in_channels,     p.in_length,       lq,
                                phases4.stride(0), phases4.stride(1), phases4.stride(2), dx.stride(0),
                                dx.stride(1),      dx.stride(2),      static_cast<int>(p.stride), p.num_sms};
      check_launch(launch_interleave_phases(phases4.data_ptr(), dx.data_ptr(), iq,
                                            static_cast<int>(dx.element_size()), current_stream()),
                   "conv1d_bwd_input_interleave");
    } else if (buffered) {  // dx[b, c, m*S + rho] = phases4[b, rho, c, m]
      const at::Tensor inter = phases4.permute({0, 2, 3, 1});
      if (dx.is_contiguous() && p.in_length == lq * p.stride) {
        dx.view({p.batch, p.in_channels, lq, p.stride}).copy_(inter);
      } else {
        dx.copy_(inter.reshape({p.batch, p.in_channels, lq * p.stride}).narrow(2, 0, p.in_length));
      }
    }
  } else if (need_input) {
    Conv1dParams q = p;
    set_x(q, dx);
    check_launch(launch_conv1d_bwd_input_generic(q, current_stream()), "conv1d_bwd_input_generic");
  }
  if (need_weight || need_bias) {
    Conv1dParams q = p;
    q.w = need_weight ? dw.data_ptr() : nullptr;
    q.bias = need_bias ? db.data_ptr() : nullptr;
    const WeightGradChoice gw = need_weight ? dense_grad_weight(p) : WeightGradChoice{nullptr, nullptr, ""};
    if (gw.launch != nullptr) {
      // (the TMA grad-weight writes every partial sum and, on tap rows, reads only copies it wrote: poisoned in tests)
      const int64_t n = gw.plan(q);
      at::Tensor ws = gw.launch == &launch_conv1d_bwd_weight_dense_tma ? new_output({n}, opts.dtype(at::kFloat))
                                                                        : at::empty({n}, opts.dtype(at::kFloat));
      q.workspace = ws.data_ptr();
      check_launch(gw.launch(q, current_stream()), gw.name);
    } else {
      at::Tensor ws = at::empty({plan_conv1d_bwd_weight(q, need_bias)}, opts.dtype(acc_dtype));
      q.workspace = ws.data_ptr();
      check_launch(launch_conv1d_bwd_weight_generic(q, current_stream()), "conv1d_bwd_weight_generic");
    }
  }
  return {dx, dw, db};
}

// Which kernels a call with these arguments would run (for convkit.explain).
std::vector<std::string> explain(const at::Tensor& x, const at::Tensor& w, int64_t stride, int64_t pl, int64_t pr,
                                 int64_t dilation, int64_t groups) {
  c10::cuda::CUDAGuard guard(x.device());
  Conv1dParams p = prepare(x, w, c10::nullopt, stride, pl, pr, dilation, groups, kActNone);
  // The forward's output layout, without allocating it (the pointer is never dereferenced here).
  const bool cl = channels_last_depthwise(x, w, groups);
  if (cl) {
    p.y_stride_b = p.out_length * p.out_channels;
    p.y_stride_c = 1;
    p.y_stride_l = p.out_channels;
  } else {
    p.y_stride_b = p.out_channels * p.out_length;
    p.y_stride_c = p.out_length;
    p.y_stride_l = 1;
  }
  p.y = kFreshPointer;
  if (cl && forced() != Force::kAllGeneric) {
    // the backward as conv1d_backward runs it for a dy in the output's layout (B, L, C) and dx in x's
    const int64_t dys[3] = {p.y_stride_b, p.y_stride_c, p.y_stride_l};
    if (channels_last_backward(p, w, kFreshPointer, dys, kFreshPointer, true, true).ok)
      return {choose_forward(p).name, "conv1d_bwd_input_depthwise_channels_last",
              "conv1d_bwd_weight_depthwise_channels_last"};
  }
  const Choice b = choose_backward(p);
  if (b.launch != nullptr) return {choose_forward(p).name, b.name, b.name};
  const Choice gi = choose_dense_grad_input(p, grad_input_phases(p));
  const WeightGradChoice gw = dense_grad_weight(p);
  return {choose_forward(p).name, gi.launch != nullptr ? gi.name : "conv1d_bwd_input_generic",
          gw.launch != nullptr ? gw.name : "conv1d_bwd_weight_generic"};
}

// ---- convkit.causal_conv1d with seq_idx, convkit.causal_conv1d_update (issue 6) -------------------------
// python/convkit/causal.py validates and routes: a causal call without seq_idx runs on conv1d_forward's
// depthwise kernels and never comes here.
namespace {

void check_int32(const at::Tensor& t, const char* name, const at::Tensor& x, at::IntArrayRef shape) {
  check_device(t, name, x);
  TORCH_CHECK(t.scalar_type() == at::kInt, "convkit: ", name, " must be int32, got ", t.scalar_type());
  TORCH_CHECK(t.sizes() == shape, "convkit: ", name, " must have shape ", shape, ", got ", t.sizes());
}

// A (B, C, L)-shaped tensor's data pointer and element strides into CausalParams fields.
template <typename Ptr>
void bind(const at::Tensor& t, Ptr& ptr, int64_t& sb, int64_t& sc, int64_t& sl) {
  ptr = static_cast<Ptr>(t.data_ptr());
  sb = t.stride(0);
  sc = t.stride(1);
  sl = t.stride(2);
}

// x (B, C, L) and w (C, K): the params every causal launch shares (x, w, bias, sizes).
CausalParams causal_params(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias,
                           int64_t dilation, int64_t activation) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 3, "convkit: x must be a 3-D CUDA tensor (B, C, L)");
  check_param_dtype(w, "weight", x);
  TORCH_CHECK(w.dim() == 2 && w.size(0) == x.size(1) && w.size(1) >= 1, "convkit: weight must have shape (",
              x.size(1), ", K), got ", w.sizes());
  TORCH_CHECK(dilation >= 1, "convkit: dilation must be >= 1");
  check_activation(activation);
  CausalParams p{};
  p.batch = x.size(0);
  p.channels = x.size(1);
  p.length = x.size(2);
  p.kernel_size = w.size(1);
  p.dilation = dilation;
  p.halo = (p.kernel_size - 1) * dilation;
  bind(x, p.x, p.x_sb, p.x_sc, p.x_sl);
  p.w = w.data_ptr();
  p.w_sc = w.stride(0);
  p.w_sk = w.stride(1);
  if (bias.has_value()) {
    check_cuda(*bias, "bias", w);
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == p.channels && bias->stride(0) == 1,
                "convkit: bias must be contiguous with shape (", p.channels, ",)");
    p.bias = bias->data_ptr();
  }
  p.dtype = dtype_of(x);
  p.w_dtype = dtype_of(w);
  p.num_sms = sm_count();
  p.activation = static_cast<int>(activation);
  p.c_fastest = x.stride(1) == 1 && p.channels > 1;
  return p;
}

// initial_state (B, C, halo) and seq_idx (B, L) of a causal call.
void set_causal_inputs(CausalParams& p, const at::Tensor& x, const c10::optional<at::Tensor>& state,
                       const c10::optional<at::Tensor>& seq_idx) {
  if (state.has_value()) {
    check_cuda(*state, "initial_state", x);
    TORCH_CHECK(state->dim() == 3 && state->size(0) == p.batch && state->size(1) == p.channels &&
                    state->size(2) == p.halo,
                "convkit: initial_state must have shape (", p.batch, ", ", p.channels, ", ", p.halo, "), got ",
                state->sizes());
    bind(*state, p.state, p.st_sb, p.st_sc, p.st_sl);
  }
  if (seq_idx.has_value()) {
    check_int32(*seq_idx, "seq_idx", x, {p.batch, p.length});
    p.seq_idx = seq_idx->data_ptr<int32_t>();
    p.seq_sb = seq_idx->stride(0);
    p.seq_sl = seq_idx->stride(1);
  }
}

}  // namespace

// y = activation(causal depthwise conv of x (B, C, L) with w (C, K) + bias), reading initial_state
// (B, C, (K-1)*dilation) left of x and masking positions of other sequences (seq_idx (B, L) int32); y in x's
// layout ((B, L, C) memory when x is a channels-last view, else contiguous).
at::Tensor causal_conv1d_forward(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias_in,
                                 const c10::optional<at::Tensor>& initial_state,
                                 const c10::optional<at::Tensor>& seq_idx, int64_t dilation, int64_t activation) {
  c10::cuda::CUDAGuard guard(x.device());
  const c10::optional<at::Tensor> bias = contiguous_bias(bias_in);
  CausalParams p = causal_params(x, w, bias, dilation, activation);
  set_causal_inputs(p, x, initial_state, seq_idx);
  at::Tensor y = new_bcl_output(p.batch, p.channels, p.length, x.options(), is_blc(x));
  if (y.numel() == 0) return y;
  bind(y, p.y, p.y_sb, p.y_sc, p.y_sl);
  check_launch(launch_causal_conv1d_fwd(p, current_stream()), "causal_conv1d_fwd");
  return y;
}

// Returns (grad_x, grad_weight (C, K), grad_bias, grad_initial_state); a gradient not asked for is empty.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> causal_conv1d_backward(
    const at::Tensor& dy, const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias_in,
    const c10::optional<at::Tensor>& initial_state, const c10::optional<at::Tensor>& seq_idx, int64_t dilation,
    int64_t activation, bool need_x, bool need_w, bool need_b, bool need_state) {
  c10::cuda::CUDAGuard guard(x.device());
  const c10::optional<at::Tensor> bias = contiguous_bias(bias_in);
  CausalParams p = causal_params(x, w, bias, dilation, kActNone);
  set_causal_inputs(p, x, initial_state, seq_idx);
  check_cuda(dy, "grad_output", x);
  TORCH_CHECK(dy.sizes() == x.sizes(), "convkit: grad_output must have shape ", x.sizes(), ", got ", dy.sizes());
  check_activation(activation);
  // g = dy * activation'(z), z recomputed by the forward kernel (torch's elementwise backward ops)
  const at::Tensor g = activation == kActNone
                           ? dy
                           : activation_backward(dy, causal_conv1d_forward(x, w, bias, initial_state, seq_idx,
                                                                            dilation, kActNone), activation);
  bind(g, p.y, p.y_sb, p.y_sc, p.y_sl);
  need_b = need_b && bias.has_value();
  need_state = need_state && initial_state.has_value();
  at::Tensor dx = need_x ? new_bcl_output(p.batch, p.channels, p.length, x.options(), is_blc(x)) : x.new_empty({0});
  at::Tensor ds = need_state ? new_output({p.batch, p.channels, p.halo}, x.options()) : x.new_empty({0});
  at::Tensor dw = need_w ? new_output({p.channels, p.kernel_size}, w.options()) : w.new_empty({0});
  at::Tensor db = need_b ? new_output({p.channels}, w.options()) : w.new_empty({0});
  if (need_x) bind(dx, p.grad_x, p.gx_sb, p.gx_sc, p.gx_sl);
  if (need_state && ds.numel() > 0) bind(ds, p.grad_state, p.gs_sb, p.gs_sc, p.gs_sl);
  if (p.batch * p.channels * p.length == 0) {  // no output: zero gradients (dx, if any, has no element)
    for (at::Tensor* t : {&dw, &db, &ds}) t->zero_();
    return {dx, dw, db, ds};
  }
  at::Tensor ws;
  if (need_w || need_b) {
    p.grad_w = need_w ? dw.data_ptr() : nullptr;
    p.grad_bias = need_b ? db.data_ptr() : nullptr;
    const auto acc_dtype = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    ws = at::empty({plan_causal_conv1d_bwd_weight(p)}, x.options().dtype(acc_dtype));
    p.workspace = ws.data_ptr();
  }
  check_launch(launch_causal_conv1d_bwd(p, current_stream()), "causal_conv1d_bwd");
  return {dx, dw, db, ds};
}

// One decode step: x (B, C, T) new tokens, conv_state (rows, C, S) updated in place (S >= (K-1)*dilation; rows
// == B, or any number with state_indices (B,) int32 picking each batch row's cache row); cache_seqlens (B,)
// int32 makes conv_state a circular buffer. Returns y (B, C, T), contiguous. No host synchronisation: safe in
// a CUDA graph.
at::Tensor causal_conv1d_update(const at::Tensor& x, const at::Tensor& conv_state, const at::Tensor& w,
                                const c10::optional<at::Tensor>& bias_in, const c10::optional<at::Tensor>& cache_seqlens,
                                const c10::optional<at::Tensor>& state_indices, int64_t dilation, int64_t activation) {
  c10::cuda::CUDAGuard guard(x.device());
  const c10::optional<at::Tensor> bias = contiguous_bias(bias_in);
  CausalParams p = causal_params(x, w, bias, dilation, activation);
  check_cuda(conv_state, "conv_state", x);
  TORCH_CHECK(conv_state.dim() == 3 && conv_state.size(1) == p.channels && conv_state.size(2) >= p.halo &&
                  conv_state.size(2) >= 1,
              "convkit: conv_state must have shape (rows, ", p.channels, ", S) with S >= ", std::max<int64_t>(p.halo, 1),
              ", got ", conv_state.sizes());
  TORCH_CHECK(state_indices.has_value() || conv_state.size(0) == p.batch, "convkit: conv_state has ",
              conv_state.size(0), " rows for a batch of ", p.batch, " (pass state_indices to pick rows)");
  bind(conv_state, p.state, p.st_sb, p.st_sc, p.st_sl);
  p.state_batch = conv_state.size(0);
  p.state_len = conv_state.size(2);
  if (cache_seqlens.has_value()) {
    check_int32(*cache_seqlens, "cache_seqlens", x, {p.batch});
    p.cache_seqlens = cache_seqlens->data_ptr<int32_t>();
    p.cache_stride = cache_seqlens->stride(0);
  }
  if (state_indices.has_value()) {
    check_int32(*state_indices, "state_indices", x, {p.batch});
    p.state_indices = state_indices->data_ptr<int32_t>();
    p.index_stride = state_indices->stride(0);
  }
  at::Tensor y = new_output({p.batch, p.channels, p.length}, x.options());
  bind(y, p.y, p.y_sb, p.y_sc, p.y_sl);
  if (y.numel() > 0) check_launch(launch_causal_conv1d_update(p, current_stream()), "causal_conv1d_update");
  return y;
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
  // Without the GIL: ATen and CUDA calls only, and host threads (several models, one per thread) then launch at
  // once, as torch's own operators do.
  m.def("conv1d_forward", &convkit::conv1d_forward, pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("conv1d_backward", &convkit::conv1d_backward, pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("explain", &convkit::explain);
  m.def("spec_entries", &convkit::spec_entries);
  m.def("causal_conv1d_forward", &convkit::causal_conv1d_forward);
  m.def("causal_conv1d_backward", &convkit::causal_conv1d_backward);
  m.def("causal_conv1d_update", &convkit::causal_conv1d_update);
  m.attr("cuda_runtime_version") = CUDART_VERSION;
}
