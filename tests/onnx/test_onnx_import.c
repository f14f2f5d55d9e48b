/* Tests of the ONNX importer and tensor I/O (driven by CTest, see CMakeLists.txt):
 *   corpus DIR...   import every DIR/STAR/model.onnx in a child process each; count imported,
 *                   rejected as unsupported (by reason) and crashed; fail on a crash or on an
 *                   error that is not an "unsupported ..." one; imported graphs must pass
 *                   drk_graph_verify and their test_data_set_0 tensors must read.
 *   gen DIR         check the models that gen_models.py wrote into DIR (old-opset rewrites,
 *                   external data, typed initializers, dim_param, error texts), then feed
 *                   truncated and corrupted copies of them to the importer.
 *   tensors DIR     read the .pb/.npy files listed in DIR/manifest.txt, compare with the
 *                   expected bytes, write them back as DIR/out/NAME.{pb,npy}. */
#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frontend/onnx/onnx_import.h"
#include "frontend/onnx/tensor_io.h"

static int failures;

static void check(bool ok, const char *fmt, ...) {
  if (ok) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  failures++;
}

/* ---- corpus ---- */

typedef struct reason {
  char text[160];
  int count;
} reason_t;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_corpus(int n_dirs, char **dirs) {
  int imported = 0, rejected = 0, crashed = 0, unexpected = 0, total = 0;
  int t_ok = 0, t_unsup = 0, t_bad = 0;
  reason_t reasons[256];
  int n_reasons = 0;
  for (int di = 0; di < n_dirs; di++) {
    DIR *dir = opendir(dirs[di]);
    if (!dir) {
      fprintf(stderr, "cannot open %s\n", dirs[di]);
      return 1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
      if (e->d_name[0] == '.') continue;
      names = realloc(names, sizeof(char *) * (n + 1));
      names[n++] = strdup(e->d_name);
    }
    closedir(dir);
    qsort(names, n, sizeof(char *), cmp_str);
    for (size_t i = 0; i < n; i++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s/model.onnx", dirs[di], names[i]);
      if (access(path, R_OK) != 0) {
        free(names[i]);
        continue;
      }
      total++;
      int fds[2];
      if (pipe(fds) != 0) return 1;
      pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        drk_diag_t d;
        drk_diag_init(&d, NULL);
        drk_graph_t *g = drk_onnx_import(path, &d);
        char msg[2600];
        drk_diag_t vd;
        drk_diag_init(&vd, NULL);
        if (g && !drk_graph_verify(g, &vd)) {
          snprintf(msg, sizeof msg, "ERR verifier: %s", vd.first);
          drk_graph_destroy(g);
          g = NULL;
        } else if (g) {
          snprintf(msg, sizeof msg, "OK");
          drk_graph_destroy(g);
        } else {
          snprintf(msg, sizeof msg, "ERR %s", d.first);
        }
        /* The test data of an imported model: every tensor must read or be unsupported
         * (models with sequences/optionals, whose .pb files are not TensorProtos, are
         * rejected above). */
        int t_ok = 0, t_unsup = 0, t_bad = 0;
        char bad[1100] = "";
        for (int io = 0; io < 2 && strcmp(msg, "OK") == 0; io++)
          for (int k = 0; k < 64; k++) {
            char tp[4200];
            snprintf(tp, sizeof tp, "%s/%s/test_data_set_0/%s_%d.pb", dirs[di], names[i], io ? "output" : "input", k);
            if (access(tp, R_OK) != 0) break;
            drk_tensor_t t;
            drk_diag_init(&d, NULL);
            if (drk_tensor_read_pb(tp, &t, NULL, &d)) {
              t_ok++;
              drk_tensor_free(&t);
            } else if (strstr(d.first, ": error: unsupported")) {
              t_unsup++;
              if (getenv("DRK_ONNX_VERBOSE")) fprintf(stderr, "TENSOR REJECT: %s\n", d.first);
            } else {
              t_bad++;
              snprintf(bad, sizeof bad, "%s", d.first);
            }
          }
        size_t ml = strlen(msg);
        snprintf(msg + ml, sizeof msg - ml, "\n%d %d %d %s", t_ok, t_unsup, t_bad, bad);
        ssize_t w = write(fds[1], msg, strlen(msg));
        (void)w;
        _exit(0);
      }
      close(fds[1]);
      char msg[2600];
      size_t got = 0;
      ssize_t r;
      while (got < sizeof msg - 1 && (r = read(fds[0], msg + got, sizeof msg - 1 - got)) > 0) got += (size_t)r;
      msg[got] = 0;
      close(fds[0]);
      int st = 0;
      waitpid(pid, &st, 0);
      char *tl = strchr(msg, '\n');
      if (tl) {
        *tl++ = 0;
        int a = 0, b = 0, c = 0, k = 0;
        if (sscanf(tl, "%d %d %d %n", &a, &b, &c, &k) >= 3) {
          t_ok += a;
          t_unsup += b;
          t_bad += c;
          if (c) fprintf(stderr, "TENSOR READ ERROR: %s\n", tl + k);
        }
      }
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        crashed++;
        fprintf(stderr, "CRASH: %s (status %d)\n", path, st);
      } else if (strcmp(msg, "OK") == 0) {
        imported++;
      } else {
        const char *u = strstr(msg, ": error: unsupported");
        if (!u) {
          unexpected++;
          fprintf(stderr, "UNEXPECTED ERROR: %s\n", msg + 4);
        } else {
          rejected++;
          if (getenv("DRK_ONNX_VERBOSE")) printf("REJECT: %s\n", msg + 4);
          /* Group by reason: the message with quoted node names dropped. */
          char key[160];
          snprintf(key, sizeof key, "%s", u + 9);
          char *p = strstr(key, " (domain");
          if (p && strstr(key, "unsupported op") && !strstr(key, "):")) *p = 0;
          if ((p = strstr(key, " of value '"))) *p = 0;
          int k = 0;
          while (k < n_reasons && strcmp(reasons[k].text, key) != 0) k++;
          if (k == n_reasons && n_reasons < 256) {
            snprintf(reasons[n_reasons].text, sizeof reasons[0].text, "%s", key);
            reasons[n_reasons++].count = 0;
          }
          if (k < 256) reasons[k].count++;
        }
      }
      free(names[i]);
    }
    free(names);
  }
  printf("rejections by reason:\n");
  for (int k = 0; k < n_reasons; k++) printf("  %4d  %s\n", reasons[k].count, reasons[k].text);
  printf("summary: %d models: %d imported, %d rejected as unsupported, %d other errors, %d crashed\n", total,
         imported, rejected, unexpected, crashed);
  printf("test data tensors of imported models (test_data_set_0): %d read, %d unsupported, %d errors\n", t_ok, t_unsup, t_bad);
  if (total == 0) {
    fprintf(stderr, "no models found\n");
    return 1;
  }
  return crashed || unexpected || t_bad ? 1 : 0;
}

/* ---- generated models ---- */

static drk_value_t *find_value(const drk_graph_t *g, const char *name) {
  for (size_t i = 0; i < g->n_inputs; i++)
    if (strcmp(g->inputs[i]->name, name) == 0) return g->inputs[i];
  for (size_t i = 0; i < g->n_consts; i++)
    if (strcmp(g->consts[i]->name, name) == 0) return g->consts[i];
  for (size_t i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i]->n_outputs; j++)
      if (strcmp(g->nodes[i]->outputs[j]->name, name) == 0) return g->nodes[i]->outputs[j];
  return NULL;
}

static drk_node_t *find_node(const drk_graph_t *g, drk_op_t op, int nth) {
  for (size_t i = 0; i < g->n_nodes; i++)
    if (g->nodes[i]->op == op && nth-- == 0) return g->nodes[i];
  return NULL;
}

static bool const_i64_is(const drk_value_t *v, int n, const int64_t *want) {
  if (!v || v->kind != DRK_VALUE_CONST || v->dtype != DRK_DT_I64 || v->nbytes != sizeof(int64_t) * (size_t)n)
    return false;
  return n == 0 || memcmp(v->data, want, sizeof(int64_t) * (size_t)n) == 0;
}

static drk_graph_t *load(const char *dir, const char *file, drk_diag_t *d) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  drk_diag_init(d, stderr);
  drk_graph_t *g = drk_onnx_import(path, d);
  check(g != NULL, "%s: import failed: %s", file, d->first);
  check(!g || drk_graph_verify(g, d), "%s: verifier: %s", file, d->first);
  return g;
}

static void expect_error(const char *dir, const char *file, const char *want) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  drk_graph_t *g = drk_onnx_import(path, &d);
  check(g == NULL, "%s: import should fail", file);
  drk_graph_destroy(g);
  check(strstr(d.first, want) != NULL, "%s: error '%s' lacks '%s'", file, d.first, want);
  printf("%s: %s\n", file, d.first);
}

static void test_external(const char *dir) {
  drk_diag_t d;
  drk_graph_t *g = load(dir, "ext.onnx", &d);
  if (!g) return;
  drk_value_t *w = find_value(g, "W"), *b = find_value(g, "B"), *u = find_value(g, "U");
  check(w && w->kind == DRK_VALUE_CONST && w->dtype == DRK_DT_F32 && w->nbytes == 48, "ext: W");
  check(b && b->kind == DRK_VALUE_CONST && b->nbytes == 12, "ext: B");
  check(u && u->kind == DRK_VALUE_CONST && u->nbytes == 8 && u->dtype == DRK_DT_I32, "ext: U (misaligned)");
  if (w && w->nbytes == 48)
    for (int i = 0; i < 12; i++) check(((const float *)w->data)[i] == (float)i * 0.5f, "ext: W[%d]", i);
  if (b && b->nbytes == 12)
    for (int i = 0; i < 3; i++) check(((const float *)b->data)[i] == 100.0f + (float)i, "ext: B[%d]", i);
  if (u && u->nbytes == 8) {
    int32_t x[2];
    memcpy(x, u->data, 8);
    check(((uintptr_t)u->data & 3) == 0 && x[0] == -7 && x[1] == 123456, "ext: U values/alignment");
  }
  check(g->n_inputs == 1 && strcmp(g->inputs[0]->name, "x") == 0, "ext: only x is an input (W is an initializer)");
  check(g->n_blobs >= 2, "ext: model and external file are blobs");
  drk_graph_destroy(g);
  expect_error(dir, "ext_missing.onnx", "cannot open external data file");
  expect_error(dir, "ext_range.onnx", "is outside");
  expect_error(dir, "ext_escape.onnx", "leaves the model's directory");
  expect_error(dir, "ext_length.onnx", "external data length");
}

static void test_typed(const char *dir) {
  drk_diag_t d;
  drk_graph_t *g = load(dir, "typed.onnx", &d);
  if (!g) return;
  struct {
    const char *name;
    drk_dtype_t t;
    double want[3];
  } cases[] = {
      {"f32", DRK_DT_F32, {1.5, -2, 3}},  {"f64", DRK_DT_F64, {0.25, 1e300, -1}},
      {"i64", DRK_DT_I64, {-5, 1LL << 40, 7}}, {"i32", DRK_DT_I32, {-1, 2, 2147483647}},
      {"i16", DRK_DT_I16, {-300, 0, 300}}, {"i8", DRK_DT_I8, {-128, 5, 127}},
      {"u8", DRK_DT_U8, {0, 200, 255}},   {"b", DRK_DT_BOOL, {1, 0, 1}},
      {"h", DRK_DT_F16, {0.5, -2, 65504}}, {"bf", DRK_DT_BF16, {1, -0.5, 256}},
  };
  for (size_t i = 0; i < DRK_ARRAY_LEN(cases); i++) {
    drk_value_t *v = find_value(g, cases[i].name);
    drk_tensor_t t;
    check(v && v->kind == DRK_VALUE_CONST && v->dtype == cases[i].t, "typed: %s dtype", cases[i].name);
    if (!v || !drk_tensor_from_const(&t, v)) continue;
    check(drk_tensor_numel(&t) == 3, "typed: %s numel", cases[i].name);
    for (int k = 0; k < 3 && drk_tensor_numel(&t) == 3; k++) {
      double got = v->dtype == DRK_DT_I64 ? (double)drk_tensor_get_i64(&t, k) : drk_tensor_get_f64(&t, k);
      check(got == cases[i].want[k], "typed: %s[%d] = %g, want %g", cases[i].name, k, got, cases[i].want[k]);
    }
  }
  drk_graph_destroy(g);
}

static void test_old_opsets(const char *dir) {
  drk_diag_t d;
  drk_graph_t *g = load(dir, "old11.onnx", &d);
  if (g) {
    drk_node_t *s = find_node(g, DRK_OP_SPLIT, 0);
    int64_t split[2] = {2, 3};
    check(s && s->n_inputs == 2 && const_i64_is(s->inputs[1], 2, split) && !drk_node_attr(s, "split"),
          "old11: Split attr -> input");
    check(s && s->n_outputs == 2 && drk_node_attr_int(s, "axis", -9) == 1, "old11: Split axis/outputs");
    drk_node_t *q = find_node(g, DRK_OP_SQUEEZE, 0);
    int64_t ax[1] = {0};
    check(q && q->n_inputs == 2 && const_i64_is(q->inputs[1], 1, ax) && !drk_node_attr(q, "axes"),
          "old11: Squeeze axes -> input");
    drk_node_t *u = find_node(g, DRK_OP_UNSQUEEZE, 0);
    int64_t ax2[1] = {2};
    check(u && u->n_inputs == 2 && const_i64_is(u->inputs[1], 1, ax2), "old11: Unsqueeze axes -> input");
    drk_node_t *r = find_node(g, DRK_OP_REDUCE_MEAN, 0);
    int64_t ax3[1] = {1};
    check(r && r->n_inputs == 2 && const_i64_is(r->inputs[1], 1, ax3) && drk_node_attr_int(r, "keepdims", 9) == 0,
          "old11: ReduceMean axes -> input");
    drk_node_t *rs = find_node(g, DRK_OP_REDUCE_SUM, 0);
    check(rs && rs->n_inputs == 2 && const_i64_is(rs->inputs[1], 1, ax3), "old11: ReduceSum axes -> input");
    /* Softmax-11 at axis 1: Reshape(Softmax(Flatten(x, 1), -1), Shape(x)) */
    drk_value_t *sm = find_value(g, "sm");
    check(sm && sm->def && sm->def->op == DRK_OP_RESHAPE, "old11: Softmax result is a Reshape");
    drk_node_t *smn = find_node(g, DRK_OP_SOFTMAX, 0);
    check(smn && drk_node_attr_int(smn, "axis", 0) == -1 && smn->inputs[0]->def &&
              smn->inputs[0]->def->op == DRK_OP_FLATTEN,
          "old11: Softmax on Flatten with axis -1");
    drk_node_t *cl = find_node(g, DRK_OP_CLIP, 0);
    check(cl && cl->n_inputs == 3, "old11: Clip keeps inputs");
    drk_value_t *y = find_value(g, "y_split0");
    check(y && y->dtype == DRK_DT_F32 && y->loc.node_index == 0 && y->loc.node_name &&
              strcmp(y->loc.node_name, "split_node") == 0,
          "old11: loc of node outputs");
    drk_graph_destroy(g);
  }
  g = load(dir, "old6.onnx", &d);
  if (g) {
    drk_node_t *cl = find_node(g, DRK_OP_CLIP, 0);
    check(cl && cl->n_inputs == 3 && cl->inputs[1] && cl->inputs[2] && cl->inputs[1]->kind == DRK_VALUE_CONST &&
              cl->inputs[1]->dtype == DRK_DT_F32 && ((const float *)cl->inputs[1]->data)[0] == -1.0f &&
              ((const float *)cl->inputs[2]->data)[0] == 6.0f,
          "old6: Clip min/max -> inputs");
    drk_node_t *p = find_node(g, DRK_OP_PAD, 0);
    int64_t pads[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    check(p && p->n_inputs == 3 && const_i64_is(p->inputs[1], 8, pads) && p->inputs[2] &&
              ((const float *)p->inputs[2]->data)[0] == 2.5f && !drk_node_attr(p, "pads"),
          "old6: Pad attrs -> inputs");
    drk_node_t *rm = find_node(g, DRK_OP_REDUCE_MAX, 0);
    int64_t ax[2] = {2, 3};
    check(rm && rm->n_inputs == 2 && const_i64_is(rm->inputs[1], 2, ax), "old6: ReduceMax axes -> input");
    drk_node_t *a = find_node(g, DRK_OP_ADD, 0);
    check(a && !drk_node_attr(a, "broadcast"), "old6: Add drops broadcast");
    drk_node_t *sl = find_node(g, DRK_OP_SLICE, 0);
    int64_t st[1] = {1}, en[1] = {3};
    check(sl && sl->n_inputs == 4 && const_i64_is(sl->inputs[1], 1, st) && const_i64_is(sl->inputs[2], 1, en),
          "old6: Slice attrs -> inputs");
    drk_graph_destroy(g);
  }
  g = load(dir, "consts.onnx", &d);
  if (g) {
    drk_value_t *a = find_value(g, "c_floats"), *b = find_value(g, "c_int"), *c = find_value(g, "c_tensor");
    check(a && a->kind == DRK_VALUE_CONST && a->dtype == DRK_DT_F32 && a->shape.rank == 1 && a->nbytes == 8,
          "consts: value_floats");
    int64_t seven = 7;
    check(b && const_i64_is(b, 1, &seven) && b->shape.rank == 0, "consts: value_int");
    check(c && c->kind == DRK_VALUE_CONST && c->dtype == DRK_DT_I32 && c->shape.rank == 2, "consts: value");
    check(find_node(g, DRK_OP_IDENTITY, 0) != NULL, "consts: Identity kept");
    check(g->n_nodes == 4 && g->n_consts == 3, "consts: Constant nodes became constants (%zu nodes, %zu consts)",
          g->n_nodes, g->n_consts);
    drk_node_t *cos = find_node(g, DRK_OP_CONSTANT_OF_SHAPE, 0);
    const drk_attr_t *v = cos ? drk_node_attr(cos, "value") : NULL;
    check(v && v->kind == DRK_ATTR_TENSOR && v->tensor->dtype == DRK_DT_I32 && cos->outputs[0]->dtype == DRK_DT_I32,
          "consts: ConstantOfShape TENSOR attr and output dtype");
    drk_node_t *cast = find_node(g, DRK_OP_CAST, 0);
    check(cast && cast->outputs[0]->dtype == DRK_DT_F16, "consts: Cast output dtype");
    drk_graph_destroy(g);
  }
}

static void test_dims(const char *dir) {
  drk_diag_t d;
  drk_graph_t *g = load(dir, "dims.onnx", &d);
  if (!g) return;
  drk_value_t *x = find_value(g, "x");
  check(x && x->kind == DRK_VALUE_INPUT && x->shape.rank == 3, "dims: rank");
  if (x && x->shape.rank == 3) {
    check(x->shape.dims[0].sym && strcmp(x->shape.dims[0].sym, "N") == 0 && x->shape.dims[0].size == -1,
          "dims: dim_param N");
    check(!x->shape.dims[1].sym && x->shape.dims[1].size == 3, "dims: static 3");
    check(x->shape.dims[2].sym && strcmp(x->shape.dims[2].sym, "N") != 0, "dims: fresh symbol for unknown dim");
  }
  drk_value_t *h = find_value(g, "h");
  check(h && h->shape.rank == 3 && h->shape.dims[0].sym && strcmp(h->shape.dims[0].sym, "N") == 0 &&
            h->shape.dims[2].sym && strcmp(h->shape.dims[2].sym, "W") == 0 &&
            h->dtype == DRK_DT_F32,
        "dims: value_info applied");
  drk_value_t *z = find_value(g, "z");
  check(z && z->shape.rank == -1, "dims: no info -> unknown rank");
  drk_value_t *y = find_value(g, "y");
  check(y && y->dtype == DRK_DT_BOOL && g->n_outputs == 1 && g->outputs[0] == y, "dims: output dtype");
  drk_graph_destroy(g);
}

static void test_errors(const char *dir) {
  expect_error(dir, "unsupported.onnx",
               "/unsupported.onnx: node 'unique_1' (#4): error: unsupported op 'Unique' (domain 'ai.onnx', opset 17)");
  expect_error(dir, "opset26.onnx", "unsupported opset 26 for domain 'ai.onnx' (drkc reads opsets 1-25)");
  expect_error(dir, "ir15.onnx", "unsupported IR version 15");
  expect_error(dir, "domain.onnx", "node 'fm' (#0): error: unsupported op 'EmbedLayerNormalization' (domain 'com.microsoft', opset 1)");
  expect_error(dir, "tile1.onnx", "unsupported op 'Tile' (domain 'ai.onnx', opset 1)");
  expect_error(dir, "graphattr.onnx", "unsupported op 'If'");
  expect_error(dir, "string.onnx", "unsupported dtype STRING");
  expect_error(dir, "undefined.onnx", "not defined");
}

/* Truncations and byte flips of valid models: errors or graphs, never a crash or a leak. */
static void test_corruption(const char *dir) {
  const char *files[] = {"old11.onnx", "typed.onnx", "consts.onnx", "dims.onnx"};
  unsigned seed = 12345;
  int ok = 0, err = 0;
  for (size_t f = 0; f < DRK_ARRAY_LEN(files); f++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, files[f]);
    drk_diag_t d;
    drk_diag_init(&d, stderr);
    size_t n;
    char *buf = drk_read_file(path, &n, &d);
    check(buf != NULL, "read %s", path);
    if (!buf) continue;
    for (size_t len = 0; len < n; len += 1 + len / 64) {
      drk_diag_init(&d, NULL);
      drk_graph_t *g = drk_onnx_import_buffer(buf, len, files[f], NULL, &d);
      g ? ok++ : err++;
      check(g != NULL || d.n_errors > 0, "truncation without an error");
      drk_graph_destroy(g);
    }
    char *copy = malloc(n);
    for (int it = 0; it < 2000; it++) {
      memcpy(copy, buf, n);
      int flips = 1 + it % 4;
      for (int k = 0; k < flips; k++) {
        seed = seed * 1103515245u + 12345u;
        copy[(seed >> 8) % n] ^= (char)(1u << ((seed >> 4) & 7));
      }
      drk_diag_init(&d, NULL);
      drk_graph_t *g = drk_onnx_import_buffer(copy, n, files[f], NULL, &d);
      g ? ok++ : err++;
      check(g != NULL || d.n_errors > 0, "corruption without an error");
      drk_graph_destroy(g);
    }
    free(copy);
    free(buf);
  }
  printf("corruption: %d imported, %d rejected\n", ok, err);
}

/* ---- tensors ---- */

static void test_tensors(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/manifest.txt", dir);
  FILE *f = fopen(path, "r");
  check(f != NULL, "open %s", path);
  if (!f) return;
  char line[1024];
  int n_ok = 0;
  while (fgets(line, sizeof line, f)) {
    char file[256], kind[16], rest[512] = "";
    if (sscanf(line, "%255s %15s %511[^\n]", file, kind, rest) < 2) continue;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    bool npy = strstr(file, ".npy") != NULL;
    drk_diag_t d;
    drk_diag_init(&d, NULL);
    drk_tensor_t t;
    char *name = NULL;
    bool ok = npy ? drk_tensor_read_npy(path, &t, &d) : drk_tensor_read_pb(path, &t, &name, &d);
    if (strcmp(kind, "err") == 0) {
      check(!ok && strstr(d.first, rest) && strstr(d.first, file), "%s: want error '%s', got '%s'", file, rest,
            ok ? "success" : d.first);
      if (ok) drk_tensor_free(&t);
      continue;
    }
    check(ok, "%s: read failed: %s", file, d.first);
    if (!ok) continue;
    char dtn[16];
    int rank, used = 0;
    sscanf(rest, "%15s %d%n", dtn, &rank, &used);
    drk_dtype_t want;
    check(drk_dtype_from_name(dtn, strlen(dtn), &want) && t.dtype == want, "%s: dtype %s", file,
          drk_dtype_name(t.dtype));
    check(t.rank == rank, "%s: rank %d, want %d", file, t.rank, rank);
    const char *p = rest + used;
    for (int i = 0; i < rank && i < t.rank; i++) {
      long long dim = 0;
      int k = 0;
      sscanf(p, "%lld%n", &dim, &k);
      p += k;
      check(t.dims[i] == dim, "%s: dim %d", file, i);
    }
    snprintf(path, sizeof path, "%s/%s.bin", dir, file);
    size_t n;
    char *expect = drk_read_file(path, &n, &d);
    check(expect && n == t.nbytes && memcmp(expect, t.data, n) == 0, "%s: data differs", file);
    free(expect);
    if (!npy) check(name && strcmp(name, "tname") == 0, "%s: tensor name '%s'", file, name ? name : "(null)");
    free(name);
    /* Write back in both formats (npy only where expressible). */
    snprintf(path, sizeof path, "%s/out/%s.pb", dir, file);
    check(drk_tensor_write_pb(path, &t, "back", &d), "%s: write pb: %s", file, d.first);
    drk_tensor_t t2;
    if (drk_tensor_read_pb(path, &t2, NULL, &d)) {
      check(t2.dtype == t.dtype && t2.rank == t.rank && t2.nbytes == t.nbytes &&
                (t.nbytes == 0 || memcmp(t2.data, t.data, t.nbytes) == 0),
            "%s: pb round trip", file);
      drk_tensor_free(&t2);
    } else {
      check(false, "%s: re-read pb: %s", file, d.first);
    }
    snprintf(path, sizeof path, "%s/out/%s.npy", dir, file);
    drk_diag_init(&d, NULL);
    bool wrote = drk_tensor_write_npy(path, &t, &d);
    if (t.dtype == DRK_DT_BF16) {
      check(!wrote && strstr(d.first, "cannot be expressed in .npy"), "%s: bf16 npy must fail", file);
    } else {
      check(wrote, "%s: write npy: %s", file, d.first);
      if (wrote && drk_tensor_read_npy(path, &t2, &d)) {
        check(t2.dtype == t.dtype && t2.rank == t.rank && t2.nbytes == t.nbytes &&
                  (t.nbytes == 0 || memcmp(t2.data, t.data, t.nbytes) == 0),
              "%s: npy round trip", file);
        drk_tensor_free(&t2);
      }
    }
    drk_tensor_free(&t);
    n_ok++;
  }
  fclose(f);
  printf("tensors: %d files checked\n", n_ok);
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "corpus") == 0) return run_corpus(argc - 2, argv + 2);
  if (argc == 3 && strcmp(argv[1], "gen") == 0) {
    test_external(argv[2]);
    test_typed(argv[2]);
    test_old_opsets(argv[2]);
    test_dims(argv[2]);
    test_errors(argv[2]);
    test_corruption(argv[2]);
  } else if (argc == 3 && strcmp(argv[1], "tensors") == 0) {
    test_tensors(argv[2]);
  } else {
    fprintf(stderr, "usage: %s corpus DIR... | gen DIR | tensors DIR\n", argv[0]);
    return 2;
  }
  printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
