/*
 * labelled.c: a C extension with labels of its own (LP_SCOPE, through the
 * shared liblabelprof), built by the tests (conftest.py) to check that a
 * Python scope and the C labels of the code it calls share one
 * pseudo-stack: in the tree and on the timeline.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <labelprof.h>
#include <time.h>

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Busy for us microseconds inside the label "c kernel", without the GIL: threads run at once. */
static PyObject *work(PyObject *self, PyObject *arg) {
  (void)self;
  long us = PyLong_AsLong(arg);
  if (us < 0) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "work() takes microseconds >= 0");
    return NULL;
  }
  Py_BEGIN_ALLOW_THREADS
  {
    LP_SCOPE("c kernel");
    uint64_t end = now_ns() + (uint64_t)us * 1000u;
    while (now_ns() < end) {
    }
  }
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

/* n label pairs in a loop: what a C label costs, for the bench beside the Python ones. */
static PyObject *pairs(PyObject *self, PyObject *arg) {
  (void)self;
  long n = PyLong_AsLong(arg);
  if (n < 0) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "pairs() takes a count >= 0");
    return NULL;
  }
  for (long i = 0; i < n; i++) {
    LP_SCOPE("c pair");
    __asm__ __volatile__("" ::: "memory");
  }
  Py_RETURN_NONE;
}

/* fn() called inside the C label "c outer": Python labels nest under C ones too. */
static PyObject *call_in_scope(PyObject *self, PyObject *fn) {
  (void)self;
  LP_SCOPE("c outer");
  return PyObject_CallNoArgs(fn);
}

/* Opens "c left open" and returns without closing it, as C code with a missing LP_END() would. */
static PyObject *leave_open(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  LP_BEGIN("c left open");
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"work", work, METH_O, "work(us): busy inside LP_SCOPE(\"c kernel\"), the GIL released."},
    {"pairs", pairs, METH_O, "pairs(n): n LP_SCOPE pairs."},
    {"call_in_scope", call_in_scope, METH_O, "call_in_scope(fn): fn() inside LP_SCOPE(\"c outer\")."},
    {"leave_open", leave_open, METH_NOARGS, "leave_open(): LP_BEGIN(\"c left open\") and no end."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "labelled", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_labelled(void) { return PyModule_Create(&module); }
