#!/bin/sh
# nnapi_cli.sh: `labelprof nnapi` against AOSP's own outputs, byte for byte,
# and `labelprof nnapi`, `layers` and `stats` on malformed systrace input.
#
# tests/data/nnapi/MANIFEST.tsv lists each trace, its flags, the expected
# exit status and outcome (ok, incomplete, fatal) and the file with the
# expected standard output. For a fatal outcome AOSP's parser dies with a
# traceback; labelprof must exit 1 with a message naming the line.
srcdir=${srcdir:-.}
data=$srcdir/tests/data/nnapi
lp=./tools/labelprof
. "$srcdir/tests/sh_common.sh"
test_tmpdir nnapi_cli
pass=0
ok() { pass=$((pass + 1)); }

# (empty fields: awk keeps them, read with a tab IFS would merge them)
awk -F '\t' '{ print $1 "|" $2 "|" $3 "|" $4 "|" $6 }' "$data/MANIFEST.tsv" >"$tmp/manifest"
while IFS='|' read -r input flags status outcome expected; do
  [ "$input" = input ] && continue
  [ "$flags" = - ] && flags=
  # shellcheck disable=SC2086
  $lp nnapi $flags "$data/$input" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  case $outcome in
    fatal)
      if [ $rc -eq 1 ] && grep -q "$input:[0-9]*: " "$tmp/err"; then ok; else bad "$input $flags: exit $rc, want 1 and a message with a line"; cat "$tmp/err"; fi ;;
    *)
      if [ $rc -ne "$status" ]; then bad "$input $flags: exit $rc, want $status"; cat "$tmp/err"
      elif ! cmp -s "$tmp/out" "$data/$expected"; then bad "$input $flags: output differs from $expected"; diff "$data/$expected" "$tmp/out" | head -20
      elif [ "$outcome" = incomplete ] && ! grep -q '^Incomplete trace, not able to print all statistics$' "$tmp/err"; then bad "$input $flags: no Incomplete notice"
      else ok; fi ;;
  esac
done <"$tmp/manifest"

# Per execution with a warmup and a benchmark (benchmark.txt: one warmup
# execution, two benchmark ones). AOSP's parser, before it prints such a run
# per execution, overwrites in the table it prints (self times; total times
# with --total-times) the execution phase and each of its subphases (PE, PIO,
# PTR, PCO, PR), for every layer and the total, with that table's benchmark
# (PBM) figures; its JSON then dumps both tables, so the printed one shows the
# benchmark under PE.. and the other keeps the whole run's figures. The
# expected files were derived by that rule from the whole run's `--json`
# output (its "PBM" sub-tables and the unchanged table); the check below
# derives them again with python3, and the files are compared byte for byte.
for fl in per-execution-json per-execution-total-times-json; do
  case $fl in
    per-execution-json) flags='--per-execution --json' ;;
    *) flags='--per-execution --total-times --json' ;;
  esac
  # shellcheck disable=SC2086
  $lp nnapi $flags "$data/benchmark.txt" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -ne 0 ]; then bad "benchmark.txt $flags: exit $rc"; cat "$tmp/err"
  elif ! cmp -s "$tmp/out" "$data/benchmark.$fl.out"; then bad "benchmark.txt $flags: output differs"; diff "$data/benchmark.$fl.out" "$tmp/out" | head -20
  else ok; fi
done
if command -v python3 >/dev/null 2>&1; then
  $lp nnapi --json "$data/benchmark.txt" >"$tmp/whole.json" 2>/dev/null
  $lp nnapi --per-execution --json "$data/benchmark.txt" >"$tmp/pe.json" 2>/dev/null
  $lp nnapi --per-execution --total-times --json "$data/benchmark.txt" >"$tmp/pett.json" 2>/dev/null
  if python3 - "$tmp/whole.json" "$tmp/pe.json" "$tmp/pett.json" <<'EOF'
import copy, json, sys
whole = json.load(open(sys.argv[1]))[0]
for path, printed in ((sys.argv[2], "self_times"), (sys.argv[3], "times")):
    got = json.load(open(path))[0]
    want = copy.deepcopy(whole)
    for p in ("PE", "PIO", "PTR", "PCO", "PR"):
        want[printed][p] = want[printed]["PBM"][p]
    for key in ("execution_counts", "self_times", "times", "starting_mark"):
        if got[key] != want[key]:
            sys.exit("%s: %s differs from the rule's %s" % (path, key, key))
    n = got["execution_counts"]["PBM"]
    for layer, v in want[printed]["PE"].items():
        t = got["template_inputs"]["%s_PE" % layer]
        if (v is None) != (t is None) or (v is not None and t != v / n):
            sys.exit("%s: template_inputs %s_PE is %r, want %r / %d" % (path, layer, t, v, n))
EOF
  then ok; else bad "benchmark.txt: per-execution JSON does not follow AOSP's rule"; fi
fi

hdr='#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION'
# expect STATUS PATTERN SUBCOMMAND FILE: exit status and a stderr line matching PATTERN
expect() {
  want=$1 pat=$2
  shift 2
  "$lp" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -ne "$want" ]; then bad "$*: exit $rc, want $want"; cat "$tmp/err"
  elif [ -n "$pat" ] && ! grep -q -- "$pat" "$tmp/err"; then bad "$*: stderr lacks '$pat'"; cat "$tmp/err"
  else ok; fi
}

# empty file: AOSP's notice and an empty table; stats: not a trace
: >"$tmp/empty.txt"
expect 0 'No NNAPI Runtime trace present' nnapi "$tmp/empty.txt"
expect 2 'empty.txt' stats "$tmp/empty.txt"
# garbage
printf '\001\002garbage\377\376\n<<<>>>\n' >"$tmp/garbage.txt"
expect 0 'No NNAPI Runtime trace present' nnapi "$tmp/garbage.txt"
# an E with nothing open
printf '%s\n  p-100  (  100) [000] ...1  10.000000: tracing_mark_write: E|100\n  p-100  (  100) [000] ...1  10.000001: tracing_mark_write: B|100|[NN_LR_PP]x\n' "$hdr" >"$tmp/e.txt"
expect 1 'e.txt:2: unmatched end' nnapi "$tmp/e.txt"
expect 2 'e.txt:2:1: an end (E) with nothing open' layers "$tmp/e.txt"
# a B without a pid where the process must come from the mark (old header, no TGID column)
printf '#           TASK-PID   CPU#  ||||    TIMESTAMP  FUNCTION\n  p-100  [000] ...1  10.000000: tracing_mark_write: B\n' >"$tmp/nopid.txt"
expect 1 'nopid.txt:2: no process id' nnapi "$tmp/nopid.txt"
expect 2 'nopid.txt:2:1: no process id' stats "$tmp/nopid.txt"
# a truncated mark line (no timestamp fraction, cut before the mark)
printf '%s\n  p-100  (  100) [000] ...1  10: tracing_mark_write: B|100|[NN_LR_PP]x\n' "$hdr" >"$tmp/trunc.txt"
expect 1 'trunc.txt:2: unreadable line' nnapi "$tmp/trunc.txt"
expect 2 'trunc.txt:2:1: unreadable line' stats "$tmp/trunc.txt"
printf '%s\n  p-100  (  100) [000] ...1  10.000000: tracing_mark_write: B|100|[NN_LR_PP]x\n  p-100  (  100) [0' "$hdr" >"$tmp/cut.txt"
expect 0 'Incomplete trace' nnapi "$tmp/cut.txt"
# a bad tag, a nesting violation, a warmup without a benchmark
printf '%s\n  p-100  (  100) [000] ...1  10.000000: tracing_mark_write: B|100|[NN_LR]x\n' "$hdr" >"$tmp/tag.txt"
expect 1 'tag.txt:2: bad tag' nnapi "$tmp/tag.txt"
printf '%s\n  p-100  (  100) [000] ...1  10.000000: tracing_mark_write: B|100|[NN_LA_PWU]w\n  p-100  (  100) [000] ...1  10.000001: tracing_mark_write: B|100|[NN_LA_PE]e\n  p-100  (  100) [000] ...1  10.000002: tracing_mark_write: E|100\n  p-100  (  100) [000] ...1  10.000003: tracing_mark_write: E|100\n' "$hdr" >"$tmp/wu.txt"
expect 1 'warmup without benchmark' nnapi "$tmp/wu.txt"
expect 0 '' layers "$tmp/wu.txt"

# beyond AOSP: Linux 5's header with TGID dashes, long task names, trace-cmd report
{
  echo '#           TASK-PID     TGID     CPU#  |||||  TIMESTAMP  FUNCTION'
  echo '            app-100     (    100) [001] .....    10.000000: tracing_mark_write: B|100|[NN_LR_PP]prepare'
  echo ' a_much_longer_task_name-101 (-------) [001] .....    10.001000: tracing_mark_write: B|100|[NN_LR_PC]compile'
  echo ' a_much_longer_task_name-101 (-------) [001] .....    10.004000: tracing_mark_write: E|100'
  echo '            app-100     (    100) [001] .....    10.002000: tracing_mark_write: E|100'
} >"$tmp/linux5.txt"
$lp nnapi --total-times "$tmp/linux5.txt" >"$tmp/out" 2>"$tmp/err"
if grep -q '^Runtime  *-  *2.00  *3.00 ' "$tmp/out"; then ok; else bad "linux5 header: want Runtime 2.00 / 3.00"; cat "$tmp/out" "$tmp/err"; fi
{
  echo '# tracer: nop'
  echo '#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION'
  echo '#              | |         |   |||||     |         |'
  echo '            app-100     [001] d..1.    10.000000: tracing_mark_write: B|100|[NN_LR_PP]prepare'
  echo '            app-100     [001] d..1.    10.001500: tracing_mark_write: E'
} >"$tmp/linux5-notgid.txt"
$lp nnapi --total-times "$tmp/linux5-notgid.txt" >"$tmp/out" 2>"$tmp/err"
if grep -q '^Runtime  *-  *1.50 ' "$tmp/out"; then ok; else bad "linux5 header without TGID: want Runtime 1.50"; cat "$tmp/out" "$tmp/err"; fi
$lp stats --format csv "$tmp/linux5-notgid.txt" >"$tmp/out" 2>"$tmp/err"
if grep -q '^prepare,1,1500000' "$tmp/out"; then ok; else bad "stats on linux5 text"; cat "$tmp/out" "$tmp/err"; fi
{
  echo 'cpus=2'
  echo '             app-100   [001]    10.000000: print:                tracing_mark_write: B|100|[NN_LR_PP]prepare'
  echo '             app-100   [001]    10.002500: print:                tracing_mark_write: E|100'
} >"$tmp/tracecmd.txt"
$lp nnapi --total-times "$tmp/tracecmd.txt" >"$tmp/out" 2>"$tmp/err"
if grep -q '^Runtime  *-  *2.50 ' "$tmp/out"; then ok; else bad "trace-cmd report: want Runtime 2.50"; cat "$tmp/out" "$tmp/err"; fi
# HTML: the trace data inside <script>, \r\n line ends; stats reads it too
{
  printf '<!DOCTYPE html>\r\n<html><head></head><body>\r\n<script class="trace-data" type="application/text">\r\n'
  printf '# tracer: nop\r\n%s\r\n' "$hdr"
  printf '  p-100  (  100) [000] ...1  10.000000: tracing_mark_write: B|100|[NN_LR_PP]prepare\r\n'
  printf '  p-100  (  100) [000] ...1  10.004000: tracing_mark_write: E|100\r\n'
  printf '  </script>\r\n'
  printf '  p-100  (  100) [000] ...1  11.000000: tracing_mark_write: B|100|[NN_LR_PP]after\r\n</body></html>\r\n'
} >"$tmp/trace.html"
$lp nnapi "$tmp/trace.html" >"$tmp/out" 2>"$tmp/err"
if grep -q '^Runtime  *-  *4.00 ' "$tmp/out"; then ok; else bad "html: want Runtime 4.00"; cat "$tmp/out" "$tmp/err"; fi
$lp stats --format csv "$tmp/trace.html" >"$tmp/out" 2>"$tmp/err"
if grep -q '^prepare,1,4000000,4000000' "$tmp/out" && ! grep -q after "$tmp/out"; then ok; else bad "stats on html"; cat "$tmp/out" "$tmp/err"; fi
gzip -c "$tmp/trace.html" >"$tmp/trace.html.gz" 2>/dev/null && {
  $lp stats --format csv "$tmp/trace.html.gz" >"$tmp/out" 2>"$tmp/err"
  if grep -q '^prepare,1,4000000' "$tmp/out"; then ok; else bad "stats on gzipped html"; cat "$tmp/out" "$tmp/err"; fi
  $lp nnapi "$tmp/trace.html.gz" >"$tmp/out" 2>"$tmp/err"
  if grep -q '^Runtime  *-  *4.00 ' "$tmp/out"; then ok; else bad "nnapi on gzipped html"; cat "$tmp/out" "$tmp/err"; fi
  $lp nnapi - <"$tmp/trace.html" >"$tmp/out" 2>"$tmp/err"
  if grep -q '^Runtime  *-  *4.00 ' "$tmp/out"; then ok; else bad "nnapi on standard input"; cat "$tmp/out" "$tmp/err"; fi
}

# Streams: a FIFO, a pipe named by path (as `<(...)` gives it), gzip on
# standard input (redirected and piped): the input is opened once and its
# format sniffed from the bytes already read, so each gives AOSP's output.
# (A reader that opens a FIFO twice waits forever for a second writer:
# `timeout`, where there is one, turns that into a failure.)
guard=
command -v timeout >/dev/null 2>&1 && guard='timeout 60'
# finish_writer PID: the FIFO's writer (less than a pipe's buffer) ends even
# if nothing read it all: opened for reading and writing, the FIFO never blocks.
finish_writer() {
  exec 3<>"$tmp/fifo"
  wait "$1"
  exec 3<&-
}
if command -v gzip >/dev/null 2>&1 && mkfifo "$tmp/fifo" 2>/dev/null; then
  cat "$data/driver.txt" >"$tmp/fifo" &
  wpid=$!
  $guard $lp nnapi "$tmp/fifo" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  finish_writer $wpid
  if [ $rc -eq 0 ] && cmp -s "$tmp/out" "$data/driver.default.out"; then ok; else bad "nnapi on a FIFO: exit $rc"; cat "$tmp/err"; fi
  cat "$data/driver.txt" | $lp nnapi --json /dev/stdin >"$tmp/out" 2>"$tmp/err"
  if cmp -s "$tmp/out" "$data/driver.json.out"; then ok; else bad "nnapi on a pipe given by its path"; cat "$tmp/err"; fi
  gzip -c "$data/driver.txt" >"$tmp/driver.txt.gz"
  $lp nnapi - <"$tmp/driver.txt.gz" >"$tmp/out" 2>"$tmp/err"
  if cmp -s "$tmp/out" "$data/driver.default.out"; then ok; else bad "nnapi on gzip from standard input"; cat "$tmp/err"; fi
  cat "$tmp/driver.txt.gz" | $lp nnapi --per-execution - >"$tmp/out" 2>"$tmp/err"
  if cmp -s "$tmp/out" "$data/driver.per-execution.out"; then ok; else bad "nnapi on gzip piped to standard input"; cat "$tmp/err"; fi
  cat "$tmp/driver.txt.gz" >"$tmp/fifo" &
  wpid=$!
  $guard $lp nnapi --total-times "$tmp/fifo" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  finish_writer $wpid
  if [ $rc -eq 0 ] && cmp -s "$tmp/out" "$data/driver.total-times.out"; then ok; else bad "nnapi on gzip through a FIFO: exit $rc"; cat "$tmp/err"; fi

  # Memory: what nnapi holds (the longest line, the threads, a run's call
  # trees) stays under --max-memory (1 GiB by default); past it, exit 2 and
  # a message with the file, the line and the limit. A gzip bomb (32 MiB of
  # zeros, one line, from about 32 KiB) and 300,000 scopes of one run (a few
  # hundred KiB compressed), each against a 4 MiB limit.
  head -c 33554432 /dev/zero | gzip -c >"$tmp/zeros.gz"
  $lp nnapi --max-memory 4M "$tmp/zeros.gz" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 2 ] && grep -q "zeros.gz:1: a line longer than the memory limit of 4 MiB" "$tmp/err"; then ok
  else bad "nnapi on a gzip bomb: exit $rc, want 2 and the limit"; cat "$tmp/err"; fi
  $lp nnapi --max-memory 4M - <"$tmp/zeros.gz" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 2 ] && grep -q "<stdin>:1: a line longer than the memory limit of 4 MiB" "$tmp/err"; then ok
  else bad "nnapi on a gzip bomb on standard input: exit $rc, want 2 and the limit"; cat "$tmp/err"; fi
  awk -v hdr="$hdr" 'BEGIN {
    print hdr
    for (i = 0; i < 300000; i++) {
      printf "  p-100  (  100) [000] ...1  %d.%06d: tracing_mark_write: B|100|[NN_LR_PC]compile\n", 10 + int(i / 500000), (2 * i) % 1000000
      printf "  p-100  (  100) [000] ...1  %d.%06d: tracing_mark_write: E|100\n", 10 + int(i / 500000), (2 * i + 1) % 1000000
    }
  }' | gzip -c >"$tmp/scopes.gz"
  $lp nnapi --max-memory 4M "$tmp/scopes.gz" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 2 ] && grep -q "scopes.gz:[0-9]*: more than the memory limit of 4 MiB" "$tmp/err"; then ok
  else bad "nnapi on 300,000 scopes: exit $rc, want 2 and the limit"; cat "$tmp/err"; fi
  # and under the default limit the same file is read
  $lp nnapi --total-times "$tmp/scopes.gz" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 0 ] && grep -q '^Runtime  *-  *-  *300.00 ' "$tmp/out"; then ok; else bad "nnapi on 300,000 scopes: exit $rc"; cat "$tmp/out" "$tmp/err"; fi
  $lp nnapi --max-memory 0 "$tmp/scopes.gz" >"$tmp/out" 2>"$tmp/err"
  if [ $? -eq 2 ] && grep -q -- '--max-memory takes a size' "$tmp/err"; then ok; else bad "--max-memory 0 accepted"; fi
fi

# layers on labelprof's JSON: initialization moved out of compilation, subphases
# rolled into execution, overall self time = the sum of the phases' self times
$lp layers "$srcdir/tests/data/layers/app.json" >"$tmp/out" 2>"$tmp/err"
if grep -q '^runtime  *2.000  *-  *3.000  *5.000  .*5.000  *15.000$' "$tmp/out" &&
   grep -q '^cpu  *-  *-  *-  *25.000  *3.000  *-  *20.000  *2.000  *-  *25.000$' "$tmp/out" &&
   grep -q '^application .* 6.000$' "$tmp/out"; then ok; else bad "layers on JSON"; cat "$tmp/out" "$tmp/err"; fi
$lp layers --total-times "$srcdir/tests/data/layers/app.json" >"$tmp/out" 2>"$tmp/err"
if grep -q '^runtime  *2.000  *-  *7.000  *30.000 .* 44.000$' "$tmp/out" && grep -q '^application .* 50.000$' "$tmp/out"; then ok; else bad "layers --total-times on JSON"; cat "$tmp/out" "$tmp/err"; fi

echo "nnapi_cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
