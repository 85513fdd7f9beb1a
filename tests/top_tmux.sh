#!/bin/sh
# top_tmux.sh: labelprof top's live view in a real terminal, tmux's: the
# tree of a running program (tests/top_target) shows, the keys switch to
# one thread and back, and q, or Ctrl-C, ends it with status 0 and the
# terminal as it was (stty -g before and after). Skipped without tmux.
# Run from the build directory (make check does); srcdir names the sources.
set -u
srcdir=${srcdir:-.}
. "$srcdir/tests/sh_common.sh"
test_tmpdir labelprof-top-tmux

lp=$(pwd)/tools/labelprof
slow=${LP_TEST_SLOW:-1}
if ! command -v tmux >/dev/null 2>&1; then
  echo "SKIP: tmux is not installed (./install-deps installs it)"
  exit 77
fi
if [ "${LP_CROSS_COMPILING:-no}" = yes ]; then
  echo "SKIP: a cross build: its programs run under emulation, where process_vm_readv cannot reach another"
  exit 77
fi
for p in "$lp" tests/top_target; do
  [ -x "$p" ] || { echo "top_tmux.sh: $p is not built" >&2; exit 99; }
done

unset TMUX
# A server of its own for each run (a socket in $tmp): one being killed never meets the next.
sock=$tmp/tmux.sock
tm() { tmux -S "$sock" "$@"; }
trap 'for s in "$tmp"/tmux.*; do [ -S "$s" ] && tmux -S "$s" kill-server 2>/dev/null; done; exec 3>&- 4<&-; [ -n "${pid:-}" ] && wait "$pid"; rm -rf "$tmp"' EXIT

mkfifo "$tmp/in" "$tmp/out" || exit 99
tests/top_target split <"$tmp/in" >"$tmp/out" 2>"$tmp/err" &
pid=$!
exec 3>"$tmp/in" 4<"$tmp/out"
read -r ready <&4 || ready=
[ "$ready" = ready ] || { bad "the target did not start: $(cat "$tmp/err")"; exit 1; }

# until SECONDS PATTERN: waits (polling the screen every 50 ms) until the pane shows PATTERN; false when it never does.
until_shown() {
  n=0
  while [ $n -lt $(($1 * 20 * slow)) ]; do
    tm capture-pane -p -t lp >"$tmp/screen" 2>/dev/null && grep -q -- "$2" "$tmp/screen" && return 0
    sleep 0.05
    n=$((n + 1))
  done
  return 1
}
# until_file SECONDS FILE: waits until FILE exists (the pane's command wrote its status).
until_file() {
  n=0
  while [ $n -lt $(($1 * 20 * slow)) ]; do
    [ -s "$2" ] && return 0
    sleep 0.05
    n=$((n + 1))
  done
  return 1
}

# run KEY: a live view in a fresh pane, quit with KEY (q or C-c); checks the status and the terminal.
run() {
  rm -f "$tmp/status" "$tmp/stty.before" "$tmp/stty.after"
  [ -S "$sock" ] && tm kill-server 2>/dev/null
  sock=$tmp/tmux.$1.sock
  tm -f /dev/null new-session -d -s lp -x 100 -y 30 \
    "stty -g >'$tmp/stty.before'; '$lp' top $pid; echo \$? >'$tmp/status'; stty -g >'$tmp/stty.after'; sleep 600" \
    2>"$tmp/tmux.err" 3>&- 4<&- || { bad "tmux could not start: $(cat "$tmp/tmux.err")"; return; }
  # The tree, within its first (short) interval.
  until_shown 10 '^ *[0-9.]*% *[0-9.]*% *outer$' || bad "$1: no tree on the screen: $(cat "$tmp/screen")"
  grep -q "^labelprof top - process $pid " "$tmp/screen" || bad "$1: no header: $(head -2 "$tmp/screen")"
  grep -q '^ *[0-9.]*% *[0-9.]*% *wait$' "$tmp/screen" || bad "$1: the sleeper's label is not shown: $(cat "$tmp/screen")"
  grep -q ' worker ' "$tmp/screen" && grep -q ' sleeper ' "$tmp/screen" ||
    bad "$1: the threads are not listed by name: $(cat "$tmp/screen")"
  if [ "$1" = q ]; then
    # One thread (the first to arrive, then the next), then all again.
    tm send-keys -t lp t
    until_shown 5 '^view: thread [0-9]* "' || bad "t: no thread's view: $(cat "$tmp/screen")"
    if ! grep -q '^view: thread [0-9]* "worker"' "$tmp/screen"; then
      tm send-keys -t lp t
      until_shown 5 '^view: thread [0-9]* "worker"' || bad "t: the worker's view never came: $(cat "$tmp/screen")"
    fi
    until_shown 5 '^ *[0-9.]*% *[0-9.]*% *a$' || bad "t: the worker's tree is not shown: $(cat "$tmp/screen")"
    grep -q ' wait$' "$tmp/screen" && bad "t: the worker's view shows the sleeper's label: $(cat "$tmp/screen")"
    tm send-keys -t lp a
    until_shown 5 '^view: all threads' || bad "a: not back to all threads: $(cat "$tmp/screen")"
    tm send-keys -t lp s
    until_shown 5 'sort: since attach' || bad "s: the sort did not change: $(cat "$tmp/screen")"
    tm send-keys -t lp +
    until_shown 5 'interval 2 s' || bad "+: the interval did not grow: $(cat "$tmp/screen")"
  fi
  tm send-keys -t lp "$1"
  if until_file 10 "$tmp/status"; then
    [ "$(cat "$tmp/status")" = 0 ] || bad "$1: exit status $(cat "$tmp/status"), not 0"
    until_file 5 "$tmp/stty.after" && cmp -s "$tmp/stty.before" "$tmp/stty.after" ||
      bad "$1: the terminal was left changed: $(cat "$tmp/stty.before") then $(cat "$tmp/stty.after" 2>/dev/null)"
    # The main screen is back: the view is gone from it.
    tm capture-pane -p -t lp >"$tmp/screen"
    grep -q 'labelprof top - process' "$tmp/screen" && bad "$1: the view stayed on the screen: $(cat "$tmp/screen")"
  else
    bad "$1: labelprof top did not end: $(cat "$tmp/screen")"
  fi
}

run q
run C-c
kill -0 "$pid" 2>/dev/null || bad "the target is not running after the live views"

# A label and a name holding terminal escapes: shown as text; the screen is not cleared, the title not set.
# (The tmux servers hold none of the target's FIFOs, fds 3 and 4: it ends when they close here.)
tm kill-server 2>/dev/null
exec 3>&- 4<&-
wait "$pid"
mkfifo "$tmp/hin" "$tmp/hout" || exit 99
tests/top_target hostile <"$tmp/hin" >"$tmp/hout" 2>"$tmp/err" &
pid=$!
exec 3>"$tmp/hin" 4<"$tmp/hout"
read -r ready <&4 || ready=
[ "$ready" = ready ] || { bad "the hostile target did not start: $(cat "$tmp/err")"; exit 1; }
sock=$tmp/tmux.hostile.sock
tm -f /dev/null new-session -d -s lp -x 100 -y 30 "'$lp' top $pid; sleep 600" 2>"$tmp/tmux.err" 3>&- 4<&- ||
  bad "tmux could not start: $(cat "$tmp/tmux.err")"
until_shown 10 '?\[2J?\]0;title?wait??' || bad "hostile: the label is not shown as text: $(cat "$tmp/screen")"
grep -q "^labelprof top - process $pid " "$tmp/screen" || bad "hostile: the header is gone: $(cat "$tmp/screen")"
grep -q 'sl?\[2Jeeper?' "$tmp/screen" || bad "hostile: the name is not shown as text: $(cat "$tmp/screen")"
tm display-message -p -t lp '#{pane_title}' | grep -q title && bad "hostile: the label set the pane's title"
tm send-keys -t lp q
[ $fail -eq 0 ] || exit 1
exit 0
