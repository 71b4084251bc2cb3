#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian/Ubuntu machine: LLVM 19 and 22 from apt
# (only when a tool is missing), LLVM 19's private regalloc headers from its
# apt-verified source package, then mlopt from this checkout with its test
# extras, and `mlopt doctor` to show what was built.
#
#   bash ci/install.sh [COMMAND ARG...]
#
# Python: $PYTHON, else python3. An externally managed interpreter (PEP 668,
# e.g. Debian's /usr/bin/python3) is not installed into: mlopt goes into the
# virtual environment .venv of this checkout ($MLOPT_VENV), created with
# python3-venv from apt when needed. COMMAND (e.g. `python3 -m mlopt demo`)
# then runs in the directory it was called from with that environment first
# on PATH, so the same two README commands work with any Python.
# $MLOPT_EXTRAS: the extras to install (default "test"; empty for none).
# Says what it is doing; each step's own output is kept short.
set -euo pipefail
caller="$PWD"
cd "$(dirname "$0")/.."
start=$SECONDS
step() { echo "ci/install.sh [$((SECONDS - start))s]: $*"; }
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
apt_install() {
  step "installing from apt: $*"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

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
# valgrind: the trace reward records with callgrind and with mlopt's own
# valgrind tool (src/valgrind), built against valgrind's tool libraries.
if ! command -v valgrind >/dev/null 2>&1 || [ ! -e "/usr/include/valgrind/pub_tool_tooliface.h" ]; then
  packages+=(valgrind)
fi
if [ "${#packages[@]}" -gt 0 ]; then
  apt_install "${packages[@]}"
fi
for major in $MAJORS; do
  step "LLVM $("llvm-config-$major" --version) installed"
done

# LLVM 19's private regalloc headers (the build takes them from this cache;
# fetched here so that what happens, or why not, shows: pip -q hides CMake).
cache="${XDG_CACHE_HOME:-$HOME/.cache}/mlopt/llvm-sources"
for major in $MAJORS; do
  [ "$major" = 19 ] || continue
  err=$(mktemp)
  if headers=$(python3 ci/llvm_private_headers.py --major "$major" --dest "$cache" 2>"$err"); then
    sed 's/^/  /' "$err"
    step "LLVM $major: private regalloc headers from its apt-verified source package: $headers"
  else
    sed 's/^/  /' "$err"
    step "WARNING: LLVM $major will be built WITHOUT regalloc eviction (the reason is above)"
  fi
  rm -f "$err"
done

PYTHON="${PYTHON:-python3}"
venv=""
if "$PYTHON" -c 'import os, sys, sysconfig
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
sys.exit(0 if sys.prefix == sys.base_prefix and os.path.exists(marker) else 1)'; then
  venv="${MLOPT_VENV:-.venv}"
  if [ ! -x "$venv/bin/python" ]; then
    if ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
      apt_install "python3-venv" "python$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')-venv"
    fi
    step "$("$PYTHON" -c 'import sys; print(sys.executable)') is externally managed (PEP 668): creating the virtual environment $venv"
    "$PYTHON" -m venv "$venv"
  fi
  PYTHON="$venv/bin/python"
fi
if ! "$PYTHON" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  apt_install "python$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')-dev"
fi

# A developer's link of the package into a checkout (site-packages/mlopt ->
# .../python/mlopt) would have pip write the wheel through it into that
# checkout, where the plugin finds no LiteRT beside it: the link goes, and
# the wheel is installed in its place.
for link in $("$PYTHON" -c 'import os, sysconfig
for path in sorted({os.path.join(sysconfig.get_paths()[key], "mlopt") for key in ("purelib", "platlib")}):
    if os.path.islink(path):
        print(path)'); do
  step "replacing the link $link -> $(readlink "$link") by an installed mlopt"
  rm -f "$link"
  rm -rf "$(dirname "$link")"/mlopt-*.dist-info
done

extras="${MLOPT_EXTRAS-test}"
target="."
[ -z "$extras" ] || target=".[$extras]"
step "building and installing mlopt$([ -z "$extras" ] || echo "[$extras]") with $("$PYTHON" --version)${venv:+ in $venv} (C++ core; pass plugin and engine per LLVM major: a few minutes)"
# One wheel per source tree and Python ABI, kept in build/wheels/<tree>: a
# second install of the same checkout with another interpreter of the same
# ABI (CI: pyenv's python3.11, then Debian's /usr/bin/python3.11) installs
# it instead of compiling the C++ again. A checkout with uncommitted changes
# is always built.
wheel=""
if tree=$(git rev-parse -q --verify 'HEAD^{tree}' 2>/dev/null) && [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  abi=$("$PYTHON" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  wheels="build/wheels/$tree"
  wheel=$(ls "$wheels"/mlopt-*-"$abi"-"$abi"-*.whl 2>/dev/null | head -n 1 || true)
  if [ -n "$wheel" ]; then
    step "reusing $wheel (built from this source tree for $abi)"
  else
    "$PYTHON" -m pip wheel -q --disable-pip-version-check --no-deps -w "$wheels" .
    wheel=$(ls "$wheels"/mlopt-*-"$abi"-"$abi"-*.whl 2>/dev/null | head -n 1 || true)
  fi
fi
if [ -n "$wheel" ]; then
  spec="mlopt$([ -z "$extras" ] || echo "[$extras]") @ file://$PWD/$wheel"
  "$PYTHON" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$PWD/$wheel"
  "$PYTHON" -m pip install -q --disable-pip-version-check "$spec"
else
  "$PYTHON" -m pip install -q --disable-pip-version-check "$target"
fi
step "mlopt doctor:"
"$PYTHON" -m mlopt doctor | sed 's/^/  /'
if [ -n "$venv" ]; then
  step "done: $("$PYTHON" -m mlopt --version) in $venv; use it in a shell with: . $venv/bin/activate"
  export VIRTUAL_ENV="$PWD/$venv"
  export PATH="$PWD/$venv/bin:$PATH"
else
  step "done: $("$PYTHON" -m mlopt --version)"
  # COMMAND's python3 is the interpreter mlopt went into (e.g. PYTHON=/some/venv/bin/python)
  exe=$("$PYTHON" -c 'import sys; print(sys.executable)')
  if [ "$(command -v python3 >/dev/null && python3 -c 'import sys; print(sys.executable)')" != "$exe" ]; then
    export PATH="$(dirname "$exe"):$PATH"
  fi
fi
if [ "$#" -gt 0 ]; then
  cd "$caller"
  step "running: $*"
  exec "$@"
fi
