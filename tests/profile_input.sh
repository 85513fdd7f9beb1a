#!/bin/sh
# profile_input.sh: profiles as input (tools/read/profile.c) and the flame
# graph's --cpu and --diff.
#   - folded stacks and pprof files read back to the same stacks that
#     `labelprof folded` wrote from the trace, on every input of the suite;
#   - a pprof file re-encoded by Go's own writer reads the same (with go);
#   - folded --cpu and flamegraph --cpu give the cpu sample type, equal to what
#     go tool pprof -sample_index=cpu reads (with go), and refuse a timeline;
#   - flamegraph --diff: red for growth, blue for shrinking, the delta in the
#     title, and each frame's change from BASE in its <title>;
#   - bad input exits 2 naming the file and the line or byte offset.
srcdir=${srcdir:-.}
LC_ALL=C
export LC_ALL
lp=./tools/labelprof
child=./tests/env_child
. "$srcdir/tests/sh_common.sh"
test_tmpdir profile_input_sh

# Round trips: trace -> folded -> folded, and trace -> pprof -> folded.
n=0
for trace in "$srcdir/tests/data/cmd/diff_base.json" "$srcdir/tests/data/cmd/diff_new.json" "$srcdir"/tests/data/nnapi/*.txt \
  "$srcdir"/tests/data/cmd/fuzz/perfetto-*.pftrace; do
  $lp folded "$trace" >"$tmp/a.folded" 2>/dev/null || continue
  [ -s "$tmp/a.folded" ] || continue
  n=$((n + 1))
  sort "$tmp/a.folded" >"$tmp/a.sorted"
  $lp folded "$tmp/a.folded" 2>"$tmp/err" | sort >"$tmp/b.sorted"
  cmp -s "$tmp/a.sorted" "$tmp/b.sorted" || {
    bad "folded stacks of $trace read back differ: $(head -2 "$tmp/err")"
    diff "$tmp/a.sorted" "$tmp/b.sorted" | head -6
  }
  $lp pprof "$trace" >"$tmp/a.pb.gz" 2>/dev/null || bad "labelprof pprof $trace failed"
  $lp folded "$tmp/a.pb.gz" 2>"$tmp/err" | sort >"$tmp/c.sorted"
  cmp -s "$tmp/a.sorted" "$tmp/c.sorted" || {
    bad "the pprof file of $trace read back differs: $(head -2 "$tmp/err")"
    diff "$tmp/a.sorted" "$tmp/c.sorted" | head -6
  }
  # An uncompressed profile is read too.
  gzip -dc "$tmp/a.pb.gz" >"$tmp/a.pprof"
  $lp folded "$tmp/a.pprof" 2>/dev/null | sort | cmp -s - "$tmp/a.sorted" || bad "the ungzipped pprof of $trace differs"
  # stats and tree take profiles as well.
  $lp tree "$tmp/a.pb.gz" >/dev/null 2>&1 || bad "labelprof tree on the pprof of $trace failed"
  $lp stats "$tmp/a.folded" >/dev/null 2>&1 || bad "labelprof stats on the folded stacks of $trace failed"
  # The flame graph of the trace and of its profile draw the same frames.
  $lp flamegraph "$trace" 2>/dev/null | grep '^<g class="f">' >"$tmp/t.frames"
  $lp flamegraph "$tmp/a.pb.gz" 2>/dev/null | grep '^<g class="f">' >"$tmp/p.frames"
  [ -s "$tmp/t.frames" ] && cmp -s "$tmp/t.frames" "$tmp/p.frames" || bad "the flame graphs of $trace and of its pprof differ"
done
[ "$n" -ge 3 ] || bad "only $n traces gave folded stacks"

# Time outside any label stays outside, at the end or between stacks.
printf 'a;b 10\n(outside of any label) 5\na 7\n(outside of any label) 3\n' >"$tmp/out.folded"
$lp folded "$tmp/out.folded" >"$tmp/out.back" 2>&1 || bad "folded with time outside labels failed: $(cat "$tmp/out.back")"
printf '(outside of any label) 8\na 7\na;b 10\n' >"$tmp/out.want"
sort "$tmp/out.back" | cmp -s - "$tmp/out.want" || {
  bad "time outside any label is not kept"
  cat "$tmp/out.back"
}

# flamegraph on each input kind: well-formed, and frames as wide as the stacks say.
$lp flamegraph "$tmp/out.folded" >"$tmp/f.svg" || bad "flamegraph of folded stacks failed"
grep -q '<title>b (10 ns, 40.00%)</title>' "$tmp/f.svg" || bad "the flame graph of folded stacks lacks 'b (10 ns, 40.00%)'"
if command -v xmllint >/dev/null 2>&1; then
  xmllint --noout "$tmp/f.svg" || bad "the flame graph of folded stacks is not well-formed XML"
fi

# CPU weights, from a profile the library wrote with LABELPROF_CPU=1.
LABELPROF_PROFILE="$tmp/p.pb.gz" LABELPROF_CPU=1 $child xxxxxxxx >/dev/null 2>"$tmp/err" ||
  bad "env_child failed: $(cat "$tmp/err")"
$lp folded --cpu "$tmp/p.pb.gz" >"$tmp/cpu.folded" 2>"$tmp/err" || bad "folded --cpu failed: $(cat "$tmp/err")"
$lp folded "$tmp/p.pb.gz" >"$tmp/wall.folded" 2>"$tmp/err" || bad "folded failed: $(cat "$tmp/err")"
cmp -s "$tmp/cpu.folded" "$tmp/wall.folded" && bad "folded --cpu gives the wall times"
$lp flamegraph --cpu "$tmp/p.pb.gz" >"$tmp/cpu.svg" 2>"$tmp/err" || bad "flamegraph --cpu failed: $(cat "$tmp/err")"
grep -q 'CPU time' "$tmp/cpu.svg" || bad "the CPU flame graph does not say it is CPU time"
$lp flamegraph --cpu "$srcdir/tests/data/cmd/diff_new.json" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q 'diff_new.json: no CPU time' "$tmp/err" || bad "flamegraph --cpu on a timeline: want exit 2 and 'no CPU time'"
# A profile without CPU time declares none, and --cpu refuses it as it refuses a timeline: exit 2, and why.
$lp folded --cpu "$tmp/a.pb.gz" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q 'a.pb.gz: no CPU time' "$tmp/err" || bad "folded --cpu on labelprof pprof's output: want exit 2 and 'no CPU time'"
LABELPROF_PROFILE="$tmp/nocpu.pb.gz" $child xx >/dev/null 2>"$tmp/err" || bad "env_child failed: $(cat "$tmp/err")"
for view in folded flamegraph; do
  $lp $view --cpu "$tmp/nocpu.pb.gz" >/dev/null 2>"$tmp/err"
  [ $? -eq 2 ] && grep -q 'nocpu.pb.gz: no CPU time in this input (.*LABELPROF_CPU=1' "$tmp/err" ||
    bad "$view --cpu on a profile without CPU time: want exit 2 and why, got: $(cat "$tmp/err")"
done

# --diff: diff_base -> diff_new, 'slow' grows from 20 to 30 us; the other way it shrinks.
base=$srcdir/tests/data/cmd/diff_base.json new=$srcdir/tests/data/cmd/diff_new.json
$lp flamegraph --diff "$base" "$new" >"$tmp/d.svg" 2>"$tmp/err" || bad "flamegraph --diff failed: $(cat "$tmp/err")"
grep -q '<title>slow (30.0 us, 30.00%, +50.0% from 20.0 us)</title><rect [^>]*fill="rgb(255,155,155)"' "$tmp/d.svg" ||
  bad "flamegraph --diff: 'slow' (+50%) is not drawn light red"
grep -q '<title>work (100 us, 100.00%, +0.0% from 100 us)</title><rect [^>]*fill="rgb(255,255,255)"' "$tmp/d.svg" ||
  bad "flamegraph --diff: 'work' (unchanged) is not white"
grep -q 'change from base: 100 us to 100 us (+0.0%); red grew, blue shrank' "$tmp/d.svg" || bad "flamegraph --diff: no delta in the title"
if command -v xmllint >/dev/null 2>&1; then
  xmllint --noout "$tmp/d.svg" || bad "the differential flame graph is not well-formed XML"
fi
if command -v rsvg-convert >/dev/null 2>&1; then
  rsvg-convert "$tmp/d.svg" -o "$tmp/d.png" && [ -s "$tmp/d.png" ] || bad "rsvg-convert cannot render the differential flame graph"
fi
$lp flamegraph --diff "$new" "$base" >"$tmp/d2.svg" 2>/dev/null || bad "flamegraph --diff (reversed) failed"
grep -q '<title>slow (20.0 us, 20.00%, -33.3% from 30.0 us)</title><rect [^>]*fill="rgb(188,188,255)"' "$tmp/d2.svg" ||
  bad "flamegraph --diff: 'slow' (-33%) is not drawn light blue"
printf 'work 60000\nwork;slow 20000\nwork;fresh 20000\n' >"$tmp/n.folded"
$lp flamegraph --diff "$base" "$tmp/n.folded" >"$tmp/d3.svg" 2>/dev/null || bad "flamegraph --diff of a JSON and a folded file failed"
grep -q '<title>fresh (20.0 us, 20.00%, not in base)</title><rect [^>]*fill="rgb(255,55,55)"' "$tmp/d3.svg" ||
  bad "flamegraph --diff: a frame new in NEW is not full red"
$lp flamegraph --diff "$base" >/dev/null 2>&1
[ $? -eq 2 ] || bad "flamegraph --diff with one file: want exit 2"
$lp flamegraph "$base" "$new" >/dev/null 2>&1
[ $? -eq 2 ] || bad "flamegraph with two files and no --diff: want exit 2"

# Bad input: exit 2, the file and the line (folded) or byte offset (pprof).
printf 'a;b 10\na 3\nno weight here\n' >"$tmp/bad.folded"
$lp folded "$tmp/bad.folded" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q 'bad.folded:3:1: expected a folded stack' "$tmp/err" ||
  bad "a folded file with a bad line 3: want exit 2 and 'bad.folded:3:1:', got: $(cat "$tmp/err")"
size=$(wc -c <"$tmp/a.pprof")
head -c $((size - 3)) "$tmp/a.pprof" >"$tmp/cut.pprof"
$lp flamegraph "$tmp/cut.pprof" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q 'cut.pprof: byte [0-9]*: ' "$tmp/err" ||
  bad "a cut pprof file: want exit 2 and 'cut.pprof: byte N:', got: $(cat "$tmp/err")"

if ! command -v go >/dev/null 2>&1; then
  echo "note: go (Debian's golang-go) is not installed: the checks against go tool pprof are skipped"
  [ $fail -eq 0 ] || exit 1
  exit 77
fi
export HOME=${HOME:-$tmp} GOCACHE=$tmp/gocache GOFLAGS=-mod=mod GOTOOLCHAIN=local
# Go's writer (packed fields, its own order of messages) reads the same as ours.
go tool pprof -proto "$tmp/p.pb.gz" >"$tmp/go.pb.gz" 2>"$tmp/err" || bad "go tool pprof -proto failed: $(cat "$tmp/err")"
$lp folded "$tmp/go.pb.gz" | sort >"$tmp/go.sorted"
sort "$tmp/wall.folded" | cmp -s - "$tmp/go.sorted" || bad "the profile as Go re-encoded it reads differently"
# The cpu sample type, as go tool pprof reads it: stacks summed, root first.
go tool pprof -sample_index=cpu -unit=ns -traces "$tmp/p.pb.gz" 2>/dev/null | awk '
  /^-----/ { if (n) { s = st[n]; for (i = n - 1; i >= 1; i--) s = s ";" st[i]; sum[s] += v } n = 0; next }
  /^ *thread(_id)?:/ { next }
  /^ *[0-9]+ns +/ { v = $1; sub(/ns$/, "", v); sub(/^ *[0-9]+ns +/, ""); st[++n] = $0; next }
  /^      +[^ ]/ && n { sub(/^ +/, ""); st[++n] = $0; next }
  END { for (s in sum) if (sum[s] > 0) print s " " sum[s] }' | sort >"$tmp/go_cpu.sorted"
[ -s "$tmp/go_cpu.sorted" ] || bad "go tool pprof shows no CPU time"
sort "$tmp/cpu.folded" | cmp -s - "$tmp/go_cpu.sorted" || {
  bad "folded --cpu differs from go tool pprof -sample_index=cpu"
  sort "$tmp/cpu.folded" | diff - "$tmp/go_cpu.sorted" | head
}

[ $fail -eq 0 ] || exit 1
echo "profile_input: ok"
