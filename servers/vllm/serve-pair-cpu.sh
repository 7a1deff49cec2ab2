#!/usr/bin/env bash
# Serve a target and a reference model with the CPU build of vLLM (ports 8001 and 8002), each server
# pinned to its own half of the cores (on 2 cores: the target on core 0, the reference on core 1).
# Environment: TARGET, REFERENCE (local Hugging Face-format folders, e.g. the model organism's);
# optional TARGET_PORT (8001), REFERENCE_PORT (8002), TARGET_CORES, REFERENCE_CORES (vLLM's
# VLLM_CPU_OMP_THREADS_BIND syntax, e.g. "0-3"), and serve-cpu.sh's CALIB_VLLM_VENV, MAX_MODEL_LEN,
# MAX_LOGPROBS, CPU_MEMORY_SHARE. Stops both servers when either exits or on Ctrl-C.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${TARGET:?set TARGET to the target model folder}" "${REFERENCE:?set REFERENCE to the reference model folder}"
# The cores this process may use (nproc would also obey OMP_NUM_THREADS, which is not a core count).
n="$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"
if [ "$n" -lt 2 ]; then
  echo "serve-pair-cpu.sh: $n core: two servers need at least 2 (one each)" >&2
  exit 2
fi
half=$((n / 2))
cores() { if [ "$1" -eq "$2" ]; then echo "$1"; else echo "$1-$2"; fi; }
target_cores="${TARGET_CORES:-$(cores 0 $((half - 1)))}"
reference_cores="${REFERENCE_CORES:-$(cores "$half" $((n - 1)))}"
echo "serve-pair-cpu.sh: target on cores $target_cores, reference on cores $reference_cores" >&2
VLLM_CPU_OMP_THREADS_BIND="$target_cores" "$here/serve-cpu.sh" "$TARGET" "${TARGET_PORT:-8001}" &
VLLM_CPU_OMP_THREADS_BIND="$reference_cores" "$here/serve-cpu.sh" "$REFERENCE" "${REFERENCE_PORT:-8002}" &
trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT INT TERM
wait -n
