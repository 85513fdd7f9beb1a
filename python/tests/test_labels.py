"""Labels from Python: scopes, the decorator, begin/end, instants, counters, and every misuse.

Each test checks the calling thread's pseudo-stack depth (labelprof._lp._depth(),
which counts C labels too) where a mistake could leave it wrong, and the
timeline where the labels must show.
"""

import gc
import inspect
import threading

import labelprof
import pytest

depth = labelprof._lp._depth


def record(tmp_path, body, name="t.json", levels="all"):
    path = tmp_path / name
    with labelprof.trace(path, levels=levels):
        body()
    return labelprof.read(path)


def test_scope_is_a_context_manager(tmp_path):
    def body():
        d0 = depth()
        with labelprof.scope("outer") as s:
            assert depth() == d0 + 1
            assert s.name == "outer" and s.label == "outer"
            with labelprof.scope("inner"):
                assert depth() == d0 + 2
        assert depth() == d0

    df = record(tmp_path, body)
    outer = df[df.name == "outer"]
    inner = df[df.name == "inner"]
    assert len(outer) == 1 and len(inner) == 1
    assert outer.depth.iloc[0] == 0 and inner.depth.iloc[0] == 1
    assert outer.category.iloc[0] == "runtime"
    assert inner.ts_ns.iloc[0] >= outer.ts_ns.iloc[0]
    assert inner.ts_ns.iloc[0] + inner.dur_ns.iloc[0] <= outer.ts_ns.iloc[0] + outer.dur_ns.iloc[0]


def test_python_scope_holds_c_labels(tmp_path, labelled):
    def body():
        with labelprof.scope("py step"):
            labelled.work(200)
            labelled.call_in_scope(lambda: labelprof.instant("py in c"))

    df = record(tmp_path, body)
    step = df[df.name == "py step"].iloc[0]
    kernel = df[df.name == "c kernel"].iloc[0]
    c_outer = df[df.name == "c outer"].iloc[0]
    mark = df[df.name == "py in c"].iloc[0]
    assert (kernel.depth, c_outer.depth, mark.depth) == (step.depth + 1, step.depth + 1, step.depth + 2)
    assert kernel.tid == step.tid
    assert step.ts_ns <= kernel.ts_ns and kernel.ts_ns + kernel.dur_ns <= step.ts_ns + step.dur_ns
    assert kernel.dur_ns >= 200_000
    assert c_outer.ts_ns <= mark.ts_ns <= c_outer.ts_ns + c_outer.dur_ns


def test_levels(tmp_path):
    def body():
        with labelprof.scope("kept", level="operator"):
            with labelprof.scope("not kept", level=labelprof.DEBUG):
                pass
            with labelprof.scope("request kept", labelprof.REQUEST):
                pass

    df = record(tmp_path, body, levels=["operator", "request"])
    assert set(df.name) == {"kept", "request kept"}
    assert df.set_index("name").category.to_dict() == {"kept": "operator", "request kept": "request"}
    with pytest.raises(ValueError, match="none of"):
        labelprof.scope("x", level="loud")
    with pytest.raises(ValueError):
        labelprof.scope("x", level=3)
    with pytest.raises(TypeError):
        labelprof.scope("x", level=1.0)
    with pytest.raises(TypeError):
        labelprof.scope("x", colour="red")


def test_decorator(tmp_path):
    calls = []

    @labelprof.scope("decorated")
    def f(a, b=2, *, c=3):
        """f's own doc."""
        calls.append(depth())
        return a + b + c

    class K:
        @labelprof.scope("method")
        def m(self, x):
            return (self, x)

    assert f.__name__ == "f" and f.__doc__ == "f's own doc." and f.__wrapped__ is not None
    assert f.__qualname__.endswith("test_decorator.<locals>.f")
    assert inspect.signature(f) == inspect.signature(f.__wrapped__)
    assert f.scope.name == "decorated"

    def body():
        d0 = depth()
        assert f(1) == 6 and f(1, 1, c=1) == 3 and f(*[1], **{"b": 0, "c": 0}) == 1
        k = K()
        assert k.m(5) == (k, 5) and K.m(k, 6) == (k, 6)
        assert depth() == d0
        assert calls == [d0 + 1] * 3

    df = record(tmp_path, body)
    assert (df.name == "decorated").sum() == 3
    assert (df.name == "method").sum() == 2


def test_decorator_recursion_and_exceptions(tmp_path):
    @labelprof.scope("fact")
    def fact(n):
        if n < 0:
            raise ValueError("negative")
        return 1 if n <= 1 else n * fact(n - 1)

    def body():
        d0 = depth()
        assert fact(10) == 3628800
        with pytest.raises(ValueError, match="negative"):
            fact(-1)
        assert depth() == d0

    df = record(tmp_path, body)
    facts = df[df.name == "fact"]
    assert len(facts) == 11
    assert sorted(facts.depth) == sorted(list(range(10)) + [0])


def test_decorator_refuses_generators_and_coroutines():
    def gen():
        yield 1

    async def coro():
        pass

    async def agen():
        yield 1

    for fn in (gen, coro, agen):
        with pytest.raises(TypeError, match="generator or coroutine"):
            labelprof.scope("x")(fn)
    with pytest.raises(TypeError):
        labelprof.scope("x")(42)
    with pytest.raises(TypeError):
        labelprof.scope("x")(print, extra=1)


def test_exception_inside_scope_closes_it(tmp_path):
    def body():
        d0 = depth()
        with pytest.raises(KeyError):
            with labelprof.scope("raises"):
                with labelprof.scope("deeper"):
                    raise KeyError("k")
        assert depth() == d0

    df = record(tmp_path, body)
    assert (df.name == "raises").sum() == 1 and (df.name == "deeper").sum() == 1
    assert df.attrs["unclosed"] == 0


def test_scope_heals_what_was_left_open(tmp_path, labelled):
    """A label left open inside a scope (C's missing LP_END, Python's begin() without end()) ends with it."""

    def body():
        d0 = depth()
        with labelprof.scope("healer"):
            labelled.leave_open()
            labelprof.begin("py left open")
            assert depth() == d0 + 3
        assert depth() == d0
        with pytest.raises(RuntimeError):  # the begin() was closed with the scope: its end() is refused...
            labelprof.end()

    df = record(tmp_path, body)
    for name in ("healer", "c left open", "py left open"):
        assert (df.name == name).sum() == 1, name
    assert df.attrs["unclosed"] == 0


def test_end_closes_what_begin_opened_on_this_thread():
    d0 = depth()
    with pytest.raises(RuntimeError, match="no label opened by labelprof.begin"):
        labelprof.end()
    labelprof.begin("a")
    labelprof.begin("b", level="operator")
    labelprof.begin("c", labelprof.DEBUG)
    assert depth() == d0 + 3
    errors = []

    def other():
        try:
            labelprof.end()
        except RuntimeError as e:
            errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 1 and depth() == d0 + 3  # another thread's end() touches nothing here
    for _ in range(3):
        labelprof.end()
    assert depth() == d0
    with pytest.raises(RuntimeError):
        labelprof.end()
    with pytest.raises(TypeError):
        labelprof.begin()
    with pytest.raises(TypeError):
        labelprof.begin("x", level="runtime", other=1)


def test_begin_deeper_than_the_stack():
    d0 = depth()
    for i in range(100):
        labelprof.begin("deep %d" % (i % 7))
    for _ in range(100):
        labelprof.end()
    assert depth() == d0
    with pytest.raises(RuntimeError):
        labelprof.end()


def test_bad_names_are_python_errors():
    d0 = depth()
    for bad in (1, None, b"bytes", 2.5, object()):
        with pytest.raises(TypeError, match="must be str"):
            labelprof.scope(bad)
        with pytest.raises(TypeError):
            labelprof.begin(bad)
        with pytest.raises(TypeError):
            labelprof.instant(bad)
        with pytest.raises(TypeError):
            labelprof.counter(bad, 1)
    with pytest.raises(ValueError, match="NUL"):
        labelprof.scope("a\0b")
    with pytest.raises(UnicodeEncodeError):
        labelprof.scope("\udc80")
    with pytest.raises(TypeError, match="must be an int"):
        labelprof.counter("c", 1.5)
    with pytest.raises(OverflowError):
        labelprof.counter("c", 2**70)
    with pytest.raises(TypeError):
        labelprof.counter("c")
    assert depth() == d0

    class Name(str):
        pass

    with labelprof.scope(Name("a str subclass")) as s:
        assert s.label == "a str subclass"


def test_instant_and_counter(tmp_path):
    class Index:
        def __index__(self):
            return 7

    def body():
        with labelprof.scope("loop"):
            for i in range(5):
                labelprof.instant("tick")
                labelprof.counter("queue", i * 10)
            labelprof.counter("queue", Index())
            labelprof.counter("queue", -(2**63))

    df = record(tmp_path, body)
    ticks = df[(df.kind == "instant") & (df.name == "tick")]
    assert len(ticks) == 5 and set(ticks.depth) == {1}
    q = df[(df.kind == "counter") & (df.name == "queue")]
    assert list(q.value) == [0, 10, 20, 30, 40, 7, float(-(2**63))]


def test_one_scope_object_open_many_times(tmp_path):
    s = labelprof.scope("shared")
    barrier = threading.Barrier(2)
    depths = []

    def worker():
        with s:
            barrier.wait()  # both threads are inside the same object at once
            depths.append(depth())
            barrier.wait()

    def body():
        d0 = depth()
        with s:
            with s:  # nested on one thread
                assert depth() == d0 + 2
        assert depth() == d0
        ts = [threading.Thread(target=worker) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    df = record(tmp_path, body)
    assert depths == [1, 1]
    assert (df.name == "shared").sum() == 4
    with pytest.raises(RuntimeError, match="not open on this thread"):
        s.__exit__(None, None, None)


def test_scope_objects_are_freed():
    import weakref

    s = labelprof.scope("freed")
    r = weakref.ref(s)

    @labelprof.scope("freed too")
    def f():
        pass

    rf = weakref.ref(f)
    del s, f
    gc.collect()
    assert r() is None and rf() is None


def test_names_cache_many_names(tmp_path):
    """More names than the module's cache holds, each made twice: every label keeps its own text."""

    def body():
        for round in range(2):
            for i in range(1500):
                with labelprof.scope("name %d" % i):
                    pass

    df = record(tmp_path, body)
    counts = df.name.value_counts()
    assert len(counts) == 1500 and set(counts) == {2}
    assert labelprof.names()["names"] >= 1500
