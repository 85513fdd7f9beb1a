#!/bin/sh
# alloc_check.sh: every allocation in lib/ goes through lp__malloc and its kin
# (lib/util.c), so that tests/test_oom can fail each one in turn. A direct
# call to the C library's allocators anywhere else in lib/ fails this test.
srcdir=${srcdir:-.}
found=$(grep -n -E '(^|[^_[:alnum:]])(malloc|calloc|realloc|strdup|strndup|aligned_alloc|posix_memalign)[[:space:]]*\(' \
  "$srcdir"/lib/*.c | grep -v '^[^:]*/util\.c:' | grep -v -E '^[^:]*:[0-9]+:[[:space:]]*(/?\*|//)')
if [ -n "$found" ]; then
  echo "alloc_check: allocations in lib/ that bypass lp__malloc and its kin (lib/internal.h):"
  echo "$found"
  exit 1
fi
echo "alloc_check: every allocation in lib/ goes through lib/util.c"
