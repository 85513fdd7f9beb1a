#!/bin/sh
# perfetto_protoc.sh: LABELPROF_TRACE writing Perfetto protobuf, checked with
# protoc --decode against tests/perfetto_subset.proto: the format follows the
# name (.pftrace, .perfetto-trace) unless LABELPROF_TRACE_FORMAT says
# otherwise, the encoding rules hold (clock snapshot with the incremental
# clock, MONOTONIC and BOOTTIME; defaults; interned names; descriptors), and
# every byte decodes. Skipped, with a note, when protoc is not installed.
# With LP_PERFETTO_PROTOS set to a Perfetto source tree (the directory that
# holds protos/perfetto/trace/perfetto_trace.proto), the files written at the
# end and streamed are also decoded with Perfetto's own schema, which must
# name every field in them.
srcdir=${srcdir:-.}
proto=$srcdir/tests/perfetto_subset.proto
if ! command -v protoc >/dev/null 2>&1; then
  echo "SKIP: protoc is not installed (Debian: protobuf-compiler); the Perfetto files are not decoded"
  exit 77
fi
. "$srcdir/tests/sh_common.sh"
test_tmpdir perfetto_protoc
pass=0
ok() { pass=$((pass + 1)); }
decode() { protoc --decode=perfetto.Trace -I "$(dirname "$proto")" "$proto" <"$1"; }
has() { if grep -q "$2" "$1"; then ok; else bad "$3: no '$2' in the decoded trace"; fi; }

LABELPROF_TRACE=$tmp/run.pftrace ./examples/pipeline >/dev/null 2>"$tmp/err" || bad "pipeline failed: $(cat "$tmp/err")"
if decode "$tmp/run.pftrace" >"$tmp/run.txt" 2>"$tmp/derr"; then ok; else bad ".pftrace does not decode: $(cat "$tmp/derr")"; fi
has "$tmp/run.txt" "clock_id: 64" ".pftrace"
has "$tmp/run.txt" "is_incremental: true" ".pftrace"
has "$tmp/run.txt" "clock_id: 6$" ".pftrace"
has "$tmp/run.txt" "clock_id: 3$" ".pftrace"
has "$tmp/run.txt" "timestamp_clock_id: 64" ".pftrace"
has "$tmp/run.txt" "sequence_flags: 1" ".pftrace"
has "$tmp/run.txt" "event_names {" ".pftrace"
has "$tmp/run.txt" "thread_name:" ".pftrace"
has "$tmp/run.txt" "process_name:" ".pftrace"
has "$tmp/run.txt" "name: \"labelprof session\"" ".pftrace"
# Every field is one the subset names: protoc shows any other by its number.
if grep -Eq '^ *[0-9]+[: ]' "$tmp/run.txt"; then bad "fields the subset does not name: $(grep -E '^ *[0-9]+[: ]' "$tmp/run.txt" | head -3)"; else ok; fi
LABELPROF_TRACE=$tmp/run.perfetto-trace ./examples/pipeline >/dev/null 2>&1
if decode "$tmp/run.perfetto-trace" >/dev/null 2>&1 && ! head -c 1 "$tmp/run.perfetto-trace" | grep -q '{'; then ok; else bad ".perfetto-trace is not protobuf"; fi
LABELPROF_TRACE=$tmp/forced.json LABELPROF_TRACE_FORMAT=perfetto ./examples/pipeline >/dev/null 2>&1
if decode "$tmp/forced.json" >/dev/null 2>&1 && ! head -c 1 "$tmp/forced.json" | grep -q '{'; then ok; else bad "LABELPROF_TRACE_FORMAT=perfetto did not win over .json"; fi
LABELPROF_TRACE=$tmp/forced.pftrace LABELPROF_TRACE_FORMAT=json ./examples/pipeline >/dev/null 2>&1
if head -c 1 "$tmp/forced.pftrace" | grep -q '{'; then ok; else bad "LABELPROF_TRACE_FORMAT=json did not win over .pftrace"; fi
LABELPROF_TRACE=$tmp/forced.st LABELPROF_TRACE_FORMAT=systrace ./examples/pipeline >/dev/null 2>&1
if head -n 1 "$tmp/forced.st" | grep -q '^# tracer: nop'; then ok; else bad "LABELPROF_TRACE_FORMAT=systrace did not write systrace text"; fi
LABELPROF_TRACE=$tmp/plain.json ./examples/pipeline >/dev/null 2>&1
if head -c 1 "$tmp/plain.json" | grep -q '{'; then ok; else bad ".json is not JSON"; fi

if [ -n "${LP_PERFETTO_PROTOS:-}" ]; then
  full=protos/perfetto/trace/perfetto_trace.proto
  if [ -f "$LP_PERFETTO_PROTOS/$full" ]; then
    LABELPROF_TRACE=$tmp/stream.pftrace LABELPROF_TRACE_MODE=stream ./examples/pipeline >/dev/null 2>&1 ||
      bad "pipeline failed to stream"
    for f in run.pftrace stream.pftrace; do
      if protoc --decode=perfetto.protos.Trace -I "$LP_PERFETTO_PROTOS" "$full" <"$tmp/$f" >"$tmp/$f.full" 2>"$tmp/derr"; then
        ok
      else
        bad "$f does not decode with Perfetto's schema: $(head -3 "$tmp/derr")"
      fi
      if grep -Eq '^ *[0-9]+[: ]' "$tmp/$f.full"; then
        bad "$f: fields Perfetto's schema does not name: $(grep -E '^ *[0-9]+[: ]' "$tmp/$f.full" | head -3)"
      else
        ok
      fi
      has "$tmp/$f.full" "track_event {" "$f, Perfetto's schema"
    done
  else
    bad "LP_PERFETTO_PROTOS=$LP_PERFETTO_PROTOS has no $full"
  fi
else
  echo "perfetto_protoc: LP_PERFETTO_PROTOS is not set: not decoded with Perfetto's own schema"
fi

echo "perfetto_protoc: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
