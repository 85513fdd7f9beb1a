#!/bin/sh
# go_profiles.sh: profiles written by Go's own runtime/pprof (CPU, heap and
# goroutine, by tests/go_profiles.go) are read by every subcommand, with the
# stacks go tool pprof shows. The runtime writes the Profile message's
# fields in an order other writers do not (time_nanos or period_type
# first), which the reader once refused as "not a format labelprof reads".
# The Go build runs offline (standard library only, GOTOOLCHAIN=local,
# GOPROXY=off) with its cache under this script's temporary directory,
# removed with it. Skipped (77) without go (Debian's golang-go, which
# ./install-deps installs); the committed profiles
# tests/data/cmd/fuzz/profile-go-runtime-*.pprof are read in any case.
srcdir=${srcdir:-.}
LC_ALL=C
export LC_ALL
lp=./tools/labelprof
. "$srcdir/tests/sh_common.sh"
test_tmpdir go_profiles_sh

# The profiles committed from an earlier run (CPU: field 9 first; heap: field 11 first).
for kind in cpu heap; do
  f=$srcdir/tests/data/cmd/fuzz/profile-go-runtime-$kind.pprof
  $lp folded "$f" >"$tmp/$kind.folded" 2>"$tmp/err" || bad "folded $f: $(cat "$tmp/err")"
done
grep -q '^runtime\.main;main\.main;.*main\.burn [0-9]*$' "$tmp/cpu.folded" || bad "the committed CPU profile lacks main.burn"
grep -q '^runtime\.main;main\.main;main\.allocate [0-9]*$' "$tmp/heap.folded" || bad "the committed heap profile lacks main.allocate"

if ! command -v go >/dev/null 2>&1; then
  echo "note: go (Debian's golang-go) is not installed: profiles are not written afresh by Go's runtime"
  [ $fail -eq 0 ] || exit 1
  exit 77
fi
# Offline and self-contained: no module, no proxy, no toolchain download, nothing left in HOME.
unset GOFLAGS
export HOME="$tmp" GOCACHE="$tmp/gocache" GOPATH="$tmp/gopath" GOTOOLCHAIN=local GOPROXY=off GO111MODULE=off GOENV=off
go run "$srcdir/tests/go_profiles.go" "$tmp/cpu.pb.gz" "$tmp/heap.pb.gz" "$tmp/goroutine.pb.gz" 2>"$tmp/err" ||
  { bad "go run go_profiles.go: $(cat "$tmp/err")"; exit 1; }
for kind in cpu heap goroutine; do
  p=$tmp/$kind.pb.gz
  # The first field as the runtime wrote it: not sample_type (0x0a), which is all the sniffer once took.
  first=$(gzip -dc "$p" | od -An -tx1 -N1 | tr -d ' ')
  [ "$first" != 0a ] || bad "$kind: the runtime wrote sample_type first; this test no longer covers another order"
  for sub in folded stats tree flamegraph pprof; do
    $lp "$sub" "$p" >"$tmp/out" 2>"$tmp/err" || bad "labelprof $sub on Go's $kind profile (first field 0x$first): $(head -2 "$tmp/err")"
  done
  # The same stacks as go tool pprof reads, with the same weights: the sample type each reader takes (the
  # last one: cpu, inuse_space, goroutine count), summed per stack, root first.
  go tool pprof -raw "$p" >"$tmp/raw" 2>"$tmp/err" || { bad "go tool pprof -raw $kind: $(cat "$tmp/err")"; continue; }
  awk '
    /^Samples:/ { s = 1; next } /^Locations/ { s = 0; l = 1; next } /^Mappings/ { l = 0 }
    s && /^ *[0-9]+/ && /: / { n = split($0, f, ":"); split(f[1], v, " "); w = v[length(v)]; split(f[2], ids, " ");
      st = ""; for (i = length(ids); i >= 1; i--) st = st " " ids[i]; if (w > 0) rows[++nr] = w st; next }
    l && /^ +[0-9]+: / { id = $1; sub(/:/, "", id); cur = id; names[id] = ""; fn = $0
      sub(/^ +[0-9]+: 0x[0-9a-f]+ (M=[0-9]+ )?/, "", fn); sub(/ [^ ]+:[0-9]+( s=[0-9]+)?$/, "", fn); names[id] = fn; next }
    l && /^ +[^ ]/ && cur != "" { fn = $0; sub(/^ +/, "", fn); sub(/ [^ ]+:[0-9]+( s=[0-9]+)?$/, "", fn); names[cur] = fn ";" names[cur] }
    END { for (r = 1; r <= nr; r++) { k = split(rows[r], f, " "); s = ""; for (i = 2; i <= k; i++) s = s (i > 2 ? ";" : "") names[f[i]]
      sum[s] += f[1] } for (s in sum) print s " " sum[s] }' "$tmp/raw" | sort >"$tmp/go.sorted"
  $lp folded "$p" 2>/dev/null | sort >"$tmp/lp.sorted"
  [ -s "$tmp/lp.sorted" ] || bad "$kind: labelprof folded gives no stacks"
  cmp -s "$tmp/go.sorted" "$tmp/lp.sorted" || {
    bad "$kind: the stacks differ from go tool pprof's (go, labelprof)"
    diff "$tmp/go.sorted" "$tmp/lp.sorted" | head -8
  }
done
$lp folded "$tmp/cpu.pb.gz" | grep -q 'main\.burn' || bad "the CPU profile lacks main.burn"
$lp folded "$tmp/heap.pb.gz" | grep -q 'main\.allocate' || bad "the heap profile lacks main.allocate"
$lp folded "$tmp/goroutine.pb.gz" | grep -q 'main\.parked' || bad "the goroutine profile lacks main.parked"

[ $fail -eq 0 ] || exit 1
echo "go_profiles: Go's runtime profiles (cpu, heap, goroutine) read as go tool pprof reads them"
