#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <barrier>
#include <thread>
#include <vector>
#include <functional>
#include <cmath>
#include <cstring>
#undef __shared__
#define __shared__ static
#undef __forceinline__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define cudaGetLastError() cudaSuccess
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline uint3 blockDim, gridDim;
inline std::barrier<>* g_bar = nullptr;
inline void __syncthreads() { g_bar->arrive_and_wait(); }
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T* shfl_slots() { static T s[1024]; return s; }
template <class T> inline T __shfl_down_sync(unsigned, T v, int off) {
  T* s = shfl_slots<T>();
  unsigned tid = threadIdx.x;
  s[tid] = v;
  g_bar->arrive_and_wait();
  unsigned lane = tid % 32;
  T r = (lane + off < 32) ? s[tid + off] : v;
  g_bar->arrive_and_wait();
  return r;
}
inline void emu_launch(unsigned grid, unsigned block, std::function<void()> fn) {
  gridDim = {grid, 1, 1}; blockDim = {block, 1, 1};
  for (unsigned b = 0; b < grid; ++b) {
    std::barrier<> bar(block);
    g_bar = &bar;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < block; ++t) ts.emplace_back([&, b, t] { blockIdx = {b, 0, 0}; threadIdx = {t, 0, 0}; fn(); });
    for (auto& th : ts) th.join();
  }
}
#define __cvta_generic_to_shared(x) 0
