/* `drkc report` (tools/report.h): the tuner's JSON-lines logs as one self-contained HTML page.
 *
 * Reads the events drk_search_tune writes (search/tune.h: start, trial, end, ...) and the
 * model-level ones drkc tune adds around them (model_start, kernel_summary, model_end), with
 * the search's own reader (search/json.h): flat objects, one per line. Lines of the earlier
 * drkc tune log (no "event"; kernel_ms, best_ms, wl) are read as trials too. Unknown events
 * are counted and skipped (a newer log still renders); a line that is not such an object is
 * an error naming the file and the line (exit 2), since a report of half a log would mislead.
 *
 * The page has no network references: inline CSS, the tables written here (every string
 * HTML-escaped), and an inline script that draws the charts as SVG from a JSON block (every
 * string escaped for a <script> element). After drawing, the script writes what it plotted
 * into <body data-*> (the test reads them back through headless Chromium). Unknown values
 * are null in the data and "n/a" on the page. */
#include "tools/report.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/json.h"
#include "tools/drkc.h"

static const char report_help[] =
    "usage: drkc report LOG... [-o REPORT.html] [--title=TEXT]\n"
    "\n"
    "Writes one self-contained HTML page (no network: inline CSS, SVG drawn by an inline\n"
    "script) from the JSON-lines event logs of `drkc tune --log=FILE` (several logs: e.g. the\n"
    "same model tuned by different policies, compared on one plot per kernel).\n"
    "\n"
    "  -o FILE        the page (default: stdout)\n"
    "  --title=TEXT   the page's title (default: the model's name)\n"
    "\n"
    "Exit status: 0 written, 1 a log or the output could not be opened, 2 usage or a\n"
    "malformed log line (FILE:LINE:COL: error: ...). docs/tuning.md describes the page.\n";

/* ---- what the logs say ---- */
typedef struct rtrial {
  double x, time_us, reward, best_reward, best_time_us;
  int valid; /* -1 unknown */
} rtrial_t;

typedef struct series {
  int file;
  const char *kernel, *workload, *policy, *description;
  double budget;
  rtrial_t *t;
  int n, cap;
  bool open;
  bool has_end;
  double end_best_us, end_heur_us;
  int pruned, fallbacks, remeasures;
} series_t;

typedef struct ksum {
  int file;
  const char *kernel, *workload, *kind, *precision, *best_point;
  double share, heuristic_us, best_us, roofline_us, trials, invalid, gen_s, tune_s;
  int tuned;
} ksum_t;

typedef struct model {
  int file;
  const char *model, *target, *gpu, *policy;
  double budget_s, before_us, end_before_us, after_us, t_s;
  int nvml, checked;
  bool has_start, has_end;
} model_t;

typedef struct report {
  const char **files;
  int n_files;
  int *legacy_lines; /* per file */
  char **strs;       /* every kept string, freed at the end */
  int n_strs, cap_strs;
  series_t *series;
  int n_series, cap_series;
  ksum_t *sums;
  int n_sums, cap_sums;
  model_t *models;
  int n_models, cap_models;
  long trials, events, other_events;
  long n_stage, n_pruned, n_fallback, n_diagnostic, n_remeasure, n_resume;
} report_t;

static bool grow(void **p, int *cap, int n, size_t elem) {
  if (n < *cap) return true;
  int c = *cap ? *cap * 2 : 16;
  void *q = realloc(*p, (size_t)c * elem);
  if (!q) return false;
  *p = q;
  *cap = c;
  return true;
}
#define GROW(arr, n, cap) grow((void **)&(arr), &(cap), (n), sizeof *(arr))

static void oom(void) {
  fprintf(stderr, "drkc report: error: out of memory\n");
  exit(1);
}

static const char *keep(report_t *r, const char *s) {
  if (!s) return NULL;
  if (!GROW(r->strs, r->n_strs, r->cap_strs)) oom();
  char *c = strdup(s);
  if (!c) oom();
  r->strs[r->n_strs++] = c;
  return c;
}

static const char *jstr(const drk_json_object_t *o, const char *k) {
  const drk_json_field_t *f = drk_json_get(o, k);
  return f && f->kind == DRK_JSON_STR ? f->str : NULL;
}
static double jnum(const drk_json_object_t *o, const char *k) {
  const drk_json_field_t *f = drk_json_get(o, k);
  return f && f->kind == DRK_JSON_NUM ? f->num : NAN;
}
static int jbool(const drk_json_object_t *o, const char *k) {
  const drk_json_field_t *f = drk_json_get(o, k);
  return f && f->kind == DRK_JSON_BOOL ? f->b : -1;
}
static bool same(const char *a, const char *b) { return !strcmp(a ? a : "", b ? b : ""); }

/* The open series of (kernel, workload) in this file, or NULL. */
static series_t *open_series(report_t *r, int file, const char *kernel, const char *workload) {
  for (int i = r->n_series - 1; i >= 0; i--) {
    series_t *s = &r->series[i];
    if (s->open && s->file == file && same(s->kernel, kernel) && same(s->workload, workload)) return s;
  }
  return NULL;
}

static series_t *new_series(report_t *r, int file, const char *kernel, const char *workload, const char *policy) {
  series_t *old = open_series(r, file, kernel, workload);
  if (old) old->open = false;
  if (!GROW(r->series, r->n_series, r->cap_series)) oom();
  series_t *s = &r->series[r->n_series++];
  memset(s, 0, sizeof *s);
  s->file = file;
  s->kernel = keep(r, kernel);
  s->workload = keep(r, workload);
  s->policy = keep(r, policy);
  s->budget = NAN;
  s->end_best_us = s->end_heur_us = NAN;
  s->open = true;
  return s;
}

static void add_trial(report_t *r, int file, const char *kernel, const char *workload, const char *policy,
                      const rtrial_t *t) {
  series_t *s = open_series(r, file, kernel, workload);
  if (s && policy && s->policy && strcmp(policy, s->policy)) s = NULL; /* another policy: another run */
  if (!s) s = new_series(r, file, kernel, workload, policy);
  if (!s->policy && policy) s->policy = keep(r, policy);
  if (!GROW(s->t, s->n, s->cap)) oom();
  rtrial_t u = *t;
  if (!isfinite(u.x)) u.x = s->n;
  s->t[s->n++] = u;
  r->trials++;
}

static model_t *model_for(report_t *r, int file, bool starting) {
  /* model_end (or a second model_start) pairs with the file's last model_start */
  for (int i = r->n_models - 1; i >= 0; i--)
    if (r->models[i].file == file) {
      if (starting && r->models[i].has_start) break;
      if (!starting && r->models[i].has_end) break;
      return &r->models[i];
    }
  if (!GROW(r->models, r->n_models, r->cap_models)) oom();
  model_t *m = &r->models[r->n_models++];
  memset(m, 0, sizeof *m);
  m->file = file;
  m->budget_s = m->before_us = m->end_before_us = m->after_us = m->t_s = NAN;
  m->nvml = m->checked = -1;
  return m;
}

static void take_event(report_t *r, int file, const drk_json_object_t *o) {
  const char *ev = jstr(o, "event");
  const char *kernel = jstr(o, "kernel"), *workload = jstr(o, "workload");
  r->events++;
  if (!ev) { /* the earlier drkc tune log: one line per trial, milliseconds */
    rtrial_t t = {jnum(o, "trial"), jnum(o, "kernel_ms") * 1e3, NAN, NAN, jnum(o, "best_ms") * 1e3, jbool(o, "valid")};
    if (!(t.time_us > 0)) t.time_us = NAN;
    if (!(t.best_time_us > 0)) t.best_time_us = NAN;
    add_trial(r, file, kernel, jstr(o, "wl"), NULL, &t);
    r->legacy_lines[file]++;
  } else if (!strcmp(ev, "trial")) {
    rtrial_t t = {jnum(o, "trial"),       jnum(o, "time_us"),      jnum(o, "reward"),
                  jnum(o, "best_reward"), jnum(o, "best_time_us"), jbool(o, "valid")};
    add_trial(r, file, kernel, workload, jstr(o, "policy"), &t);
  } else if (!strcmp(ev, "start")) {
    series_t *s = new_series(r, file, kernel, workload, jstr(o, "policy"));
    s->budget = jnum(o, "budget");
    s->description = keep(r, jstr(o, "description"));
  } else if (!strcmp(ev, "end")) {
    series_t *s = open_series(r, file, kernel, workload);
    if (!s) s = new_series(r, file, kernel, workload, NULL);
    s->has_end = true;
    s->end_best_us = jnum(o, "best_time_us");
    s->end_heur_us = jnum(o, "heuristic_time_us");
    s->open = false;
  } else if (!strcmp(ev, "pruned") || !strcmp(ev, "fallback") || !strcmp(ev, "remeasure")) {
    series_t *s = open_series(r, file, kernel, workload);
    if (ev[0] == 'p') r->n_pruned++, s ? s->pruned++ : 0;
    else if (ev[0] == 'f') r->n_fallback++, s ? s->fallbacks++ : 0;
    else r->n_remeasure++, s ? s->remeasures++ : 0;
  } else if (!strcmp(ev, "stage")) r->n_stage++;
  else if (!strcmp(ev, "diagnostic")) r->n_diagnostic++;
  else if (!strcmp(ev, "resume")) r->n_resume++;
  else if (!strcmp(ev, "kernel_summary")) {
    if (!GROW(r->sums, r->n_sums, r->cap_sums)) oom();
    ksum_t *k = &r->sums[r->n_sums++];
    k->file = file;
    k->kernel = keep(r, kernel);
    k->workload = keep(r, workload);
    k->kind = keep(r, jstr(o, "kind"));
    k->precision = keep(r, jstr(o, "precision"));
    k->best_point = keep(r, jstr(o, "best_point"));
    k->share = jnum(o, "share");
    k->heuristic_us = jnum(o, "heuristic_us");
    k->best_us = jnum(o, "best_us");
    k->roofline_us = jnum(o, "roofline_us");
    k->trials = jnum(o, "trials");
    k->invalid = jnum(o, "invalid");
    k->gen_s = jnum(o, "gen_s");
    k->tune_s = jnum(o, "tune_s");
    k->tuned = jbool(o, "tuned");
  } else if (!strcmp(ev, "model_start")) {
    model_t *m = model_for(r, file, true);
    m->has_start = true;
    m->model = keep(r, jstr(o, "model"));
    m->target = keep(r, jstr(o, "target"));
    m->gpu = keep(r, jstr(o, "gpu"));
    m->policy = keep(r, jstr(o, "policy"));
    m->budget_s = jnum(o, "budget_s");
    m->nvml = jbool(o, "nvml");
    m->before_us = jnum(o, "before_us");
  } else if (!strcmp(ev, "model_end")) {
    model_t *m = model_for(r, file, false);
    m->has_end = true;
    m->end_before_us = jnum(o, "before_us");
    m->after_us = jnum(o, "after_us");
    m->checked = jbool(o, "checked");
    m->t_s = jnum(o, "t_s");
  } else r->other_events++;
}

/* Reads one log. 0, or the exit status of a failure (reported). */
static int read_log(report_t *r, int file) {
  const char *path = r->files[file];
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "drkc report: error: cannot open %s: %s\n", path, strerror(errno));
    return 1;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int lineno = 0, rc = 0;
  while ((len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    if ((size_t)len != strlen(line)) {
      fprintf(stderr, "%s:%d: error: a NUL byte in the line (not a JSON-lines log?)\n", path, lineno);
      rc = 2;
      break;
    }
    const char *p = line;
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
    if (!*p) continue;
    drk_json_object_t o;
    char err[600];
    if (!drk_json_parse_object(line, &o, err, sizeof err)) {
      int col = 0, used = 0;
      if (sscanf(err, "column %d: %n", &col, &used) >= 1 && used > 0)
        fprintf(stderr, "%s:%d:%d: error: malformed log line: %s\n", path, lineno, col, err + used);
      else fprintf(stderr, "%s:%d: error: malformed log line: %s\n", path, lineno, err);
      rc = 2;
      break;
    }
    const drk_json_field_t *ev = drk_json_get(&o, "event");
    if ((ev && ev->kind != DRK_JSON_STR) || (!ev && !drk_json_get(&o, "trial"))) {
      fprintf(stderr, "%s:%d: error: malformed log line: %s\n", path, lineno,
              ev ? "\"event\" is not a string" : "no \"event\" field");
      drk_json_object_free(&o);
      rc = 2;
      break;
    }
    take_event(r, file, &o);
    drk_json_object_free(&o);
  }
  if (!rc && ferror(f)) {
    fprintf(stderr, "drkc report: error: reading %s: %s\n", path, strerror(errno));
    rc = 1;
  }
  free(line);
  fclose(f);
  return rc;
}

/* ---- writing ---- */
static void html(FILE *o, const char *s) {
  if (!s) {
    fputs("n/a", o);
    return;
  }
  for (; *s; s++) switch (*s) {
      case '&': fputs("&amp;", o); break;
      case '<': fputs("&lt;", o); break;
      case '>': fputs("&gt;", o); break;
      case '"': fputs("&quot;", o); break;
      case '\'': fputs("&#39;", o); break;
      default: fputc(*s, o);
    }
}

/* A JSON string that is safe inside <script>: no '<', '>', '&' (no "</script>", no "<!--"),
 * no U+2028/2029 (line terminators to older JavaScript). */
static void jsonstr(FILE *o, const char *s) {
  if (!s) {
    fputs("null", o);
    return;
  }
  fputc('"', o);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(o, "\\%c", *p);
    else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&') fprintf(o, "\\u%04x", *p);
    else if (p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
      fprintf(o, "\\u%04x", p[2] == 0xa8 ? 0x2028 : 0x2029);
      p += 2;
    } else fputc(*p, o);
  }
  fputc('"', o);
}

static void jsonnum(FILE *o, double x) {
  if (!isfinite(x)) fputs("null", o);
  else fprintf(o, "%.9g", x);
}

/* A number cell: "n/a" when unknown. */
static void cell_num(FILE *o, double x, const char *fmt) {
  fputs("<td class=n>", o);
  if (isfinite(x)) fprintf(o, fmt, x);
  else fputs("n/a", o);
  fputs("</td>", o);
}
static void cell_str(FILE *o, const char *s) {
  fputs("<td>", o);
  html(o, s && *s ? s : NULL);
  fputs("</td>", o);
}
static void cell_bool(FILE *o, int b, const char *yes, const char *no) {
  fprintf(o, "<td>%s</td>", b < 0 ? "n/a" : b ? yes : no);
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* The time of the series' winner: the end event's, else the last trial's best, else the
 * fastest valid trial. */
static double series_final_best(const series_t *s) {
  if (isfinite(s->end_best_us) && s->end_best_us > 0) return s->end_best_us;
  for (int i = s->n - 1; i >= 0; i--)
    if (isfinite(s->t[i].best_time_us) && s->t[i].best_time_us > 0) return s->t[i].best_time_us;
  double b = NAN;
  for (int i = 0; i < s->n; i++)
    if (s->t[i].valid != 0 && s->t[i].time_us > 0 && !(s->t[i].time_us >= b)) b = s->t[i].time_us;
  return b;
}

/* Share of the series' trials that are valid and within 5% of the final best time. */
static double series_convergence(const series_t *s, int *out_near) {
  double best = series_final_best(s);
  int near = 0;
  *out_near = 0;
  if (!s->n || !isfinite(best)) return NAN;
  for (int i = 0; i < s->n; i++)
    if (s->t[i].valid != 0 && s->t[i].time_us > 0 && s->t[i].time_us <= 1.05 * best) near++;
  *out_near = near;
  return (double)near / s->n;
}

static double series_heuristic(const series_t *s) {
  if (isfinite(s->end_heur_us) && s->end_heur_us > 0) return s->end_heur_us;
  return s->n && s->t[0].valid != 0 && s->t[0].time_us > 0 ? s->t[0].time_us : NAN;
}

/* Kernel identities in page order: by the largest share a summary gives, then first seen. */
typedef struct kid {
  const char *kernel, *workload;
  double share;
  int first;
} kid_t;

static int kid_cmp(const void *a, const void *b) {
  const kid_t *x = a, *y = b;
  double sx = isfinite(x->share) ? x->share : -1, sy = isfinite(y->share) ? y->share : -1;
  if (sx != sy) return sx > sy ? -1 : 1;
  return x->first - y->first;
}

static int kernel_ids(const report_t *r, kid_t **out) {
  int n = 0, cap = 0;
  kid_t *k = NULL;
  for (int pass = 0; pass < 2; pass++) {
    int m = pass ? r->n_series : r->n_sums;
    for (int i = 0; i < m; i++) {
      const char *kn = pass ? r->series[i].kernel : r->sums[i].kernel;
      const char *wl = pass ? r->series[i].workload : r->sums[i].workload;
      double share = pass ? NAN : r->sums[i].share;
      int j = 0;
      for (; j < n; j++)
        if (same(k[j].kernel, kn) && (same(k[j].workload, wl) || !wl || !k[j].workload)) break;
      if (j == n) {
        if (!GROW(k, n, cap)) oom();
        k[n++] = (kid_t){kn, wl, share, pass * 1000000 + i};
      } else {
        if (!k[j].workload) k[j].workload = wl;
        if (isfinite(share) && !(k[j].share >= share)) k[j].share = share;
      }
    }
  }
  if (n > 1) qsort(k, (size_t)n, sizeof *k, kid_cmp);
  *out = k;
  return n;
}

static bool kid_has(const kid_t *k, const char *kernel, const char *workload) {
  return same(k->kernel, kernel) && (same(k->workload, workload) || !workload || !k->workload);
}

static const char page_css[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222;background:#fafafa;"
    "max-width:1400px}\n"
    "h1{font-size:1.5em;margin-bottom:4px}h2{font-size:1.2em;margin-top:32px;border-bottom:1px solid #ccc}\n"
    "h3{font-size:1em;margin:4px 0}\n"
    "table{border-collapse:collapse;font-size:.85em;background:#fff}\n"
    "th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}\n"
    "th{background:#f0f0f0}td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    ".sub{color:#666;font-size:.85em}.mono{font-family:ui-monospace,monospace;font-size:.85em}\n"
    ".wide{overflow-x:auto}.cards{display:flex;flex-wrap:wrap;gap:12px}\n"
    ".card{background:#fff;border:1px solid #ddd;border-radius:4px;padding:8px}\n"
    ".big{font-size:1.6em;font-weight:600}\n"
    ".bar{display:inline-block;height:9px;background:#4a7fb5;vertical-align:middle}\n"
    "svg text{font-size:10px;fill:#333}svg .ax{stroke:#888;stroke-width:1}svg .grid{stroke:#eee}\n"
    "#drk-status{color:#a00}\n";

/* The charts: drawn from the JSON block with DOM calls only (textContent for every string). */
static const char page_js[] =
    "(function(){\n"
    "var body=document.body,status=document.getElementById('drk-status');\n"
    "try{\n"
    "var D=JSON.parse(document.getElementById('drk-data').textContent);\n"
    "var tmp=document.createElement('div');tmp.innerHTML='<svg></svg>';var NS=tmp.firstChild.namespaceURI;\n"
    "var C=['#1f77b4','#d62728','#2ca02c','#ff7f0e','#9467bd','#8c564b','#e377c2','#7f7f7f','#bcbd22','#17becf'];\n"
    "var P={'fp32':'#3b6ea5','tf32':'#7fb2e0','bf16':'#8e5fb5','fp16':'#3a9a4a','fp8':'#e6550d','n/a':'#aaa'};\n"
    "var N={charts:0,reward:0,best_reward:0,best_time:0,series:0,bars:0,segments:0};\n"
    "function el(n,a,p){var e=document.createElementNS(NS,n);for(var k in a)e.setAttribute(k,a[k]);if(p)p.appendChild(e);"
    "return e;}\n"
    "function tx(p,x,y,s,a){a=a||{};a.x=x;a.y=y;var t=el('text',a,p);t.textContent=s;return t;}\n"
    "function tip(e,s){el('title',{},e).textContent=s;}\n"
    "function fin(v){return typeof v==='number'&&isFinite(v);}\n"
    "function fmt(v){if(!fin(v))return 'n/a';var a=Math.abs(v);if(a!==0&&(a>=1e6||a<1e-3))return v.toExponential(2);"
    "return String(+v.toPrecision(4));}\n"
    "function nice(lo,hi,n){if(!(hi>lo)){hi=lo+1;lo=lo-1;}var r=hi-lo;if(!(r>0)||!isFinite(r))return [];\n"
    " var st=Math.pow(10,Math.floor(Math.log10(r/n)));var e=r/n/st;st*=e>5?10:e>2?5:e>1?2:1;var t=[];if(!(st>0))return t;\n"
    " for(var v=Math.ceil(lo/st)*st,i=0;v<=hi+st*1e-9&&i<40;v+=st,i++)t.push(+v.toPrecision(12));return t;}\n"
    "function box(host,title,w,h){var d=document.createElement('div');d.className='card';var h3=document.createElement('h3');"
    "h3.textContent=title;d.appendChild(h3);host.appendChild(d);var s=el('svg',{width:w,height:h,viewBox:'0 0 '+w+' '+h},d);"
    "N.charts++;return s;}\n"
    /* plot(host,{title,xl,yl,series:[{name,color,mode:'dots'|'step',pts:[[x,y,valid]],n:'reward'}],hl:[{y,name,color}]}) */
    "function plot(host,o){var W=470,H=270,L=58,R=12,T=12,B=40;var s=box(host,o.title,W,H);var xs=[],ys=[],np=0;\n"
    " o.series.forEach(function(q){q.pts=q.pts.filter(function(p){return fin(p[0])&&fin(p[1]);});"
    "q.pts.forEach(function(p){xs.push(p[0]);ys.push(p[1]);});});\n"
    " (o.hl||[]).forEach(function(h){if(fin(h.y))ys.push(h.y);});\n"
    " if(!xs.length){tx(s,W/2,H/2,'n/a (no data)',{'text-anchor':'middle'});s.setAttribute('data-points','0');return s;}\n"
    " var x0=Math.min.apply(null,xs),x1=Math.max.apply(null,xs),y0=Math.min.apply(null,ys),y1=Math.max.apply(null,ys);\n"
    " if(x1===x0){x0-=1;x1+=1;}var pad=(y1-y0)*0.06||Math.abs(y0)*0.1||1;y0-=pad;y1+=pad;\n"
    " function X(v){return L+(v-x0)/(x1-x0)*(W-L-R);}function Y(v){return H-B-(v-y0)/(y1-y0)*(H-T-B);}\n"
    " nice(y0,y1,5).forEach(function(v){if(v<y0||v>y1)return;el('line',{x1:L,x2:W-R,y1:Y(v),y2:Y(v),'class':'grid'},s);"
    "tx(s,L-4,Y(v)+3,fmt(v),{'text-anchor':'end'});});\n"
    " nice(x0,x1,6).forEach(function(v){if(v<x0||v>x1)return;el('line',{x1:X(v),x2:X(v),y1:H-B,y2:H-B+4,'class':'ax'},s);"
    "tx(s,X(v),H-B+14,fmt(v),{'text-anchor':'middle'});});\n"
    " el('line',{x1:L,x2:W-R,y1:H-B,y2:H-B,'class':'ax'},s);el('line',{x1:L,x2:L,y1:T,y2:H-B,'class':'ax'},s);\n"
    " tx(s,(L+W-R)/2,H-6,o.xl,{'text-anchor':'middle'});tx(s,12,(T+H-B)/2,o.yl,{'text-anchor':'middle',"
    "transform:'rotate(-90 12 '+(T+H-B)/2+')'});\n"
    " (o.hl||[]).forEach(function(h){if(!fin(h.y))return;var l=el('line',{x1:L,x2:W-R,y1:Y(h.y),y2:Y(h.y),stroke:h.color,"
    "'stroke-dasharray':'5 3'},s);tip(l,h.name+': '+fmt(h.y));tx(s,L+4,Y(h.y)-3,h.name,{fill:h.color});});\n"
    " var ly=T+10,lg=[];o.series.forEach(function(q){if(!q.pts.length)return;var g=el('g',{'data-series':q.name},s);\n"
    "  if(q.mode==='step'){var d='';q.pts.forEach(function(p,i){d+=(i?'H'+X(p[0])+'V':'M'+X(p[0])+' ')+Y(p[1]);});"
    "el('path',{d:d,fill:'none',stroke:q.color,'stroke-width':1.8},g);}\n"
    "  q.pts.forEach(function(p){var c;if(q.mode==='step'){c=el('circle',{cx:X(p[0]),cy:Y(p[1]),r:1.4,fill:q.color},g);}\n"
    "   else if(p[2]===0){c=el('path',{d:'M'+(X(p[0])-3)+' '+(Y(p[1])-3)+'l6 6m0 -6l-6 6',stroke:'#c00','stroke-width':1.3},g);}\n"
    "   else c=el('circle',{cx:X(p[0]),cy:Y(p[1]),r:2.6,fill:q.color,'fill-opacity':0.7},g);\n"
    "   tip(c,q.name+' trial '+p[0]+': '+fmt(p[1])+(p[2]===0?' (invalid)':''));np++;if(q.n)N[q.n]++;});\n"
    "  if(q.n==='best_time')N.series++;if(q.legend!==false)lg.push(q);});\n"
    " if(lg.length){el('rect',{x:W-R-134,y:T,width:132,height:lg.length*12+4,fill:'#fff','fill-opacity':0.85},s);\n"
    "  lg.forEach(function(q){el('rect',{x:W-R-130,y:ly-7,width:10,height:8,fill:q.color},s);tx(s,W-R-116,ly,q.name);ly+=12;});}\n"
    " s.setAttribute('data-points',String(np));return s;}\n"
    /* hbars(host,{title,items:[{label,value,text}],max,band:[lo,hi],unit}) */
    "function hbars(host,o){var W=560,RH=16,L=200,R=70,T=16,B=24,H=T+B+RH*Math.max(o.items.length,1);var s=box(host,o.title,W,H);\n"
    " var vals=o.items.map(function(i){return i.value;}).filter(fin),mx=o.max||Math.max.apply(null,vals.concat([0]))||1,nb=0;\n"
    " function X(v){return L+v/mx*(W-L-R);}\n"
    " if(o.band){var b=el('rect',{x:X(o.band[0]),y:T-4,width:X(o.band[1])-X(o.band[0]),height:H-T-B+4,fill:'#2ca02c',"
    "'fill-opacity':0.13,'data-band':o.band.join('-')},s);tip(b,o.bandname);tx(s,(X(o.band[0])+X(o.band[1]))/2,T-6,"
    "o.bandname,{'text-anchor':'middle',fill:'#2a7a2a'});}\n"
    " nice(0,mx,5).forEach(function(v){if(v>mx)return;el('line',{x1:X(v),x2:X(v),y1:T,y2:H-B,'class':'grid'},s);"
    "tx(s,X(v),H-B+12,fmt(v),{'text-anchor':'middle'});});\n"
    " tx(s,(L+W-R)/2,H-2,o.unit,{'text-anchor':'middle'});\n"
    " o.items.forEach(function(it,i){var y=T+i*RH;tx(s,L-4,y+RH-5,it.label,{'text-anchor':'end'});\n"
    "  if(fin(it.value)){var r=el('rect',{x:L,y:y+2,width:Math.max(X(it.value)-L,1),height:RH-5,fill:it.color||'#4a7fb5'},s);"
    "tip(r,it.label+': '+(it.text||fmt(it.value)));nb++;N.bars++;}\n"
    "  tx(s,fin(it.value)?X(it.value)+4:L+4,y+RH-5,it.text||fmt(it.value));});\n"
    " el('line',{x1:L,x2:L,y1:T,y2:H-B,'class':'ax'},s);s.setAttribute('data-points',String(nb));return s;}\n"
    /* stacks(host,{title,rows:[{label,parts:{prec:value}}]}) */
    "function stacks(host,o){var W=560,RH=22,L=200,R=12,T=8,H=T+36+RH*Math.max(o.rows.length,1);var s=box(host,o.title,W,H),ns=0,"
    "seen={};\n"
    " o.rows.forEach(function(row,i){var y=T+i*RH,tot=0,x=L;for(var k in row.parts)if(fin(row.parts[k]))tot+=row.parts[k];\n"
    "  tx(s,L-4,y+RH-8,row.label,{'text-anchor':'end'});if(!(tot>0)){tx(s,L+4,y+RH-8,'n/a');return;}\n"
    "  Object.keys(row.parts).sort().forEach(function(k){var v=row.parts[k];if(!fin(v)||v<=0)return;var w=v/tot*(W-L-R);seen[k]=1;\n"
    "   var r=el('rect',{x:x,y:y+2,width:w,height:RH-6,fill:P[k]||C[Object.keys(P).length%C.length],stroke:'#fff'},s);"
    "tip(r,k+': '+(100*v/tot).toFixed(1)+'% ('+fmt(v)+' us)');\n"
    "   if(w>34)tx(s,x+3,y+RH-8,k+' '+(100*v/tot).toFixed(0)+'%',{fill:'#fff'});x+=w;ns++;N.segments++;});});\n"
    " var lx=L;Object.keys(seen).sort().forEach(function(k){el('rect',{x:lx,y:H-22,width:10,height:9,fill:P[k]||'#999'},s);"
    "tx(s,lx+13,H-14,k);lx+=60;});s.setAttribute('data-points',String(ns));return s;}\n"
    "var kh=document.getElementById('drk-kernels');\n"
    "D.kernels.forEach(function(k){var sec=document.createElement('div');sec.className='kernel';var h=document.createElement('h3');\n"
    " h.textContent=k.kernel+(k.workload?'  wl='+k.workload:'')+(k.series.length>1?'  ('+k.series.length+' runs)':'');"
    "sec.appendChild(h);var cards=document.createElement('div');cards.className='cards';sec.appendChild(cards);kh.appendChild(sec);\n"
    " var rs=[],bt=[];k.series.forEach(function(q,i){var col=C[i%C.length];\n"
    "  rs.push({name:q.label+' reward',color:col,mode:'dots',n:'reward',legend:false,pts:q.x.map(function(x,j){return [x,q.reward[j],q.valid[j]];})});\n"
    "  rs.push({name:q.label,color:col,mode:'step',n:'best_reward',pts:q.x.map(function(x,j){return [x,q.best_reward[j]];})});\n"
    "  bt.push({name:q.label,color:col,mode:'step',n:'best_time',pts:q.x.map(function(x,j){return [x,q.best_time[j]];})});});\n"
    " plot(cards,{title:'reward per trial (x: invalid) and best so far',xl:'trial',yl:'reward',series:rs});\n"
    " plot(cards,{title:(k.series.length>1?'best-so-far time by policy':'best-so-far time'),xl:'trial',yl:'time (us)',series:bt,"
    "hl:[{y:k.heuristic_us,name:'heuristic',color:'#777'},{y:k.roofline_us,name:'roofline',color:'#2a7a2a'}]});});\n"
    "if(!D.kernels.length)kh.textContent='n/a: no trial events in the logs';\n"
    "var gh=document.getElementById('drk-gen');\n"
    "hbars(gh,{title:'kernel generation time (gen_s)',unit:'seconds',items:D.gen.map(function(g){return {label:g.label,value:g.gen_s};})});\n"
    "hbars(gh,{title:'convergence rate: share of trials within 5% of the final best',unit:'share of trials',max:1,band:[0.2,0.5],"
    "bandname:'0.2-0.5',items:D.conv.map(function(c){return {label:c.label,value:c.rate,"
    "text:fin(c.rate)?c.rate.toFixed(2)+' ('+c.near+'/'+c.n+')':'n/a',color:fin(c.rate)&&c.rate>=0.2&&c.rate<=0.5?'#2ca02c':'#e6a23c'};})});\n"
    "var ph=document.getElementById('drk-prec');\n"
    "if(D.prec.length)stacks(ph,{title:'share of kernel time per precision',rows:D.prec});else ph.textContent='n/a: no kernel_summary events';\n"
    "for(var k in N)body.setAttribute('data-'+k.replace('_','-'),String(N[k]));\n"
    "body.setAttribute('data-rendered','1');status.textContent='';\n"
    "}catch(e){body.setAttribute('data-rendered','error');body.setAttribute('data-error',String(e));"
    "status.textContent='the charts failed to draw: '+e;}\n"
    "})();\n";

static void write_series_json(FILE *o, const report_t *r, const series_t *s, bool label_file) {
  fputs("{\"label\":", o);
  char label[600];
  snprintf(label, sizeof label, "%s%s%s%s", s->policy ? s->policy : "n/a", label_file ? " (" : "",
           label_file ? base_name(r->files[s->file]) : "", label_file ? ")" : "");
  jsonstr(o, label);
  fputs(",\"file\":", o);
  jsonstr(o, r->files[s->file]);
  static const char *names[] = {"x", "reward", "best_reward", "best_time", "valid"};
  for (int a = 0; a < 5; a++) {
    fprintf(o, ",\"%s\":[", names[a]);
    double run = NAN; /* best so far when the log lacks it */
    double run_t = NAN;
    for (int i = 0; i < s->n; i++) {
      const rtrial_t *t = &s->t[i];
      if (i) fputc(',', o);
      bool ok = t->valid != 0;
      if (ok && isfinite(t->reward) && !(run >= t->reward)) run = t->reward;
      if (ok && t->time_us > 0 && !(run_t <= t->time_us)) run_t = t->time_us;
      switch (a) {
        case 0: jsonnum(o, t->x); break;
        case 1: jsonnum(o, t->reward); break;
        case 2: jsonnum(o, isfinite(t->best_reward) ? t->best_reward : run); break;
        case 3: jsonnum(o, t->best_time_us > 0 ? t->best_time_us : run_t); break;
        default: fputs(t->valid < 0 ? "null" : t->valid ? "1" : "0", o);
      }
    }
    fputc(']', o);
  }
  fputc('}', o);
}

static const ksum_t *summary_of(const report_t *r, const kid_t *k) {
  for (int i = 0; i < r->n_sums; i++)
    if (kid_has(k, r->sums[i].kernel, r->sums[i].workload)) return &r->sums[i];
  return NULL;
}

static void write_page(FILE *o, const report_t *r, const char *title) {
  kid_t *ks = NULL;
  int nk = kernel_ids(r, &ks);
  const char *model_name = NULL;
  for (int i = 0; i < r->n_models && !model_name; i++) model_name = r->models[i].model;
  if (!title) title = model_name;
  bool multi = r->n_files > 1;

  fputs("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>\n"
        "<meta http-equiv=Content-Security-Policy content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">\n<title>drkc tune report",
        o);
  if (title) fputs(": ", o), html(o, title);
  fprintf(o, "</title>\n<style>\n%s</style>\n</head>\n<body data-rendered=0>\n<h1>drkc tune report", page_css);
  if (title) fputs(": ", o), html(o, title);
  fputs("</h1>\n<p class=sub>", o);
  for (int f = 0; f < r->n_files; f++) {
    fputs(f ? ", " : "from ", o);
    fputs("<span class=mono>", o);
    html(o, r->files[f]);
    fputs("</span>", o);
    if (r->legacy_lines[f]) fprintf(o, " (%d lines of the earlier log format: no rewards)", r->legacy_lines[f]);
  }
  fprintf(o, ": %ld events, %ld trials, %d tuning runs, %ld stage changes, %ld pruned, %ld fallbacks, %ld diagnostics, "
          "%ld re-measurements, %ld resumes%s</p>\n<p id=drk-status>the charts need JavaScript</p>\n",
          r->events, r->trials, r->n_series, r->n_stage, r->n_pruned, r->n_fallback, r->n_diagnostic, r->n_remeasure,
          r->n_resume, r->other_events ? "; events of other kinds skipped" : "");

  /* model summary */
  fputs("<h2>Model</h2>\n", o);
  if (r->n_models == 1 && isfinite(r->models[0].after_us)) {
    const model_t *m = &r->models[0];
    double before = isfinite(m->end_before_us) ? m->end_before_us : m->before_us;
    fputs("<p><span class=big>", o);
    if (isfinite(before) && m->after_us > 0) fprintf(o, "%.2fx", before / m->after_us);
    else fputs("n/a", o);
    fputs("</span> faster after tuning</p>\n", o);
  }
  fputs("<div class=wide><table><tr>", o);
  if (multi) fputs("<th>log</th>", o);
  fputs("<th>model</th><th>target</th><th>GPU</th><th>policy</th><th>budget (s)</th><th>energy measured (NVML)</th>"
        "<th>before (us)</th><th>after (us)</th><th>speedup</th><th>outputs checked</th><th>tune time (s)</th></tr>\n",
        o);
  for (int f = 0; f < r->n_files; f++) {
    bool any = false;
    for (int i = 0; i < r->n_models; i++) {
      const model_t *m = &r->models[i];
      if (m->file != f) continue;
      any = true;
      double before = isfinite(m->end_before_us) ? m->end_before_us : m->before_us;
      fputs("<tr>", o);
      if (multi) cell_str(o, base_name(r->files[f]));
      cell_str(o, m->model);
      cell_str(o, m->target);
      cell_str(o, m->gpu);
      cell_str(o, m->policy);
      cell_num(o, m->budget_s, "%.0f");
      cell_bool(o, m->nvml, "yes", "no (energy not in the reward)");
      cell_num(o, before, "%.2f");
      cell_num(o, m->after_us, "%.2f");
      cell_num(o, before > 0 && m->after_us > 0 ? before / m->after_us : NAN, "%.2fx");
      cell_bool(o, m->checked, "yes", "no");
      cell_num(o, m->t_s, "%.0f");
      fputs("</tr>\n", o);
    }
    if (!any) {
      fputs("<tr>", o);
      if (multi) cell_str(o, base_name(r->files[f]));
      fputs("<td colspan=11>n/a (no model_start / model_end events in this log)</td></tr>\n", o);
    }
  }
  fputs("</table></div>\n", o);

  /* kernels against the roofline */
  fputs("<h2>Kernels: time before and after, against the roofline</h2>\n"
        "<p class=sub>before: the heuristic's schedule; after: the tuned one; of roofline: roofline time / kernel time "
        "(100% = at the roofline). Rows without a kernel_summary event come from the tuning runs' end events.</p>\n"
        "<div class=wide><table><tr>",
        o);
  if (multi) fputs("<th>log</th>", o);
  fputs("<th>kernel</th><th>kind</th><th>share</th><th>precision</th><th>before (us)</th><th>after (us)</th>"
        "<th>speedup</th><th>roofline (us)</th><th>of roofline before</th><th>of roofline after</th><th>trials</th>"
        "<th>invalid</th><th>tuned</th><th>gen (s)</th><th>tune (s)</th><th>best point</th></tr>\n",
        o);
  for (int i = 0; i < r->n_sums; i++) {
    const ksum_t *k = &r->sums[i];
    fputs("<tr>", o);
    if (multi) cell_str(o, base_name(r->files[k->file]));
    fputs("<td class=mono>", o);
    html(o, k->kernel);
    fputs("</td>", o);
    cell_str(o, k->kind);
    cell_num(o, isfinite(k->share) ? 100 * k->share : NAN, "%.1f%%");
    cell_str(o, k->precision);
    cell_num(o, k->heuristic_us, "%.2f");
    cell_num(o, k->best_us, "%.2f");
    cell_num(o, k->heuristic_us > 0 && k->best_us > 0 ? k->heuristic_us / k->best_us : NAN, "%.2fx");
    cell_num(o, k->roofline_us, "%.2f");
    for (int a = 0; a < 2; a++) {
      double t = a ? k->best_us : k->heuristic_us;
      double fr = k->roofline_us > 0 && t > 0 ? k->roofline_us / t : NAN;
      if (isfinite(fr))
        fprintf(o, "<td class=n><span class=bar style=\"width:%dpx\"></span> %.0f%%</td>", (int)(fmin(fr, 1.5) * 60),
                100 * fr);
      else fputs("<td class=n>n/a</td>", o);
    }
    cell_num(o, k->trials, "%.0f");
    cell_num(o, k->invalid, "%.0f");
    cell_bool(o, k->tuned, "yes", "no");
    cell_num(o, k->gen_s, "%.2f");
    cell_num(o, k->tune_s, "%.1f");
    fputs("<td class=mono>", o);
    html(o, k->best_point && *k->best_point ? k->best_point : NULL);
    fputs("</td></tr>\n", o);
  }
  for (int i = 0; i < r->n_series; i++) {
    const series_t *s = &r->series[i];
    bool summarized = false;
    for (int j = 0; j < r->n_sums && !summarized; j++)
      summarized = r->sums[j].file == s->file && same(r->sums[j].kernel, s->kernel) &&
                   (!r->sums[j].workload || !s->workload || same(r->sums[j].workload, s->workload));
    if (summarized) continue;
    double h = series_heuristic(s), b = series_final_best(s);
    int inval = 0;
    for (int j = 0; j < s->n; j++) inval += s->t[j].valid == 0;
    fputs("<tr>", o);
    if (multi) cell_str(o, base_name(r->files[s->file]));
    fputs("<td class=mono>", o);
    html(o, s->kernel);
    fputs("</td><td>n/a</td><td class=n>n/a</td><td>n/a</td>", o);
    cell_num(o, h, "%.2f");
    cell_num(o, b, "%.2f");
    cell_num(o, h > 0 && b > 0 ? h / b : NAN, "%.2fx");
    fputs("<td class=n>n/a</td><td class=n>n/a</td><td class=n>n/a</td>", o);
    cell_num(o, s->n, "%.0f");
    cell_num(o, inval, "%.0f");
    fputs("<td>n/a</td><td class=n>n/a</td><td class=n>n/a</td><td>n/a</td></tr>\n", o);
  }
  if (!r->n_sums && !r->n_series) fprintf(o, "<tr><td colspan=%d>n/a (no kernels in the logs)</td></tr>\n", multi ? 17 : 16);
  fputs("</table></div>\n", o);

  /* precision mix: the data; the script draws it */
  fputs("<h2>Precision mix</h2>\n<p class=sub>Share of the kernels' summed time per precision (kernel_summary "
        "events), with the heuristic's schedules (before) and the tuned ones (after).</p>\n<div id=drk-prec "
        "class=cards></div>\n",
        o);

  fputs("<h2>Kernel generation time and convergence</h2>\n<p class=sub><b>Convergence rate</b> of a tuning run: the "
        "share of its measured trials that are valid and within 5% of the run's final best time (the winner's; "
        "trials/near counts in parentheses). The band 0.2-0.5 is the healthy range: the search found the best region "
        "and spent a fifth to a half of its trials there. Below 0.2 the best looks like a lone find (more trials may "
        "well find better, or the landscape is noisy); above 0.5 the search settled early (a smaller budget would "
        "do, or it explores too little).</p>\n<div id=drk-gen class=cards></div>\n",
        o);

  fputs("<h2>Per kernel: reward and best so far over trials</h2>\n<p class=sub>Left: each trial's reward (the "
        "reward of its stage's weights; invalid trials as red crosses) and the best so far. Right: the best-so-far "
        "kernel time, one line per tuning run (policy) of the kernel when several logs or runs tuned it: the RL "
        "policy against the baselines; dashed: the heuristic's time and the roofline where known.</p>\n"
        "<div id=drk-kernels></div>\n",
        o);

  /* the data */
  fputs("<script type=\"application/json\" id=drk-data>\n{\"trials\":", o);
  fprintf(o, "%ld,\"kernels\":[", r->trials);
  bool first = true;
  for (int i = 0; i < nk; i++) {
    int n = 0;
    for (int j = 0; j < r->n_series; j++) n += kid_has(&ks[i], r->series[j].kernel, r->series[j].workload);
    if (!n) continue;
    const ksum_t *sum = summary_of(r, &ks[i]);
    fputs(first ? "\n" : ",\n", o);
    first = false;
    fputs("{\"kernel\":", o);
    jsonstr(o, ks[i].kernel ? ks[i].kernel : "n/a");
    fputs(",\"workload\":", o);
    jsonstr(o, ks[i].workload);
    double h = sum ? sum->heuristic_us : NAN, roof = sum ? sum->roofline_us : NAN;
    for (int j = 0; j < r->n_series && !isfinite(h); j++)
      if (kid_has(&ks[i], r->series[j].kernel, r->series[j].workload)) h = series_heuristic(&r->series[j]);
    fputs(",\"heuristic_us\":", o);
    jsonnum(o, h);
    fputs(",\"roofline_us\":", o);
    jsonnum(o, roof);
    /* a file name in the label when two runs of one policy would look alike */
    bool label_file = false;
    for (int a = 0; a < r->n_series; a++)
      for (int b = a + 1; b < r->n_series; b++)
        if (kid_has(&ks[i], r->series[a].kernel, r->series[a].workload) &&
            kid_has(&ks[i], r->series[b].kernel, r->series[b].workload) && same(r->series[a].policy, r->series[b].policy))
          label_file = true;
    fputs(",\"series\":[", o);
    bool f2 = true;
    for (int j = 0; j < r->n_series; j++) {
      if (!kid_has(&ks[i], r->series[j].kernel, r->series[j].workload)) continue;
      if (!f2) fputc(',', o);
      f2 = false;
      write_series_json(o, r, &r->series[j], label_file && multi);
    }
    fputs("]}", o);
  }
  fputs("],\n\"gen\":[", o);
  for (int i = 0; i < r->n_sums; i++) {
    const ksum_t *k = &r->sums[i];
    char label[400];
    snprintf(label, sizeof label, "%s%s%s%s", k->kernel ? k->kernel : "n/a", multi ? " (" : "",
             multi ? base_name(r->files[k->file]) : "", multi ? ")" : "");
    fputs(i ? ",{\"label\":" : "{\"label\":", o);
    jsonstr(o, label);
    fputs(",\"gen_s\":", o);
    jsonnum(o, k->gen_s);
    fputc('}', o);
  }
  fputs("],\n\"conv\":[", o);
  for (int i = 0; i < r->n_series; i++) {
    const series_t *s = &r->series[i];
    int near;
    double rate = series_convergence(s, &near);
    char label[600];
    snprintf(label, sizeof label, "%s %s%s%s%s", s->kernel ? s->kernel : "n/a", s->policy ? s->policy : "n/a",
             multi ? " (" : "", multi ? base_name(r->files[s->file]) : "", multi ? ")" : "");
    fputs(i ? ",{\"label\":" : "{\"label\":", o);
    jsonstr(o, label);
    fputs(",\"rate\":", o);
    jsonnum(o, rate);
    fprintf(o, ",\"near\":%d,\"n\":%d}", near, s->n);
  }
  fputs("],\n\"prec\":[", o);
  first = true;
  for (int f = 0; f < r->n_files; f++)
    for (int a = 0; a < 2; a++) {
      /* precisions of this file, in first-seen order */
      const char *seen[32];
      double sum[32];
      int n = 0;
      for (int i = 0; i < r->n_sums; i++) {
        const ksum_t *k = &r->sums[i];
        if (k->file != f) continue;
        const char *p = k->precision && *k->precision ? k->precision : "n/a";
        double t = a ? k->best_us : k->heuristic_us;
        int j = 0;
        while (j < n && strcmp(seen[j], p)) j++;
        if (j == n) {
          if (n == 32) continue;
          seen[n] = p;
          sum[n++] = 0;
        }
        if (t > 0) sum[j] += t;
      }
      if (!n) continue;
      char label[400];
      snprintf(label, sizeof label, "%s%s", a ? "after" : "before", "");
      if (multi) snprintf(label, sizeof label, "%s, %s", base_name(r->files[f]), a ? "after" : "before");
      fputs(first ? "{\"label\":" : ",{\"label\":", o);
      first = false;
      jsonstr(o, label);
      fputs(",\"parts\":{", o);
      for (int j = 0; j < n; j++) {
        if (j) fputc(',', o);
        jsonstr(o, seen[j]);
        fputc(':', o);
        jsonnum(o, sum[j]);
      }
      fputs("}}", o);
    }
  fputs("]}\n</script>\n<script>\n", o);
  fputs(page_js, o);
  fputs("</script>\n</body></html>\n", o);
  free(ks);
}

static void report_free(report_t *r) {
  for (int i = 0; i < r->n_strs; i++) free(r->strs[i]);
  free(r->strs);
  for (int i = 0; i < r->n_series; i++) free(r->series[i].t);
  free(r->series);
  free(r->sums);
  free(r->models);
  free(r->legacy_lines);
  free(r->files);
}

int drkc_report_main(int argc, char **argv) {
  static const char *const o_out[] = {"-o", "--output", NULL}, *const o_title[] = {"--title", NULL};
  report_t r;
  memset(&r, 0, sizeof r);
  const char *out = NULL, *title = NULL;
  r.files = calloc((size_t)argc, sizeof *r.files);
  if (!r.files) oom();
  for (int i = 2; i < argc; i++) {
    const char *v;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(report_help, stdout);
      report_free(&r);
      return 0;
    }
    if ((v = drkc_opt_value(argc, argv, &i, o_out))) {
      if (!*v) {
        report_free(&r);
        return drkc_usage_error("-o needs a file%s", "");
      }
      out = v;
    } else if ((v = drkc_opt_value(argc, argv, &i, o_title))) title = v;
    else if (argv[i][0] == '-' && argv[i][1]) {
      report_free(&r);
      return drkc_usage_error("unknown option '%s' for 'drkc report'", argv[i]);
    } else r.files[r.n_files++] = argv[i];
  }
  if (!r.n_files) {
    report_free(&r);
    return drkc_usage_error("drkc report needs a log (drkc tune --log=FILE)%s", "");
  }
  r.legacy_lines = calloc((size_t)r.n_files, sizeof *r.legacy_lines);
  if (!r.legacy_lines) oom();
  for (int f = 0; f < r.n_files; f++) {
    int rc = read_log(&r, f);
    if (rc) {
      report_free(&r);
      return rc;
    }
  }
  /* written next to the output, then renamed: no half page on a failure */
  char tmp[4200];
  FILE *o = stdout;
  if (out && strcmp(out, "-")) {
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    if (!(o = fopen(tmp, "w"))) {
      fprintf(stderr, "drkc report: error: cannot write %s: %s\n", tmp, strerror(errno));
      report_free(&r);
      return 1;
    }
  }
  write_page(o, &r, title);
  int rc = 0;
  if (o != stdout) {
    bool bad = ferror(o) != 0;
    if (fclose(o) || bad || rename(tmp, out)) {
      fprintf(stderr, "drkc report: error: cannot write %s: %s\n", out, strerror(errno));
      remove(tmp);
      rc = 1;
    }
  } else if (fflush(stdout) || ferror(stdout)) {
    fprintf(stderr, "drkc report: error: writing stdout: %s\n", strerror(errno));
    rc = 1;
  }
  report_free(&r);
  return rc;
}
