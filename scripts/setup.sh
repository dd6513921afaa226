#!/usr/bin/env bash
# Sets up a brigade checkout on Debian 12: installs the build tools that are missing, then configures
# and builds. Idempotent: run it again after pulling; it only installs and rebuilds what changed.
#
#   bash scripts/setup.sh          # as root (or with sudo available) on a fresh machine
#   BUILD_DIR=build-rel bash scripts/setup.sh
#
# CUDA is optional: meson finds nvcc on PATH or in /usr/local/cuda/bin and builds the CUDA backend
# when it is there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${BUILD_DIR:-build}

# iproute2: the multi-host tests build their hosts from network namespaces (`ip netns`).
packages=(g++ meson ninja-build pkg-config catch2 libgloo-dev iproute2)
# cmake: the install_cmake test builds the README's program as a CMake project (find_package(brigade)).
packages+=(cmake)
# slurm-wlm, munge, openmpi-bin, mpich: the cluster launchers tests/test_comm_clusters.cpp runs
# brigade under (a single-node Slurm it starts, Open MPI's mpirun, MPICH's mpiexec.hydra): about
# 18 MB to download, 76 MB installed, 40 s on two cores.
packages+=(slurm-wlm munge openmpi-bin mpich)
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} > 0)); then
  echo "setup: installing ${missing[*]}"
  as_root=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root to install ${missing[*]}" >&2; exit 1; }
    as_root=(sudo)
  fi
  "${as_root[@]}" apt-get update -q
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [[ -f "$build_dir/meson-private/coredata.dat" ]]; then
  meson setup --reconfigure "$build_dir"
else
  meson setup "$build_dir"
fi
ninja -C "$build_dir"
