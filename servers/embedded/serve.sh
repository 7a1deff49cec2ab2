#!/usr/bin/env bash
# Serve a local model with calib's embedded server: serve.sh MODEL_DIR [PORT]
set -euo pipefail
exec calib serve "${1:?usage: serve.sh MODEL_DIR [PORT]}" --port "${2:-8000}"
