#!/bin/sh
# speedscope.sh: speedscope (the npm package's built app) opens labelprof's
# files: LABELPROF_PROFILE's pprof (.pb.gz, .pprof, and the same bytes
# gunzipped), `labelprof pprof` of a trace, and LABELPROF_TRACE's Chrome
# JSON. A local HTTP server (node) serves the app and the file; headless
# Chromium loads it with #profileURL=...&view=sandwich, and a harness (below)
# reads the sandwich view's table of every profile it made (each thread of a
# JSON trace; 'n' selects the next) into the document, which --dump-dom
# prints. Each label must show, and nothing else; its total and self must be
# those of labelprof's folded stacks of the same file, to the digits shown.
# Skipped (77) without speedscope: set LP_SPEEDSCOPE_DIR to the package
# (node_modules/speedscope), or have its `speedscope` command on PATH; it
# also needs node and chromium.
srcdir=${srcdir:-.}
lp=./tools/labelprof
child=./tests/env_child

dir=${LP_SPEEDSCOPE_DIR:-}
if [ -z "$dir" ] && command -v speedscope >/dev/null 2>&1; then
  cli=$(readlink -f "$(command -v speedscope)")
  dir=$(dirname "$(dirname "$cli")")
fi
browser=
for b in chromium chromium-browser; do
  command -v "$b" >/dev/null 2>&1 && browser=$b && break
done
if [ -z "$dir" ] || ! [ -f "$dir/dist/release/index.html" ] || [ -z "$browser" ] || ! command -v node >/dev/null 2>&1; then
  echo "note: speedscope (LP_SPEEDSCOPE_DIR=.../node_modules/speedscope, or its command), node or chromium is missing: skipped"
  exit 77
fi
release=$dir/dist/release
. "$srcdir/tests/sh_common.sh"
test_tmpdir speedscope_sh
server=
at_exit '[ -z "$server" ] || kill "$server" 2>/dev/null' # on a signal too

# The server: a file by its name, from $tmp or else from speedscope's app; its port on standard output.
cat >"$tmp/serve.js" <<'EOJ'
const http = require('http'), fs = require('fs'), path = require('path');
const dirs = process.argv.slice(2);
const types = {'.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm'};
const server = http.createServer((req, res) => {
  const name = path.basename(decodeURIComponent(new URL(req.url, 'http://localhost').pathname));
  for (const d of dirs) {
    const f = path.join(d, name);
    if (name && fs.existsSync(f) && fs.statSync(f).isFile()) {
      res.writeHead(200, {'Content-Type': types[path.extname(f)] || 'application/octet-stream'});
      fs.createReadStream(f).pipe(res);
      return;
    }
  }
  res.writeHead(404);
  res.end();
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
EOJ
# The harness, loaded before the app: it keeps the app's alerts ("Unrecognized format!"), waits for the
# table, writes "profile K/N NAME" and a row per frame (total, self, name, file), then selects the next.
cat >"$tmp/harness.js" <<'EOJ'
(function () {
  var alerts = [], out = [], seen = {}, last = null, polls = 0;
  window.alert = function (m) { alerts.push(String(m)); };
  function text(el) { return el.textContent.replace(/\s+/g, ' ').trim(); }
  function finish(why) {
    var pre = document.createElement('pre');
    pre.id = 'lp-result';
    pre.textContent = out.concat(alerts.map(function (a) { return 'alert ' + a; }), ['end ' + why]).join('\n');
    document.documentElement.appendChild(pre);
  }
  function which() {
    var spans = document.getElementsByTagName('span');
    for (var i = 0; i < spans.length; i++) {
      var m = /^\((\d+)\/(\d+)\)$/.exec(text(spans[i]));
      if (m && spans[i].parentNode.tagName === 'SPAN')
        return [+m[1], +m[2], text(spans[i].parentNode).slice(0, -text(spans[i]).length).trim()];
    }
    return [1, 1, document.title.replace(/ - speedscope$/, '')];
  }
  function rows() {
    var r = [], trs = document.getElementsByTagName('tr');
    for (var i = 0; i < trs.length; i++) {
      var td = trs[i].getElementsByTagName('td');
      if (td.length === 3 && /%\)$/.test(text(td[0])))
        r.push([text(td[0]), text(td[1]), text(td[2]), td[2].getAttribute('title') || '']);
    }
    return r;
  }
  function poll() {
    polls++;
    if (alerts.length) return finish('alert');
    if (/Something went wrong/.test(document.body.textContent)) return finish('error');
    var r = rows(), w = which(), ready = r.length > 0 || /No symbols found\./.test(document.body.textContent);
    if (!ready || w.join() !== last) {
      last = ready ? w.join() : null;
      return polls > 400 ? finish('timeout') : setTimeout(poll, 50);
    }
    if (!seen[w[0]]) {
      seen[w[0]] = 1;
      out.push('profile ' + w[0] + '/' + w[1] + ' ' + w[2]);
      r.forEach(function (x) { out.push('row\t' + x.join('\t')); });
    }
    if (w[0] >= w[1]) return finish('ok');
    window.dispatchEvent(new KeyboardEvent('keypress', {key: 'n'}));
    setTimeout(poll, 50);
  }
  window.addEventListener('load', function () { setTimeout(poll, 50); });
})();
EOJ
js=$(cd "$release" && ls speedscope-*.js | head -1)
css=$(cd "$release" && ls speedscope-*.css | head -1)
printf '<!DOCTYPE html>\n<html><head><meta charset="UTF-8"><title>speedscope</title><link rel="stylesheet" href="%s"></head>\n<body><script src="harness.js"></script><script src="%s"></script></body></html>\n' \
  "$css" "$js" >"$tmp/harness.html"
# Its port comes through a FIFO: read returns once the server listens, or at once if it died.
mkfifo "$tmp/port" || exit 99
node "$tmp/serve.js" "$tmp" "$release" >"$tmp/port" 2>"$tmp/serve.err" &
server=$!
read -r port <"$tmp/port"
[ -n "$port" ] || { echo "FAIL: the HTTP server did not start: $(cat "$tmp/serve.err")"; exit 1; }

# open FILE: what speedscope shows for $tmp/FILE, in $tmp/FILE.seen (HTML entities decoded).
open() {
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$tmp/chromium" \
    --window-size=1280,4000 --virtual-time-budget=60000 \
    --dump-dom "http://127.0.0.1:$port/harness.html#profileURL=$1&view=sandwich" 2>"$tmp/chromium.err" |
    awk '/<pre id="lp-result">/ { on = 1; sub(/.*<pre id="lp-result">/, "") } on { e = sub(/<\/pre>.*/, ""); print; if (e) exit }' |
    sed 's/&lt;/</g; s/&gt;/>/g; s/&quot;/"/g; s/&amp;/\&/g' >"$tmp/$1.seen"
  if ! grep -q '^end ok$' "$tmp/$1.seen"; then
    bad "speedscope did not open $1: $(grep -v '^row' "$tmp/$1.seen" | tr '\n' ' ')"
    tail -3 "$tmp/chromium.err"
    return 1
  fi
}

# check FILE FOLDED UNIT: speedscope's rows for FILE (summed over its profiles) against the folded stacks
# FOLDED: the same labels; each label's self (the stacks that end in it) and total (those that hold it),
# as percentages (UNIT %: sampled stacks) or as times (UNIT ns: weights in nanoseconds), each within half
# a unit of the last digit speedscope shows (one per row summed). WANT_FILE: every frame's file ends so.
# STRIP_ARGS: speedscope names a JSON event by its name and its args ("convert {"layer":"cpu",...}"),
# one frame for each args; the label is the name before them.
check() {
  awk -F'\t' -v unit="$3" -v want_file="${WANT_FILE:-}" -v strip_args="${STRIP_ARGS:-}" -v what="$1" '
    function num(s) { sub(/^[<>]/, "", s); return s + 0 }
    function half(s, d) { sub(/^[^.]*\.?/, "", s); sub(/[^0-9].*$/, "", s); return 0.5 * 10 ^ -length(s) }
    function pct(cell, name, kind, want,   p, h) { # "2.16s (90%)"
      p = cell; sub(/.*\(/, "", p); sub(/%\)$/, "", p)
      if (p == ">99") { if (want <= 99 || want > 100) bad(name, kind, p "%", want); return }
      if (p == "<0.01") { if (want >= 0.01) bad(name, kind, p "%", want); return }
      h = half(p); if (want < num(p) - h - 1e-9 || want > num(p) + h + 1e-9) bad(name, kind, p "%", want)
    }
    function ns(cell,   t, v, m, mm) { # "2.16s", "212.16ms", "1.52µs", "118.00ns", "1:05"
      t = cell; sub(/ \(.*/, "", t)
      if (t ~ /^[0-9]+:[0-9][0-9]$/) { split(t, mm, ":"); tol_add(0.5e9); return (mm[1] * 60 + mm[2]) * 1e9 }
      if (t ~ /ns$/) { m = 1 } else if (t ~ /µs$/) { m = 1e3 } else if (t ~ /ms$/) { m = 1e6 } else { m = 1e9 }
      v = t; sub(/[^0-9.].*$/, "", v); tol_add(half(v) * m); return v * m
    }
    function tol_add(x) { tol = x }
    function bad(name, kind, got, want) { printf "%s: %s %s is %s in speedscope, want %s\n", what, name, kind, got, want; errors++ }
    FNR == NR {
      w = $0; sub(/.* /, "", w); st = $0; sub(/ [^ ]*$/, "", st)
      n = split(st, f, ";"); sum += w
      self[f[n]] += w; delete on
      for (i = 1; i <= n; i++) if (!(f[i] in on)) { on[f[i]] = 1; total[f[i]] += w }
      next
    }
    $1 == "row" {
      name = $4
      if (strip_args) sub(/ \{.*\}$/, "", name)
      shown[name] = 1
      if (want_file != "" && name != "(outside of any label)" && substr($5, length($5) - length(want_file) + 1) != want_file)
        { printf "%s: %s is in file \"%s\", want ...%s\n", what, name, $5, want_file; errors++ }
      if (unit == "%") { pct($2, name, "total", 100 * total[name] / sum); pct($3, name, "self", 100 * self[name] / sum) }
      else { t_total[name] += ns($2); tol_t[name] += tol; t_self[name] += ns($3); tol_s[name] += tol }
    }
    END {
      for (l in total) if (!(l in shown)) { printf "%s: %s is not in speedscope\n", what, l; errors++ }
      for (l in shown) if (!(l in total)) { printf "%s: speedscope shows %s, which is not a label\n", what, l; errors++ }
      if (unit == "ns")
        for (l in shown) {
          if (t_total[l] < total[l] - tol_t[l] * 1.000001 || t_total[l] > total[l] + tol_t[l] * 1.000001) bad(l, "total", t_total[l] " ns", total[l] " ns")
          if (t_self[l] < self[l] - tol_s[l] * 1.000001 || t_self[l] > self[l] + tol_s[l] * 1.000001) bad(l, "self", t_self[l] " ns", self[l] " ns")
        }
      exit errors > 0
    }' "$2" "$tmp/$1.seen" || bad "$1: speedscope's figures differ from labelprof's"
}

# A profile at exit (pprof, gzipped), beside its folded stacks and the timeline of the same run: two
# threads, five labels.
LABELPROF_PROFILE="$tmp/p.pb.gz" LABELPROF_FOLDED="$tmp/p.folded" LABELPROF_TRACE="$tmp/p.json" $child xxxxxxxxxx layers \
  >/dev/null 2>"$tmp/err" || bad "env_child failed: $(cat "$tmp/err")"
open p.pb.gz && WANT_FILE=tests/env_child.c check p.pb.gz "$tmp/p.folded" %
# The same bytes not gzipped: speedscope takes both.
gzip -dc "$tmp/p.pb.gz" >"$tmp/raw.pprof" || bad "p.pb.gz is not gzip"
open raw.pprof && WANT_FILE=tests/env_child.c check raw.pprof "$tmp/p.folded" %
# LABELPROF_PROFILE=*.pprof.
LABELPROF_PROFILE="$tmp/q.pprof" LABELPROF_FOLDED="$tmp/q.folded" $child xxxxx >/dev/null 2>"$tmp/err" ||
  bad "env_child failed: $(cat "$tmp/err")"
open q.pprof && WANT_FILE=tests/env_child.c check q.pprof "$tmp/q.folded" %
# The Chrome JSON of the same run: one profile per thread, summed, against labelprof folded of the file.
$lp folded "$tmp/p.json" | grep -v '^(outside of any label) ' >"$tmp/p.json.folded" || bad "labelprof folded p.json"
open p.json && STRIP_ARGS=1 check p.json "$tmp/p.json.folded" ns
grep -q '^profile 1/2 .*env_child' "$tmp/p.json.seen" && grep -q '^profile 2/2 .*layered worker thread' "$tmp/p.json.seen" ||
  bad "p.json: want a profile for each of its 2 threads: $(grep '^profile' "$tmp/p.json.seen" | tr '\n' ' ')"
# labelprof pprof of a trace (22 labels, weights in nanoseconds), against labelprof folded of the trace.
$lp pprof "$srcdir/tests/data/nnapi/driver.txt" >"$tmp/driver.pb.gz" 2>"$tmp/err" || bad "labelprof pprof: $(cat "$tmp/err")"
$lp folded "$srcdir/tests/data/nnapi/driver.txt" >"$tmp/driver.folded" 2>/dev/null || bad "labelprof folded driver.txt"
open driver.pb.gz && check driver.pb.gz "$tmp/driver.folded" ns

[ $fail -eq 0 ] || exit 1
echo "speedscope.sh: speedscope $(sed -n 1p "$release/release.txt" 2>/dev/null) opened every file, with labelprof's figures"
