#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian/Ubuntu machine: LLVM 19 from apt (only
# when a tool is missing), then mlopt from this checkout with its test extras.
# Says what it is doing; each step's own output is kept short.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
step() { echo "ci/install.sh [$((SECONDS - start))s]: $*"; }

missing=()
for tool in opt-19 clang-19 llc-19 llvm-config-19 llvm-size-19 ld.lld-19; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  step "missing ${missing[*]}; installing LLVM 19 from apt (llvm-19-dev clang-19 llvm-19-tools lld-19)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    llvm-19-dev clang-19 llvm-19-tools lld-19 >/dev/null
  step "LLVM $(llvm-config-19 --version) installed"
else
  step "LLVM $(llvm-config-19 --version) already installed"
fi

PYTHON="${PYTHON:-python3}"
step "building and installing mlopt[test] with $($PYTHON --version) (C++ core, pass plugin, engine: about a minute)"
"$PYTHON" -m pip install -q --disable-pip-version-check ".[test]"
step "done: $("$PYTHON" -m mlopt --version), plugin $("$PYTHON" -m mlopt plugin-path)"
