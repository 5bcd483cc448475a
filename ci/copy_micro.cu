// Micro-benchmark of the (B, C, L) -> channels-last copy in front of the dense TMA forward
// (kernels/conv1d_fwd_dense_tma.cu, x_to_channels_last_kernel): the package kernel against tile variants, on the
// suite's shapes, every variant's output compared with the package kernel's bit for bit; device-to-device
// cudaMemcpy of the same bytes as the ceiling.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A -I csrc ci/copy_micro.cu -o /tmp/copy_micro && /tmp/copy_micro
//
// Session 18: session 17's kernel (64 x 64 tiles, a warp storing 16 positions x 32 bytes; kept below as the
// reference) moved x at 1.2-1.3 TB/s on the H200, against 4.2 TB/s for cudaMemcpy; tiles of 64 x 256 with warps
// storing 8 positions x 64 bytes reached 2.7 TB/s on aligned rows; a 32 x 256 tile whose warps load 16-byte
// chunks of one row and realign them by funnel shifts was as fast on odd rows and faster on aligned ones (H100:
// 2.2-2.3 TB/s), so the package keeps two load kinds (kernels/conv1d_fwd_dense_tma.cu, launch_copy): rows
// (x_stride_l 1) and elements. This times each against the reference and checks them bit for bit, and also
// kCopyRowsExact (the row kind without reads past a row's ends), which waits for this check before it replaces
// kCopyRows in launch_copy.
#include "kernels/conv1d_fwd_dense_tma.cu"

#include <cstdio>
#include <cstring>
#include <vector>

namespace {

#define CK(e)                                                                       \
  do {                                                                              \
    cudaError_t err_ = (e);                                                         \
    if (err_ != cudaSuccess) {                                                      \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, __LINE__); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

// Session 17's package kernel (the reference here): x of any strides, batches blockIdx.z of a slab, to channels-last memory: out[b][l][c] (C % 8 == 0, out 16-byte
// aligned). One 64-channel x 64-position tile per block through shared memory: rows of x read along positions
// (16-byte loads where vec: x_stride_l 1, rows and x 16-byte aligned; else 2-byte loads), rows of out written
// 16 bytes (8 channels) per thread, two neighbouring threads per 32-byte sector. Tile row r (a channel) starts at
// r * 80 + ((r >> 3) & 1) * 16 elements: a warp's column reads (16 positions of rows r and r + 8) fall in
// different banks.
constexpr int kCopyPitch = 80;
__device__ __forceinline__ uint4 ref_pack8(const unsigned short (&e)[8]) {
  auto two = [&](int j) { return static_cast<unsigned>(e[j]) | (static_cast<unsigned>(e[j + 1]) << 16); };
  return make_uint4(two(0), two(2), two(4), two(6));
}
__global__ void __launch_bounds__(256) reference_copy_kernel(const unsigned short* __restrict__ x, int64_t sb,
                                                                 int64_t sc, int64_t sl, int64_t C, int64_t L,
                                                                 unsigned short* __restrict__ out, bool vec) {
  __shared__ __align__(16) unsigned short tile[64 * kCopyPitch];
  const int tid = threadIdx.x;
  const int64_t l0 = static_cast<int64_t>(blockIdx.x) * 64, c0 = static_cast<int64_t>(blockIdx.y) * 64;
  const int64_t b = blockIdx.z;
  const unsigned short* xb = x + b * sb;
  auto at = [](int r, int l) { return r * kCopyPitch + ((r >> 3) & 1) * 16 + l; };
  if (vec) {
#pragma unroll
    for (int it = 0; it < 2; ++it) {
      const int i = tid + it * 256, r = i >> 3, v = i & 7;
      const int64_t c = c0 + r, l = l0 + v * 8;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (c < C && l + 8 <= L) {
        val = *reinterpret_cast<const uint4*>(xb + c * sc + l);
      } else if (c < C) {
        unsigned short e[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) e[j] = l + j < L ? xb[c * sc + l + j] : static_cast<unsigned short>(0);
        val = ref_pack8(e);
      }
      *reinterpret_cast<uint4*>(&tile[at(r, v * 8)]) = val;
    }
  } else {
#pragma unroll
    for (int it = 0; it < 16; ++it) {  // all 16 loads in flight before the stores
      const int i = tid + it * 256, r = i >> 6, li = i & 63;
      const int64_t c = c0 + r, l = l0 + li;
      tile[at(r, li)] = c < C && l < L ? xb[c * sc + l * sl] : static_cast<unsigned short>(0);
    }
  }
  __syncthreads();
  unsigned short* ob = out + b * L * C;
#pragma unroll
  for (int it = 0; it < 2; ++it) {
    const int i = tid + it * 256;
    const int v = (i & 1) | ((i >> 7) << 1), li = (i >> 1) & 63;  // a warp: 16 positions x 2 channel vectors
    const int64_t l = l0 + li, c = c0 + v * 8;
    if (l >= L || c >= C) continue;
    unsigned short e[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) e[j] = tile[at(v * 8 + j, li)];
    *reinterpret_cast<uint4*>(ob + l * C + c) = ref_pack8(e);
  }
}

struct Shape {
  const char* name;
  int64_t B, C, L;
  int64_t sl, sc, sb, offset;  // element strides (0: contiguous) and the view's offset in elements
};

using Launch = void (*)(const unsigned short*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, unsigned short*,
                        bool, cudaStream_t);

void launch_reference(const unsigned short* x, int64_t B, int64_t sb, int64_t sc, int64_t sl, int64_t C, int64_t L,
                      unsigned short* out, bool vec, cudaStream_t s) {
  const dim3 grid((L + 63) / 64, (C + 63) / 64, B);
  reference_copy_kernel<<<grid, 256, 0, s>>>(x, sb, sc, sl, C, L, out, vec);
}

// The package's launcher (its choice of load kind), and each load kind forced where it applies.
void launch_package(const unsigned short* x, int64_t B, int64_t sb, int64_t sc, int64_t sl, int64_t C, int64_t L,
                    unsigned short* out, bool, cudaStream_t s) {
  convkit::launch_copy(x, B, sb, sc, sl, C, L, out, s);
}
template <int Load>
void launch_kind(const unsigned short* x, int64_t B, int64_t sb, int64_t sc, int64_t sl, int64_t C, int64_t L,
                 unsigned short* out, bool vec, cudaStream_t s) {
  if (Load != convkit::kCopyElements && sl != 1) return;
  convkit::launch_copy<Load>(x, B, sb, sc, sl, C, L, out, s);
}

// 64-channel tiles whose warps store 4 positions x 128 bytes (a whole line per position; session 34), C % 64 == 0.
template <int Load>
void launch_vw8(const unsigned short* x, int64_t B, int64_t sb, int64_t sc, int64_t sl, int64_t C, int64_t L,
                unsigned short* out, bool, cudaStream_t s) {
  if ((Load != convkit::kCopyElements && sl != 1) || C % 64 != 0) return;
  convkit::launch_copy<Load, 64, convkit::CopyTile<Load>::kL, 8>(x, B, sb, sc, sl, C, L, out, s);
}

}  // namespace

int main() {
  const Shape shapes[] = {
      {"w2v_k3s2 (odd rows)", 16, 512, 49999, 1, 0, 0, 0},
      {"w2v rows of 50000", 16, 512, 50000, 1, 0, 0, 0},
      {"kb76 slab (16 batches)", 16, 64, 524280, 1, 0, 0, 0},
      {"kb67", 32, 64, 131072, 1, 0, 0, 0},
      {"tcn / wavenet", 16, 256, 16384, 1, 0, 0, 0},
      {"position stride 2", 8, 256, 16384, 2, 2 * 16384, 0, 0},
      // edges (correctness): ragged tiles, C 80, a channel slice, rows of 1008 holding 1001, x 1 element off
      {"C 80 L 1001", 3, 80, 1001, 1, 0, 0, 0},
      {"channel slice [:, 1::2]", 2, 256, 1001, 1, 2 * 1001, 512 * 1001, 1001},
      {"rows 1008 hold 1001", 2, 96, 1001, 1, 1008, 0, 0},
      {"x 1 element off", 2, 64, 4096, 1, 0, 0, 1},
      {"C 48 L 300", 5, 48, 300, 1, 0, 0, 3},
  };
  struct V {
    const char* name;
    Launch fn;
  } variants[] = {
      {"session 17", launch_reference},
      {"package", launch_package},
      {"rows", launch_kind<convkit::kCopyRows>},
      {"rows exact", launch_kind<convkit::kCopyRowsExact>},  // not in the package yet
      {"elements", launch_kind<convkit::kCopyElements>},
      {"rows 64ch vw8", launch_vw8<convkit::kCopyRows>},
      {"elements 64ch vw8", launch_vw8<convkit::kCopyElements>},
  };
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  int fails = 0;
  for (const Shape& sh : shapes) {
    const int64_t sl = sh.sl, sc = sh.sc ? sh.sc : sh.L * sl, sb = sh.sb ? sh.sb : sh.C * sc;
    const int64_t n_in = sh.offset + (sh.B - 1) * sb + (sh.C - 1) * sc + (sh.L - 1) * sl + 1;
    const int64_t n_out = sh.B * sh.C * sh.L;
    unsigned short *x, *ref, *out;
    CK(cudaMalloc(&x, n_in * 2));
    CK(cudaMalloc(&ref, n_out * 2));
    CK(cudaMalloc(&out, n_out * 2));
    {
      std::vector<unsigned short> h(n_in);
      uint32_t st = 12345;
      for (auto& v : h) v = static_cast<unsigned short>((st = st * 1664525u + 1013904223u) >> 16);
      CK(cudaMemcpy(x, h.data(), n_in * 2, cudaMemcpyHostToDevice));
    }
    const bool vec = sl == 1 && sc % 8 == 0 && sb % 8 == 0 && sh.offset % 8 == 0;
    unsigned short* const xv = x + sh.offset;
    const double bytes = 2.0 * n_out * 2;  // read + write
    auto time_it = [&](auto&& fn) {
      for (int i = 0; i < 3; ++i) fn();
      std::vector<float> t;
      for (int i = 0; i < 15; ++i) {
        CK(cudaEventRecord(e0, s));
        fn();
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms);
      }
      std::sort(t.begin(), t.end());
      return t[t.size() / 2];
    };
    const float mc = time_it([&] { CK(cudaMemcpyAsync(out, x, std::min(n_in, n_out) * 2, cudaMemcpyDeviceToDevice, s)); });
    std::printf("%-24s B %ld C %ld L %ld %s: cudaMemcpy %.3f ms (%.0f GB/s)\n", sh.name, (long)sh.B, (long)sh.C,
                (long)sh.L, vec ? "16-byte loads" : "2-byte loads", mc, bytes / mc / 1e6);
    launch_reference(xv, sh.B, sb, sc, sl, sh.C, sh.L, ref, vec, s);
    CK(cudaStreamSynchronize(s));
    CK(cudaGetLastError());
    std::vector<unsigned short> href(n_out), hout(n_out);
    CK(cudaMemcpy(href.data(), ref, n_out * 2, cudaMemcpyDeviceToHost));
    {  // the reference kernel against a host transpose at a few thousand points
      std::vector<unsigned short> hx(n_in);
      CK(cudaMemcpy(hx.data(), x, n_in * 2, cudaMemcpyDeviceToHost));
      uint32_t st = 7;
      for (int k = 0; k < 4000; ++k) {
        const int64_t b = (st = st * 1664525u + 1013904223u) % sh.B, c = (st = st * 1664525u + 1013904223u) % sh.C;
        const int64_t l = k < 8 ? sh.L - 1 - k : (st = st * 1664525u + 1013904223u) % sh.L;
        if (href[(b * sh.L + l) * sh.C + c] != hx[sh.offset + b * sb + c * sc + l * sl]) {
          std::printf("FAIL reference kernel at b %ld c %ld l %ld\n", (long)b, (long)c, (long)l);
          ++fails;
          break;
        }
      }
    }
    for (const V& v : variants) {
      if ((v.fn == launch_kind<convkit::kCopyRows> || v.fn == launch_kind<convkit::kCopyRowsExact> ||
           v.fn == launch_vw8<convkit::kCopyRows>) && sl != 1)
        continue;
      if ((v.fn == launch_vw8<convkit::kCopyRows> || v.fn == launch_vw8<convkit::kCopyElements>) && sh.C % 64 != 0)
        continue;
      CK(cudaMemset(out, 0xff, n_out * 2));
      v.fn(xv, sh.B, sb, sc, sl, sh.C, sh.L, out, vec, s);
      CK(cudaStreamSynchronize(s));
      CK(cudaGetLastError());
      CK(cudaMemcpy(hout.data(), out, n_out * 2, cudaMemcpyDeviceToHost));
      const bool same = std::memcmp(hout.data(), href.data(), n_out * 2) == 0;
      fails += !same;
      const float ms = time_it([&] { v.fn(xv, sh.B, sb, sc, sl, sh.C, sh.L, out, vec, s); });
      std::printf("  TIME %-14s %.3f ms  %5.0f GB/s  %3.0f %% of cudaMemcpy %s\n", v.name, ms, bytes / ms / 1e6,
                  100.0 * mc / ms, same ? "" : "FAIL (differs from the reference)");
    }
    CK(cudaFree(x));
    CK(cudaFree(ref));
    CK(cudaFree(out));
  }
  std::printf("%s\n", fails ? "FAILURES" : "all variants match");
  return fails ? 1 : 0;
}
