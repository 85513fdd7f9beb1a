#!/bin/sh
# encoder.sh BINARY [LIBTOOL]: the stream's encoder (#32 item 5), counted by
# callgrind: instructions an event in lp__pfs_chunk (inclusive: the copy of
# ready packets, the clock's line, the scopes' matching, the general path
# of each chunk's first event), and bytes an event, on two shapes of work
# (bench_encoder.c): tight scopes (the stream of 2 threads x 100,000 scopes
# the issue measured, 58.9 instructions an event before), and the peers'
# workload (scopes of 1.8 us in ones of 200 us).
b=$1
lt=$2
n=200000
echo "the stream's encoder: bench_encoder under callgrind, lp__pfs_chunk inclusive"
grep -m1 "model name" /proc/cpuinfo 2>/dev/null | sed 's/^model name[^:]*: */CPU: /'
grep -m1 "cpu MHz" /proc/cpuinfo 2>/dev/null | sed 's/^cpu MHz[^:]*: */clock (MHz, now): /'
echo "events: $n per shape, 2 threads, 16 KiB chunks, a 2.1 GHz counter's clock line"
echo
command -v valgrind >/dev/null 2>&1 || { echo "encoder.sh: valgrind is not installed: no instruction counts"; exit 0; }
tmp=${TMPDIR:-/tmp}/labelprof-encoder.$$
verdict() { if [ "$1" = 1 ]; then echo met; else echo MISSED; fi; }
printf '  %-44s %12s %12s\n' "" "instr/event" "bytes/event"
ok=1
for shape in tight peers; do
  out=$(${lt:+$lt --mode=execute} valgrind --tool=callgrind --callgrind-out-file="$tmp" "$b" $shape $n 2>/dev/null) || {
    rm -f "$tmp"
    echo "encoder.sh: bench_encoder $shape failed"
    exit 1
  }
  ir=$(callgrind_annotate --inclusive=yes --threshold=100 "$tmp" 2>/dev/null | tr -d ',' |
    awk '{ for (i = 2; i <= NF; i++) if ($i ~ ":lp__pfs_chunk$" || $i ~ ":lp__pfs_chunk ") { print $1; exit } }')
  rm -f "$tmp"
  set -- $out
  line=$(echo "$ir $1 $2" | awk '{ printf "%12.1f %12.2f", $1 / $2, $3 / $2 }')
  case $shape in
  tight) printf '  %-44s %s\n' "tight scopes (99 in each outer one)" "$line" ;;
  peers) printf '  %-44s %s\n' "the peers' workload (1.8 us in 200 us)" "$line" ;;
  esac
  eval "ipe_$shape=\$(echo \"\$ir \$1\" | awk '{ printf \"%.1f\", \$1 / \$2 }')"
  eval "bpe_$shape=\$(echo \"\$1 \$2\" | awk '{ printf \"%.2f\", \$2 / \$1 }')"
done
echo
echo "targets"
printf '  %-58s %8s  %s\n' "instructions an event <= 25 (tight scopes)" "$ipe_tight" \
  "$(verdict $(echo "$ipe_tight" | awk '{ print ($1 <= 25) }'))"
printf '  %-58s %8s  %s\n' "instructions an event <= 25 (the peers' workload)" "$ipe_peers" \
  "$(verdict $(echo "$ipe_peers" | awk '{ print ($1 <= 25) }'))"
printf '  %-58s %8s  %s\n' "bytes an event <= 12.5 (the peers' workload)" "$bpe_peers" \
  "$(verdict $(echo "$bpe_peers" | awk '{ print ($1 <= 12.5) }'))"
