#!/bin/sh
# instr.sh BINARY [LIBTOOL]: instructions per scope under callgrind, for bench_instr's modes.
# With LIBTOOL, valgrind runs through `LIBTOOL --mode=execute`, which finds
# the real program behind libtool's wrapper script.
# Each mode runs twice (N and 2N scopes), counting only inside its loop
# function; the difference over N is one scope's cost without the start-up.
b=$1
lt=$2
command -v valgrind >/dev/null 2>&1 || { echo "bench-instr: valgrind is not installed"; exit 0; }
tmp=${TMPDIR:-/tmp}/labelprof-instr.$$
echo "instructions per scope (callgrind, toggle-collect on the loop; the timeline stamps with CLOCK_MONOTONIC)"
echo
for spec in plain:loop_plain traced:loop_plain phase:loop_phase phase-traced:loop_phase; do
  mode=${spec%%:*}; fn=${spec#*:}
  for n in 100000 200000; do
    ${lt:+$lt --mode=execute} valgrind --tool=callgrind --callgrind-out-file="$tmp.$n" --toggle-collect="$fn" "$b" "$mode" $n >/dev/null 2>&1 || exit 1
    callgrind_annotate "$tmp.$n" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
    rm -f "$tmp.$n"
  done | { read a; read c; printf '  %-40s %6d\n' "$mode ($fn)" $(( (c - a) / 100000 )); }
done
