#!/usr/bin/env bash
# The C++-heavy tests under AddressSanitizer + UndefinedBehaviorSanitizer:
# builds mlopt with -DMLOPT_SANITIZE=ON into its own venv and build dir,
# then runs those tests with libasan preloaded (Python and the stock LLVM
# tools are not instrumented; mlopt's core, extensions and plugin are).
# Any ASan or UBSan report fails the run. Not part of the default suite.
#
#   bash ci/sanitize.sh [pytest args]     # default: the C++-heavy test files
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${MLOPT_SANITIZE_VENV:-/tmp/mlopt-sanitize-venv}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
echo "ci/sanitize.sh: building mlopt with ASan + UBSan in $VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check \
  -Cbuild-dir=build/sanitize -Ccmake.define.MLOPT_SANITIZE=ON -Ccmake.build-type=RelWithDebInfo ".[test]"
CXX="${CXX:-c++}"
ASAN_LIB="$("$CXX" -print-file-name=libasan.so)"
UBSAN_LIB="$("$CXX" -print-file-name=libubsan.so)"
TESTS=(tests/test_log_golden.py tests/test_log_roundtrip.py tests/test_log_errors.py tests/test_tensor_spec.py
       tests/test_policy_generic.py tests/test_policy_compiled.py tests/test_plugin.py tests/test_plugin_model.py
       tests/test_plugin_interactive.py tests/test_engine.py tests/test_engine_features.py
       tests/test_hardening.py tests/test_errors.py)
[ $# -gt 0 ] && TESTS=("$@")
LOG="$(mktemp -d)/sanitizer"
export LD_PRELOAD="$ASAN_LIB $UBSAN_LIB"
# Leaks are Python's and LLVM's own at exit; errors are mlopt's.
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0:log_path=$LOG:verify_asan_link_order=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$LOG"
echo "ci/sanitize.sh: running ${#TESTS[@]} test files with $ASAN_LIB"
set +e
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "${TESTS[@]}"
rc=$?
set -e
unset LD_PRELOAD
reports=$( (ls "$LOG".* 2>/dev/null || true) | wc -l)
if [ "$reports" -gt 0 ]; then
  echo "ci/sanitize.sh: $reports sanitizer report(s):"
  head -40 "$LOG".*
  exit 1
fi
echo "ci/sanitize.sh: tests exit $rc, 0 sanitizer reports"
exit $rc
