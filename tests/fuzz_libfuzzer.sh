#!/bin/sh
# Fuzzes the trace reader and the engine with libFuzzer (tests/fuzz_reader.c
# built with -DLP_LIBFUZZER) for LP_FUZZ_SECONDS (default 10), starting from
# the seeds of tests/data/cmd and its fuzz/ directory. A crash leaves its
# input in the temporary directory named below: add it to tests/data/cmd/fuzz/.
# libFuzzer starts from a fixed seed (LP_FUZZ_SEED, default 1): a run in CI
# is the start of the same sequence a longer local run with that seed takes,
# so whatever it finds is found again here.
set -eu
fuzzer=tests/fuzz_reader_libfuzzer
[ -x "$fuzzer" ] || { echo "fuzz_libfuzzer: $fuzzer is missing"; exit 99; }
work=$(mktemp -d "${TMPDIR:-/tmp}/lp-libfuzzer-XXXXXX")
mkdir "$work/corpus"
cp "$LP_TEST_DATA"/*.json "$LP_TEST_DATA"/fuzz/*.json "$work/corpus/"
cp "$LP_TEST_DATA"/fuzz/*.pftrace "$work/corpus/" # Perfetto's protobuf
status=0
# -close_fd_mask=2: the reader's messages about each bad input are not needed here (libFuzzer's own report still shows).
"./$fuzzer" -seed="${LP_FUZZ_SEED:-1}" -max_total_time="${LP_FUZZ_SECONDS:-10}" -timeout=10 -rss_limit_mb=1024 -close_fd_mask=2 \
  -artifact_prefix="$work/" "$work/corpus" || status=$?
if [ "$status" -ne 0 ]; then
  echo "fuzz_libfuzzer: failed ($status); the input is in $work"
  exit 1
fi
rm -rf "$work"
