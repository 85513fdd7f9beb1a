# sh_common.sh: sourced by test scripts, after they set srcdir, as
#   . "$srcdir/tests/sh_common.sh"
#   test_tmpdir NAME
# test_tmpdir NAME: $tmp is a new directory ${TMPDIR:-/tmp}/NAME.PID, removed
# with everything in it when the script exits, passed or failed; one that
# cannot be made ends the script with status 99 (an error, not a failure).
# bad MESSAGE: prints "FAIL: MESSAGE" and counts it in $fail, which starts
# at 0; the script ends with `[ $fail -eq 0 ] || exit 1`.
fail=0
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
test_tmpdir() {
  tmp=${TMPDIR:-/tmp}/$1.$$
  mkdir -p "$tmp" || exit 99
  trap 'rm -rf "$tmp"' EXIT
}
