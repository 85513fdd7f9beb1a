/*
 * _labelprof.c: the labels and sessions of Python's labelprof module.
 *
 * The module links the shared liblabelprof, so that a Python scope and the
 * C labels of every extension in the process push onto the same
 * pseudo-stack of the calling thread. A Python name becomes a site once
 * (lp_site_intern); after that a scope is the C library's own inline push
 * and pop (lp_scope_enter / lp_scope_leave), which is why `with
 * labelprof.scope("x")` costs less than `with contextlib.nullcontext()`:
 * the context manager is a C type, its name's site is found by the name
 * object's address in a small cache, and nothing runs in Python.
 *
 * The name cache holds a reference to each name it keeps, so an address in
 * it is never reused by another string while it is there. It is only read
 * and written with the GIL held (this module does not declare itself free
 * of the GIL). A name past LABELPROF_MAX_NAMES is not cached: each use
 * interns it again, so that each use is counted, as in C.
 *
 * A scope object may be open several times at once (a decorator's call in
 * two threads, recursion, a module-level `with S:`): its first open use is
 * kept in the object, others in an array, each with its thread, and an
 * exit closes the innermost use of its own thread. labelprof.begin() and
 * labelprof.end() keep their scopes per thread, so that end() closes what
 * begin() opened on that thread, or raises.
 *
 * Threads are named on their lanes by their `threading` name, the first
 * time they use a label from Python (threads of other origins keep their
 * operating-system name).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <errno.h>
#include <labelprof.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The module's other part (_read.c): labelprof.read() and labelprof.stats(). */
PyObject *lp_py_read(PyObject *self, PyObject *args);
PyObject *lp_py_command(PyObject *self, PyObject *args);

#define CACHE_SLOTS 512 /* names by address; a power of two */

typedef struct cache_slot {
  PyObject *name; /* a reference, or NULL */
  const lp_site_t *site;
  uint32_t level;
} cache_slot_t;

static cache_slot_t name_cache[CACHE_SLOTS];
static int warned_full; /* the RuntimeWarning about the bound on names, once */

/* Per thread: whether its lane has its threading name, and what begin() opened. */
#define BEGUN_MAX 64
typedef struct py_thread {
  lp_scope_t begun[BEGUN_MAX];
  unsigned nbegun;
  uint64_t deeper; /* begin()s past BEGUN_MAX, closed by LP_END() */
} py_thread_t;
static __thread py_thread_t py_self;
static __thread int py_named __attribute__((tls_model("initial-exec")));

static PyObject *thread_name_hook; /* labelprof._thread_name(): the calling thread's name, or None */

/* ---- errors --------------------------------------------------------------------------- */

/* OSError(errno, "labelprof: WHAT: DESCRIPTION"), which Python turns into its subclass for that errno. */
static PyObject *lp_error(int rc, const char *what) {
  PyObject *args = Py_BuildValue("(iN)", -rc, PyUnicode_FromFormat("labelprof: %s: %s", what, lp_strerror(rc)));
  if (args) {
    PyErr_SetObject(PyExc_OSError, args); /* instantiated as OSError(errno, message): FileNotFoundError ... */
    Py_DECREF(args);
  }
  return NULL;
}

/* ---- threads ---------------------------------------------------------------------------- */

/* The calling thread's lane takes its threading name; a thread threading did not start keeps its own. */
static __attribute__((noinline)) int name_thread(void) {
  py_named = 1;
  if (!thread_name_hook) return 0;
  PyObject *n = PyObject_CallNoArgs(thread_name_hook);
  if (!n) return -1;
  if (PyUnicode_Check(n)) {
    const char *s = PyUnicode_AsUTF8(n);
    if (!s) {
      Py_DECREF(n);
      return -1;
    }
    int rc = lp_thread_set_name(s);
    if (rc == -ENOMEM) {
      Py_DECREF(n);
      PyErr_NoMemory();
      return -1;
    }
  }
  Py_DECREF(n);
  return 0;
}

static inline int thread_ready(void) {
  if (__builtin_expect(py_named, 1)) return 0;
  return name_thread();
}

/* ---- names -------------------------------------------------------------------------------- */

static int level_of(PyObject *o, uint32_t *level) {
  if (!o || o == Py_None) {
    *level = LP_LEVEL_RUNTIME;
    return 0;
  }
  if (PyUnicode_Check(o)) {
    static const struct {
      const char *name;
      uint32_t bit;
    } names[] = {{"request", LP_LEVEL_REQUEST}, {"runtime", LP_LEVEL_RUNTIME}, {"operator", LP_LEVEL_OPERATOR},
                 {"debug", LP_LEVEL_DEBUG}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      if (PyUnicode_CompareWithASCIIString(o, names[i].name) == 0) {
        *level = names[i].bit;
        return 0;
      }
    PyErr_Format(PyExc_ValueError, "labelprof: level %R is none of 'request', 'runtime', 'operator', 'debug'", o);
    return -1;
  }
  if (PyLong_Check(o)) {
    unsigned long v = PyLong_AsUnsignedLong(o);
    if (v == (unsigned long)-1 && PyErr_Occurred()) PyErr_Clear();
    else if (v && !(v & (v - 1)) && v <= LP_LEVEL_DEBUG) {
      *level = (uint32_t)v;
      return 0;
    }
    PyErr_Format(PyExc_ValueError, "labelprof: level %R is not one of labelprof.REQUEST, RUNTIME, OPERATOR, DEBUG", o);
    return -1;
  }
  PyErr_Format(PyExc_TypeError, "labelprof: a level is a str or an int, not %.100s", Py_TYPE(o)->tp_name);
  return -1;
}

/* The site of a name not in the cache: interned, and cached unless it is past the bound. */
static __attribute__((noinline)) const lp_site_t *site_slow(PyObject *name, uint32_t level, cache_slot_t *slot) {
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_TypeError, "labelprof: a label's name must be str, not %.100s", Py_TYPE(name)->tp_name);
    return NULL;
  }
  Py_ssize_t len;
  const char *text = PyUnicode_AsUTF8AndSize(name, &len);
  if (!text) return NULL;
  const lp_site_t *site = NULL;
  int rc = lp_site_intern(text, (size_t)len, level, &site);
  if (rc == -EINVAL) {
    PyErr_SetString(PyExc_ValueError, "labelprof: a label's name may not hold a NUL character");
    return NULL;
  }
  if (rc != 0) { /* past the bound, or out of memory: the "(other names)" site, counted each use */
    if (!warned_full) {
      warned_full = 1;
      lp_names_stats_t st = {0, 0, 0};
      (void)lp_names_get_stats(&st);
      if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                           "labelprof: %llu distinct names made at run time (LABELPROF_MAX_NAMES); "
                           "this one and later new ones are labelled \"(other names)\"",
                           (unsigned long long)st.limit) < 0)
        return NULL;
    }
    return site;
  }
  PyObject *old = slot->name;
  Py_INCREF(name);
  slot->name = name;
  slot->site = site;
  slot->level = level;
  Py_XDECREF(old); /* last: its destructor may run Python code, which may use the cache */
  return site;
}

static inline const lp_site_t *site_of(PyObject *name, uint32_t level) {
  cache_slot_t *slot = &name_cache[((uintptr_t)name >> 4 ^ level) & (CACHE_SLOTS - 1)];
  if (__builtin_expect(slot->name == name && slot->level == level, 1)) return slot->site;
  return site_slow(name, level, slot);
}

/* ---- labelprof.scope --------------------------------------------------------------------- */

typedef struct open_use {
  lp_scope_t scope;
  pthread_t thread;
} open_use_t;

typedef struct scope_object {
  PyObject_HEAD
  PyObject *name;
  const lp_site_t *site;
  uint32_t level;
  uint32_t nopen;       /* uses open now: the first in `first`, the rest in `more` */
  open_use_t first;
  open_use_t *more;
  uint32_t more_cap;
  PyObject *weakrefs;
} scope_object_t;

static PyTypeObject scope_type;
static PyTypeObject scoped_function_type;

static PyObject *scope_new(PyTypeObject *type, PyObject *name, PyObject *level_obj) {
  uint32_t level;
  if (level_of(level_obj, &level) < 0) return NULL;
  const lp_site_t *site = site_of(name, level);
  if (!site) return NULL;
  scope_object_t *s = PyObject_New(scope_object_t, type);
  if (!s) return NULL;
  Py_INCREF(name);
  s->name = name;
  s->site = site;
  s->level = level;
  s->nopen = 0;
  s->more = NULL;
  s->more_cap = 0;
  s->weakrefs = NULL;
  return (PyObject *)s;
}

static PyObject *scope_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  PyObject *level = NULL;
  if (__builtin_expect(n == 1 && !kwnames, 1)) return scope_new((PyTypeObject *)type, args[0], NULL);
  if (n == 2) level = args[1];
  if (n < 1 || n > 2) {
    PyErr_Format(PyExc_TypeError, "labelprof.scope() takes a name and an optional level (%zd arguments given)", n);
    return NULL;
  }
  for (Py_ssize_t i = 0; kwnames && i < PyTuple_GET_SIZE(kwnames); i++) {
    PyObject *k = PyTuple_GET_ITEM(kwnames, i);
    if (PyUnicode_CompareWithASCIIString(k, "level") != 0 || level) {
      PyErr_Format(PyExc_TypeError, "labelprof.scope() got an unexpected keyword argument %R", k);
      return NULL;
    }
    level = args[n + i];
  }
  return scope_new((PyTypeObject *)type, args[0], level);
}

static PyObject *scope_tp_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"name", "level", NULL};
  PyObject *name, *level = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:scope", kwlist, &name, &level)) return NULL;
  return scope_new(type, name, level);
}

static void scope_dealloc(scope_object_t *s) {
  if (s->weakrefs) PyObject_ClearWeakRefs((PyObject *)s);
  Py_DECREF(s->name);
  PyMem_Free(s->more);
  PyObject_Free(s);
}

static PyObject *scope_enter(scope_object_t *s, PyObject *unused) {
  (void)unused;
  if (thread_ready() < 0) return NULL;
  open_use_t *u = &s->first;
  if (__builtin_expect(s->nopen != 0, 0)) {
    uint32_t k = s->nopen - 1;
    if (k >= s->more_cap) {
      uint32_t cap = s->more_cap ? s->more_cap * 2 : 4;
      open_use_t *m = PyMem_Realloc(s->more, cap * sizeof *m);
      if (!m) return PyErr_NoMemory();
      s->more = m;
      s->more_cap = cap;
    }
    u = &s->more[k];
  }
  u->thread = pthread_self();
  u->scope = lp_scope_enter(s->site);
  s->nopen++;
  Py_INCREF(s);
  return (PyObject *)s;
}

/* The innermost open use of the calling thread, removed; 0, or -1 (RuntimeError) if it has none. */
static int scope_take(scope_object_t *s, lp_scope_t *out) {
  pthread_t me = pthread_self();
  for (uint32_t k = s->nopen; k-- > 0;) {
    open_use_t *u = k ? &s->more[k - 1] : &s->first;
    if (!pthread_equal(u->thread, me)) continue;
    *out = u->scope;
    for (uint32_t j = k; j + 1 < s->nopen; j++) { /* close the gap: later uses move down one */
      open_use_t *next = &s->more[j];
      if (j == 0) s->first = *next;
      else s->more[j - 1] = *next;
    }
    s->nopen--;
    return 0;
  }
  PyErr_Format(PyExc_RuntimeError, "labelprof.scope(%R) is not open on this thread", s->name);
  return -1;
}

static PyObject *scope_exit(scope_object_t *s, PyObject *const *args, Py_ssize_t nargs) {
  (void)args;
  (void)nargs;
  lp_scope_t sc;
  if (__builtin_expect(s->nopen == 1 && pthread_equal(s->first.thread, pthread_self()), 1)) {
    s->nopen = 0;
    lp_scope_leave(&s->first.scope);
    Py_RETURN_FALSE;
  }
  if (scope_take(s, &sc) < 0) return NULL;
  lp_scope_leave(&sc);
  Py_RETURN_FALSE;
}

/* @labelprof.scope("name"): the function, labelled at every call. */
typedef struct scoped_function {
  PyObject_HEAD
  PyObject *func;
  PyObject *scope; /* the scope object it came from: its name and site */
  const lp_site_t *site;
  vectorcallfunc vectorcall;
  PyObject *dict;
  PyObject *weakrefs;
} scoped_function_t;

static PyObject *scoped_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  scoped_function_t *f = (scoped_function_t *)self;
  if (thread_ready() < 0) return NULL;
  lp_scope_t sc = lp_scope_enter(f->site);
  PyObject *r = PyObject_Vectorcall(f->func, args, nargsf, kwnames);
  lp_scope_leave(&sc);
  return r;
}

static PyObject *scope_call(scope_object_t *s, PyObject *args, PyObject *kw) {
  PyObject *func;
  if (kw && PyDict_GET_SIZE(kw)) {
    PyErr_SetString(PyExc_TypeError, "labelprof.scope(...) as a decorator takes the function alone");
    return NULL;
  }
  if (!PyArg_ParseTuple(args, "O:scope", &func)) return NULL;
  if (!PyCallable_Check(func)) {
    PyErr_Format(PyExc_TypeError, "labelprof.scope(%R) decorates a callable, not %.100s", s->name,
                 Py_TYPE(func)->tp_name);
    return NULL;
  }
  if (PyFunction_Check(func)) {
    PyCodeObject *code = (PyCodeObject *)PyFunction_GetCode(func);
    int flags = 0;
    PyObject *f = PyObject_GetAttrString((PyObject *)code, "co_flags");
    if (!f) return NULL;
    flags = (int)PyLong_AsLong(f);
    Py_DECREF(f);
    if (flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) {
      PyErr_Format(PyExc_TypeError,
                   "labelprof.scope(%R) cannot label a generator or coroutine function: its label would stay on "
                   "the thread's stack while other code runs between its steps; label the work inside it",
                   s->name);
      return NULL;
    }
  }
  scoped_function_t *w = PyObject_GC_New(scoped_function_t, &scoped_function_type);
  if (!w) return NULL;
  Py_INCREF(func);
  Py_INCREF(s);
  w->func = func;
  w->scope = (PyObject *)s;
  w->site = s->site;
  w->vectorcall = scoped_call;
  w->dict = NULL;
  w->weakrefs = NULL;
  PyObject_GC_Track(w);
  /* __name__, __qualname__, __doc__, __module__, __wrapped__, __dict__: as functools.wraps makes them. */
  PyObject *functools = PyImport_ImportModule("functools");
  PyObject *r = functools ? PyObject_CallMethod(functools, "update_wrapper", "OO", (PyObject *)w, func) : NULL;
  Py_XDECREF(functools);
  if (!r) {
    Py_DECREF(w);
    return NULL;
  }
  Py_DECREF(r);
  return (PyObject *)w;
}

static PyObject *scope_repr(scope_object_t *s) {
  return PyUnicode_FromFormat("labelprof.scope(%R, level=%s)", s->name,
                              s->level == LP_LEVEL_REQUEST    ? "'request'"
                              : s->level == LP_LEVEL_OPERATOR ? "'operator'"
                              : s->level == LP_LEVEL_DEBUG    ? "'debug'"
                                                              : "'runtime'");
}

static PyObject *scope_get_label(scope_object_t *s, void *unused) {
  (void)unused;
  return PyUnicode_FromString(s->site->label); /* the site's text: "(other names)" past the bound */
}

static PyMethodDef scope_methods[] = {
    {"__enter__", (PyCFunction)scope_enter, METH_NOARGS, "Opens the label on the calling thread."},
    {"__exit__", (PyCFunction)(void (*)(void))scope_exit, METH_FASTCALL,
     "Closes this thread's innermost open use of the scope (and what was left open inside it)."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef scope_members[] = {{"name", T_OBJECT, offsetof(scope_object_t, name), READONLY, "The name given."},
                                      {NULL, 0, 0, 0, NULL}};

static PyGetSetDef scope_getset[] = {
    {"label", (getter)scope_get_label, NULL, "The label as recorded (\"(other names)\" past the bound).", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject scope_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "labelprof.scope",
    .tp_basicsize = sizeof(scope_object_t),
    .tp_dealloc = (destructor)scope_dealloc,
    .tp_repr = (reprfunc)scope_repr,
    .tp_call = (ternaryfunc)scope_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "scope(name, level='runtime'): a label, as a context manager or a decorator.\n\n"
              "    with labelprof.scope(\"step\"):\n"
              "        ...\n\n"
              "    @labelprof.scope(\"load\")\n"
              "    def load(path): ...\n\n"
              "The label is on the calling thread's pseudo-stack while the block or the call runs,\n"
              "with the C labels of every extension the code calls nested under it.",
    .tp_weaklistoffset = offsetof(scope_object_t, weakrefs),
    .tp_methods = scope_methods,
    .tp_members = scope_members,
    .tp_getset = scope_getset,
    .tp_new = scope_tp_new,
    .tp_vectorcall = scope_vectorcall,
};

static int scoped_traverse(scoped_function_t *f, visitproc visit, void *arg) {
  Py_VISIT(f->func);
  Py_VISIT(f->scope);
  Py_VISIT(f->dict);
  return 0;
}

static int scoped_clear(scoped_function_t *f) {
  Py_CLEAR(f->func);
  Py_CLEAR(f->scope);
  Py_CLEAR(f->dict);
  return 0;
}

static void scoped_dealloc(scoped_function_t *f) {
  PyObject_GC_UnTrack(f);
  if (f->weakrefs) PyObject_ClearWeakRefs((PyObject *)f);
  scoped_clear(f);
  PyObject_GC_Del(f);
}

/* A method: bound to its instance, as a plain function would be. */
static PyObject *scoped_get(PyObject *self, PyObject *obj, PyObject *type) {
  (void)type;
  if (!obj || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

static PyObject *scoped_repr(scoped_function_t *f) {
  return PyUnicode_FromFormat("<labelprof.scope(%R) of %R>", ((scope_object_t *)f->scope)->name, f->func);
}

static PyMemberDef scoped_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(scoped_function_t, vectorcall), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(scoped_function_t, dict), READONLY, NULL},
    {"scope", T_OBJECT, offsetof(scoped_function_t, scope), READONLY, "The labelprof.scope it was made by."},
    {NULL, 0, 0, 0, NULL}};

static PyGetSetDef scoped_getset[] = {{"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
                                      {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject scoped_function_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "labelprof.scoped_function",
    .tp_basicsize = sizeof(scoped_function_t),
    .tp_dealloc = (destructor)scoped_dealloc,
    .tp_vectorcall_offset = offsetof(scoped_function_t, vectorcall),
    .tp_repr = (reprfunc)scoped_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "A function labelled by labelprof.scope(name) at every call.",
    .tp_traverse = (traverseproc)scoped_traverse,
    .tp_clear = (inquiry)scoped_clear,
    .tp_weaklistoffset = offsetof(scoped_function_t, weakrefs),
    .tp_members = scoped_members,
    .tp_getset = scoped_getset,
    .tp_descr_get = scoped_get,
    .tp_dictoffset = offsetof(scoped_function_t, dict),
};

/* ---- begin, end, instant, counter ----------------------------------------------------------- */

static PyObject *py_begin(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  (void)self;
  static const char *const usage = "labelprof.begin() takes a name and an optional level";
  PyObject *level = nargs == 2 ? args[1] : NULL;
  if (nargs < 1 || nargs > 2 || (kwnames && (PyTuple_GET_SIZE(kwnames) != 1 || level ||
                                             PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "level")))) {
    PyErr_SetString(PyExc_TypeError, usage);
    return NULL;
  }
  if (kwnames) level = args[nargs];
  uint32_t lv;
  if (level_of(level, &lv) < 0) return NULL;
  const lp_site_t *site = site_of(args[0], lv);
  if (!site || thread_ready() < 0) return NULL;
  py_thread_t *t = &py_self;
  if (t->nbegun < BEGUN_MAX) {
    t->begun[t->nbegun++] = lp_scope_enter(site);
  } else { /* beyond what a thread keeps: a plain begin, ended by the innermost-label rule */
    lp_site_begin(site);
    t->deeper++;
  }
  Py_RETURN_NONE;
}

/*
 * The calling thread's depth, and the depth a begin()'s scope was pushed to
 * (from the word lp_scope_enter() returned: the library's inline layout, which
 * this module is built with). A scope deeper than the stack now was closed
 * by a scope below it that healed the stack (the documented recovery).
 */
static unsigned thread_depth(void) {
  unsigned d = (unsigned)(lp_impl_self->word & LP_IMPL_DEPTH_MASK);
  return d == LP_IMPL_DEPTH_MASK ? 0 : d; /* a thread that never used a label */
}

static int begun_closed(const lp_scope_t *s) {
  unsigned d = (unsigned)(s->word & LP_IMPL_DEPTH_MASK);
  if (d == LP_IMPL_NOT_PUSHED) return 1; /* nothing was pushed: nothing to close */
  return (d & ~LP_IMPL_TRACED_MARK) > thread_depth();
}

static PyObject *py_end(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  py_thread_t *t = &py_self;
  if (t->deeper) {
    t->deeper--;
    LP_END();
    Py_RETURN_NONE;
  }
  while (t->nbegun && begun_closed(&t->begun[t->nbegun - 1])) t->nbegun--;
  if (!t->nbegun) {
    PyErr_SetString(PyExc_RuntimeError, "labelprof.end(): no label opened by labelprof.begin() is open on this thread");
    return NULL;
  }
  lp_scope_leave(&t->begun[--t->nbegun]);
  Py_RETURN_NONE;
}

static PyObject *py_instant(PyObject *self, PyObject *name) {
  (void)self;
  const lp_site_t *site = site_of(name, LP_LEVEL_RUNTIME);
  if (!site || thread_ready() < 0) return NULL;
  lp_site_instant(site);
  Py_RETURN_NONE;
}

static PyObject *py_counter(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "labelprof.counter() takes a name and an int value");
    return NULL;
  }
  const lp_site_t *site = site_of(args[0], LP_LEVEL_RUNTIME);
  if (!site) return NULL;
  if (!PyLong_Check(args[1]) && !PyIndex_Check(args[1])) {
    PyErr_Format(PyExc_TypeError, "labelprof.counter(): the value must be an int, not %.100s",
                 Py_TYPE(args[1])->tp_name);
    return NULL;
  }
  int overflow = 0;
  PyObject *v = PyNumber_Index(args[1]);
  if (!v) return NULL;
  long long value = PyLong_AsLongLongAndOverflow(v, &overflow);
  Py_DECREF(v);
  if (value == -1 && PyErr_Occurred()) return NULL;
  if (overflow) {
    PyErr_SetString(PyExc_OverflowError, "labelprof.counter(): the value does not fit in 64 bits");
    return NULL;
  }
  if (thread_ready() < 0) return NULL;
  lp_site_counter(site, (int64_t)value);
  Py_RETURN_NONE;
}

/* The calling thread's pseudo-stack depth (labels of every language), for tests and checks. */
static PyObject *py_depth(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return PyLong_FromUnsignedLong(thread_depth());
}

static PyObject *py_names(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  lp_names_stats_t st;
  int rc = lp_names_get_stats(&st);
  if (rc) return lp_error(rc, "lp_names_get_stats");
  return Py_BuildValue("{s:K,s:K,s:K}", "names", (unsigned long long)st.names, "limit", (unsigned long long)st.limit,
                       "overflowed", (unsigned long long)st.overflowed);
}

static PyObject *py_set_thread_name_hook(PyObject *self, PyObject *hook) {
  (void)self;
  Py_XSETREF(thread_name_hook, Py_NewRef(hook));
  Py_RETURN_NONE;
}

/* ---- the profile ---------------------------------------------------------------------------- */

typedef struct profile_object {
  PyObject_HEAD
  lp_profile_t *p;
} profile_object_t;

static PyTypeObject profile_type;

static PyObject *py_profile_start(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  static char *kwlist[] = {"hz", "cpu", "cpu_signal", NULL};
  unsigned int hz = 0;
  int cpu = 0, sig = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|Ipi:profile_start", kwlist, &hz, &cpu, &sig)) return NULL;
  if (hz > 100000) {
    PyErr_Format(PyExc_ValueError, "labelprof.profile: hz=%u is over 100000", hz);
    return NULL;
  }
  lp_profile_opts_t o;
  memset(&o, 0, sizeof o);
  o.hz = hz;
  o.flags = cpu ? LP_PROFILE_CPU : 0;
  o.cpu_signal = sig;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = lp_profile_start(&o);
  Py_END_ALLOW_THREADS
  if (rc) return lp_error(rc, "lp_profile_start");
  Py_RETURN_NONE;
}

static PyObject *py_profile_stop(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  lp_profile_t *p = NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = lp_profile_stop(&p);
  Py_END_ALLOW_THREADS
  if (rc) return lp_error(rc, "lp_profile_stop");
  profile_object_t *o = PyObject_New(profile_object_t, &profile_type);
  if (!o) {
    lp_profile_free(p);
    return NULL;
  }
  o->p = p;
  return (PyObject *)o;
}

static void profile_dealloc(profile_object_t *o) {
  lp_profile_free(o->p);
  PyObject_Free(o);
}

/* What fn writes to a FILE, as a str. */
static PyObject *to_text(int (*fn)(const lp_profile_t *, FILE *, const lp_print_opts_t *), const lp_profile_t *p,
                         const lp_print_opts_t *opts, const char *what) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return PyErr_SetFromErrno(PyExc_OSError);
  int rc = fn(p, f, opts);
  if (fclose(f) != 0 && !rc) rc = -EIO;
  PyObject *r = rc ? lp_error(rc, what) : PyUnicode_DecodeUTF8(buf, (Py_ssize_t)len, "replace");
  free(buf);
  return r;
}

static PyObject *profile_report(profile_object_t *o, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"flags", "min_percent", NULL};
  unsigned int flags = 0;
  double min_percent = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|Id:report", kwlist, &flags, &min_percent)) return NULL;
  lp_print_opts_t opts = {flags, min_percent};
  return to_text(lp_profile_print_ex, o->p, &opts, "lp_profile_print_ex");
}

static PyObject *profile_folded(profile_object_t *o, PyObject *args) {
  unsigned int flags = 0;
  if (!PyArg_ParseTuple(args, "|I:folded", &flags)) return NULL;
  lp_print_opts_t opts = {flags, 0};
  return to_text(lp_profile_write_folded_ex, o->p, &opts, "lp_profile_write_folded_ex");
}

static PyObject *profile_write_pprof(profile_object_t *o, PyObject *arg) {
  PyObject *path = NULL;
  if (!PyUnicode_FSConverter(arg, &path)) return NULL;
  int rc;
  const char *s = PyBytes_AS_STRING(path);
  Py_BEGIN_ALLOW_THREADS
  rc = lp_profile_write_pprof(o->p, s);
  Py_END_ALLOW_THREADS
  Py_DECREF(path);
  if (rc) return lp_error(rc, "lp_profile_write_pprof");
  Py_RETURN_NONE;
}

/* (label, samples, self samples, cpu ns, self cpu ns, [children...]); the root's label is None. */
static PyObject *node_tuple(const lp_node_t *n) {
  size_t k = lp_node_child_count(n);
  PyObject *kids = PyList_New((Py_ssize_t)k);
  if (!kids) return NULL;
  for (size_t i = 0; i < k; i++) {
    PyObject *c = node_tuple(lp_node_child(n, i));
    if (!c) {
      Py_DECREF(kids);
      return NULL;
    }
    PyList_SET_ITEM(kids, (Py_ssize_t)i, c);
  }
  const char *label = lp_node_label(n);
  PyObject *name = label ? PyUnicode_DecodeUTF8(label, (Py_ssize_t)strlen(label), "replace") : Py_NewRef(Py_None);
  if (!name) {
    Py_DECREF(kids);
    return NULL;
  }
  return Py_BuildValue("(NKKKKN)", name, (unsigned long long)lp_node_samples(n), (unsigned long long)lp_node_self(n),
                       (unsigned long long)lp_node_cpu_ns(n), (unsigned long long)lp_node_self_cpu_ns(n), kids);
}

static PyObject *profile_tree(profile_object_t *o, PyObject *unused) {
  (void)unused;
  return node_tuple(lp_profile_root(o->p));
}

/* [(tid, name, samples, merged, tree), ...], heaviest first. */
static PyObject *profile_threads(profile_object_t *o, PyObject *unused) {
  (void)unused;
  size_t n = lp_profile_thread_count(o->p);
  PyObject *list = PyList_New((Py_ssize_t)n);
  if (!list) return NULL;
  for (size_t i = 0; i < n; i++) {
    lp_thread_info_t t;
    int rc = lp_profile_thread(o->p, i, &t);
    PyObject *tree = rc ? NULL : node_tuple(t.root);
    PyObject *item = tree ? Py_BuildValue("(KsKIN)", (unsigned long long)t.tid, t.name ? t.name : "",
                                          (unsigned long long)t.samples, (unsigned)t.merged, tree)
                          : NULL;
    if (rc) lp_error(rc, "lp_profile_thread");
    if (!item) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, (Py_ssize_t)i, item);
  }
  return list;
}

static PyObject *profile_stats(profile_object_t *o, PyObject *unused) {
  (void)unused;
  lp_profile_stats_t s;
  int rc = lp_profile_get_stats(o->p, &s);
  if (rc) return lp_error(rc, "lp_profile_get_stats");
  return Py_BuildValue(
      "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:I,s:I,s:I,s:K,s:K,s:K,s:K,s:K,s:i,s:O}", "samples",
      (unsigned long long)s.samples, "ticks", (unsigned long long)s.ticks, "missed_ticks",
      (unsigned long long)s.missed_ticks, "skipped", (unsigned long long)s.skipped, "collector_cpu_ns",
      (unsigned long long)s.collector_cpu_ns, "sampling_ns", (unsigned long long)s.sampling_ns, "duration_ns",
      (unsigned long long)s.duration_ns, "tick_ns", (unsigned long long)s.tick_ns, "threads", s.threads, "hz", s.hz,
      "requested_hz", s.requested_hz, "truncated", (unsigned long long)s.truncated, "mismatched",
      (unsigned long long)s.mismatched, "unmatched", (unsigned long long)s.unmatched, "cpu_samples",
      (unsigned long long)s.cpu_samples, "cpu_lost", (unsigned long long)s.cpu_lost, "cpu_signal", s.cpu_signal,
      "has_cpu", lp_profile_has_cpu(o->p) ? Py_True : Py_False);
}

static PyMethodDef profile_methods[] = {
    {"report", (PyCFunction)(void (*)(void))profile_report, METH_VARARGS | METH_KEYWORDS, NULL},
    {"folded", (PyCFunction)profile_folded, METH_VARARGS, NULL},
    {"write_pprof", (PyCFunction)profile_write_pprof, METH_O, NULL},
    {"tree", (PyCFunction)profile_tree, METH_NOARGS, NULL},
    {"threads", (PyCFunction)profile_threads, METH_NOARGS, NULL},
    {"stats", (PyCFunction)profile_stats, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyTypeObject profile_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "labelprof._labelprof.ProfileData",
    .tp_basicsize = sizeof(profile_object_t),
    .tp_dealloc = (destructor)profile_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A finished profile (lp_profile_t); labelprof.profile wraps it.",
    .tp_methods = profile_methods,
};

/* ---- the timeline ---------------------------------------------------------------------------- */

static PyObject *py_trace_start(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  static char *kwlist[] = {"levels", "policy", "budget_bytes", "clock", "path", "rotate_bytes", "rotate_ns", NULL};
  unsigned int levels = 0;
  int policy = 0, clock = 0;
  unsigned long long budget = 0, rotate_bytes = 0, rotate_ns = 0;
  PyObject *path_obj = Py_None, *path = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|IiKiOKK:trace_start", kwlist, &levels, &policy, &budget, &clock,
                                   &path_obj, &rotate_bytes, &rotate_ns))
    return NULL;
  if (path_obj != Py_None && !PyUnicode_FSConverter(path_obj, &path)) return NULL;
  lp_trace_opts_t o;
  memset(&o, 0, sizeof o);
  o.levels = levels;
  o.policy = (lp_trace_policy_t)policy;
  o.budget_bytes = budget;
  o.clock = (lp_clock_t)clock;
  o.path = path ? PyBytes_AS_STRING(path) : NULL;
  o.rotate_bytes = rotate_bytes;
  o.rotate_ns = rotate_ns;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = lp_trace_start(&o);
  Py_END_ALLOW_THREADS
  Py_XDECREF(path);
  if (rc) return lp_error(rc, "lp_trace_start");
  Py_RETURN_NONE;
}

static PyObject *py_trace_stop(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = lp_trace_stop();
  Py_END_ALLOW_THREADS
  if (rc) return lp_error(rc, "lp_trace_stop");
  Py_RETURN_NONE;
}

/* trace_write(path, format, process_name): format 0 JSON, 1 Perfetto, 2 systrace. */
static PyObject *py_trace_write(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *path = NULL;
  int format;
  const char *process = NULL;
  if (!PyArg_ParseTuple(args, "O&iz:trace_write", PyUnicode_FSConverter, &path, &format, &process)) return NULL;
  const char *s = PyBytes_AS_STRING(path);
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = format == 1   ? lp_trace_write_perfetto(s, process)
       : format == 2 ? lp_trace_write_systrace(s)
                     : lp_trace_write_json(s, process);
  Py_END_ALLOW_THREADS
  Py_DECREF(path);
  if (rc) return lp_error(rc, format == 1 ? "lp_trace_write_perfetto" : format == 2 ? "lp_trace_write_systrace"
                                                                                     : "lp_trace_write_json");
  Py_RETURN_NONE;
}

static PyObject *py_trace_stats(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  lp_trace_stats_t s;
  int rc = lp_trace_get_stats(&s);
  if (rc) return lp_error(rc, "lp_trace_get_stats");
  return Py_BuildValue("{s:K,s:K,s:K,s:K,s:I,s:I,s:z,s:z}", "recorded", (unsigned long long)s.recorded, "dropped",
                       (unsigned long long)s.dropped, "budget_bytes", (unsigned long long)s.budget_bytes,
                       "used_bytes", (unsigned long long)s.used_bytes, "threads", s.threads, "tracks", s.tracks,
                       "clock", s.clock, "clock_reason", s.clock_reason);
}

static PyObject *py_dump(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = lp_dump();
  Py_END_ALLOW_THREADS
  if (rc) return lp_error(rc, "lp_dump");
  Py_RETURN_NONE;
}

/* ---- the module ---------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"begin", (PyCFunction)(void (*)(void))py_begin, METH_FASTCALL | METH_KEYWORDS,
     "begin(name, level='runtime'): opens a label on the calling thread until end()."},
    {"end", py_end, METH_NOARGS, "end(): closes the calling thread's innermost label opened by begin()."},
    {"instant", py_instant, METH_O, "instant(name): a point in time on the calling thread's lane."},
    {"counter", (PyCFunction)(void (*)(void))py_counter, METH_FASTCALL,
     "counter(name, value): the value (an int) of a counter from now on."},
    {"names", py_names, METH_NOARGS, "names(): {'names', 'limit', 'overflowed'}: the names made at run time."},
    {"_depth", py_depth, METH_NOARGS, NULL},
    {"_set_thread_name_hook", py_set_thread_name_hook, METH_O, NULL},
    {"profile_start", (PyCFunction)(void (*)(void))py_profile_start, METH_VARARGS | METH_KEYWORDS, NULL},
    {"profile_stop", py_profile_stop, METH_NOARGS, NULL},
    {"trace_start", (PyCFunction)(void (*)(void))py_trace_start, METH_VARARGS | METH_KEYWORDS, NULL},
    {"trace_stop", py_trace_stop, METH_NOARGS, NULL},
    {"trace_write", py_trace_write, METH_VARARGS, NULL},
    {"trace_stats", py_trace_stats, METH_NOARGS, NULL},
    {"dump", py_dump, METH_NOARGS, "dump(): writes what the LABELPROF_* variables asked for, so far."},
    {"read_events", lp_py_read, METH_VARARGS, NULL},
    {"command", lp_py_command, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "labelprof._labelprof",
                                    "The C part of labelprof: labels, sessions, and the command's readers.", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__labelprof(void) {
  if (PyType_Ready(&scope_type) < 0 || PyType_Ready(&scoped_function_type) < 0 || PyType_Ready(&profile_type) < 0)
    return NULL;
  PyObject *m = PyModule_Create(&module);
  if (!m) return NULL;
  if (PyModule_AddObjectRef(m, "scope", (PyObject *)&scope_type) < 0 ||
      PyModule_AddIntConstant(m, "REQUEST", LP_LEVEL_REQUEST) < 0 ||
      PyModule_AddIntConstant(m, "RUNTIME", LP_LEVEL_RUNTIME) < 0 ||
      PyModule_AddIntConstant(m, "OPERATOR", LP_LEVEL_OPERATOR) < 0 ||
      PyModule_AddIntConstant(m, "DEBUG", LP_LEVEL_DEBUG) < 0 ||
      PyModule_AddIntConstant(m, "ANNOTATIONS", LP_LEVEL_ANNOTATIONS) < 0 ||
      PyModule_AddIntConstant(m, "PRINT_THREADS", LP_PRINT_THREADS) < 0 ||
      PyModule_AddIntConstant(m, "PRINT_COUNTS", LP_PRINT_COUNTS) < 0 ||
      PyModule_AddIntConstant(m, "PRINT_FLAT", LP_PRINT_FLAT) < 0 ||
      PyModule_AddIntConstant(m, "PRINT_CPU", LP_PRINT_CPU) < 0 ||
      PyModule_AddStringConstant(m, "LIBRARY_VERSION", LABELPROF_VERSION_STRING) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
