/*
 * flamegraph.c: `labelprof flamegraph`: the tree of time of any timeline the
 * command reads, all lanes merged by label text as in `tree` and `folded`,
 * drawn as one self-contained SVG flame graph: the whole trace at the
 * bottom, each label above its parent, as wide as its total time.
 *
 * No external reference: the style and a small script are inline. The
 * script zooms to a frame on click, searches labels (a regular expression)
 * and resets. Each frame has a <title> "label (time, P%)" that viewers show
 * on hover. A label's colour comes from a hash of its text, so it is the
 * same in every graph. Text that does not fit is cut with an ellipsis.
 * Siblings narrower than a pixel are merged into one frame, and their
 * descendants are not drawn, so that the file stays small whatever the
 * trace (a frame is about 200 bytes; the width bounds the frames per level).
 */
#include "config.h"

#include "agg.h"
#include "cmd.h"
#include "reader.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: labelprof flamegraph [--cpu] [--title TEXT] [--strict] [--max-memory SIZE] FILE > graph.svg\n"
    "       labelprof flamegraph --diff [--cpu] [--title TEXT] BASE NEW > diff.svg\n"
    "\n"
    "The tree of time of a timeline or a profile, all threads merged by label,\n"
    "as one self-contained SVG flame graph: each label above its parent, as wide\n"
    "as its total time; click a frame to zoom, Search to highlight labels, Reset\n"
    "zoom. Colours are stable per label; siblings narrower than a pixel are\n"
    "merged. FILE may be JSON, systrace, Perfetto, folded stacks or pprof.\n"
    "\n"
    "  --cpu              CPU time: the cpu sample type of a pprof profile, or a\n"
    "                     folded file's weights; other inputs are refused\n"
    "  --diff BASE NEW    frames sized by NEW and coloured by their change from\n"
    "                     BASE: red grew, blue shrank, white the same, full colour\n"
    "                     at 100% or more (and for frames not in BASE)\n"
    "  --title TEXT       the caption (default: labelprof flame graph, or the\n"
    "                     change of the total with --diff)\n"
    "  --max-memory SIZE  as for stats (labelprof help stats)\n";

typedef struct opts {
  bool cpu, diff, strict;
  const char *title; /* NULL: made up from the graph */
  uint64_t max_memory;
} opts_t;

static const lp_opt_t options[] = {
    LP_OPT_FLAG("--cpu", opts_t, cpu),
    LP_OPT_FLAG("--diff", opts_t, diff),
    LP_OPT_TEXT("--title", "TEXT", opts_t, title),
    LP_OPT_STRICT(opts_t, strict),
    LP_OPT_MAX_MEMORY(opts_t, max_memory),
    LP_OPT_END,
};

static int run(const void *opts, int n, const char *const *files);

const lp_cmd_t lp_cmd_flamegraph = {
    "flamegraph", "the tree of time as an SVG flame graph", usage, options, sizeof(opts_t), NULL,
    {1, -1, "FILE"}, run,
};

#define WIDTH 1200.0 /* the image, px */
#define PAD 10.0     /* left and right margins */
#define FRAME_H 16.0
#define CHAR_W 7.0 /* 12 px monospace */

typedef struct fg {
  FILE *out;
  const lp_agg_t *a;
  const lp_tree_t *t;
  double scale; /* px per ns */
  int64_t total;
  uint32_t depth_max;
  uint64_t frames;
  /* --diff: BASE's labels and merged tree; NULL without it */
  const lp_agg_t *ba;
  const lp_tree_t *bt;
  uint32_t *base_label; /* NEW's label id -> BASE's id of the same text (UINT32_MAX: none) */
} fg_t;

static uint32_t hash_text(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

/* Characters of s, counting a UTF-8 sequence as one. */
static size_t chars(const char *s) {
  size_t n = 0;
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) n += (*c & 0xc0) != 0x80;
  return n;
}

/* The byte length of the first k characters of s. */
static size_t prefix_bytes(const char *s, size_t k) {
  size_t b = 0, n = 0;
  for (; s[b]; b++) {
    if (((unsigned char)s[b] & 0xc0) != 0x80) {
      if (n == k) break;
      n++;
    }
  }
  return b;
}

/*
 * The change of a frame from BASE (base < 0: not in BASE) to NEW as a fill:
 * white when equal, red deepening with growth, blue with shrinking, full at
 * a change of 100% of BASE's time or more (and for a frame new in NEW).
 */
static void diff_fill(int64_t base, int64_t v, unsigned rgb[3]) {
  double r = base < 0 ? 1.0 : base == 0 ? (v > 0 ? 1.0 : 0.0) : (double)(v - base) / (double)base;
  if (r > 1) r = 1;
  if (r < -1) r = -1;
  unsigned fade = (unsigned)(255.0 - 200.0 * (r < 0 ? -r : r) + 0.5);
  rgb[0] = r < 0 ? fade : 255;
  rgb[1] = fade;
  rgb[2] = r > 0 ? fade : 255;
}

/* base: the frame's time in BASE under --diff (-1 when BASE has no such frame); unused without it. */
static void frame(fg_t *g, const char *label, int64_t v, int64_t base, double x, uint32_t depth) {
  double w = (double)v * g->scale, y = (double)(g->depth_max - depth) * FRAME_H;
  char tb[32], db[48] = "";
  uint32_t h = hash_text(label);
  unsigned rgb[3] = {205 + h % 50, 80 + (h >> 8) % 130, 30 + (h >> 16) % 50};
  if (g->bt) {
    diff_fill(base, v, rgb);
    char bb[32];
    if (base < 0)
      snprintf(db, sizeof db, ", not in base");
    else if (base == 0)
      snprintf(db, sizeof db, ", base 0");
    else
      snprintf(db, sizeof db, ", %+.1f%% from %s", 100.0 * (double)(v - base) / (double)base, lp_fmt_ns(base, bb, sizeof bb));
  }
  g->frames++;
  fprintf(g->out, "<g class=\"f\"><title>");
  lp_put_xml(g->out, label, strlen(label));
  fprintf(g->out, " (%s, %.2f%%%s)</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"rgb(%u,%u,%u)\"/>",
          lp_fmt_ns(v, tb, sizeof tb), g->total > 0 ? 100.0 * (double)v / (double)g->total : 0.0, db, x, y, w,
          FRAME_H - 1, rgb[0], rgb[1], rgb[2]);
  /* The full label for the script, the cut one drawn. */
  fprintf(g->out, "<text x=\"%.2f\" y=\"%.1f\" data-l=\"", x + 3, y + FRAME_H - 4);
  lp_put_xml(g->out, label, strlen(label));
  fprintf(g->out, "\">");
  size_t fit = w > 6 ? (size_t)((w - 6) / CHAR_W) : 0, len = chars(label);
  if (len <= fit) {
    lp_put_xml(g->out, label, strlen(label));
  } else if (fit >= 3) {
    lp_put_xml(g->out, label, prefix_bytes(label, fit - 1));
    fputs("\xe2\x80\xa6", g->out); /* … */
  }
  fputs("</text></g>\n", g->out);
}

static void depth_of(fg_t *g, uint32_t k, uint32_t depth) {
  if (depth > g->depth_max) g->depth_max = depth;
  for (uint32_t c = g->t->nodes[k].first_kid; c != UINT32_MAX; c = g->t->nodes[c].next_sib)
    if ((double)g->t->nodes[c].total * g->scale >= 1.0) depth_of(g, c, depth + 1);
}

/*
 * The child of BASE's node bk with the label text of NEW's node c, UINT32_MAX
 * if none (or no BASE): through the label map and BASE's hash of children,
 * so that a frame with many children costs no more per child than one.
 */
static uint32_t base_kid(const fg_t *g, uint32_t bk, uint32_t c) {
  if (!g->bt || bk == UINT32_MAX) return UINT32_MAX;
  uint32_t l = g->base_label[g->t->nodes[c].label];
  return l == UINT32_MAX ? UINT32_MAX : lp_tree_find(g->bt, bk, l);
}

/* NEW's node k above x, BASE's node of the same path bk (UINT32_MAX if none). */
static void draw(fg_t *g, uint32_t k, uint32_t bk, double x, uint32_t depth) {
  int64_t narrow = 0, narrow_base = 0;
  double nx = 0;
  for (uint32_t c = g->t->nodes[k].first_kid; c != UINT32_MAX; c = g->t->nodes[c].next_sib) {
    const lp_tnode_t *n = &g->t->nodes[c];
    if (n->total <= 0) continue;
    uint32_t bc = base_kid(g, bk, c);
    int64_t base = bc == UINT32_MAX ? -1 : g->bt->nodes[bc].total;
    if ((double)n->total * g->scale < 1.0) { /* merged with its narrow neighbours */
      if (!narrow) nx = x;
      narrow += n->total;
      narrow_base += base > 0 ? base : 0;
    } else {
      if (narrow) {
        frame(g, "(narrow frames merged)", narrow, narrow_base, nx, depth);
        narrow = narrow_base = 0;
      }
      frame(g, g->a->labels[n->label], n->total, base, x, depth);
      draw(g, c, bc, x, depth + 1);
    }
    x += (double)n->total * g->scale;
  }
  if (narrow) frame(g, "(narrow frames merged)", narrow, narrow_base, nx, depth);
}

static const char script[] =
    "<script type=\"text/ecmascript\"><![CDATA[\n"
    "var W=%g,P=%g,CW=%g,fr=[];\n"
    "function init(){var g=document.getElementsByClassName('f');for(var i=0;i<g.length;i++){var r=g[i].getElementsByTagName('rect')[0];\n"
    " fr.push({g:g[i],r:r,t:g[i].getElementsByTagName('text')[0],x:+r.getAttribute('x'),w:+r.getAttribute('width'),y:+r.getAttribute('y')});\n"
    " g[i].onclick=(function(f){return function(){zoom(f);};})(fr[fr.length-1]);}}\n"
    "function fit(f,w){var l=f.t.getAttribute('data-l'),n=Math.floor((w-6)/CW);f.t.textContent=l.length<=n?l:(n>=3?l.substring(0,n-1)+'\\u2026':'');}\n"
    "function place(f,x,w){f.r.setAttribute('x',x);f.r.setAttribute('width',Math.max(w,0));f.t.setAttribute('x',x+3);fit(f,w);}\n"
    "function zoom(z){var s=(W-2*P)/z.w;for(var i=0;i<fr.length;i++){var f=fr[i];\n"
    " var inside=f.x>=z.x-1e-6&&f.x+f.w<=z.x+z.w+1e-6,below=f.y>z.y&&f.x<=z.x+1e-6&&f.x+f.w>=z.x+z.w-1e-6;\n"
    " if(inside&&f.y<=z.y){f.g.style.display='';place(f,P+(f.x-z.x)*s,f.w*s);}\n"
    " else if(below){f.g.style.display='';f.g.style.opacity='0.6';place(f,P,W-2*P);}else{f.g.style.display='none';}}\n"
    " document.getElementById('reset').style.display='';}\n"
    "function reset(){for(var i=0;i<fr.length;i++){var f=fr[i];f.g.style.display='';f.g.style.opacity='';place(f,f.x,f.w);}\n"
    " document.getElementById('reset').style.display='none';}\n"
    "function search(){var q=prompt('Search labels (a regular expression)','');if(q===null)return;var re;try{re=new RegExp(q);}catch(e){return;}\n"
    " var n=0;for(var i=0;i<fr.length;i++){var f=fr[i],m=q!==''&&re.test(f.t.getAttribute('data-l'));\n"
    "  if(m){if(!f.r.hasAttribute('data-fill'))f.r.setAttribute('data-fill',f.r.getAttribute('fill'));f.r.setAttribute('fill','rgb(230,0,230)');n++;}\n"
    "  else if(f.r.hasAttribute('data-fill')){f.r.setAttribute('fill',f.r.getAttribute('data-fill'));f.r.removeAttribute('data-fill');}}\n"
    " document.getElementById('matched').textContent=q===''?'':n+' frames match';}\n"
    "window.addEventListener('load',init);\n"
    "]]></script>\n";

/* One input's merged tree: 0, or LP_EXIT_BAD after a message. */
static int read_tree(const char *file, bool strict, bool cpu, lp_agg_t *a, lp_tree_t *m) {
  unsigned before = lp_read_cpu_files;
  if (lp_agg_read_one(a, file, strict) != 0) return LP_EXIT_BAD;
  if (cpu && lp_read_cpu_files == before) {
    lp_agg_free(a);
    return lp_no_cpu(file);
  }
  if (lp_agg_merged_tree(a, m) != 0) {
    fprintf(stderr, "labelprof: out of memory\n");
    lp_agg_free(a);
    return LP_EXIT_BAD;
  }
  return 0;
}

static int run(const void *opts, int n, const char *const *files) {
  const opts_t *o = opts;
  const char *cmd = "flamegraph", *title = o->title;
  bool strict = o->strict, cpu = o->cpu, diff = o->diff;
  lp_agg_max_memory = o->max_memory;
  if (diff && n != 2) return lp_usage_error(cmd, "--diff takes two files: BASE and NEW");
  if (!diff && n != 1) return lp_usage_error(cmd, "one trace file only (two with --diff)");
  lp_read_cpu = cpu;
  lp_agg_t a, ba;
  lp_tree_t m, bm;
  const char *file = files[diff ? 1 : 0];
  if (diff && read_tree(files[0], strict, cpu, &ba, &bm) != 0) return LP_EXIT_BAD;
  if (read_tree(file, strict, cpu, &a, &m) != 0) {
    if (diff) {
      lp_tree_free(&bm);
      lp_agg_free(&ba);
    }
    return LP_EXIT_BAD;
  }
  char tb[160];
  if (!title && diff) {
    int64_t b0 = bm.nodes[0].total, n0 = m.nodes[0].total;
    char x[32], y[32];
    snprintf(tb, sizeof tb, "%s change from base: %s to %s (%s%.1f%%); red grew, blue shrank", cpu ? "CPU time" : "time",
             lp_fmt_ns(b0, x, sizeof x), lp_fmt_ns(n0, y, sizeof y), n0 >= b0 ? "+" : "",
             b0 > 0 ? 100.0 * (double)(n0 - b0) / (double)b0 : 0.0);
    title = tb;
  } else if (!title) {
    title = cpu ? "labelprof flame graph (CPU time)" : "labelprof flame graph";
  }
  fg_t g = {stdout, &a, &m, 0, m.nodes[0].total, 0, 0, diff ? &ba : NULL, diff ? &bm : NULL, NULL};
  if (diff) {
    if (!(g.base_label = malloc(((size_t)a.nlabels + 1) * sizeof *g.base_label))) {
      fprintf(stderr, "labelprof: out of memory\n");
      lp_tree_free(&m);
      lp_agg_free(&a);
      lp_tree_free(&bm);
      lp_agg_free(&ba);
      return LP_EXIT_BAD;
    }
    for (uint32_t i = 0; i < a.nlabels; i++) g.base_label[i] = lp_agg_label(&ba, a.labels[i]);
  }
  g.scale = g.total > 0 ? (WIDTH - 2 * PAD) / (double)g.total : 0;
  depth_of(&g, 0, 0);
  double height = (double)(g.depth_max + 1) * FRAME_H + 40;
  printf("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
         "<svg version=\"1.1\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g %g\" xmlns=\"http://www.w3.org/2000/svg\">\n",
         WIDTH, height, WIDTH, height);
  printf("<style>text{font-family:monospace;font-size:12px;fill:#000}.f:hover rect{stroke:#000;stroke-width:0.5}"
         ".f{cursor:pointer}.b{cursor:pointer;fill:#248}</style>\n");
  printf(script, WIDTH, PAD, CHAR_W);
  printf("<rect x=\"0\" y=\"0\" width=\"%g\" height=\"%g\" fill=\"#f8f8f0\"/>\n", WIDTH, height);
  printf("<text x=\"%g\" y=\"%g\">", PAD, height - 22);
  lp_put_xml(stdout, title, strlen(title));
  printf("</text>\n<text class=\"b\" x=\"%g\" y=\"%g\" onclick=\"search()\">Search</text>\n", WIDTH - 120, height - 22);
  printf("<text id=\"reset\" class=\"b\" x=\"%g\" y=\"%g\" onclick=\"reset()\" style=\"display:none\">Reset zoom</text>\n",
         WIDTH - 250, height - 22);
  printf("<text id=\"matched\" x=\"%g\" y=\"%g\"></text>\n", WIDTH - 400, height - 6);
  /* The frames: the root at the bottom, above the captions. */
  if (g.total > 0) {
    frame(&g, "all", g.total, diff ? bm.nodes[0].total : -1, PAD, 0);
    draw(&g, 0, diff ? 0 : UINT32_MAX, PAD, 1);
  }
  printf("</svg>\n");
  int status = LP_EXIT_OK;
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "labelprof: cannot write the flame graph to standard output\n");
    status = LP_EXIT_BAD;
  }
  free(g.base_label);
  lp_tree_free(&m);
  lp_agg_free(&a);
  if (diff) {
    lp_tree_free(&bm);
    lp_agg_free(&ba);
  }
  return status;
}
