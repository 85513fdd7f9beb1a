/*
 * record_script.h: one script of labels, compiled by each unit that
 * includes it its own way of reaching the recorder (test_trace.c: the
 * build's own; script_inline.c: LABELPROF_INLINE_RECORDING;
 * script_plain.c: plain calls). The unit defines RECORD_SCRIPT, the name
 * of the function that runs it, first.
 *
 * It goes through every path of the recording protocol: recorded scopes
 * and manual pairs, a level not recorded, instants and counters, LP_END of
 * a recorded scope and with nothing open, scopes deeper than the frames,
 * and a longjmp out of recorded scopes.
 */
#include <labelprof.h>
#include <setjmp.h>

static jmp_buf record_script_jump;

static void record_script_deep(int n) {
  LP_SCOPE("deep");
  if (n > 0) record_script_deep(n - 1);
}

static void record_script_jumps(int n) {
  LP_SCOPE("jumped over");
  if (n < 0) return; /* never: but the recursion must have a way out that returns */
  if (n == 0) longjmp(record_script_jump, 1);
  record_script_jumps(n - 1);
}

void RECORD_SCRIPT(void);
void RECORD_SCRIPT(void) {
  for (int i = 0; i < 3; i++) {
    LP_SCOPE("outer");
    {
      LP_SCOPE_L(LP_LEVEL_OPERATOR, "operator");
      LP_SCOPE_L(LP_LEVEL_DEBUG, "not recorded");
      LP_INSTANT("tick");
      LP_COUNTER("count", i);
    }
    LP_BEGIN("manual");
    LP_INSTANT("inside manual");
    LP_END();
  }
  {
    LP_SCOPE("ended by LP_END");
    LP_END();
  }
  LP_END(); /* nothing open */
  record_script_deep(70);
  {
    LP_SCOPE("catches");
    if (setjmp(record_script_jump) == 0) record_script_jumps(4);
  }
}
