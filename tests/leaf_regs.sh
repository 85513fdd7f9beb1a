#!/bin/sh
# leaf_regs.sh: a label must add little to the function it is in (#22).
# Compiles a leaf, `return n->next ? n->next->v : 0`, with and without
# LP_SCOPE, at -O2 with gcc and clang (each when installed), and checks with
# objdump the callee-saved registers the labelled one pushes beyond the
# unlabelled one, and the bytes it adds:
#   on x86-64: no push (the cold paths go through lib/cold.c's thunks) and
#     at most 160 bytes added (the inline code is the two tests, the push
#     and the matched pop, and the two cold calls);
#   elsewhere (plain calls to the cold paths; aarch64: two pairs of x19-x22): at most 4 pushes and 200 bytes.
# Skipped, with a note, where objdump or both compilers are missing.
set -eu
src=${srcdir:-.}
command -v objdump >/dev/null 2>&1 || { echo "leaf_regs: objdump is not installed: skipped"; exit 77; }
. "$src/tests/sh_common.sh"
test_tmpdir labelprof-leaf
cat >"$tmp/leaf.c" <<'C'
#include <labelprof.h>
typedef struct node { struct node *next; int v; } node_t;
int leaf_plain(const node_t *n);
int leaf_label(const node_t *n);
int leaf_plain(const node_t *n) { return n->next ? n->next->v : 0; }
int leaf_label(const node_t *n) { LP_SCOPE("leaf"); return n->next ? n->next->v : 0; }
C
. "$src/tests/objdump_fn.sh"
ran=0
for cc in gcc clang; do
  command -v $cc >/dev/null 2>&1 || { echo "leaf_regs: $cc is not installed: skipped"; continue; }
  # Each way of reaching the cold paths compiles cleanly: the thunks, plain calls (other architectures,
  # ThreadSanitizer), and everything inline.
  for v in "" -DLP_IMPL_PLAIN_CALLS -DLABELPROF_INLINE_RECORDING; do
    $cc -O2 -Wall -Wextra -Werror $v -I"$src/include" -c "$tmp/leaf.c" -o "$tmp/leaf-$cc.o"
  done
  $cc -O2 -I"$src/include" -c "$tmp/leaf.c" -o "$tmp/leaf-$cc.o"
  ran=1
  p=$(( $(fn_pushes "$tmp/leaf-$cc.o" leaf_label) - $(fn_pushes "$tmp/leaf-$cc.o" leaf_plain) ))
  b=$(( $(fn_size "$tmp/leaf-$cc.o" leaf_label) - $(fn_size "$tmp/leaf-$cc.o" leaf_plain) ))
  max=4 maxb=200
  if [ "$(uname -m)" = x86_64 ]; then max=0 maxb=160; fi
  echo "leaf_regs: $cc -O2: the label adds $p callee-saved pushes (at most $max) and $b bytes (at most $maxb)"
  if [ "$p" -gt $max ] || [ "$b" -gt $maxb ]; then
    echo "leaf_regs: $cc: FAILED" >&2
    objdump -d "$tmp/leaf-$cc.o" >&2
    fail=1
  fi
done
[ $ran = 1 ] || exit 77
exit $fail
