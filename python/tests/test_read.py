"""labelprof.read() and labelprof.stats(): every format the command reads, with exact counts.

One recording is written as Chrome JSON, Perfetto and systrace, each also gzipped;
every file must give back the same slices (systrace has no instants or counters).
"""

import gzip
import shutil

import labelprof
import pytest

OUTER, INNER, TICKS, VALUES = 30, 2, 7, 5


def body():
    for i in range(OUTER):
        with labelprof.scope("outer"):
            for _ in range(INNER):
                with labelprof.scope("inner", level="operator"):
                    pass
    for i in range(TICKS):
        labelprof.instant("tick")
    for i in range(VALUES):
        labelprof.counter("level", 100 * i)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("formats")
    paths = {}
    for fmt, name in (("json", "t.json"), ("perfetto", "t.pftrace"), ("systrace", "t.systrace")):
        path = d / name
        with labelprof.trace(path, format=fmt):
            body()
        paths[fmt] = path
        gz = d / (name + ".gz")
        with open(path, "rb") as src, gzip.open(gz, "wb") as dst:
            shutil.copyfileobj(src, dst)
        paths[fmt + ".gz"] = gz
    return paths


@pytest.mark.parametrize("fmt", ["json", "json.gz", "perfetto", "perfetto.gz", "systrace", "systrace.gz"])
def test_read_each_format(traces, fmt):
    df = labelprof.read(traces[fmt])
    for col in ("name", "category", "pid", "tid", "thread", "ts_ns", "dur_ns", "depth", "kind", "value", "series"):
        assert col in df.columns
    slices = df[df.kind == "slice"]
    assert slices.name.value_counts().to_dict() == {"inner": OUTER * INNER, "outer": OUTER}
    assert set(slices[slices.name == "outer"].depth) == {0}
    assert set(slices[slices.name == "inner"].depth) == {1}
    assert (slices.dur_ns >= 0).all() and df.ts_ns.is_monotonic_increasing
    assert slices.tid.nunique() == 1 and slices.pid.nunique() == 1
    assert df.attrs["unclosed"] == 0 and df.attrs["unmatched_ends"] == 0
    # Each inner slice lies inside an outer one.
    outer = slices[slices.name == "outer"]
    starts, ends = list(outer.ts_ns), list(outer.ts_ns + outer.dur_ns)
    for _, r in slices[slices.name == "inner"].iterrows():
        assert any(s <= r.ts_ns and r.ts_ns + r.dur_ns <= e for s, e in zip(starts, ends))
    if fmt.startswith("systrace"):  # ftrace text has no lanes for instants and counters
        assert set(df.kind) == {"slice"}
        return
    assert (df.kind == "instant").sum() == TICKS
    counters = df[df.kind == "counter"]
    assert list(counters.value) == [100.0 * i for i in range(VALUES)]
    assert set(counters.name) == {"level"} and set(counters.depth) == {-1}
    assert set(slices.thread) == {"MainThread"}
    assert set(outer.category) == {"runtime"} and set(slices[slices.name == "inner"].category) == {"operator"}


def test_read_times_are_the_files(traces):
    """JSON and Perfetto hold the same CLOCK_MONOTONIC times for one recording's kind of events."""
    js = labelprof.read(traces["json"])
    assert "otherData.ts_base_ns" in js.attrs["info"]
    base = int(js.attrs["info"]["otherData.ts_base_ns"])
    assert js.ts_ns.min() >= base > 0


def test_read_bad_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":}]}\n')
    with pytest.raises(ValueError) as e:
        labelprof.read(bad)
    msg = str(e.value)
    assert msg.startswith("labelprof: ") and "bad.json:1:" in msg
    cut = tmp_path / "cut.json.gz"
    with gzip.open(cut, "wb") as f:
        f.write(b'{"traceEvents":[' + b'{"ph":"B","name":"a","pid":1,"tid":1,"ts":1},' * 1000)
    data = cut.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut.json.gz"):
        labelprof.read(cut)
    with pytest.raises(FileNotFoundError):
        labelprof.read(tmp_path / "missing.json")
    with pytest.raises(TypeError):
        labelprof.read(42)


def test_read_other_writers(tmp_path):
    """A JSON array of B/E pairs from another writer: pairs, unclosed scopes, stray ends, thread names."""
    path = tmp_path / "other.json"
    path.write_text(
        "["
        '{"ph":"M","name":"thread_name","pid":7,"tid":8,"args":{"name":"worker"}},'
        '{"ph":"B","name":"a","pid":7,"tid":8,"ts":10},'
        '{"ph":"B","name":"b","pid":7,"tid":8,"ts":11},'
        '{"ph":"E","pid":7,"tid":8,"ts":15},'
        '{"ph":"E","pid":7,"tid":8,"ts":20},'
        '{"ph":"E","pid":7,"tid":8,"ts":21},'
        '{"ph":"B","name":"open","pid":7,"tid":9,"ts":30},'
        '{"ph":"i","name":"in","pid":7,"tid":9,"ts":35},'
        '{"ph":"i","name":"at the end","pid":7,"tid":9,"ts":40}'
        "]"
    )
    df = labelprof.read(path)
    s = df[df.kind == "slice"].set_index("name")
    assert s.loc["a", "dur_ns"] == 10_000 and s.loc["b", "dur_ns"] == 4_000
    assert (s.loc["a", "depth"], s.loc["b", "depth"], s.loc["open", "depth"]) == (0, 1, 0)
    assert s.loc["a", "thread"] == "worker" and s.loc["open", "thread"] is None
    assert s.loc["open", "dur_ns"] == 10_000  # to its lane's last event
    assert df.attrs["unclosed"] == 1 and df.attrs["unmatched_ends"] == 1
    # An instant inside the open scope; one at its lane's last event, where the scope is made to end, after it.
    assert df[df.kind == "instant"].set_index("name").depth.to_dict() == {"in": 1, "at the end": 1}


def test_read_empty_trace(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text('{"traceEvents":[]}')
    df = labelprof.read(path)
    assert len(df) == 0 and "dur_ns" in df.columns


def test_stats(traces):
    for fmt in ("json", "perfetto.gz", "systrace"):
        st = labelprof.stats(traces[fmt])
        rows = st.set_index("label")
        assert rows.loc["outer", "calls"] == OUTER and rows.loc["inner", "calls"] == OUTER * INNER
        assert list(st.columns[:4]) == ["label", "calls", "total_ns", "self_ns"]
        assert (rows.loc["outer", "total_ns"] >= rows.loc["inner", "total_ns"]) and st.self_percent.max() <= 100
    by = labelprof.stats(traces["json"], by="thread")
    assert by.columns[0] == "thread" and by.thread.str.contains("MainThread").all()
    assert by.set_index("label").loc["inner", "calls"] == OUTER * INNER


def test_stats_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        labelprof.stats(bad)
    with pytest.raises(FileNotFoundError):
        labelprof.stats(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="by"):
        labelprof.stats(bad, by="label")
