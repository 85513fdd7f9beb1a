/*
 * top_other.c: a process that carries labelprof's note, pointing at a
 * descriptor of another version (99), as a program built with a later
 * release would. It does not link labelprof. tests/top.sh checks that
 * labelprof top refuses it by name and version. It prints "ready" and
 * waits for the end of its standard input.
 */
#include <stdio.h>

#include "attach_abi.h"

__attribute__((used)) lp_attach_header_t top_other_desc = {
    .magic = LP_ATTACH_MAGIC,
    .version = 99,
    .header_size = sizeof(lp_attach_header_t),
    .lib_version = "9.9.9",
    .ptr_size = sizeof(void *),
};

#if defined(__arm__)
#define NOTE_TYPE "%note"
#else
#define NOTE_TYPE "@note"
#endif
#if UINTPTR_MAX > 0xffffffffu
#define DISTANCE "\t.long 8\n\t.long 0x4c500001\n\t.asciz \"labelprof\"\n\t.balign 4\n1:\t.quad top_other_desc - 1b\n"
#else
#define DISTANCE "\t.long 4\n\t.long 0x4c500001\n\t.asciz \"labelprof\"\n\t.balign 4\n1:\t.long top_other_desc - 1b\n"
#endif
__asm__(".pushsection .note.labelprof,\"a\"," NOTE_TYPE "\n\t.balign 4\n\t.long 10\n" DISTANCE "\t.popsection\n");

int main(void) {
  puts("ready");
  fflush(stdout);
  while (getchar() != EOF) {
  }
  return 0;
}
