#!/bin/sh
# vendor_headers.sh: a program built against NVIDIA's own NVTX headers
# (header-only nvtx3) or Intel's own ittnotify (ittnotify.h and its static
# part, which loads the collector), run with the variable that names
# labelprof's library, prints its ranges as a labelprof tree and writes them
# to the timeline. The program is written below; the vendors' files are not
# part of labelprof. It names its thread, leaves a mark, and nests ranges
# (NVTX: "outer" holding "inner" and a domain's "domain_step"; ITT: "outer"
# holding "inner", in domain "mydomain"), 200 times each. Checked: the
# sampled tree on stderr nests them; `labelprof stats` and `folded` of the
# JSON count every range and nest them; the JSON has the mark, the domain
# as the category, and the thread's name.
# Skipped (77) unless LP_NVTX_INCLUDE (a directory holding nvtx3/, e.g.
# NVTX's c/include) or LP_ITTAPI_DIR (an ittapi checkout: include/ and
# src/ittnotify/) is set.
lp=./tools/labelprof
nvtx_so=./annotations/.libs/liblabelprof_nvtx.so
itt_so=./annotations/.libs/liblabelprof_itt.so
cc=${LP_CC:-cc}

if [ -z "${LP_NVTX_INCLUDE:-}" ] && [ -z "${LP_ITTAPI_DIR:-}" ]; then
  echo "note: LP_NVTX_INCLUDE (a directory holding nvtx3/) or LP_ITTAPI_DIR (an ittapi checkout) is not set: skipped"
  exit 77
fi
. "${srcdir:-.}/tests/sh_common.sh"
test_tmpdir vendor_headers_sh

# has FILE REGEX WHAT: FILE has a line matching the extended REGEX.
has() {
  grep -Eq "$2" "$1" && return
  bad "$3: no line matching '$2' in $1:"
  case $1 in *.json) head -c 2000 "$1"; echo ;; *) cat "$1" ;; esac
}

# run NAME LIBVAR LIB: runs $tmp/NAME with LIBVAR=LIB, a profile and a
# timeline, and checks what both say about "outer" and "inner".
run() {
  name=$1
  case $3 in /*) lib=$3 ;; *) lib=$(pwd)/$3 ;; esac
  if ! [ -f "$lib" ]; then
    bad "$name: $lib is not built"
    return
  fi
  env "$2=$lib" LABELPROF_PROFILE=1 LABELPROF_TRACE="$tmp/$name.json" \
    "$tmp/$name" >"$tmp/$name.out" 2>"$tmp/$name.err"
  rc=$?
  if [ "$rc" -ne 0 ] || ! grep -qx 'done' "$tmp/$name.out"; then
    bad "$name: exit status $rc"
    cat "$tmp/$name.out" "$tmp/$name.err"
    return
  fi
  echo "$name: the profile on stderr:"
  cat "$tmp/$name.err"
  has "$tmp/$name.err" '^[0-9.]+% outer$' "$name: the tree's top range"
  has "$tmp/$name.err" '^    [0-9.]+% inner$' "$name: the tree's nested range"
  if ! "$lp" stats "$tmp/$name.json" >"$tmp/$name.stats" \
    || ! "$lp" folded "$tmp/$name.json" >"$tmp/$name.folded"; then
    bad "$name: labelprof cannot read $tmp/$name.json"
    return
  fi
  echo "$name: labelprof stats of the timeline:"
  cat "$tmp/$name.stats"
  has "$tmp/$name.stats" '^outer +200 ' "$name: the timeline's outer ranges"
  has "$tmp/$name.stats" '^inner +200 ' "$name: the timeline's inner ranges"
  has "$tmp/$name.folded" '^outer;inner [0-9]+$' "$name: the timeline's nesting"
  has "$tmp/$name.json" '"ph":"i","cat":"[a-z]+","name":"start"' "$name: the mark"
  has "$tmp/$name.json" '"args":\{"name":"main-thread"\}' "$name: the thread's name"
}

common='#include <stdio.h>
static volatile double sink;
static void work(int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += i * 0.5;
  sink = s;
}'

if [ -n "${LP_NVTX_INCLUDE:-}" ]; then
  cat >"$tmp/nvtx.c" <<EOF
#define _GNU_SOURCE
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>
$common
int main(void) {
  nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "main-thread");
  nvtxDomainHandle_t d = nvtxDomainCreateA("mydomain");
  nvtxEventAttributes_t a = {0};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = "domain_step";
  nvtxMarkA("start");
  for (int it = 0; it < 200; it++) {
    nvtxRangePushA("outer");
    work(200000);
    nvtxRangePushA("inner");
    work(600000);
    nvtxRangePop();
    nvtxDomainRangePushEx(d, &a);
    work(200000);
    nvtxDomainRangePop(d);
    nvtxRangePop();
  }
  puts("done");
  return 0;
}
EOF
  # shellcheck disable=SC2086 # LP_CFLAGS and LP_LDFLAGS are word lists
  if $cc -std=c11 ${LP_CFLAGS:-} -I"$LP_NVTX_INCLUDE" "$tmp/nvtx.c" \
    -o "$tmp/nvtx" ${LP_LDFLAGS:-} -ldl; then
    run nvtx NVTX_INJECTION64_PATH "$nvtx_so"
    has "$tmp/nvtx.err" '^    [0-9.]+% domain_step$' "nvtx: the tree's domain range"
    has "$tmp/nvtx.stats" '^domain_step +200 ' "nvtx: the timeline's domain ranges"
    has "$tmp/nvtx.folded" '^outer;domain_step [0-9]+$' "nvtx: the domain range's nesting"
    has "$tmp/nvtx.json" '"cat":"mydomain","name":"domain_step"' "nvtx: the domain as the category"
  else
    bad "nvtx: the program does not build against $LP_NVTX_INCLUDE"
  fi
fi

if [ -n "${LP_ITTAPI_DIR:-}" ]; then
  cat >"$tmp/itt.c" <<EOF
#include <ittnotify.h>
$common
int main(void) {
  __itt_thread_set_name("main-thread");
  __itt_domain *d = __itt_domain_create("mydomain");
  __itt_string_handle *outer = __itt_string_handle_create("outer");
  __itt_string_handle *inner = __itt_string_handle_create("inner");
  __itt_marker(d, __itt_null, __itt_string_handle_create("start"),
               __itt_marker_scope_thread);
  for (int it = 0; it < 200; it++) {
    __itt_task_begin(d, __itt_null, __itt_null, outer);
    work(200000);
    __itt_task_begin(d, __itt_null, __itt_null, inner);
    work(600000);
    __itt_task_end(d);
    __itt_task_end(d);
  }
  puts("done");
  return 0;
}
EOF
  i=$LP_ITTAPI_DIR
  # shellcheck disable=SC2086
  if $cc -std=gnu11 ${LP_CFLAGS:-} -I"$i/include" -I"$i/src/ittnotify" "$tmp/itt.c" \
    "$i/src/ittnotify/ittnotify_static.c" -o "$tmp/itt" ${LP_LDFLAGS:-} -ldl -lpthread; then
    run itt INTEL_LIBITTNOTIFY64 "$itt_so"
    has "$tmp/itt.json" '"cat":"mydomain","name":"inner"' "itt: the domain as the category"
  else
    bad "itt: the program does not build against $i"
  fi
fi

[ "$fail" -eq 0 ] || { echo "$fail failures"; exit 1; }
echo "all passed"
