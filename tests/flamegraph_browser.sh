#!/bin/sh
# flamegraph_browser.sh: the flame graph's inline script in a real browser.
# A harness (below) is put into a graph that labelprof drew, before </svg>;
# headless Chromium loads the SVG, the graph's script sets up, and after
# load the harness clicks a frame (zoom), Reset zoom and Search (a regular
# expression), writing what each frame then shows (place, width, text,
# dimmed, fill, hidden) into the document, which --dump-dom prints. The
# result must be exactly what the script promises. Skipped (77) without
# chromium; ./install-deps installs it (Debian's chromium), so CI runs it.
# Chromium makes its singleton socket in TMPDIR, and a Unix socket's path
# holds at most 108 bytes: the browser gets a short directory of its own in
# /tmp, removed with the rest, and this script runs under a TMPDIR of over
# 100 characters, so that a long one is what it always meets.
srcdir=${srcdir:-.}
lp=./tools/labelprof
browser=
for b in chromium chromium-browser; do
  command -v "$b" >/dev/null 2>&1 && browser=$b && break
done
if [ -z "$browser" ]; then
  echo "note: chromium is not installed: the flame graph's script is not run in a browser"
  exit 77
fi
. "$srcdir/tests/sh_common.sh"
test_tmpdir flamegraph_browser_sh
top=$tmp
at_exit 'rm -rf "$top"'
tmp=$top/a-temporary-directory-whose-path-is-longer-than-a-unix-socket-path-may-be
mkdir "$tmp" || exit 99
short=$(mktemp -d /tmp/lp-chromium.XXXXXX) || exit 99
at_exit 'rm -rf "$short"'
TMPDIR=$tmp
export TMPDIR

# main: a 60%, b 40% with compute_... (10%) above it: a label cut at its width, whole when zoomed.
printf 'main;a 600\nmain;b 300\nmain;b;compute_the_kernel_by_rows 100\n' >"$tmp/t.folded"
$lp flamegraph "$tmp/t.folded" >"$tmp/t.svg" || { echo "FAIL: labelprof flamegraph"; exit 1; }
{
  sed '$d' "$tmp/t.svg"
  printf '<script type="text/ecmascript"><![CDATA[\n'
  cat <<'EOJ'
window.addEventListener('load', function () {
  var out = [], labels = ['all', 'main', 'a', 'b', 'compute_the_kernel_by_rows'];
  function frame(l) {
    var g = document.getElementsByClassName('f');
    for (var i = 0; i < g.length; i++)
      if (g[i].getElementsByTagName('text')[0].getAttribute('data-l') === l) return g[i];
    return null;
  }
  function state(l) {
    var g = frame(l);
    if (!g) return l + ' missing';
    var r = g.getElementsByTagName('rect')[0], t = g.getElementsByTagName('text')[0];
    if (g.style.display === 'none') return l + ' hidden';
    return l + ' x=' + r.getAttribute('x') + ' w=' + r.getAttribute('width') + ' text=' + t.textContent +
      (g.style.opacity ? ' dim' : '') + ' fill=' + r.getAttribute('fill');
  }
  function click(el) { el.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true})); }
  function all(what) { out.push(what); labels.forEach(function (l) { out.push(state(l)); }); }
  all('start');
  click(frame('b').getElementsByTagName('rect')[0]);
  all('zoomed on b; reset shown=' + (document.getElementById('reset').style.display !== 'none'));
  click(document.getElementById('reset'));
  all('reset; reset shown=' + (document.getElementById('reset').style.display !== 'none'));
  window.prompt = function () { return '^(b|.*_by_rows)$'; };
  var texts = document.getElementsByTagName('text');
  for (var i = 0; i < texts.length; i++) if (texts[i].textContent === 'Search') click(texts[i]);
  all('searched ^(b|.*_by_rows)$: ' + document.getElementById('matched').textContent);
  var res = document.createElementNS('http://www.w3.org/2000/svg', 'text');
  res.setAttribute('id', 'lp-result');
  res.textContent = out.join('\n');
  document.documentElement.appendChild(res);
});
EOJ
  printf ']]></script>\n</svg>\n'
} >"$tmp/page.svg"
grep -q '^</svg>$' "$tmp/t.svg" || { echo "FAIL: the graph does not end with </svg>"; exit 1; }

# As root (CI), Chromium runs only without its sandbox.
TMPDIR=$short timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$tmp/profile" \
  --dump-dom "file://$tmp/page.svg" >"$tmp/dom" 2>"$tmp/err"
awk '/<text id="lp-result">/ { on = 1; sub(/.*<text id="lp-result">/, "") } on { e = sub(/<\/text>.*/, ""); print; if (e) exit }' \
  "$tmp/dom" >"$tmp/got"
if ! [ -s "$tmp/got" ]; then
  echo "FAIL: no result from the page (is the script broken?); chromium said:"
  tail -5 "$tmp/err"
  exit 1
fi
# The colours are those of the graph; c is compute_the_kernel_by_rows (26 characters): cut to 15 and an
# ellipsis in 118 px, whole in 295 px.
fill() { grep -o "<title>$1 ([^)]*)</title><rect [^>]*fill=\"[^\"]*\"" "$tmp/t.svg" | sed 's/.*fill="//; s/"$//'; }
fa=$(fill all) fm=$(fill main) fA=$(fill a) fb=$(fill b) fc=$(fill compute_the_kernel_by_rows)
c=compute_the_kernel_by_rows
cat >"$tmp/want" <<EOW
start
all x=10.00 w=1180.00 text=all fill=$fa
main x=10.00 w=1180.00 text=main fill=$fm
a x=10.00 w=708.00 text=a fill=$fA
b x=718.00 w=472.00 text=b fill=$fb
$c x=718.00 w=118.00 text=compute_the_ker… fill=$fc
zoomed on b; reset shown=true
all x=10 w=1180 text=all dim fill=$fa
main x=10 w=1180 text=main dim fill=$fm
a hidden
b x=10 w=1180 text=b fill=$fb
$c x=10 w=295 text=$c fill=$fc
reset; reset shown=false
all x=10 w=1180 text=all fill=$fa
main x=10 w=1180 text=main fill=$fm
a x=10 w=708 text=a fill=$fA
b x=718 w=472 text=b fill=$fb
$c x=718 w=118 text=compute_the_ker… fill=$fc
searched ^(b|.*_by_rows)$: 2 frames match
all x=10 w=1180 text=all fill=$fa
main x=10 w=1180 text=main fill=$fm
a x=10 w=708 text=a fill=$fA
b x=718 w=472 text=b fill=rgb(230,0,230)
$c x=718 w=118 text=compute_the_ker… fill=rgb(230,0,230)
EOW
if ! cmp -s "$tmp/want" "$tmp/got"; then
  echo "FAIL: the flame graph's script in $browser (want, got):"
  diff "$tmp/want" "$tmp/got"
  exit 1
fi
echo "flamegraph_browser: zoom, reset and search work in $($browser --version 2>/dev/null | head -1)"
