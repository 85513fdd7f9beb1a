#!/bin/sh
# fuzz_systrace.sh: a bounded fuzzing run of the systrace reader and the NNAPI
# summary (LP_FUZZ_SECONDS, default 10). The seeds are the NNAPI example
# traces and tests/data/systrace-fuzz/, which also keeps every input that
# once crashed (they run first, every time).
# libFuzzer starts from a fixed seed (LP_FUZZ_SEED, default 1): a run in CI
# is the start of the same sequence a longer local run with that seed takes,
# so whatever it finds is found again here.
srcdir=${srcdir:-.}
secs=${LP_FUZZ_SECONDS:-10}
seeds="$srcdir/tests/data/nnapi $srcdir/tests/data/systrace-fuzz"
if [ -x tests/fuzz_systrace_lf ]; then
  . "$srcdir/tests/sh_common.sh"
  test_tmpdir fuzz_systrace_sh
  work=$tmp
  cp "$srcdir"/tests/data/nnapi/*.txt "$srcdir"/tests/data/systrace-fuzz/* "$work"/ || exit 99
  # crashers are written as fuzz-systrace-crash-*; copy them into tests/data/systrace-fuzz/
  tests/fuzz_systrace_lf -seed="${LP_FUZZ_SEED:-1}" -max_total_time="$secs" -max_len=65536 -timeout=20 -rss_limit_mb=2048 -close_fd_mask=2 \
    -artifact_prefix=fuzz-systrace- "$work" >"$work/log" 2>&1
  rc=$?
  tail -3 "$work/log"
  [ $rc -eq 0 ] || { cat "$work/log" | tail -60; exit 1; }
  exit 0
fi
LP_FUZZ_SECONDS=$secs exec tests/fuzz_systrace $seeds
