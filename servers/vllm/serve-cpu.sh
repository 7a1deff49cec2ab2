#!/usr/bin/env bash
# Serve a local Hugging Face-format model with the CPU build of vLLM: serve-cpu.sh MODEL_DIR [PORT]
# On the CPU backend --gpu-memory-utilization is the share of the NUMA node's memory vLLM reserves.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${VLLM_VENV:-$here/.venv}"
model="${1:?usage: serve-cpu.sh MODEL_DIR [PORT]}"
port="${2:-8001}"
exec "$venv/bin/python" -m vllm.entrypoints.openai.api_server --model "$model" \
  --host 127.0.0.1 --port "$port" --max-model-len "${MAX_MODEL_LEN:-512}" --dtype float32 \
  --max-logprobs "${MAX_LOGPROBS:-40}" --gpu-memory-utilization "${CPU_MEMORY_SHARE:-0.2}"
