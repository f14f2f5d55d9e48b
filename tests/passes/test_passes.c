/* Tests of the graph passes: shape inference, constant folding, dead-code elimination.
 * Graphs are built with the builder API. Run one test by name (`test_passes NAME`), or all
 * without arguments. Fresh symbols made by inference print as "?" in expectations. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "ir/interp.h"
#include "ir/tensor.h"
#include "lower/lower.h"
#include "passes/passes.h"
#include "passes/plan_memory.h"
#include "tests/common/check.h"

static const char *shape_str(const drk_value_t *v) {
  static char bufs[4][512];
  static int k;
  char *b = bufs[k++ & 3];
  const drk_shape_t *s = &v->shape;
  if (s->rank < 0) { snprintf(b, 512, "unknown"); return b; }
  size_t o = 0;
  o += (size_t)snprintf(b + o, 512 - o, "%s[", drk_dtype_name(v->dtype));
  for (int i = 0; i < s->rank; i++) {
    const drk_dim_t *d = &s->dims[i];
    const char *sep = i ? "," : "";
    if (d->sym && strncmp(d->sym, DRK_FRESH_SYM_PREFIX, strlen(DRK_FRESH_SYM_PREFIX)) == 0)
      o += (size_t)snprintf(b + o, 512 - o, "%s?", sep);
    else if (d->sym) o += (size_t)snprintf(b + o, 512 - o, "%s%s", sep, d->sym);
    else o += (size_t)snprintf(b + o, 512 - o, "%s%lld", sep, (long long)d->size);
  }
  snprintf(b + o, 512 - o, "]");
  return b;
}

#define CHECK_SHAPE(v, want)                                                          \
  do {                                                                                \
    const char *got_ = shape_str(v);                                                  \
    if (strcmp(got_, want) != 0) check_report(__FILE__, __LINE__, #v, ": got %s, want %s", got_, want); \
  } while (0)

/* dims like "N,3,224": numbers are static, anything else a symbol; "" is a scalar. */
static drk_shape_t dims(drk_graph_t *g, const char *spec) {
  drk_dim_t d[16];
  int r = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", spec);
  for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
    char *end;
    long long v = strtoll(t, &end, 10);
    if (*end == 0) d[r].size = v, d[r].sym = NULL;
    else d[r].size = -1, d[r].sym = t;
    r++;
  }
  return drk_graph_shape(g, r, d);
}

static drk_value_t *input(drk_graph_t *g, const char *name, drk_dtype_t t, const char *spec) {
  return drk_graph_add_input(g, name, t, dims(g, spec));
}

static drk_value_t *ints(drk_graph_t *g, const char *name, int rank, int n, ...) {
  int64_t v[32];
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) v[i] = va_arg(ap, int64_t);
  va_end(ap);
  int64_t d[1] = {n};
  return drk_graph_add_const_copy(g, name, DRK_DT_I64, drk_graph_shape_static(g, rank, d), v, sizeof(int64_t) * (size_t)n);
}
#define I(x) ((int64_t)(x))

static drk_value_t *f32s(drk_graph_t *g, const char *name, const char *spec) {
  drk_shape_t s = dims(g, spec);
  int64_t n = drk_shape_numel(&s);
  float *p = drk_arena_alloc(g->arena, sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) p[i] = (float)i * 0.5f;
  return drk_graph_add_const(g, name, DRK_DT_F32, s, p, sizeof(float) * (size_t)n);
}

static drk_loc_t loc_named(const char *name, int idx) {
  drk_loc_t l = drk_loc_none;
  l.file = "model.onnx";
  l.node_name = name;
  l.node_index = idx;
  return l;
}

static int node_counter;
static drk_node_t *node(drk_graph_t *g, drk_op_t op, const char *out, int n_out, int n_in, ...) {
  drk_value_t *ins[16];
  va_list ap;
  va_start(ap, n_in);
  for (int i = 0; i < n_in; i++) ins[i] = va_arg(ap, drk_value_t *);
  va_end(ap);
  const char *names[8] = {0};
  char nb[8][64];
  for (int i = 0; i < n_out && out; i++) {
    if (i == 0) names[0] = out;
    else { snprintf(nb[i], sizeof nb[i], "%s_%d", out, i); names[i] = nb[i]; }
  }
  char nn[64];
  snprintf(nn, sizeof nn, "%s_node", out ? out : "anon");
  drk_loc_t l = loc_named(drk_graph_str(g, nn), node_counter++);
  return drk_graph_add_node(g, op, n_in, ins, n_out, names, l);
}
#define OUT(n) ((n)->outputs[0])

static bool infer_ok(drk_graph_t *g) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  bool ok = drk_pass_infer_shapes(g, &d);
  CHECK(ok && d.n_errors == 0);
  return ok;
}

/* Runs inference expecting exactly one error containing every needle. */
static void infer_expect_error(drk_graph_t *g, const char *n1, const char *n2, const char *n3) {
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  bool ok = drk_pass_infer_shapes(g, &d);
  CHECK(!ok);
  CHECK(d.n_errors == 1);
  const char *needles[3] = {n1, n2, n3};
  for (int i = 0; i < 3; i++)
    if (needles[i] && !strstr(d.first, needles[i])) {
      fprintf(stderr, "error message \"%s\" lacks \"%s\"\n", d.first, needles[i]);
      failures++;
    }
}

static size_t live_nodes(const drk_graph_t *g) {
  size_t k = 0;
  for (size_t i = 0; i < g->n_nodes; i++) k += !g->nodes[i]->dead;
  return k;
}

/* ---- shape inference ---- */
static void test_broadcast_symbolic(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *a = input(g, "a", DRK_DT_F32, "N,1,3");
  drk_value_t *b = input(g, "b", DRK_DT_F32, "1,4,3");
  drk_value_t *c = input(g, "c", DRK_DT_F32, "N,3");
  drk_value_t *m = input(g, "m", DRK_DT_F32, "M,3");
  drk_value_t *s = input(g, "s", DRK_DT_F32, "");
  drk_node_t *n1 = node(g, DRK_OP_ADD, "ab", 1, 2, a, b);
  drk_node_t *n2 = node(g, DRK_OP_MUL, "cm", 1, 2, c, m);
  drk_node_t *n3 = node(g, DRK_OP_SUB, "cc", 1, 2, c, c);
  drk_node_t *n4 = node(g, DRK_OP_LESS, "cs", 1, 2, c, s);
  drk_node_t *n5 = node(g, DRK_OP_WHERE, "w", 1, 3, OUT(n4), a, c);
  drk_node_t *n6 = node(g, DRK_OP_MAX, "mx", 1, 3, a, b, s);
  drk_node_t *n7 = node(g, DRK_OP_ADD, "n5", 1, 2, c, input(g, "five", DRK_DT_F32, "5,1"));
  infer_ok(g);
  CHECK_SHAPE(OUT(n1), "f32[N,4,3]");
  CHECK_SHAPE(OUT(n2), "f32[?,3]");
  CHECK_SHAPE(OUT(n3), "f32[N,3]");
  CHECK_SHAPE(OUT(n4), "bool[N,3]");
  CHECK_SHAPE(OUT(n5), "f32[N,N,3]");
  CHECK_SHAPE(OUT(n6), "f32[N,4,3]");
  CHECK_SHAPE(OUT(n7), "f32[5,3]"); /* N must be 5 or 1 */
  /* idempotent: fresh symbols are stable */
  const char *first = OUT(n2)->shape.dims[0].sym;
  infer_ok(g);
  CHECK(strcmp(first, OUT(n2)->shape.dims[0].sym) == 0);
  drk_graph_destroy(g);
}

static void test_matmul(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *q = input(g, "q", DRK_DT_F16, "B,1,S,64");
  drk_value_t *k = input(g, "k", DRK_DT_F16, "12,64,T");
  drk_value_t *v = input(g, "v", DRK_DT_F16, "64");
  drk_value_t *w = input(g, "w", DRK_DT_F16, "B,64,10");
  drk_node_t *n1 = node(g, DRK_OP_MATMUL, "qk", 1, 2, q, k);
  drk_node_t *n2 = node(g, DRK_OP_MATMUL, "vw", 1, 2, v, w);
  drk_node_t *n3 = node(g, DRK_OP_MATMUL, "qv", 1, 2, q, v);
  drk_value_t *a = input(g, "a", DRK_DT_F32, "M,K");
  drk_value_t *bt = input(g, "bt", DRK_DT_F32, "N,K");
  drk_node_t *n4 = node(g, DRK_OP_GEMM, "gemm", 1, 3, a, bt, input(g, "bias", DRK_DT_F32, "N"));
  drk_node_set_int(g, n4, "transB", 1);
  infer_ok(g);
  CHECK_SHAPE(OUT(n1), "f16[B,12,S,T]");
  CHECK_SHAPE(OUT(n2), "f16[B,10]");
  CHECK_SHAPE(OUT(n3), "f16[B,1,S]");
  CHECK_SHAPE(OUT(n4), "f32[M,N]");
  drk_graph_destroy(g);
}

static void test_conv_pool(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *x = input(g, "x", DRK_DT_F32, "N,3,224,224");
  drk_node_t *c1 = node(g, DRK_OP_CONV, "c1", 1, 2, x, f32s(g, "w1", "64,3,7,7"));
  int64_t p3[4] = {3, 3, 3, 3}, s2[2] = {2, 2}, d2[2] = {2, 2};
  drk_node_set_ints(g, c1, "pads", 4, p3);
  drk_node_set_ints(g, c1, "strides", 2, s2);
  drk_node_t *c2 = node(g, DRK_OP_CONV, "c2", 1, 2, OUT(c1), f32s(g, "w2", "32,16,3,3"));
  drk_node_set_ints(g, c2, "dilations", 2, d2);
  drk_node_set_int(g, c2, "group", 4);
  drk_node_t *c3 = node(g, DRK_OP_CONV, "c3", 1, 2, OUT(c2), f32s(g, "w3", "8,32,3,3"));
  drk_node_set_string(g, c3, "auto_pad", "SAME_UPPER");
  drk_node_set_ints(g, c3, "strides", 2, s2);
  drk_node_t *p = node(g, DRK_OP_MAX_POOL, "mp", 1, 1, OUT(c3));
  int64_t k3[2] = {3, 3}, p1[4] = {1, 1, 1, 1};
  drk_node_set_ints(g, p, "kernel_shape", 2, k3);
  drk_node_set_ints(g, p, "strides", 2, s2);
  drk_node_set_ints(g, p, "pads", 4, p1);
  drk_node_t *pc = node(g, DRK_OP_AVERAGE_POOL, "ap", 1, 1, OUT(c3));
  drk_node_set_ints(g, pc, "kernel_shape", 2, k3);
  drk_node_set_ints(g, pc, "strides", 2, s2);
  drk_node_set_int(g, pc, "ceil_mode", 1);
  drk_node_t *ct = node(g, DRK_OP_CONV_TRANSPOSE, "ct", 1, 2, OUT(c3), f32s(g, "wt", "8,4,4,4"));
  drk_node_set_ints(g, ct, "strides", 2, s2);
  drk_node_set_ints(g, ct, "pads", 4, p1);
  drk_node_set_int(g, ct, "group", 2);
  drk_node_t *gp = node(g, DRK_OP_GLOBAL_AVERAGE_POOL, "gap", 1, 1, OUT(c3));
  infer_ok(g);
  CHECK_SHAPE(OUT(c1), "f32[N,64,112,112]"); /* (224+6-7)/2+1 */
  CHECK_SHAPE(OUT(c2), "f32[N,32,108,108]"); /* 112-(2*2+1)+1 */
  CHECK_SHAPE(OUT(c3), "f32[N,8,54,54]");    /* ceil(108/2) */
  CHECK_SHAPE(OUT(p), "f32[N,8,27,27]");     /* (54+2-3)/2+1 */
  CHECK_SHAPE(OUT(pc), "f32[N,8,27,27]");    /* ceil((54-3)/2)+1 = 27 */
  CHECK_SHAPE(OUT(ct), "f32[N,8,108,108]");  /* 2*53+4-2 */
  CHECK_SHAPE(OUT(gp), "f32[N,8,1,1]");
  drk_graph_destroy(g);

  /* channels that do not match the weight */
  g = drk_graph_create("t");
  x = input(g, "x", DRK_DT_F32, "1,3,8,8");
  node(g, DRK_OP_CONV, "bad", 1, 2, x, f32s(g, "w", "4,5,3,3"));
  infer_expect_error(g, "Conv", "input channels 3", "bad_node");
  drk_graph_destroy(g);
}

static void test_reshape(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *x = input(g, "x", DRK_DT_F32, "B,S,768");
  drk_node_t *r1 = node(g, DRK_OP_RESHAPE, "r1", 1, 2, x, ints(g, "s1", 1, 4, I(0), I(0), I(12), I(-1)));
  drk_node_t *r2 = node(g, DRK_OP_RESHAPE, "r2", 1, 2, x, ints(g, "s2", 1, 2, I(-1), I(768)));
  drk_node_t *r3 = node(g, DRK_OP_RESHAPE, "r3", 1, 2, OUT(r1), ints(g, "s3", 1, 3, I(0), I(-1), I(768)));
  drk_value_t *y = input(g, "y", DRK_DT_F32, "2,3,4");
  drk_node_t *r4 = node(g, DRK_OP_RESHAPE, "r4", 1, 2, y, ints(g, "s4", 1, 1, I(-1)));
  drk_node_t *r5 = node(g, DRK_OP_RESHAPE, "r5", 1, 2, y, ints(g, "s5", 1, 3, I(4), I(0), I(-1)));
  drk_node_t *f = node(g, DRK_OP_FLATTEN, "fl", 1, 1, x);
  infer_ok(g);
  CHECK_SHAPE(OUT(r1), "f32[B,S,12,64]");
  CHECK_SHAPE(OUT(r2), "f32[B*S,768]"); /* the -1 a product of the symbols left */
  CHECK_SHAPE(OUT(r3), "f32[B,S,768]");
  CHECK_SHAPE(OUT(r4), "f32[24]");
  CHECK_SHAPE(OUT(r5), "f32[4,3,2]");
  CHECK_SHAPE(OUT(f), "f32[B,S*768]");
  drk_graph_destroy(g);

  g = drk_graph_create("t");
  y = input(g, "y", DRK_DT_F32, "2,3");
  node(g, DRK_OP_RESHAPE, "bad", 1, 2, y, ints(g, "s", 1, 2, I(4), I(2)));
  infer_expect_error(g, "Reshape", "[2,3]", "[4,2]");
  drk_graph_destroy(g);
  g = drk_graph_create("t");
  y = input(g, "y", DRK_DT_F32, "2,3");
  node(g, DRK_OP_RESHAPE, "bad", 1, 2, y, ints(g, "s", 1, 2, I(4), I(-1)));
  infer_expect_error(g, "Reshape", "not a multiple", "bad_node");
  drk_graph_destroy(g);
}

static void test_transpose_split_slice(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *x = input(g, "x", DRK_DT_BF16, "N,3,224,225");
  drk_node_t *t1 = node(g, DRK_OP_TRANSPOSE, "t1", 1, 1, x);
  int64_t perm[4] = {0, 2, 3, 1};
  drk_node_set_ints(g, t1, "perm", 4, perm);
  drk_node_t *t2 = node(g, DRK_OP_TRANSPOSE, "t2", 1, 1, x);
  drk_value_t *y = input(g, "y", DRK_DT_F32, "N,12,10");
  drk_node_t *s1 = node(g, DRK_OP_SPLIT, "s1", 2, 2, y, ints(g, "sp", 1, 2, I(4), I(8)));
  drk_node_set_int(g, s1, "axis", 1);
  drk_node_t *s2 = node(g, DRK_OP_SPLIT, "s2", 3, 1, y);
  drk_node_set_int(g, s2, "axis", -1);
  drk_node_set_int(g, s2, "num_outputs", 3);
  drk_node_t *sl1 = node(g, DRK_OP_SLICE, "sl1", 1, 5, y, ints(g, "st", 1, 2, I(1), I(-5)),
                         ints(g, "en", 1, 2, I(INT64_MAX), I(1000)), ints(g, "ax", 1, 2, I(1), I(2)),
                         ints(g, "steps", 1, 2, I(2), I(1)));
  drk_node_t *sl2 = node(g, DRK_OP_SLICE, "sl2", 1, 5, y, ints(g, "st2", 1, 1, I(-1)), ints(g, "en2", 1, 1, I(INT64_MIN)),
                         ints(g, "ax2", 1, 1, I(-1)), ints(g, "steps2", 1, 1, I(-3)));
  drk_node_t *sl3 = node(g, DRK_OP_SLICE, "sl3", 1, 3, y, ints(g, "st3", 1, 1, I(0)), ints(g, "en3", 1, 1, I(INT64_MAX)));
  drk_node_t *ga = node(g, DRK_OP_GATHER, "ga", 1, 2, y, ints(g, "ix", 1, 2, I(0), I(1)));
  drk_node_set_int(g, ga, "axis", 1);
  drk_node_t *cc = node(g, DRK_OP_CONCAT, "cc", 1, 3, y, s1->outputs[0], y);
  drk_node_set_int(g, cc, "axis", 1);
  drk_node_t *cc2 = node(g, DRK_OP_CONCAT, "cc2", 1, 2, y, y);
  drk_node_set_int(g, cc2, "axis", 0);
  drk_node_t *un = node(g, DRK_OP_UNSQUEEZE, "un", 1, 2, y, ints(g, "uax", 1, 2, I(0), I(-1)));
  drk_node_t *sq = node(g, DRK_OP_SQUEEZE, "sq", 1, 2, OUT(un), ints(g, "sax", 1, 1, I(-1)));
  infer_ok(g);
  CHECK_SHAPE(OUT(t1), "bf16[N,224,225,3]");
  CHECK_SHAPE(OUT(t2), "bf16[225,224,3,N]");
  CHECK_SHAPE(s1->outputs[0], "f32[N,4,10]");
  CHECK_SHAPE(s1->outputs[1], "f32[N,8,10]");
  CHECK_SHAPE(s2->outputs[0], "f32[N,12,4]");
  CHECK_SHAPE(s2->outputs[2], "f32[N,12,2]");
  CHECK_SHAPE(OUT(sl1), "f32[N,6,5]");
  CHECK_SHAPE(OUT(sl2), "f32[N,12,4]"); /* 9,6,3,0 */
  CHECK_SHAPE(OUT(sl3), "f32[N,12,10]");
  CHECK_SHAPE(OUT(ga), "f32[N,2,10]");
  CHECK_SHAPE(OUT(cc), "f32[N,28,10]");
  CHECK_SHAPE(OUT(cc2), "f32[?,12,10]");
  CHECK_SHAPE(OUT(un), "f32[1,N,12,10,1]");
  CHECK_SHAPE(OUT(sq), "f32[1,N,12,10]");
  drk_graph_destroy(g);
}

static void test_misc_ops(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *x = input(g, "x", DRK_DT_F32, "B,S,64");
  drk_node_t *rs = node(g, DRK_OP_REDUCE_MEAN, "rs", 1, 2, x, ints(g, "ax", 1, 1, I(-1)));
  drk_node_t *rk = node(g, DRK_OP_REDUCE_SUM, "rk", 1, 2, x, ints(g, "ax2", 1, 2, I(0), I(2)));
  drk_node_set_int(g, rk, "keepdims", 0);
  drk_node_t *am = node(g, DRK_OP_ARG_MAX, "am", 1, 1, x);
  drk_node_set_int(g, am, "axis", 2);
  drk_node_t *tk = node(g, DRK_OP_TOP_K, "tk", 2, 2, x, ints(g, "k", 1, 1, I(5)));
  drk_node_t *ln = node(g, DRK_OP_LAYER_NORMALIZATION, "ln", 3, 2, x, f32s(g, "gamma", "64"));
  drk_node_t *pd = node(g, DRK_OP_PAD, "pd", 1, 2, x, ints(g, "pads", 1, 6, I(0), I(1), I(2), I(0), I(3), I(4)));
  drk_node_t *rg = node(g, DRK_OP_RANGE, "rg", 1, 3, ints(g, "r0", 0, 1, I(2)), ints(g, "r1", 0, 1, I(11)),
                        ints(g, "r2", 0, 1, I(3)));
  drk_node_t *oh = node(g, DRK_OP_ONE_HOT, "oh", 1, 3, input(g, "idx", DRK_DT_I64, "B,S"), ints(g, "depth", 0, 1, I(10)),
                        f32s(g, "onoff", "2"));
  drk_node_t *cs = node(g, DRK_OP_CONSTANT_OF_SHAPE, "cs", 1, 1, ints(g, "csh", 1, 2, I(3), I(4)));
  drk_node_t *sh = node(g, DRK_OP_SHAPE, "sh", 1, 1, x);
  drk_node_set_int(g, sh, "start", 1);
  drk_node_t *ca = node(g, DRK_OP_CAST, "ca", 1, 1, x);
  drk_node_set_int(g, ca, "to", 10);
  drk_node_t *es = node(g, DRK_OP_EINSUM, "es", 1, 2, x, input(g, "wt", DRK_DT_F32, "64,K"));
  drk_node_set_string(g, es, "equation", "bsh,hk->bsk");
  drk_node_t *rz = node(g, DRK_OP_RESIZE, "rz", 1, 3, input(g, "img", DRK_DT_F32, "N,3,16,20"), NULL,
                        drk_graph_add_const_copy(g, "scales", DRK_DT_F32, dims(g, "4"),
                                                 (float[]){1, 1, 2, 1.5f}, 16));
  drk_node_t *u = node(g, DRK_OP_RELU, "u", 1, 1, input(g, "unk", DRK_DT_F32, "1"));
  OUT(u)->shape.rank = -1;
  u->inputs[0]->shape.rank = -1; /* unknown-rank input: unknown result, no error */
  drk_node_t *u2 = node(g, DRK_OP_ADD, "u2", 1, 2, OUT(u), x);
  infer_ok(g);
  CHECK_SHAPE(OUT(rs), "f32[B,S,1]");
  CHECK_SHAPE(OUT(rk), "f32[S]");
  CHECK_SHAPE(OUT(am), "i64[B,S,1]");
  CHECK_SHAPE(tk->outputs[0], "f32[B,S,5]");
  CHECK_SHAPE(tk->outputs[1], "i64[B,S,5]");
  CHECK_SHAPE(ln->outputs[0], "f32[B,S,64]");
  CHECK_SHAPE(ln->outputs[1], "f32[B,S,1]");
  CHECK_SHAPE(OUT(pd), "f32[B,?,70]");
  CHECK_SHAPE(OUT(rg), "i64[3]");
  CHECK_SHAPE(OUT(oh), "f32[B,S,10]");
  CHECK_SHAPE(OUT(cs), "f32[3,4]");
  CHECK_SHAPE(OUT(sh), "i64[2]");
  CHECK_SHAPE(OUT(ca), "f16[B,S,64]");
  CHECK_SHAPE(OUT(es), "f32[B,S,K]");
  CHECK_SHAPE(OUT(rz), "f32[N,3,32,30]");
  CHECK_SHAPE(OUT(u), "unknown");
  CHECK_SHAPE(OUT(u2), "unknown");
  drk_graph_destroy(g);
}

static void test_errors(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *a = input(g, "a", DRK_DT_F32, "2,3");
  drk_value_t *b = input(g, "b", DRK_DT_F32, "4,3");
  drk_graph_add_node(g, DRK_OP_ADD, 2, (drk_value_t *[]){a, b}, 1, NULL, loc_named("my_add", 7));
  infer_expect_error(g, "model.onnx: node 'my_add' (#7): error: Add: cannot broadcast shapes [2,3] and [4,3]", NULL, NULL);
  drk_graph_destroy(g);

  g = drk_graph_create("t");
  a = input(g, "a", DRK_DT_F32, "B,2,3");
  b = input(g, "b", DRK_DT_F32, "4,5");
  node(g, DRK_OP_MATMUL, "mm", 1, 2, a, b);
  infer_expect_error(g, "'mm_node'", "MatMul: inner dimensions differ", "[B,2,3] x [4,5]");
  drk_graph_destroy(g);

  g = drk_graph_create("t");
  a = input(g, "a", DRK_DT_F32, "2,3");
  b = input(g, "b", DRK_DT_F32, "2,3,1");
  drk_node_t *c = node(g, DRK_OP_CONCAT, "cat", 1, 2, a, b);
  drk_node_set_int(g, c, "axis", 0);
  infer_expect_error(g, "Concat: inputs differ in rank", "[2,3,1]", "cat_node");
  drk_graph_destroy(g);

  g = drk_graph_create("t");
  a = input(g, "a", DRK_DT_F32, "2,N");
  b = input(g, "b", DRK_DT_F32, "3,N");
  c = node(g, DRK_OP_CONCAT, "cat", 1, 2, a, b);
  drk_node_set_int(g, c, "axis", 1);
  infer_expect_error(g, "Concat: inputs differ in dimension 0", "[3,N]", NULL);
  drk_graph_destroy(g);

  /* a declared (value_info) shape that disagrees with the op */
  g = drk_graph_create("t");
  a = input(g, "a", DRK_DT_F32, "2,3");
  c = node(g, DRK_OP_RELU, "r", 1, 1, a);
  OUT(c)->shape = dims(g, "2,4");
  infer_expect_error(g, "result 'r' is declared with shape [2,4]", "[2,3]", NULL);
  drk_graph_destroy(g);

  /* a declared shape that agrees refines: static declared dims win over symbols */
  g = drk_graph_create("t");
  a = input(g, "a", DRK_DT_F32, "N,3");
  c = node(g, DRK_OP_RELU, "r", 1, 1, a);
  OUT(c)->shape = dims(g, "8,3");
  infer_ok(g);
  CHECK_SHAPE(OUT(c), "f32[8,3]");
  drk_graph_destroy(g);
}

/* ---- folding and DCE ---- */

/* PyTorch's BERT self-attention export: x.view(x.size(0), x.size(1), 12, 64). */
static drk_node_t *bert_chain(drk_graph_t *g, drk_value_t *x, const char *pfx) {
  char nm[64];
#define NM(s) (snprintf(nm, sizeof nm, "%s_%s", pfx, s), nm)
  drk_node_t *sh = node(g, DRK_OP_SHAPE, NM("shape"), 1, 1, x);
  drk_node_t *g0 = node(g, DRK_OP_GATHER, NM("g0"), 1, 2, OUT(sh), ints(g, NM("i0"), 0, 1, I(0)));
  drk_node_t *sh2 = node(g, DRK_OP_SHAPE, NM("shape2"), 1, 1, x);
  drk_node_t *g1 = node(g, DRK_OP_GATHER, NM("g1"), 1, 2, OUT(sh2), ints(g, NM("i1"), 0, 1, I(1)));
  drk_node_t *u0 = node(g, DRK_OP_UNSQUEEZE, NM("u0"), 1, 2, OUT(g0), ints(g, NM("a0"), 1, 1, I(0)));
  drk_node_t *u1 = node(g, DRK_OP_UNSQUEEZE, NM("u1"), 1, 2, OUT(g1), ints(g, NM("a1"), 1, 1, I(0)));
  drk_node_t *cat = node(g, DRK_OP_CONCAT, NM("cat"), 1, 4, OUT(u0), OUT(u1), ints(g, NM("c12"), 1, 1, I(12)),
                         ints(g, NM("c64"), 1, 1, I(64)));
  drk_node_set_int(g, cat, "axis", 0);
  return node(g, DRK_OP_RESHAPE, NM("view"), 1, 2, x, OUT(cat));
#undef NM
}

static void test_bert_chain(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *x = input(g, "x", DRK_DT_F32, "batch,seq,768");
  drk_node_t *r = bert_chain(g, x, "q");
  drk_graph_add_output(g, OUT(r));
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  CHECK(drk_pass_pipeline_canonicalize(g, &d));
  CHECK(d.n_errors == 0);
  CHECK_SHAPE(OUT(r), "f32[batch,seq,12,64]");
  CHECK(g->n_nodes == 1 && g->nodes[0] == r);
  CHECK(r->inputs[1]->kind == DRK_VALUE_CONST);
  CHECK_SHAPE(r->inputs[1], "i64[4]");
  const int64_t *sv = r->inputs[1]->data;
  CHECK(sv[0] == 0 && sv[1] == 0 && sv[2] == 12 && sv[3] == 64);
  CHECK(g->n_consts == 1); /* the chain's constants went with it */
  CHECK(g->outputs[0] == OUT(r));
  drk_graph_destroy(g);

  /* GPT-2's merge-heads: x.view(x.size()[:-2] + (x.size(-2) * x.size(-1),)) with a Slice
   * of the shape and arithmetic on static dims */
  g = drk_graph_create("t");
  x = input(g, "x", DRK_DT_F32, "batch,seq,12,64");
  drk_node_t *sh = node(g, DRK_OP_SHAPE, "sh", 1, 1, x);
  drk_node_t *sl = node(g, DRK_OP_SLICE, "sl", 1, 3, OUT(sh), ints(g, "s0", 1, 1, I(0)), ints(g, "s1", 1, 1, I(-2)));
  drk_node_t *ga = node(g, DRK_OP_GATHER, "ga", 1, 2, OUT(sh), ints(g, "gi", 0, 1, I(-2)));
  drk_node_t *gb = node(g, DRK_OP_GATHER, "gb", 1, 2, OUT(sh), ints(g, "gj", 0, 1, I(-1)));
  drk_node_t *mu = node(g, DRK_OP_MUL, "mu", 1, 2, OUT(ga), OUT(gb));
  drk_node_t *un = node(g, DRK_OP_UNSQUEEZE, "un", 1, 2, OUT(mu), ints(g, "ua", 1, 1, I(0)));
  drk_node_t *cat = node(g, DRK_OP_CONCAT, "cat", 1, 2, OUT(sl), OUT(un));
  drk_node_set_int(g, cat, "axis", 0);
  r = node(g, DRK_OP_RESHAPE, "merged", 1, 2, x, OUT(cat));
  drk_graph_add_output(g, OUT(r));
  drk_diag_init(&d, stderr);
  CHECK(drk_pass_infer_shapes(g, &d));
  CHECK_SHAPE(OUT(r), "f32[batch,seq,768]");
  CHECK(drk_pass_pipeline_canonicalize(g, &d));
  CHECK(g->n_nodes == 1 && g->nodes[0] == r);
  sv = r->inputs[1]->data;
  CHECK(r->inputs[1]->kind == DRK_VALUE_CONST && sv[0] == 0 && sv[1] == 0 && sv[2] == 768);
  drk_graph_destroy(g);
}

static void test_expand_from_shape(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *m = input(g, "mask", DRK_DT_BOOL, "B,1,S");
  drk_value_t *y = input(g, "y", DRK_DT_F32, "B,12,S");
  drk_node_t *sh = node(g, DRK_OP_SHAPE, "ysh", 1, 1, y);
  drk_node_t *e = node(g, DRK_OP_EXPAND, "ex", 1, 2, m, OUT(sh));
  drk_graph_add_output(g, OUT(e));
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  CHECK(drk_pass_pipeline_canonicalize(g, &d));
  CHECK_SHAPE(OUT(e), "bool[B,12,S]");
  CHECK(g->n_nodes == 1);
  const int64_t *sv = e->inputs[1]->data;
  CHECK(e->inputs[1]->kind == DRK_VALUE_CONST && sv[0] == 1 && sv[1] == 12 && sv[2] == 1);
  drk_graph_destroy(g);
}

static void test_fold_static_shapes(void) {
  /* Shape/Size of static values fold without the interpreter; a graph output that becomes
   * a constant keeps its name */
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *x = input(g, "x", DRK_DT_F32, "N,3,5");
  drk_node_t *sh = node(g, DRK_OP_SHAPE, "shp", 1, 1, input(g, "s", DRK_DT_F32, "2,7"));
  drk_node_t *sz = node(g, DRK_OP_SIZE, "size", 1, 1, input(g, "t", DRK_DT_F32, "4,5"));
  drk_node_t *xs = node(g, DRK_OP_SHAPE, "xs", 1, 1, x);
  drk_node_t *g2 = node(g, DRK_OP_GATHER, "dim2", 1, 2, OUT(xs), ints(g, "i", 0, 1, I(2)));
  drk_node_t *g0 = node(g, DRK_OP_GATHER, "dim0", 1, 2, OUT(xs), ints(g, "j", 0, 1, I(0)));
  drk_graph_add_output(g, OUT(sh));
  drk_graph_add_output(g, OUT(sz));
  drk_graph_add_output(g, OUT(g2));
  drk_graph_add_output(g, OUT(g0));
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  CHECK(drk_pass_pipeline_canonicalize(g, &d));
  CHECK(g->outputs[0]->kind == DRK_VALUE_CONST && strcmp(g->outputs[0]->name, "shp") == 0);
  CHECK_SHAPE(g->outputs[0], "i64[2]");
  const int64_t *v = g->outputs[0]->data;
  CHECK(v[0] == 2 && v[1] == 7);
  CHECK(g->outputs[1]->kind == DRK_VALUE_CONST && *(const int64_t *)g->outputs[1]->data == 20);
  CHECK_SHAPE(g->outputs[1], "i64[]");
  CHECK(g->outputs[2]->kind == DRK_VALUE_CONST && *(const int64_t *)g->outputs[2]->data == 5);
  CHECK_SHAPE(g->outputs[2], "i64[]");
  CHECK(g->outputs[3]->kind != DRK_VALUE_CONST); /* N is symbolic: Shape -> Gather stays */
  CHECK(g->n_nodes == 2);
  drk_graph_destroy(g);
}

static void test_fold_interp(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *x = input(g, "x", DRK_DT_F32, "4");
  drk_value_t *a = f32s(g, "a", "4");
  drk_node_t *n1 = node(g, DRK_OP_MUL, "twice", 1, 2, a, a);
  drk_node_t *n2 = node(g, DRK_OP_ADD, "use", 1, 2, x, OUT(n1));
  drk_node_t *big = node(g, DRK_OP_CONSTANT_OF_SHAPE, "big", 1, 1, ints(g, "bs", 1, 2, I(1024), I(1024)));
  drk_node_t *n3 = node(g, DRK_OP_REDUCE_SUM, "bigsum", 1, 1, OUT(big));
  drk_graph_add_output(g, OUT(n2));
  drk_graph_add_output(g, OUT(n3));
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  CHECK(drk_pass_pipeline_canonicalize(g, &d));
  CHECK(!big->dead); /* 1 Mi elements: over the limit */
  CHECK(n1->dead);
  CHECK(n2->inputs[1]->kind == DRK_VALUE_CONST && strcmp(n2->inputs[1]->name, "twice") == 0);
  const float *p = n2->inputs[1]->data;
  CHECK(p[3] == 2.25f); /* 1.5 * 1.5 */
  CHECK(g->n_nodes == 3);
  drk_graph_destroy(g);
}

/* A Slice of a constant it alone reads folds whatever its size (the constant shrinks); with
 * a second reader it would duplicate the bytes, so it stays a node. */
static void test_fold_shrinking_select(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *x = input(g, "x", DRK_DT_F32, "250,300");
  drk_value_t *t = f32s(g, "t", "300,300"), *u = f32s(g, "u", "300,300"); /* 90000 elements each */
  drk_value_t *st = ints(g, "st", 1, 1, I(50)), *en = ints(g, "en", 1, 1, I(300)), *ax = ints(g, "ax", 1, 1, I(0));
  drk_node_t *s1 = node(g, DRK_OP_SLICE, "s1", 1, 4, t, st, en, ax);
  drk_node_t *s2 = node(g, DRK_OP_SLICE, "s2", 1, 4, u, st, en, ax);
  drk_node_t *u2 = node(g, DRK_OP_NEG, "u2", 1, 1, u);
  drk_node_t *a = node(g, DRK_OP_ADD, "a", 1, 2, x, OUT(s1));
  drk_node_t *b = node(g, DRK_OP_ADD, "b", 1, 2, OUT(a), OUT(s2));
  drk_graph_add_output(g, OUT(b));
  drk_graph_add_output(g, OUT(u2));
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  CHECK(drk_pass_pipeline_canonicalize(g, &d));
  CHECK(s1->dead && a->inputs[1]->kind == DRK_VALUE_CONST && strcmp(a->inputs[1]->name, "s1") == 0);
  CHECK_SHAPE(a->inputs[1], "f32[250,300]"); /* 75000 elements: over the size limit */
  CHECK(((const float *)a->inputs[1]->data)[0] == 50 * 300 * 0.5f); /* t[50, 0] */
  CHECK(!s2->dead); /* u has another reader */
  drk_graph_destroy(g);
}

static void test_dce(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *x = input(g, "x", DRK_DT_F32, "N,4");
  drk_value_t *unused_in = input(g, "unused", DRK_DT_F32, "3");
  (void)unused_in;
  drk_value_t *w = f32s(g, "w", "4,4");
  drk_value_t *w2 = f32s(g, "w2", "4,4");
  drk_node_t *a = node(g, DRK_OP_MATMUL, "a", 1, 2, x, w);
  drk_node_t *b = node(g, DRK_OP_MATMUL, "b", 1, 2, x, w2); /* unused: goes, with w2 */
  drk_node_t *c = node(g, DRK_OP_RELU, "c", 1, 1, OUT(b));
  drk_node_t *e = node(g, DRK_OP_TANH, "e", 1, 1, OUT(a));
  drk_node_t *sp = node(g, DRK_OP_SPLIT, "sp", 2, 2, OUT(e), ints(g, "sz", 1, 2, I(1), I(3)));
  drk_node_set_int(g, sp, "axis", 1);
  drk_graph_add_output(g, sp->outputs[1]); /* only one result used: the node stays */
  CHECK(infer_ok(g));
  CHECK(drk_pass_eliminate_dead(g));
  CHECK(g->n_nodes == 3);
  CHECK(g->nodes[0] == a && g->nodes[1] == e && g->nodes[2] == sp);
  CHECK(b->dead && c->dead);
  CHECK(g->n_consts == 2); /* w and sz */
  CHECK(g->n_inputs == 2);
  CHECK(!drk_pass_eliminate_dead(g)); /* nothing left to do */
  /* a node already marked dead goes even if used by nothing else */
  e->dead = true;
  sp->inputs[0] = OUT(a);
  CHECK(drk_pass_eliminate_dead(g));
  CHECK(g->n_nodes == 2 && live_nodes(g) == 2);
  drk_graph_destroy(g);
}

/* Every op with hostile inputs (unknown rank, scalars, symbolic, huge and negative
 * constants, over-long shape tensors): inference must report or infer, never crash. Run
 * under ASan/UBSan to mean much. */
static void test_all_ops_no_crash(void) {
  int64_t wild[40];
  for (int i = 0; i < 40; i++) wild[i] = (i % 5 == 0) ? INT64_MAX : (i % 5 == 1) ? INT64_MIN : (i % 5 == 2) ? -1 : i;
  for (int op = 0; op < DRK_OP_COUNT; op++) {
    const drk_op_info_t *info = drk_op_info((drk_op_t)op);
    for (int cfg = 0; cfg < 7; cfg++) {
      drk_graph_t *g = drk_graph_create("t");
      int n_in = info->max_inputs < 0 ? 3 : info->max_inputs;
      int n_out = info->min_outputs > 2 ? info->min_outputs : (info->max_outputs < 0 || info->max_outputs > 1 ? 2 : 1);
      drk_value_t *ins[8];
      for (int i = 0; i < n_in; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "i%d", i);
        switch (cfg) {
          case 0: ins[i] = input(g, nm, DRK_DT_F32, ""); ins[i]->shape.rank = -1; break;
          case 1: ins[i] = input(g, nm, DRK_DT_F32, ""); break;
          case 2: ins[i] = i ? ints(g, nm, 1, 3, I(-1), I(0), I(5)) : input(g, nm, DRK_DT_F32, "3"); break;
          case 3: ins[i] = i ? ints(g, nm, 1, 3, I(1), I(-1), I(INT64_MAX)) : input(g, nm, DRK_DT_F32, "N,3,1,5"); break;
          case 4: {
            int64_t d[1] = {8};
            ins[i] = i ? drk_graph_add_const_copy(g, nm, DRK_DT_I64, drk_graph_shape_static(g, 1, d), wild, 64)
                       : input(g, nm, DRK_DT_F32, "2,3,4,5");
            break;
          }
          case 5: {
            int64_t d[1] = {40}, ones[40];
            for (int j = 0; j < 40; j++) ones[j] = 1;
            ins[i] = i ? drk_graph_add_const_copy(g, nm, DRK_DT_I64, drk_graph_shape_static(g, 1, d), ones, sizeof ones)
                       : input(g, nm, DRK_DT_F32, "2,3,4,5");
            break;
          }
          default: ins[i] = input(g, nm, i ? DRK_DT_I64 : DRK_DT_F32, i ? "0" : "1,1,0,7"); break;
        }
      }
      drk_node_t *n = drk_graph_add_node(g, (drk_op_t)op, n_in, ins, n_out, NULL, drk_loc_none);
      if (cfg == 4) {
        drk_node_set_ints(g, n, "kernel_shape", 2, wild);
        drk_node_set_ints(g, n, "pads", 4, wild);
        drk_node_set_ints(g, n, "strides", 2, wild + 2);
        drk_node_set_ints(g, n, "perm", 4, wild);
        drk_node_set_int(g, n, "axis", INT64_MIN);
        drk_node_set_int(g, n, "blocksize", INT64_MAX);
        drk_node_set_string(g, n, "equation", "ab,bc->ac");
      }
      for (int i = 0; i < n_out; i++) drk_graph_add_output(g, n->outputs[i]);
      drk_diag_t d;
      drk_diag_init(&d, NULL);
      drk_pass_infer_shapes(g, &d);
      drk_pass_infer_shapes(g, &d);
      drk_pass_fold_constants(g, &d);
      drk_pass_eliminate_dead(g);
      drk_graph_destroy(g);
    }
  }
  CHECK(true);
}

typedef struct {
  const char *name;
  void (*fn)(void);
} test_t;

/* Conv -> BN folds (with and without a Conv bias); a Conv whose result has a second user
 * does not, and its BN becomes x * a + b; the graph computes what the original does. */
static drk_graph_t *bn_graph(bool bias, bool second_use) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *x = input(g, "x", DRK_DT_F32, "1,3,6,6");
  drk_node_t *c = node(g, DRK_OP_CONV, "c", 1, bias ? 3 : 2, x, f32s(g, "w", "4,3,3,3"), f32s(g, "b", "4"));
  int64_t p1[4] = {1, 1, 1, 1};
  drk_node_set_ints(g, c, "pads", 4, p1);
  float sc[4] = {0.5f, -1.25f, 2, 1}, bb[4] = {0.1f, 0.2f, -0.3f, 0}, mu[4] = {1, -2, 0.5f, 0}, va[4] = {0.25f, 4, 1, 2};
  drk_shape_t s4 = dims(g, "4");
  drk_node_t *bn = node(g, DRK_OP_BATCH_NORMALIZATION, "bn", 1, 5, OUT(c), drk_graph_add_const_copy(g, "sc", DRK_DT_F32, s4, sc, 16),
                        drk_graph_add_const_copy(g, "bb", DRK_DT_F32, s4, bb, 16),
                        drk_graph_add_const_copy(g, "mu", DRK_DT_F32, s4, mu, 16),
                        drk_graph_add_const_copy(g, "va", DRK_DT_F32, s4, va, 16));
  drk_node_set_float(g, bn, "epsilon", 1e-3);
  drk_graph_add_output(g, OUT(bn));
  if (second_use) drk_graph_add_output(g, OUT(c));
  return g;
}

static void test_fold_batchnorm(void) {
  for (int k = 0; k < 3; k++) {
    drk_diag_t d;
    drk_diag_init(&d, stderr);
    drk_graph_t *g = bn_graph(k != 1, k == 2), *ref = bn_graph(k != 1, k == 2);
    CHECK(drk_pass_pipeline_canonicalize(g, &d) && drk_pass_pipeline_canonicalize(ref, &d));
    size_t n = 99;
    CHECK(drk_pass_fold_batchnorm(g, &n));
    CHECK(n == (k == 2 ? 0u : 1u));
    size_t live = 0, bns = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
      live += !g->nodes[i]->dead;
      bns += !g->nodes[i]->dead && g->nodes[i]->op == DRK_OP_BATCH_NORMALIZATION;
    }
    /* the BN the Conv cannot take (its result has a second user) becomes x * a + b */
    CHECK(live == (k == 2 ? 3u : 1u));
    CHECK(bns == 0);
    CHECK(drk_graph_verify(g, &d));
    drk_tensor_t in;
    CHECK(drk_tensor_alloc(&in, DRK_DT_F32, 4, (int64_t[]){1, 3, 6, 6}));
    for (int64_t i = 0; i < 108; i++) ((float *)in.data)[i] = (float)((i * 37) % 11) * 0.3f - 1.5f;
    drk_tensor_t a[2] = {0}, b[2] = {0};
    CHECK(drk_interp_run(g, &in, a, &d) && drk_interp_run(ref, &in, b, &d));
    double err = drk_tensor_rel_error(&a[0], &b[0]);
    if (err > 1e-6) fprintf(stderr, "folded rel. error %g (case %d)\n", err, k), failures++;
    for (int i = 0; i < 2; i++) drk_tensor_free(&a[i]), drk_tensor_free(&b[i]);
    drk_tensor_free(&in);
    drk_graph_destroy(g), drk_graph_destroy(ref);
  }
}

/* Pointwise Convs become Reshape -> MatMul -> Add -> Reshape and compute the same; a 3x3 or
 * strided Conv stays. */
static drk_graph_t *pw_graph(int kernel, int stride, bool bias) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *x = input(g, "x", DRK_DT_F32, "2,3,5,4");
  char ws[32];
  snprintf(ws, sizeof ws, "6,3,%d,%d", kernel, kernel);
  drk_node_t *c = node(g, DRK_OP_CONV, "c", 1, bias ? 3 : 2, x, f32s(g, "w", ws), f32s(g, "b", "6"));
  int64_t st[2] = {stride, stride};
  drk_node_set_ints(g, c, "strides", 2, st);
  drk_node_t *r = node(g, DRK_OP_RELU, "r", 1, 1, OUT(c));
  drk_graph_add_output(g, OUT(r));
  return g;
}

static void test_conv_to_matmul(void) {
  for (int k = 0; k < 4; k++) {
    drk_diag_t d;
    drk_diag_init(&d, stderr);
    int kernel = k == 2 ? 3 : 1, stride = k == 3 ? 2 : 1;
    drk_graph_t *g = pw_graph(kernel, stride, k != 1), *ref = pw_graph(kernel, stride, k != 1);
    CHECK(drk_pass_pipeline_canonicalize(g, &d) && drk_pass_pipeline_canonicalize(ref, &d));
    size_t n = 99;
    CHECK(drk_pass_conv_to_matmul(g, &n));
    CHECK(n == (k >= 2 ? 0u : 1u));
    drk_pass_eliminate_dead(g);
    CHECK(drk_pass_infer_shapes(g, &d) && drk_graph_verify(g, &d));
    bool has_conv = false;
    for (size_t i = 0; i < g->n_nodes; i++) has_conv |= !g->nodes[i]->dead && g->nodes[i]->op == DRK_OP_CONV;
    CHECK(has_conv == (k >= 2));
    drk_tensor_t in;
    CHECK(drk_tensor_alloc(&in, DRK_DT_F32, 4, (int64_t[]){2, 3, 5, 4}));
    for (int64_t i = 0; i < 120; i++) ((float *)in.data)[i] = (float)((i * 37) % 11) * 0.3f - 1.5f;
    drk_tensor_t a = {0}, b = {0};
    CHECK(drk_interp_run(g, &in, &a, &d) && drk_interp_run(ref, &in, &b, &d));
    CHECK(a.rank == b.rank && drk_tensor_numel(&a) == drk_tensor_numel(&b));
    double err = drk_tensor_rel_error(&a, &b);
    if (err > 1e-6) fprintf(stderr, "conv_to_matmul rel. error %g (case %d)\n", err, k), failures++;
    drk_tensor_free(&a), drk_tensor_free(&b), drk_tensor_free(&in);
    drk_graph_destroy(g), drk_graph_destroy(ref);
  }
}

/* Patch Convs (kernel == stride, ViT's patch embedding) become Reshape -> Transpose ->
 * Reshape -> MatMul by the transposed weight -> Add -> Transpose -> Reshape and compute the
 * same; overlapping patches (stride < kernel), an H that is no multiple of the kernel and
 * padding keep the Conv. */
static size_t count_op(const drk_graph_t *g, drk_op_t op);

static drk_graph_t *patch_graph(int h, int w, int kernel, int stride, int pad) {
  drk_graph_t *g = drk_graph_create("t");
  char xs[32], ws[32];
  snprintf(xs, sizeof xs, "2,3,%d,%d", h, w);
  snprintf(ws, sizeof ws, "8,3,%d,%d", kernel, kernel);
  drk_value_t *x = input(g, "x", DRK_DT_F32, xs);
  drk_node_t *c = node(g, DRK_OP_CONV, "c", 1, 3, x, f32s(g, "w", ws), f32s(g, "b", "8"));
  drk_node_set_ints(g, c, "strides", 2, (int64_t[]){stride, stride});
  drk_node_set_ints(g, c, "kernel_shape", 2, (int64_t[]){kernel, kernel});
  if (pad) drk_node_set_ints(g, c, "pads", 4, (int64_t[]){pad, pad, pad, pad});
  drk_node_t *r = node(g, DRK_OP_RELU, "r", 1, 1, OUT(c));
  drk_graph_add_output(g, OUT(r));
  return g;
}

static void test_conv_to_matmul_patches(void) {
  static const int cases[][5] = {{8, 12, 4, 4, 0}, {12, 8, 2, 2, 0}, {8, 12, 4, 2, 0}, {10, 12, 4, 4, 0}, {8, 12, 4, 4, 1}};
  for (int k = 0; k < (int)DRK_ARRAY_LEN(cases); k++) {
    const int *cs = cases[k];
    bool want = k < 2;
    drk_diag_t d;
    drk_diag_init(&d, stderr);
    drk_graph_t *g = patch_graph(cs[0], cs[1], cs[2], cs[3], cs[4]), *ref = patch_graph(cs[0], cs[1], cs[2], cs[3], cs[4]);
    CHECK(drk_pass_pipeline_canonicalize(g, &d) && drk_pass_pipeline_canonicalize(ref, &d));
    size_t n = 99;
    CHECK(drk_pass_conv_to_matmul(g, &n));
    CHECK(n == (want ? 1u : 0u));
    drk_pass_eliminate_dead(g);
    CHECK(drk_pass_infer_shapes(g, &d) && drk_graph_verify(g, &d));
    CHECK(count_op(g, DRK_OP_CONV) == (want ? 0u : 1u) && count_op(g, DRK_OP_MATMUL) == (want ? 1u : 0u));
    drk_tensor_t in;
    int64_t numel = 2 * 3 * cs[0] * cs[1];
    CHECK(drk_tensor_alloc(&in, DRK_DT_F32, 4, (int64_t[]){2, 3, cs[0], cs[1]}));
    for (int64_t i = 0; i < numel; i++) ((float *)in.data)[i] = (float)((i * 37) % 11) * 0.3f - 1.5f + (float)i * 1e-3f;
    drk_tensor_t a = {0}, b = {0};
    CHECK(drk_interp_run(g, &in, &a, &d) && drk_interp_run(ref, &in, &b, &d));
    CHECK(a.rank == b.rank && drk_tensor_numel(&a) == drk_tensor_numel(&b));
    double err = drk_tensor_rel_error(&a, &b);
    if (err > 1e-6) fprintf(stderr, "conv_to_matmul patches rel. error %g (case %d)\n", err, k), failures++;
    drk_tensor_free(&a), drk_tensor_free(&b), drk_tensor_free(&in);
    drk_graph_destroy(g), drk_graph_destroy(ref);
  }
}

/* Layout pass (passes/layout_nhwc.c) on a small conv net: Conv -> Relu -> MaxPool -> Conv ->
 * per-channel Mul -> residual Add -> Relu -> Add of a broadcast graph input -> AveragePool ->
 * pointwise Conv (a MatMul after conv-to-matmul) -> Clip -> GlobalAveragePool -> Flatten,
 * plus a Softmax over the channels (not layout-agnostic), a ReduceMax over H, W, a channel
 * Concat with a constant and a GlobalMaxPool, and an intermediate graph output. tf_input: the image comes NHWC, through the model's own
 * Transpose (as TF exports do). */
static drk_value_t *wavy(drk_graph_t *g, const char *name, const char *spec, double scale) {
  drk_shape_t s = dims(g, spec);
  int64_t n = drk_shape_numel(&s);
  float *p = drk_arena_alloc(g->arena, sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) p[i] = (float)(scale * sin((double)i * 0.77 + 0.3));
  return drk_graph_add_const(g, name, DRK_DT_F32, s, p, sizeof(float) * (size_t)n);
}

static void set_pool(drk_graph_t *g, drk_node_t *n, int64_t k, int64_t st, int64_t pad) {
  drk_node_set_ints(g, n, "kernel_shape", 2, (int64_t[]){k, k});
  drk_node_set_ints(g, n, "strides", 2, (int64_t[]){st, st});
  drk_node_set_ints(g, n, "pads", 4, (int64_t[]){pad, pad, pad, pad});
}

static drk_graph_t *layout_graph(bool tf_input) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *x = input(g, "x", DRK_DT_F32, tf_input ? "2,10,10,3" : "2,3,10,10"), *yin = input(g, "yin", DRK_DT_F32, "5,1");
  if (tf_input) {
    drk_node_t *t = node(g, DRK_OP_TRANSPOSE, "xt", 1, 1, x);
    drk_node_set_ints(g, t, "perm", 4, (int64_t[]){0, 3, 1, 2});
    x = OUT(t);
  }
  drk_node_t *c1 = node(g, DRK_OP_CONV, "c1", 1, 3, x, wavy(g, "w1", "8,3,3,3", 0.4), wavy(g, "b1", "8", 0.1));
  drk_node_set_ints(g, c1, "pads", 4, (int64_t[]){1, 1, 1, 1});
  drk_node_t *r1 = node(g, DRK_OP_RELU, "r1", 1, 1, OUT(c1));
  drk_node_t *mp = node(g, DRK_OP_MAX_POOL, "mp", 1, 1, OUT(r1));
  set_pool(g, mp, 3, 2, 1);
  drk_node_t *c2 = node(g, DRK_OP_CONV, "c2", 1, 2, OUT(mp), wavy(g, "w2", "8,8,3,3", 0.2));
  drk_node_set_ints(g, c2, "pads", 4, (int64_t[]){1, 1, 1, 1});
  drk_node_t *m2 = node(g, DRK_OP_MUL, "m2", 1, 2, OUT(c2), wavy(g, "s", "8,1,1", 1.5));
  drk_node_t *a = node(g, DRK_OP_ADD, "a", 1, 2, OUT(m2), OUT(mp));
  drk_node_t *r2 = node(g, DRK_OP_RELU, "r2", 1, 1, OUT(a));
  drk_node_t *bb = node(g, DRK_OP_ADD, "bb", 1, 2, OUT(r2), yin);
  drk_node_t *ap = node(g, DRK_OP_AVERAGE_POOL, "ap", 1, 1, OUT(bb));
  set_pool(g, ap, 2, 1, 0);
  drk_node_t *c3 = node(g, DRK_OP_CONV, "c3", 1, 3, OUT(ap), wavy(g, "w3", "16,8,1,1", 0.3), wavy(g, "b3", "16", 0.2));
  drk_node_t *cl = node(g, DRK_OP_CLIP, "cl", 1, 3, OUT(c3), wavy(g, "lo", "", -0.5), wavy(g, "hi", "", 0.9));
  drk_node_t *gp = node(g, DRK_OP_GLOBAL_AVERAGE_POOL, "gp", 1, 1, OUT(cl));
  drk_node_t *f = node(g, DRK_OP_FLATTEN, "f", 1, 1, OUT(gp));
  drk_node_t *sm = node(g, DRK_OP_SOFTMAX, "sm", 1, 1, OUT(r2));
  drk_node_set_int(g, sm, "axis", 1);
  drk_node_t *q = node(g, DRK_OP_REDUCE_MAX, "q", 1, 2, OUT(r2), ints(g, "qa", 1, 2, I(2), I(3)));
  drk_node_set_int(g, q, "keepdims", 0);
  drk_node_t *cc = node(g, DRK_OP_CONCAT, "cc", 1, 3, OUT(r2), OUT(mp), wavy(g, "cw", "2,4,5,5", 1.0));
  drk_node_set_int(g, cc, "axis", -3);
  drk_node_t *gm = node(g, DRK_OP_GLOBAL_MAX_POOL, "gm", 1, 1, OUT(cc));
  drk_graph_add_output(g, OUT(f));
  drk_graph_add_output(g, OUT(sm));
  drk_graph_add_output(g, OUT(q));
  drk_graph_add_output(g, OUT(r1));
  drk_graph_add_output(g, OUT(gm));
  return g;
}

static size_t count_op(const drk_graph_t *g, drk_op_t op) {
  size_t k = 0;
  for (size_t i = 0; i < g->n_nodes; i++) k += !g->nodes[i]->dead && g->nodes[i]->op == op;
  return k;
}

static void layout_check(bool tf_input);

static void test_layout_nhwc(void) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  /* nchw, and auto on f32 convs: nothing happens; nhwc rewrites every conv even when not every
   * target is NVIDIA (auto's choice by dtype and target: tests/driver/cli.sh layout-*) */
  drk_layout_options_t keep[3] = {{.layout = DRK_LAYOUT_NCHW, .nvidia_only = true},
                                  {.layout = DRK_LAYOUT_AUTO, .nvidia_only = true},
                                  {.layout = DRK_LAYOUT_NHWC, .nvidia_only = false}};
  for (int k = 0; k < 3; k++) {
    drk_graph_t *g = layout_graph(false);
    CHECK(drk_pass_pipeline_canonicalize(g, &d));
    drk_layout_stats_t st = {.convs = 99};
    size_t before = live_nodes(g);
    CHECK(drk_pass_layout_nhwc(g, &keep[k], &st));
    CHECK(k == 2 ? st.convs == 3 : st.convs == 0 && live_nodes(g) == before && count_op(g, DRK_OP_CONV) == 3);
    drk_graph_destroy(g);
  }
  for (int tf = 0; tf < 2; tf++)
    layout_check(tf != 0);
}

static void layout_check(bool tf_input) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_graph_t *g = layout_graph(tf_input), *ref = layout_graph(tf_input);
  CHECK(drk_pass_pipeline_canonicalize(g, &d) && drk_pass_pipeline_canonicalize(ref, &d));
  size_t n = 0;
  CHECK(drk_pass_conv_to_matmul(g, &n) && n == 1);
  drk_pass_eliminate_dead(g);
  CHECK(drk_pass_infer_shapes(g, &d));
  drk_layout_options_t o = {.layout = DRK_LAYOUT_NHWC, .nvidia_only = true};
  drk_layout_stats_t st;
  CHECK(drk_pass_layout_nhwc(g, &o, &st));
  drk_pass_eliminate_dead(g);
  CHECK(drk_pass_infer_shapes(g, &d) && drk_graph_verify(g, &d) && d.n_errors == 0);
  /* layout changes: x's at the input (none when it comes NHWC: the model's Transpose
   * cancels), r2's for the Softmax, r1's for the graph output; the broadcast input [5, 1] is
   * re-laid by a view, the final [N, 1, 1, C] by a Reshape */
  size_t want = tf_input ? 2 : 3;
  CHECK(st.convs == 2 && st.pools == 2 && st.transposes == want);
  CHECK(count_op(g, DRK_OP_TRANSPOSE) == want && count_op(g, DRK_OP_CONV) == 0 && count_op(g, DRK_OP_CONV_NHWC) == 2);
  CHECK(count_op(g, DRK_OP_MAX_POOL_NHWC) == 1 && count_op(g, DRK_OP_AVERAGE_POOL_NHWC) == 1);
  CHECK(count_op(g, DRK_OP_GLOBAL_AVERAGE_POOL) == 0 && count_op(g, DRK_OP_REDUCE_MEAN) == 1);
  CHECK(count_op(g, DRK_OP_GLOBAL_MAX_POOL) == 0 && count_op(g, DRK_OP_CONCAT) == 1);
  for (size_t i = 0; i < g->n_outputs; i++) /* the interface keeps names, dtypes and shapes */
    CHECK(strcmp(g->outputs[i]->name, ref->outputs[i]->name) == 0 && drk_shape_equal(&g->outputs[i]->shape, &ref->outputs[i]->shape));
  char *txt = drk_graph_print_string(g, SIZE_MAX, NULL); /* the text form parses back */
  drk_graph_t *back = txt ? drk_graph_parse(txt, strlen(txt), "layout.drkg", &d) : NULL;
  CHECK(back && drk_graph_verify(back, &d));
  if (back) drk_graph_destroy(back);
  free(txt);
  /* the same function, on random inputs */
  drk_tensor_t in[2];
  CHECK(drk_tensor_alloc(&in[0], DRK_DT_F32, 4, tf_input ? (int64_t[]){2, 10, 10, 3} : (int64_t[]){2, 3, 10, 10}) &&
        drk_tensor_alloc(&in[1], DRK_DT_F32, 2, (int64_t[]){5, 1}));
  uint64_t rng = 12345;
  for (int t = 0; t < 2; t++)
    for (int64_t i = 0; i < drk_tensor_numel(&in[t]); i++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      ((float *)in[t].data)[i] = (float)((double)(rng >> 11) * 0x1.0p-53 * 2.0 - 1.0);
    }
  drk_tensor_t a[5] = {0}, b[5] = {0};
  CHECK(drk_interp_run(g, in, a, &d) && drk_interp_run(ref, in, b, &d));
  for (int i = 0; i < 5; i++) {
    CHECK(a[i].rank == b[i].rank && drk_tensor_numel(&a[i]) == drk_tensor_numel(&b[i]));
    double err = drk_tensor_rel_error(&a[i], &b[i]);
    if (!(err <= 1e-6)) fprintf(stderr, "layout output %d rel. error %g\n", i, err), failures++;
    drk_tensor_free(&a[i]), drk_tensor_free(&b[i]);
  }
  drk_tensor_free(&in[0]), drk_tensor_free(&in[1]);
  drk_graph_destroy(g), drk_graph_destroy(ref);
}

/* In-place memory planning (drk_plan_memory_inplace): an elementwise output takes the bytes
 * of a candidate input that dies in its kernel, never of one read later, of a graph input,
 * of a smaller (broadcast) one, and never for a graph output; the lowering declares only
 * identity-offset inputs (not the broadcast one). */
static bool has_pair(const drk_lowered_t *l, const drk_value_t *y, const drk_value_t *x) {
  for (size_t i = 0; i < l->n_inplace; i++)
    if (l->inplace[i].value == y && l->inplace[i].base == x) return true;
  return false;
}

static void test_plan_inplace(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *x = input(g, "x", DRK_DT_F32, "4,64");
  drk_value_t *y = input(g, "y", DRK_DT_F32, "64");
  drk_node_t *r = node(g, DRK_OP_RELU, "r", 1, 1, x);      /* x: graph input */
  drk_node_t *s = node(g, DRK_OP_NEG, "s", 1, 1, OUT(r));  /* r dies here: reused */
  drk_node_t *t = node(g, DRK_OP_NEG, "t", 1, 1, OUT(s));  /* s read again by u: not */
  drk_node_t *u = node(g, DRK_OP_ADD, "u", 1, 2, OUT(t), OUT(s)); /* t dies: reused */
  drk_node_t *c = node(g, DRK_OP_RELU, "c", 1, 1, y);
  drk_node_t *w = node(g, DRK_OP_ADD, "w", 1, 2, OUT(u), OUT(c)); /* c broadcast: not; u: reused */
  drk_node_t *o = node(g, DRK_OP_TANH, "o", 1, 1, OUT(w));        /* graph output: not */
  drk_graph_add_output(g, OUT(o));
  if (!infer_ok(g)) {
    drk_graph_destroy(g);
    return;
  }
  drk_value_alias_t ip[] = {{OUT(r), x}, {OUT(s), OUT(r)}, {OUT(t), OUT(s)}, {OUT(u), OUT(t)},
                            {OUT(w), OUT(c)}, {OUT(w), OUT(u)}, {OUT(o), OUT(w)}};
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_mem_plan_t p0, p1;
  CHECK(drk_plan_memory_scratch(g, NULL, 0, NULL, NULL, 0, &p0, &d));
  CHECK(drk_plan_memory_inplace(g, NULL, 0, NULL, NULL, 0, ip, DRK_ARRAY_LEN(ip), &p1, &d));
  CHECK(p0.offset[OUT(s)->id] != p0.offset[OUT(r)->id]);
  CHECK(p1.offset[OUT(s)->id] == p1.offset[OUT(r)->id]);
  CHECK(p1.offset[OUT(u)->id] == p1.offset[OUT(t)->id]);
  CHECK(p1.offset[OUT(t)->id] != p1.offset[OUT(s)->id]);
  CHECK(p1.offset[OUT(r)->id] != p1.offset[x->id]);
  CHECK(p1.offset[OUT(w)->id] != p1.offset[OUT(c)->id]);
  CHECK(p1.offset[OUT(w)->id] == p1.offset[OUT(u)->id]);
  CHECK(p1.offset[OUT(o)->id] != p1.offset[OUT(w)->id]);
  CHECK(p1.arena_size < p0.arena_size);
  CHECK(p1.naive_size == p0.naive_size);
  drk_mem_plan_free(&p0);
  drk_mem_plan_free(&p1);
  /* what the lowering declares: identity-offset inputs only */
  drk_lower_options_t lo = {.target_sm = 90, .fusion_set = true, .fusion_level = 0};
  drk_lowered_t l;
  bool lowered = drk_lower_graph(g, &lo, &l, &d);
  CHECK(lowered);
  if (!lowered) {
    drk_graph_destroy(g);
    return;
  }
  CHECK(has_pair(&l, OUT(s), OUT(r)) && has_pair(&l, OUT(u), OUT(t)) && has_pair(&l, OUT(u), OUT(s)));
  CHECK(has_pair(&l, OUT(w), OUT(u)) && !has_pair(&l, OUT(w), OUT(c)));
  drk_lowered_destroy(&l);
  drk_graph_destroy(g);
}

/* Placing only what kernels touch (drk_plan_memory_kernels): a value no kernel references gets
 * no range, nor does a view of it; a referenced view places its base; graph inputs and outputs
 * are placed unreferenced; the naive sum is the same. Then the lowering: a fused chain's
 * inner values are unreferenced (drk_lowered_referenced) and unplaced. */
static void test_plan_kernels(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *x = input(g, "x", DRK_DT_F32, "4,64");
  drk_node_t *a = node(g, DRK_OP_RELU, "a", 1, 1, x);
  drk_node_t *b = node(g, DRK_OP_NEG, "b", 1, 1, OUT(a));
  drk_node_t *c = node(g, DRK_OP_TANH, "c", 1, 1, OUT(b));
  drk_node_t *e = node(g, DRK_OP_EXP, "e", 1, 1, OUT(c));
  drk_node_t *o = node(g, DRK_OP_NEG, "o", 1, 1, OUT(e));
  drk_graph_add_output(g, OUT(o));
  if (!infer_ok(g)) {
    drk_graph_destroy(g);
    return;
  }
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  bool *ref = calloc((size_t)g->next_value_id + 1, sizeof *ref);
  drk_value_alias_t al[] = {{OUT(b), OUT(a)}, {OUT(e), OUT(c)}}; /* b a view of a, e of c */
  ref[OUT(e)->id] = true; /* c only through its view e; a and b not at all */
  drk_mem_plan_t p0, p1;
  CHECK(drk_plan_memory_kernels(g, al, 2, NULL, NULL, 0, NULL, 0, NULL, &p0, &d));
  CHECK(drk_plan_memory_kernels(g, al, 2, NULL, NULL, 0, NULL, 0, ref, &p1, &d));
  CHECK(p0.offset[OUT(a)->id] != UINT64_MAX && p0.offset[OUT(b)->id] != UINT64_MAX);
  CHECK(p1.offset[OUT(a)->id] == UINT64_MAX && p1.offset[OUT(b)->id] == UINT64_MAX && p1.size[OUT(a)->id] == 0);
  CHECK(p1.offset[OUT(c)->id] != UINT64_MAX && p1.offset[OUT(e)->id] == p1.offset[OUT(c)->id]);
  CHECK(p1.offset[x->id] != UINT64_MAX && p1.offset[OUT(o)->id] != UINT64_MAX);
  CHECK(p1.naive_size == p0.naive_size && p1.arena_size <= p0.arena_size);
  drk_mem_plan_free(&p0);
  drk_mem_plan_free(&p1);
  free(ref);
  /* the lowering at level 1: one flat kernel reads x and writes o; nothing in between is placed */
  drk_lower_options_t lo = {.target_sm = 90, .fusion_set = true, .fusion_level = 1};
  drk_lowered_t l;
  bool lowered = drk_lower_graph(g, &lo, &l, &d);
  CHECK(lowered);
  if (lowered) {
    bool *r = drk_lowered_referenced(g, &l);
    CHECK(r && r[x->id] && r[OUT(o)->id] && !r[OUT(b)->id] && !r[OUT(c)->id]);
    drk_mem_plan_t p;
    CHECK(drk_lowered_plan_memory(g, &l, &p, &d));
    CHECK(p.offset[OUT(c)->id] == UINT64_MAX && p.offset[OUT(o)->id] != UINT64_MAX);
    drk_mem_plan_free(&p);
    free(r);
    drk_lowered_destroy(&l);
  }
  drk_graph_destroy(g);
}

/* Sibling MatMuls of one x (passes/merge_matmul.c): q [8,6], k [8,4] and (v) [8,5] of x
 * [2,5,8], q read by a Reshape, k by a Transpose, v by a MatMul. bias: 0 none, 1 all three
 * (k's as Add(b [1,1,4], mm)), 2 only q's. sig: k also feeds a Sigmoid. k_out: k is a graph
 * output. f16: x and the weights in f16. */
typedef struct { int bias; bool sig, v, k_out, f16; int merged, groups; } mm_case_t;

static drk_value_t *mm_const(drk_graph_t *g, const char *name, const char *spec, double scale, bool f16) {
  drk_value_t *c = wavy(g, name, spec, scale);
  if (!f16) return c;
  int64_t n = drk_shape_numel(&c->shape);
  uint16_t *h = drk_arena_alloc(g->arena, 2 * (size_t)n);
  for (int64_t i = 0; i < n; i++) h[i] = drk_f32_to_f16(((const float *)c->data)[i]);
  c->dtype = DRK_DT_F16, c->data = h, c->nbytes = 2 * (size_t)n;
  return c;
}

static drk_graph_t *mm_graph(const mm_case_t *c) {
  drk_graph_t *g = drk_graph_create("t");
  drk_dtype_t t = c->f16 ? DRK_DT_F16 : DRK_DT_F32;
  drk_value_t *x = input(g, "x", t, "2,5,8");
  drk_node_t *q = node(g, DRK_OP_MATMUL, "q", 1, 2, x, mm_const(g, "wq", "8,6", 0.5, c->f16));
  drk_node_t *k = node(g, DRK_OP_MATMUL, "k", 1, 2, x, mm_const(g, "wk", "8,4", -0.7, c->f16));
  drk_value_t *qv = OUT(q), *kv = OUT(k);
  if (c->bias) qv = OUT(node(g, DRK_OP_ADD, "qb", 1, 2, qv, mm_const(g, "bq", "6", 0.3, c->f16)));
  if (c->bias == 1) kv = OUT(node(g, DRK_OP_ADD, "kb", 1, 2, mm_const(g, "bk", "1,1,4", -0.2, c->f16), kv));
  drk_graph_add_output(g, OUT(node(g, DRK_OP_RESHAPE, "qr", 1, 2, qv, ints(g, "qs", 1, 4, I(2), I(5), I(2), I(3)))));
  drk_node_t *kt = node(g, DRK_OP_TRANSPOSE, "kt", 1, 1, kv);
  drk_node_set_ints(g, kt, "perm", 3, (int64_t[]){0, 2, 1});
  drk_graph_add_output(g, OUT(kt));
  if (c->sig) drk_graph_add_output(g, OUT(node(g, DRK_OP_SIGMOID, "ks", 1, 1, kv)));
  if (c->k_out) drk_graph_add_output(g, kv);
  if (c->v) {
    drk_node_t *v = node(g, DRK_OP_MATMUL, "v", 1, 2, x, mm_const(g, "wv", "8,5", 0.9, c->f16));
    drk_value_t *vv = OUT(v);
    if (c->bias == 1) vv = OUT(node(g, DRK_OP_ADD, "vb", 1, 2, vv, mm_const(g, "bv", "5", 0.4, c->f16)));
    drk_graph_add_output(g, OUT(node(g, DRK_OP_MATMUL, "vm", 1, 2, vv, mm_const(g, "wo", "5,3", 0.6, c->f16))));
  }
  return g;
}

static int count_live(const drk_graph_t *g, drk_op_t op) {
  int n = 0;
  for (size_t i = 0; i < g->n_nodes; i++) n += !g->nodes[i]->dead && g->nodes[i]->op == op;
  return n;
}

static void test_merge_matmul(void) {
  static const mm_case_t cases[] = {
      {.v = true, .merged = 3, .groups = 1},
      {.bias = 1, .v = true, .merged = 3, .groups = 1},
      {.v = true, .f16 = true, .merged = 3, .groups = 1},
      {.bias = 1, .v = true, .f16 = true, .merged = 3, .groups = 1},
      {.sig = true, .v = true, .merged = 2, .groups = 1}, /* k left alone, q and v merge */
      {.sig = true},                                      /* k left alone: nothing to merge */
      {.bias = 2, .v = true},                             /* mixed: q with a bias, k and v without */
      {.k_out = true, .v = true, .merged = 2, .groups = 1},
      {.bias = 1, .k_out = true, .v = true, .merged = 2, .groups = 1},
  };
  for (size_t ci = 0; ci < DRK_ARRAY_LEN(cases); ci++) {
    const mm_case_t *c = &cases[ci];
    drk_diag_t d;
    drk_diag_init(&d, stderr);
    drk_graph_t *g = mm_graph(c), *ref = mm_graph(c);
    CHECK(drk_pass_pipeline_canonicalize(g, &d) && drk_pass_pipeline_canonicalize(ref, &d));
    int mm0 = count_live(g, DRK_OP_MATMUL), add0 = count_live(g, DRK_OP_ADD);
    size_t groups = 99, merged = 99;
    CHECK(drk_pass_merge_matmul(g, &groups, &merged));
    if (groups != (size_t)c->groups || merged != (size_t)c->merged)
      fprintf(stderr, "merge_matmul case %zu: %zu groups, %zu merged\n", ci, groups, merged), failures++;
    drk_pass_eliminate_dead(g);
    CHECK(drk_pass_infer_shapes(g, &d) && drk_graph_verify(g, &d));
    CHECK(count_live(g, DRK_OP_MATMUL) == mm0 - c->merged + c->groups);
    CHECK(count_live(g, DRK_OP_SLICE) == c->merged);
    CHECK(count_live(g, DRK_OP_ADD) == (c->bias == 1 ? add0 - c->merged + c->groups : add0));
    /* the merged weight is [8, sum N] and the Slices read the last axis */
    for (size_t i = 0; i < g->n_nodes; i++) {
      const drk_node_t *n = g->nodes[i];
      if (n->op == DRK_OP_MATMUL && strstr(OUT(n)->name, "_merged"))
        CHECK(n->inputs[1]->shape.rank == 2 && n->inputs[1]->shape.dims[0].size == 8 &&
              n->inputs[1]->shape.dims[1].size == (c->merged == 3 ? 15 : 11));
      if (n->op == DRK_OP_SLICE) CHECK(n->n_inputs == 4 && n->inputs[3]->kind == DRK_VALUE_CONST);
    }
    CHECK(g->n_outputs == ref->n_outputs);
    for (size_t i = 0; i < g->n_outputs && i < ref->n_outputs; i++)
      CHECK(strcmp(g->outputs[i]->name, ref->outputs[i]->name) == 0);
    drk_tensor_t in;
    CHECK(drk_tensor_alloc(&in, c->f16 ? DRK_DT_F16 : DRK_DT_F32, 3, (int64_t[]){2, 5, 8}));
    for (int64_t i = 0; i < 80; i++) drk_tensor_set_f64(&in, i, (double)((i * 37) % 11) * 0.3 - 1.5);
    drk_tensor_t a[4] = {0}, b[4] = {0};
    CHECK(drk_interp_run(g, &in, a, &d) && drk_interp_run(ref, &in, b, &d));
    for (size_t i = 0; i < g->n_outputs && i < 4; i++) {
      double err = drk_tensor_rel_error(&a[i], &b[i]);
      if (!(err <= 1e-6)) fprintf(stderr, "merge_matmul case %zu output %zu rel. error %g\n", ci, i, err), failures++;
    }
    for (int i = 0; i < 4; i++) drk_tensor_free(&a[i]), drk_tensor_free(&b[i]);
    drk_tensor_free(&in);
    drk_graph_destroy(g), drk_graph_destroy(ref);
  }
}

/* Gemm as MatMul (passes/gemm_to_matmul.c): every attribute form (transA with a computed A,
 * transB with a constant B stored transposed, alpha, beta, a row-vector C and a full C, no C)
 * computes what the Gemm did, and no Gemm is left. */
static drk_graph_t *gemm_graph(int k) {
  drk_graph_t *g = drk_graph_create("t");
  bool ta = k == 1 || k == 3, tb = k >= 1;
  drk_value_t *x = input(g, "x", DRK_DT_F32, ta ? "7,5" : "5,7");
  drk_value_t *w = wavy(g, "w", tb ? "11,7" : "7,11", 0.7);
  drk_value_t *c = k == 0 ? NULL : wavy(g, "c", k == 2 ? "5,11" : "11", 0.4);
  drk_node_t *n = c ? node(g, DRK_OP_GEMM, "y", 1, 3, x, w, c) : node(g, DRK_OP_GEMM, "y", 1, 2, x, w);
  drk_node_set_int(g, n, "transA", ta);
  drk_node_set_int(g, n, "transB", tb);
  if (k >= 2) drk_node_set_float(g, n, "alpha", 0.75);
  if (k == 3) drk_node_set_float(g, n, "beta", -1.5);
  drk_node_t *r = node(g, DRK_OP_RELU, "r", 1, 1, OUT(n));
  drk_graph_add_output(g, OUT(r));
  return g;
}

static void test_gemm_to_matmul(void) {
  { /* a weight two Gemms read with transB (shared layers) is transposed and stored once */
    drk_graph_t *g = drk_graph_create("t");
    drk_value_t *x = input(g, "x", DRK_DT_F32, "5,7"), *w = wavy(g, "w", "7,7", 0.5);
    drk_node_t *g1 = node(g, DRK_OP_GEMM, "g1", 1, 2, x, w), *g2 = node(g, DRK_OP_GEMM, "g2", 1, 2, OUT(g1), w);
    drk_node_set_int(g, g1, "transB", 1);
    drk_node_set_int(g, g2, "transB", 1);
    drk_graph_add_output(g, OUT(g2));
    drk_diag_t d;
    drk_diag_init(&d, stderr);
    size_t n = 0;
    CHECK(drk_pass_pipeline_canonicalize(g, &d) && drk_pass_gemm_to_matmul(g, &n) && n == 2);
    drk_pass_eliminate_dead(g);
    CHECK(drk_pass_infer_shapes(g, &d));
    const drk_value_t *b[2] = {NULL, NULL};
    int k = 0;
    for (size_t i = 0; i < g->n_nodes; i++)
      if (!g->nodes[i]->dead && g->nodes[i]->op == DRK_OP_MATMUL && k < 2) b[k++] = g->nodes[i]->inputs[1];
    CHECK(k == 2 && b[0] == b[1] && b[0]->kind == DRK_VALUE_CONST);
    drk_graph_destroy(g);
  }
  for (int k = 0; k < 4; k++) {
    drk_diag_t d;
    drk_diag_init(&d, stderr);
    drk_graph_t *g = gemm_graph(k), *ref = gemm_graph(k);
    CHECK(drk_pass_pipeline_canonicalize(g, &d) && drk_pass_pipeline_canonicalize(ref, &d));
    size_t n = 99;
    CHECK(drk_pass_gemm_to_matmul(g, &n) && n == 1);
    drk_pass_eliminate_dead(g);
    CHECK(drk_pass_infer_shapes(g, &d) && drk_graph_verify(g, &d));
    int gemms = 0, transposes = 0, matmuls = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
      const drk_node_t *m = g->nodes[i];
      gemms += !m->dead && m->op == DRK_OP_GEMM;
      transposes += !m->dead && m->op == DRK_OP_TRANSPOSE;
      matmuls += !m->dead && m->op == DRK_OP_MATMUL;
      /* a constant B^T is stored transposed: the MatMul reads a constant */
      if (!m->dead && m->op == DRK_OP_MATMUL) CHECK(m->inputs[1]->kind == DRK_VALUE_CONST);
    }
    CHECK(gemms == 0 && matmuls == 1 && transposes == (k == 1 || k == 3));
    drk_tensor_t in;
    CHECK(drk_tensor_alloc(&in, DRK_DT_F32, 2, (k == 1 || k == 3) ? (int64_t[]){7, 5} : (int64_t[]){5, 7}));
    for (int64_t i = 0; i < 35; i++) ((float *)in.data)[i] = (float)((i * 37) % 11) * 0.3f - 1.5f;
    drk_tensor_t a = {0}, b = {0};
    CHECK(drk_interp_run(g, &in, &a, &d) && drk_interp_run(ref, &in, &b, &d));
    CHECK(a.rank == 2 && a.dims[0] == 5 && a.dims[1] == 11 && drk_tensor_numel(&a) == drk_tensor_numel(&b));
    double err = drk_tensor_rel_error(&a, &b);
    if (!(err <= 1e-6)) fprintf(stderr, "gemm_to_matmul rel. error %g (case %d)\n", err, k), failures++;
    drk_tensor_free(&a), drk_tensor_free(&b), drk_tensor_free(&in);
    drk_graph_destroy(g), drk_graph_destroy(ref);
  }
}

/* A tied embedding: one constant read by a Gather (as [V, H]) and, through a Transpose, by the
 * LM head MatMul (as [H, V]). The Transpose is folded at compile time although the constant
 * has another reader and is over the size limit (a weight layout, not a copy kernel per run);
 * a Transpose of a constant that something other than a MatMul's B reads is not. */
static void test_fold_weight_transpose(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *ids = input(g, "ids", DRK_DT_I64, "4");
  drk_value_t *emb = f32s(g, "emb", "1003,80"); /* 80240 elements: over the size limit */
  drk_node_t *ga = node(g, DRK_OP_GATHER, "h", 1, 2, emb, ids);
  drk_node_t *t = node(g, DRK_OP_TRANSPOSE, "embT", 1, 1, emb);
  drk_node_t *mm = node(g, DRK_OP_MATMUL, "logits", 1, 2, OUT(ga), OUT(t));
  drk_node_t *t2 = node(g, DRK_OP_TRANSPOSE, "embT2", 1, 1, emb);
  drk_node_t *ng = node(g, DRK_OP_NEG, "neg", 1, 1, OUT(t2));
  drk_graph_add_output(g, OUT(mm));
  drk_graph_add_output(g, OUT(ng));
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  CHECK(drk_pass_pipeline_canonicalize(g, &d));
  CHECK(t->dead && mm->inputs[1]->kind == DRK_VALUE_CONST);
  CHECK_SHAPE(mm->inputs[1], "f32[80,1003]");
  CHECK(((const float *)mm->inputs[1]->data)[1] == 80 * 0.5f); /* embT[0, 1] = emb[1, 0] */
  CHECK(!ga->dead && ga->inputs[0] == emb);
  CHECK(!t2->dead); /* read by a Neg: a copy, not a weight layout */
  drk_graph_destroy(g);
}

/* MatMul widths padded (passes/pad_matmul_n.c): a constant [16, 70] weight becomes [16, 72]
 * with zero columns, the MatMul {result_n = 70} giving the first 70 columns, the same values
 * under the same name; N a multiple of 8, or K not one, is left alone. */
static drk_graph_t *pad_graph(int64_t K, int64_t N) {
  drk_graph_t *g = drk_graph_create("t");
  char xs[32], ws[32];
  snprintf(xs, sizeof xs, "2,5,%lld", (long long)K);
  snprintf(ws, sizeof ws, "%lld,%lld", (long long)K, (long long)N);
  drk_value_t *x = input(g, "x", DRK_DT_F32, xs);
  drk_node_t *mm = node(g, DRK_OP_MATMUL, "logits", 1, 2, x, wavy(g, "w", ws, 0.6));
  drk_graph_add_output(g, OUT(mm));
  return g;
}

static void test_pad_matmul_n(void) {
  static const int64_t cases[][3] = {{16, 70, 1}, {16, 72, 0}, {12, 70, 0}, {16, 7, 0}};
  for (size_t k = 0; k < DRK_ARRAY_LEN(cases); k++) {
    int64_t K = cases[k][0], N = cases[k][1];
    drk_diag_t d;
    drk_diag_init(&d, stderr);
    drk_graph_t *g = pad_graph(K, N), *ref = pad_graph(K, N);
    CHECK(drk_pass_pipeline_canonicalize(g, &d) && drk_pass_pipeline_canonicalize(ref, &d));
    size_t n = 99;
    CHECK(drk_pass_pad_matmul_n(g, &n) && n == (size_t)cases[k][2]);
    drk_pass_eliminate_dead(g);
    CHECK(drk_pass_infer_shapes(g, &d) && drk_graph_verify(g, &d));
    const drk_value_t *y = g->outputs[0];
    CHECK(strcmp(y->name, "logits") == 0 && y->shape.dims[2].size == N);
    if (cases[k][2]) {
      CHECK(y->def->op == DRK_OP_MATMUL && drk_node_attr_int(y->def, "result_n", 0) == N);
      CHECK(y->def->inputs[1]->shape.dims[1].size == 72);
      /* print -> parse -> print keeps the attribute and the narrower result */
      char *t1 = drk_graph_print_string(g, SIZE_MAX, NULL);
      drk_graph_t *g2 = t1 ? drk_graph_parse(t1, strlen(t1), "pad.drkg", &d) : NULL;
      if (g2) CHECK(drk_pass_infer_shapes(g2, &d));
      char *t2 = g2 ? drk_graph_print_string(g2, SIZE_MAX, NULL) : NULL;
      CHECK(t1 && t2 && strcmp(t1, t2) == 0);
      free(t1), free(t2);
      if (g2) drk_graph_destroy(g2);
    }
    drk_tensor_t in;
    CHECK(drk_tensor_alloc(&in, DRK_DT_F32, 3, (int64_t[]){2, 5, K}));
    for (int64_t i = 0; i < 10 * K; i++) ((float *)in.data)[i] = (float)((i * 37) % 11) * 0.3f - 1.5f;
    drk_tensor_t a = {0}, b = {0};
    CHECK(drk_interp_run(g, &in, &a, &d) && drk_interp_run(ref, &in, &b, &d));
    CHECK(a.rank == 3 && a.dims[2] == N && drk_tensor_numel(&a) == drk_tensor_numel(&b));
    double err = drk_tensor_rel_error(&a, &b);
    if (!(err <= 1e-6)) fprintf(stderr, "pad_matmul_n rel. error %g (case %zu)\n", err, k), failures++;
    drk_tensor_free(&a), drk_tensor_free(&b), drk_tensor_free(&in);
    drk_graph_destroy(g), drk_graph_destroy(ref);
  }
}

/* pad_channels (sm_90a): 16-bit convs of one group with C % 8 != 0 and strides <= 8 compute
 * with C rounded up to 8 (zero weight channels, one constant Pad per input, shared); groups,
 * f32, stride 9 and pad_channels 0 leave C alone; the interpreter's results keep every bit. */
static drk_value_t *wavy16(drk_graph_t *g, const char *name, const char *spec, double scale) {
  drk_shape_t s = dims(g, spec);
  int64_t n = drk_shape_numel(&s);
  uint16_t *p = drk_arena_alloc(g->arena, sizeof(uint16_t) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) p[i] = drk_f32_to_f16((float)(scale * sin((double)i * 0.77 + 0.3)));
  return drk_graph_add_const(g, name, DRK_DT_F16, s, p, sizeof(uint16_t) * (size_t)n);
}

static drk_graph_t *chpad_graph(void) {
  drk_graph_t *g = drk_graph_create("t");
  drk_value_t *x = input(g, "x", DRK_DT_F16, "2,3,8,8"), *x6 = input(g, "x6", DRK_DT_F16, "1,6,8,8");
  drk_value_t *xf = input(g, "xf", DRK_DT_F32, "1,3,8,8");
  drk_node_t *c[5];
  c[0] = node(g, DRK_OP_CONV, "c0", 1, 3, x, wavy16(g, "w0", "8,3,3,3", 0.4), wavy16(g, "b0", "8", 0.1));
  drk_node_set_ints(g, c[0], "pads", 4, (int64_t[]){1, 1, 1, 1});
  c[1] = node(g, DRK_OP_CONV, "c1", 1, 2, x, wavy16(g, "w1", "16,3,1,1", 0.5));
  drk_node_set_ints(g, c[1], "strides", 2, (int64_t[]){2, 2});
  c[2] = node(g, DRK_OP_CONV, "c2", 1, 2, x6, wavy16(g, "w2", "6,2,3,3", 0.3));
  drk_node_set_int(g, c[2], "group", 3);
  c[3] = node(g, DRK_OP_CONV, "c3", 1, 2, x, wavy16(g, "w3", "4,3,1,1", 0.3));
  drk_node_set_ints(g, c[3], "strides", 2, (int64_t[]){9, 9});
  c[4] = node(g, DRK_OP_CONV, "c4", 1, 2, xf, wavy(g, "w4", "4,3,3,3", 0.3));
  for (int i = 0; i < 5; i++) drk_graph_add_output(g, OUT(c[i]));
  return g;
}

static void test_layout_pad_channels(void) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  for (int q = 0; q < 2; q++) {
    drk_graph_t *g = chpad_graph(), *ref = chpad_graph();
    CHECK(drk_pass_pipeline_canonicalize(g, &d) && drk_pass_pipeline_canonicalize(ref, &d));
    drk_layout_options_t o = {.layout = DRK_LAYOUT_NHWC, .nvidia_only = true, .pad_channels = q ? 8 : 0};
    drk_layout_stats_t st;
    CHECK(drk_pass_layout_nhwc(g, &o, &st));
    drk_pass_eliminate_dead(g);
    CHECK(drk_pass_infer_shapes(g, &d) && drk_graph_verify(g, &d) && d.n_errors == 0);
    CHECK(st.convs == 5 && st.padded == (q ? 2u : 0u) && count_op(g, DRK_OP_PAD) == (q ? 1u : 0u));
    /* the padded convs' weights and inputs are 8 channels wide, the others keep theirs */
    for (size_t i = 0; i < g->n_nodes; i++) {
      const drk_node_t *n = g->nodes[i];
      if (n->dead || n->op != DRK_OP_CONV_NHWC) continue;
      int64_t cw = n->inputs[1]->shape.dims[3].size, cx = n->inputs[0]->shape.dims[3].size;
      int64_t st0 = 1;
      size_t ns = 0;
      const int64_t *sv = drk_node_attr_ints(n, "strides", &ns);
      if (sv && ns) st0 = sv[0];
      bool padded = q && n->inputs[0]->dtype == DRK_DT_F16 && drk_node_attr_int(n, "group", 1) == 1 && st0 <= 8;
      CHECK(padded ? cw == 8 && cx == 8 : cw == n->inputs[0]->shape.dims[3].size / drk_node_attr_int(n, "group", 1) && cx != 8);
    }
    drk_tensor_t in[3];
    CHECK(drk_tensor_alloc(&in[0], DRK_DT_F16, 4, (int64_t[]){2, 3, 8, 8}) &&
          drk_tensor_alloc(&in[1], DRK_DT_F16, 4, (int64_t[]){1, 6, 8, 8}) &&
          drk_tensor_alloc(&in[2], DRK_DT_F32, 4, (int64_t[]){1, 3, 8, 8}));
    for (int t = 0; t < 3; t++)
      for (int64_t i = 0; i < drk_tensor_numel(&in[t]); i++) drk_tensor_set_f64(&in[t], i, sin((double)i * 1.3 + t));
    drk_tensor_t a[5] = {0}, b[5] = {0};
    CHECK(drk_interp_run(g, in, a, &d) && drk_interp_run(ref, in, b, &d));
    for (int i = 0; i < 5; i++) {
      CHECK(a[i].nbytes == b[i].nbytes && memcmp(a[i].data, b[i].data, a[i].nbytes) == 0);
      drk_tensor_free(&a[i]), drk_tensor_free(&b[i]);
    }
    for (int t = 0; t < 3; t++) drk_tensor_free(&in[t]);
    drk_graph_destroy(g), drk_graph_destroy(ref);
  }
}

static const test_t tests[] = {
    {"pad_matmul_n", test_pad_matmul_n},
    {"gemm_to_matmul", test_gemm_to_matmul},
    {"fold_weight_transpose", test_fold_weight_transpose},
    {"plan_inplace", test_plan_inplace},
    {"plan_kernels", test_plan_kernels},
    {"conv_to_matmul", test_conv_to_matmul},
    {"conv_to_matmul_patches", test_conv_to_matmul_patches},
    {"merge_matmul", test_merge_matmul},
    {"layout_nhwc", test_layout_nhwc},
    {"layout_pad_channels", test_layout_pad_channels},
    {"fold_batchnorm", test_fold_batchnorm},
    {"broadcast_symbolic", test_broadcast_symbolic},
    {"matmul", test_matmul},
    {"conv_pool", test_conv_pool},
    {"reshape", test_reshape},
    {"transpose_split_slice", test_transpose_split_slice},
    {"misc_ops", test_misc_ops},
    {"errors", test_errors},
    {"bert_chain", test_bert_chain},
    {"expand_from_shape", test_expand_from_shape},
    {"fold_static_shapes", test_fold_static_shapes},
    {"fold_interp", test_fold_interp},
    {"fold_shrinking_select", test_fold_shrinking_select},
    {"dce", test_dce},
    {"all_ops_no_crash", test_all_ops_no_crash},
};

/* A self-contained .drkg test: parse, canonicalize, then either compare the printed graph
 * with the "# | " lines after "# EXPECT-CANONICAL:" (and check that the printed form parses
 * and verifies again), or expect the first error to be the "# EXPECT-ERROR: " text. */
static int run_drkg(const char *path) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  size_t len;
  char *text = drk_read_file(path, &len, &d);
  if (!text) return 1;
  char want[16384];
  size_t wn = 0;
  want[0] = 0;
  const char *exp_err = NULL;
  const char *mark = strstr(text, "# EXPECT-CANONICAL:\n");
  if (mark) {
    for (const char *l = strchr(mark, '\n') + 1; strncmp(l, "# | ", 4) == 0 || strncmp(l, "# |\n", 4) == 0;) {
      const char *e = strchr(l, '\n');
      size_t ln = (size_t)(e - l) - (l[3] == ' ' ? 4 : 3);
      if (wn + ln + 2 >= sizeof want) break;
      memcpy(want + wn, l + (l[3] == ' ' ? 4 : 3), ln);
      wn += ln;
      want[wn++] = '\n';
      want[wn] = 0;
      l = e + 1;
    }
  }
  char errbuf[1100] = {0};
  const char *em = strstr(text, "# EXPECT-ERROR: ");
  if (em) {
    em += strlen("# EXPECT-ERROR: ");
    const char *e = strchr(em, '\n');
    snprintf(errbuf, sizeof errbuf, "%.*s", (int)(e ? e - em : (long)strlen(em)), em);
    exp_err = errbuf;
  }
  if (!mark && !exp_err) {
    fprintf(stderr, "%s: no EXPECT-CANONICAL or EXPECT-ERROR\n", path);
    free(text);
    return 1;
  }
  drk_graph_t *g = drk_graph_parse(text, len, path, &d);
  if (!g) { free(text); return 1; }
  drk_diag_t pd;
  drk_diag_init(&pd, exp_err ? NULL : stderr);
  bool ok = drk_pass_pipeline_canonicalize(g, &pd);
  int rc = 0;
  if (exp_err) {
    if (ok || strcmp(pd.first, exp_err) != 0) {
      fprintf(stderr, "%s: expected error\n  %s\ngot\n  %s\n", path, exp_err, ok ? "(success)" : pd.first);
      rc = 1;
    }
  } else if (!ok) {
    rc = 1;
  } else {
    size_t pn;
    char *got = drk_graph_print_string(g, SIZE_MAX, &pn);
    if (!got || strcmp(got, want) != 0) {
      fprintf(stderr, "%s: printed graph differs; got:\n%s\nwant:\n%s", path, got ? got : "(null)", want);
      rc = 1;
    } else {
      drk_graph_t *g2 = drk_graph_parse(got, pn, "<printed>", &d);
      if (!g2 || !drk_graph_verify(g2, &d)) rc = 1;
      drk_graph_destroy(g2);
    }
    free(got);
  }
  drk_graph_destroy(g);
  free(text);
  fprintf(stderr, "%s: %s\n", path, rc ? "FAILED" : "ok");
  return rc;
}

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[1], "--drkg") == 0) return run_drkg(argv[2]);
  int ran = 0;
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    if (argc > 1 && strcmp(argv[1], tests[i].name) != 0) continue;
    int before = failures;
    tests[i].fn();
    fprintf(stderr, "%s: %s\n", tests[i].name, failures == before ? "ok" : "FAILED");
    ran++;
  }
  if (!ran) {
    fprintf(stderr, "no test named %s\n", argc > 1 ? argv[1] : "");
    return 2;
  }
  return check_status("test_passes");
}
