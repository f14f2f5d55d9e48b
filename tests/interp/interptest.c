/* Unit tests of the CPU reference interpreter: one or more hand-computed cases per op family,
 * error reporting (no crash, message names the op), whole-graph runs with constants and
 * intermediate freeing, and (with --bench) a ResNet-50-shaped CNN timing.
 *
 * Usage: drk_interptest            run all checks; exit status 1 on any failure
 *        drk_interptest --bench    time a ResNet-50-shaped network at batch 1 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ir/interp.h"
#include "tests/common/check.h"

static drk_tensor_t tf32(int rank, const int64_t *dims, const float *v) {
  drk_tensor_t t;
  DRK_ASSERT(drk_tensor_alloc(&t, DRK_DT_F32, rank, dims));
  memcpy(t.data, v, t.nbytes);
  return t;
}

static drk_tensor_t ti64(int rank, const int64_t *dims, const int64_t *v) {
  drk_tensor_t t;
  DRK_ASSERT(drk_tensor_alloc(&t, DRK_DT_I64, rank, dims));
  memcpy(t.data, v, t.nbytes);
  return t;
}

static drk_tensor_t ti32(int rank, const int64_t *dims, const int32_t *v) {
  drk_tensor_t t;
  DRK_ASSERT(drk_tensor_alloc(&t, DRK_DT_I32, rank, dims));
  memcpy(t.data, v, t.nbytes);
  return t;
}

/* A one-node graph whose inputs are graph inputs (NULL tensors: omitted inputs). */
typedef struct one {
  drk_graph_t *g;
  drk_node_t *n;
} one_t;

static one_t make_node(drk_op_t op, int n_in, drk_tensor_t *const *ins, int n_out) {
  one_t o;
  o.g = drk_graph_create("t");
  drk_value_t *vals[16];
  for (int i = 0; i < n_in; i++) {
    if (!ins[i]) {
      vals[i] = NULL;
      continue;
    }
    char nm[16];
    snprintf(nm, sizeof nm, "in%d", i);
    vals[i] = drk_graph_add_input(o.g, nm, ins[i]->dtype, drk_graph_shape_static(o.g, ins[i]->rank, ins[i]->dims));
  }
  o.n = drk_graph_add_node(o.g, op, n_in, vals, n_out, NULL, drk_loc_none);
  return o;
}

/* Evaluates the node; returns false (printing the diagnostic) on error. */
static bool eval(one_t *o, drk_tensor_t *const *ins, drk_tensor_t *outs, drk_diag_t *d) {
  const drk_tensor_t *args[16];
  for (int i = 0; i < o->n->n_inputs; i++) args[i] = ins[i];
  return drk_interp_node(o->n, args, outs, d);
}

static bool near(double a, double b, double tol) { return fabs(a - b) <= tol * (1 + fabs(b)); }

static void expect_f(const drk_tensor_t *t, int rank, const int64_t *dims, const double *v, double tol, const char *what) {
  bool ok = t->rank == rank;
  for (int i = 0; ok && i < rank; i++) ok = t->dims[i] == dims[i];
  if (!ok) {
    fprintf(stderr, "%s: wrong shape (rank %d)\n", what, t->rank);
    failures++;
    return;
  }
  for (int64_t i = 0; i < drk_tensor_numel(t); i++)
    if (!near(drk_tensor_get_f64(t, i), v[i], tol)) {
      fprintf(stderr, "%s: element %lld is %.9g, expected %.9g\n", what, (long long)i, drk_tensor_get_f64(t, i), v[i]);
      failures++;
      return;
    }
}

static void free_all(drk_tensor_t *t, int n) {
  for (int i = 0; i < n; i++) drk_tensor_free(&t[i]);
}

static drk_diag_t diag(void) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  return d;
}

static void test_add_broadcast(void) {
  int64_t da[2] = {2, 3}, db[1] = {3};
  float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30};
  drk_tensor_t A = tf32(2, da, a), B = tf32(1, db, b), out[1];
  drk_tensor_t *ins[2] = {&A, &B};
  one_t o = make_node(DRK_OP_ADD, 2, ins, 1);
  drk_diag_t d = diag();
  CHECK(eval(&o, ins, out, &d));
  double want[6] = {11, 22, 33, 14, 25, 36};
  expect_f(&out[0], 2, da, want, 0, "Add broadcast");
  free_all(out, 1);
  drk_tensor_free(&A);
  drk_tensor_free(&B);
  drk_graph_destroy(o.g);
}

static void test_int_div_and_pow(void) {
  int64_t dd[1] = {4};
  int32_t a[4] = {7, -7, 7, -7}, b[4] = {2, 2, -2, -2};
  drk_tensor_t A = ti32(1, dd, a), B = ti32(1, dd, b), out[1];
  drk_tensor_t *ins[2] = {&A, &B};
  one_t o = make_node(DRK_OP_DIV, 2, ins, 1);
  drk_diag_t d = diag();
  CHECK(eval(&o, ins, out, &d));
  CHECK(out[0].dtype == DRK_DT_I32);
  int32_t *r = out[0].data;
  CHECK(r[0] == 3 && r[1] == -3 && r[2] == -3 && r[3] == 3); /* truncation toward zero */
  free_all(out, 1);
  drk_graph_destroy(o.g);
  /* integer Pow: exact, output dtype of the base */
  int32_t e[4] = {3, 3, 2, 0};
  drk_tensor_t E = ti32(1, dd, e);
  drk_tensor_t *pins[2] = {&A, &E};
  o = make_node(DRK_OP_POW, 2, pins, 1);
  CHECK(eval(&o, pins, out, &d));
  r = out[0].data;
  CHECK(r[0] == 343 && r[1] == -343 && r[2] == 49 && r[3] == 1);
  free_all(out, 1);
  drk_graph_destroy(o.g);
  /* division by zero is reported, not a crash */
  int32_t z[4] = {1, 0, 1, 1};
  drk_tensor_t Z = ti32(1, dd, z);
  drk_tensor_t *zins[2] = {&A, &Z};
  o = make_node(DRK_OP_DIV, 2, zins, 1);
  drk_diag_t dq;
  drk_diag_init(&dq, NULL);
  CHECK(!eval(&o, zins, out, &dq));
  CHECK(dq.n_errors == 1 && strstr(dq.first, "Div") != NULL);
  drk_graph_destroy(o.g);
  drk_tensor_free(&A);
  drk_tensor_free(&B);
  drk_tensor_free(&E);
  drk_tensor_free(&Z);
}

static void test_matmul_batch_broadcast(void) {
  /* A: [2,1,2,3], B: [3,3,2] -> [2,3,2,2] */
  int64_t da[4] = {2, 1, 2, 3}, db[3] = {3, 3, 2};
  float a[12], b[18];
  for (int i = 0; i < 12; i++) a[i] = (float)(i + 1);
  for (int i = 0; i < 18; i++) b[i] = (float)(i % 5) - 2;
  drk_tensor_t A = tf32(4, da, a), B = tf32(3, db, b), out[1];
  drk_tensor_t *ins[2] = {&A, &B};
  one_t o = make_node(DRK_OP_MATMUL, 2, ins, 1);
  drk_diag_t d = diag();
  CHECK(eval(&o, ins, out, &d));
  double want[24];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int m = 0; m < 2; m++)
        for (int n = 0; n < 2; n++) {
          double s = 0;
          for (int k = 0; k < 3; k++) s += a[i * 6 + m * 3 + k] * b[j * 6 + k * 2 + n];
          want[((i * 3 + j) * 2 + m) * 2 + n] = s;
        }
  int64_t od[4] = {2, 3, 2, 2};
  expect_f(&out[0], 4, od, want, 0, "MatMul batch broadcast");
  free_all(out, 1);
  drk_graph_destroy(o.g);
  /* 1-D x 2-D: [3] x [3,2] -> [2] */
  int64_t dv[1] = {3}, dm[2] = {3, 2};
  float v[3] = {1, 2, 3}, m[6] = {1, 0, 0, 1, 1, 1};
  drk_tensor_t V = tf32(1, dv, v), M = tf32(2, dm, m);
  drk_tensor_t *ins2[2] = {&V, &M};
  o = make_node(DRK_OP_MATMUL, 2, ins2, 1);
  CHECK(eval(&o, ins2, out, &d));
  int64_t o1[1] = {2};
  double w1[2] = {4, 5};
  expect_f(&out[0], 1, o1, w1, 0, "MatMul 1-D");
  free_all(out, 1);
  drk_graph_destroy(o.g);
  drk_tensor_free(&A);
  drk_tensor_free(&B);
  drk_tensor_free(&V);
  drk_tensor_free(&M);
}

static void test_conv_groups(void) {
  /* X [1,4,5,5], W [2,2,3,3], group 2, pads 1, strides 2 -> [1,2,3,3]; checked against a
   * direct loop. */
  int64_t dx[4] = {1, 4, 5, 5}, dw[4] = {2, 2, 3, 3}, dbias[1] = {2};
  float x[100], w[36], bias[2] = {0.5f, -1};
  for (int i = 0; i < 100; i++) x[i] = (float)((i * 7) % 11) - 5;
  for (int i = 0; i < 36; i++) w[i] = (float)((i * 5) % 7) - 3;
  drk_tensor_t X = tf32(4, dx, x), W = tf32(4, dw, w), B = tf32(1, dbias, bias), out[1];
  drk_tensor_t *ins[3] = {&X, &W, &B};
  one_t o = make_node(DRK_OP_CONV, 3, ins, 1);
  int64_t pads[4] = {1, 1, 1, 1}, strides[2] = {2, 2};
  drk_node_set_int(o.g, o.n, "group", 2);
  drk_node_set_ints(o.g, o.n, "pads", 4, pads);
  drk_node_set_ints(o.g, o.n, "strides", 2, strides);
  drk_diag_t d = diag();
  CHECK(eval(&o, ins, out, &d));
  double want[18];
  for (int m = 0; m < 2; m++)
    for (int oy = 0; oy < 3; oy++)
      for (int ox = 0; ox < 3; ox++) {
        double s = bias[m];
        for (int c = 0; c < 2; c++)
          for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
              int iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
              if (iy < 0 || iy >= 5 || ix < 0 || ix >= 5) continue;
              s += x[((m * 2 + c) * 5 + iy) * 5 + ix] * w[((m * 2 + c) * 3 + ky) * 3 + kx];
            }
        want[(m * 3 + oy) * 3 + ox] = s;
      }
  int64_t od[4] = {1, 2, 3, 3};
  expect_f(&out[0], 4, od, want, 0, "Conv groups/pads/strides");
  free_all(out, 1);
  drk_graph_destroy(o.g);
  drk_tensor_free(&X);
  drk_tensor_free(&W);
  drk_tensor_free(&B);
}

static void test_maxpool_ceil(void) {
  /* 1x1x4x4 values 1..16, kernel 3, stride 2, ceil_mode -> 2x2: 11 12 15 16; Indices too */
  int64_t dx[4] = {1, 1, 4, 4};
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = (float)(i + 1);
  drk_tensor_t X = tf32(4, dx, x), out[2];
  drk_tensor_t *ins[1] = {&X};
  one_t o = make_node(DRK_OP_MAX_POOL, 1, ins, 2);
  int64_t k[2] = {3, 3}, s[2] = {2, 2};
  drk_node_set_ints(o.g, o.n, "kernel_shape", 2, k);
  drk_node_set_ints(o.g, o.n, "strides", 2, s);
  drk_node_set_int(o.g, o.n, "ceil_mode", 1);
  drk_diag_t d = diag();
  CHECK(eval(&o, ins, out, &d));
  int64_t od[4] = {1, 1, 2, 2};
  double want[4] = {11, 12, 15, 16}, wi[4] = {10, 11, 14, 15};
  expect_f(&out[0], 4, od, want, 0, "MaxPool ceil_mode");
  expect_f(&out[1], 4, od, wi, 0, "MaxPool Indices");
  free_all(out, 2);
  drk_graph_destroy(o.g);
  drk_tensor_free(&X);
}

static void test_reduce_keepdims(void) {
  int64_t dx[3] = {2, 2, 2}, da[1] = {1};
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t axes[1] = {-2};
  drk_tensor_t X = tf32(3, dx, x), A = ti64(1, da, axes), out[1];
  drk_tensor_t *ins[2] = {&X, &A};
  one_t o = make_node(DRK_OP_REDUCE_SUM, 2, ins, 1);
  drk_diag_t d = diag();
  CHECK(eval(&o, ins, out, &d));
  int64_t od[3] = {2, 1, 2};
  double want[4] = {4, 6, 12, 14};
  expect_f(&out[0], 3, od, want, 0, "ReduceSum keepdims");
  free_all(out, 1);
  drk_graph_destroy(o.g);
  o = make_node(DRK_OP_REDUCE_MEAN, 2, ins, 1);
  drk_node_set_int(o.g, o.n, "keepdims", 0);
  CHECK(eval(&o, ins, out, &d));
  int64_t od2[2] = {2, 2};
  double want2[4] = {2, 3, 6, 7};
  expect_f(&out[0], 2, od2, want2, 0, "ReduceMean no keepdims");
  free_all(out, 1);
  drk_graph_destroy(o.g);
  drk_tensor_free(&X);
  drk_tensor_free(&A);
}

static void test_softmax_layernorm(void) {
  int64_t dx[2] = {2, 3};
  float x[6] = {1, 2, 3, -1, 0, 1000};
  drk_tensor_t X = tf32(2, dx, x), out[3];
  drk_tensor_t *ins[1] = {&X};
  one_t o = make_node(DRK_OP_SOFTMAX, 1, ins, 1);
  drk_diag_t d = diag();
  CHECK(eval(&o, ins, out, &d));
  double e1 = exp(-2.0), e2 = exp(-1.0), s = e1 + e2 + 1;
  double want[6] = {e1 / s, e2 / s, 1 / s, 0, 0, 1};
  expect_f(&out[0], 2, dx, want, 1e-6, "Softmax");
  free_all(out, 1);
  drk_graph_destroy(o.g);
  /* LayerNormalization over the last axis with Mean and InvStdDev outputs */
  float y[6] = {1, 2, 3, 2, 4, 6}, sc[3] = {1, 2, 3}, bi[3] = {0, 1, 0};
  int64_t d3[1] = {3};
  drk_tensor_t Y = tf32(2, dx, y), S = tf32(1, d3, sc), B = tf32(1, d3, bi);
  drk_tensor_t *lins[3] = {&Y, &S, &B};
  o = make_node(DRK_OP_LAYER_NORMALIZATION, 3, lins, 3);
  drk_node_set_float(o.g, o.n, "epsilon", 0);
  CHECK(eval(&o, lins, out, &d));
  double k = sqrt(1.5);
  double wy[6] = {-k, 1, 3 * k, -k, 1, 3 * k};
  expect_f(&out[0], 2, dx, wy, 1e-6, "LayerNorm Y");
  int64_t md[2] = {2, 1};
  double wm[2] = {2, 4}, wi[2] = {sqrt(1.5), sqrt(1.5) / 2};
  expect_f(&out[1], 2, md, wm, 1e-6, "LayerNorm Mean");
  expect_f(&out[2], 2, md, wi, 1e-6, "LayerNorm InvStdDev");
  free_all(out, 3);
  drk_graph_destroy(o.g);
  drk_tensor_free(&X);
  drk_tensor_free(&Y);
  drk_tensor_free(&S);
  drk_tensor_free(&B);
}

static void test_gather_slice(void) {
  int64_t dx[2] = {3, 2}, di[1] = {2};
  float x[6] = {1, 2, 3, 4, 5, 6};
  int64_t idx[2] = {-1, 0};
  drk_tensor_t X = tf32(2, dx, x), I = ti64(1, di, idx), out[1];
  drk_tensor_t *ins[2] = {&X, &I};
  one_t o = make_node(DRK_OP_GATHER, 2, ins, 1);
  drk_diag_t d = diag();
  CHECK(eval(&o, ins, out, &d));
  int64_t od[2] = {2, 2};
  double want[4] = {5, 6, 1, 2};
  expect_f(&out[0], 2, od, want, 0, "Gather negative index");
  free_all(out, 1);
  /* out of range index: error naming Gather, nothing leaks */
  idx[0] = 3;
  memcpy(I.data, idx, sizeof idx);
  drk_diag_t dq;
  drk_diag_init(&dq, NULL);
  CHECK(!eval(&o, ins, out, &dq));
  CHECK(strstr(dq.first, "Gather") && strstr(dq.first, "out of range"));
  drk_graph_destroy(o.g);
  /* Slice with negative step and clamped bounds: x[2:-100:-2, ::-1] */
  int64_t d2[1] = {2};
  int64_t st[2] = {100, -1}, en[2] = {-100, INT64_MIN}, ax[2] = {0, 1}, sp[2] = {-2, -1};
  drk_tensor_t S = ti64(1, d2, st), E = ti64(1, d2, en), A = ti64(1, d2, ax), P = ti64(1, d2, sp);
  drk_tensor_t *sins[5] = {&X, &S, &E, &A, &P};
  o = make_node(DRK_OP_SLICE, 5, sins, 1);
  CHECK(eval(&o, sins, out, &d));
  double ws[4] = {6, 5, 2, 1};
  expect_f(&out[0], 2, od, ws, 0, "Slice negative step");
  free_all(out, 1);
  drk_graph_destroy(o.g);
  drk_tensor_free(&X);
  drk_tensor_free(&I);
  drk_tensor_free(&S);
  drk_tensor_free(&E);
  drk_tensor_free(&A);
  drk_tensor_free(&P);
}

static void test_resize_linear(void) {
  /* 1x1x2x2 -> scales 2: half_pixel linear (the ONNX example) */
  int64_t dx[4] = {1, 1, 2, 2}, ds[1] = {4};
  float x[4] = {1, 2, 3, 4}, sc[4] = {1, 1, 2, 2};
  drk_tensor_t X = tf32(4, dx, x), S = tf32(1, ds, sc), out[1];
  drk_tensor_t *ins[3] = {&X, NULL, &S};
  one_t o = make_node(DRK_OP_RESIZE, 3, ins, 1);
  drk_node_set_string(o.g, o.n, "mode", "linear");
  drk_diag_t d = diag();
  CHECK(eval(&o, ins, out, &d));
  int64_t od[4] = {1, 1, 4, 4};
  double want[16] = {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4};
  expect_f(&out[0], 4, od, want, 1e-7, "Resize linear half_pixel");
  free_all(out, 1);
  drk_graph_destroy(o.g);
  drk_tensor_free(&X);
  drk_tensor_free(&S);
}

static void test_einsum_topk(void) {
  int64_t da[3] = {2, 2, 3}, db[3] = {2, 3, 1};
  float a[12], b[6];
  for (int i = 0; i < 12; i++) a[i] = (float)i;
  for (int i = 0; i < 6; i++) b[i] = (float)(i + 1);
  drk_tensor_t A = tf32(3, da, a), B = tf32(3, db, b), out[2];
  drk_tensor_t *ins[2] = {&A, &B};
  one_t o = make_node(DRK_OP_EINSUM, 2, ins, 1);
  drk_node_set_string(o.g, o.n, "equation", "bij,bjk->bik");
  drk_diag_t d = diag();
  CHECK(eval(&o, ins, out, &d));
  int64_t od[3] = {2, 2, 1};
  double want[4];
  for (int bb = 0; bb < 2; bb++)
    for (int i = 0; i < 2; i++) {
      double s = 0;
      for (int j = 0; j < 3; j++) s += a[bb * 6 + i * 3 + j] * b[bb * 3 + j];
      want[bb * 2 + i] = s;
    }
  expect_f(&out[0], 3, od, want, 0, "Einsum bij,bjk->bik");
  free_all(out, 1);
  drk_graph_destroy(o.g);
  /* implicit output with a repeated index: "ii" is the trace */
  int64_t dm[2] = {3, 3};
  float m[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  drk_tensor_t M = tf32(2, dm, m);
  drk_tensor_t *mins[1] = {&M};
  o = make_node(DRK_OP_EINSUM, 1, mins, 1);
  drk_node_set_string(o.g, o.n, "equation", "ii");
  CHECK(eval(&o, mins, out, &d));
  double tr[1] = {15};
  expect_f(&out[0], 0, NULL, tr, 0, "Einsum trace");
  free_all(out, 1);
  drk_graph_destroy(o.g);
  /* TopK: largest, ties broken by the lower index */
  int64_t dx[1] = {6}, dk[1] = {1};
  float x[6] = {3, 1, 3, 5, 5, 0};
  int64_t k[1] = {3};
  drk_tensor_t X = tf32(1, dx, x), K = ti64(1, dk, k);
  drk_tensor_t *tins[2] = {&X, &K};
  o = make_node(DRK_OP_TOP_K, 2, tins, 2);
  CHECK(eval(&o, tins, out, &d));
  int64_t o3[1] = {3};
  double wv[3] = {5, 5, 3}, wi[3] = {3, 4, 0};
  expect_f(&out[0], 1, o3, wv, 0, "TopK values");
  expect_f(&out[1], 1, o3, wi, 0, "TopK indices");
  free_all(out, 2);
  drk_graph_destroy(o.g);
  drk_tensor_free(&A);
  drk_tensor_free(&B);
  drk_tensor_free(&M);
  drk_tensor_free(&X);
  drk_tensor_free(&K);
}

static void test_cast_rounding(void) {
  int64_t dx[1] = {6};
  /* 1 + 2^-11 is a tie in f16 (rounds to even: 1); 1 + 3*2^-11 rounds up; 65520 overflows
   * f16; bf16: 1 + 2^-8 ties to 1; f8e4m3: 500 saturates to 448, 0.3 rounds to 0.3125. */
  float x[6] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65520.0f, 1.0f + 0x1p-8f, 500.0f, 0.3f};
  drk_tensor_t X = tf32(1, dx, x), out[1];
  drk_tensor_t *ins[1] = {&X};
  drk_diag_t d = diag();
  struct { int to; double want[6]; } cases[3] = {
      {10, {1.0, 1.0 + 4 * 0x1p-11, INFINITY, 1.00390625, 500, 0.300048828125}},
      {16, {1.0, 1.0, 65536.0, 1.0, 500, 0.30078125}},
      {17, {1.0, 1.0, 448, 1.0, 448, 0.3125}},
  };
  for (int c = 0; c < 3; c++) {
    one_t o = make_node(DRK_OP_CAST, 1, ins, 1);
    drk_node_set_int(o.g, o.n, "to", cases[c].to);
    CHECK(eval(&o, ins, out, &d));
    for (int i = 0; i < 6; i++) {
      double g = drk_tensor_get_f64(&out[0], i);
      if (!(g == cases[c].want[i])) {
        fprintf(stderr, "Cast to %d: element %d is %.12g, expected %.12g\n", cases[c].to, i, g, cases[c].want[i]);
        failures++;
      }
    }
    free_all(out, 1);
    drk_graph_destroy(o.g);
  }
  /* saturate=0: out of range becomes NaN for e4m3fn */
  one_t o = make_node(DRK_OP_CAST, 1, ins, 1);
  drk_node_set_int(o.g, o.n, "to", 17);
  drk_node_set_int(o.g, o.n, "saturate", 0);
  CHECK(eval(&o, ins, out, &d));
  CHECK(isnan(drk_tensor_get_f64(&out[0], 4)));
  free_all(out, 1);
  drk_graph_destroy(o.g);
  /* Round: half to even */
  float r[4] = {0.5f, 1.5f, 2.5f, -2.5f};
  int64_t d4[1] = {4};
  drk_tensor_t R = tf32(1, d4, r);
  drk_tensor_t *rins[1] = {&R};
  o = make_node(DRK_OP_ROUND, 1, rins, 1);
  CHECK(eval(&o, rins, out, &d));
  double wr[4] = {0, 2, 2, -2};
  expect_f(&out[0], 1, d4, wr, 0, "Round half to even");
  free_all(out, 1);
  drk_graph_destroy(o.g);
  drk_tensor_free(&X);
  drk_tensor_free(&R);
}

static void test_errors(void) {
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  /* wrong dtype: Sqrt of int64 */
  int64_t dx[1] = {2}, v[2] = {1, 4};
  drk_tensor_t X = ti64(1, dx, v), out[1];
  drk_tensor_t *ins[1] = {&X};
  one_t o = make_node(DRK_OP_SQRT, 1, ins, 1);
  CHECK(!eval(&o, ins, out, &d));
  CHECK(strstr(d.first, "Sqrt") && strstr(d.first, "dtype"));
  drk_graph_destroy(o.g);
  /* missing required attribute */
  drk_diag_init(&d, NULL);
  o = make_node(DRK_OP_CAST, 1, ins, 1);
  CHECK(!eval(&o, ins, out, &d));
  CHECK(strstr(d.first, "Cast") != NULL);
  drk_graph_destroy(o.g);
  /* bad broadcast */
  int64_t d3[1] = {3};
  int64_t w[3] = {1, 2, 3};
  drk_tensor_t Y = ti64(1, d3, w);
  drk_tensor_t *bins[2] = {&X, &Y};
  drk_diag_init(&d, NULL);
  o = make_node(DRK_OP_ADD, 2, bins, 1);
  CHECK(!eval(&o, bins, out, &d));
  CHECK(strstr(d.first, "broadcast") != NULL);
  drk_graph_destroy(o.g);
  drk_tensor_free(&X);
  drk_tensor_free(&Y);
}

/* A whole graph: y = Relu(MatMul(x, W) + b) with W, b constants; plus Shape(x) as a second
 * output and x itself as a third. */
static void test_run_graph(void) {
  drk_graph_t *g = drk_graph_create("mlp");
  int64_t dx[2] = {2, 3}, dw[2] = {3, 2}, db[1] = {2};
  float w[6] = {1, -1, 2, 0, 0, 1}, b[2] = {0.5f, -10};
  drk_value_t *x = drk_graph_add_input(g, "x", DRK_DT_F32, drk_graph_shape_static(g, 2, dx));
  drk_value_t *W = drk_graph_add_const_copy(g, "W", DRK_DT_F32, drk_graph_shape_static(g, 2, dw), w, sizeof w);
  drk_value_t *B = drk_graph_add_const_copy(g, "b", DRK_DT_F32, drk_graph_shape_static(g, 1, db), b, sizeof b);
  drk_value_t *mi[2] = {x, W};
  drk_node_t *mm = drk_graph_add_node(g, DRK_OP_MATMUL, 2, mi, 1, NULL, drk_loc_none);
  drk_value_t *ai[2] = {mm->outputs[0], B};
  drk_node_t *add = drk_graph_add_node(g, DRK_OP_ADD, 2, ai, 1, NULL, drk_loc_none);
  drk_node_t *relu = drk_graph_add_node(g, DRK_OP_RELU, 1, add->outputs, 1, NULL, drk_loc_none);
  drk_node_t *shp = drk_graph_add_node(g, DRK_OP_SHAPE, 1, &x, 1, NULL, drk_loc_none);
  drk_graph_add_output(g, relu->outputs[0]);
  drk_graph_add_output(g, shp->outputs[0]);
  drk_graph_add_output(g, x);
  float xv[6] = {1, 2, 3, -1, -2, -3};
  drk_tensor_t X = tf32(2, dx, xv), out[3];
  drk_diag_t d = diag();
  CHECK(drk_interp_run(g, &X, out, &d));
  if (d.n_errors == 0) {
    int64_t od[2] = {2, 2};
    double want[4] = {1 + 4 + 0.5, 0, 0, 0};
    /* row 0: [1*1+2*2+3*0, -1+0+3] + b = [5.5, -8] -> relu [5.5, 0]; row 1: [-5, 1-3] + b */
    want[1] = 0;
    expect_f(&out[0], 2, od, want, 0, "graph Relu(MatMul+b)");
    int64_t d2[1] = {2};
    double ws[2] = {2, 3};
    expect_f(&out[1], 1, d2, ws, 0, "graph Shape");
    double wx[6] = {1, 2, 3, -1, -2, -3};
    expect_f(&out[2], 2, dx, wx, 0, "graph input as output");
    CHECK(out[2].owned && out[2].data != X.data);
    free_all(out, 3);
  }
  /* wrong input dtype is reported */
  drk_tensor_t Xi;
  DRK_ASSERT(drk_tensor_alloc(&Xi, DRK_DT_I64, 2, dx));
  drk_diag_t dq;
  drk_diag_init(&dq, NULL);
  CHECK(!drk_interp_run(g, &Xi, out, &dq));
  CHECK(strstr(dq.first, "dtype") != NULL);
  drk_tensor_free(&Xi);
  drk_tensor_free(&X);
  drk_graph_destroy(g);
}

/* A MatMul big enough for the pool, f64, odd sizes (edge tiles, K over one k block): every
 * output equals the naive sum in k order bit for bit, for 1 and 3 threads; then the pool
 * still works in a forked child (drkc tune compiles in forked children). */
static bool mm_exact(int64_t M, int64_t K, int64_t N, int threads) {
  drk_interp_set_threads(threads);
  int64_t da[2] = {M, K}, db[2] = {K, N};
  drk_tensor_t A, B, out[1];
  DRK_ASSERT(drk_tensor_alloc(&A, DRK_DT_F64, 2, da) && drk_tensor_alloc(&B, DRK_DT_F64, 2, db));
  double *a = A.data, *b = B.data;
  uint64_t x = 12345;
  for (int64_t i = 0; i < M * K; i++) a[i] = (double)((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 11) * 0x1p-53 - 0.5;
  for (int64_t i = 0; i < K * N; i++) b[i] = (double)((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 11) * 0x1p-53 - 0.5;
  drk_tensor_t *ins[2] = {&A, &B};
  one_t o = make_node(DRK_OP_MATMUL, 2, ins, 1);
  drk_diag_t d = diag();
  bool ok = eval(&o, ins, out, &d);
  for (int64_t m = 0; ok && m < M; m++)
    for (int64_t n = 0; ok && n < N; n++) {
      volatile double s = 0; /* volatile: each product rounded, then added, as the interpreter does */
      for (int64_t k = 0; k < K; k++) {
        volatile double p = a[m * K + k] * b[k * N + n];
        s = s + p;
      }
      double got = ((double *)out[0].data)[m * N + n];
      if (memcmp(&got, (const void *)&s, 8)) {
        printf("MatMul %lldx%lldx%lld, %d threads: C[%lld,%lld] = %.17g, the k-ordered sum is %.17g\n", (long long)M,
               (long long)K, (long long)N, threads, (long long)m, (long long)n, got, s);
        ok = false;
      }
    }
  if (out[0].data) drk_tensor_free(&out[0]);
  drk_graph_destroy(o.g);
  drk_tensor_free(&A);
  drk_tensor_free(&B);
  drk_interp_set_threads(0);
  return ok;
}

static void test_gemm_exact_and_fork(void) {
  CHECK(mm_exact(131, 600, 77, 1), "k-ordered f64 sums, 1 thread");
  CHECK(mm_exact(131, 600, 77, 3), "k-ordered f64 sums, 3 threads");
  CHECK(mm_exact(5, 300, 1030, 2), "k-ordered f64 sums, wide");
  drk_interp_set_threads(2);
  CHECK(mm_exact(120, 200, 120, 2)); /* the pool's workers exist now */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    _exit(mm_exact(120, 200, 120, 2) ? 0 : 1);
  }
  int st = 0;
  CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "the interpreter's pool in a forked child (status %d)", st);
}

/* --check's comparison: relative error normally; absolute where the reference is ~0. */
static void test_check_near_zero(void) {
  int64_t d[1] = {3};
  drk_tensor_t ref = tf32(1, d, (float[]){1e-12f, -2e-12f, 0}), ok = tf32(1, d, (float[]){1.1e-12f, -2e-12f, 0});
  drk_tensor_t bad = tf32(1, d, (float[]){1e-3f, 0, 0}), nan = tf32(1, d, (float[]){NAN, 0, 0});
  drk_tensor_t big = tf32(1, d, (float[]){1, 2, 3}), big2 = tf32(1, d, (float[]){1, 2, 3.0001f});
  drk_check_t r;
  char line[512];
  drk_interp_check(&ok, &ref, 1e-4, &r);
  CHECK(r.ref_zero && r.pass && fabs(r.ref_max - 2e-12) < 1e-18 && r.abs_max < 2e-13, "max %g abs %g", r.ref_max, r.abs_max);
  drk_interp_check_line(&r, 0, "y", 1e-4, line, sizeof line);
  CHECK_CONTAINS(line, "check output 0 'y': reference is ~0 everywhere (max |ref| = 2e-12): relative error not meaningful; absolute error");
  CHECK_CONTAINS(line, "(tolerance 1e-04, absolute) PASS");
  drk_interp_check(&bad, &ref, 1e-4, &r);
  CHECK(r.ref_zero && !r.pass, "an absolute error of 1e-3 over a ~0 reference fails");
  drk_interp_check_line(&r, 1, "y", 1e-4, line, sizeof line);
  CHECK_CONTAINS(line, "FAIL");
  drk_interp_check(&nan, &ref, 1e-4, &r);
  CHECK(!r.pass, "NaN never passes");
  drk_interp_check(&big2, &big, 1e-4, &r);
  CHECK(!r.ref_zero && r.pass && r.rel > 0);
  drk_interp_check_line(&r, 2, "z", 1e-4, line, sizeof line);
  CHECK_CONTAINS(line, "check output 2 'z': rel error ");
  CHECK_CONTAINS(line, " (tolerance 1e-04) PASS");
  drk_tensor_t *all[] = {&ref, &ok, &bad, &nan, &big, &big2};
  for (int i = 0; i < 6; i++) drk_tensor_free(all[i]);
}

/* ---- ResNet-50-shaped benchmark ---- */
static uint64_t rng = 88172645463325252ull;
static float frand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 - 0.5);
}

static drk_value_t *conv(drk_graph_t *g, drk_value_t *x, int64_t cin, int64_t cout, int64_t k, int64_t s) {
  int64_t dw[4] = {cout, cin, k, k}, n = cout * cin * k * k;
  float *w = drk_arena_alloc(g->arena, sizeof(float) * (size_t)n);
  float sc = (float)(2.0 / sqrt((double)(cin * k * k)));
  for (int64_t i = 0; i < n; i++) w[i] = frand() * sc;
  drk_value_t *W = drk_graph_add_const(g, NULL, DRK_DT_F32, drk_graph_shape_static(g, 4, dw), w, sizeof(float) * (size_t)n);
  drk_value_t *in[2] = {x, W};
  drk_node_t *c = drk_graph_add_node(g, DRK_OP_CONV, 2, in, 1, NULL, drk_loc_none);
  int64_t p = k / 2, pads[4] = {p, p, p, p}, st[2] = {s, s};
  drk_node_set_ints(g, c, "pads", 4, pads);
  drk_node_set_ints(g, c, "strides", 2, st);
  return c->outputs[0];
}

static drk_value_t *relu(drk_graph_t *g, drk_value_t *x) {
  return drk_graph_add_node(g, DRK_OP_RELU, 1, &x, 1, NULL, drk_loc_none)->outputs[0];
}

static int bench(void) {
  drk_graph_t *g = drk_graph_create("resnet50ish");
  int64_t dx[4] = {1, 3, 224, 224};
  drk_value_t *x = drk_graph_add_input(g, "x", DRK_DT_F32, drk_graph_shape_static(g, 4, dx));
  drk_value_t *h = relu(g, conv(g, x, 3, 64, 7, 2));
  drk_node_t *mp = drk_graph_add_node(g, DRK_OP_MAX_POOL, 1, &h, 1, NULL, drk_loc_none);
  int64_t k3[2] = {3, 3}, s2[2] = {2, 2}, p1[4] = {1, 1, 1, 1};
  drk_node_set_ints(g, mp, "kernel_shape", 2, k3);
  drk_node_set_ints(g, mp, "strides", 2, s2);
  drk_node_set_ints(g, mp, "pads", 4, p1);
  h = mp->outputs[0];
  int64_t cin = 64;
  int blocks[4] = {3, 4, 6, 3};
  for (int st = 0; st < 4; st++) {
    int64_t mid = 64 << st, out = mid * 4;
    for (int b = 0; b < blocks[st]; b++) {
      int64_t s = (b == 0 && st > 0) ? 2 : 1;
      drk_value_t *y = relu(g, conv(g, h, cin, mid, 1, 1));
      y = relu(g, conv(g, y, mid, mid, 3, s));
      y = conv(g, y, mid, out, 1, 1);
      drk_value_t *sc = b == 0 ? conv(g, h, cin, out, 1, s) : h;
      drk_value_t *ai[2] = {y, sc};
      h = relu(g, drk_graph_add_node(g, DRK_OP_ADD, 2, ai, 1, NULL, drk_loc_none)->outputs[0]);
      cin = out;
    }
  }
  drk_node_t *gp = drk_graph_add_node(g, DRK_OP_GLOBAL_AVERAGE_POOL, 1, &h, 1, NULL, drk_loc_none);
  drk_graph_add_output(g, gp->outputs[0]);
  drk_tensor_t X, out[1];
  DRK_ASSERT(drk_tensor_alloc(&X, DRK_DT_F32, 4, dx));
  for (int64_t i = 0; i < drk_tensor_numel(&X); i++) ((float *)X.data)[i] = frand();
  drk_diag_t d = diag();
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  bool ok = drk_interp_run(g, &X, out, &d);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  printf("ResNet-50-shaped network, batch 1: %s in %.2f s\n", ok ? "ran" : "FAILED", secs);
  if (ok) {
    printf("output [%lld x %lld x 1 x 1], first value %g\n", (long long)out[0].dims[0], (long long)out[0].dims[1],
           drk_tensor_get_f64(&out[0], 0));
    drk_tensor_free(&out[0]);
  }
  drk_tensor_free(&X);
  drk_graph_destroy(g);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--bench")) return bench();
  test_add_broadcast();
  test_int_div_and_pow();
  test_matmul_batch_broadcast();
  test_conv_groups();
  test_maxpool_ceil();
  test_reduce_keepdims();
  test_softmax_layernorm();
  test_gather_slice();
  test_resize_linear();
  test_einsum_topk();
  test_cast_rounding();
  test_errors();
  test_run_graph();
  test_check_near_zero();
  test_gemm_exact_and_fork();
  if (!failures) printf("all interpreter checks passed\n");
  return check_status("interptest");
}
