// Micro-benchmark of output store patterns on the shape of w2v_first_k10s5's y (B 16, Cout 512, Lout 49999, bf16:
// 819 MB, rows of 99998 bytes, so most rows start 2 bytes into a 16-byte unit). The package's narrow forwards
// (kernels/conv1d_fwd_dense_narrow.cu) move those bytes at ~630 GB/s on the H200 (1.27-1.32 ms, 15 % of the floor)
// in two different store shapes; this asks whether any store pattern on these odd rows gets near the copy ceiling
// (4.26 TB/s) and which grid order it needs. Every kernel writes y[b][c][j] = f(b, c, j) (no loads, a few integer
// ops per element), the whole tensor is checked after each run, GB/s counts the y bytes once.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/store_micro ci/store_micro.cu && /tmp/store_micro
//
// Patterns (grid orders: "cf" channel tiles fastest, as the package's runs kernel; "pf" position tiles fastest):
//   flat      the tensor as one flat array, 16-byte stores (the ceiling for any layout)
//   runs      128 threads x (8 positions x 8 channels), 2-byte stores 16 bytes apart (the package's runs shape)
//   lanes2    a warp's lanes on 32 consecutive positions of one row, 2-byte stores (64 contiguous bytes)
//   lanes4    lanes on 32 consecutive 4-byte-aligned pairs of one row (128 contiguous bytes), the row's odd first
//             / last element apart
//   staged16  a 32-channel x 512-position tile through shared memory, then each row piece by aligned 16-byte
//             stores (a warp writes 512 contiguous bytes), the unaligned head and tail by 2-byte stores
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CK(e)                                                                                       \
  do {                                                                                              \
    cudaError_t err_ = (e);                                                                         \
    if (err_ != cudaSuccess) {                                                                      \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, __LINE__);     \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

namespace {

constexpr int64_t kB = 16, kC = 512, kL = 49999;

__device__ __forceinline__ unsigned short val(int64_t b, int64_t c, int64_t j) {
  return static_cast<unsigned short>((b * 7 + c * 13 + j) & 0x3fff);  // a finite bf16 pattern
}

__device__ __forceinline__ void tile_of(int64_t tiles_c, int64_t tiles_j, bool cf, int64_t& b, int64_t& ct,
                                        int64_t& jt) {
  int64_t i = blockIdx.x;
  if (cf) {
    ct = i % tiles_c; i /= tiles_c;
    jt = i % tiles_j; b = i / tiles_j;
  } else {
    jt = i % tiles_j; i /= tiles_j;
    ct = i % tiles_c; b = i / tiles_c;
  }
}

__global__ void flat_kernel(unsigned short* y, int64_t n) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i + 8 <= n) {
    unsigned short e[8];
    int64_t j = i % kL, bc = i / kL;
    for (int v = 0; v < 8; ++v) {
      e[v] = val(bc / kC, bc % kC, j);
      if (++j == kL) j = 0, ++bc;
    }
    uint4 u;
    u.x = e[0] | (unsigned(e[1]) << 16); u.y = e[2] | (unsigned(e[3]) << 16);
    u.z = e[4] | (unsigned(e[5]) << 16); u.w = e[6] | (unsigned(e[7]) << 16);
    *reinterpret_cast<uint4*>(y + i) = u;
  } else {
    for (int64_t f = i; f < n; ++f) y[f] = val(f / kL / kC, (f / kL) % kC, f % kL);
  }
}

// runs: 64 channels x 1024 positions a block of 128 threads; thread t: positions 8t..8t+7, 8 channels at a time.
__global__ void __launch_bounds__(128) runs_kernel(unsigned short* y, bool cf) {
  const int64_t tiles_c = kC / 64, tiles_j = (kL + 1023) / 1024;
  int64_t b, ct, jt;
  tile_of(tiles_c, tiles_j, cf, b, ct, jt);
  const int64_t j0 = jt * 1024 + threadIdx.x * 8;
  for (int c8 = 0; c8 < 64; c8 += 8)
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const int64_t ch = ct * 64 + c8 + c;
      unsigned short* row = y + (b * kC + ch) * kL;
#pragma unroll
      for (int v = 0; v < 8; ++v)
        if (j0 + v < kL) row[j0 + v] = val(b, ch, j0 + v);
    }
}

// lanes2: 64 channels x 256 positions a block of 256 threads; warp w: channels 8w..8w+7; lane: positions l + 32i.
__global__ void __launch_bounds__(256) lanes2_kernel(unsigned short* y, bool cf) {
  const int64_t tiles_c = kC / 64, tiles_j = (kL + 255) / 256;
  int64_t b, ct, jt;
  tile_of(tiles_c, tiles_j, cf, b, ct, jt);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int c = 0; c < 8; ++c) {
    const int64_t ch = ct * 64 + warp * 8 + c;
    unsigned short* row = y + (b * kC + ch) * kL;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int64_t j = jt * 256 + lane + 32 * i;
      if (j < kL) row[j] = val(b, ch, j);
    }
  }
}

// lanes4: 64 channels x 512 positions a block of 256 threads; a row piece [j0, j0 + 512) is written as 4-byte
// aligned pairs (lane l: pair l + 32 i) plus the odd element at either end.
__global__ void __launch_bounds__(256) lanes4_kernel(unsigned short* y, bool cf) {
  const int64_t tiles_c = kC / 64, tiles_j = (kL + 511) / 512;
  int64_t b, ct, jt;
  tile_of(tiles_c, tiles_j, cf, b, ct, jt);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t j0 = jt * 512, j1 = j0 + 512 < kL ? j0 + 512 : kL;
  for (int c = 0; c < 8; ++c) {
    const int64_t ch = ct * 64 + warp * 8 + c;
    const int64_t base = (b * kC + ch) * kL;  // element offset of the row
    unsigned short* row = y + base;
    const int64_t a0 = j0 + ((base + j0) & 1);  // first position whose address is 4-byte aligned
    if (lane == 0 && a0 != j0) row[j0] = val(b, ch, j0);
    for (int64_t j = a0 + 2 * lane; j + 1 < j1; j += 64) {
      const unsigned u = val(b, ch, j) | (unsigned(val(b, ch, j + 1)) << 16);
      *reinterpret_cast<unsigned*>(row + j) = u;
    }
    const int64_t last = j1 - 1;  // written alone where it has no pair inside the piece
    if (lane == 1 && ((last - a0) & 1) == 0 && last >= a0) row[last] = val(b, ch, last);
  }
}

// staged16: 32 channels x 512 positions through shared memory; each row piece leaves as aligned 16-byte units
// (a warp per row at a time), the head before the first unit and the tail after the last by 2-byte stores.
__global__ void __launch_bounds__(256) staged16_kernel(unsigned short* y, bool cf) {
  constexpr int kN = 512, kRows = 32, kPitch = kN + 16;
  __shared__ __align__(16) unsigned short tile[kRows * kPitch];
  const int64_t tiles_c = kC / kRows, tiles_j = (kL + kN - 1) / kN;
  int64_t b, ct, jt;
  tile_of(tiles_c, tiles_j, cf, b, ct, jt);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t j0 = jt * kN, j1 = j0 + kN < kL ? j0 + kN : kL;
  // "compute": each thread fills kRows x kN / 256 elements as a kernel's epilogue would, lanes on positions
  for (int i = threadIdx.x; i < kRows * kN; i += 256) {
    const int r = i / kN, t = i % kN;
    tile[r * kPitch + 8 + t] = val(b, ct * kRows + r, j0 + t);  // position t at index 8 + t
  }
  __syncthreads();
  for (int r = warp; r < kRows; r += 8) {
    const int64_t ch = ct * kRows + r;
    const int64_t base = (b * kC + ch) * kL;
    unsigned short* row = y + base;
    const int64_t a0 = j0 + ((8 - ((base + j0) & 7)) & 7);  // first position on a 16-byte unit
    const int64_t nunits = j1 > a0 ? (j1 - a0) / 8 : 0;
    const unsigned short* src = tile + r * kPitch + 8;
    for (int64_t u = lane; u < nunits; u += 32) {
      const int t = static_cast<int>(a0 - j0 + 8 * u);
      unsigned short e[8];
#pragma unroll
      for (int v = 0; v < 8; ++v) e[v] = src[t + v];
      uint4 q;
      q.x = e[0] | (unsigned(e[1]) << 16); q.y = e[2] | (unsigned(e[3]) << 16);
      q.z = e[4] | (unsigned(e[5]) << 16); q.w = e[6] | (unsigned(e[7]) << 16);
      *reinterpret_cast<uint4*>(row + a0 + 8 * u) = q;
    }
    const int64_t tail0 = a0 < j1 ? a0 + 8 * nunits : j1;
    if (lane < tail0 - j0 && j0 + lane < a0) row[j0 + lane] = src[lane];
    if (lane < j1 - tail0) row[tail0 + lane] = src[tail0 - j0 + lane];
  }
}

__global__ void check_kernel(const unsigned short* y, unsigned long long* bad) {
  const int64_t n = kB * kC * kL;
  for (int64_t f = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; f < n;
       f += static_cast<int64_t>(gridDim.x) * blockDim.x)
    if (y[f] != val(f / kL / kC, (f / kL) % kC, f % kL)) atomicAdd(bad, 1ull);
}

}  // namespace

int main() {
  const int64_t n = kB * kC * kL;
  unsigned short* y;
  unsigned long long* bad;
  CK(cudaMalloc(&y, n * 2));
  CK(cudaMalloc(&bad, sizeof(unsigned long long)));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  // the ceiling: a device-to-device copy of the same bytes (read + write counted) into a second buffer
  unsigned short* z;
  CK(cudaMalloc(&z, n * 2));
  auto time_it = [&](const char* name, auto launch) {
    CK(cudaMemset(y, 0xff, n * 2));
    launch();
    CK(cudaGetLastError());
    CK(cudaMemset(bad, 0, sizeof(unsigned long long)));
    check_kernel<<<1320, 256>>>(y, bad);
    unsigned long long nbad = 0;
    CK(cudaMemcpy(&nbad, bad, sizeof nbad, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 3; ++i) launch();
    constexpr int kReps = 20;
    CK(cudaEventRecord(e0));
    for (int i = 0; i < kReps; ++i) launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    ms /= kReps;
    std::printf("STORE %-14s %8.3f ms %7.0f GB/s %s\n", name, ms, n * 2 / (ms * 1e6),
                nbad ? "WRONG" : "ok");
    if (nbad) std::printf("  %llu elements wrong\n", nbad);
  };
  {
    CK(cudaEventRecord(e0));
    for (int i = 0; i < 20; ++i) CK(cudaMemcpyAsync(z, y, n * 2, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    ms /= 20;
    std::printf("STORE %-14s %8.3f ms %7.0f GB/s (read + write: %.0f GB/s)\n", "memcpy", ms, n * 2 / (ms * 1e6),
                n * 4 / (ms * 1e6));
  }
  const int64_t flat_blocks = (n / 8 + 255) / 256 + 1;
  time_it("flat", [&] { flat_kernel<<<flat_blocks, 256>>>(y, n); });
  for (int cf = 1; cf >= 0; --cf) {
    char name[32];
    const char* o = cf ? "cf" : "pf";
    std::snprintf(name, sizeof name, "runs_%s", o);
    time_it(name, [&] { runs_kernel<<<kB * (kC / 64) * ((kL + 1023) / 1024), 128>>>(y, cf); });
    std::snprintf(name, sizeof name, "lanes2_%s", o);
    time_it(name, [&] { lanes2_kernel<<<kB * (kC / 64) * ((kL + 255) / 256), 256>>>(y, cf); });
    std::snprintf(name, sizeof name, "lanes4_%s", o);
    time_it(name, [&] { lanes4_kernel<<<kB * (kC / 64) * ((kL + 511) / 512), 256>>>(y, cf); });
    std::snprintf(name, sizeof name, "staged16_%s", o);
    time_it(name, [&] { staged16_kernel<<<kB * (kC / 32) * ((kL + 511) / 512), 256>>>(y, cf); });
  }
  return 0;
}
