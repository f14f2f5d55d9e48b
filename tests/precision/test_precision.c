/* Tests of the precision pass (passes/precision.h).
 *
 *   test_precision unit                          text graphs: patterns, casts, interface,
 *                                                options, fp8, medium, report
 *   test_precision model DIR BIND PREC           a generated model (DIR/model.onnx with
 *                                                DIR/test_data_set_0/input_N.pb): convert
 *                                                to PREC (fp16|bf16|medium|fp8), check verify,
 *                                                shape inference, interface, round trip, and
 *                                                the interpreter against the f32 graph
 *                                                (rel. L2 <= 1e-2; fp8: 6e-2)
 *   test_precision lower DIR BIND PREC           the converted model lowers to tile IR
 *                                                (lists every op that does not) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/onnx/onnx_import.h"
#include "frontend/onnx/tensor_io.h"
#include "ir/interp.h"
#include "lower/lower.h"
#include "passes/passes.h"
#include "passes/precision.h"
#include "passes/precision_auto.h"
#include "tests/common/check.h"

static drk_value_t *find_value(const drk_graph_t *g, const char *name) {
  for (size_t i = 0; i < g->n_inputs; i++)
    if (strcmp(g->inputs[i]->name, name) == 0) return g->inputs[i];
  for (size_t i = 0; i < g->n_consts; i++)
    if (strcmp(g->consts[i]->name, name) == 0) return g->consts[i];
  for (size_t i = 0; i < g->n_nodes; i++) {
    const drk_node_t *n = g->nodes[i];
    if (n->dead) continue;
    for (int j = 0; j < n->n_outputs; j++)
      if (n->outputs[j] && strcmp(n->outputs[j]->name, name) == 0) return n->outputs[j];
  }
  return NULL;
}

#define CHECK_DT(g, name, want)                                                                \
  do {                                                                                         \
    const drk_value_t *v_ = find_value(g, name);                                               \
    if (!v_ || v_->dtype != (want))                                                            \
      check_report(__FILE__, __LINE__, #name, ": %%%s: dtype %s, want %s", name,               \
                   v_ ? drk_dtype_name(v_->dtype) : "(missing)", drk_dtype_name(want));        \
  } while (0)

static char *print_str(const drk_graph_t *g) {
  size_t n;
  char *s = drk_graph_print_string(g, SIZE_MAX, &n);
  DRK_ASSERT(s);
  return s;
}

/* verify; shape inference agrees with every dtype (the print does not change); print ->
 * parse -> print is a fixed point */
static bool check_consistent(drk_graph_t *g, const char *what) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  bool ok = drk_graph_verify(g, &d);
  if (!ok) fprintf(stderr, "%s: converted graph does not verify\n", what);
  char *before = print_str(g);
  if (!drk_pass_infer_shapes(g, &d)) {
    fprintf(stderr, "%s: shape inference rejects the converted graph\n", what);
    ok = false;
  }
  char *after = print_str(g);
  if (strcmp(before, after) != 0) {
    fprintf(stderr, "%s: shape inference changed the converted graph\n", what);
    ok = false;
  }
  drk_graph_t *g2 = drk_graph_parse(after, strlen(after), what, &d);
  if (!g2) {
    fprintf(stderr, "%s: printed graph does not parse\n", what);
    ok = false;
  } else {
    char *again = print_str(g2);
    if (strcmp(again, after) != 0) {
      fprintf(stderr, "%s: print -> parse -> print is not a fixed point\n", what);
      ok = false;
    }
    free(again);
    drk_graph_destroy(g2);
  }
  free(before);
  free(after);
  if (!ok) failures++;
  return ok;
}

static drk_graph_t *parse(const char *text) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_graph_t *g = drk_graph_parse(text, strlen(text), "<unit>", &d);
  if (!g) fprintf(stderr, "does not parse (%d errors):\n%s", d.n_errors, text);
  DRK_ASSERT(g);
  if (!drk_pass_infer_shapes(g, &d)) DRK_ASSERT(!"infer");
  return g;
}

static bool apply(drk_graph_t *g, drk_precision_t p, drk_matmul_precision_t m, int sm, drk_diag_t *d) {
  drk_precision_options_t o = {p, m, sm, drk_precision_target_has_fp8(sm), NULL, false, NULL, 0};
  return drk_pass_apply_precision(g, &o, d);
}

/* deterministic inputs: x = scale * sin-ish, never zero */
static void fill_inputs(const drk_graph_t *g, drk_tensor_t *in, double scale) {
  for (size_t i = 0; i < g->n_inputs; i++) {
    const drk_value_t *v = g->inputs[i];
    int64_t dims[DRK_MAX_RANK];
    for (int k = 0; k < v->shape.rank; k++) dims[k] = v->shape.dims[k].size;
    DRK_ASSERT(drk_tensor_alloc(&in[i], v->dtype, v->shape.rank, dims));
    int64_t n = drk_tensor_numel(&in[i]);
    for (int64_t k = 0; k < n; k++) {
      if (drk_dtype_is_float(v->dtype)) drk_tensor_set_f64(&in[i], k, scale * (0.3 + sin(0.7 * (double)k + 1.3 * (double)i)));
      else drk_tensor_set_i64(&in[i], k, (k * 7 + 3) % 5);
    }
  }
}

/* runs both graphs on in; returns the largest rel. L2 error of gc's outputs vs gr's */
static double compare(const drk_graph_t *gr, const drk_graph_t *gc, drk_tensor_t *in) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_tensor_t ro[16], co[16];
  DRK_ASSERT(gr->n_outputs <= 16);
  if (!drk_interp_run(gr, in, ro, &d)) return INFINITY;
  if (!drk_interp_run(gc, in, co, &d)) {
    for (size_t i = 0; i < gr->n_outputs; i++) drk_tensor_free(&ro[i]);
    return INFINITY;
  }
  double worst = 0;
  for (size_t i = 0; i < gr->n_outputs; i++) {
    double e = co[i].dtype == ro[i].dtype ? drk_tensor_rel_error(&co[i], &ro[i]) : INFINITY;
    if (!(e <= worst)) worst = e; /* NaN sticks */
    drk_tensor_free(&ro[i]);
    drk_tensor_free(&co[i]);
  }
  return worst;
}

/* ---------------------------------------------------------------------------------------- */

#define ONES8 "1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0"
#define ONES64 ONES8 ", " ONES8 ", " ONES8 ", " ONES8 ", " ONES8 ", " ONES8 ", " ONES8 ", " ONES8

/* RMSNorm and LayerNorm written as primitives, a softmax as primitives, a matmul. x is large
 * (|x| up to ~400) so squares overflow f16 unless the chain stays f32. */
static const char *k_norms =
    "graph @norms(%x: f32[4, 64]) -> (%y) {\n"
    "  %ax: i64[1] = const [-1]\n"
    "  %two: f32[] = const [2.0]\n"
    "  %eps: f32[] = const [1e-06]\n"
    "  %tiny: f32[] = const [1e-12]\n"
    "  %g: f32[64] = const [" ONES64 "]\n"
    "  %big: f32[] = const [-3.4028234663852886e+38]\n"
    /* RMSNorm */
    "  %sq: f32[4, 64] = Pow(%x, %two)\n"
    "  %ms: f32[4, 1] = ReduceMean(%sq, %ax)\n"
    "  %mse: f32[4, 1] = Add(%ms, %eps)\n"
    "  %rms: f32[4, 1] = Sqrt(%mse)\n"
    "  %xn: f32[4, 64] = Div(%x, %rms)\n"
    "  %h: f32[4, 64] = Mul(%xn, %g)\n"
    /* LayerNorm as primitives on h */
    "  %mu: f32[4, 1] = ReduceMean(%h, %ax)\n"
    "  %xc: f32[4, 64] = Sub(%h, %mu)\n"
    "  %xc2: f32[4, 64] = Mul(%xc, %xc)\n"
    "  %var: f32[4, 1] = ReduceMean(%xc2, %ax)\n"
    "  %vare: f32[4, 1] = Add(%var, %eps)\n"
    "  %sd: f32[4, 1] = Sqrt(%vare)\n"
    "  %r: f32[4, 1] = Reciprocal(%sd)\n"
    "  %ln: f32[4, 64] = Mul(%xc, %r)\n"
    /* softmax as primitives, with a -FLT_MAX mask element */
    "  %mx: f32[4, 1] = ReduceMax(%ln, %ax)\n"
    "  %sh: f32[4, 64] = Sub(%ln, %mx)\n"
    "  %e: f32[4, 64] = Exp(%sh)\n"
    "  %s: f32[4, 1] = ReduceSum(%e, %ax)\n"
    "  %p: f32[4, 64] = Div(%e, %s)\n"
    "  %pm: f32[4, 64] = Max(%p, %big)\n"
    /* an add of a constant f16 flushes to zero */
    "  %pt: f32[4, 64] = Add(%pm, %tiny)\n"
    "  %y: f32[4, 64] = Mul(%pt, %h)\n"
    "  return %y\n"
    "}\n";

static void test_norm_patterns(drk_precision_t p) {
  drk_dtype_t T = p == DRK_PREC_FP16 ? DRK_DT_F16 : DRK_DT_BF16;
  drk_graph_t *ref = parse(k_norms), *g = parse(k_norms);
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  CHECK(apply(g, p, DRK_MMP_HIGHEST, 80, &d));
  CHECK(d.n_errors == 0 && d.n_warnings == 0);
  check_consistent(g, "norms");
  /* the interface */
  CHECK(g->n_inputs == 1 && g->inputs[0]->dtype == DRK_DT_F32 && strcmp(g->inputs[0]->name, "x") == 0);
  CHECK(g->n_outputs == 1 && g->outputs[0]->dtype == DRK_DT_F32 && strcmp(g->outputs[0]->name, "y") == 0);
  /* RMSNorm chain f32 */
  const char *f32s[] = {"sq", "ms", "mse", "rms", "xn", "mu", "xc", "xc2", "var", "vare", "sd", "r", "e", "s", "p"};
  for (size_t i = 0; i < DRK_ARRAY_LEN(f32s); i++) CHECK_DT(g, f32s[i], DRK_DT_F32);
  /* the rest in T */
  const char *ts[] = {"h", "ln", "mx", "sh", "pm", "g", "big"};
  for (size_t i = 0; i < DRK_ARRAY_LEN(ts); i++) CHECK_DT(g, ts[i], T);
  /* constants converted in place (name kept, old data dropped); eps stays f32 (only f32
   * users); tiny stays f32 (its user is kept because f16 would flush it) */
  CHECK_DT(g, "eps", DRK_DT_F32);
  CHECK_DT(g, "tiny", p == DRK_PREC_FP16 ? DRK_DT_F32 : T);
  CHECK_DT(g, "pt", p == DRK_PREC_FP16 ? DRK_DT_F32 : T);
  const drk_value_t *big = find_value(g, "big");
  if (big && big->dtype == T) {
    uint16_t h;
    memcpy(&h, big->data, 2);
    double bv = T == DRK_DT_F16 ? drk_f16_to_f32(h) : drk_bf16_to_f32(h);
    CHECK(isfinite(bv) && bv < -60000); /* saturated, not -inf */
  }
  size_t n_f32_consts = 0;
  for (size_t i = 0; i < g->n_consts; i++) n_f32_consts += g->consts[i]->dtype == DRK_DT_F32;
  CHECK(n_f32_consts <= 3); /* ax is i64; eps (+tiny for f16) */
  /* numerics: the kept chains make this pass; x up to ~400 */
  drk_tensor_t in[1];
  fill_inputs(ref, in, 400.0);
  double e = compare(ref, g, in);
  printf("norms %s: rel. L2 error %.3g\n", drk_precision_name(p), e);
  CHECK(e <= 1e-2);
  drk_tensor_free(&in[0]);
  /* the report */
  char *rep = NULL;
  size_t rn = 0;
  FILE *f = open_memstream(&rep, &rn);
  drk_precision_report(g, f);
  fclose(f);
  CHECK(strstr(rep, "precision mix: ") != NULL);
  CHECK(strstr(rep, "%sq ") != NULL);
  printf("%s", rep);
  free(rep);
  drk_graph_destroy(ref);
  drk_graph_destroy(g);
}

static char *replace_all(const char *s, const char *from, const char *to) {
  size_t n = 0, fl = strlen(from), tl = strlen(to);
  for (const char *p = strstr(s, from); p; p = strstr(p + fl, from)) n++;
  char *r = malloc(strlen(s) + n * (tl > fl ? tl - fl : 0) + 1), *o = r;
  for (const char *p; (p = strstr(s, from)); s = p + fl) {
    memcpy(o, s, (size_t)(p - s));
    o += p - s;
    memcpy(o, to, tl);
    o += tl;
  }
  strcpy(o, s);
  return r;
}

/* The same graph with every f32 made f16 (no kept chains) must fail the tolerance: the
 * numeric check above can fail. */
static void test_naive_would_fail(void) {
  char *t1 = replace_all(k_norms, "f32", "f16");
  char *t2 = replace_all(t1, "-3.4028234663852886e+38", "-65504.0");
  drk_graph_t *ref = parse(k_norms), *g = parse(t2);
  drk_tensor_t in[1], in16[1], ro[1], co[1];
  fill_inputs(ref, in, 400.0);
  DRK_ASSERT(drk_tensor_alloc(&in16[0], DRK_DT_F16, in[0].rank, in[0].dims));
  for (int64_t k = 0; k < drk_tensor_numel(&in[0]); k++) drk_tensor_set_f64(&in16[0], k, drk_tensor_get_f64(&in[0], k));
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  double e = INFINITY;
  if (drk_interp_run(ref, in, ro, &d)) {
    if (drk_interp_run(g, in16, co, &d)) {
      drk_tensor_t c32;
      DRK_ASSERT(drk_tensor_alloc(&c32, DRK_DT_F32, co[0].rank, co[0].dims));
      for (int64_t k = 0; k < drk_tensor_numel(&c32); k++) drk_tensor_set_f64(&c32, k, drk_tensor_get_f64(&co[0], k));
      e = drk_tensor_rel_error(&c32, &ro[0]);
      drk_tensor_free(&c32);
      drk_tensor_free(&co[0]);
    }
    drk_tensor_free(&ro[0]);
  }
  printf("norms naive f16: rel. L2 error %.3g (must be > 1e-2)\n", e);
  CHECK(!(e <= 1e-2));
  drk_tensor_free(&in[0]);
  drk_tensor_free(&in16[0]);
  drk_graph_destroy(ref);
  drk_graph_destroy(g);
  free(t1);
  free(t2);
}

/* Casts: an i64 -> f32 Cast becomes a Cast to f16; one feeding a kept region or an output
 * stays f32; Resize's scales stay f32; large reductions stay f32. */
static const char *k_casts =
    "graph @casts(%m: i64[2, 2048], %z: f32[2, 2048]) -> (%y, %c2, %rs) {\n"
    "  %ax: i64[1] = const [1]\n"
    "  %k: f32[] = const [-10000.0]\n"
    "  %sc: f32[4] = const [1.0, 1.0, 2.0, 2.0]\n"
    "  %shp: i64[4] = const [1, 1, 2, 1]\n"
    "  %shp2: i64[2] = const [2, 2048]\n"
    "  %c1: f32[2, 2048] = Cast(%m) {to = 1}\n"
    "  %a: f32[2, 2048] = Mul(%c1, %k)\n"
    "  %cs: f32[2, 2048] = ConstantOfShape(%shp2) {value = tensor<f32[1]> [0.5]}\n"
    "  %z1: f32[2, 2048] = Add(%z, %cs)\n"
    "  %y0: f32[2, 2048] = Add(%a, %z1)\n"
    "  %y: f32[2, 2048] = Relu(%y0)\n"
    "  %c2: f32[2, 2048] = Cast(%m) {to = 1}\n"
    "  %big: f32[2, 1] = ReduceSum(%y, %ax)\n"
    "  %small: f32[2, 1] = ReduceMax(%y, %ax)\n"
    "  %q: f32[2, 1] = Add(%big, %small)\n"
    "  %q4: f32[1, 1, 2, 1] = Reshape(%q, %shp)\n"
    "  %rs: f32[1, 1, 4, 2] = Resize(%q4, _, %sc) {mode = \"nearest\"}\n"
    "  return %y, %c2, %rs\n"
    "}\n";

static void test_casts(void) {
  const char *text = k_casts;
  drk_graph_t *ref = parse(text), *g = parse(text);
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  CHECK(apply(g, DRK_PREC_FP16, DRK_MMP_HIGHEST, 86, &d));
  check_consistent(g, "casts");
  const drk_value_t *c1 = find_value(g, "c1");
  CHECK(c1 && c1->dtype == DRK_DT_F16 && drk_node_attr_int(c1->def, "to", 0) == 10);
  CHECK_DT(g, "a", DRK_DT_F16);
  CHECK_DT(g, "cs", DRK_DT_F16);
  CHECK_DT(g, "k", DRK_DT_F16);
  CHECK_DT(g, "big", DRK_DT_F32);   /* 2048 elements reduced */
  CHECK_DT(g, "small", DRK_DT_F16); /* ReduceMax is exact in any dtype */
  CHECK_DT(g, "sc", DRK_DT_F32);    /* Resize scales are f32 by definition */
  CHECK_DT(g, "rs", DRK_DT_F32);    /* an output */
  /* c2 is a graph output: its Cast stays a Cast to f32 and nothing is added */
  const drk_value_t *c2 = find_value(g, "c2");
  CHECK(c2 && c2->dtype == DRK_DT_F32 && c2->def && c2->def->op == DRK_OP_CAST && c2->def->inputs[0]->dtype == DRK_DT_I64);
  for (size_t i = 0; i < g->n_outputs; i++) CHECK(g->outputs[i]->dtype == DRK_DT_F32);
  CHECK(strcmp(g->outputs[0]->name, "y") == 0 && strcmp(g->outputs[2]->name, "rs") == 0);
  drk_tensor_t in[2];
  fill_inputs(ref, in, 1.0);
  double e = compare(ref, g, in);
  printf("casts fp16: rel. L2 error %.3g\n", e);
  CHECK(e <= 1e-2);
  drk_tensor_free(&in[0]);
  drk_tensor_free(&in[1]);
  drk_graph_destroy(ref);
  drk_graph_destroy(g);
}

/* Rotary angles from positions (HF LLaMA's rotary embedding as exported with position ids):
 * positions 3000.. (a Cast of integers) times inverse frequencies, cos/sin of them, applied
 * to x. In f16 the angles near 3000 are off by up to 1 radian; the cone stays f32 under
 * fp16/bf16 while the product with x runs in T. */
static const char *k_rope =
    "graph @rope(%ids: i64[1, 64], %x: f32[1, 64, 16]) -> (%y) {\n"
    "  %off: i64[] = const [3000]\n"
    "  %ax: i64[1] = const [1]\n"
    "  %invf: f32[1, 8, 1] = const [1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125]\n"
    "  %pos: i64[1, 64] = Add(%ids, %off)\n"
    "  %pu: i64[1, 1, 64] = Unsqueeze(%pos, %ax)\n"
    "  %pf: f32[1, 1, 64] = Cast(%pu) {to = 1}\n"
    "  %fr: f32[1, 8, 64] = MatMul(%invf, %pf)\n"
    "  %ft: f32[1, 64, 8] = Transpose(%fr) {perm = [0, 2, 1]}\n"
    "  %emb: f32[1, 64, 16] = Concat(%ft, %ft) {axis = -1}\n"
    "  %cos: f32[1, 64, 16] = Cos(%emb)\n"
    "  %sin: f32[1, 64, 16] = Sin(%emb)\n"
    "  %xc: f32[1, 64, 16] = Mul(%x, %cos)\n"
    "  %xs: f32[1, 64, 16] = Mul(%x, %sin)\n"
    "  %y: f32[1, 64, 16] = Add(%xc, %xs)\n"
    "  return %y\n"
    "}\n";

/* The same angles folded at compile time (static positions: the dynamo export of LLaMA at
 * s2048 folds positions x inverse frequencies to an f32 constant [1, S, d/2] but not the
 * larger cos/sin tables): the constant stays f32 and so do the Concat and Cos/Sin reading it
 * (bf16 rounds an angle near 3000 by up to 8 rad: rel. L2 error ~1 without the rule). */
static char *rope_folded_text(void) {
  enum { S = 32, H = 8 };
  size_t cap = 64 * S * H + 2048, len = 0;
  char *t = malloc(cap);
  CHECK(t != NULL);
  len += (size_t)snprintf(t + len, cap - len,
                          "graph @rope_folded(%%x: f32[1, %d, %d]) -> (%%y) {\n  %%ang: f32[1, %d, %d] = const [",
                          S, 2 * H, S, H);
  for (int s = 0; s < S; s++)
    for (int k = 0; k < H; k++)
      len += (size_t)snprintf(t + len, cap - len, "%s%.9g", s + k ? ", " : "", (double)((float)(3000 + s) / (float)(1 << k)));
  snprintf(t + len, cap - len,
           "]\n"
           "  %%emb: f32[1, %d, %d] = Concat(%%ang, %%ang) {axis = -1}\n"
           "  %%cos: f32[1, %d, %d] = Cos(%%emb)\n"
           "  %%sin: f32[1, %d, %d] = Sin(%%emb)\n"
           "  %%xc: f32[1, %d, %d] = Mul(%%x, %%cos)\n"
           "  %%xs: f32[1, %d, %d] = Mul(%%x, %%sin)\n"
           "  %%y: f32[1, %d, %d] = Add(%%xc, %%xs)\n"
           "  return %%y\n"
           "}\n",
           S, 2 * H, S, 2 * H, S, 2 * H, S, 2 * H, S, 2 * H, S, 2 * H);
  return t;
}

static void test_rotary_folded(drk_precision_t p) {
  char *text = rope_folded_text();
  drk_graph_t *ref = parse(text), *g = parse(text);
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  CHECK(apply(g, p, DRK_MMP_HIGHEST, 91, &d));
  check_consistent(g, "rope_folded");
  static const char *const f32s[] = {"ang", "emb", "cos", "sin"};
  for (size_t i = 0; i < DRK_ARRAY_LEN(f32s); i++) CHECK_DT(g, f32s[i], DRK_DT_F32);
  drk_dtype_t T = p == DRK_PREC_BF16 ? DRK_DT_BF16 : DRK_DT_F16;
  CHECK_DT(g, "xc", T);
  drk_tensor_t in[1];
  fill_inputs(ref, in, 1.0);
  double e = compare(ref, g, in);
  printf("rotary folded %s: rel. L2 error %.3g\n", p == DRK_PREC_BF16 ? "bf16" : "fp16", e);
  CHECK(e <= 1e-2);
  drk_tensor_free(&in[0]);
  drk_graph_destroy(ref);
  drk_graph_destroy(g);
  free(text);
}

static void test_rotary(drk_precision_t p) {
  drk_graph_t *ref = parse(k_rope), *g = parse(k_rope);
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  CHECK(apply(g, p, DRK_MMP_HIGHEST, 90, &d));
  check_consistent(g, "rope");
  static const char *const f32s[] = {"pf", "fr", "ft", "emb", "cos", "sin"};
  for (size_t i = 0; i < DRK_ARRAY_LEN(f32s); i++) CHECK_DT(g, f32s[i], DRK_DT_F32);
  drk_dtype_t T = p == DRK_PREC_BF16 ? DRK_DT_BF16 : DRK_DT_F16;
  CHECK_DT(g, "xc", T);
  drk_tensor_t in[2];
  fill_inputs(ref, in, 1.0);
  double e = compare(ref, g, in);
  printf("rotary %s: rel. L2 error %.3g\n", p == DRK_PREC_BF16 ? "bf16" : "fp16", e);
  CHECK(e <= 1e-2);
  drk_tensor_free(&in[0]);
  drk_tensor_free(&in[1]);
  drk_graph_destroy(ref);
  drk_graph_destroy(g);
}

static const char *k_mm =
    "graph @mm(%x: f32[8, 32]) -> (%y, %z) {\n"
    "  %w: f32[32, 16] = const hex\"HEX\"\n"
    "  %b: f32[16] = const [0.5, -0.5, 0.25, 1.0, 0.5, -0.5, 0.25, 1.0, 0.5, -0.5, 0.25, 1.0, 0.5, -0.5, 0.25, 1.0]\n"
    "  %h: f32[8, 16] = MatMul(%x, %w)\n"
    "  %y: f32[8, 16] = Add(%h, %b)\n"
    "  %z: f32[8, 16] = Gemm(%x, %w, %b)\n"
    "  return %y, %z\n"
    "}\n";

static drk_graph_t *mm_graph(void) {
  char hex[32 * 16 * 8 + 1];
  for (int i = 0; i < 32 * 16; i++) {
    float f = (float)sin(0.37 * i) * 0.2f;
    unsigned char b[4];
    memcpy(b, &f, 4);
    snprintf(hex + 8 * i, 9, "%02x%02x%02x%02x", b[0], b[1], b[2], b[3]);
  }
  char *text = replace_all(k_mm, "HEX", hex);
  drk_graph_t *g = parse(text);
  free(text);
  return g;
}

static void test_medium_and_options(void) {
  /* medium: bf16 operands, f32 elsewhere; outputs keep their names */
  drk_graph_t *ref = mm_graph(), *g = mm_graph();
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  CHECK(apply(g, DRK_PREC_FP32, DRK_MMP_MEDIUM, 80, &d));
  check_consistent(g, "medium");
  CHECK_DT(g, "w", DRK_DT_BF16);
  CHECK_DT(g, "h", DRK_DT_BF16);
  CHECK_DT(g, "y", DRK_DT_F32);
  CHECK(g->outputs[1]->dtype == DRK_DT_F32 && strcmp(g->outputs[1]->name, "z") == 0);
  const drk_value_t *h = find_value(g, "h");
  CHECK(h && h->def->inputs[0]->dtype == DRK_DT_BF16 && h->def->inputs[1]->dtype == DRK_DT_BF16);
  drk_tensor_t in[1];
  fill_inputs(ref, in, 1.0);
  double e = compare(ref, g, in);
  printf("matmul medium: rel. L2 error %.3g\n", e);
  CHECK(e <= 1e-2 && e > 0);
  drk_tensor_free(&in[0]);
  drk_graph_destroy(g);

  /* auto, fp32, tf32, highest/high: the graph does not change */
  drk_precision_t same[] = {DRK_PREC_AUTO, DRK_PREC_FP32, DRK_PREC_TF32};
  char *want = print_str(ref);
  for (size_t i = 0; i < DRK_ARRAY_LEN(same); i++) {
    g = mm_graph();
    CHECK(apply(g, same[i], DRK_MMP_HIGH, 90, &d));
    char *got = print_str(g);
    CHECK(strcmp(got, want) == 0);
    free(got);
    drk_graph_destroy(g);
  }
  free(want);
  drk_graph_destroy(ref);

  /* parsing and the tf32 switch */
  drk_precision_t p = DRK_PREC_AUTO;
  drk_matmul_precision_t m = DRK_MMP_HIGHEST;
  CHECK(drk_precision_parse("bf16", &p) && p == DRK_PREC_BF16);
  CHECK(drk_precision_parse("fp8", &p) && p == DRK_PREC_FP8);
  CHECK(!drk_precision_parse("half", &p) && p == DRK_PREC_FP8);
  CHECK(!drk_precision_parse(NULL, &p));
  CHECK(drk_matmul_precision_parse("medium", &m) && m == DRK_MMP_MEDIUM);
  CHECK(!drk_matmul_precision_parse("low", &m) && m == DRK_MMP_MEDIUM);
  CHECK(strcmp(drk_precision_name(DRK_PREC_TF32), "tf32") == 0);
  CHECK(strcmp(drk_matmul_precision_name(DRK_MMP_HIGH), "high") == 0);
  drk_precision_options_t o = {DRK_PREC_TF32, DRK_MMP_HIGHEST, 80, false, NULL, false, NULL, 0};
  CHECK(drk_precision_allow_tf32(&o));
  o.precision = DRK_PREC_FP32;
  CHECK(!drk_precision_allow_tf32(&o));
  o.matmul = DRK_MMP_HIGH;
  CHECK(drk_precision_allow_tf32(&o));
  o.precision = DRK_PREC_FP16;
  CHECK(!drk_precision_allow_tf32(&o));
  CHECK(!drk_precision_target_has_fp8(80) && !drk_precision_target_has_fp8(87));
  CHECK(drk_precision_target_has_fp8(89) && drk_precision_target_has_fp8(90));
}

static void test_fp8_fallback(void) {
  /* a target without fp8: fp16 and a warning naming the target */
  drk_graph_t *g = mm_graph();
  char buf[2048] = {0};
  FILE *f = fmemopen(buf, sizeof buf - 1, "w");
  drk_diag_t d;
  drk_diag_init(&d, f);
  CHECK(apply(g, DRK_PREC_FP8, DRK_MMP_HIGHEST, 80, &d));
  fclose(f);
  CHECK(d.n_errors == 0 && d.n_warnings == 1);
  CHECK(strstr(buf, "warning") && strstr(buf, "sm_80") && strstr(buf, "fp16") && strstr(buf, "gfx942"));
  CHECK_DT(g, "h", DRK_DT_F16);
  CHECK_DT(g, "w", DRK_DT_F16);
  check_consistent(g, "fp8 fallback");
  drk_graph_destroy(g);
  /* the target named by the driver (e.g. sm_87 next to gfx942) */
  g = mm_graph();
  memset(buf, 0, sizeof buf);
  f = fmemopen(buf, sizeof buf - 1, "w");
  drk_diag_init(&d, f);
  drk_precision_options_t o = {DRK_PREC_FP8, DRK_MMP_HIGHEST, 87, false, "sm_87", false, NULL, 0};
  CHECK(drk_pass_apply_precision(g, &o, &d));
  fclose(f);
  CHECK(d.n_warnings == 1 && strstr(buf, "sm_87 has no fp8"));
  drk_graph_destroy(g);
}

/* fp8: MatMul (its weight also read by a Mul, so the weight stays as well), Gemm (transB,
 * alpha, beta, C) and Conv (bias) on e4m3 operands, sharing one quantized activation; an f16
 * model's MatMul too. */
static const char *k_f8 =
    "graph @f8(%x: f32[8, 64], %img: f32[2, 4, 6, 6]) -> (%y, %z, %u, %v) {\n"
    "  %w: f32[64, 32] = const hex\"W1\"\n"
    "  %w2: f32[48, 64] = const hex\"W2\"\n"
    "  %c: f32[48] = const hex\"C2\"\n"
    "  %k: f32[5, 4, 3, 3] = const hex\"K3\"\n"
    "  %kb: f32[5] = const [0.5, -0.25, 0.125, 1.0, -1.0]\n"
    "  %two: f32[] = const [2.0]\n"
    "  %h: f32[8, 32] = MatMul(%x, %w)\n"
    "  %y: f32[8, 32] = Relu(%h)\n"
    "  %z: f32[8, 48] = Gemm(%x, %w2, %c) {alpha = 0.5, beta = 2.0, transB = 1}\n"
    "  %u: f32[2, 5, 6, 6] = Conv(%img, %k, %kb) {pads = [1, 1, 1, 1]}\n"
    "  %v: f32[64, 32] = Mul(%w, %two)\n"
    "  return %y, %z, %u, %v\n"
    "}\n";

static const char *k_f8_half =
    "graph @f8h(%x: f16[4, 32]) -> (%y) {\n"
    "  %w: f16[32, 16] = const hex\"WH\"\n"
    "  %y: f16[4, 16] = MatMul(%x, %w)\n"
    "  return %y\n"
    "}\n";

/* hex of n values f(i) as dtype t (f32 or f16) */
static char *hex_of(int n, drk_dtype_t t, double (*fn)(int)) {
  int es = t == DRK_DT_F32 ? 4 : 2;
  char *h = malloc((size_t)n * es * 2 + 1);
  for (int i = 0; i < n; i++) {
    unsigned char b[4];
    float fv = (float)fn(i);
    uint16_t hv = drk_f32_to_f16(fv);
    if (es == 4) memcpy(b, &fv, 4);
    else memcpy(b, &hv, 2);
    for (int j = 0; j < es; j++) snprintf(h + (size_t)(i * es + j) * 2, 3, "%02x", b[j]);
  }
  return h;
}

/* weights: a few decades of magnitudes; w[0] a tiny negative (quantizes to zero, must not be
 * the byte 0x80); column 5 of w all zero (scale 1) */
static double w1_at(int i) { return i == 0 ? -1e-9 : i % 32 == 5 ? 0.0 : 0.3 * sin(0.37 * i) * (1 + (i % 7)); }
static double w2_at(int i) { return 0.2 * cos(0.11 * i) * (i % 3 ? 1.0 : 0.01); }
static double c2_at(int i) { return 0.1 * i - 2.0; }
static double k3_at(int i) { return 0.25 * sin(1.3 * i + 0.2); }
static double wh_at(int i) { return (double)((uint32_t)i * 2654435761u) / 4294967296.0 - 0.5; } /* pseudo-random */

static drk_graph_t *f8_graph(void) {
  char *w1 = hex_of(64 * 32, DRK_DT_F32, w1_at), *w2 = hex_of(48 * 64, DRK_DT_F32, w2_at);
  char *c2 = hex_of(48, DRK_DT_F32, c2_at), *k3 = hex_of(5 * 4 * 9, DRK_DT_F32, k3_at);
  char *t1 = replace_all(k_f8, "W1", w1), *t2 = replace_all(t1, "W2", w2), *t3 = replace_all(t2, "C2", c2);
  char *t4 = replace_all(t3, "K3", k3);
  drk_graph_t *g = parse(t4);
  free(w1), free(w2), free(c2), free(k3), free(t1), free(t2), free(t3), free(t4);
  return g;
}

/* fp8 on an fp8 target; head: the output head too */
static bool apply_fp8(drk_graph_t *g, bool head, drk_diag_t *d) {
  drk_precision_options_t o = {DRK_PREC_FP8, DRK_MMP_HIGHEST, 90, true, NULL, head, NULL, 0};
  return drk_pass_apply_precision(g, &o, d);
}

/* MatMul/Gemm/Conv nodes in the fp8 form: f8 operands (the weight a constant), f32 result,
 * no bias */
static int count_f8_mm(const drk_graph_t *g) {
  int n = 0;
  for (size_t i = 0; i < g->n_nodes; i++) {
    const drk_node_t *nd = g->nodes[i];
    if (nd->dead || (nd->op != DRK_OP_MATMUL && nd->op != DRK_OP_GEMM && nd->op != DRK_OP_CONV)) continue;
    bool f8 = nd->inputs[0]->dtype == DRK_DT_F8E4M3 && nd->inputs[1]->dtype == DRK_DT_F8E4M3 &&
              nd->inputs[1]->kind == DRK_VALUE_CONST && nd->outputs[0]->dtype == DRK_DT_F32 && nd->n_inputs == 2;
    n += f8;
  }
  return n;
}

static void test_fp8(void) {
  drk_graph_t *ref = f8_graph(), *g = f8_graph(), *g16 = f8_graph();
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  CHECK(apply_fp8(g, true, &d));
  CHECK(d.n_errors == 0 && d.n_warnings == 0);
  CHECK(apply(g16, DRK_PREC_FP16, DRK_MMP_HIGHEST, 90, &d));
  check_consistent(g, "fp8");
  CHECK(count_f8_mm(g) == 3);
  /* interface and the values the rest of the graph reads keep their names and dtypes */
  CHECK(g->n_outputs == 4 && strcmp(g->outputs[1]->name, "z") == 0 && g->outputs[1]->dtype == DRK_DT_F32);
  CHECK_DT(g, "h", DRK_DT_F16);
  CHECK_DT(g, "w", DRK_DT_F16); /* still read by the Mul */
  CHECK(find_value(g, "w2") == NULL && find_value(g, "k") == NULL); /* only read by fp8 nodes: gone */
  /* one activation quantization for MatMul and Gemm (same x) */
  int n_absmax = 0;
  for (size_t i = 0; i < g->n_nodes; i++)
    n_absmax += !g->nodes[i]->dead && g->nodes[i]->op == DRK_OP_REDUCE_MAX && g->nodes[i]->outputs[0]->shape.rank == 0;
  CHECK(n_absmax == 2); /* x and img (each after a first stage along the last axis) */
  /* quantized weights: e4m3, never the byte 0x80; w[0] = -1e-9 is 0x00 */
  const drk_value_t *wq = find_value(g, "w.f8e4m3");
  CHECK(wq && wq->dtype == DRK_DT_F8E4M3 && wq->nbytes == 64 * 32 && ((const uint8_t *)wq->data)[0] == 0);
  size_t n80 = 0, nf8 = 0;
  for (size_t i = 0; i < g->n_consts; i++) {
    const drk_value_t *v = g->consts[i];
    if (v->dtype != DRK_DT_F8E4M3) continue;
    nf8++;
    for (size_t j = 0; j < v->nbytes; j++) n80 += ((const uint8_t *)v->data)[j] == 0x80;
  }
  CHECK(nf8 == 3 && n80 == 0);
  /* per-channel scales: column 5 of w is zero (scale 1), the largest |w| of a column maps to 448 */
  const drk_value_t *ws = find_value(g, "w.fp8_scale");
  CHECK(ws && ws->dtype == DRK_DT_F32 && ws->nbytes == 32 * 4);
  if (ws && wq) {
    const float *sc = ws->data;
    CHECK(sc[5] == 1.0f);
    int maxcode = 0;
    for (int k = 0; k < 64; k++) {
      int b = ((const uint8_t *)wq->data)[k * 32 + 3] & 0x7f;
      if (b > maxcode) maxcode = b;
    }
    CHECK(maxcode == 0x7e);
  }
  /* numerics: fp8 error is within the --check tolerance, and well above fp16's */
  drk_tensor_t in[2];
  fill_inputs(ref, in, 1.0);
  double e8 = compare(ref, g, in), e16 = compare(ref, g16, in);
  printf("fp8: rel. L2 error %.3g (fp16: %.3g; tolerance 6e-2)\n", e8, e16);
  CHECK(e8 <= 6e-2 && e8 > 4 * e16);
  /* the check can fail: a wrong weight scale (x1.25) is caught */
  drk_value_t *wsm = find_value(g, "w.fp8_scale");
  if (wsm) {
    float *bad = drk_arena_alloc(g->arena, wsm->nbytes);
    memcpy(bad, wsm->data, wsm->nbytes);
    for (size_t i = 0; i < wsm->nbytes / 4; i++) bad[i] *= 1.25f;
    wsm->data = bad;
    double eb = compare(ref, g, in);
    printf("fp8 with a wrong weight scale: rel. L2 error %.3g (must be > 6e-2)\n", eb);
    CHECK(!(eb <= 6e-2));
  }
  drk_tensor_free(&in[0]);
  drk_tensor_free(&in[1]);
  /* the report shows the f8 matmuls and the casts to f8 */
  char *rep = NULL;
  size_t rn = 0;
  FILE *f = open_memstream(&rep, &rn);
  drk_precision_report(g, f);
  fclose(f);
  CHECK(strstr(rep, "MatMul               f8e4m3") && strstr(rep, "Conv                 f8e4m3") &&
        strstr(rep, "f32->f8e4m3") && strstr(rep, "3 f8e4m3"));
  printf("%s", rep);
  free(rep);
  drk_graph_destroy(ref);
  drk_graph_destroy(g);
  drk_graph_destroy(g16);

  /* an f16 model: its MatMul runs in fp8 too, the result stays f16 */
  char *wh = hex_of(32 * 16, DRK_DT_F16, wh_at);
  char *th = replace_all(k_f8_half, "WH", wh);
  ref = parse(th);
  g = parse(th);
  free(wh);
  free(th);
  CHECK(apply_fp8(g, true, &d));
  check_consistent(g, "fp8 half model");
  CHECK(count_f8_mm(g) == 1);
  CHECK(g->outputs[0]->dtype == DRK_DT_F16 && strcmp(g->outputs[0]->name, "y") == 0);
  drk_tensor_t hin[1];
  fill_inputs(ref, hin, 1.0);
  double eh = compare(ref, g, hin);
  printf("fp8 (f16 model): rel. L2 error %.3g\n", eh);
  CHECK(eh <= 6e-2 && eh > 1e-3);
  drk_tensor_free(&hin[0]);
  drk_graph_destroy(ref);
  drk_graph_destroy(g);

  /* the output head stays f16 unless fp8_head: here every matmul of k_f8 is a head (its
   * result reaches an output through Relu or directly); a matmul feeding another stays fp8 */
  g = f8_graph();
  CHECK(apply(g, DRK_PREC_FP8, DRK_MMP_HIGHEST, 90, &d));
  check_consistent(g, "fp8 heads");
  CHECK(count_f8_mm(g) == 0);
  CHECK_DT(g, "h", DRK_DT_F16);
  drk_graph_destroy(g);
  static const char *k_two =
      "graph @two(%x: f32[4, 16]) -> (%y) {\n"
      "  %w1: f32[16, 16] = const hex\"W\"\n"
      "  %w2: f32[16, 16] = const hex\"W\"\n"
      "  %h: f32[4, 16] = MatMul(%x, %w1)\n"
      "  %r: f32[4, 16] = Relu(%h)\n"
      "  %s: f32[4, 16] = MatMul(%r, %w2)\n"
      "  %y: f32[4, 16] = Reshape(%s, %shp)\n"
      "  return %y\n"
      "}\n";
  char *w = hex_of(16 * 16, DRK_DT_F32, wh_at), *t1 = replace_all(k_two, "W", w);
  char *t2 = replace_all(t1, "%y: f32[4, 16] = Reshape(%s, %shp)", "%y: f32[4, 16] = Identity(%s)");
  g = parse(t2);
  CHECK(apply(g, DRK_PREC_FP8, DRK_MMP_HIGHEST, 90, &d));
  check_consistent(g, "fp8 two layers");
  CHECK(count_f8_mm(g) == 1);
  const drk_value_t *hv = find_value(g, "h"), *sv = find_value(g, "s");
  CHECK(hv && hv->def && hv->def->op == DRK_OP_CAST && sv && sv->def && sv->def->op == DRK_OP_MATMUL &&
        sv->def->inputs[0]->dtype == DRK_DT_F16);
  drk_graph_destroy(g);
  /* a residual Add (two activations) ends the head: both matmuls run in fp8 */
  char *t3 = replace_all(t1, "%y: f32[4, 16] = Reshape(%s, %shp)", "%y: f32[4, 16] = Add(%s, %r)");
  g = parse(t3);
  CHECK(apply(g, DRK_PREC_FP8, DRK_MMP_HIGHEST, 90, &d));
  check_consistent(g, "fp8 residual");
  CHECK(count_f8_mm(g) == 2);
  drk_graph_destroy(g);
  /* tied weights (one constant read by both matmuls): quantized once */
  char *t4 = replace_all(t3, "MatMul(%r, %w2)", "MatMul(%r, %w1)");
  g = parse(t4);
  CHECK(apply(g, DRK_PREC_FP8, DRK_MMP_HIGHEST, 90, &d));
  check_consistent(g, "fp8 tied");
  CHECK(count_f8_mm(g) == 2);
  size_t n_q = 0;
  for (size_t i = 0; i < g->n_consts; i++) n_q += g->consts[i]->dtype == DRK_DT_F8E4M3;
  CHECK(n_q == 1);
  drk_graph_destroy(g);
  free(w), free(t1), free(t2), free(t3), free(t4);
}

/* drk_f32_to_f16_n (the F16C path) gives the scalar form's bits: every exponent, the rounding
 * boundaries, subnormals, the overflow edge (65504 / 65520), infinities and NaNs, at every
 * position of an 8-lane group and at an unaligned source. */
static void test_f16_bulk(void) {
  enum { N = 1 << 16 };
  static float src[N + 1];
  static uint16_t got[N + 1];
  uint64_t s = 7;
  const uint32_t edges[] = {0x477fe000u, 0x477ff000u, 0x477fefffu, 0x477ff001u, 0x7f800000u, 0x7fc00001u,
                            0x7f800001u, 0x38800000u, 0x387fffffu, 0x33000000u, 0x33000001u, 0x00000001u};
  for (int i = 0; i < N; i++) {
    uint32_t u = (uint32_t)drk_splitmix64(&s);
    if (i % 4 == 0) u = (u & 0x80001fffu) | ((uint32_t)(100 + i % 60) << 23); /* near f16's range */
    if (i % 97 == 0) u = edges[(i / 97) % 12] | (u & 0x80000000u);
    memcpy(&src[i], &u, 4);
  }
  for (int off = 0; off < 2; off++) {
    for (int sat = 0; sat < 2; sat++) {
      drk_f32_to_f16_n((const unsigned char *)src + off * 4, got, N - 1, sat);
      int bad = 0;
      for (int i = 0; i < N - 1; i++) {
        uint16_t want = drk_f32_to_f16(src[i + off]);
        if (sat && (want & 0x7fff) == 0x7c00 && isfinite(src[i + off])) want = (uint16_t)((want & 0x8000) | 0x7bff);
        bad += got[i] != want;
      }
      CHECK(bad == 0);
    }
  }
  /* a source at 2 bytes past alignment (scalar path) */
  unsigned char raw[4 * 9 + 2];
  memcpy(raw + 2, src, 4 * 9);
  drk_f32_to_f16_n(raw + 2, got, 9, false);
  for (int i = 0; i < 9; i++) CHECK(got[i] == drk_f32_to_f16(src[i]));
}

/* ---- --accuracy-budget: per-node choices, tf32, the search (passes/precision_auto.h) ---- */

static drk_node_t *node_of(const drk_graph_t *g, const char *result) {
  const drk_value_t *v = find_value(g, result);
  return v && v->kind == DRK_VALUE_NODE ? v->def : NULL;
}

/* A graph copy prints as the graph, and a pass on the copy leaves the graph alone. */
static void test_clone(void) {
  drk_graph_t *g = f8_graph();
  char *a = print_str(g);
  drk_graph_t *c = drk_graph_clone(g);
  CHECK(c != NULL);
  char *b = print_str(c);
  CHECK(strcmp(a, b) == 0);
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  CHECK(apply(c, DRK_PREC_FP8, DRK_MMP_HIGHEST, 90, &d));
  char *a2 = print_str(g);
  CHECK(strcmp(a, a2) == 0);
  check_consistent(c, "clone fp8");
  free(a), free(b), free(a2);
  drk_graph_destroy(c);
  drk_graph_destroy(g);
}

/* node_choice: one MatMul tf32, its Add f16, the Gemm bf16; then only the MatMul tf32, whose
 * result must equal the f32 product of operands rounded to tf32 beforehand (and differ from
 * the f32 one). */
static void test_choice(void) {
  drk_graph_t *g = mm_graph();
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  uint8_t *ch = malloc(g->next_node_id + 1);
  memset(ch, DRK_PREC_FP32, g->next_node_id + 1);
  ch[node_of(g, "h")->id] = DRK_PREC_TF32;
  ch[node_of(g, "y")->id] = DRK_PREC_FP16;
  ch[node_of(g, "z")->id] = DRK_PREC_BF16;
  drk_precision_options_t o = {DRK_PREC_AUTO, DRK_MMP_HIGHEST, 90, true, NULL, false, ch, g->next_node_id};
  CHECK(drk_pass_apply_precision(g, &o, &d));
  CHECK_DT(g, "h", DRK_DT_F32);
  CHECK(drk_node_attr_int(node_of(g, "h"), "tf32", 0) == 1);
  CHECK_DT(g, "y.f16", DRK_DT_F16);
  CHECK_DT(g, "z.bf16", DRK_DT_BF16);
  CHECK_DT(g, "y", DRK_DT_F32);
  check_consistent(g, "choice");
  free(ch);
  drk_graph_destroy(g);

  /* tf32 alone, against operands rounded by hand */
  drk_graph_t *t = mm_graph(), *r = mm_graph(), *f = mm_graph();
  ch = malloc(t->next_node_id + 1);
  memset(ch, DRK_PREC_FP32, t->next_node_id + 1);
  ch[node_of(t, "h")->id] = DRK_PREC_TF32;
  drk_precision_options_t ot = {DRK_PREC_AUTO, DRK_MMP_HIGHEST, 90, true, NULL, false, ch, t->next_node_id};
  CHECK(drk_pass_apply_precision(t, &ot, &d));
  drk_value_t *w = find_value(r, "w");
  uint32_t *wr = drk_arena_alloc(r->arena, w->nbytes);
  memcpy(wr, w->data, w->nbytes);
  for (size_t i = 0; i < w->nbytes / 4; i++) wr[i] = drk_tf32_round_bits(wr[i]);
  w->data = wr;
  drk_tensor_t in[1], inr[1], ot_[2], or_[2], of_[2];
  fill_inputs(t, in, 1.0);
  fill_inputs(r, inr, 1.0);
  for (int64_t i = 0; i < drk_tensor_numel(&inr[0]); i++) {
    uint32_t u;
    memcpy(&u, (unsigned char *)inr[0].data + 4 * i, 4);
    u = drk_tf32_round_bits(u);
    memcpy((unsigned char *)inr[0].data + 4 * i, &u, 4);
  }
  CHECK(drk_interp_run(t, in, ot_, &d) && drk_interp_run(r, inr, or_, &d) && drk_interp_run(f, in, of_, &d));
  double same = drk_tensor_rel_error(&ot_[0], &or_[0]), off = drk_tensor_rel_error(&ot_[0], &of_[0]);
  CHECK(same == 0);
  CHECK(off > 1e-6 && off < 2e-3);
  CHECK(drk_tensor_rel_error(&ot_[1], &of_[1]) == 0); /* the Gemm stayed f32 */
  for (int i = 0; i < 2; i++) drk_tensor_free(&ot_[i]), drk_tensor_free(&or_[i]), drk_tensor_free(&of_[i]);
  drk_tensor_free(&in[0]);
  drk_tensor_free(&inr[0]);
  free(ch);
  drk_graph_destroy(t), drk_graph_destroy(r), drk_graph_destroy(f);
  /* tf32 rounding: ties away from zero, 10 mantissa bits */
  CHECK(drk_tf32_round_bits(0x3f801000u) == 0x3f802000u);
  CHECK(drk_tf32_round_bits(0xbf801000u) == 0xbf802000u);
  CHECK(drk_tf32_round_bits(0x3f800fffu) == 0x3f800000u);
  CHECK(drk_tf32_round_bits(0x7fc00001u) == 0x7fc00001u);
}

/* The search on the fp8 test graph: every output within each budget; a looser budget chooses
 * a faster mix; fp8 only offered when every target has it; a budget only fp32 meets. */
static void test_auto(void) {
  drk_graph_t *g = f8_graph();
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_tensor_t in[2], ref[4];
  fill_inputs(g, in, 1.0);
  CHECK(drk_interp_run(g, in, ref, &d));
  drk_precision_options_t base = {DRK_PREC_AUTO, DRK_MMP_HIGHEST, 90, true, NULL, false, NULL, 0};
  const double budgets[3] = {6e-2, 1e-3, 1e-9};
  int fast[3] = {0}; /* the sum of the groups' slowness */
  for (int b = 0; b < 3; b++) {
    drk_precision_auto_t a;
    CHECK(drk_precision_auto_choose(g, &base, budgets[b], in, ref, &a, &d));
    CHECK(a.n_outputs == 4 && a.n_groups >= 3);
    for (size_t i = 0; i < a.n_outputs; i++) CHECK(a.outputs[i].error <= budgets[b]);
    bool f8_offered = false;
    for (size_t k = 0; k < a.n_groups; k++) {
      const drk_precision_group_t *gr = &a.groups[k];
      f8_offered |= gr->levels[0] == DRK_PREC_FP8;
      drk_precision_t p = gr->levels[gr->level]; /* slowness: fp8 0, fp16/bf16 1, tf32 2, fp32 3 */
      fast[b] += p == DRK_PREC_FP8 ? 0 : p == DRK_PREC_FP16 || p == DRK_PREC_BF16 ? 1 : p == DRK_PREC_TF32 ? 2 : 3;
    }
    CHECK(f8_offered);
    /* the choice applied to a copy measures what the search says */
    drk_graph_t *c = drk_graph_clone(g);
    drk_precision_options_t o = base;
    o.node_choice = a.node_choice, o.n_node_choice = a.n_node_choice;
    CHECK(drk_pass_apply_precision(c, &o, &d));
    check_consistent(c, "auto choice");
    drk_tensor_t out[4];
    CHECK(drk_interp_run(c, in, out, &d));
    for (int i = 0; i < 4; i++) {
      drk_check_t ck;
      drk_interp_check(&out[i], &ref[i], budgets[b], &ck);
      CHECK(ck.pass);
      CHECK(fabs((ck.ref_zero ? ck.abs_max : ck.rel) - a.outputs[i].error) <= 1e-12);
      drk_tensor_free(&out[i]);
    }
    drk_graph_destroy(c);
    drk_precision_auto_free(&a);
  }
  printf("auto on the fp8 graph: slowness %d (6e-2), %d (1e-3), %d (1e-9)\n", fast[0], fast[1], fast[2]);
  CHECK(fast[0] < fast[1] && fast[1] < fast[2]);
  /* no fp8 target: never offered */
  base.target_has_fp8 = false;
  base.target_name = "sm_87";
  drk_precision_auto_t a;
  CHECK(drk_precision_auto_choose(g, &base, 6e-2, in, ref, &a, &d));
  for (size_t k = 0; k < a.n_groups; k++)
    for (int l = 0; l < a.groups[k].n_levels; l++) CHECK(a.groups[k].levels[l] != DRK_PREC_FP8);
  CHECK(a.no_fp8 && strcmp(a.no_fp8, "sm_87") == 0);
  drk_precision_auto_free(&a);
  /* budgets */
  double v = 0;
  CHECK(drk_precision_budget_parse("1e-2", &v) && v == 1e-2);
  CHECK(!drk_precision_budget_parse("0", &v) && !drk_precision_budget_parse("1", &v) &&
        !drk_precision_budget_parse("nan", &v) && !drk_precision_budget_parse("-1e-3", &v) &&
        !drk_precision_budget_parse("1e-2x", &v) && !drk_precision_budget_parse("", &v));
  for (int i = 0; i < 2; i++) drk_tensor_free(&in[i]);
  for (int i = 0; i < 4; i++) drk_tensor_free(&ref[i]);
  drk_graph_destroy(g);
}

static int run_unit(void) {
  test_clone();
  test_choice();
  test_auto();
  test_f16_bulk();
  test_norm_patterns(DRK_PREC_FP16);
  test_norm_patterns(DRK_PREC_BF16);
  test_naive_would_fail();
  test_casts();
  test_rotary(DRK_PREC_FP16);
  test_rotary(DRK_PREC_BF16);
  test_rotary_folded(DRK_PREC_FP16);
  test_rotary_folded(DRK_PREC_BF16);
  test_medium_and_options();
  test_fp8_fallback();
  test_fp8();
  if (!failures) printf("OK\n");
  return check_status("test_precision");
}

/* ---------------------------------------------------------------------------------------- */

static drk_graph_t *load(const char *dir, const char *bind, drk_diag_t *d) {
  char path[4096];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  drk_graph_t *g = drk_onnx_import(path, d);
  if (!g) return NULL;
  if ((bind && *bind && strcmp(bind, "-") != 0 && !drk_graph_bind_dims(g, bind, d)) ||
      !drk_pass_pipeline_canonicalize(g, d)) {
    drk_graph_destroy(g);
    return NULL;
  }
  return g;
}

static bool prec_arg(const char *s, drk_precision_options_t *o) {
  memset(o, 0, sizeof *o);
  o->target_sm = 80;
  if (strcmp(s, "medium") == 0) {
    o->precision = DRK_PREC_FP32;
    o->matmul = DRK_MMP_MEDIUM;
    return true;
  }
  if (!drk_precision_parse(s, &o->precision)) return false;
  if (o->precision == DRK_PREC_FP8) { /* as for sm_90 (and gfx942) */
    o->target_sm = 90;
    o->target_has_fp8 = true;
  }
  return true;
}

static int run_model(const char *dir, const char *bind, const char *prec, bool lower) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_precision_options_t o;
  if (!prec_arg(prec, &o)) {
    fprintf(stderr, "bad precision '%s'\n", prec);
    return 2;
  }
  drk_graph_t *ref = load(dir, bind, &d), *g = load(dir, bind, &d);
  if (!ref || !g) return 1;
  if (!drk_pass_apply_precision(g, &o, &d)) {
    fprintf(stderr, "FAIL: %s: the pass reported an error\n", dir);
    return 1;
  }
  bool fp8 = o.precision == DRK_PREC_FP8;
  drk_dtype_t T = fp8 ? DRK_DT_F8E4M3 : o.precision == DRK_PREC_FP16 ? DRK_DT_F16 : DRK_DT_BF16;
  double tol = fp8 ? 6e-2 : 1e-2;
  int rc = 0;
  if (lower) {
    /* list every node the lowering does not take, then lower for real */
    int n_bad = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
      const drk_node_t *n = g->nodes[i];
      const char *why = NULL;
      if (n->dead || drk_lower_node_supported(n, &why)) continue;
      const drk_value_t *x = n->n_inputs ? n->inputs[0] : NULL;
      fprintf(stderr, "not lowered: %s %%%s (input %s): %s\n", drk_op_name(n->op), n->outputs[0]->name,
              x ? drk_dtype_name(x->dtype) : "-", why ? why : "?");
      n_bad++;
    }
    drk_lowered_t l;
    drk_lower_options_t lo;
    memset(&lo, 0, sizeof lo); /* fields the lowering adds later default to zero */
    lo.target_sm = o.target_sm;
    lo.allow_tf32 = drk_precision_allow_tf32(&o);
    if (!drk_lower_graph(g, &lo, &l, &d)) {
      fprintf(stderr, "FAIL: %s (%s) does not lower (%d errors, %d unsupported nodes)\n", dir, prec, d.n_errors, n_bad);
      rc = 1;
    } else {
      bool vok = drk_tile_verify(l.module, &d);
      printf("%s %s: lowered to %zu kernels%s\n", dir, prec, l.module->n_kernels, vok ? "" : " (DO NOT VERIFY)");
      if (!vok) rc = 1;
      drk_lowered_destroy(&l);
    }
    drk_graph_destroy(ref);
    drk_graph_destroy(g);
    return rc;
  }
  if (!check_consistent(g, dir)) rc = 1;
  /* the interface is unchanged */
  if (g->n_inputs != ref->n_inputs || g->n_outputs != ref->n_outputs) rc = 1;
  for (size_t i = 0; !rc && i < g->n_inputs; i++)
    if (g->inputs[i]->dtype != ref->inputs[i]->dtype || strcmp(g->inputs[i]->name, ref->inputs[i]->name) != 0) rc = 1;
  for (size_t i = 0; !rc && i < g->n_outputs; i++)
    if (g->outputs[i]->dtype != ref->outputs[i]->dtype || strcmp(g->outputs[i]->name, ref->outputs[i]->name) != 0)
      rc = 1;
  if (rc) fprintf(stderr, "FAIL: %s: the interface changed\n", dir);
  /* no f32 weights of any size left (medium: only those not feeding matmuls; fp8: f32
   * per-channel scales and biases, vectors, stay) */
  size_t big_f32 = 0, n_t = 0;
  for (size_t i = 0; i < g->n_consts; i++) {
    const drk_value_t *v = g->consts[i];
    int64_t longest = 1;
    for (int k = 0; k < v->shape.rank; k++)
      if (v->shape.dims[k].size > longest) longest = v->shape.dims[k].size;
    bool vec = drk_shape_numel(&v->shape) == longest;
    if (v->dtype == DRK_DT_F32 && v->nbytes >= 1024 && o.matmul != DRK_MMP_MEDIUM && !(fp8 && vec)) big_f32++;
  }
  for (size_t i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i]->dead && drk_precision_node_dtype(g->nodes[i]) == (o.matmul == DRK_MMP_MEDIUM ? DRK_DT_BF16 : T))
      n_t++;
  if (big_f32) {
    fprintf(stderr, "FAIL: %s: %zu large f32 constants left\n", dir, big_f32);
    rc = 1;
  }
  if (n_t == 0) {
    fprintf(stderr, "FAIL: %s: no node computes in the target dtype\n", dir);
    rc = 1;
  }
  /* numerics against the f32 graph, on the model's own test inputs */
  drk_tensor_t in[8];
  DRK_ASSERT(ref->n_inputs <= 8);
  for (size_t i = 0; i < ref->n_inputs; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/test_data_set_0/input_%zu.pb", dir, i);
    if (!drk_tensor_read_pb(path, &in[i], NULL, &d)) return 1;
  }
  double e = compare(ref, g, in);
  for (size_t i = 0; i < ref->n_inputs; i++) drk_tensor_free(&in[i]);
  printf("%s %s: rel. L2 error vs f32 graph %.3g (tolerance %.0e)\n", dir, prec, e, tol);
  if (!(e <= tol)) {
    fprintf(stderr, "FAIL: %s: error %.3g\n", dir, e);
    rc = 1;
  }
  drk_precision_report(g, stdout);
  drk_graph_destroy(ref);
  drk_graph_destroy(g);
  return rc;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "unit") == 0) return run_unit();
  if (argc >= 5 && strcmp(argv[1], "model") == 0) return run_model(argv[2], argv[3], argv[4], false);
  if (argc >= 5 && strcmp(argv[1], "lower") == 0) return run_model(argv[2], argv[3], argv[4], true);
  fprintf(stderr, "usage: test_precision unit | model DIR BIND PREC | lower DIR BIND PREC\n");
  return 2;
}
