"""Sessions from Python: the profile's tree as objects, the timeline, threads, fork, the
environment's sessions, and the bound on names made at run time.

Sampled trees are checked for their shape (a C label only ever under the Python
scope that called it), with wide bands on counts: the machine may be shared.
"""

import os
import threading

import labelprof
import pytest
from conftest import slow

depth = labelprof._lp._depth


def test_profile_tree_holds_c_labels_under_python_scopes(labelled):
    with labelprof.profile(hz=2000) as p:
        with labelprof.scope("py step"):
            for _ in range(20):
                labelled.work(10_000)  # 0.2 s in "c kernel"
    root = p.root
    assert root.name is None and root.child("c kernel") is None  # never outside the Python scope
    step = root.find("py step")
    kernel = root.find("py step", "c kernel")
    assert step is not None and kernel is not None
    assert kernel.samples >= 0.5 * step.samples and step.samples >= 50
    assert 0 < kernel.total <= step.total <= 100.0
    assert abs(step.total - 100.0 * step.samples / root.samples) < 1e-9
    assert [n.name for d, n in root.walk() if d == 2] == ["c kernel"]
    text = p.report()
    assert "py step" in text and "    " in text.split("c kernel")[0].splitlines()[-1]
    assert "py step;c kernel " in p.folded()
    st = p.stats
    assert st["samples"] == root.samples and st["hz"] == 2000 and not st["has_cpu"]
    assert str(p) == p.report()
    main = [t for t in p.threads if t.name == threading.current_thread().name]
    assert len(main) == 1 and main[0].root.find("py step", "c kernel") is not None


def test_profile_misuse():
    p = labelprof.profile()
    with pytest.raises(RuntimeError, match="never ran"):
        p.root
    with p:
        with pytest.raises(RuntimeError, match="still running"):
            p.report()
        with pytest.raises(OSError) as e:  # one program profile at a time
            with labelprof.profile():
                pass
        assert e.value.errno == 16  # EBUSY
        with pytest.raises(RuntimeError):
            p.start()
    with pytest.raises(RuntimeError):
        p.stop()
    with pytest.raises(ValueError):
        labelprof.profile(hz=10**6).start()
    with pytest.raises(OSError, match="ENODATA|No data|lp_profile_print_ex"):
        p.report(cpu=True)  # no CPU time in this profile


def test_profile_cpu_and_pprof(tmp_path, labelled):
    with labelprof.profile(cpu=True) as p:
        with labelprof.scope("cpu step"):
            labelled.work(100_000)
    assert p.stats["has_cpu"]
    step = p.root.find("cpu step")
    assert step is not None and step.cpu_ns > 0
    assert "by CPU time" in p.report(cpu=True)
    path = tmp_path / "p.pb.gz"
    p.write_pprof(path)
    assert path.stat().st_size > 0
    with pytest.raises(FileNotFoundError):
        p.write_pprof(tmp_path / "no" / "dir.pb.gz")


def test_two_threads_carry_their_names(tmp_path, labelled):
    ready = threading.Barrier(2)

    def worker(n):
        ready.wait()
        for _ in range(n):
            with labelprof.scope("py work"):
                labelled.work(500)

    path = tmp_path / "threads.pftrace"
    with labelprof.profile(hz=2000) as p, labelprof.trace(path) as t:
        ts = [threading.Thread(target=worker, args=(40,), name=n) for n in ("alpha", "beta")]
        for x in ts:
            x.start()
        for x in ts:
            x.join()
    assert t.stats["dropped"] == 0
    df = labelprof.read(path)
    work = df[df.name == "py work"]
    assert work.groupby("thread").size().to_dict() == {"alpha": 40, "beta": 40}
    kernels = df[df.name == "c kernel"]
    assert kernels.groupby("thread").size().to_dict() == {"alpha": 40, "beta": 40}
    assert set(kernels.depth) == {1} and set(work.depth) == {0}
    assert work.tid.nunique() == 2
    names = {x.name for x in p.threads}
    assert {"alpha", "beta"} <= names
    for x in p.threads:
        if x.name in ("alpha", "beta"):
            assert x.root.child("c kernel") is None


def test_threads_started_before_import(run_script):
    code = """
        import threading
        go, done = threading.Event(), []
        def early():
            go.wait()
            import labelprof, labelled
            for _ in range(10):
                with labelprof.scope("early"):
                    labelled.work(100)
            done.append(labelprof._lp._depth())
        t = threading.Thread(target=early, name="started before")
        t.start()
        import labelprof, labelled
        with labelprof.trace("early.json"):
            go.set()
            t.join()
            late = threading.Thread(target=lambda: labelprof.instant("late"), name="started after")
            late.start()
            late.join()
        df = labelprof.read("early.json")
        e = df[df.name == "early"]
        assert len(e) == 10 and set(e.thread) == {"started before"}, df
        assert set(df[df.name == "c kernel"].depth) == {1}
        assert list(df[df.name == "late"].thread) == ["started after"]
        assert done == [0]
        print("ok")
    """
    rc, out, err = run_script(code)
    assert rc == 0 and out.strip() == "ok", err


def test_fork_as_the_library_does(tmp_path, labelled):
    """A child of os.fork() keeps its parent's open scope, closes it, and records sessions of its own."""
    path = tmp_path / "child.json"
    d0 = depth()
    with labelprof.scope("before fork"):
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                ok = depth() == d0 + 1
                with labelprof.trace(path):
                    with labelprof.scope("in child"):
                        labelled.work(100)
                ok = ok and depth() == d0 + 1
                status = 0 if ok else 3
            finally:
                os._exit(status)
        assert depth() == d0 + 1
        _, status = os.waitpid(pid, 0)
    assert depth() == d0
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    df = labelprof.read(path)
    child = df[df.name == "in child"]
    assert len(child) == 1 and child.pid.iloc[0] == pid
    assert list(df[df.name == "c kernel"].depth) == [child.depth.iloc[0] + 1]


def test_fork_inside_sessions(tmp_path):
    """A child leaving the blocks of its parent's sessions stops and writes nothing: the parent owns them."""
    path = tmp_path / "parent.json"
    with labelprof.profile() as p, labelprof.trace(path):
        with labelprof.scope("parent"):
            pid = os.fork()
            if pid == 0:
                status = 1
                try:
                    with labelprof.scope("child only"):
                        pass
                    status = 0
                finally:
                    os._exit(status)
        _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    pid2 = os.fork()
    if pid2 == 0:  # the child of a finished session reads it as its parent does
        os._exit(0 if p.root is not None else 1)
    assert os.WEXITSTATUS(os.waitpid(pid2, 0)[1]) == 0
    df = labelprof.read(path)
    assert (df.name == "parent").sum() == 1 and (df.name == "child only").sum() == 0
    q = labelprof.profile()
    q.start()
    pid3 = os.fork()
    if pid3 == 0:
        code = 1
        try:
            q.stop()
            try:
                q.root
            except RuntimeError as e:
                code = 0 if "parent process" in str(e) else 2
        finally:
            os._exit(code)
    assert os.WEXITSTATUS(os.waitpid(pid3, 0)[1]) == 0
    q.stop()
    assert q.root is not None


def test_environment_sessions(run_script):
    """LABELPROF_PROFILE and LABELPROF_TRACE, unchanged, for a program that only imports labelprof."""
    code = """
        import labelprof, labelled
        with labelprof.scope("env step"):
            labelled.work(150_000)
    """
    rc, out, err = run_script(code, env={"LABELPROF_PROFILE": "prof.txt", "LABELPROF_TRACE": "env.json"})
    assert rc == 0, err
    return_code, out, err = run_script(
        """
        import labelprof
        text = open("prof.txt").read()
        lines = text.splitlines()
        step = [l for l in lines if l.lstrip().endswith("% env step")]
        kern = [l for l in lines if l.lstrip().endswith("% c kernel")]
        assert step and kern and len(kern[0]) - len(kern[0].lstrip()) > len(step[0]) - len(step[0].lstrip()), text
        df = labelprof.read("env.json")
        assert list(df[df.name == "env step"].depth) == [0]
        assert list(df[df.name == "c kernel"].depth) == [1]
        print("ok")
        """
    )
    assert return_code == 0 and out.strip() == "ok", err


def test_bound_on_names(run_script):
    code = """
        import warnings, labelprof
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with labelprof.trace("names.json"):
                for round in range(3):
                    for i in range(8):
                        with labelprof.scope("name %d" % i):
                            labelprof.instant("mark")
        st = labelprof.names()
        df = labelprof.read("names.json")
        kept = sorted(set(df.name) - {"(other names)", "mark"})
        print(len(w), [str(x.message)[:40] for x in w])
        print(st["limit"], st["names"], st["overflowed"])
        print(len(kept), (df.name == "(other names)").sum())
        print(df.attrs["info"].get("otherData.names_overflowed"))
    """
    rc, out, err = run_script(code, env={"LABELPROF_MAX_NAMES": "5"})
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("1 ['labelprof: 5 distinct names made at")
    # 5 names: "mark" and 4 scopes; the other 4 scopes are "(other names)", counted at each of their 3 uses.
    assert lines[1] == "5 5 12"
    assert lines[2] == "4 12"
    assert lines[3] == "12"


def test_trace_modes_and_misuse(tmp_path):
    with pytest.raises(ValueError, match="mode"):
        labelprof.trace(tmp_path / "x.json", mode="fast")
    with pytest.raises(ValueError, match="Perfetto"):
        labelprof.trace(tmp_path / "x.json", mode="stream", format="json")
    with pytest.raises(ValueError, match="level"):
        labelprof.trace(tmp_path / "x.json", levels="loud")
    with pytest.raises(ValueError):
        labelprof.trace(tmp_path / "x.json", budget_bytes=100)
    t = labelprof.trace(tmp_path / "x.json")
    with pytest.raises(RuntimeError):
        t.stop()
    with t:
        with pytest.raises(OSError) as e:
            labelprof.trace(tmp_path / "y.json").start()
        assert e.value.errno == 16
    # A stream: written while it runs, readable after.
    path = tmp_path / "stream.pftrace"
    with labelprof.trace(path, mode="stream"):
        for i in range(100):
            with labelprof.scope("streamed"):
                pass
    assert (labelprof.read(path).name == "streamed").sum() == 100
    # A ring: the newest events.
    with labelprof.trace(tmp_path / "ring.json", mode="ring", budget_bytes=65536) as t:
        for i in range(20000):
            with labelprof.scope("ring"):
                pass
    df = t.read()
    assert 0 < (df.name == "ring").sum() < 20000 and t.stats["dropped"] > 0
    # A directory that is not there: the library's error, named.
    with pytest.raises(FileNotFoundError, match="lp_trace_write_json"):
        with labelprof.trace(tmp_path / "no" / "dir.json"):
            pass


def test_exception_in_a_session_still_writes(tmp_path):
    path = tmp_path / "raised.json"
    with pytest.raises(ZeroDivisionError):
        with labelprof.profile() as p, labelprof.trace(path):
            with labelprof.scope("doomed"):
                1 / 0
    assert (labelprof.read(path).name == "doomed").sum() == 1
    assert p.stats["duration_ns"] > 0
    with labelprof.profile(), labelprof.trace(tmp_path / "again.json"):  # both sessions were stopped
        pass
