#!/bin/sh
# layering.sh: the files of lib/ depend one way, in the order lib/internal.h
# writes down. That header opens with the files in layers, top first; a file
# may call only files of layers below its own and use only their variables.
# This test reads that order from the header and fails on:
#   - a file of lib/ that is in no layer (or a layer that names a file lib/
#     does not have);
#   - an edge that climbs: a call or a variable use of a file in the same
#     layer or one above.
# So the written architecture is the built one: the order is no comment
# that may drift.
#
# The graph is read from the objects the build made, not from the sources:
# for each lib/X.c, nm lists the lp_* and lp__* symbols its object defines
# and those it leaves undefined; an undefined symbol that another file's
# object defines is an edge X -> that file. That is every call the compiler
# emitted (the inline label paths of labelprof.h included, with branches
# that never run) and every shared variable. Calls through pointers (the
# hooks an upper module installs) are not edges, which is the point of
# them. One variable is left out: lp_impl_self, which every label reads,
# is defined in lifecycle.c, at the top, only so that a static link that
# uses a label pulls in the constructor.
#
# The check proves it can fail on every run: after the real graph passes,
# it is run again on scratch copies, one with an edge that climbs added,
# one with an edge inside a layer, one with a file taken out of the
# header's layers, and each of those must fail.
#
# Run from the build directory (make check does); srcdir names the sources.
# NM may name the nm to use (the Makefile passes libtool's).
set -u

src=${srcdir:-.}
nm_cmd=${NM:-nm}
header=$src/lib/internal.h
if [ ! -d "$src/lib" ] || [ ! -f "$header" ]; then
  echo "layering: cannot find lib/ and lib/internal.h under srcdir '$src'" >&2
  exit 99
fi
set -- $nm_cmd
if ! command -v "$1" >/dev/null 2>&1; then
  echo "layering: '$1' is not installed; skipping" >&2
  exit 77
fi

. "$src/tests/sh_common.sh"
test_tmpdir labelprof-layering
syms=$tmp/syms

: >"$syms" || exit 99
files=
for c in "$src"/lib/*.c; do
  base=${c##*/}
  base=${base%.c}
  files="$files $base"
  obj=
  # libtool's PIC object first, then its non-PIC one, then a plain build's.
  for o in lib/.libs/liblabelprof_core_la-"$base".o lib/liblabelprof_core_la-"$base".o lib/"$base".o; do
    if [ -f "$o" ]; then
      obj=$o
      break
    fi
  done
  if [ -z "$obj" ]; then
    echo "layering: no object for lib/$base.c under lib/ (build the library first)" >&2
    exit 99
  fi
  # BSD format (nm's default, and libtool's "nm -B"): "value type name", or "type name" when undefined.
  $nm_cmd "$obj" >"$tmp/nm" 2>"$tmp/err" || {
    echo "layering: $nm_cmd $obj failed:" >&2
    cat "$tmp/err" >&2
    exit 99
  }
  awk -v f="$base" 'NF >= 2 && $NF ~ /^lp_/ { print f, $(NF - 1), $NF }' "$tmp/nm" >>"$syms"
  # Every file of lib/ defines some lp_* symbol: none read means nm could not read the object (LTO).
  if ! awk -v f="$base" '$1 == f && $2 != "U" { found = 1 } END { exit !found }' "$syms"; then
    echo "layering: $nm_cmd found no lp_* symbol defined in $obj; cannot check" >&2
    exit 99
  fi
done

# check HEADER SYMS: the edges of SYMS against the layers HEADER writes
# down; prints what is wrong and returns 1, or prints a summary and returns 0.
#
# The layers: the comment's lines from the one that says "in layers, top
# first" to the first empty comment line after them. A line that starts
# " *   NAME.c" (three spaces) opens a layer: the file names at its start,
# separated by commas, are its files, and the rest of the line and the
# lines indented further say what they hold.
check() {
  awk -v files="$files" '
    FNR == NR {
      if (!inlist) { if (index($0, "in layers, top first")) inlist = 1; next }
      if ($0 ~ /^ \*[ \t]*$/) { if (nlayers) inlist = 0; next }
      if ($0 !~ /^ \*   [A-Za-z0-9_]+\.c/) next
      nlayers++
      line = substr($0, 6)
      while (match(line, /^[A-Za-z0-9_]+\.c/)) {
        name = substr(line, 1, RLENGTH - 2)
        line = substr(line, RLENGTH + 1)
        if (name in layer) printf "layering: lib/internal.h lists %s.c twice\n", name
        layer[name] = nlayers
        if (line !~ /^, *[A-Za-z0-9_]+\.c/) break
        sub(/^, */, "", line)
      }
      next
    }
    $3 == "lp_impl_self" { next }
    $2 == "U" { use[++nuse] = $1 SUBSEP $3; next }
    # Defined and global: functions (T, W, i), variables (D, B, R, V, G, S, C).
    $2 ~ /^[A-Z]$/ || $2 == "i" { def[$3] = $1; next }
    END {
      bad = 0
      n = split(files, f, " ")
      for (i = 1; i <= n; i++) {
        have[f[i]] = 1
        if (!(f[i] in layer)) {
          printf "layering: lib/%s.c is in no layer of lib/internal.h: add it where it belongs\n", f[i]
          bad++
        }
      }
      for (name in layer)
        if (!(name in have)) {
          printf "layering: lib/internal.h lists %s.c, which lib/ does not have\n", name
          bad++
        }
      nedges = 0
      for (k = 1; k <= nuse; k++) {
        split(use[k], p, SUBSEP)
        from = p[1]; sym = p[2]
        if (!(sym in def) || def[sym] == from) continue
        e = from SUBSEP def[sym]
        if (e in via) { via[e] = via[e] ", " sym; continue }
        edge[++nedges] = e
        via[e] = sym
      }
      for (k = 1; k <= nedges; k++) {
        split(edge[k], p, SUBSEP)
        a = p[1]; b = p[2]
        if (!(a in layer) || !(b in layer) || layer[b] > layer[a]) continue
        printf "layering: lib/%s.c -> lib/%s.c (%s) climbs: %s.c is in layer %d of lib/internal.h, %s.c in %s\n",
          a, b, via[edge[k]], a, layer[a], b, layer[b] == layer[a] ? "the same one" : "layer " layer[b] ", above it"
        bad++
      }
      if (bad) {
        printf "layering: FAIL: %d problem(s) in %d edges between the %d files of lib/\n", bad, nedges, n
        exit 1
      }
      printf "layering: %d edges between the %d files of lib/, each down the %d layers of lib/internal.h\n", nedges, n, nlayers
    }' "$1" "$2"
}

check "$header" "$syms" || exit 1

# Can it fail? Three scratch copies, each with one mistake, must each be refused.
# The first function lifecycle.c (the top) defines; util.c (the bottom) calls it.
top_sym=$(awk '$1 == "lifecycle" && $2 == "T" { print $3; exit }' "$syms")
# Two files of one layer: the first layer line that names two.
pair=$(awk 'index($0, "in layers, top first") { on = 1; next }
            on && /^ \*   [A-Za-z0-9_]+\.c, [A-Za-z0-9_]+\.c/ { sub(/^ \*   /, ""); gsub(/,/, ""); print $1, $2; exit }' "$header")
set -- $pair
if [ -z "$top_sym" ] || [ $# -ne 2 ]; then
  echo "layering: cannot make the scratch copies (no function in lifecycle.c, or no layer of two files)" >&2
  exit 99
fi
same_a=${1%.c}
same_b=${2%.c}
same_sym=$(awk -v b="$same_b" '$1 == b && $2 == "T" { print $3; exit }' "$syms")
cp "$syms" "$tmp/climbs" && echo "util U $top_sym" >>"$tmp/climbs"
cp "$syms" "$tmp/beside" && echo "$same_a U $same_sym" >>"$tmp/beside"
# The header without the line of the layer marker.c is in.
grep -v '^ \*   marker\.c' "$header" >"$tmp/internal.h"
for scratch in "climbs:$header:$tmp/climbs:lib/util.c -> lib/lifecycle.c ($top_sym) climbs" \
               "beside:$header:$tmp/beside:lib/$same_a.c -> lib/$same_b.c ($same_sym) climbs" \
               "unlisted:$tmp/internal.h:$syms:lib/marker.c is in no layer"; do
  name=${scratch%%:*}; rest=${scratch#*:}
  h=${rest%%:*}; rest=${rest#*:}
  s=${rest%%:*}; want=${rest#*:}
  if check "$h" "$s" >"$tmp/out" 2>&1; then
    bad "the scratch copy '$name' passed the check"
  elif ! grep -qF "$want" "$tmp/out"; then
    bad "the scratch copy '$name' failed without saying '$want':"
    cat "$tmp/out"
  fi
done
[ "$fail" -eq 0 ] || exit 1
echo "layering: and it refuses an edge that climbs, an edge inside a layer, and a file in no layer"
