#!/bin/sh
# flamegraph.sh: `labelprof flamegraph` on JSON and systrace timelines: the
# SVG is well-formed (xmllint, libxml2-utils), renders with librsvg
# (rsvg-convert, librsvg2-bin) to a PNG that is not blank, has no external
# reference, and each top-level label's frame is as wide as its share of the
# time within a pixel; labels with XML's special characters stay
# well-formed, and so are labels with bytes or characters XML cannot hold
# (from JSON, folded, systrace, Perfetto and pprof input); siblings narrower
# than a pixel are merged. The checks that need a missing tool are skipped
# with a note.
srcdir=${srcdir:-.}
lp=./tools/labelprof
. "$srcdir/tests/sh_common.sh"
test_tmpdir flamegraph_sh
skipped=0
have() { command -v "$1" >/dev/null 2>&1 || { echo "note: $1 is not installed: its checks are skipped"; skipped=1; return 1; }; }
have xmllint && xml=1 || xml=0
have rsvg-convert && rsvg=1 || rsvg=0

# A label with XML's specials, and 3000 siblings of 1 us beside one of 10 s: narrower than a pixel.
printf '[{"name":"a<b>&\\"c\\"","ph":"X","ts":0,"dur":1000000,"pid":1,"tid":1}' >"$tmp/hostile.json"
awk 'BEGIN { printf "[{\"name\":\"big\",\"ph\":\"X\",\"ts\":0,\"dur\":10000000,\"pid\":1,\"tid\":1}";
  for (i = 0; i < 3000; i++) printf ",\n{\"name\":\"tiny%d\",\"ph\":\"X\",\"ts\":%d,\"dur\":1,\"pid\":1,\"tid\":2}", i, i * 2;
  print "]" }' >"$tmp/narrow.json"

for trace in "$srcdir/tests/data/cmd/diff_base.json" "$srcdir/tests/data/nnapi/driver.txt" "$tmp/hostile.json" "$tmp/narrow.json"; do
  name=$(basename "$trace")
  svg=$tmp/$name.svg
  $lp flamegraph "$trace" >"$svg" 2>"$tmp/err" || { bad "$name: labelprof flamegraph failed: $(cat "$tmp/err")"; continue; }
  if [ $xml = 1 ]; then xmllint --noout "$svg" 2>"$tmp/err" || bad "$name: not well-formed: $(head -3 "$tmp/err")"; fi
  grep -Eq '(href|src)=|url\(|@import' "$svg" && bad "$name: an external reference"
  grep -q '<script' "$svg" || bad "$name: no inline script"
  [ "$(wc -c <"$svg")" -le 5000000 ] || bad "$name: over 5 MB"
  if [ $rsvg = 1 ]; then
    rsvg-convert "$svg" -o "$tmp/$name.png" 2>"$tmp/err" || bad "$name: rsvg-convert failed: $(cat "$tmp/err")"
    # Not blank: the same image without its frames is a different, smaller PNG.
    grep -v '<g class="f">' "$svg" >"$tmp/blank.svg"
    rsvg-convert "$tmp/blank.svg" -o "$tmp/blank.png" 2>/dev/null
    [ "$(wc -c <"$tmp/$name.png")" -gt $(($(wc -c <"$tmp/blank.png") + 200)) ] || bad "$name: the PNG looks blank"
  fi
  # Each top-level label: its frame's width against its share of the folded stacks' time, within a pixel.
  $lp folded "$trace" >"$tmp/folded" || { bad "$name: labelprof folded failed"; continue; }
  awk '{ n = split($0, f, " "); v = f[n]; stack = substr($0, 1, length($0) - length(v) - 1)
         total += v; if (stack != "(outside of any label)") { split(stack, s, ";"); top[s[1]] += v } }
       END { for (l in top) printf "%s\t%.3f\n", l, top[l] / total * 1180 }' "$tmp/folded" | sort >"$tmp/want"
  sed -n 's/^<g class="f"><title>\(.*\) ([^()]*, [0-9.]*%)<\/title><rect x="[0-9.]*" y="\([0-9.]*\)" width="\([0-9.]*\)".*/\2\t\3\t\1/p' "$svg" |
    sed 's/&lt;/</g; s/&gt;/>/g; s/&quot;/"/g; s/&amp;/\&/g' >"$tmp/frames"
  bottom=$(cut -f1 "$tmp/frames" | sort -n | tail -1)
  awk -F '\t' -v y="$(echo "$bottom - 16" | bc)" '$1 + 0 == y + 0 && $3 != "(narrow frames merged)" { printf "%s\t%s\n", $3, $2 }' "$tmp/frames" |
    sort >"$tmp/got"
  join -t "$(printf '\t')" "$tmp/want" "$tmp/got" | awk -F '\t' -v f="$name" '
    { d = $2 - $3; if (d < 0) d = -d; if (d > 1) { print "FAIL: " f ": " $1 " is " $3 " px wide, want " $2; bad = 1 } n++ }
    END { exit bad }' || fail=$((fail + 1))
  [ "$(wc -l <"$tmp/got")" -ge 1 ] || bad "$name: no top-level frames found"
done
# Labels with bytes that are not UTF-8, U+FFFE and U+FFFF, control characters (tests/data/cmd/fuzz/hostile-names.*),
# from every format the command reads: well-formed XML (xmllint), with each such byte or character as U+FFFD.
hostile=$srcdir/tests/data/cmd/fuzz/hostile-names
$lp pprof "$hostile.json" >"$tmp/hostile-names.pb.gz" 2>"$tmp/err" || bad "labelprof pprof $hostile.json: $(cat "$tmp/err")"
for input in "$hostile.json" "$hostile.folded" "$hostile.txt" "$hostile.pftrace" "$tmp/hostile-names.pb.gz"; do
  name=$(basename "$input")
  $lp flamegraph "$input" >"$tmp/h.svg" 2>"$tmp/err" || { bad "$name: labelprof flamegraph failed: $(cat "$tmp/err")"; continue; }
  if [ $xml = 1 ]; then xmllint --noout "$tmp/h.svg" 2>"$tmp/err" || bad "$name: not well-formed XML: $(head -2 "$tmp/err")"; fi
  grep -q "$(printf '\357\277\275')" "$tmp/h.svg" || bad "$name: no U+FFFD where the label had a byte or character XML cannot hold"
done
$lp flamegraph --diff "$hostile.json" "$hostile.folded" >"$tmp/hd.svg" 2>"$tmp/err" || bad "flamegraph --diff of the hostile names failed"
if [ $xml = 1 ]; then xmllint --noout "$tmp/hd.svg" 2>/dev/null || bad "flamegraph --diff of the hostile names: not well-formed XML"; fi
grep -q '(narrow frames merged)' "$tmp/narrow.json.svg" || bad "narrow siblings were not merged"
[ "$(grep -c '<g class="f">' "$tmp/narrow.json.svg")" -lt 100 ] || bad "narrow siblings drawn one by one"
grep -q '<title>a&lt;b&gt;&amp;&quot;c&quot; (' "$tmp/hostile.json.svg" || bad "the hostile label is not escaped in its title"

[ $fail -eq 0 ] || exit 1
[ $skipped -eq 0 ] || exit 77
echo "flamegraph.sh: all checks passed"
