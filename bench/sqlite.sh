#!/bin/sh
# sqlite.sh SQLITE3_C [BUILD_DIR]: what ten labels add to SQLite itself
# (#22), counted with callgrind. Run by hand; not part of `make bench`, since
# SQLite is not in this tree. SQLITE3_C is an amalgamation's sqlite3.c, with
# its sqlite3.h beside it; BUILD_DIR is where this tree was built (default:
# the current directory, then this script's tree), for include/ and
# .libs/liblabelprof.a. LABELPROF_CFLAGS and LABELPROF_LIBS replace both
# (for an installed library: $(pkg-config --cflags --libs labelprof)).
# An amalgamation: `npm pack better-sqlite3` has one in deps/sqlite3/ of its
# tarball; sqlite.org has them as sqlite-amalgamation-*.zip.
#
# It makes a copy of sqlite3.c with `LP_SCOPE("label");` as the first
# statement of ten functions, the store's nine in bench/inline_work.h, where
# SQLite had them, and the index seek:
#   prepare          sqlite3LockAndPrepare      a statement's preparation
#   parse            sqlite3RunParser           the parser
#   vdbe_exec        sqlite3VdbeExec            the bytecode engine
#   btree_insert     sqlite3BtreeInsert         a B-tree insert
#   btree_seek       sqlite3BtreeTableMoveto    seek by rowid (older SQLite:
#                                               sqlite3BtreeMovetoUnpacked)
#   btree_index_seek sqlite3BtreeIndexMoveto    seek by index key (older
#                                               SQLite: sqlite3VdbeSorterWrite)
#   btree_next       sqlite3BtreeNext           a cursor's next row
#   btree_balance    balance                    a page split or merge
#   sorter_sort      vdbeSorterSort             the sorter's in-memory sort
#   pager_commit     sqlite3PagerCommitPhaseOne a transaction's commit
# and `#include <labelprof.h>` after SQLite's own #include <stdio.h>, as the
# header asks: the amalgamation defines _GNU_SOURCE and _FILE_OFFSET_BITS
# at its top, before its first system header. A third copy counts the
# functions' entries instead (sqlite_work_calls[]).
#
# bench/sqlite_work.c (an application's statements, see its header) is built
# against each copy with the same flags, CC -O2 -gdwarf-4 (CC=gcc by
# default), SQLITE_THREADSAFE=0, SQLITE_OMIT_LOAD_EXTENSION, and run under
# callgrind untraced (no LABELPROF_* variable set). Printed: instructions
# without and with labels, the labelled calls executed (from the counting
# copy), instructions added per labelled call; and per label, the
# function's own instructions, with those on labelprof/impl.h's lines (the
# label's inline code) apart from the rest (the function's own code, which
# the compiler laid out otherwise), and its bytes and pushes. Then the
# labelled copy built with -DLABELPROF_DISABLE (it must add nothing) and,
# when clang is installed (CLANG=clang by default, CLANG= to skip), the same
# pair built with clang. Each run's checksum of what its queries read must
# match the counting run's.
#
# N=rows (default 100000) sizes the work: 2-3 s natively and about a
# minute under callgrind per run at the default. WORK=DIR keeps the files there;
# otherwise they go in a directory under ${TMPDIR:-/tmp}, removed at the end.
set -u
usage() { echo "usage: sh bench/sqlite.sh SQLITE3_C [BUILD_DIR]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
c=$1
[ -r "$c" ] || { echo "sqlite.sh: $c: cannot read it (want an amalgamation's sqlite3.c)" >&2; exit 2; }
cdir=$(cd "$(dirname "$c")" && pwd)
[ -r "$cdir/sqlite3.h" ] || { echo "sqlite.sh: $cdir/sqlite3.h: not found (it must be beside sqlite3.c)" >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ge 2 ]; then build=$2
elif [ -r ./.libs/liblabelprof.a ]; then build=.
else build=$src
fi
build=$(cd "$build" && pwd) || exit 2
if [ -z "${LABELPROF_LIBS:-}" ]; then
  [ -r "$build/.libs/liblabelprof.a" ] || { echo "sqlite.sh: $build/.libs/liblabelprof.a: not found (build this tree first, or set LABELPROF_CFLAGS and LABELPROF_LIBS)" >&2; exit 2; }
  LABELPROF_CFLAGS="-I$src/include -I$build/include"
  LABELPROF_LIBS="$build/.libs/liblabelprof.a -lpthread"
fi
LABELPROF_CFLAGS=${LABELPROF_CFLAGS:-}
CC=${CC:-gcc}
CLANG=${CLANG-clang}
N=${N:-100000}
for t in valgrind callgrind_annotate nm objdump "$CC"; do
  command -v "$t" >/dev/null 2>&1 || { echo "sqlite.sh: $t is not installed" >&2; exit 2; }
done
if [ -n "${WORK:-}" ]; then
  w=$WORK
  mkdir -p "$w" || exit 2
else
  w=$(mktemp -d "${TMPDIR:-/tmp}/labelprof-sqlite.XXXXXX") || exit 2
  trap 'rm -rf "$w"' EXIT
  trap 'exit 1' INT TERM
fi
# -g changes no instruction (gcc checks as much with -fcompare-debug); it lets
# callgrind tell the label's inline code, on labelprof's header lines, from
# the function's own lines. DWARF 4: valgrind 3.19 cannot read clang 14's 5.
flags="-O2 -gdwarf-4 -DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION"

# Slot by slot: label, then the function (the first of "a|b" that is defined).
slots="prepare:sqlite3LockAndPrepare|sqlite3Prepare
parse:sqlite3RunParser
vdbe_exec:sqlite3VdbeExec
btree_insert:sqlite3BtreeInsert
btree_seek:sqlite3BtreeTableMoveto|sqlite3BtreeMovetoUnpacked
btree_index_seek:sqlite3BtreeIndexMoveto|sqlite3VdbeSorterWrite
btree_next:sqlite3BtreeNext
btree_balance:balance
sorter_sort:vdbeSorterSort
pager_commit:sqlite3PagerCommitPhaseOne"
# The awk function first(s): the position in s of the first "{" or ";"
# outside comments (0: none), and in `what` which.
first='
    function first(s,   i, ch, cm) {
      for (i = 1; i <= length(s); i++) {
        ch = substr(s, i, 1)
        if (cm) { if (substr(s, i, 2) == "*/") { cm = 0; i++ } continue }
        if (substr(s, i, 2) == "/*") { cm = 1; i++; continue }
        if (substr(s, i, 2) == "//") return 0
        if (ch == "{" || ch == ";") { what = ch; return i }
      }
      return 0
    }'
# defined FUNCTION: whether sqlite3.c defines it (its name on a line that
# starts a declaration, then a parameter list that ends in a brace).
defined() {
  awk -v f="$1" "$first"'
    !on && /^[A-Za-z_]/ && match($0, "[ *]" f "\\(") { on = 1 }
    on && first($0) { if (what == "{") { found = 1; exit } on = 0 }
    END { exit !found }' "$c"
}
labels='' funcs=''
IFS_=$IFS
for s in $slots; do
  l=${s%%:*} f=
  IFS='|'
  for cand in ${s#*:}; do
    IFS=$IFS_
    if defined "$cand"; then f=$cand; break; fi
  done
  IFS=$IFS_
  [ -n "$f" ] || { echo "sqlite.sh: $c: no definition of ${s#*:} (for the label $l): is this an amalgamation?" >&2; exit 2; }
  labels="$labels $l" funcs="$funcs $f"
done
version=$(sed -n 's/^#define SQLITE_VERSION  *"\(.*\)".*/\1/p' "$cdir/sqlite3.h" | head -n 1)

# instrument MODE OUT: the copy of sqlite3.c with a label (MODE=label) or a
# counter (MODE=count) first in each function, on the line of its brace so
# that line numbers stay.
instrument() {
  awk -v mode="$1" -v labels="$labels" -v funcs="$funcs" "$first"'
    BEGIN { n = split(funcs, fn, " "); split(labels, lb, " ") }
    !inc && /^#include <stdio.h>/ {
      print
      if (mode == "label") print "#include <labelprof.h>"
      else {
        printf "unsigned long long sqlite_work_calls[%d]; const int sqlite_work_nnames = %d; const char *const sqlite_work_names[] = {", n, n
        for (i = 1; i <= n; i++) printf "%s\"%s\"", (i > 1 ? ", " : ""), lb[i]
        print "};"
      }
      printf "#line %d\n", NR + 1   # as in the original: SQLite compiles __LINE__ into its code
      inc = 1; next
    }
    !on && /^[A-Za-z_]/ { for (i = 1; i <= n; i++) if (match($0, "[ *]" fn[i] "\\(")) { on = i; break } }
    on { p = first($0)
         if (p && what == ";") on = 0
         else if (p) {
           if (!inc) { print "sqlite.sh: " fn[on] " comes before any #include <stdio.h>" > "/dev/stderr"; exit 1 }
           add = mode == "label" ? " LP_SCOPE(\"" lb[on] "\");" : " sqlite_work_calls[" on - 1 "]++;"
           $0 = substr($0, 1, p) add substr($0, p + 1)
           done[on]++; on = 0
         } }
    { print }
    END { if (!inc) { print "sqlite.sh: no #include <stdio.h> to put labelprof.h after" > "/dev/stderr"; exit 1 }
          for (i = 1; i <= n; i++) if (!done[i]) { print "sqlite.sh: " fn[i] ": its definition was not found" > "/dev/stderr"; exit 1 } }
  ' "$c" >"$2"
}
instrument label "$w/sqlite3-label.c" || exit 1
instrument count "$w/sqlite3-count.c" || exit 1
cp "$c" "$w/sqlite3-plain.c" || exit 1

# build NAME CC SOURCE EXTRA_CFLAGS EXTRA_LIBS: $w/NAME.o (SQLite) and $w/NAME
# (sqlite_work against it).
build() {
  $2 $flags -I"$cdir" $4 -c "$w/$3" -o "$w/$1.o" 2>"$w/$1.log" &&
    $2 $flags -I"$cdir" $4 "$src/bench/sqlite_work.c" "$w/$1.o" $5 -o "$w/$1" 2>>"$w/$1.log" ||
    { echo "sqlite.sh: building $1 ($2) failed:" >&2; cat "$w/$1.log" >&2; return 1; }
}
# Two builds at a time: SQLite takes a while to compile.
pair() { build "$1" "$2" "$3" "$4" "$5" & p1=$!; shift 5; build "$@" || { wait $p1; return 1; }; wait $p1; }
pair plain "$CC" sqlite3-plain.c "" "" \
     label "$CC" sqlite3-label.c "$LABELPROF_CFLAGS" "$LABELPROF_LIBS" || exit 1
pair count "$CC" sqlite3-count.c "-DSQLITE_WORK_COUNT" "" \
     disable "$CC" sqlite3-label.c "$LABELPROF_CFLAGS -DLABELPROF_DISABLE" "" || exit 1
if [ -n "$CLANG" ] && command -v "$CLANG" >/dev/null 2>&1; then
  pair clang-plain "$CLANG" sqlite3-plain.c "" "" \
       clang-label "$CLANG" sqlite3-label.c "$LABELPROF_CFLAGS" "$LABELPROF_LIBS" || exit 1
else
  CLANG=
fi

# The calls: natively, from the counting copy.
"$w/count" "$w/db" "$N" >"$w/count.out" || { echo "sqlite.sh: the counting run failed" >&2; exit 1; }
sum=$(sed -n 's/^checksum //p' "$w/count.out")
calls=$(awk '/^calls / { s += $3 } END { printf "%.0f\n", s }' "$w/count.out")

# run NAME: NAME under callgrind, once; prints its instructions, checks its
# checksum.
rm -f "$w"/*.total
run() {
  [ -s "$w/$1.total" ] && { cat "$w/$1.total"; return 0; }
  # The same command line for every build: the program reads its path and
  # the database's, and their lengths would count.
  cp "$w/$1" "$w/sqlite_work" || return 1
  # Untraced: no LABELPROF_* variable reaches the program.
  (
    for v in $(env | sed -n 's/^\(LABELPROF_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
    exec valgrind --tool=callgrind --callgrind-out-file="$w/cg.$1" "$w/sqlite_work" "$w/db" "$N" >"$w/$1.out" 2>"$w/$1.vg"
  ) ||
    { echo "sqlite.sh: $1 failed under callgrind:" >&2; tail -n 5 "$w/$1.vg" >&2; return 1; }
  s=$(sed -n 's/^checksum //p' "$w/$1.out")
  [ "$s" = "$sum" ] || { echo "sqlite.sh: $1: checksum $s, the counting run's was $sum: the builds disagree" >&2; return 1; }
  callgrind_annotate --auto=no --threshold=100 "$w/cg.$1" 2>/dev/null | tr -d ',' >"$w/$1.fn"
  objdump -d "$w/$1.o" >"$w/$1.dis" || return 1
  awk '/^(summary|totals):/ { print $2; exit }' "$w/cg.$1" | tee "$w/$1.total"
}
# own NAME FUNCTION [FILE]: FUNCTION's own instructions in NAME's run (its
# clones, .part, .constprop, .cold, and its recursive calls, 'N, included);
# with FILE, only those on
# lines of files whose path ends in FILE.
own() {
  awk -v f="$2" -v file="${3:-}" '$1 ~ /^[0-9]+$/ {
      for (i = 2; i <= NF; i++) if ($i ~ /:/) break
      k = $i; sub(/.*:/, "", k); sub(/\047[0-9]+$/, "", k); sub(/\..*/, "", k); p = $i; sub(/:[^:]*$/, "", p)
      if (k == f && (file == "" || substr(p, length(p) - length(file) + 1) == file)) s += $1 }
    END { printf "%.0f\n", s }' "$w/$1.fn"
}
# bytes NAME FUNCTION: FUNCTION's bytes in NAME.o, clones included.
bytes() {
  t=0
  for h in $(nm -S "$w/$1.o" | awk -v f="$2" 'NF == 4 && $3 ~ /^[tT]$/ { k = $4; sub(/\..*/, "", k); if (k == f) print $2 }'); do
    t=$((t + 0x$h))
  done
  echo $t
}
# pushes NAME FUNCTION: FUNCTION's push instructions of callee-saved
# registers (x86-64; more than six when paths save them apart), the most of
# its clones'.
pushes() {
  awk -v f="$2" '/^[0-9a-f]+ <.*>:$/ { k = $2; sub(/^</, "", k); sub(/>:$/, "", k); c = k ~ /\.cold$/; sub(/\..*/, "", k); on = k == f && !c; n = 0; next }
    on && /push +%r(bx|bp|12|13|14|15)$/ && ++n > m { m = n }
    END { print m + 0 }' "$w/$1.dis"
}

echo "ten labels in SQLite: bench/sqlite.sh, untraced, counted by callgrind"
grep -m1 "model name" /proc/cpuinfo 2>/dev/null | sed 's/^model name[^:]*: */CPU: /'
echo "compiler: $($CC --version | head -n 1), $flags"
[ -n "$CLANG" ] && echo "          $($CLANG --version | head -n 1)"
echo "SQLite: $version; workload: bench/sqlite_work.c, N=$N, checksum $sum"
echo "labelled calls executed: $calls"
echo
printf '  %-34s %14s %14s %9s %9s\n' "" "no labels" "ten labels" "added" "per call"
row() {
  a=$(run "$2") && b=$(run "$3") || exit 1
  echo "$a $b $calls" | awk -v t="$1" '{ printf "  %-34s %14.0f %14.0f %8.2f%% %9.1f\n", t, $1, $2, 100 * ($2 - $1) / $1, ($2 - $1) / $3 }'
}
row "instructions, $CC" plain label
row "... with -DLABELPROF_DISABLE" plain disable
[ -n "$CLANG" ] && row "instructions, $CLANG" clang-plain clang-label
echo "$(cat "$w/plain.total") $calls" | awk '{ printf "  one labelled call per %.0f instructions (no labels)\n", $1 / $2 }'
echo
# table PLAIN LABELLED COMPILER: each labelled function's own cost.
table() {
  echo "per label, $3: the function's entries (counted), its own instructions (callgrind,"
  echo "its callees left out) and, per entry, those added: all, and those on labelprof's"
  echo "header lines (the label's own code); its bytes and its pushes of callee-saved registers"
  printf '  %-17s %-27s %9s %12s %12s %6s %6s %13s %6s\n' label function calls "own, plain" "own, label" added label bytes pushes
  set -- "$1" "$2" $funcs
  p=$1 q=$2; shift 2
  ta=0 tb=0 tl=0
  for l in $labels; do
    f=$1; shift
    k=$(awk -v l="$l" '$1 == "calls" && $2 == l { print $3 }' "$w/count.out")
    a=$(own "$p" "$f") b=$(own "$q" "$f") c=$(own "$q" "$f" labelprof/impl.h)
    echo "$l $f $k $a $b $c $(bytes "$p" "$f") $(bytes "$q" "$f") $(pushes "$p" "$f") $(pushes "$q" "$f")" | awk '{
      printf "  %-17s %-27s %9.0f %12.0f %12.0f %6s %6s %6d->%-6d %d->%d\n", $1, $2, $3, $4, $5,
        ($3 ? sprintf("%.1f", ($5 - $4) / $3) : "-"), ($3 ? sprintf("%.1f", $6 / $3) : "-"), $7, $8, $9, $10 }'
    ta=$((ta + a)) tb=$((tb + b)) tl=$((tl + c))
  done
  echo "$ta $tb $tl $calls" | awk '{ printf "  %-17s %-27s %9.0f %12.0f %12.0f %6.1f %6.1f\n", "the ten", "", $4, $1, $2, ($2 - $1) / $4, $3 / $4 }'
}
echo
table plain label "$CC"
if [ -n "$CLANG" ]; then
  echo
  table clang-plain clang-label "$CLANG"
fi
