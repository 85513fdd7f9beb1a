#!/bin/sh
# header_check.sh: include/labelprof.h must compile without a single warning
# wherever users compile it. tests/header_use.c and tests/header_use.cc use
# every macro and a few functions; this compiles them under C99, C11, C17
# (with -Wdeclaration-after-statement) and C++11, C++17, with gcc and clang,
# with and without -DLABELPROF_DISABLE, under -Wall -Wextra -pedantic
# -Werror: 20 builds. Enabled builds are compiled only (-c): nothing needs
# linking. Disabled builds are also linked, without liblabelprof, since the
# point of LABELPROF_DISABLE is that nothing needs the library. Then:
#   - -DLP_DISABLE, the switch a user guesses from the LP_ macros, must
#     compile labelprof out too: C11 and C++17 builds, linked without the
#     library;
#   - the header includes only <stddef.h>, <stdint.h>, <stdio.h> and
#     labelprof/impl.h (<errno.h> instead of impl.h when compiled out): with
#     glibc every system header it includes fixes the file's feature-test
#     macros, so it must not include more than its API needs;
#   - a file that defines _GNU_SOURCE and includes its system headers
#     before labelprof.h, as the header asks, gets what they declare (mremap);
#   - a goto or a switch's case that jumps into a scope's block past the
#     scope is refused by gcc and clang, in C and in C++.
#
# When cross-compiling (LP_CROSS_COMPILING=yes, LP_HOST_ALIAS=aarch64-linux-gnu,
# set by the Makefile), it uses $host-gcc, $host-g++ and clang --target=$host.
#
# A compiler that is not installed is skipped, loudly, and the test reports
# SKIP (77) rather than PASS; with LP_TEST_ALL_COMPILERS=1 (set by CI)
# a missing compiler is a failure.
set -eu

src=${srcdir:-.}
if [ ! -f "$src/tests/header_use.c" ]; then
  echo "header_check: cannot find tests/header_use.c under srcdir '$src'" >&2
  exit 99
fi

gcc_prefix=""
target=""
if [ "${LP_CROSS_COMPILING:-no}" = yes ]; then
  if [ -z "${LP_HOST_ALIAS:-}" ]; then
    echo "header_check: cross-compiling, but LP_HOST_ALIAS (configure's --host) is empty" >&2
    exit 99
  fi
  gcc_prefix="$LP_HOST_ALIAS-"
  target="--target=$LP_HOST_ALIAS"
fi

. "$src/tests/sh_common.sh"
test_tmpdir lp-header-check

builds=0
failed=0
missing=""

# build FAMILY LANG STD DISABLE: compiles one configuration; any output at all
# (a warning, a note, a linker message) fails it.
build() {
  family=$1 lang=$2 std=$3 disable=$4
  case $family/$lang in
    gcc/c) set -- "${gcc_prefix}gcc" ;;
    gcc/c++) set -- "${gcc_prefix}g++" ;;
    clang/c) set -- clang ${target:+"$target"} ;;
    clang/c++) set -- clang++ ${target:+"$target"} ;;
  esac
  compiler="$*"
  set -- "$@" -std="$std" -Wall -Wextra -pedantic -Werror -I"$src/include"
  if [ "$lang" = c ]; then
    set -- "$@" -Wdeclaration-after-statement "$src/tests/header_use.c"
  else
    set -- "$@" "$src/tests/header_use.cc"
  fi
  if [ "$disable" = yes ]; then
    set -- "$@" -DLABELPROF_DISABLE -o "$tmp/header_use"
    what="$compiler -std=$std -DLABELPROF_DISABLE, linked without liblabelprof"
  elif [ "$disable" = lp ]; then
    set -- "$@" -DLP_DISABLE -o "$tmp/header_use"
    what="$compiler -std=$std -DLP_DISABLE, linked without liblabelprof"
  else
    set -- "$@" -c -o "$tmp/header_use.o"
    what="$compiler -std=$std"
  fi
  builds=$((builds + 1))
  if "$@" >"$tmp/out" 2>&1 && [ ! -s "$tmp/out" ]; then
    echo "ok:   $what"
  else
    failed=$((failed + 1))
    echo "FAIL: $what"
    echo "  command: $*"
    sed 's/^/  | /' "$tmp/out"
  fi
  rm -f "$tmp/header_use" "$tmp/header_use.o"
}

for family in gcc clang; do
  if [ "$family" = gcc ]; then cc="${gcc_prefix}gcc" cxx="${gcc_prefix}g++"; else cc=clang cxx=clang++; fi
  for driver in "$cc" "$cxx"; do
    if ! command -v "$driver" >/dev/null 2>&1; then
      missing="$missing $driver"
      echo "######## SKIPPED: $driver is not installed; its configurations are NOT checked ########"
    fi
  done
  for disable in no yes; do
    if command -v "$cc" >/dev/null 2>&1; then
      for std in c99 c11 c17; do build "$family" c "$std" "$disable"; done
    fi
    if command -v "$cxx" >/dev/null 2>&1; then
      for std in c++11 c++17; do build "$family" c++ "$std" "$disable"; done
    fi
  done
  if command -v "$cc" >/dev/null 2>&1; then build "$family" c c11 lp; fi
  if command -v "$cxx" >/dev/null 2>&1; then build "$family" c++ c++17 lp; fi
done

# check WHAT COMMAND...: one more configuration; any output at all fails it.
check() {
  what=$1
  shift
  builds=$((builds + 1))
  if "$@" >"$tmp/out" 2>&1 && [ ! -s "$tmp/out" ]; then
    echo "ok:   $what"
  else
    failed=$((failed + 1))
    echo "FAIL: $what"
    echo "  command: $*"
    sed 's/^/  | /' "$tmp/out"
  fi
}

# includes CC FLAGS...: the headers labelprof.h itself includes, one a line,
# as the compiler's -H shows them (depth 2 under a file that includes only it).
includes() {
  printf '#include <labelprof.h>\n' >"$tmp/includes.c"
  "$@" -H -fsyntax-only -I"$src/include" "$tmp/includes.c" 2>&1 >/dev/null |
    sed -n 's/^\.\. //p' | sed -e 's|.*/labelprof/impl\.h$|labelprof/impl.h|' -e t -e 's|.*/||' | sort | tr '\n' ' '
}

cat >"$tmp/gnu_source.c" <<'EOF_C'
/* As labelprof.h asks: the feature-test macros and the system headers first. */
#define _GNU_SOURCE 1
#include <sys/mman.h>
#include <labelprof.h>

void *grow(void *p, size_t old_size, size_t new_size);
void *grow(void *p, size_t old_size, size_t new_size) {
  LP_SCOPE("grow");
  return mremap(p, old_size, new_size, MREMAP_MAYMOVE);
}
EOF_C

for family in gcc clang; do
  if [ "$family" = gcc ]; then set -- "${gcc_prefix}gcc"; else set -- clang ${target:+"$target"}; fi
  command -v "$1" >/dev/null 2>&1 || continue
  got=$(includes "$@")
  check "$* includes: $got" test "$got" = "labelprof/impl.h stddef.h stdint.h stdio.h "
  got=$(includes "$@" -DLABELPROF_DISABLE)
  check "$* -DLABELPROF_DISABLE includes: $got" test "$got" = "errno.h stddef.h stdint.h stdio.h "
  for disable in "" -DLABELPROF_DISABLE; do
    check "$* -std=c11${disable:+ $disable}: _GNU_SOURCE and <sys/mman.h> before labelprof.h, mremap declared" \
      "$@" -std=c11 -Wall -Wextra -pedantic -Werror $disable -I"$src/include" -c "$tmp/gnu_source.c" -o "$tmp/gnu_source.o"
  done
done

# A jump into a scope's block past the scope would run its end without its
# begin. Every compiler must refuse it, in C and in C++: clang and C++ refuse
# a jump past a cleanup or an initialisation by themselves; gcc's C front end
# refuses it because LP_SCOPE also declares a variably modified type.
for jump in case goto; do
  if [ $jump = case ]; then
    body='switch (x) { case 0: { LP_SCOPE("a"); x++; case 1: x++; break; } } return x;'
  else
    body='if (x) goto in; { LP_SCOPE("a"); x++; in: x++; } return x;'
  fi
  for lang in c c++; do
    printf '#include <labelprof.h>\nint f(int x);\nint f(int x) { %s }\n' "$body" >"$tmp/jump.$lang"
  done
  for family in gcc clang; do
    # A cross gcc is named for its target; clang is told it (--target).
    if [ "$family" = gcc ]; then set -- "${gcc_prefix}gcc" "${gcc_prefix}g++" ""; else set -- clang clang++ "$target"; fi
    cc=$1 cxx=$2 tflag=$3
    for lang in c c++; do
      if [ $lang = c ]; then driver=$cc std=c11; else driver=$cxx std=c++17; fi
      command -v "$driver" >/dev/null 2>&1 || continue
      builds=$((builds + 1))
      what="$driver -std=$std refuses a $jump into a scope's block"
      if $driver ${tflag:+"$tflag"} -std=$std -x $lang -Wall -Wextra -I"$src/include" -c "$tmp/jump.$lang" \
        -o "$tmp/jump.o" >"$tmp/out" 2>&1; then
        failed=$((failed + 1))
        echo "FAIL: $what: it compiled"
        sed 's/^/  | /' "$tmp/out"
      elif grep -q -i 'jump' "$tmp/out"; then
        echo "ok:   $what: $(grep -i -m1 'error' "$tmp/out" | sed 's/.*error: //')"
      else
        failed=$((failed + 1))
        echo "FAIL: $what: refused, but not for the jump"
        sed 's/^/  | /' "$tmp/out"
      fi
      rm -f "$tmp/jump.o"
    done
  done
done

echo "header_check: $builds builds, $failed failed${missing:+, not installed:$missing}"
if [ "$failed" -ne 0 ]; then
  echo "header_check: FAIL: include/labelprof.h warns or fails in $failed configuration(s), shown above" >&2
  exit 1
fi
if [ -n "$missing" ]; then
  if [ "${LP_TEST_ALL_COMPILERS:-0}" = 1 ]; then
    echo "header_check: FAIL: compilers missing:$missing (LP_TEST_ALL_COMPILERS=1 requires all four)" >&2
    exit 1
  fi
  echo "header_check: SKIP: compilers missing:$missing; install them (./install-deps) to check every configuration" >&2
  exit 77
fi
exit 0
