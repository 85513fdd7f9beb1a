#!/bin/sh
# bench_nnapi.sh: `labelprof nnapi` on a generated systrace of about
# LP_BENCH_NNAPI_MB megabytes (default 100), beside python3 running a simple
# parse of the same file in the same run: AOSP's two regular expressions per
# line, a stack per thread, durations summed per tag. That is a lower bound
# of what AOSP's parse_systrace.py (which also builds and rewrites the call
# trees) costs, so the ratio is conservative.
# Usage: bench/bench_nnapi.sh [LABELPROF]  (run from the build directory)
lp=${1:-./tools/labelprof}
mb=${LP_BENCH_NNAPI_MB:-100}
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
f=$dir/trace.txt
# a compilation, then executions of 24 mark lines each on three threads of two processes
awk -v mb="$mb" 'BEGIN {
  print "#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION"
  print "#              | |        |      |   ||||       |         |"
  t = 100.0; n = 0; target = mb * 1024 * 1024; bytes = 0
  a = "         app-100     (  100) [001] ...1  "; d = "   HwBinder-201     (  200) [002] ...1  "
  c = "      worker-202     (  200) [003] ...1  "
  line(a, "B|100|[NN_LA_PO]benchmark")
  line(a, "B|100|[NN_LR_PC]ANeuralNetworksCompilation_finish"); line(a, "B|100|[NN_LI_PC]prepareModel")
  line(d, "B|200|HIDL::IDevice::prepareModel_1_2::server"); line(d, "B|200|[NN_LD_PC]SampleDriver::prepareModel")
  line(d, "E|200"); line(d, "E|200"); line(a, "E|100"); line(a, "E|100")
  while (bytes < target) {
    line(a, "B|100|[NN_LA_PE]run_once")
    line(a, "B|100|[NN_LR_PE]ANeuralNetworksExecution_create"); line(a, "E|100")
    line(a, "B|100|[NN_LR_PIO]ANeuralNetworksExecution_setInput"); line(a, "E|100")
    line(a, "B|100|[NN_LR_PIO]ANeuralNetworksExecution_setOutput"); line(a, "E|100")
    line(a, "B|100|[NN_LR_PE]ANeuralNetworksExecution_startCompute")
    line(a, "B|100|[NN_LI_PE]execute"); line(a, "B|100|HIDL::IPreparedModel::execute::client")
    line(d, "B|200|HIDL::IPreparedModel::execute::server"); line(d, "E|200")
    line(a, "E|100"); line(a, "E|100"); line(a, "E|100")
    line(c, "B|200|[NN_LD_PCO]SampleDriver::compute"); line(c, "E|200")
    line(c, "B|200|HIDL::IExecutionCallback::notify::client"); line(c, "E|200")
    line(a, "B|100|[NN_LR_PE]ANeuralNetworksEvent_wait"); line(a, "E|100")
    line(a, "B|100|[NN_LR_PR]ANeuralNetworksExecution_free"); line(a, "E|100")
    line(a, "E|100")
  }
  line(a, "E|100")
}
function line(who, mark) { t += 0.000013; s = sprintf("%s%.6f: tracing_mark_write: %s", who, t, mark); print s; bytes += length(s) + 1 }' >"$f"
size=$(wc -c <"$f")
cat >"$dir/simple.py" <<'PY'
import re, sys
r1 = re.compile(r"^\s*([^ ].{1,15})-(\d+)\s+\(\s*([-0-9]+)\) .* (\d+\.\d+): tracing_mark_write: ([BE].*)$")
r2 = re.compile(r"^\s*([^ ].{1,15})-(\d+) .* (\d+\.\d+): tracing_mark_write: ([BE].*)$")
tag = re.compile(r"B\|\d+\|.*\[([^]]+)\]\[?([^]])\]?")
stacks, totals = {}, {}
for line in open(sys.argv[1]):
    m = r1.match(line) or r2.match(line)
    if not m:
        continue
    tid, ts, mark = m.group(2), float(m.group(m.lastindex - 1)), m.group(m.lastindex)
    st = stacks.setdefault(tid, [])
    if mark[0] == "B":
        t = tag.search(mark)
        st.append((t.group(1) if t else "", ts))
    elif st:
        k, s = st.pop()
        totals[k] = totals.get(k, 0.0) + (ts - s) * 1000
print(len(totals))
PY
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "labelprof nnapi on a generated systrace: $(awk -v s="$size" 'BEGIN { printf "%.1f MB", s / 1048576 }'), $(wc -l <"$f") lines"
echo "CPU: ${cpu:-unknown} ($(nproc) CPUs)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (the machine may be shared: CPU seconds are the fairer figure)"
printf '%-42s %8s %8s %10s %12s\n' "what" "wall s" "CPU s" "MB/CPU-s" "peak RSS MB"
measure() {
  name=$1
  shift
  /usr/bin/time -f '%e %U %S %M' -o "$dir/time" "$@" >/dev/null 2>"$dir/err" || { echo "$name failed:"; cat "$dir/err"; return 1; }
  read -r wall user sys kb <"$dir/time"
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
  awk -v n="$name" -v w="$wall" -v c="$cpu" -v kb="$kb" -v b="$size" \
    'BEGIN { printf "%-42s %8.2f %8.2f %10.1f %12.1f\n", n, w, c, (c > 0 ? b / 1048576 / c : 0), kb / 1024 }'
  echo "$cpu" >"$dir/$(echo "$name" | tr -c 'a-z0-9\n' _)"
}
if [ ! -x /usr/bin/time ]; then echo "(no /usr/bin/time: times not measured)"; exit 0; fi
measure "labelprof nnapi" "$lp" nnapi "$f"
measure "labelprof nnapi --json" "$lp" nnapi --json "$f"
measure "labelprof stats (systrace reader)" "$lp" stats "$f"
if command -v python3 >/dev/null 2>&1; then
  measure "python3: regexes + stacks (simple parse)" python3 "$dir/simple.py" "$f"
  awk -v a="$(cat "$dir/labelprof_nnapi")" -v b="$(cat "$dir/python3__regexes___stacks__simple_parse_")" \
    'BEGIN { if (a > 0) printf "labelprof nnapi uses %.1fx less CPU time than the simple Python parse\n", b / a }'
else
  echo "(python3 not found: no baseline)"
fi
