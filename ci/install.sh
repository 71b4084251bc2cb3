#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian/Ubuntu machine: LLVM 19 from apt (only
# when a tool is missing), then mlopt from this checkout with its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=0
for tool in opt-19 clang-19 llc-19 llvm-config-19 llvm-size-19 ld.lld-19; do
  command -v "$tool" >/dev/null 2>&1 || missing=1
done
if [ "$missing" = 1 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "ci/install.sh: installing LLVM 19 (llvm-19-dev clang-19 llvm-19-tools lld-19)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    llvm-19-dev clang-19 llvm-19-tools lld-19 >/dev/null
fi

PYTHON="${PYTHON:-python3}"
echo "ci/install.sh: installing mlopt[test] with $($PYTHON --version)"
"$PYTHON" -m pip install -q --disable-pip-version-check ".[test]"
