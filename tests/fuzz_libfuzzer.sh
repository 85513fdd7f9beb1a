#!/bin/sh
# Runs the libFuzzer targets built with -DLP_LIBFUZZER, one after the other,
# each for LP_FUZZ_SECONDS (default 10) on its own committed seeds:
#   tests/fuzz_reader_libfuzzer  the trace readers, the engine and the
#                                command's outputs (the flame graph, parsed
#                                by libxml2; --diff; stats --format csv)
#                                (tests/data/cmd and its fuzz/ directory:
#                                JSON, Perfetto, systrace text, profiles)
#   tests/fuzz_env_libfuzzer     the environment loader's parsers
#                                (tests/data/env-fuzz)
# (The systrace reader's target, tests/fuzz_systrace_lf, is run by
# tests/fuzz_systrace.sh.) A crash leaves its input in the temporary
# directory named below: add it to the target's seed directory.
# libFuzzer starts from a fixed seed (LP_FUZZ_SEED, default 1): a run in CI
# is the start of the same sequence a longer local run with that seed takes,
# so whatever it finds is found again here.
set -eu
env_data=${LP_ENV_FUZZ_DATA:-${srcdir:-.}/tests/data/env-fuzz}
failed=0

# run NAME SEED-FILES...: one target on a fresh copy of its seeds.
run() {
  fuzzer=tests/$1
  shift
  [ -x "$fuzzer" ] || { echo "fuzz_libfuzzer: $fuzzer is missing"; exit 99; }
  work=$(mktemp -d "${TMPDIR:-/tmp}/lp-libfuzzer-XXXXXX")
  mkdir "$work/corpus"
  cp "$@" "$work/corpus/"
  status=0
  # -close_fd_mask=2: the messages about each bad input are not needed here (libFuzzer's own report still shows).
  "./$fuzzer" -seed="${LP_FUZZ_SEED:-1}" -max_total_time="${LP_FUZZ_SECONDS:-10}" -timeout=10 -rss_limit_mb=1024 \
    -close_fd_mask=2 -artifact_prefix="$work/" "$work/corpus" >"$work/log" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    tail -60 "$work/log"
    echo "fuzz_libfuzzer: $fuzzer failed ($status); the input is in $work"
    failed=1
    return 0
  fi
  echo "fuzz_libfuzzer: $fuzzer: $(grep -E '^Done [0-9]+ runs' "$work/log" || tail -1 "$work/log")"
  rm -rf "$work"
}

run fuzz_reader_libfuzzer "$LP_TEST_DATA"/*.json "$LP_TEST_DATA"/*.pftrace "$LP_TEST_DATA"/*.txt \
  "$LP_TEST_DATA"/fuzz/*.json "$LP_TEST_DATA"/fuzz/*.pftrace "$LP_TEST_DATA"/fuzz/*.txt \
  "$LP_TEST_DATA"/fuzz/*.pprof "$LP_TEST_DATA"/fuzz/*.folded
run fuzz_env_libfuzzer "$env_data"/*
exit "$failed"
