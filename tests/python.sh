#!/bin/sh
# python.sh: the Python module's pytest suite (python/tests), run by make
# check against this build: the module make built with setup.py (LP_PY_LIB,
# linked to this build's liblabelprof through its run path) and a C
# extension the suite builds against the same library (pkg-config, through
# this build's labelprof-uninstalled.pc).
#
# Reports SKIP (77) when configure disabled the module or cross-compiled,
# and in a sanitizer build whose runtime cannot be preloaded into Python;
# FAIL when the interpreter lacks what the suite needs (configure said
# which packages). Under AddressSanitizer or ThreadSanitizer the module and
# the extension are built with the build's sanitizer flags and Python runs
# with the sanitizer's runtime preloaded (below), since the interpreter
# itself is not instrumented: LeakSanitizer reports leaks of the
# interpreter's own at exit, so only its errors count there (ASAN_OPTIONS
# detect_leaks=0), while the module's own allocations are checked by ASan's
# other checks.
set -u
srcdir=${srcdir:-.}
. "$srcdir/tests/sh_common.sh"

case ${LP_PYTHON_STATE:-} in
  yes) ;;
  disabled)
    echo "SKIP: configured with --disable-python"
    exit 77
    ;;
  cross)
    echo "SKIP: cross-compiled: no interpreter here loads the module (make check on the host runs it)"
    exit 77
    ;;
  missing:*)
    echo "FAIL: ${LP_PYTHON:-python3} lacks what the Python module's tests need:${LP_PYTHON_STATE#missing:}"
    echo "      (Debian: ./install-deps installs them; or configure --disable-python)"
    exit 1
    ;;
  *)
    echo "python.sh: LP_PYTHON_STATE='${LP_PYTHON_STATE:-}' is not configure's (run it through make check)" >&2
    exit 99
    ;;
esac
if [ ! -f "${LP_PY_LIB:-}/labelprof/__init__.py" ]; then
  echo "python.sh: the module was not built in '${LP_PY_LIB:-}' (make check builds it first)" >&2
  exit 99
fi

# A sanitizer's runtime must be the first library in the process, and Python
# is not linked with one: a shared runtime is preloaded. gcc's (libasan.so,
# libtsan.so) first, which clang finds too where gcc is installed: clang 14's
# own shared TSan runtime cannot be preloaded (it crashes in libstdc++'s
# start-up, before its interceptors are set), and the entry points the
# compilers emit are the same. The interpreter is not instrumented: what is
# checked is the module, the library and the test's C extension, and the
# synchronisation the runtime sees (pthread calls, the GIL's among them).
sanitizer_runtime() { # asan|tsan
  for f in "lib$1.so" "libclang_rt.$1-$(uname -m).so"; do
    f=$($LP_CC -print-file-name="$f" 2>/dev/null)
    case $f in /*) [ -f "$f" ] && echo "$f" && return 0 ;; esac
  done
  return 1
}
preload=""
case " ${LP_CFLAGS:-} " in
  *-fsanitize=*thread*) san=tsan ;;
  *-fsanitize=*address*) san=asan ;;
  *) san="" ;;
esac
if [ -n "$san" ]; then
  if ! preload=$(sanitizer_runtime $san); then
    echo "SKIP: built with -fsanitize ($san), and $LP_CC names no shared $san runtime to preload into Python"
    exit 77
  fi
  if ! LD_PRELOAD="$preload" "$LP_PYTHON" -c pass >/dev/null 2>&1; then
    echo "SKIP: built with -fsanitize ($san), and $LP_PYTHON does not start with $preload preloaded"
    exit 77
  fi
  echo "sanitizers: Python runs with $preload preloaded"
fi

abs_srcdir=$(cd "$srcdir" && pwd) || exit 99
test_tmpdir lp-python
cd "$tmp" || exit 99
# The interpreter's own leaks are not ours to report (see above); every other check stays on.
asan_options="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
env PYTHONPATH="$LP_PY_LIB" PYTHONDONTWRITEBYTECODE=1 PKG_CONFIG_PATH="$LP_PKG_CONFIG_PATH" \
  ${preload:+LD_PRELOAD="$preload"} ${preload:+ASAN_OPTIONS="$asan_options"} \
  "$LP_PYTHON" -m pytest -p no:cacheprovider -q -ra --basetemp="$tmp/pytest" "$abs_srcdir/python/tests"
status=$?
[ $status -eq 5 ] && status=1 # pytest found no tests: a broken suite, not a pass
exit $status
