#!/bin/sh
# doc_links.sh: the README and the pages of docs/ hold together. Every
# relative link in README.md and docs/*.md names a file that exists (run by
# make distcheck too, so a page left out of the tarball fails there), every
# docs/*.md page is linked from the README, and the README's Quick start
# opens with its two commands, unchanged.
srcdir=${srcdir:-.}
. "$srcdir/tests/sh_common.sh"
test_tmpdir doc_links

[ -f "$srcdir/README.md" ] || { echo "doc_links: no README.md under srcdir '$srcdir'" >&2; exit 99; }
links=0
for page in "$srcdir/README.md" "$srcdir"/docs/*.md; do
  dir=$(dirname "$page")
  # [text](target), targets with no scheme; the part before any #anchor.
  grep -o '\](\([^)]*\))' "$page" | sed 's/^](\(.*\))$/\1/' | grep -v -E '^[a-z]+:' | sed 's/#.*//' |
    grep -v '^$' >"$tmp/targets"
  while read -r target; do
    links=$((links + 1))
    [ -e "$dir/$target" ] || bad "${page#"$srcdir"/} links to $target, which does not exist"
  done <"$tmp/targets"
done
[ "$links" -gt 20 ] || bad "only $links relative links found: the check reads nothing"

for page in "$srcdir"/docs/*.md; do
  name=docs/$(basename "$page")
  grep -q "]($name)" "$srcdir/README.md" || bad "README.md does not link to $name"
done

# The Quick start: its first code block is the two commands, exactly.
awk '/^## Quick start/ { q = 1 } q && /^```/ { if (inb) exit; inb = 1; next } inb { print }' \
  "$srcdir/README.md" >"$tmp/quick"
printf '%s\n' './install-deps && ./autogen.sh && ./configure && make -j2 && ./examples/matmul' 'make check' >"$tmp/want"
cmp -s "$tmp/quick" "$tmp/want" || bad "the Quick start's commands changed: $(cat "$tmp/quick")"

echo "doc_links: $links relative links checked"
[ $fail -eq 0 ] || exit 1
