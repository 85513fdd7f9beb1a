/*
 * inline_work.h: a small key-value store, included twice by bench_inline.c:
 * once with labels (W(x) = lab_x, LABEL = LP_SCOPE) and once without.
 * Requests are text lines ("put KEY VALUE" or "get KEY"); a hash table with
 * open addressing holds string keys and values. Labels sit on the small
 * functions a user would time: parsing, hashing, the lookup, the insert.
 */
static uint64_t W(hash)(const char *s, size_t n) {
  LABEL("hash");
  uint64_t h = 1469598103934665603u;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211u;
  return h;
}

static __attribute__((noinline)) slot_t *W(find)(table_t *t, const char *k, size_t n) {
  LABEL("find");
  uint64_t h = W(hash)(k, n);
  for (size_t i = h & (TABLE - 1);; i = (i + 1) & (TABLE - 1)) {
    slot_t *s = &t->slots[i];
    if (!s->used || (s->h == h && s->klen == n && memcmp(s->key, k, n) == 0)) return s;
  }
}

static __attribute__((noinline)) void W(put)(table_t *t, const char *k, size_t n, const char *v, size_t vn) {
  LABEL("put");
  slot_t *s = W(find)(t, k, n);
  if (!s->used) {
    s->used = 1;
    s->h = W(hash)(k, n);
    s->klen = n;
    memcpy(s->key, k, n);
  }
  s->vlen = vn < sizeof s->val ? vn : sizeof s->val;
  memcpy(s->val, v, s->vlen);
}

static __attribute__((noinline)) size_t W(get)(table_t *t, const char *k, size_t n) {
  LABEL("get");
  slot_t *s = W(find)(t, k, n);
  return s->used ? s->vlen : 0;
}

static __attribute__((noinline)) size_t W(request)(table_t *t, const char *line) {
  LABEL("request");
  const char *k = strchr(line, ' ') + 1;
  const char *e = strchr(k, ' ');
  if (line[0] == 'p') {
    W(put)(t, k, (size_t)(e - k), e + 1, strlen(e + 1));
    return 0;
  }
  return W(get)(t, k, strlen(k));
}

static __attribute__((noinline)) size_t W(run)(table_t *t, char (*lines)[64], long n) {
  size_t sum = 0;
  for (long i = 0; i < n; i++) sum += W(request)(t, lines[i]);
  return sum;
}
