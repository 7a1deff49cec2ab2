#!/usr/bin/env bash
# Serve MODEL with TGI for calib: prefill log-probs on, 40 top tokens per position.
set -euo pipefail
: "${MODEL:?set MODEL}"
exec text-generation-launcher --model-id "$MODEL" --revision "${REVISION:-main}" \
  --hostname 127.0.0.1 --port "${PORT:-8003}" --enable-prefill-logprobs --max-top-n-tokens 40
