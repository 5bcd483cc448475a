#!/usr/bin/env bash
# Installs the CUDA toolkit (compiler and headers only) into a manylinux_2_28 (AlmaLinux 8) build
# container, for cibuildwheel's before-all. Usage: install_cuda_in_container.sh 13.0
set -euo pipefail
ver=${1:-13.0}
arch=$(uname -m)
repo_arch=$([ "$arch" = aarch64 ] && echo sbsa || echo x86_64)
dnf install -y dnf-plugins-core
dnf config-manager --add-repo "https://developer.download.nvidia.com/compute/cuda/repos/rhel8/${repo_arch}/cuda-rhel8.repo"
pkg=${ver/./-}
dnf install -y "cuda-nvcc-${pkg}" "cuda-cudart-devel-${pkg}" "cuda-nvrtc-devel-${pkg}" "cuda-cccl-${pkg}" \
  "cuda-profiler-api-${pkg}" "libcusparse-devel-${pkg}" "libcublas-devel-${pkg}" "libcusolver-devel-${pkg}"
ln -sfn "/usr/local/cuda-${ver}" /usr/local/cuda
/usr/local/cuda/bin/nvcc --version
