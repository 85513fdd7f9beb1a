#!/bin/sh
# layering.sh: the files of lib/ depend one way. No file may reach back to
# itself through the functions it calls or the variables it uses, directly
# or through other files (the order is written at the top of lib/internal.h).
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
# Any edge that lies on a cycle is printed with the functions it calls and a
# path back, and the test fails.
#
# Run from the build directory (make check does); srcdir names the sources.
# NM may name the nm to use (the Makefile passes libtool's).
set -u

src=${srcdir:-.}
nm_cmd=${NM:-nm}
if [ ! -d "$src/lib" ]; then
  echo "layering: cannot find lib/ under srcdir '$src'" >&2
  exit 99
fi
set -- $nm_cmd
if ! command -v "$1" >/dev/null 2>&1; then
  echo "layering: '$1' is not installed; skipping" >&2
  exit 77
fi

tmp=${TMPDIR:-/tmp}/labelprof-layering.$$
trap 'rm -f "$tmp" "$tmp.nm" "$tmp.err"' EXIT
: >"$tmp" || exit 99

nfiles=0
for c in "$src"/lib/*.c; do
  base=${c##*/}
  base=${base%.c}
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
  $nm_cmd "$obj" >"$tmp.nm" 2>"$tmp.err" || {
    echo "layering: $nm_cmd $obj failed:" >&2
    cat "$tmp.err" >&2
    rm -f "$tmp.nm" "$tmp.err"
    exit 99
  }
  awk -v f="$base" 'NF >= 2 && $NF ~ /^lp_/ { print f, $(NF - 1), $NF }' "$tmp.nm" >>"$tmp"
  # Every file of lib/ defines some lp_* symbol: none read means nm could not read the object (LTO).
  if ! awk -v f="$base" '$1 == f && $2 != "U" { found = 1 } END { exit !found }' "$tmp"; then
    echo "layering: $nm_cmd found no lp_* symbol defined in $obj; cannot check" >&2
    rm -f "$tmp.nm" "$tmp.err"
    exit 99
  fi
  rm -f "$tmp.nm" "$tmp.err"
  nfiles=$((nfiles + 1))
done

awk -v nfiles="$nfiles" '
  $3 == "lp_impl_self" { next }
  $2 == "U" { use[++nuse] = $1 SUBSEP $3; next }
  # Defined and global: functions (T, W, i), variables (D, B, R, V, G, S, C).
  $2 ~ /^[A-Z]$/ || $2 == "i" { def[$3] = $1; next }
  END {
    for (k = 1; k <= nuse; k++) {
      split(use[k], p, SUBSEP)
      from = p[1]; sym = p[2]
      if (!(sym in def) || def[sym] == from) continue
      to = def[sym]
      e = from SUBSEP to
      if (e in syms) {
        syms[e] = syms[e] ", " sym
      } else {
        edge[++nedges] = e
        adj[from] = adj[from] " " to
        syms[e] = sym
      }
    }
    bad = 0
    for (k = 1; k <= nedges; k++) {
      split(edge[k], p, SUBSEP)
      a = p[1]; b = p[2]
      # A path b -> ... -> a, breadth first: the edge a -> b closes a cycle.
      split("", prev); split("", seen)
      qh = 1; qt = 0; q[++qt] = b; seen[b] = 1; found = (b == a)
      while (!found && qh <= qt) {
        x = q[qh++]
        n = split(adj[x], nb, " ")
        for (j = 1; j <= n && !found; j++) {
          y = nb[j]
          if (y in seen) continue
          seen[y] = 1; prev[y] = x; q[++qt] = y
          if (y == a) found = 1
        }
      }
      if (!found) continue
      path = a
      for (y = a; y != b; y = prev[y]) path = prev[y] " -> " path
      printf "layering: lib/%s.c -> lib/%s.c (%s) closes a cycle: %s -> %s\n", a, b, syms[edge[k]], a, path
      bad++
    }
    if (bad) {
      printf "layering: FAIL: %d of %d edges between the %d files of lib/ lie on a cycle\n", bad, nedges, nfiles
      exit 1
    }
    printf "layering: %d edges between the %d files of lib/, no cycle\n", nedges, nfiles
  }' "$tmp"
