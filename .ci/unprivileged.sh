#!/usr/bin/env bash
# Prepare a normal user and a Python environment it can run, so that the sandbox's tests also run
# unprivileged: tests/executors/sandbox/test_sandbox_threats.py runs the hostile battery as this user (with
# runuser) when the test suite runs as root. Run as root; idempotent, and quick once done (as another
# user it does nothing).
#
#   .ci/unprivileged.sh              the user calib-ci, a venv in /opt/calib-ci/venv (Debian's python3),
#                                    a copy of this tree in /opt/calib-ci/tree owned by that user
#   .ci/unprivileged.sh --sync-only  refresh the copy of the tree only
#
# The pyenv interpreter under /root is out of reach for other users (/root is mode 0700), hence
# Debian's python3 (python3-venv is installed when missing) and only the packages the sandbox's tests
# import.
set -euo pipefail

ci_user=calib-ci
base=/opt/calib-ci
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# tree-sitter: the native executors read x's file context with it (tests/executors/native run here too)
packages=(pytest polars click numpy scipy statsmodels pyarrow tree-sitter==0.22.3 tree-sitter-c==0.21.4
          tree-sitter-cpp==0.22.3 tree-sitter-go==0.21.2 tree-sitter-rust==0.21.2 tree-sitter-java==0.21.0
          tree-sitter-python==0.21.0)

if [ "$(id -u)" != 0 ]; then  # the tests already run as a normal user: nothing to prepare
    echo "unprivileged.sh: not root, nothing to do (the tests run as this user)"
    exit 0
fi

sync_tree() {
    rm -rf "$base/tree.new"
    mkdir -p "$base/tree.new"
    tar -C "$repo" --exclude=.git --exclude=__pycache__ --exclude='*.egg-info' --exclude=.pytest_cache \
        --exclude=.ruff_cache --exclude=.hypothesis --exclude=.benchmarks --exclude='./.calib-*' -cf - . \
        | tar -C "$base/tree.new" -xf -
    chmod -R a+rX,go-w "$base/tree.new"
    chown -R "$ci_user:" "$base/tree.new"  # the hostile battery writes canaries into its repository
    rm -rf "$base/tree"
    mv "$base/tree.new" "$base/tree"
}

mkdir -p "$base"
chmod 0755 "$base"
if [ "${1:-}" = "--sync-only" ] && id -u "$ci_user" >/dev/null 2>&1; then
    sync_tree
    exit 0
fi

if ! id -u "$ci_user" >/dev/null 2>&1; then
    useradd --system --home-dir "$base/home" --shell /usr/sbin/nologin "$ci_user"
fi
mkdir -p "$base/home"
chown "$ci_user:" "$base/home"

if ! /usr/bin/python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
fi
stamp="$base/venv/.calib-packages"
if [ ! -x "$base/venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${packages[*]}" ]; then
    [ -x "$base/venv/bin/python" ] || /usr/bin/python3 -m venv "$base/venv"
    "$base/venv/bin/python" -m pip install -q --disable-pip-version-check "${packages[@]}"
    echo "${packages[*]}" > "$stamp"
fi
chmod -R a+rX "$base/venv"
sync_tree
echo "unprivileged.sh: $ci_user can run: runuser -u $ci_user -- $base/venv/bin/python -m pytest (in $base/tree)"
