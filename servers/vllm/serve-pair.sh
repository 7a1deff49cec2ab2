#!/usr/bin/env bash
# Serve a target and a reference model with vLLM on two GPUs (ports 8001 and 8002).
# Environment: TARGET, TARGET_REV, REFERENCE, REFERENCE_REV; optional MAX_MODEL_LEN (2048), DTYPE (bfloat16).
set -euo pipefail
: "${TARGET:?set TARGET}" "${REFERENCE:?set REFERENCE}"
common=(--host 127.0.0.1 --max-model-len "${MAX_MODEL_LEN:-2048}" --dtype "${DTYPE:-bfloat16}" --max-logprobs 40)
CUDA_VISIBLE_DEVICES=0 vllm serve "$TARGET" --revision "${TARGET_REV:-main}" --port 8001 "${common[@]}" &
CUDA_VISIBLE_DEVICES=1 vllm serve "$REFERENCE" --revision "${REFERENCE_REV:-main}" --port 8002 "${common[@]}" &
trap 'kill $(jobs -p) 2>/dev/null' EXIT INT TERM
wait
