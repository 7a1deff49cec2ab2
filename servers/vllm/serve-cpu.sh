#!/usr/bin/env bash
# Serve a local Hugging Face-format model with the CPU build of vLLM: serve-cpu.sh MODEL_DIR [PORT]
# The venv: $CALIB_VLLM_VENV (or the older VLLM_VENV), default servers/vllm/.venv (build-venv.sh builds it).
# On the CPU backend --gpu-memory-utilization is the share of the NUMA node's memory vLLM reserves.
# VLLM_CPU_OMP_THREADS_BIND (vLLM's own variable, e.g. "1" or "0-3") pins the server's threads to those
# cores; two servers on one machine need disjoint sets (serve-pair-cpu.sh sets them), or both use core 0.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${CALIB_VLLM_VENV:-${VLLM_VENV:-$here/.venv}}"
model="${1:?usage: serve-cpu.sh MODEL_DIR [PORT]}"
port="${2:-8001}"
[ -x "$venv/bin/python" ] || { echo "serve-cpu.sh: no vLLM venv at $venv: run servers/vllm/build-venv.sh" >&2; exit 2; }
# VLLM_VENV is calib's alias, not a vLLM setting: unset, vLLM does not warn about an unknown VLLM_ variable.
unset VLLM_VENV
# `vllm serve` fails in the CPU build (it looks up the package "vllm", installed as "vllm-cpu").
exec "$venv/bin/python" -m vllm.entrypoints.openai.api_server --model "$model" \
  --host 127.0.0.1 --port "$port" --max-model-len "${MAX_MODEL_LEN:-512}" --dtype float32 \
  --max-logprobs "${MAX_LOGPROBS:-40}" --gpu-memory-utilization "${CPU_MEMORY_SHARE:-0.2}"
