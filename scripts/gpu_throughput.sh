#!/usr/bin/env bash
# The throughput studies on a machine with an NVIDIA GPU (issues 15, 17): builds the harness
# with the GPU engines (`--features cuda,wgpu`) and runs configs/throughput.yaml (box_drop) and
# configs/throughput_robot.yaml (the wheeled robot), or the files given, into OUT, so that the
# burn-cuda and burn-wgpu cells run beside the cpu and burn-ndarray ones.
#
#   scripts/gpu_throughput.sh OUT [CONFIG...]   # e.g. scripts/gpu_throughput.sh /data/tp
#
# Needs: a Rust toolchain (1.85+) with the crates.io registry, the NVIDIA driver (its libcuda,
# as `nvidia-smi` shows), python3 with venv and pip to reach PyPI, and for burn-wgpu a Vulkan
# loader (Debian: libvulkan1; the NVIDIA driver ships its Vulkan ICD). burn 0.21's CUDA
# backend loads libcuda and NVRTC at run time (cudarc, dynamic loading): the driver provides
# libcuda, and NVRTC comes from the PyPI wheel nvidia-cuda-nvrtc-cu12, installed here into a
# virtual environment under target/ and put on LD_LIBRARY_PATH. Nothing is installed
# system-wide. Results: OUT/<experiment name>/ (report.md, runs.parquet, figures/).
set -euo pipefail

if [ $# -lt 1 ]; then
    echo "usage: $0 OUT [CONFIG...]   (default: configs/throughput.yaml configs/throughput_robot.yaml)" >&2
    exit 2
fi
out="$1"
shift
repo="$(cd "$(dirname "$0")/.." && pwd)"
if [ $# -eq 0 ]; then
    set -- "$repo/configs/throughput.yaml" "$repo/configs/throughput_robot.yaml"
fi
configs=()
for config in "$@"; do
    [ -f "$config" ] || { echo "$0: no experiment file $config" >&2; exit 2; }
    configs+=("$(cd "$(dirname "$config")" && pwd)/$(basename "$config")")
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$repo"

# 1. The GPU and its driver.
if ! command -v nvidia-smi >/dev/null; then
    echo "$0: nvidia-smi not found: this script needs an NVIDIA GPU with its driver" >&2
    exit 1
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

# 2. NVRTC from PyPI (the driver does not ship it), in a virtual environment of this checkout.
venv="$repo/target/gpu-venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade "nvidia-cuda-nvrtc-cu12"
nvrtc_lib="$("$venv/bin/python" - <<'PY'
import os, nvidia.cuda_nvrtc as m
print(os.path.join(list(m.__path__)[0], "lib"))
PY
)"
if ! ls "$nvrtc_lib"/libnvrtc.so* >/dev/null 2>&1; then
    echo "$0: no libnvrtc.so* in $nvrtc_lib (nvidia-cuda-nvrtc-cu12's layout changed?)" >&2
    exit 1
fi
export LD_LIBRARY_PATH="$nvrtc_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "NVRTC: $nvrtc_lib"

# 3. Build (release: the GPU engines' host side and the cpu engine at full optimization) and run.
cargo build --release --locked --workspace --features contactlab-harness/cuda,contactlab-harness/wgpu
bin="$repo/target/release/contactlab"
"$bin" list | sed -n '/^ENGINES/,/^$/p'
for config in "${configs[@]}"; do
    start=$(date +%s)
    "$bin" run "$config" --out "$out" --fresh
    echo "$(basename "$config"): $(( $(date +%s) - start )) s; results under $out"
done
