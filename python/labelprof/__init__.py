"""labelprof for Python: labels, profiles and timelines, and traces as DataFrames.

Labels share the pseudo-stack of the calling thread with the C labels
(LP_SCOPE) of every extension in the process, through the one shared
liblabelprof:

    import labelprof

    @labelprof.scope("train step")
    def step(batch):
        with labelprof.scope("forward"):
            model.forward(batch)          # its C labels nest under "forward"

    with labelprof.profile(hz=1000) as p, labelprof.trace("run.pftrace"):
        for batch in data:
            step(batch)
    print(p.report())
    df = labelprof.read("run.pftrace")    # name, category, pid, tid, thread, ts_ns, dur_ns, depth, ...

docs/python.md in labelprof's repository is the reference.
"""

import os
import sys
import threading
import warnings

from . import _labelprof as _lp
from ._labelprof import (
    DEBUG,
    OPERATOR,
    REQUEST,
    RUNTIME,
    begin,
    counter,
    dump,
    end,
    instant,
    names,
    scope,
)

__all__ = [
    "scope",
    "begin",
    "end",
    "instant",
    "counter",
    "profile",
    "trace",
    "read",
    "stats",
    "names",
    "dump",
    "Node",
    "ThreadProfile",
    "REQUEST",
    "RUNTIME",
    "OPERATOR",
    "DEBUG",
]


def _version():
    try:
        from importlib.metadata import version

        return version("labelprof")
    except Exception:  # run from a build tree, without metadata
        return _lp.LIBRARY_VERSION


__version__ = _version()

_dummy = getattr(threading, "_DummyThread", ())


def _thread_name():
    """The calling thread's name for its lane: its threading name, or None for a thread threading did not start."""
    t = threading.current_thread()
    return None if isinstance(t, _dummy) else t.name


_lp._set_thread_name_hook(_thread_name)

# ---- the profile -----------------------------------------------------------------------------


class Node:
    """A node of a profile's tree: a label and the samples taken while it was on a stack.

    name          the label (None at the root)
    samples       samples at or below the node
    self_samples  samples that stopped at the node (at the root: outside any label)
    total, self   the same as percentages of the tree's samples, as the report prints them
    cpu_ns, self_cpu_ns   CPU time at or below / stopped at the node (profile(cpu=True); else 0)
    children      heaviest first
    """

    __slots__ = ("name", "samples", "self_samples", "total", "self", "cpu_ns", "self_cpu_ns", "children")

    def __init__(self, t, all_samples):
        name, samples, self_samples, cpu_ns, self_cpu_ns, kids = t
        self.name = name
        self.samples = samples
        self.self_samples = self_samples
        self.total = 100.0 * samples / all_samples if all_samples else 0.0
        self.self = 100.0 * self_samples / all_samples if all_samples else 0.0
        self.cpu_ns = cpu_ns
        self.self_cpu_ns = self_cpu_ns
        self.children = [Node(k, all_samples) for k in kids]

    def child(self, name):
        """The child labelled name, or None."""
        for c in self.children:
            if c.name == name:
                return c
        return None

    def find(self, *path):
        """The node at path below this one (child names, outermost first), or None."""
        n = self
        for name in path:
            n = n.child(name)
            if n is None:
                return None
        return n

    def walk(self, depth=0):
        """(depth, node) for this node and every node below it, depth first."""
        yield depth, self
        for c in self.children:
            yield from c.walk(depth + 1)

    def __iter__(self):
        return iter(self.children)

    def __repr__(self):
        return "Node(%r, samples=%d, total=%.2f%%, self=%.2f%%, children=%d)" % (
            self.name,
            self.samples,
            self.total,
            self.self,
            len(self.children),
        )


class ThreadProfile:
    """One sampled thread of a profile: tid (0 for a merged record), name, samples, merged, root (a Node)."""

    __slots__ = ("tid", "name", "samples", "merged", "root")

    def __init__(self, t):
        self.tid, self.name, self.samples, self.merged, tree = t
        self.root = Node(tree, tree[1])

    def __repr__(self):
        return "ThreadProfile(%r, tid=%d, samples=%d)" % (self.name, self.tid, self.samples)


class _Session:
    """What profile and trace share: start() and stop(), or a with block, one run at a time.

    A session belongs to the process that started it: in a child of os.fork() stop() only
    marks it stopped, and the parent's stop() ends it.
    """

    _name = _doing = ""  # "labelprof.profile", "running": for the messages
    _running = False
    _pid = None

    def start(self):
        if self._running:
            raise RuntimeError("%s: already %s" % (self._name, self._doing))
        self._start()
        self._running = True
        self._pid = os.getpid()
        return self

    def stop(self):
        if not self._running:
            raise RuntimeError("%s: not %s" % (self._name, self._doing))
        self._running = False
        if self._pid == os.getpid():
            self._stop()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


class profile(_Session):
    """profile(hz=1000, cpu=False, cpu_signal=0): the sampled percentage tree of a block.

    with labelprof.profile() as p: ...   then p.report(), p.root, p.threads, p.stats.
    start() and stop() do the same without a block. A collector thread samples every
    labelled thread's pseudo-stack hz times a second; cpu=True also samples each thread's
    CPU time on its own CPU clock. It nests with the environment's profile
    (LABELPROF_PROFILE); only one program profile runs at a time (OSError EBUSY).
    """

    def __init__(self, hz=1000, cpu=False, cpu_signal=0):
        self.hz, self.cpu, self.cpu_signal = hz, bool(cpu), cpu_signal
        self._data = None
        self._root = self._threads = None

    _name, _doing = "labelprof.profile", "running"

    def _start(self):
        _lp.profile_start(hz=self.hz, cpu=self.cpu, cpu_signal=self.cpu_signal)
        self._data = None
        self._root = self._threads = None

    def _stop(self):
        # Stops the profile and keeps it.
        self._data = _lp.profile_stop()

    def _done(self):
        if self._data is None:
            if self._running:
                why = "still running"
            elif self._pid is not None and self._pid != os.getpid():
                why = "started in the parent process (pid %d), which has its samples" % self._pid
            else:
                why = "never ran"
            raise RuntimeError("labelprof.profile: " + why)
        return self._data

    @property
    def root(self):
        """The tree of all threads (a Node); percentages of all samples."""
        if self._root is None:
            t = self._done().tree()
            self._root = Node(t, t[1])
        return self._root

    @property
    def threads(self):
        """One ThreadProfile per sampled thread, heaviest first; percentages of that thread's samples."""
        if self._threads is None:
            self._threads = [ThreadProfile(t) for t in self._done().threads()]
        return self._threads

    @property
    def stats(self):
        """The profile's counters (lp_profile_stats_t) as a dict."""
        return self._done().stats()

    def report(self, threads=False, counts=False, flat=False, cpu=False, min_percent=0.0):
        """The text report, as lp_profile_print_ex() prints it (the gemmlowp layout)."""
        flags = (
            (_lp.PRINT_THREADS if threads else 0)
            | (_lp.PRINT_COUNTS if counts else 0)
            | (_lp.PRINT_FLAT if flat else 0)
            | (_lp.PRINT_CPU if cpu else 0)
        )
        return self._done().report(flags, float(min_percent))

    def folded(self, cpu=False):
        """Folded stacks ("a;b 12" per line), for flame graphs; cpu=True: CPU microseconds."""
        return self._done().folded(_lp.PRINT_CPU if cpu else 0)

    def write_pprof(self, path):
        """Writes the profile as pprof's profile.proto, gzipped."""
        self._done().write_pprof(os.fspath(path))

    def __str__(self):
        return self.report()


# ---- the timeline ----------------------------------------------------------------------------

_LEVEL_NAMES = {"request": REQUEST, "runtime": RUNTIME, "operator": OPERATOR, "debug": DEBUG, "annotations": 0x10}
_POLICIES = {"discard": 0, "ring": 1, "stream": 2}
_CLOCKS = {"auto": 0, "tsc": 1, "monotonic": 2}
_FORMATS = {"json": 0, "perfetto": 1, "systrace": 2}


def _levels(levels):
    if levels is None or levels == "standard":
        return RUNTIME | OPERATOR
    if levels == "all":
        return 0x1F
    if isinstance(levels, int):
        if levels <= 0 or levels & ~0x1F:
            raise ValueError("labelprof.trace: levels=%#x is not a mask of labelprof's levels" % levels)
        return levels
    if isinstance(levels, str):
        levels = levels.split(",")
    mask = 0
    for lv in levels:
        if isinstance(lv, int):
            mask |= _levels(lv)
            continue
        lv = lv.strip()
        if lv not in _LEVEL_NAMES:
            raise ValueError(
                "labelprof.trace: level %r is none of %s, 'standard', 'all'" % (lv, ", ".join(map(repr, _LEVEL_NAMES)))
            )
        mask |= _LEVEL_NAMES[lv]
    if not mask:
        raise ValueError("labelprof.trace: no level to record")
    return mask


def _choice(table, value, what):
    if value not in table:
        raise ValueError("labelprof.trace: %s=%r is none of %s" % (what, value, ", ".join(map(repr, table))))
    return table[value]


class trace(_Session):
    """trace(path, levels="standard", mode="discard", budget_bytes=0, format=None, ...): a timeline of a block.

    with labelprof.trace("run.json"): ...   records every scope, instant and counter of the
    levels asked for, on every thread, and writes path when the block ends: Chrome Trace
    Event JSON, or Perfetto protobuf for a name ending in .pftrace or .perfetto-trace
    (format="json", "perfetto" or "systrace" says it). mode="ring" keeps the newest
    events; mode="stream" writes a Perfetto file while the program runs. read() reads
    the file back as a DataFrame.
    """

    def __init__(
        self,
        path,
        levels="standard",
        mode="discard",
        budget_bytes=0,
        format=None,
        process_name=None,
        clock="auto",
        rotate_bytes=0,
        rotate_seconds=0,
    ):
        self.path = os.fspath(path)
        self.levels = _levels(levels)
        self.policy = _choice(_POLICIES, mode, "mode")
        self.clock = _choice(_CLOCKS, clock, "clock")
        if format is None:
            format = "perfetto" if self.path.endswith((".pftrace", ".perfetto-trace")) or mode == "stream" else "json"
        self.format = _choice(_FORMATS, format, "format")
        if mode == "stream" and format != "perfetto":
            raise ValueError("labelprof.trace: mode='stream' writes Perfetto only (format='perfetto')")
        if budget_bytes and budget_bytes < 16384:
            raise ValueError("labelprof.trace: budget_bytes=%d is under one 16 KiB chunk" % budget_bytes)
        self.budget_bytes = budget_bytes
        self.rotate_bytes = rotate_bytes
        self.rotate_ns = int(rotate_seconds * 1e9)
        if process_name is None and sys.argv and sys.argv[0]:
            process_name = os.path.basename(sys.argv[0])
        self.process_name = process_name
        self.stats = None

    _name, _doing = "labelprof.trace", "recording"

    def _start(self):
        _lp.trace_start(
            levels=self.levels,
            policy=self.policy,
            budget_bytes=self.budget_bytes,
            clock=self.clock,
            path=self.path if self.policy == 2 else None,
            rotate_bytes=self.rotate_bytes,
            rotate_ns=self.rotate_ns,
        )

    def _stop(self):
        # Stops recording and writes the file (a stream: closes it); stats: the session's counters.
        _lp.trace_stop()
        self.stats = _lp.trace_stats()
        if self.policy != 2:
            _lp.trace_write(self.path, self.format, self.process_name)

    def read(self):
        """The file written, as labelprof.read() gives it."""
        return read(self.path)


# ---- reading ---------------------------------------------------------------------------------


def _pandas():
    try:
        import pandas
    except ImportError as e:
        raise ImportError(
            "labelprof.read() and labelprof.stats() return pandas DataFrames: install pandas "
            "(Debian: apt-get install python3-pandas)"
        ) from e
    return pandas


_KINDS = ("slice", "instant", "counter")
_NONE = 0xFFFFFFFF


def read(path):
    """The slices, instants and counters of a trace, as a pandas DataFrame.

    Reads every format the labelprof command reads (Chrome Trace Event JSON, Perfetto
    protobuf, systrace and ftrace text, each plain or gzipped) with the command's own
    readers. One row per event, in time order:

    name, category     the label and its category (None when the file gives none)
    pid, tid, thread   the lane, and its thread name (None when the file gives none)
    ts_ns, dur_ns      start and duration in ns, in the file's clock (labelprof's files:
                       CLOCK_MONOTONIC); a begin never ended lasts to its lane's last event
    depth              nesting on the lane, 0 outermost (counters: -1)
    kind               "slice", "instant" or "counter"
    value, series      a counter's value and series (NaN and None otherwise)

    attrs: "info" (what the file says of itself: labelprof's otherData), "unclosed",
    "unmatched_ends", "skipped". Bad input raises ValueError with the reader's message,
    which names the file and the position.
    """
    pd = _pandas()
    import numpy as np

    d = _lp.read_events(os.fspath(path))
    if d["warnings"]:
        warnings.warn(d["warnings"], RuntimeWarning, stacklevel=2)
    strings = np.array(d["strings"] + [None], dtype=object)

    def strings_of(ids):
        ids = np.frombuffer(ids, dtype=np.uint32).astype(np.int64)
        ids[ids == _NONE] = len(strings) - 1
        return strings[ids]

    lanes = d["lanes"]
    lane = np.frombuffer(d["lane"], dtype=np.uint32).astype(np.int64)
    pid = np.array([x[0] for x in lanes], dtype=np.int64)
    tid = np.array([x[1] for x in lanes], dtype=np.int64)
    thread = strings_of(np.array([x[2] for x in lanes], dtype=np.uint32).tobytes())
    kind = np.frombuffer(d["kind"], dtype=np.uint8)
    value = np.frombuffer(d["value"], dtype=np.float64).copy()
    value[kind != 2] = np.nan
    df = pd.DataFrame(
        {
            "name": strings_of(d["name"]),
            "category": strings_of(d["category"]),
            "pid": pid[lane],
            "tid": tid[lane],
            "thread": thread[lane],
            "ts_ns": np.frombuffer(d["ts"], dtype=np.int64),
            "dur_ns": np.frombuffer(d["dur"], dtype=np.int64),
            "depth": np.frombuffer(d["depth"], dtype=np.int32),
            "kind": np.array(_KINDS, dtype=object)[kind],
            "value": value,
            "series": strings_of(d["series"]),
        }
    )
    df = df.sort_values(["ts_ns", "depth"], kind="stable", ignore_index=True)
    df.attrs.update(
        info=d["info"], unclosed=d["unclosed"], unmatched_ends=d["unmatched_ends"], skipped=d["skipped"]
    )
    return df


def stats(path, by=None):
    """`labelprof stats FILE` as a pandas DataFrame: one row per label (by="thread": per thread and label).

    Columns: [thread,] label, calls, total_ns, self_ns, mean_ns, min_ns, p50_ns, p95_ns,
    p99_ns, max_ns, self_percent; heaviest self time first. attrs["notes"]: the command's
    notes (dropped events, the window the trace covers). Bad input raises ValueError.
    """
    pd = _pandas()
    import io

    args = ["stats", "--format", "csv"]
    if by is not None:
        if by != "thread":
            raise ValueError("labelprof.stats: by=%r: only by='thread' is known" % (by,))
        args += ["--by", "thread"]
    path = os.fspath(path)
    if path != "-" and not os.path.exists(path):
        raise FileNotFoundError(2, "labelprof.stats: no such file", path)
    status, out, err = _lp.command(tuple(args + ["--", path]))
    if status != 0:
        raise ValueError(err.strip() or "labelprof stats failed with status %d" % status)
    str_cols = {"label": str, "thread": str}
    df = pd.read_csv(io.StringIO(out), dtype=str_cols, keep_default_na=False)
    df.attrs["notes"] = err.strip()
    return df
