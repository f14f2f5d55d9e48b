/* Tests of the graph -> tile IR lowering (lower/lower.h).
 *
 *   test_lower model MODEL.onnx [BIND] [DUMP.drkt]  whole model: must lower completely
 *   test_lower drkg FILE.drkg [BIND]                 a text graph: must lower completely
 *   test_lower node-corpus DIR [MUST_LIST]           ONNX node tests: per-op summary; every
 *                                                    model that lowers must verify and
 *                                                    round-trip; the ops in MUST_LIST must lower
 *   test_lower errors                                user errors are reported, not crashes
 *
 * Every produced module must pass drk_tile_verify and print -> parse -> print must be a
 * fixed point. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend/onnx/onnx_import.h"
#include "frontend/frontend.h"
#include "ir/tile.h"
#include "lower/lower_internal.h" /* the schedule heuristics (run_schedule) */
#include "tests/common/lowered_check.h"
#include "passes/passes.h"


static drk_graph_t *load_graph(const char *path, const char *bind, drk_diag_t *d) {
  drk_graph_t *g = drk_frontend_load(path, d);
  if (!g) return NULL;
  if (bind && *bind && !drk_graph_bind_dims(g, bind, d)) {
    drk_graph_destroy(g);
    return NULL;
  }
  if (!drk_pass_pipeline_canonicalize(g, d)) {
    drk_graph_destroy(g);
    return NULL;
  }
  return g;
}

static int run_model(const char *path, const char *bind, const char *dump) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_graph_t *g = load_graph(path, bind, &d);
  if (!g) return 1;
  drk_lowered_t l;
  drk_lower_options_t o = {.target_sm = 80};
  if (!drk_lower_graph(g, &o, &l, &d)) {
    fprintf(stderr, "FAIL: %s does not lower (%d errors)\n", path, d.n_errors);
    drk_graph_destroy(g);
    return 1;
  }
  bool ok = drk_test_check_lowered(&l, path);
  size_t live = 0;
  for (size_t i = 0; i < g->n_nodes; i++) live += !g->nodes[i]->dead;
  printf("%s: %zu nodes -> %zu kernels, %zu launches, %zu aliases\n", path, live, l.module->n_kernels, l.n_launches,
         l.n_aliases);
  if (dump) {
    FILE *f = fopen(dump, "w");
    if (f) {
      drk_lowered_print(&l, f);
      fclose(f);
    }
  }
  /* tf32 and sm_90 variants lower too */
  drk_lowered_t l2;
  o.allow_tf32 = true;
  o.target_sm = 90;
  if (!drk_lower_graph(g, &o, &l2, &d)) {
    fprintf(stderr, "FAIL: %s does not lower with tf32\n", path);
    ok = false;
  } else {
    ok = drk_test_check_lowered(&l2, path) && ok;
    drk_lowered_destroy(&l2);
  }
  drk_lowered_destroy(&l);
  drk_graph_destroy(g);
  return ok ? 0 : 1;
}

/* ---- node corpus ---- */
typedef struct opstat {
  char op[48];
  int ok, fail;
  char why[200];
} opstat_t;

static opstat_t stats[256];
static int n_stats;

static opstat_t *stat_for(const char *op) {
  for (int i = 0; i < n_stats; i++)
    if (strcmp(stats[i].op, op) == 0) return &stats[i];
  if (n_stats == 256) return &stats[255];
  snprintf(stats[n_stats].op, sizeof stats[n_stats].op, "%s", op);
  return &stats[n_stats++];
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_corpus(const char *dir, const char *must) {
  DIR *dd = opendir(dir);
  if (!dd) {
    printf("SKIP: no ONNX node tests at %s\n", dir);
    return 77;
  }
  char **names = NULL;
  size_t nn = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(dd))) {
    if (e->d_name[0] == '.') continue;
    if (nn == cap) names = realloc(names, (cap = cap ? cap * 2 : 256) * sizeof *names);
    names[nn++] = strdup(e->d_name);
  }
  closedir(dd);
  qsort(names, nn, sizeof *names, cmp_str);
  int bad = 0, lowered = 0, failed = 0, skipped = 0;
  char lowered_list[65536] = ",";
  for (size_t i = 0; i < nn; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, names[i]);
    drk_diag_t d;
    drk_diag_init(&d, NULL);
    drk_graph_t *g = load_graph(path, NULL, &d);
    if (!g) { skipped++; continue; }
    /* the op under test: the op of the first live node that is not an alias */
    const char *op = NULL;
    size_t live = 0;
    for (size_t j = 0; j < g->n_nodes; j++) {
      if (g->nodes[j]->dead) continue;
      live++;
      if (!op) op = drk_op_name(g->nodes[j]->op);
    }
    if (!live) { drk_graph_destroy(g); skipped++; continue; }
    drk_lowered_t l;
    drk_lower_options_t o = {.target_sm = 80};
    drk_diag_t d2;
    drk_diag_init(&d2, NULL);
    opstat_t *st = stat_for(op);
    if (drk_lower_graph(g, &o, &l, &d2)) {
      lowered++;
      st->ok++;
      if (!drk_test_check_lowered(&l, names[i])) bad++;
      drk_lowered_destroy(&l);
      if (strlen(lowered_list) + strlen(names[i]) + 2 < sizeof lowered_list) {
        strcat(lowered_list, names[i]);
        strcat(lowered_list, ",");
      }
    } else {
      failed++;
      st->fail++;
      if (strstr(d2.first, "internal")) {
        fprintf(stderr, "%s: %s\n", names[i], d2.first);
        bad++;
      }
      if (!st->why[0]) {
        const char *w = strstr(d2.first, "error: ");
        snprintf(st->why, sizeof st->why, "%.60s: %.130s", names[i], w ? w + 7 : d2.first);
      }
    }
    drk_graph_destroy(g);
  }
  printf("%-28s %6s %6s  first failure\n", "op", "ok", "fail");
  for (int i = 0; i < n_stats; i++)
    printf("%-28s %6d %6d  %s\n", stats[i].op, stats[i].ok, stats[i].fail, stats[i].fail ? stats[i].why : "");
  printf("node models: %d lowered, %d not lowered, %d not importable/canonicalizable\n", lowered, failed, skipped);
  if (must) {
    FILE *f = fopen(must, "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
      line[strcspn(line, "\r\n#")] = 0;
      char *s = line;
      while (*s == ' ') s++;
      if (!*s) continue;
      char key[300];
      snprintf(key, sizeof key, ",%s,", s);
      if (!strstr(lowered_list, key)) {
        fprintf(stderr, "FAIL: %s must lower\n", s);
        bad++;
      }
    }
    if (f) fclose(f);
    else { fprintf(stderr, "cannot read %s\n", must); bad++; }
  }
  for (size_t i = 0; i < nn; i++) free(names[i]);
  free(names);
  return bad ? 1 : 0;
}

/* ---- user errors ---- */
static bool expect_error(const char *text, const char *bind, const char *want) {
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  drk_graph_t *g = drk_graph_parse(text, strlen(text), "t.drkg", &d);
  if (!g) { fprintf(stderr, "parse failed: %s\n", d.first); return false; }
  bool ok = true;
  if (bind && !drk_graph_bind_dims(g, bind, &d)) {
    ok = strstr(d.first, want) != NULL;
    if (!ok) fprintf(stderr, "expected '%s', got '%s'\n", want, d.first);
    drk_graph_destroy(g);
    return ok;
  }
  if (!drk_pass_pipeline_canonicalize(g, &d)) { fprintf(stderr, "canonicalize: %s\n", d.first); drk_graph_destroy(g); return false; }
  drk_lowered_t l;
  if (drk_lower_graph(g, NULL, &l, &d)) {
    fprintf(stderr, "expected an error '%s', lowering succeeded\n", want);
    drk_lowered_destroy(&l);
    ok = false;
  } else if (!strstr(d.first, want)) {
    fprintf(stderr, "expected '%s', got '%s'\n", want, d.first);
    ok = false;
  }
  drk_graph_destroy(g);
  return ok;
}

static bool expect_ok(const char *text, const char *bind) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_graph_t *g = drk_graph_parse(text, strlen(text), "t.drkg", &d);
  if (!g) return false;
  bool ok = (!bind || drk_graph_bind_dims(g, bind, &d)) && drk_pass_pipeline_canonicalize(g, &d);
  drk_lowered_t l;
  if (ok && (ok = drk_lower_graph(g, NULL, &l, &d))) {
    ok = drk_test_check_lowered(&l, "t.drkg");
    drk_lowered_destroy(&l);
  }
  drk_graph_destroy(g);
  return ok;
}

static int run_errors(void) {
  int bad = 0;
  const char *sym = "graph @g(%x: f32[N, 4]) -> (%y) {\n  %y: f32[*] = Relu(%x)\n  return %y\n}\n";
  bad += !expect_error(sym, NULL, "GPU lowering needs static shapes; dim 'N' of input 'x' is symbolic");
  bad += !expect_ok(sym, "N=3");
  bad += !expect_error(sym, "M=3", "no symbolic dim named 'M'");
  bad += !expect_error(sym, "N", "bad dim binding");
  const char *topk = "graph @g(%x: f32[3, 4], %k: i64[1]) -> (%v, %i) {\n  %v: f32[*], %i: i64[*] = TopK(%x, %k)\n  return %v, %i\n}\n";
  bad += !expect_error(topk, NULL, "TopK on f32 is not lowered for GPU yet");
  const char *i4 = "graph @g(%x: i32[3, 4]) -> (%y) {\n  %y: i32[*] = Exp(%x)\n  return %y\n}\n";
  bad += !expect_error(i4, NULL, "Exp on i32 is not lowered for GPU yet");
  printf("errors: %d failed\n", bad);
  return bad ? 1 : 0;
}

/* The schedule heuristics on the shapes they were fitted to (tests/bench/results/
 * 2026-11-30-h200-mm-shapes.md): the sm_90a kernel's BN and split-K per ws_cost, BN 256
 * never with an epilogue, pinned knobs win, and the knob parser's errors. */
static int run_schedule(void) {
  static const struct {
    int64_t M, N, K;
    bool epi;
    int bn, sp;
  } cases[] = {
      {1024, 768, 768, false, 64, 1},    /* GPT-2 attention out: split-K was 2x slower there */
      {1024, 768, 3072, true, 64, 1},    /* GPT-2 FFN down */
      {1024, 2304, 768, false, 256, 1},  /* GPT-2 QKV */
      {1024, 2304, 768, true, 128, 1},   /* ... with its bias epilogue: no BN 256 (spills) */
      {2048, 512, 2048, false, 64, 1},   /* LLaMA k/v */
      {4096, 4096, 4096, false, 256, 1}, /* the speed bar */
      {128, 768, 3072, false, 64, 8},    /* BERT seq 128 FFN down: 12 tiles on 132 SMs, split-K pays */
  };
  drk_lower_options_t o = {.target_sm = 90, .arch_specific = true};
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    drk_schedule_t s = drk_sched_mm_ws(cases[i].M, cases[i].N, cases[i].K, 1, DRK_DT_F16, &o, cases[i].epi);
    if (s.tile_n != cases[i].bn || s.split_k != cases[i].sp || !s.mma) {
      fprintf(stderr, "FAIL schedule %lldx%lldx%lld%s: BN %d split %d, want BN %d split %d\n", (long long)cases[i].M,
              (long long)cases[i].N, (long long)cases[i].K, cases[i].epi ? " (epilogue)" : "", s.tile_n, s.split_k,
              cases[i].bn, cases[i].sp);
      bad++;
    }
  }
  /* not sm_90a: no wgmma schedule */
  drk_lower_options_t o80 = {.target_sm = 80};
  if (drk_sched_mm_ws(4096, 4096, 4096, 1, DRK_DT_F16, &o80, false).mma) fprintf(stderr, "FAIL schedule: wgmma on sm_80\n"), bad++;
  /* pinned knobs */
  char err[256];
  drk_lower_options_t op = o;
  if (!drk_sched_knobs_parse("mm.tile_n=256,mm.split_k=3,mm.stages=3", &op.knobs, err, sizeof err)) {
    fprintf(stderr, "FAIL schedule: knobs rejected: %s\n", err);
    bad++;
  }
  drk_schedule_t s = drk_sched_mm_ws(1024, 768, 768, 1, DRK_DT_F16, &op, true);
  if (s.tile_n != 256 || s.split_k != 3 || s.stages != 3) fprintf(stderr, "FAIL schedule: pinned knobs ignored\n"), bad++;
  /* the sm_90a conv's output window: the fewest pixels computed past the output's edges
   * (ResNet-50's layers at batch 64 and 1), ties to the wider window, pins; a pinned window
   * whose TMA box would span more than 256 columns (128 x stride 4) leaves the kernel */
  static const struct {
    int64_t nb, oh, st;
    int h, w;
  } wins[] = {{64, 56, 1, 8, 8}, {64, 28, 1, 4, 4}, {64, 14, 1, 2, 2}, {64, 7, 1, 1, 8},
              {1, 56, 1, 2, 64}, {1, 28, 1, 4, 32}, {1, 7, 1, 8, 16}, {64, 112, 2, 8, 16}};
  for (size_t i = 0; i < sizeof wins / sizeof wins[0]; i++) {
    int64_t st[2] = {wins[i].st, wins[i].st};
    drk_schedule_t c = drk_sched_conv_ws(wins[i].nb, wins[i].oh, wins[i].oh, 256, 256 * 9, st, DRK_DT_F16, &o, DRK_CONV_EPI_LIGHT);
    if (!c.mma || strcmp(c.kind, "conv_ws") || c.conv_h != wins[i].h || c.conv_w != wins[i].w) {
      fprintf(stderr, "FAIL conv window N%lld %lldx%lld: %dx%d, want %dx%d\n", (long long)wins[i].nb, (long long)wins[i].oh,
              (long long)wins[i].oh, c.conv_h, c.conv_w, wins[i].h, wins[i].w);
      bad++;
    }
  }
  drk_lower_options_t oc = o;
  int64_t st1[2] = {1, 1}, st4[2] = {4, 4};
  if (!drk_sched_knobs_parse("conv.tile_h=16,conv.tile_w=8,mm.tile_n=128", &oc.knobs, err, sizeof err)) {
    fprintf(stderr, "FAIL schedule: conv knobs rejected: %s\n", err);
    bad++;
  }
  drk_schedule_t cs = drk_sched_conv_ws(64, 56, 56, 256, 256 * 9, st1, DRK_DT_F16, &oc, DRK_CONV_EPI_LIGHT);
  if (cs.conv_h != 16 || cs.conv_w != 8 || cs.tile_n != 128) fprintf(stderr, "FAIL schedule: pinned conv window ignored\n"), bad++;
  /* BN 256 unstaged on big grids (>= 4 waves of 128 x 256 tiles) with a light epilogue
   * (conv3x3 56x56 C256 b64: 0.345 vs 0.409 ms, device call 36); other epilogues (GELU spills)
   * and small grids (14 x 14) keep BN 128 staged; a pinned mm.staged stays */
  static const struct {
    int64_t nb, oh;
    int epi, bn;
    bool staged;
  } bns[] = {{64, 56, DRK_CONV_EPI_LIGHT, 256, false}, {64, 56, DRK_CONV_EPI_NONE, 256, false},
             {64, 56, DRK_CONV_EPI_OTHER, 128, true}, {64, 14, DRK_CONV_EPI_LIGHT, 128, true}};
  for (size_t i = 0; i < sizeof bns / sizeof bns[0]; i++) {
    drk_schedule_t c = drk_sched_conv_ws(bns[i].nb, bns[i].oh, bns[i].oh, 256, 256 * 9, st1, DRK_DT_F16, &o, bns[i].epi);
    if (c.tile_n != bns[i].bn || c.staged != bns[i].staged)
      fprintf(stderr, "FAIL conv BN N%lld %lld epi %d: BN %d staged %d, want %d %d\n", (long long)bns[i].nb,
              (long long)bns[i].oh, bns[i].epi, c.tile_n, c.staged, bns[i].bn, bns[i].staged), bad++;
  }
  drk_lower_options_t osg = o;
  drk_sched_knobs_parse("mm.staged=1", &osg.knobs, err, sizeof err);
  drk_schedule_t cst = drk_sched_conv_ws(64, 56, 56, 256, 256 * 9, st1, DRK_DT_F16, &osg, DRK_CONV_EPI_LIGHT);
  if (cst.tile_n != 256 || !cst.staged) fprintf(stderr, "FAIL schedule: pinned mm.staged=1 on the big conv ignored\n"), bad++;
  drk_lower_options_t ow = o;
  drk_sched_knobs_parse("conv.tile_h=1,conv.tile_w=128", &ow.knobs, err, sizeof err);
  if (drk_sched_conv_ws(1, 56, 56, 64, 64 * 9, st4, DRK_DT_F16, &ow, DRK_CONV_EPI_NONE).mma)
    fprintf(stderr, "FAIL schedule: a box 128 x stride 4 wide accepted\n"), bad++;
  if (drk_sched_conv_ws(1, 56, 56, 64, 576, st1, DRK_DT_F16, &o80, DRK_CONV_EPI_NONE).mma) fprintf(stderr, "FAIL schedule: conv wgmma on sm_80\n"), bad++;
  /* persistent ping-pong: one program per SM, no split-K, BN at most 128 even when pinned to 256 */
  drk_lower_options_t opp = o;
  if (!drk_sched_knobs_parse("mm.persistent=1,mm.split_k=4", &opp.knobs, err, sizeof err)) {
    fprintf(stderr, "FAIL schedule: knobs rejected: %s\n", err);
    bad++;
  }
  /* the persistent forms only when pinned (the staged one-tile form is faster by default) */
  if (drk_sched_mm_ws(2048, 5632, 2048, 1, DRK_DT_F16, &o, true).persistent ||
      drk_sched_mm_ws(2048, 5632, 2048, 1, DRK_DT_F16, &o, false).persistent ||
      drk_sched_mm_ws(2048, 2048, 5632, 1, DRK_DT_F16, &o, true).persistent ||
      drk_sched_mm_ws(1024, 3072, 768, 1, DRK_DT_F16, &o, true).persistent)
    fprintf(stderr, "FAIL schedule: default persistent choice\n"), bad++;
  s = drk_sched_mm_ws(4096, 4096, 4096, 1, DRK_DT_F16, &opp, false);
  if (s.persistent != 132 || s.split_k != 1 || s.tile_n > 128) fprintf(stderr, "FAIL schedule: persistent %d split %d BN %d\n", s.persistent, s.split_k, s.tile_n), bad++;
  opp.knobs = (drk_sched_knobs_t){0};
  if (!drk_sched_knobs_parse("flat.move_block=2048", &opp.knobs, err, sizeof err) || drk_knob_or(&opp.knobs, DRK_KNOB_FLAT_MOVE_BLOCK, 0) != 2048)
    fprintf(stderr, "FAIL schedule: flat.move_block=2048 not parsed\n"), bad++;
  if (drk_sched_flat_block(2048).block_elems != 2048 || drk_sched_flat_block(2048).warps != 4)
    fprintf(stderr, "FAIL schedule: drk_sched_flat_block\n"), bad++;
  opp.knobs = (drk_sched_knobs_t){0};
  drk_sched_knobs_parse("mm.persistent=0", &opp.knobs, err, sizeof err);
  if (drk_sched_mm_ws(2048, 5632, 2048, 1, DRK_DT_F16, &opp, true).persistent) fprintf(stderr, "FAIL schedule: mm.persistent=0 ignored\n"), bad++;
  /* cooperative persistent (any BN, no split-K); clusters; the staged epilogue (default on) */
  opp.knobs = (drk_sched_knobs_t){0};
  if (!drk_sched_knobs_parse("mm.persistent=2,mm.tile_n=256,mm.split_k=2,mm.cluster=2,mm.staged=0", &opp.knobs, err, sizeof err))
    fprintf(stderr, "FAIL schedule: knobs rejected: %s\n", err), bad++;
  s = drk_sched_mm_ws(4096, 4096, 4096, 1, DRK_DT_F16, &opp, false);
  if (s.persistent != 132 || !s.coop || s.tile_n != 256 || s.split_k != 1 || s.cluster != 2 || s.staged)
    fprintf(stderr, "FAIL schedule: cooperative %d/%d BN %d split %d cluster %d staged %d\n", s.persistent, s.coop, s.tile_n,
            s.split_k, s.cluster, s.staged), bad++;
  s = drk_sched_mm_ws(4096, 4096, 4096, 1, DRK_DT_F16, &o, false);
  if (!s.staged || s.cluster != 1 || s.coop) fprintf(stderr, "FAIL schedule: default staged %d cluster %d coop %d\n", s.staged, s.cluster, s.coop), bad++;
  /* mm.pair, rows.spt: pinned, then in the row schedule (capped at a chunk's 32 lanes) */
  opp.knobs = (drk_sched_knobs_t){0};
  if (!drk_sched_knobs_parse("mm.pair=0,rows.spt=8", &opp.knobs, err, sizeof err) ||
      drk_knob_or(&opp.knobs, DRK_KNOB_MM_PAIR, -1) != 0 || drk_knob_or(&opp.knobs, DRK_KNOB_ROWS_SPT, 0) != 8)
    fprintf(stderr, "FAIL schedule: mm.pair=0,rows.spt=8 not parsed \n"), bad++;
  if (drk_sched_rows(2048, 2048, true, 132, &opp.knobs).spt != 8 || drk_sched_rows(2048, 2048, true, 132, NULL).spt != 4 ||
      drk_sched_rows(64, 64, true, 132, &opp.knobs).spt != 2)
    fprintf(stderr, "FAIL schedule: rows.spt not applied\n"), bad++;
  /* few long rows: warps along the reduced axis (GroupNorm(1 group) over [1, 64, 56, 56]: one
   * row of 200,704; an NHWC ReduceMean over [1, 112, 112, 32]: 32 strided rows of 12,544);
   * many rows, TopK (sms 0) and rows.col_warps=1 keep them along rows */
  s = drk_sched_rows(1, 64 * 56 * 56, true, 132, NULL);
  if (s.col_warps != 16 || s.warps != 16 || s.rows != 1 || s.cols < 16 * 32 * 4)
    fprintf(stderr, "FAIL schedule: GroupNorm(1) [1,64,56,56]: col_warps %d warps %d rows %d cols %d\n", s.col_warps, s.warps,
            s.rows, s.cols), bad++;
  s = drk_sched_rows(32, 112 * 112, false, 132, NULL);
  if (s.col_warps < 8 || s.warps != s.col_warps || s.rows != 32)
    fprintf(stderr, "FAIL schedule: NHWC [1,112,112,32]: col_warps %d warps %d rows %d\n", s.col_warps, s.warps, s.rows), bad++;
  if (drk_sched_rows(4096, 4096, true, 132, NULL).col_warps > 1 || drk_sched_rows(1, 200704, true, 0, NULL).col_warps > 1 ||
      drk_sched_rows(32 * 2048, 49, false, 132, NULL).col_warps > 1)
    fprintf(stderr, "FAIL schedule: col_warps where rows fill the GPU, or for TopK\n"), bad++;
  opp.knobs = (drk_sched_knobs_t){0};
  if (!drk_sched_knobs_parse("rows.col_warps=1,rows.split=3", &opp.knobs, err, sizeof err) ||
      drk_sched_rows(1, 200704, true, 132, &opp.knobs).col_warps > 1 || drk_sched_rows_split(1, 100, 132, &opp.knobs) != 3)
    fprintf(stderr, "FAIL schedule: rows.col_warps=1,rows.split=3 not applied\n"), bad++;
  if (drk_sched_rows_split(1, 49, 132, NULL) < 8 || drk_sched_rows_split(1, 7, 132, NULL) != 1 ||
      drk_sched_rows_split(512, 100, 132, NULL) != 1)
    fprintf(stderr, "FAIL schedule: rows.split heuristic\n"), bad++;
  /* whole rows (drk_sched_rows_whole): the issue's bf16 rows, one program per row as one chunk
   * with 16-byte accesses (8192: 8 warps, 32K: 16 warps and 64 elements per thread, not for a
   * kernel that keeps only 32; 32K f32 is 128 KB: chunks), short rows several per program with
   * 16-byte accesses, few rows keep the split form; rows.whole=0 keeps the chunk loop,
   * rows.whole=1 takes whole rows for few rows too */
  s = drk_sched_rows(8192, 8192, true, 132, NULL);
  drk_sched_rows_whole(&s, 8192, 8192, 2, 132, 64, true, NULL);
  if (!s.whole || s.rows != 1 || s.cols != 8192 || s.col_warps != 8 || s.warps != 8 || s.spt != 8)
    fprintf(stderr, "FAIL schedule: whole 8192x8192 bf16: whole %d rows %d cols %d col_warps %d spt %d\n", s.whole, s.rows,
            s.cols, s.col_warps, s.spt), bad++;
  s = drk_sched_rows(4096, 32768, true, 132, NULL);
  drk_sched_rows_whole(&s, 4096, 32768, 2, 132, 64, true, NULL);
  if (!s.whole || s.cols != 32768 || s.col_warps != 16)
    fprintf(stderr, "FAIL schedule: whole 4096x32768 bf16: whole %d cols %d col_warps %d\n", s.whole, s.cols, s.col_warps), bad++;
  s = drk_sched_rows(4096, 32768, true, 132, NULL);
  drk_sched_rows_whole(&s, 4096, 32768, 2, 132, 32, true, NULL);
  drk_schedule_t s2 = drk_sched_rows(4096, 32768, true, 132, NULL);
  drk_sched_rows_whole(&s2, 4096, 32768, 4, 132, 64, true, NULL);
  if (s.whole || s.cols != 1024 || s2.whole || s2.cols != 1024)
    fprintf(stderr, "FAIL schedule: 32K rows past 32 elements per thread or 64 KB must keep chunks\n"), bad++;
  s = drk_sched_rows(16384, 1024, true, 132, NULL);
  drk_sched_rows_whole(&s, 16384, 1024, 2, 132, 64, true, NULL);
  if (!s.whole || s.rows != 4 || s.cols != 1024 || s.spt != 8 || s.col_warps > 1)
    fprintf(stderr, "FAIL schedule: 16384x1024 bf16: whole %d rows %d spt %d\n", s.whole, s.rows, s.spt), bad++;
  /* short rows narrower than a warp of 16-byte accesses: several rows a warp when the row is
   * whole 16-byte units (ConvNeXt's 96 f16 channels: 2 rows a warp), else 4 elements a thread
   * as before (GlobalAveragePool's 49) */
  s = drk_sched_rows(100352, 96, true, 132, NULL);
  drk_sched_rows_whole(&s, 100352, 96, 2, 132, 64, true, NULL);
  s2 = drk_sched_rows(65536, 49, true, 132, NULL);
  drk_sched_rows_whole(&s2, 65536, 49, 2, 132, 64, true, NULL);
  if (!s.whole || s.spt != 8 || s.cols != 128 || !s2.whole || s2.spt != 2)
    fprintf(stderr, "FAIL schedule: short rows: 96 f16 spt %d (want 8), 49 f16 spt %d (want 2)\n", s.spt, s2.spt), bad++;
  s = drk_sched_rows(4, 8192, true, 132, NULL);
  drk_sched_rows_whole(&s, 4, 8192, 2, 132, 64, true, NULL);
  s2 = drk_sched_rows(4, 8192, true, 132, NULL);
  drk_sched_rows_whole(&s2, 4, 8192, 2, 132, 64, false, NULL);
  if (s.whole || s.cols == 8192 || !s2.whole || s2.cols != 8192)
    fprintf(stderr, "FAIL schedule: 4 rows of 8192 (fewer than the SMs): whole rows only where the kernel cannot split\n"), bad++;
  opp.knobs = (drk_sched_knobs_t){0};
  if (!drk_sched_knobs_parse("rows.whole=0", &opp.knobs, err, sizeof err)) fprintf(stderr, "FAIL schedule: rows.whole=0\n"), bad++;
  s = drk_sched_rows(8192, 8192, true, 132, &opp.knobs);
  drk_sched_rows_whole(&s, 8192, 8192, 2, 132, 64, true, &opp.knobs);
  if (s.whole || s.cols != 1024) fprintf(stderr, "FAIL schedule: rows.whole=0 not applied\n"), bad++;
  opp.knobs = (drk_sched_knobs_t){0};
  if (!drk_sched_knobs_parse("rows.whole=1", &opp.knobs, err, sizeof err)) fprintf(stderr, "FAIL schedule: rows.whole=1\n"), bad++;
  s = drk_sched_rows(4, 8192, true, 132, &opp.knobs);
  drk_sched_rows_whole(&s, 4, 8192, 2, 132, 64, true, &opp.knobs);
  if (!s.whole || s.cols != 8192) fprintf(stderr, "FAIL schedule: rows.whole=1 not applied\n"), bad++;
  static const char *const wrong[] = {"mm.tile_n=96", "mm.split_k=0", "mm.stages=9", "attn.block_m=32", "mm.tile_n",
                                      "mm.tile_n=64x", "foo=1", "mm.tile_n=64,,", "mm.persistent=3", "flat.move_block=1000",
                                      "flat.move_block=512", "mm.cluster=0", "mm.cluster=4", "mm.staged=2", "mm.pair=2",
                                      "rows.spt=3", "rows.spt=16", "rows.col_warps=3", "rows.col_warps=32",
                                      "rows.split=0", "rows.split=129", "rows.whole=2"};
  for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
    drk_sched_knobs_t k = {0};
    if (drk_sched_knobs_parse(wrong[i], &k, err, sizeof err)) fprintf(stderr, "FAIL schedule: '%s' accepted\n", wrong[i]), bad++;
  }
  printf("schedule: %d failure(s)\n", bad);
  return bad ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "model") == 0) return run_model(argv[2], argc > 3 ? argv[3] : NULL, argc > 4 ? argv[4] : NULL);
  if (argc >= 3 && strcmp(argv[1], "drkg") == 0) return run_model(argv[2], argc > 3 ? argv[3] : NULL, argc > 4 ? argv[4] : NULL);
  if (argc >= 3 && strcmp(argv[1], "node-corpus") == 0) return run_corpus(argv[2], argc > 3 ? argv[3] : NULL);
  if (argc >= 2 && strcmp(argv[1], "errors") == 0) return run_errors();
  if (argc >= 2 && strcmp(argv[1], "schedule") == 0) return run_schedule();
  fprintf(stderr, "usage: test_lower model|drkg|node-corpus|errors ...\n");
  return 2;
}
