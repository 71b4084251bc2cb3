#!/usr/bin/env bash
# Builds mlopt's fuzz harnesses (clang-19, libFuzzer + ASan + UBSan) and runs
# each for a time or an execution count, then prints executions, coverage
# and findings. Not part of the test suite.
#
#   fuzz/run.sh                       # 60 s per harness
#   fuzz/run.sh --time 300            # seconds per harness
#   fuzz/run.sh --runs 1000000        # executions per harness
#   fuzz/run.sh --only log_parser --runs 10000000
#
# Findings land in fuzz/build/findings/<harness>-crash-*; each one found so
# far has become a regression test (tests/test_hardening.py).
set -euo pipefail
cd "$(dirname "$0")/.."
TIME=60 RUNS="" ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --time) TIME="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    *) echo "usage: fuzz/run.sh [--time SECONDS | --runs N] [--only HARNESS]" >&2; exit 2 ;;
  esac
done
CXX="${CXX_FUZZ:-clang++-19}"
command -v "$CXX" >/dev/null || { echo "fuzz/run.sh: $CXX not found (apt install clang-19 libclang-rt-19-dev)" >&2; exit 2; }
B=fuzz/build
mkdir -p "$B/obj" "$B/findings"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
CORE=(Json TensorSpec ByteSink FileBytes TrainingLogWriter TrainingLogParser TrainingLogReader ModelTensor
      LiteRtModel CompiledPolicy PolicyModel TfliteVerifier)
objs=()
for c in "${CORE[@]}"; do
  o="$B/obj/$c.o"
  if [ ! -f "$o" ] || [ "src/core/$c.cpp" -nt "$o" ] || [ -n "$(find src/core -name '*.h' -newer "$o")" ]; then
    "$CXX" -std=c++17 -g -O2 $SAN -fsanitize=fuzzer-no-link -Isrc/core -c "src/core/$c.cpp" -o "$o"
  fi
  objs+=("$o")
done
[ -d fuzz/seeds ] || python3 fuzz/make_seeds.py --out fuzz/seeds >/dev/null
# LiteRT's runtime for model_load (the pinned wheel's), found as the plugin finds it.
export MLOPT_LITERT_LIBRARY="${MLOPT_LITERT_LIBRARY:-$(python3 -c 'import ai_edge_litert, os; print(os.path.join(os.path.dirname(ai_edge_litert.__file__), "libLiteRt.so"))')}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/fuzz/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

limit=(-max_total_time="$TIME")
[ -n "$RUNS" ] && limit=(-runs="$RUNS")
# One table row from a harness's libFuzzer log: executions, their rate over
# the seconds since $2, coverage, corpus size and saved findings.
report() {
  local h="$1" secs=$((SECONDS - $2)) execs cov
  execs=$( (grep -o 'stat::number_of_executed_units: [0-9]*' "$B/$h.log" || true) | awk '{print $2}' | tail -1)
  cov=$( (grep -o 'cov: [0-9]*' "$B/$h.log" || true) | tail -1 | awk '{print $2}')
  [ "$secs" -gt 0 ] || secs=1
  printf '%-20s %12s %10s %8s %8s %9s\n' "$h" "${execs:-?}" "$(( ${execs:-0} / secs ))" "${cov:--}" \
    "$(ls "$B/corpus/$h" | wc -l)" "$(find "$B/findings" -name "$h-*" | wc -l)"
}

printf '%-20s %12s %10s %8s %8s %9s\n' harness executions exec/s cov corpus findings
for h in log_parser tensor_spec compiled_signature tflite_verifier model_load; do
  [ -n "$ONLY" ] && [ "$ONLY" != "$h" ] && continue
  "$CXX" -std=c++17 -g -O2 $SAN -fsanitize=fuzzer -Isrc/core "fuzz/$h.cpp" "${objs[@]}" -ldl -o "$B/$h"
  mkdir -p "$B/corpus/$h"
  opts=()
  case "$h" in
    model_load) opts=(-max_len=65536 -rss_limit_mb=4096) ;;
    log_parser) opts=(-max_len=2048) ;;
  esac
  start=$SECONDS
  set +e
  "$B/$h" "$B/corpus/$h" "fuzz/seeds/$h" "${limit[@]}" "${opts[@]}" -print_final_stats=1 \
    -artifact_prefix="$B/findings/$h-" >"$B/$h.log" 2>&1
  set -e
  report "$h" "$start"
done

# Python entry points under atheris (mlopt as installed; only the documented
# error types may escape).
for t in read_log read_log_path log_stream load_policy load_policy_so output_spec corpus vocab ir2vec_vocab; do
  h="py_$t"
  [ -n "$ONLY" ] && [ "$ONLY" != "$h" ] && continue
  python3 -c 'import atheris' 2>/dev/null || { echo "$h: skipped (pip install atheris)"; continue; }
  case "$t" in
    read_log | read_log_path | log_stream) seeds=fuzz/seeds/log_parser ;;
    load_policy) seeds=fuzz/seeds/model_load ;;
    *) seeds="$B/corpus/$h" ;;  # no seeds: the harness starts from nothing
  esac
  mkdir -p "$B/corpus/$h"
  start=$SECONDS
  set +e
  ASAN_OPTIONS= python3 fuzz/python_harness.py "$t" "$B/corpus/$h" "$seeds" "${limit[@]}" -max_len=4096 \
    -print_final_stats=1 -artifact_prefix="$B/findings/$h-" >"$B/$h.log" 2>&1
  set -e
  report "$h" "$start"
done
