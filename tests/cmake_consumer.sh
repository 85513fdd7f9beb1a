#!/bin/sh
# cmake_consumer.sh [PREFIX]: a CMake project finds the installed labelprof
# with find_package(labelprof CONFIG REQUIRED), links labelprof::labelprof,
# and runs: once with the shared library, once with the static one
# (-Dlabelprof_USE_STATIC=ON, checked with readelf: no liblabelprof in the
# program's NEEDED entries). The project is tests/cmake-consumer.
#
# With PREFIX (CI), against what `make install` put there. Without it (make
# check), this build is first installed with `make install DESTDIR=` into a
# temporary directory: the CMake files find the library from where they
# are, so the staged tree serves as a prefix of its own. The consumer is
# compiled with the build's CC, CFLAGS and LDFLAGS (LP_CC, LP_CFLAGS,
# LP_LDFLAGS from the Makefile), so that a sanitizer build's library links.
#
# Exit 77 (SKIP) without cmake, when cross-compiling, or when the static
# library was not built (its half only is skipped, and said so).
set -eu

src=${srcdir:-.}
if [ ! -f "$src/tests/cmake-consumer/CMakeLists.txt" ]; then
  echo "cmake_consumer: cannot find tests/cmake-consumer under srcdir '$src'" >&2
  exit 99
fi
if ! command -v cmake >/dev/null 2>&1; then
  echo "cmake_consumer: SKIP: cmake is not installed (./install-deps installs it)" >&2
  exit 77
fi
if [ "${LP_CROSS_COMPILING:-no}" = yes ]; then
  echo "cmake_consumer: SKIP: cross-compiling; the consumer would need a CMake toolchain file" >&2
  exit 77
fi

. "$src/tests/sh_common.sh"
test_tmpdir lp-cmake-consumer

if [ $# -ge 1 ]; then
  prefix=$1
else
  if [ -z "${LP_PREFIX:-}" ]; then
    echo "cmake_consumer: without PREFIX, LP_PREFIX (configure's prefix) must be set, as make check does" >&2
    exit 99
  fi
  # A make started by make check: no jobserver of the outer make, and quiet.
  if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${LP_MAKE:-make} install DESTDIR="$tmp/stage" >"$tmp/install.log" 2>&1; then
    echo "cmake_consumer: FAIL: make install DESTDIR=$tmp/stage failed:" >&2
    sed 's/^/  | /' "$tmp/install.log" >&2
    exit 1
  fi
  prefix="$tmp/stage$LP_PREFIX"
fi
prefix=$(cd "$prefix" && pwd -P)

skipped=""
for kind in shared static; do
  build="$tmp/build-$kind"
  if [ "$kind" = static ]; then
    use_static=ON
    if [ -z "$(find "$prefix" -name liblabelprof.a 2>/dev/null)" ]; then
      echo "cmake_consumer: no liblabelprof.a under $prefix (configured --disable-static?): the static build is skipped"
      skipped=static
      continue
    fi
  else
    use_static=OFF
  fi
  if ! CC="${LP_CC:-${CC:-cc}}" CFLAGS="${LP_CFLAGS:-}" LDFLAGS="${LP_LDFLAGS:-}" \
      cmake -S "$src/tests/cmake-consumer" -B "$build" -DCMAKE_PREFIX_PATH="$prefix" \
        -Dlabelprof_USE_STATIC="$use_static" -DCMAKE_BUILD_TYPE=Release >"$tmp/log" 2>&1 ||
     ! cmake --build "$build" >>"$tmp/log" 2>&1; then
    echo "cmake_consumer: FAIL: the $kind consumer did not configure or build against $prefix:" >&2
    sed 's/^/  | /' "$tmp/log" >&2
    exit 1
  fi
  # It must have found this prefix's labelprof, not one installed elsewhere.
  found=$(sed -n 's/^labelprof_DIR:PATH=//p' "$build/CMakeCache.txt")
  case "$(cd "$found" && pwd -P)/" in
    "$prefix"/*) ;;
    *)
      echo "cmake_consumer: FAIL: find_package found labelprof in $found, not under $prefix" >&2
      exit 1
      ;;
  esac
  needed=$(readelf -d "$build/consumer" | sed -n 's/.*(NEEDED).*\[\(liblabelprof[^]]*\)\].*/\1/p')
  if [ "$kind" = shared ] && [ -z "$needed" ]; then
    echo "cmake_consumer: FAIL: the shared consumer does not need liblabelprof.so" >&2
    exit 1
  fi
  if [ "$kind" = static ] && [ -n "$needed" ]; then
    echo "cmake_consumer: FAIL: the static consumer needs $needed" >&2
    exit 1
  fi
  # No LD_LIBRARY_PATH: CMake gives the program the imported library's directory as its run path.
  if ! out=$("$build/consumer" 2>&1); then
    echo "cmake_consumer: FAIL: the $kind consumer failed: $out" >&2
    exit 1
  fi
  echo "ok: $kind: $out (labelprof_DIR $found)"
done
[ -z "$skipped" ] || exit 77
exit 0
