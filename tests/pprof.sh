#!/bin/sh
# pprof.sh: LABELPROF_PROFILE=*.pb.gz and LABELPROF_PROFILE_EVERY, read back
# by Go's own reader (`go tool pprof`, Debian's golang-go) and checked
# against the folded stacks of the same profile: every stack, its count of
# samples, each label's file and line. Without go, the gzip checks run and
# the rest is skipped with a note.
srcdir=${srcdir:-.}
child=./tests/env_child
. "$srcdir/tests/sh_common.sh"
test_tmpdir pprof_sh

# One profile at exit, in pprof's format, beside the folded stacks of the same profile.
LABELPROF_PROFILE="$tmp/p.pb.gz" LABELPROF_FOLDED="$tmp/p.folded" LABELPROF_CPU=1 $child xxxxxxxx >/dev/null 2>"$tmp/err" ||
  bad "env_child failed: $(cat "$tmp/err")"
gzip -t "$tmp/p.pb.gz" 2>/dev/null || bad "p.pb.gz is not a valid gzip file"
[ -s "$tmp/p.folded" ] || bad "no folded stacks"
# .pprof is the same format.
LABELPROF_PROFILE="$tmp/q.pprof" $child xx >/dev/null 2>&1 && gzip -t "$tmp/q.pprof" 2>/dev/null || bad "q.pprof is not gzip"

# One profile per period, numbered.
LABELPROF_PROFILE="$tmp/every-%n.pb.gz" LABELPROF_PROFILE_EVERY=40ms $child xxxxxxxxxxxxxxxxxxxx >/dev/null 2>"$tmp/err" ||
  bad "env_child with LABELPROF_PROFILE_EVERY failed: $(cat "$tmp/err")"
n=$(ls "$tmp" | grep -c '^every-[0-9]*\.pb\.gz$')
[ "$n" -ge 2 ] || bad "LABELPROF_PROFILE_EVERY=40ms over 200 ms wrote $n profiles, want 2 or more"
for f in "$tmp"/every-*.pb.gz; do gzip -t "$f" 2>/dev/null || bad "$f is not gzip"; done

if ! command -v go >/dev/null 2>&1; then
  echo "note: go (Debian's golang-go) is not installed: go tool pprof's checks are skipped"
  [ $fail -eq 0 ] || exit 1
  exit 77
fi
export HOME=${HOME:-$tmp} GOCACHE=$tmp/gocache GOFLAGS=-mod=mod GOTOOLCHAIN=local

# TRACES, the output of go tool pprof -traces: its stacks in folded form (root first), each with
# the sum of its samples, sorted.
to_folded() { # traces
  awk '
    /^-----/ { if (n) { s = st[n]; for (i = n - 1; i >= 1; i--) s = s ";" st[i]; sum[s] += v } n = 0; next }
    /^ *thread(_id)?:/ { next }
    /^ +[0-9]+ +/ { v = $1; sub(/^ +[0-9]+ +/, ""); st[++n] = $0; next }
    /^      +[^ ]/ && n { sub(/^ +/, ""); st[++n] = $0; next }
    END { for (s in sum) if (sum[s]) print s " " sum[s] } # a stack of CPU samples only has none
  ' "$1" | sort
}

# Every stack and its samples, as go tool pprof -traces reads them, in folded form (root first).
go tool pprof -traces -sample_index=samples "$tmp/p.pb.gz" >"$tmp/traces" 2>"$tmp/err" || bad "go tool pprof -traces: $(cat "$tmp/err")"
to_folded "$tmp/traces" >"$tmp/from_pprof"
sort "$tmp/p.folded" >"$tmp/folded_sorted"
cmp -s "$tmp/from_pprof" "$tmp/folded_sorted" || {
  bad "the stacks go tool pprof reads differ from the folded stacks"
  diff "$tmp/from_pprof" "$tmp/folded_sorted"
}

# Flat and cumulative: env inner is flat only, env request cumulative only; the total is the samples.
go tool pprof -top -sample_index=samples "$tmp/p.pb.gz" >"$tmp/top" 2>"$tmp/err" || bad "go tool pprof -top: $(cat "$tmp/err")"
total=$(awk '{ s += $NF } END { print s }' "$tmp/p.folded")
grep -q "Total samples = $total *$" "$tmp/top" || bad "-top's total is not $total: $(grep Total "$tmp/top")"
inner=$(awk '$0 ~ /;env inner / { s += $NF } END { print s }' "$tmp/p.folded")
awk -v want="$inner" '$NF == "inner" && $(NF-1) == "env" { found = 1; if ($1 != want || $4 != want) exit 1 } END { exit !found }' "$tmp/top" ||
  bad "env inner: flat and cum should both be $inner"
awk -v want="$total" '$NF == "request" { found = 1; if ($1 != 0 || $4 != want) exit 1 } END { exit !found }' "$tmp/top" ||
  bad "env request: flat should be 0 and cum $total"

# Function names, files and lines: each label at its call site in env_child.c.
go tool pprof -raw "$tmp/p.pb.gz" >"$tmp/raw" 2>"$tmp/err" || bad "go tool pprof -raw: $(cat "$tmp/err")"
for label in "env inner" "env work" "env request"; do
  line=$(grep -n "\"$label\")" "$srcdir/tests/env_child.c" | head -1 | cut -d: -f1)
  grep -q " $label [^ ]*env_child.c:$line s=$line\$" "$tmp/raw" || bad "no location '$label env_child.c:$line' in -raw"
done
grep -q '^samples/count wall/nanoseconds cpu/nanoseconds\[dflt\]$' "$tmp/raw" || bad "sample types: $(grep count "$tmp/raw")"
# Without CPU time measured, no cpu sample type: pprof must not read "no CPU used" into a profile that never looked.
go tool pprof -raw "$tmp/q.pprof" >"$tmp/q.raw" 2>"$tmp/err" || bad "go tool pprof -raw q.pprof: $(cat "$tmp/err")"
grep -q '^samples/count wall/nanoseconds\[dflt\]$' "$tmp/q.raw" || bad "q.pprof's sample types: $(grep count "$tmp/q.raw")"
go tool pprof -top -sample_index=cpu "$tmp/q.pprof" >/dev/null 2>&1 && bad "go tool pprof -sample_index=cpu read a profile without CPU time"
grep -q '^PeriodType: wall nanoseconds$' "$tmp/raw" || bad "no wall/nanoseconds period type"
grep -q '^Period: 1000000$' "$tmp/raw" || bad "the period is not the 1 ms tick"
grep -q 'thread:\[env_child\]' "$tmp/raw" || bad "no thread label"
# The profile is named by the program it profiled, as Go's are: its mapping's file is the program's path
# (tests/.libs/env_child or lt-env_child behind libtool's wrapper), which -top prints as "File:".
head -1 "$tmp/top" | grep -q '^File: \(lt-\)\{0,1\}env_child$' || bad "-top names the profile '$(head -1 "$tmp/top")', want 'File: env_child'"
sed -n '/^Mappings/,$p' "$tmp/raw" | grep -q '^1: .* /[^ ]*/\(lt-\)\{0,1\}env_child ' ||
  bad "the mapping's file is not the program's path: $(sed -n '/^Mappings/,$p' "$tmp/raw" | tr '\n' ' ')"
grep -q 'thread_id:\[[0-9][0-9]*\]' "$tmp/raw" || bad "no thread_id label"

# labelprof pprof: any timeline the command reads, checked against labelprof folded on the same file.
lp=./tools/labelprof
for trace in "$srcdir/tests/data/cmd/diff_base.json" "$srcdir/tests/data/cmd/diff_new.json" "$srcdir"/tests/data/nnapi/*.txt; do
  [ -f "$trace" ] || continue
  $lp folded "$trace" >"$tmp/cmd.folded" 2>/dev/null || continue
  $lp pprof "$trace" >"$tmp/cmd.pb.gz" 2>"$tmp/err" || { bad "labelprof pprof $trace: $(cat "$tmp/err")"; continue; }
  gzip -t "$tmp/cmd.pb.gz" 2>/dev/null || bad "labelprof pprof $trace: not gzip"
  # -traces prints times with units; -raw gives the plain nanoseconds.
  go tool pprof -raw "$tmp/cmd.pb.gz" >"$tmp/cmd.raw" 2>"$tmp/err" || { bad "go tool pprof -raw $trace: $(cat "$tmp/err")"; continue; }
  grep -q '^samples/count wall/nanoseconds\[dflt\]$' "$tmp/cmd.raw" || bad "labelprof pprof $trace: sample types: $(grep count "$tmp/cmd.raw")"
  # No program made a timeline's profile: the trace it came from names it.
  go tool pprof -top "$tmp/cmd.pb.gz" 2>/dev/null | head -1 | grep -q -F -x "File: $(basename "$trace")" ||
    bad "labelprof pprof $trace: the profile is not named by its trace"
  awk '
    /^Samples:/ { s = 1; next } /^Locations/ { s = 0; l = 1; next } /^Mappings/ { l = 0 }
    s && /^ +[0-9]+ +[0-9]+: / { sub(/:/, "", $2); w = $2; stack = ""; for (i = 3; i <= NF; i++) stack = stack " " $i; rows[++nr] = w stack }
    l && /^ +[0-9]+: / { id = $1; sub(/:/, "", id); name = $0; sub(/^ +[0-9]+: 0x0 M=1 /, "", name); sub(/ +s=0$/, "", name); sub(/ :0$/, "", name); names[id] = name }
    END {
      for (r = 1; r <= nr; r++) {
        k = split(rows[r], f, " "); s = names[f[k]]
        for (i = k - 1; i >= 2; i--) s = s ";" names[f[i]]
        if (f[1] > 0) sum[s] += f[1]
      }
      for (s in sum) print s " " sum[s]
    }' "$tmp/cmd.raw" | sort >"$tmp/cmd.from_pprof"
  sort "$tmp/cmd.folded" >"$tmp/cmd.folded_sorted"
  cmp -s "$tmp/cmd.from_pprof" "$tmp/cmd.folded_sorted" || {
    bad "labelprof pprof $trace: the stacks differ from labelprof folded"
    diff "$tmp/cmd.from_pprof" "$tmp/cmd.folded_sorted" | head -10
  }
  checked=$((checked + 1))
done
[ "${checked:-0}" -ge 2 ] || bad "labelprof pprof was checked on ${checked:-0} traces, want 2 or more"
printf '{"traceEvents":[{"ph":"B","name":"x","ts":1,"pid":1,"tid":1}' >"$tmp/cut.json"
$lp pprof "$tmp/cut.json" >"$tmp/cut.pb.gz" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q 'cut.json' "$tmp/err" || bad "a cut JSON trace: want exit 2 and a message naming it"

# The periodic profiles are profiles too.
for f in "$tmp"/every-*.pb.gz; do
  go tool pprof -top "$f" >/dev/null 2>"$tmp/err" || bad "go tool pprof cannot read $f: $(cat "$tmp/err")"
done

[ $fail -eq 0 ] || exit 1
echo "pprof.sh: all checks passed"
