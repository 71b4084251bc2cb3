#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian/Ubuntu machine: LLVM 19 and 22 from apt
# (only when a tool is missing), then mlopt from this checkout with its test extras.
# Says what it is doing; each step's own output is kept short.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
step() { echo "ci/install.sh [$((SECONDS - start))s]: $*"; }

# The LLVM majors mlopt builds for (python/mlopt/_native.py LLVM_MAJORS); 22
# comes from Debian 12's security suite, which a stock sources.list has.
MAJORS="${MLOPT_LLVM_MAJORS:-19 22}"
packages=()
for major in $MAJORS; do
  for tool in opt clang llc llvm-config llvm-size ld.lld; do
    if ! command -v "$tool-$major" >/dev/null 2>&1; then
      packages+=("llvm-$major-dev" "clang-$major" "llvm-$major-tools" "lld-$major")
      break
    fi
  done
done
if [ "${#packages[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  step "installing from apt: ${packages[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi
for major in $MAJORS; do
  step "LLVM $("llvm-config-$major" --version) installed"
done

PYTHON="${PYTHON:-python3}"
step "building and installing mlopt[test] with $($PYTHON --version) (C++ core; pass plugin and engine per LLVM major: a few minutes)"
"$PYTHON" -m pip install -q --disable-pip-version-check ".[test]"
for major in $MAJORS; do
  step "LLVM $major: plugin $("$PYTHON" -m mlopt plugin-path --llvm "$major")"
done
step "done: $("$PYTHON" -m mlopt --version)"
