# objdump_fn.sh: sourced by tests/leaf_regs.sh and bench/inline.sh.
# fn_pushes OBJECT FUNCTION: the callee-saved registers FUNCTION pushes
# (x86-64) or stores in pairs (aarch64). fn_size OBJECT FUNCTION: its bytes.
fn_pushes() {
  objdump -d "$1" | awk -v f="<$2>:" '
    index($0, f) { on = 1; next }
    on && /^$/ { exit }
    on && /push +%r(bx|bp|12|13|14|15)/ { n++ }
    on && /stp[ \t]+x(19|2[0-8])/ { n += 2 }
    END { print n + 0 }'
}
fn_size() { echo $(( 0x$(nm -S "$1" | awk -v f="$2" '$4 == f { print $2 }') )); }
