#!/bin/sh
# inline.sh BINARY OBJECT [LIBTOOL]: what a label adds to the function it is
# in (#22): instructions per call under callgrind (a leaf, a function that
# ends in a call, an SQL-fronted store with labels where SQLite had them),
# bytes and callee-saved pushes from objdump of the bench's own object.
b=$1
obj=$2
lt=$3
n=200000
echo "a label in a function: bench_inline, compiled as the build compiles (CC=${CC:-cc})"
grep -m1 "model name" /proc/cpuinfo 2>/dev/null | sed 's/^model name[^:]*: */CPU: /'
grep -m1 "cpu MHz" /proc/cpuinfo 2>/dev/null | sed 's/^cpu MHz[^:]*: */clock (MHz, now): /'
echo
. "$(dirname "$0")/../tests/objdump_fn.sh"
size() { fn_size "$obj" "$1"; }
pushes() { fn_pushes "$obj" "$1"; }
lb=0 lp=0
if command -v objdump >/dev/null 2>&1; then
  printf '  %-34s %10s %10s %10s\n' "objdump" "unlabelled" "labelled" "added"
  for f in leaf call; do
    printf '  %-34s %10d %10d %10d\n' "$f: bytes" $(size ${f}_plain) $(size ${f}_label) $(( $(size ${f}_label) - $(size ${f}_plain) ))
    printf '  %-34s %10d %10d %10d\n' "$f: callee-saved pushes" $(pushes ${f}_plain) $(pushes ${f}_label) $(( $(pushes ${f}_label) - $(pushes ${f}_plain) ))
  done
  lb=$(( $(size leaf_label) - $(size leaf_plain) ))
  lp=$(( $(pushes leaf_label) - $(pushes leaf_plain) ))
else
  echo "  (objdump is not installed: no sizes)"
fi
echo
command -v valgrind >/dev/null 2>&1 || { echo "bench_inline: valgrind is not installed: no instruction counts"; exit 0; }
tmp=${TMPDIR:-/tmp}/labelprof-inline.$$
${lt:+$lt --mode=execute} valgrind --tool=callgrind --callgrind-out-file="$tmp" "$b" $n >/dev/null 2>&1 || { rm -f "$tmp"; exit 1; }
callgrind_annotate --inclusive=yes --threshold=100 "$tmp" 2>/dev/null | tr -d ',' >"$tmp.txt"
ir() { awk -v f="$1" '{ for (i = 2; i <= NF; i++) if ($i ~ ":" f "$" || $i ~ ":" f " ") { print $1; exit } }' "$tmp.txt"; }
printf '  %-34s %10s %10s %10s\n' "callgrind, instructions per call" "unlabelled" "labelled" "added"
for f in leaf call; do
  p=$(ir ${f}_plain); l=$(ir ${f}_label)
  printf '  %-34s %10.1f %10.1f %10.1f\n' "$f" $(echo "$p $l $n" | awk '{ printf "%f %f %f", $1 / $3, $2 / $3, ($2 - $1) / $3 }')
done
p=$(ir plain_run); l=$(ir lab_run)
echo "$p $l $n" | awk '{ printf "  %-34s %10.1f %10.1f %10.1f\n  %-34s %31.2f%%\n", "SQL-fronted B+tree store, per request", $1 / $3, $2 / $3, ($2 - $1) / $3, "... instructions added", 100 * ($2 - $1) / $1 }'
li=$(echo "$(ir leaf_plain) $(ir leaf_label) $n" | awk '{ printf "%.1f", ($2 - $1) / $3 }')
st=$(echo "$p $l" | awk '{ printf "%.2f", 100 * ($2 - $1) / $1 }')
rm -f "$tmp" "$tmp.txt"
verdict() { if [ "$1" = 1 ]; then echo met; else echo MISSED; fi; }
echo
echo "targets"
printf '  %-58s %8s  %s\n' "instructions added per untraced call of a labelled leaf <= 20" "$li" \
  "$(verdict $(echo "$li" | awk '{ print ($1 <= 20) }'))"
printf '  %-58s %8s  %s\n' "bytes added to the labelled leaf <= 160" "$lb" "$(verdict $(( lb <= 160 )))"
printf '  %-58s %8s  %s\n' "callee-saved pushes added to the leaf (x86-64: none)" "$lp" "$(verdict $(( lp == 0 )))"
printf '  %-58s %7s%%  %s\n' "instructions added to the store <= 1.5%" "$st" "$(verdict $(echo "$st" | awk '{ print ($1 <= 1.5) }'))"
