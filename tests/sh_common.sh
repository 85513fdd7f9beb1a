# sh_common.sh: sourced by test scripts, after they set srcdir, as
#   . "$srcdir/tests/sh_common.sh"
#   test_tmpdir NAME
# test_tmpdir NAME: $tmp is a new directory made by mktemp under
# ${TMPDIR:-/tmp} (NAME.XXXXXX), removed with everything in it when the
# script exits: passed, failed, or stopped by HUP, INT, PIPE or TERM (then
# with status 99). One that cannot be made ends the script with status 99
# (an error, not a failure).
# at_exit COMMAND: also runs COMMAND (a string for eval) at exit, before the
# directory goes: a server to stop, another directory to remove. Commands
# run in the order they were added.
# bad MESSAGE: prints "FAIL: MESSAGE" and counts it in $fail, which starts
# at 0; the script ends with `[ $fail -eq 0 ] || exit 1`.
fail=0
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
sh_common_at_exit=
at_exit() { sh_common_at_exit="$sh_common_at_exit$1;"; }
sh_common_exit() {
  eval "$sh_common_at_exit"
  [ -z "${tmp:-}" ] || rm -rf "$tmp"
}
test_tmpdir() {
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 99
  trap 'sh_common_exit' EXIT
  trap 'exit 99' HUP INT PIPE TERM
}
