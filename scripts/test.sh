#!/usr/bin/env bash
# calib's test command (README.md, "Test"): install what the tests need, then run them.
#
#   scripts/test.sh [PYTEST ARGS...]      e.g. scripts/test.sh tests/stats -x
#
# Idempotent and quick once done: Debian packages are installed only when missing (as root, or through
# sudo), the pip extras only when pip finds something to do; then pytest runs from the repository root.
# CALIB_TEST_VLLM=0 skips building vLLM's CPU venv (about 3.5 GB, ~25 min the first time): the tests
# against real vLLM servers then skip.
set -euo pipefail
cd "$(dirname "$0")/.."

# bubblewrap: the sandbox calib executes untrusted code in (tests run hostile code through it).
# chromium: the report test opens report.html in headless Chromium.
# redis-server: the Redis-backed MinHash index is tested against a real server on 127.0.0.1.
# wordnet-base: WordNet 3.0, read through nltk by the probes' synonym fuzzing.
# gcc, g++, a JDK, rustc, golang-go: the native executors' toolchains; JaCoCo and ASM: Java's line coverage.
# librust-md5-dev, golang-github-google-uuid-dev, libcommons-codec-java: an external library per language.
missing=""
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server"
[ -f /usr/share/wordnet/data.noun ] || missing="$missing wordnet-base"
command -v go >/dev/null 2>&1 || missing="$missing golang-go"
command -v gcc >/dev/null 2>&1 || missing="$missing gcc"
command -v g++ >/dev/null 2>&1 || missing="$missing g++"
command -v javac >/dev/null 2>&1 || missing="$missing openjdk-17-jdk-headless"
command -v rustc >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/rustc" ] || missing="$missing rustc"
[ -f /usr/share/java/org.jacoco.core.jar ] || missing="$missing libjacoco-java"
[ -f /usr/share/java/asm.jar ] || missing="$missing libasm-java"
# one library per native language from the system's package cache (docs/native-executors.md): Rust's crate
# registry, Go's source tree, Java's jar folder
compgen -G "/usr/share/cargo/registry/md5-*" >/dev/null || missing="$missing librust-md5-dev"
[ -d /usr/share/gocode/src/github.com/google/uuid ] || missing="$missing golang-github-google-uuid-dev"
[ -f /usr/share/java/commons-codec.jar ] || missing="$missing libcommons-codec-java"
python3 -c "import ensurepip" >/dev/null 2>&1 || missing="$missing python3-venv"
if [ -n "$missing" ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "test.sh: installing Debian packages:$missing"
  $SUDO apt-get update -qq >/dev/null
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

# torch first, pinned: on these machines 2.13.0 is a local CPU build, while an unpinned torch would
# pull a multi-GB CUDA build. The "embedded" extra then finds torch already satisfied.
python3 -m pip install --quiet "torch==2.13.0"
python3 -m pip install --quiet -e ".[dev,embedded,organism,embed,dedup,native,mitigate,ray]"

# A normal user (calib-ci) with a Python environment it can run: the sandbox's hostile battery also runs
# as that user (tests/executors/sandbox/test_sandbox_threats.py), since calib as root and as a normal user
# sandbox code differently (docs/executors.md, "Threat model"). Nothing to do when not root.
bash .ci/unprivileged.sh

# vLLM's CPU build, for the tests against real vLLM servers (tests/servers/test_vllm_integration.py,
# tests/study/test_vllm_studies.py), which skip without it: built once per vLLM version outside the
# clone and reused (build-venv.sh only rebuilds an unfinished or other-version venv).
if [ "${CALIB_TEST_VLLM:-1}" != 0 ]; then
  vllm_version=$(sed -n 's/^version="\(.*\)"$/\1/p' servers/vllm/build-venv.sh)
  cache_root=/var/cache/calib
  mkdir -p "$cache_root" 2>/dev/null && [ -w "$cache_root" ] || cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/calib"
  export CALIB_VLLM_VENV="${CALIB_VLLM_VENV:-$cache_root/vllm-venv-$vllm_version}"
  mkdir -p "$(dirname "$CALIB_VLLM_VENV")"
  servers/vllm/build-venv.sh
fi

bwrap --version
# --durations: each run lists its slowest tests, so CI time can be watched and spent where it counts
exec python3 -m pytest -q --durations=40 "$@"
