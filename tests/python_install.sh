#!/bin/sh
# python_install.sh PREFIX: the Python package installed as the README says,
# against the labelprof `make install` put in PREFIX, then its pytest suite
# run on what was installed. CI runs it after make install; make check runs
# the same suite on the module built in the build tree (tests/python.sh).
#
# The route is the README's, offline: a venv of Debian's interpreter that
# sees Debian's pandas and pytest (--system-site-packages; PEP 668 keeps pip
# off the system's own site-packages), and pip install --no-build-isolation
# --no-index ./python with PKG_CONFIG_PATH at PREFIX. The installed module
# must load PREFIX's liblabelprof (checked in /proc/self/maps), and the
# suite's C extension is built against the same library.
#
# Exit 77 (SKIP) when the interpreter lacks venv, pip, setuptools, pandas or
# pytest, saying which.
set -u

src=${srcdir:-$(dirname "$0")/..}
src=$(cd "$src" && pwd) || exit 99
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: python_install.sh PREFIX (where make install put labelprof)" >&2
  exit 99
fi
prefix=$(cd "$1" && pwd -P) || exit 99
pcdir=$(dirname "$(find "$prefix" -name labelprof.pc | head -1)")
if [ ! -f "$pcdir/labelprof.pc" ]; then
  echo "python_install: FAIL: no labelprof.pc under $prefix" >&2
  exit 1
fi
py=${PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3
missing=""
for m in venv ensurepip setuptools pandas pytest; do
  "$py" -c "import $m" >/dev/null 2>&1 || missing="$missing $m"
done
if [ -n "$missing" ]; then
  echo "python_install: SKIP: $py lacks:$missing (Debian: ./install-deps)"
  exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lp-python-install.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
export PKG_CONFIG_PATH="$pcdir"
unset PYTHONPATH

echo "python_install: $py -m venv --system-site-packages, pip install ./python against $prefix"
"$py" -m venv --system-site-packages "$tmp/venv" || exit 1
if ! (cd "$src" && "$tmp/venv/bin/pip" install -q --no-build-isolation --no-index ./python) >"$tmp/pip.log" 2>&1; then
  echo "python_install: FAIL: pip install ./python:" >&2
  sed 's/^/  | /' "$tmp/pip.log" >&2
  exit 1
fi

# From outside the source tree, so that python/labelprof cannot stand in for what pip installed.
cd "$tmp" || exit 99
"$tmp/venv/bin/python" - "$tmp/venv" "$prefix" <<'EOF' || exit 1
import os, sys
import labelprof
venv, prefix = sys.argv[1], sys.argv[2]
where = os.path.realpath(labelprof.__file__)
if not where.startswith(os.path.realpath(venv) + os.sep):
    sys.exit("python_install: FAIL: labelprof came from %s, not the venv" % where)
with open("/proc/self/maps") as f:
    libs = {l.split()[-1] for l in f if "liblabelprof.so" in l}
if not libs or any(not os.path.realpath(l).startswith(prefix + os.sep) for l in libs):
    sys.exit("python_install: FAIL: the module loaded %s, not %s's liblabelprof" % (sorted(libs), prefix))
print("python_install: labelprof %s from %s, on %s" % (labelprof.__version__, where, " ".join(sorted(libs))))
EOF
"$tmp/venv/bin/python" -m pytest -p no:cacheprovider -q -ra --basetemp="$tmp/pytest" "$src/python/tests"
status=$?
[ $status -eq 5 ] && status=1 # pytest found no tests: a broken suite, not a pass
exit $status
