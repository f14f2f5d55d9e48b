/* drk_graphtest: runs self-contained .drkg test files, and built-in checks of the printer,
 * parser and verifier on graphs made with the builder.
 *
 *   drk_graphtest FILE.drkg   runs one test file; exit 0 on pass, 1 on failure
 *   drk_graphtest --selftest  runs the built-in checks
 *   drk_graphtest --print FILE  parses, verifies and prints FILE (a debugging aid)
 *
 * A test file is a graph plus directives in comment lines:
 *   # EXPECT-ERROR: L:C: error: MESSAGE      (or: node 'NAME' (#I): error: MESSAGE)
 *       the parse (or, if it parses, the verifier) must fail, and its errors must read
 *       exactly FILE:L:C: error: MESSAGE (FILE: node ...), one line each, in order.
 *   # EXPECT-PRINT:      followed by lines `# | TEXT`: the exact printed form of the graph.
 *   # NO-VERIFY: WHY     a printer/parser test whose attributes are made up (to print every
 *       kind): the verifier, which checks attributes against the op's table, is not run.
 * Without EXPECT-ERROR the graph must parse, verify, and print(parse(print(g))) == print(g). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "tests/common/check.h"

typedef struct {
  char *buf;
  size_t len, cap;
} sbuf_t;

static void sb_add(sbuf_t *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    b->cap = (b->len + n + 1) * 2;
    b->buf = realloc(b->buf, b->cap);
    if (!b->buf) abort();
  }
  memcpy(b->buf + b->len, s, n);
  b->len += n;
  b->buf[b->len] = 0;
}

/* Captures diagnostics in memory so a test can compare all of them. */
typedef struct {
  drk_diag_t d;
  char *text;
  size_t len;
  FILE *f;
} capture_t;

static void cap_open(capture_t *c) {
  c->text = NULL;
  c->len = 0;
  c->f = open_memstream(&c->text, &c->len);
  drk_diag_init(&c->d, c->f);
}
static void cap_close(capture_t *c) { fclose(c->f); }

/* parse -> print -> parse -> print fixed point; returns the first print (malloc'ed). */
static bool no_verify; /* the file has a NO-VERIFY directive */

static char *roundtrip(const char *name, const char *text, size_t len, bool *ok) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  *ok = false;
  drk_graph_t *g = drk_graph_parse(text, len, name, &d);
  if (!g) {
    fprintf(stderr, "FAIL %s: does not parse\n", name);
    return NULL;
  }
  bool verified = no_verify || drk_graph_verify(g, &d);
  size_t n1;
  char *p1 = drk_graph_print_string(g, SIZE_MAX, &n1);
  drk_graph_destroy(g);
  if (!verified) {
    fprintf(stderr, "FAIL %s: verifier rejects it\n", name);
    return p1;
  }
  drk_graph_t *g2 = drk_graph_parse(p1, n1, "<printed>", &d);
  if (!g2) {
    fprintf(stderr, "FAIL %s: printed form does not parse:\n%s", name, p1);
    return p1;
  }
  if (!no_verify && !drk_graph_verify(g2, &d)) fprintf(stderr, "FAIL %s: verifier rejects the printed form\n", name);
  else {
    char *p2 = drk_graph_print_string(g2, SIZE_MAX, NULL);
    if (strcmp(p1, p2) != 0)
      fprintf(stderr, "FAIL %s: print is not a fixed point:\n--- first\n%s--- second\n%s", name, p1, p2);
    else *ok = true;
    free(p2);
  }
  drk_graph_destroy(g2);
  return p1;
}

static int run_file(const char *path) {
  drk_diag_t rd;
  drk_diag_init(&rd, stderr);
  size_t len;
  char *text = drk_read_file(path, &len, &rd);
  if (!text) return 1;
  sbuf_t want_err = {0}, want_print = {0};
  bool in_print = false, has_print = false;
  for (char *line = text; line < text + len;) {
    char *eol = memchr(line, '\n', (size_t)(text + len - line));
    size_t n = eol ? (size_t)(eol - line) : (size_t)(text + len - line);
    const char *ee = "# EXPECT-ERROR: ", *ep = "# EXPECT-PRINT:";
    if (n >= strlen(ee) && memcmp(line, ee, strlen(ee)) == 0) {
      /* `L:C: error: ...` follows the file name directly; `node 'x' (#i): ...` after ": ". */
      const char *rest = line + strlen(ee);
      sb_add(&want_err, path, strlen(path));
      sb_add(&want_err, *rest >= '0' && *rest <= '9' ? ":" : ": ", *rest >= '0' && *rest <= '9' ? 1 : 2);
      sb_add(&want_err, rest, n - strlen(ee));
      sb_add(&want_err, "\n", 1);
      in_print = false;
    } else if (n >= 12 && memcmp(line, "# NO-VERIFY:", 12) == 0) {
      no_verify = true;
    } else if (n >= strlen(ep) && memcmp(line, ep, strlen(ep)) == 0) {
      in_print = has_print = true;
    } else if (in_print && n >= 3 && memcmp(line, "# |", 3) == 0) {
      size_t skip = n > 3 && line[3] == ' ' ? 4 : 3;
      sb_add(&want_print, line + skip, n - skip);
      sb_add(&want_print, "\n", 1);
    } else {
      in_print = false;
    }
    line += n + 1;
  }
  int rc = 0;
  if (want_err.len) {
    capture_t c;
    cap_open(&c);
    drk_graph_t *g = drk_graph_parse(text, len, path, &c.d);
    if (g) drk_graph_verify(g, &c.d);
    drk_graph_destroy(g);
    cap_close(&c);
    if (!c.text || strcmp(c.text, want_err.buf) != 0) {
      fprintf(stderr, "FAIL %s: expected errors:\n%s got:\n%s", path, want_err.buf, c.text ? c.text : "");
      rc = 1;
    }
    free(c.text);
  } else {
    bool ok;
    char *p = roundtrip(path, text, len, &ok);
    if (!ok) rc = 1;
    if (p && has_print && strcmp(p, want_print.buf ? want_print.buf : "") != 0) {
      fprintf(stderr, "FAIL %s: printed form differs from EXPECT-PRINT:\n--- expected\n%s--- got\n%s", path,
              want_print.buf ? want_print.buf : "", p);
      rc = 1;
    }
    free(p);
  }
  free(want_err.buf);
  free(want_print.buf);
  free(text);
  if (rc == 0) printf("PASS %s\n", path);
  return rc;
}

/* ---- built-in checks on builder graphs ---- */

static char *print_str(const drk_graph_t *g, size_t max) { return drk_graph_print_string(g, max, NULL); }

/* Verifies g and expects exactly the given first error (NULL: no error). */
static void expect_verify(const drk_graph_t *g, const char *first, const char *what) {
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  bool ok = drk_graph_verify(g, &d);
  if (!first) CHECK(ok, "%s: verifier failed: %s", what, d.first);
  else {
    CHECK(!ok, "%s: verifier passed", what);
    CHECK(strcmp(d.first, first) == 0, "%s: got '%s', expected '%s'", what, d.first, first);
  }
}

static void test_attrs_roundtrip(void) {
  drk_graph_t *g = drk_graph_create("attrs");
  int64_t dims[2] = {2, 3};
  drk_value_t *x = drk_graph_add_input(g, "x", DRK_DT_F32, drk_graph_shape_static(g, 2, dims));
  drk_loc_t loc = drk_loc_none;
  loc.file = "m.onnx";
  loc.node_name = "conv \"0\"\n";
  loc.node_index = 7;
  drk_node_t *n = drk_graph_add_node(g, DRK_OP_RELU, 1, &x, 1, (const char *const[]){"onnx::y/1"}, loc);
  n->outputs[0]->shape = x->shape;
  drk_node_set_int(g, n, "i", INT64_MIN);
  drk_node_set_float(g, n, "f", 0.1);
  drk_node_set_float(g, n, "g", -0.0);
  drk_node_set_float(g, n, "h", 1e300 * 1e10);
  drk_node_set_float(g, n, "n", 4.9406564584124654e-324);
  drk_node_set_float(g, n, "w", 1e22);
  drk_node_set_string(g, n, "s", "tab\there \\ \x01 é");
  drk_node_set_ints(g, n, "is", 0, NULL);
  drk_node_set_floats(g, n, "fs", 0, NULL);
  drk_node_add_attr(g, n, "ss", DRK_ATTR_STRINGS);
  double fl[3] = {1.0, -2.5e-300, 3.0000000000000004};
  drk_node_set_floats(g, n, "fl", 3, fl);
  drk_node_set_float(g, n, "loc", 2.0); /* a reserved word as an attribute name */
  float one = 1.0f;
  drk_attr_t *t = drk_node_add_attr(g, n, "t", DRK_ATTR_TENSOR);
  t->tensor = drk_graph_new_const_value(g, NULL, DRK_DT_F32, drk_graph_shape_static(g, 0, NULL), &one, 4);
  drk_graph_add_output(g, n->outputs[0]);
  /* made-up names (to print every kind): the attribute table refuses the first; the node name
   * is escaped in the message */
  expect_verify(g, "m.onnx: node 'conv \"0\"\\x0a' (#7): error: Relu: attribute 'i' is not an attribute of Relu (it takes: none)",
                "attrs");

  char *p1 = print_str(g, SIZE_MAX);
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_graph_t *g2 = drk_graph_parse(p1, strlen(p1), "attrs.drkg", &d);
  CHECK(g2, "attrs: printed form does not parse:\n%s", p1);
  if (g2) {
    char *p2 = print_str(g2, SIZE_MAX);
    CHECK(strcmp(p1, p2) == 0, "attrs: not a fixed point:\n%s---\n%s", p1, p2);
    free(p2);
    const drk_node_t *m = g2->nodes[0];
    CHECK(m->loc.node_index == 7 && strcmp(m->loc.node_name, "conv \"0\"\n") == 0, "attrs: loc lost");
    CHECK(m->loc.line == 2 && m->loc.col == 3, "attrs: text loc %d:%d", m->loc.line, m->loc.col);
    static const struct { const char *name; drk_attr_kind_t kind; } kinds[] = {
        {"i", DRK_ATTR_INT}, {"f", DRK_ATTR_FLOAT}, {"s", DRK_ATTR_STRING}, {"is", DRK_ATTR_INTS},
        {"fs", DRK_ATTR_FLOATS}, {"ss", DRK_ATTR_STRINGS}, {"t", DRK_ATTR_TENSOR}, {"fl", DRK_ATTR_FLOATS}};
    for (size_t i = 0; i < DRK_ARRAY_LEN(kinds); i++) {
      const drk_attr_t *a = drk_node_attr(m, kinds[i].name);
      CHECK(a && a->kind == kinds[i].kind, "attrs: kind of '%s' lost", kinds[i].name);
    }
    const drk_attr_t *a;
    CHECK(drk_node_attr_int(m, "i", 0) == INT64_MIN, "attrs: int");
    CHECK(drk_node_attr_float(m, "f", 0) == 0.1, "attrs: 0.1");
    a = drk_node_attr(m, "g");
    CHECK(a && a->f == 0 && signbit(a->f), "attrs: -0.0");
    CHECK(drk_node_attr_float(m, "h", 0) == 1e300 * 1e10, "attrs: inf");
    CHECK(drk_node_attr_float(m, "n", 0) == 4.9406564584124654e-324, "attrs: denormal");
    CHECK(drk_node_attr_float(m, "w", 0) == 1e22, "attrs: 1e22");
    CHECK(strcmp(drk_node_attr_string(m, "s", ""), "tab\there \\ \x01 é") == 0, "attrs: string");
    a = drk_node_attr(m, "fl");
    CHECK(a && a->n == 3 && memcmp(a->floats, fl, sizeof fl) == 0, "attrs: floats");
    a = drk_node_attr(m, "t");
    CHECK(a && a->tensor && a->tensor->nbytes == 4 && memcmp(a->tensor->data, &one, 4) == 0, "attrs: tensor");
    CHECK(strcmp(g2->outputs[0]->name, "onnx::y/1") == 0, "attrs: quoted name");
    drk_graph_destroy(g2);
  }
  free(p1);
  drk_graph_destroy(g);
}

static void test_elided(void) {
  drk_graph_t *g = drk_graph_create("big");
  int64_t dims[1] = {64};
  float data[64] = {0};
  drk_value_t *w = drk_graph_add_const_copy(g, "w", DRK_DT_F32, drk_graph_shape_static(g, 1, dims), data, sizeof data);
  drk_graph_add_const_copy(g, "s", DRK_DT_F32, drk_graph_shape_static(g, 1, dims), data, 8 * 4);
  drk_graph_add_output(g, w);
  char *p = print_str(g, 16);
  CHECK(strstr(p, "%w: f32[64] = const elided(256 bytes)") != NULL, "elided: form:\n%s", p);
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  drk_graph_t *g2 = drk_graph_parse(p, strlen(p), "big.drkg", &d);
  CHECK(!g2 && strstr(d.first, "big.drkg:2:23: error: constant data elided") == d.first, "elided: got '%s'",
        d.first);
  drk_graph_destroy(g2);
  free(p);
  /* The wrong-size constant is a verifier error. */
  g->source = "big.onnx";
  expect_verify(g, "big.onnx: error: constant '%s' has 32 bytes, f32 with 64 elements needs 256", "const size");
  drk_graph_destroy(g);
}

static void test_verifier_builder(void) {
  int64_t dims[1] = {4};
  /* Out-of-order use: a node uses a result defined by a later node. */
  drk_graph_t *g = drk_graph_create("order");
  g->source = "order.onnx";
  drk_value_t *x = drk_graph_add_input(g, "x", DRK_DT_F32, drk_graph_shape_static(g, 1, dims));
  drk_loc_t l0 = drk_loc_none, l1 = drk_loc_none;
  l0.node_name = "first";
  l0.node_index = 0;
  l1.node_name = "second";
  l1.node_index = 1;
  drk_node_t *a = drk_graph_add_node(g, DRK_OP_RELU, 1, &x, 1, (const char *const[]){"a"}, l0);
  drk_node_t *b = drk_graph_add_node(g, DRK_OP_NEG, 1, &x, 1, (const char *const[]){"b"}, l1);
  a->inputs[0] = b->outputs[0];
  drk_graph_add_output(g, a->outputs[0]);
  expect_verify(g, "order.onnx: node 'first' (#0): error: Relu: input 0 uses '%b' before its definition", "order");
  /* Removing `b` makes `a` use a removed node's result. */
  b->dead = true;
  a->inputs[0] = b->outputs[0];
  g->nodes[0] = b;
  g->nodes[1] = a;
  expect_verify(g, "order.onnx: node 'first' (#0): error: Relu: input 0 uses '%b', a result of a removed node",
                "dead");
  drk_graph_destroy(g);

  /* Duplicate names, undefined outputs. */
  g = drk_graph_create("dup");
  g->source = "dup.onnx";
  x = drk_graph_add_input(g, "x", DRK_DT_F32, drk_graph_shape_static(g, 1, dims));
  drk_node_t *c = drk_graph_add_node(g, DRK_OP_RELU, 1, &x, 1, (const char *const[]){"x"}, l0);
  c->outputs[0]->shape = x->shape;
  drk_graph_add_output(g, c->outputs[0]);
  expect_verify(g, "dup.onnx: node 'first' (#0): error: duplicate value name '%x' (2 values have it)", "dup");
  {
    /* a name three values share is one error, not one per extra value */
    drk_node_t *c2 = drk_graph_add_node(g, DRK_OP_RELU, 1, &x, 1, (const char *const[]){"x"}, l0);
    c2->outputs[0]->shape = x->shape;
    drk_diag_t d3;
    drk_diag_init(&d3, NULL);
    CHECK(!drk_graph_verify(g, &d3) && d3.n_errors == 1, "dup x3: %d errors", d3.n_errors);
    CHECK(strstr(d3.first, "(3 values have it)") != NULL, "dup x3: '%s'", d3.first);
    c2->dead = true;
  }
  c->outputs[0]->name = "y";
  expect_verify(g, NULL, "dup fixed");
  drk_graph_t *other = drk_graph_create("other");
  drk_value_t *z = drk_graph_add_input(other, "z", DRK_DT_F32, drk_graph_shape_static(other, 1, dims));
  z->id = 0; /* same id as x, but not x */
  drk_graph_add_output(g, z);
  expect_verify(g, "dup.onnx: error: graph output '%z' is not defined in the graph", "undefined output");
  drk_graph_destroy(other);
  drk_graph_destroy(g);

  /* Un-inferred results (unknown rank) are not dtype-checked. */
  g = drk_graph_create("uninferred");
  drk_value_t *i = drk_graph_add_input(g, "i", DRK_DT_I64, drk_graph_shape_static(g, 1, dims));
  drk_node_t *s = drk_graph_add_node(g, DRK_OP_SHAPE, 1, &i, 1, NULL, drk_loc_none);
  drk_value_t *ins[2] = {i, s->outputs[0]};
  drk_node_t *e = drk_graph_add_node(g, DRK_OP_EQUAL, 2, ins, 1, NULL, drk_loc_none);
  drk_graph_add_output(g, e->outputs[0]);
  expect_verify(g, NULL, "uninferred");
  drk_graph_destroy(g);
}

static void test_garbage(void) {
  /* A few hostile inputs the fuzzer would find first; they must fail cleanly. */
  static const char *const inputs[] = {"", "graph", "graph @g(", "\x00\x01", "graph @g() -> () { return }x",
                                       "graph @g(%x: f32[99999999999, 99999999999, 99999999]) -> () { return }",
                                       "graph @g() -> () { %c: f32[1] = const hex\"0000803f\" loc(onnx #9999999999)"};
  for (size_t k = 0; k < DRK_ARRAY_LEN(inputs); k++) {
    drk_diag_t d;
    drk_diag_init(&d, NULL);
    size_t len = k == 3 ? 2 : strlen(inputs[k]);
    drk_graph_t *g = drk_graph_parse(inputs[k], len, "junk", &d);
    CHECK(!g && d.n_errors == 1 && strncmp(d.first, "junk:", 5) == 0, "garbage %zu: '%s'", k, d.first);
    drk_graph_destroy(g);
  }
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  drk_graph_t *g = drk_graph_parse("graph @g() -> () {\n  return\n}\n", 30, "ok", &d);
  CHECK(g && g->n_nodes == 0 && strcmp(g->name, "g") == 0, "empty graph: %s", d.first);
  drk_graph_destroy(g);
}

/* drk_graph_unique_name: free names as they are, taken ones numbered past every value's name
 * (also of values made after the first call, of parsed graphs, and of reserved names), and two
 * calls never return one name. */
static void test_unique_name(void) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  static const char txt[] = "graph @u(%x: f32[2]) -> (%y) {\n  %b: f32[2] = const [1.0, 2.0]\n"
                            "  %b_1: f32[2] = const [3.0, 4.0]\n  %y: f32[2] = Add(%x, %b)\n  return %y\n}\n";
  drk_graph_t *g = drk_graph_parse(txt, strlen(txt), "u.drkg", &d);
  CHECK(g != NULL, "unique: parse: %s", d.first);
  if (!g) return;
  CHECK(strcmp(drk_graph_unique_name(g, "fresh"), "fresh") == 0, "unique: a free name is kept");
  CHECK(strcmp(drk_graph_unique_name(g, "fresh"), "fresh_1") == 0, "unique: a returned name is taken");
  CHECK(strcmp(drk_graph_unique_name(g, "b"), "b_2") == 0, "unique: skips the model's own b_1");
  CHECK(strcmp(drk_graph_unique_namef(g, "%s_%s", "y", "merged"), "y_merged") == 0, "unique: printf form");
  CHECK(strcmp(drk_graph_unique_namef(g, "%s_%s", "y", "merged"), "y_merged_1") == 0, "unique: printf form again");
  int64_t two = 2;
  drk_node_t *n = drk_graph_add_node(g, DRK_OP_RELU, 1, &g->outputs[0], 1, (const char *const[]){"later"}, drk_loc_none);
  n->outputs[0]->shape = drk_graph_shape_static(g, 1, &two);
  CHECK(drk_graph_name_taken(g, "later"), "unique: a value added after the first call is known");
  CHECK(strcmp(drk_graph_unique_name(g, "later"), "later_1") == 0, "unique: and numbered past");
  drk_graph_reserve_name(g, "claimed");
  CHECK(strcmp(drk_graph_unique_name(g, "claimed"), "claimed_1") == 0, "unique: a reserved name is taken");
  /* the index grows past its first table without losing names */
  char buf[32];
  for (int i = 0; i < 3000; i++) {
    snprintf(buf, sizeof buf, "many%d", i);
    drk_graph_add_const_copy(g, buf, DRK_DT_F32, drk_graph_shape_static(g, 1, &two), (float[]){0, 0}, 8);
  }
  CHECK(strcmp(drk_graph_unique_name(g, "many17"), "many17_1") == 0, "unique: after growing");
  CHECK(!drk_graph_name_taken(g, "many3000"), "unique: not taken");
  drk_graph_destroy(g);
  /* a graph without any value yet (an ONNX model of one Constant node) */
  g = drk_graph_create("empty");
  CHECK(!drk_graph_name_taken(g, "x"), "unique: empty graph");
  drk_graph_reserve_name(g, "x");
  CHECK(strcmp(drk_graph_unique_name(g, "x"), "x_1") == 0, "unique: reserved in an empty graph");
  drk_graph_destroy(g);
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--selftest") == 0) {
    test_unique_name();
    test_attrs_roundtrip();
    test_elided();
    test_verifier_builder();
    test_garbage();
    if (!failures) printf("PASS selftest\n");
    return check_status("graphtest selftest");
  }
  if (argc == 3 && strcmp(argv[1], "--print") == 0) {
    drk_diag_t d;
    drk_diag_init(&d, stderr);
    size_t len;
    char *text = drk_read_file(argv[2], &len, &d);
    drk_graph_t *g = text ? drk_graph_parse(text, len, argv[2], &d) : NULL;
    free(text);
    if (!g) return 1;
    bool ok = drk_graph_verify(g, &d);
    drk_graph_print(g, stdout);
    drk_graph_destroy(g);
    return ok ? 0 : 1;
  }
  if (argc < 2) {
    fprintf(stderr, "usage: drk_graphtest FILE.drkg... | --selftest | --print FILE\n");
    return 2;
  }
  int rc = 0;
  for (int i = 1; i < argc; i++) rc |= run_file(argv[i]);
  return rc;
}
