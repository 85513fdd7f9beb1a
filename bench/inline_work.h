/*
 * inline_work.h: a small SQL-fronted ordered store, included twice by
 * bench_inline.c: once with labels (W(x) = lab_x, LABEL = LP_SCOPE) and
 * once without. It is laid out as SQLite is, at a smaller scale: a request
 * ("INSERT INTO t VALUES ('k000123456', 42)", "SELECT v FROM t WHERE k =
 * '...'", "SELECT v FROM t WHERE k >= '...' LIMIT 20") is prepared (parsed
 * into one operation), then executed against a B+tree of 32-key pages
 * whose values are text; each row a query returns is formatted as text, as
 * a client library hands it over; inserts commit every 64, each commit
 * checksumming the pages it dirtied.
 * The labels sit where the issue put them in SQLite: prepare, parse,
 * execute, the B-tree's seek, insert and next, the page split, the sort of
 * a range's rows, and the commit.
 */
static __attribute__((noinline)) int W(parse)(const char *sql, op_t *op) {
  LABEL("parse");
  const char *q = strchr(sql, '\'');
  size_t n = 0;
  if (!q) return -1;
  memset(op, 0, sizeof *op);
  if (strncmp(sql, "INSERT INTO ", 12) == 0)
    op->code = OP_INSERT;
  else if (strncmp(sql, "SELECT ", 7) == 0)
    op->code = strstr(sql, " >= ") ? OP_RANGE : OP_GET;
  else
    return -1;
  for (q++; q[n] && q[n] != '\'' && n < KEYLEN; n++) op->key[n] = q[n];
  if (q[n] != '\'') return -1;
  q += n + 1;
  if (op->code == OP_INSERT) {
    const char *v = strchr(q, '\'');
    if (!v) return -1;
    for (n = 0, v++; v[n] && v[n] != '\'' && n < VALLEN - 1; n++) op->val[n] = v[n];
    if (v[n] != '\'') return -1;
  } else if (op->code == OP_RANGE) {
    const char *l = strstr(q, "LIMIT ");
    op->limit = l ? atoi(l + 6) : 1;
    if (op->limit < 1 || op->limit > MAXROWS) return -1;
  }
  return 0;
}

static __attribute__((noinline)) int W(prepare)(const char *sql, op_t *op) {
  LABEL("prepare");
  size_t len = strlen(sql);
  if (len < 16 || sql[len - 1] == ' ') return -1;
  return W(parse)(sql, op);
}

/* The first key in p not below key (a leaf), or the child whose range holds key (an interior page). */
static inline int W(lower)(const page_t *p, const char *key) {
  int lo = 0, hi = p->n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (memcmp(p->keys[mid], key, KEYLEN) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}
static inline int W(child)(const page_t *p, const char *key) {
  int lo = 0, hi = p->n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (memcmp(key, p->keys[mid], KEYLEN) < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

static void W(dirty)(store_t *s, page_t *p) {
  if (p->dirty) return;
  p->dirty = 1;
  if (s->ndirty < DIRTY) s->dirtied[s->ndirty++] = p;
}

static __attribute__((noinline)) int W(seek)(const store_t *s, const char *key, cursor_t *c) {
  LABEL("btree_seek");
  page_t *p = s->root;
  while (!p->leaf) p = p->kids[W(child)(p, key)];
  c->pg = p;
  c->i = W(lower)(p, key);
  if (c->i == p->n) {
    c->pg = p->next;
    c->i = 0;
  }
  return c->pg && memcmp(c->pg->keys[c->i], key, KEYLEN) == 0;
}

static __attribute__((noinline)) int W(next)(cursor_t *c) {
  LABEL("btree_next");
  if (++c->i < c->pg->n) return 1;
  c->pg = c->pg->next;
  c->i = 0;
  return c->pg != NULL;
}

/* Splits full page p that must take key (and val, or kid to its right) at i; the new right page goes up. */
static __attribute__((noinline)) page_t *W(split)(store_t *s, page_t *p, int i, const char *key, const char *val,
                                                  page_t *kid, char *upkey) {
  LABEL("split");
  char keys[FAN + 1][KEYLEN];
  char vals[FAN + 1][VALLEN];
  page_t *kids[FAN + 2];
  int total = FAN + 1, half = total / 2;
  page_t *q = &s->pool[s->used++];
  memset(q, 0, sizeof *q);
  q->leaf = p->leaf;
  memcpy(keys, p->keys, (size_t)i * KEYLEN);
  memcpy(keys[i], key, KEYLEN);
  memcpy(keys[i + 1], p->keys[i], (size_t)(FAN - i) * KEYLEN);
  if (p->leaf) {
    memcpy(vals, p->vals, (size_t)i * VALLEN);
    memcpy(vals[i], val, VALLEN);
    memcpy(vals[i + 1], p->vals[i], (size_t)(FAN - i) * VALLEN);
    p->n = half;
    q->n = total - half;
    memcpy(p->keys, keys, (size_t)half * KEYLEN);
    memcpy(p->vals, vals, (size_t)half * VALLEN);
    memcpy(q->keys, keys[half], (size_t)q->n * KEYLEN);
    memcpy(q->vals, vals[half], (size_t)q->n * VALLEN);
    q->next = p->next;
    p->next = q;
    memcpy(upkey, q->keys[0], KEYLEN);
  } else {
    memcpy(kids, p->kids, (size_t)(i + 1) * sizeof *kids);
    kids[i + 1] = kid;
    memcpy(kids + i + 2, p->kids + i + 1, (size_t)(FAN - i) * sizeof *kids);
    p->n = half;
    q->n = total - half - 1;
    memcpy(p->keys, keys, (size_t)half * KEYLEN);
    memcpy(p->kids, kids, (size_t)(half + 1) * sizeof *kids);
    memcpy(upkey, keys[half], KEYLEN);
    memcpy(q->keys, keys[half + 1], (size_t)q->n * KEYLEN);
    memcpy(q->kids, kids + half + 1, (size_t)(q->n + 1) * sizeof *kids);
  }
  W(dirty)(s, p);
  W(dirty)(s, q);
  return q;
}

/* Inserts into the subtree at p; returns the new right sibling (its first key in upkey) when p split. */
static page_t *W(insert_at)(store_t *s, page_t *p, const char *key, const char *val, char *upkey) {
  int i;
  page_t *kid = NULL;
  if (p->leaf) {
    i = W(lower)(p, key);
    if (i < p->n && memcmp(p->keys[i], key, KEYLEN) == 0) {
      memcpy(p->vals[i], val, VALLEN);
      W(dirty)(s, p);
      return NULL;
    }
  } else {
    char up[KEYLEN];
    i = W(child)(p, key);
    kid = W(insert_at)(s, p->kids[i], key, val, up);
    if (!kid) return NULL;
    key = up; /* the child split: its new sibling's key goes in at i */
    if (p->n == FAN) return W(split)(s, p, i, key, NULL, kid, upkey);
    memmove(p->keys[i + 1], p->keys[i], (size_t)(p->n - i) * KEYLEN);
    memmove(p->kids + i + 2, p->kids + i + 1, (size_t)(p->n - i) * sizeof *p->kids);
    memcpy(p->keys[i], key, KEYLEN);
    p->kids[i + 1] = kid;
    p->n++;
    W(dirty)(s, p);
    return NULL;
  }
  if (p->n == FAN) return W(split)(s, p, i, key, val, NULL, upkey);
  memmove(p->keys[i + 1], p->keys[i], (size_t)(p->n - i) * KEYLEN);
  memmove(p->vals[i + 1], p->vals[i], (size_t)(p->n - i) * VALLEN);
  memcpy(p->keys[i], key, KEYLEN);
  memcpy(p->vals[i], val, VALLEN);
  p->n++;
  W(dirty)(s, p);
  return NULL;
}

static __attribute__((noinline)) void W(insert)(store_t *s, const char *key, const char *val) {
  LABEL("btree_insert");
  char up[KEYLEN];
  page_t *q = W(insert_at)(s, s->root, key, val, up);
  if (q) { /* the root split: a new root above the two halves */
    page_t *r = &s->pool[s->used++];
    memset(r, 0, sizeof *r);
    r->n = 1;
    memcpy(r->keys[0], up, KEYLEN);
    r->kids[0] = s->root;
    r->kids[1] = q;
    s->root = r;
  }
}

static __attribute__((noinline)) void W(sort)(char (*rows)[ROWLEN], int n) {
  LABEL("sort");
  char v[ROWLEN];
  for (int i = 1; i < n; i++) {
    int j = i;
    memcpy(v, rows[i], ROWLEN);
    for (; j > 0 && strcmp(rows[j - 1], v) > 0; j--) memcpy(rows[j], rows[j - 1], ROWLEN);
    memcpy(rows[j], v, ROWLEN);
  }
}

/* A row as a client gets it: the key and the value as text. */
static inline uint64_t W(row)(const page_t *p, int i, char *out) {
  return (uint64_t)snprintf(out, ROWLEN, "%.*s|%s", KEYLEN, p->keys[i], p->vals[i]);
}

static __attribute__((noinline)) void W(commit)(store_t *s) {
  LABEL("commit");
  for (int d = 0; d < s->ndirty; d++) {
    page_t *p = s->dirtied[d];
    uint64_t h = 1469598103934665603u;
    for (int k = 0; k < p->n; k++)
      for (int b = 0; b < KEYLEN; b++) h = (h ^ (unsigned char)p->keys[k][b]) * 1099511628211u;
    s->sum ^= h;
    p->dirty = 0;
  }
  s->ndirty = 0;
}

static __attribute__((noinline)) uint64_t W(execute)(store_t *s, const op_t *op) {
  LABEL("execute");
  cursor_t c;
  char rows[MAXROWS][ROWLEN];
  uint64_t r = 0;
  int n = 0;
  switch (op->code) {
  case OP_INSERT:
    W(insert)(s, op->key, op->val);
    if (++s->inserts % 64 == 0) W(commit)(s);
    return 0;
  case OP_GET:
    return W(seek)(s, op->key, &c) ? W(row)(c.pg, c.i, rows[0]) + (unsigned char)rows[0][KEYLEN + 1] : 0;
  default:
    if (!W(seek)(s, op->key, &c) && !c.pg) return 0;
    do r += W(row)(c.pg, c.i, rows[n++]);
    while (n < op->limit && W(next)(&c));
    W(sort)(rows, n);
    for (int i = 0; i < n; i++) r = r * 31 + (unsigned char)rows[i][KEYLEN + 1];
    return r;
  }
}

static __attribute__((noinline)) uint64_t W(run)(store_t *s, char (*lines)[LINE], long n) {
  uint64_t sum = 0;
  op_t op;
  for (long i = 0; i < n; i++)
    if (W(prepare)(lines[i], &op) == 0) sum += W(execute)(s, &op);
  return sum + s->sum;
}
