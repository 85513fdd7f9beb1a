/*
 * annot_entry.h: the entry points of liblabelprof that labelprof's NVTX and
 * ITT libraries call for every range (defined in lib/intern.c).
 *
 * They are out of line on purpose: the annotation libraries call them
 * instead of inlining the label machinery of labelprof/impl.h, so that a
 * range costs one call into liblabelprof and the annotation libraries do
 * not depend on the layout of the pseudo-stack.
 */
#ifndef LABELPROF_ANNOT_ENTRY_H
#define LABELPROF_ANNOT_ENTRY_H

#include <labelprof.h>

/* Opens a label for text in category (as lp_impl_site_make() names it): LP_BEGIN of that site. */
LP_EXPORT void lp_impl_annot_push(const char *text, const char *category);
/* Opens a label for site: LP_BEGIN of it. */
LP_EXPORT void lp_impl_annot_begin(const lp_site_t *site);
/* Closes the innermost label: LP_END. */
LP_EXPORT void lp_impl_annot_end(void);

#endif /* LABELPROF_ANNOT_ENTRY_H */
