/* Parser of the graph IR text form (.drkg); see docs/graph-ir.md.
 *
 * Reentrant (a pure bison parser over a reentrant flex scanner; the state lives in a
 * drk_gg_state_t on drk_graph_parse's stack). Builds the graph while parsing: a value must be
 * defined (graph input, constant or node result) before a later line refers to it, so text
 * order is a topological order. Scratch data (decoded strings, hex bytes, lists) lives in a
 * scratch arena dropped at the end; whatever the graph keeps is copied into its arena. The
 * first error is reported as `file:line:col: error: ...` and stops the parse; the partly built
 * graph is destroyed, so nothing leaks on any input. Op arity and dtype rules are the
 * verifier's job, not the parser's. */
%define api.pure full
%define api.prefix {drk_gg}
%define api.location.type {drk_gg_loc_t}
%define parse.error detailed
%locations
%param {void *scanner}
%parse-param {struct drk_gg_state *st}

%code requires {
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"

typedef struct drk_gg_loc {
  int first_line, first_column, last_line, last_column;
} drk_gg_loc_t;

typedef struct drk_gg_str {
  const char *s; /* NUL-terminated (hex bytes: not terminated) */
  size_t n;
} drk_gg_str_t;

typedef struct drk_gg_type {
  drk_dtype_t dt;
  int rank; /* -1: [*] */
  drk_dim_t *dims;
  size_t n, cap;
} drk_gg_type_t;

typedef struct drk_gg_lit {
  char kind; /* 'i', 'f', 's' */
  int64_t i;
  double f;
  const char *s;
  drk_gg_loc_t loc;
} drk_gg_lit_t;

typedef struct drk_gg_lits {
  drk_gg_lit_t *items;
  size_t n, cap;
} drk_gg_lits_t;

typedef struct drk_gg_cdata {
  char kind; /* 'h' hex, 'l' literal list, 'e' elided, 'w' a tensor of the weights file (hex.s: its name) */
  drk_gg_str_t hex;
  drk_gg_lits_t *lits;
  drk_gg_loc_t loc;
} drk_gg_cdata_t;

typedef struct drk_gg_attr {
  const char *name;
  drk_gg_loc_t loc;
  drk_attr_kind_t kind;
  int64_t i;
  double f;
  const char *s;
  drk_gg_lits_t *lits;
  drk_gg_type_t *ttype;
  const void *tdata;
  size_t tbytes;
} drk_gg_attr_t;

typedef struct drk_gg_attrs {
  drk_gg_attr_t *items;
  size_t n, cap;
} drk_gg_attrs_t;

typedef struct drk_gg_result {
  const char *name;
  drk_gg_type_t *type;
  drk_gg_loc_t loc;
} drk_gg_result_t;

typedef struct drk_gg_results {
  drk_gg_result_t *items;
  size_t n, cap;
} drk_gg_results_t;

typedef struct drk_gg_vals {
  drk_value_t **items;
  size_t n, cap;
} drk_gg_vals_t;

typedef struct drk_gg_sym {
  const char *name;
  drk_value_t *v;
} drk_gg_sym_t;

typedef struct drk_gg_state {
  drk_graph_t *g;
  drk_arena_t *tmp; /* scratch, dropped after the parse */
  drk_diag_t *d;
  const char *file; /* in the graph's arena */
  int line, col;
  bool failed;
  drk_gg_sym_t *syms; /* open addressing, power-of-two capacity */
  size_t n_syms, cap_syms;
  drk_gg_results_t outs; /* names in the signature's `-> (...)` */
  struct drk_safetensors *weights; /* the `weights "FILE"` sidecar, mapped (a graph blob) */
  const char *weights_path;
} drk_gg_state_t;

void drk_gg_error(drk_gg_state_t *st, drk_gg_loc_t at, const char *fmt, ...) DRK_PRINTF(3, 4);
}

%code {
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "graph_attrs.h"
#include "safetensors.h"
#include "tensor.h"

#ifndef YYSTYPE
#define YYSTYPE DRK_GGSTYPE
#endif
#ifndef YYLTYPE
#define YYLTYPE drk_gg_loc_t
#endif
#include "graph_lex.h"

static void drk_ggerror(drk_gg_loc_t *at, void *scanner, drk_gg_state_t *st, const char *msg);
static drk_value_t *sym_find(drk_gg_state_t *st, const char *name);
static void sym_add(drk_gg_state_t *st, const char *name, drk_value_t *v);
static bool check_shape(drk_gg_state_t *st, drk_gg_type_t *t, drk_gg_loc_t at);
static bool make_data(drk_gg_state_t *st, const drk_gg_type_t *t, const drk_gg_cdata_t *c,
                      const void **out_p, size_t *out_n);
static bool open_weights(drk_gg_state_t *st, drk_gg_str_t path, drk_gg_loc_t at);
static bool make_stmt(drk_gg_state_t *st, drk_gg_results_t *rs, drk_gg_str_t op, drk_gg_loc_t op_loc,
                      drk_gg_vals_t *args, drk_gg_attrs_t *attrs, drk_loc_t nloc);
static drk_value_t *lookup(drk_gg_state_t *st, const char *name, drk_gg_loc_t at);
static drk_shape_t graph_shape(drk_gg_state_t *st, const drk_gg_type_t *t);
static drk_loc_t text_loc(drk_gg_state_t *st, drk_gg_loc_t at);

#define NEW(T) ((T *)drk_arena_alloc(st->tmp, sizeof(T)))
#define PUSH(L, V) DRK_VEC_PUSH(st->tmp, (L)->items, (L)->n, (L)->cap, V)
}

%union {
  int64_t i;
  double f;
  drk_gg_str_t str;
  drk_gg_type_t *type;
  drk_gg_lit_t lit;
  drk_gg_lits_t *lits;
  drk_gg_cdata_t *cdata;
  drk_gg_attr_t *attr;
  drk_gg_attrs_t *attrs;
  drk_gg_result_t *result;
  drk_gg_results_t *results;
  drk_gg_vals_t *vals;
  drk_value_t *value;
  drk_loc_t nloc;
  drk_dim_t dim;
}

%token T_GRAPH "'graph'" T_CONST "'const'" T_RETURN "'return'" T_TENSOR "'tensor'"
%token T_LOC "'loc'" T_ONNX "'onnx'" T_UNDERSCORE "'_'" T_ARROW "'->'"
%token T_ELIDED "elided constant data" T_ERROR "invalid token"
%token <i> T_INT "integer" T_NODEINDEX "node index"
%token <f> T_FLOAT "float"
%token <str> T_IDENT "identifier" T_VALNAME "value name" T_GRAPHNAME "graph name"
%token <str> T_STRING "string" T_HEX "hex data"

%type <type> type shape dims
%type <lit> lit
%type <lits> lits
%type <cdata> cdata
%type <attr> attr aval
%type <attrs> attrs attrs_opt
%type <result> result
%type <results> results
%type <vals> args args_opt
%type <value> arg
%type <nloc> loc_opt
%type <str> aname lname_opt
%type <i> lidx_opt
%type <dim> dim

%%

file:
    weights_opt T_GRAPH T_GRAPHNAME { st->g->name = drk_graph_str(st->g, $3.s); }
    '(' params_opt ')' T_ARROW '(' outnames_opt ')' '{' stmts T_RETURN rets_opt '}'
    {
      if (st->outs.n != st->g->n_outputs) {
        drk_gg_error(st, @14, "return lists %zu value(s) but the signature declares %zu",
                     st->g->n_outputs, st->outs.n);
        YYABORT;
      }
    }
  ;

weights_opt:
    %empty
  | T_IDENT T_STRING {
      if (strcmp($1.s, "weights") != 0) {
        drk_gg_error(st, @1, "unexpected '%s' before 'graph' (expected 'weights \"FILE\"')", $1.s);
        YYABORT;
      }
      if (!open_weights(st, $2, @2)) YYABORT;
    }
  ;

params_opt: %empty | params ;
params: param | params ',' param ;
param:
    T_VALNAME ':' type {
      if (sym_find(st, $1.s)) {
        drk_gg_error(st, @1, "redefinition of value '%%%s'", $1.s);
        YYABORT;
      }
      drk_value_t *v = drk_graph_add_input(st->g, $1.s, $3->dt, graph_shape(st, $3));
      v->loc = text_loc(st, @1);
      sym_add(st, v->name, v);
    }
  ;

outnames_opt: %empty | outnames ;
outnames:
    T_VALNAME { drk_gg_result_t r = {$1.s, NULL, @1}; PUSH(&st->outs, r); }
  | outnames ',' T_VALNAME { drk_gg_result_t r = {$3.s, NULL, @3}; PUSH(&st->outs, r); }
  ;

rets_opt: %empty | rets ;
rets: ret | rets ',' ret ;
ret:
    T_VALNAME {
      drk_value_t *v = lookup(st, $1.s, @1);
      if (!v) YYABORT;
      size_t k = st->g->n_outputs;
      if (k >= st->outs.n || strcmp(st->outs.items[k].name, $1.s) != 0) {
        if (k < st->outs.n)
          drk_gg_error(st, @1, "returned value '%%%s' does not match output #%zu '%%%s' of the signature",
                       $1.s, k, st->outs.items[k].name);
        else
          drk_gg_error(st, @1, "return lists more values than the signature declares (%zu)", st->outs.n);
        YYABORT;
      }
      drk_graph_add_output(st->g, v);
    }
  ;

stmts: %empty | stmts stmt ;
stmt:
    results '=' T_CONST cdata {
      if ($1->n != 1) {
        drk_gg_error(st, $1->items[1].loc, "a constant defines exactly one value");
        YYABORT;
      }
      drk_gg_result_t *r = &$1->items[0];
      const void *p;
      size_t nb;
      if (!make_data(st, r->type, $4, &p, &nb)) YYABORT;
      /* Weights-file data is borrowed from the mapping (or already copied into the graph's arena). */
      drk_value_t *v = $4->kind == 'w'
                           ? drk_graph_add_const(st->g, r->name, r->type->dt, graph_shape(st, r->type), nb ? p : NULL, nb)
                           : drk_graph_add_const_copy(st->g, r->name, r->type->dt, graph_shape(st, r->type), p, nb);
      v->loc = text_loc(st, r->loc);
      sym_add(st, v->name, v);
    }
  | results '=' T_IDENT '(' args_opt ')' attrs_opt loc_opt {
      drk_loc_t nloc = $8;
      drk_loc_t here = text_loc(st, @1);
      nloc.file = here.file;
      nloc.line = here.line;
      nloc.col = here.col;
      if (!make_stmt(st, $1, $3, @3, $5, $7, nloc)) YYABORT;
    }
  ;

results:
    result {
      $$ = NEW(drk_gg_results_t);
      PUSH($$, *$1);
    }
  | results ',' result {
      $$ = $1;
      PUSH($$, *$3);
    }
  ;
result:
    T_VALNAME ':' type {
      if (sym_find(st, $1.s)) {
        drk_gg_error(st, @1, "redefinition of value '%%%s'", $1.s);
        YYABORT;
      }
      $$ = NEW(drk_gg_result_t);
      $$->name = $1.s;
      $$->type = $3;
      $$->loc = @1;
    }
  ;

type:
    T_IDENT shape {
      $$ = $2;
      if (!drk_dtype_from_name($1.s, $1.n, &$$->dt)) {
        drk_gg_error(st, @1, "unknown dtype '%s'", $1.s);
        YYABORT;
      }
      if (!check_shape(st, $$, @2)) YYABORT;
    }
  ;
shape:
    '[' '*' ']' { $$ = NEW(drk_gg_type_t); $$->rank = -1; }
  | '[' ']' { $$ = NEW(drk_gg_type_t); $$->rank = 0; }
  | '[' dims ']' { $$ = $2; $$->rank = (int)$$->n; }
  ;
dims:
    dim { $$ = NEW(drk_gg_type_t); DRK_VEC_PUSH(st->tmp, $$->dims, $$->n, $$->cap, $1); }
  | dims ',' dim { $$ = $1; DRK_VEC_PUSH(st->tmp, $$->dims, $$->n, $$->cap, $3); }
  ;
dim:
    T_INT {
      if ($1 < 0) {
        drk_gg_error(st, @1, "negative dimension %lld", (long long)$1);
        YYABORT;
      }
      $$.size = $1;
      $$.sym = NULL;
    }
  | T_IDENT { $$.size = -1; $$.sym = $1.s; }
  | T_STRING { $$.size = -1; $$.sym = $1.s; }
  ;

args_opt: %empty { $$ = NEW(drk_gg_vals_t); } | args ;
args:
    arg { $$ = NEW(drk_gg_vals_t); PUSH($$, $1); }
  | args ',' arg { $$ = $1; PUSH($$, $3); }
  ;
arg:
    T_VALNAME { $$ = lookup(st, $1.s, @1); if (!$$) YYABORT; }
  | T_UNDERSCORE { $$ = NULL; }
  ;

attrs_opt:
    %empty { $$ = NEW(drk_gg_attrs_t); }
  | '{' '}' { $$ = NEW(drk_gg_attrs_t); }
  | '{' attrs '}' { $$ = $2; }
  ;
attrs:
    attr { $$ = NEW(drk_gg_attrs_t); PUSH($$, *$1); }
  | attrs ',' attr {
      $$ = $1;
      for (size_t i = 0; i < $$->n; i++)
        if (strcmp($$->items[i].name, $3->name) == 0) {
          drk_gg_error(st, $3->loc, "duplicate attribute '%s'", $3->name);
          YYABORT;
        }
      PUSH($$, *$3);
    }
  ;
attr:
    aname '=' aval { $$ = $3; $$->name = $1.s; $$->loc = @1; }
  ;
aname: T_IDENT | T_STRING ;
aval:
    T_INT { $$ = NEW(drk_gg_attr_t); $$->kind = DRK_ATTR_INT; $$->i = $1; }
  | T_FLOAT { $$ = NEW(drk_gg_attr_t); $$->kind = DRK_ATTR_FLOAT; $$->f = $1; }
  | T_STRING { $$ = NEW(drk_gg_attr_t); $$->kind = DRK_ATTR_STRING; $$->s = $1.s; }
  | '[' lits ']' {
      $$ = NEW(drk_gg_attr_t);
      $$->lits = $2;
      bool any_s = false, any_n = false, any_f = false;
      for (size_t i = 0; i < $2->n; i++) {
        any_s |= $2->items[i].kind == 's';
        any_n |= $2->items[i].kind != 's';
        any_f |= $2->items[i].kind == 'f';
      }
      if (any_s && any_n) {
        drk_gg_error(st, @1, "list mixes strings and numbers");
        YYABORT;
      }
      $$->kind = any_s ? DRK_ATTR_STRINGS : any_f ? DRK_ATTR_FLOATS : DRK_ATTR_INTS;
    }
  | '[' ']' {
      drk_gg_error(st, @1, "empty list needs its kind: ints[], floats[] or strings[]");
      YYABORT;
    }
  | T_IDENT '[' ']' {
      $$ = NEW(drk_gg_attr_t);
      $$->lits = NEW(drk_gg_lits_t);
      if (strcmp($1.s, "ints") == 0) $$->kind = DRK_ATTR_INTS;
      else if (strcmp($1.s, "floats") == 0) $$->kind = DRK_ATTR_FLOATS;
      else if (strcmp($1.s, "strings") == 0) $$->kind = DRK_ATTR_STRINGS;
      else {
        drk_gg_error(st, @1, "unknown list kind '%s' (expected ints, floats or strings)", $1.s);
        YYABORT;
      }
    }
  | T_TENSOR '<' type '>' cdata {
      $$ = NEW(drk_gg_attr_t);
      $$->kind = DRK_ATTR_TENSOR;
      $$->ttype = $3;
      if (!make_data(st, $3, $5, &$$->tdata, &$$->tbytes)) YYABORT;
    }
  ;

lits:
    lit { $$ = NEW(drk_gg_lits_t); PUSH($$, $1); }
  | lits ',' lit { $$ = $1; PUSH($$, $3); }
  ;
lit:
    T_INT { memset(&$$, 0, sizeof $$); $$.kind = 'i'; $$.i = $1; $$.f = (double)$1; $$.loc = @1; }
  | T_FLOAT { memset(&$$, 0, sizeof $$); $$.kind = 'f'; $$.f = $1; $$.loc = @1; }
  | T_STRING { memset(&$$, 0, sizeof $$); $$.kind = 's'; $$.s = $1.s; $$.loc = @1; }
  ;

cdata:
    T_HEX { $$ = NEW(drk_gg_cdata_t); $$->kind = 'h'; $$->hex = $1; $$->loc = @1; }
  | '[' lits ']' { $$ = NEW(drk_gg_cdata_t); $$->kind = 'l'; $$->lits = $2; $$->loc = @1; }
  | '[' ']' { $$ = NEW(drk_gg_cdata_t); $$->kind = 'l'; $$->lits = NEW(drk_gg_lits_t); $$->loc = @1; }
  | T_ELIDED { $$ = NEW(drk_gg_cdata_t); $$->kind = 'e'; $$->loc = @1; }
  | T_IDENT T_STRING {
      if (strcmp($1.s, "weights") != 0) {
        drk_gg_error(st, @1, "unexpected '%s' in constant data (expected hex\"...\", [...] or weights \"NAME\")", $1.s);
        YYABORT;
      }
      $$ = NEW(drk_gg_cdata_t); $$->kind = 'w'; $$->hex = $2; $$->loc = @2;
    }
  ;

loc_opt:
    %empty { $$ = drk_loc_none; }
  | T_LOC '(' T_ONNX lname_opt lidx_opt ')' {
      $$ = drk_loc_none;
      $$.node_name = $4.s ? drk_graph_str(st->g, $4.s) : NULL;
      $$.node_index = (int)$5;
    }
  ;
lname_opt: %empty { $$.s = NULL; $$.n = 0; } | T_STRING ;
lidx_opt: %empty { $$ = -1; } | T_NODEINDEX ;

%%

void drk_gg_error(drk_gg_state_t *st, drk_gg_loc_t at, const char *fmt, ...) {
  if (st->failed) return;
  st->failed = true;
  va_list ap;
  va_start(ap, fmt);
  drk_diag_verror(st->d, text_loc(st, at), "error", fmt, ap);
  va_end(ap);
}

static void drk_ggerror(drk_gg_loc_t *at, void *scanner, drk_gg_state_t *st, const char *msg) {
  (void)scanner;
  drk_gg_error(st, *at, "%s", msg);
}

static drk_loc_t text_loc(drk_gg_state_t *st, drk_gg_loc_t at) {
  drk_loc_t l = drk_loc_none;
  l.file = st->file;
  l.line = at.first_line;
  l.col = at.first_column;
  return l;
}

static size_t sym_hash(const char *name) { return (size_t)drk_hash_fnv1a(name, strlen(name), 0); }

static drk_value_t *sym_find(drk_gg_state_t *st, const char *name) {
  if (!st->cap_syms) return NULL;
  for (size_t i = sym_hash(name) & (st->cap_syms - 1);; i = (i + 1) & (st->cap_syms - 1)) {
    if (!st->syms[i].name) return NULL;
    if (strcmp(st->syms[i].name, name) == 0) return st->syms[i].v;
  }
}

static void sym_add(drk_gg_state_t *st, const char *name, drk_value_t *v) {
  if (2 * (st->n_syms + 1) > st->cap_syms) {
    size_t ncap = st->cap_syms ? st->cap_syms * 2 : 64;
    drk_gg_sym_t *old = st->syms;
    size_t ocap = st->cap_syms;
    st->syms = drk_arena_alloc(st->tmp, ncap * sizeof *st->syms);
    st->cap_syms = ncap;
    st->n_syms = 0;
    for (size_t i = 0; i < ocap; i++)
      if (old[i].name) sym_add(st, old[i].name, old[i].v);
  }
  size_t i = sym_hash(name) & (st->cap_syms - 1);
  while (st->syms[i].name) i = (i + 1) & (st->cap_syms - 1);
  st->syms[i].name = name;
  st->syms[i].v = v;
  st->n_syms++;
}

static drk_value_t *lookup(drk_gg_state_t *st, const char *name, drk_gg_loc_t at) {
  drk_value_t *v = sym_find(st, name);
  if (!v) drk_gg_error(st, at, "use of undefined value '%%%s'", name);
  return v;
}

/* Element counts must stay far from overflow: sizes in bytes are numel * bits / 8. */
#define GG_MAX_NUMEL ((int64_t)1 << 56)

static bool check_shape(drk_gg_state_t *st, drk_gg_type_t *t, drk_gg_loc_t at) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i].sym) continue;
    int64_t s = t->dims[i].size;
    if (s && n > GG_MAX_NUMEL / s) {
      drk_gg_error(st, at, "shape has too many elements");
      return false;
    }
    n *= s;
  }
  return true;
}

static drk_shape_t graph_shape(drk_gg_state_t *st, const drk_gg_type_t *t) {
  return drk_graph_shape(st->g, t->rank, t->dims);
}

static bool int_fits(drk_dtype_t dt, int64_t v) {
  switch (dt) {
    case DRK_DT_I32: return v >= INT32_MIN && v <= INT32_MAX;
    case DRK_DT_I16: return v >= INT16_MIN && v <= INT16_MAX;
    case DRK_DT_I8: return v >= INT8_MIN && v <= INT8_MAX;
    case DRK_DT_U8: return v >= 0 && v <= UINT8_MAX;
    case DRK_DT_I4: return v >= -8 && v <= 7;
    case DRK_DT_U4: return v >= 0 && v <= 15;
    case DRK_DT_BOOL: return v == 0 || v == 1;
    default: return true;
  }
}

static bool path_escapes(const char *p) {
  if (p[0] == '/') return true;
  for (const char *s = p; *s;) {
    const char *e = strchr(s, '/');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    if (n == 2 && s[0] == '.' && s[1] == '.') return true;
    s += n;
    if (*s == '/') s++;
  }
  return false;
}

/* `weights "FILE"`: FILE is relative to the .drkg file's directory and may not leave it. It is
 * mapped once and kept as a graph blob; constants point into it. */
static bool open_weights(drk_gg_state_t *st, drk_gg_str_t path, drk_gg_loc_t at) {
  if (!path.n || path_escapes(path.s)) {
    drk_gg_error(st, at, "weights file '%s' must be a relative path inside the graph file's directory", path.s);
    return false;
  }
  const char *slash = strrchr(st->file, '/');
  const char *full = slash ? drk_arena_printf(st->tmp, "%.*s/%s", (int)(slash - st->file), st->file, path.s)
                           : drk_arena_strdup(st->tmp, path.s);
  drk_safetensors_t *w = NEW(drk_safetensors_t);
  char err[768];
  if (!drk_safetensors_open(full, st->tmp, w, err, sizeof err)) {
    drk_gg_error(st, at, "%s", err);
    return false;
  }
  if (w->base) drk_graph_add_blob(st->g, w->base, w->size, drk_safetensors_release);
  st->weights = w;
  st->weights_path = full;
  return true;
}

static bool weights_data(drk_gg_state_t *st, const drk_gg_type_t *t, const drk_gg_cdata_t *c, int64_t numel,
                         size_t want, const void **out_p, size_t *out_n) {
  const char *name = c->hex.s;
  if (!st->weights) {
    drk_gg_error(st, c->loc, "constant data 'weights \"%s\"' needs a 'weights \"FILE\"' line before 'graph'", name);
    return false;
  }
  const drk_st_entry_t *e = drk_safetensors_find(st->weights, name);
  if (!e) {
    drk_gg_error(st, c->loc, "no tensor '%s' in weights file '%s'", name, st->weights_path);
    return false;
  }
  bool same = e->dtype == t->dt && e->rank == t->rank && numel >= 0;
  for (int i = 0; same && i < t->rank; i++) same = !t->dims[i].sym && t->dims[i].size == e->dims[i];
  if (!same) {
    char buf[256];
    size_t k = (size_t)snprintf(buf, sizeof buf, "%s[", drk_dtype_name(e->dtype));
    for (int i = 0; i < e->rank && k < sizeof buf; i++)
      k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%lld", i ? ", " : "", (long long)e->dims[i]);
    if (k < sizeof buf) snprintf(buf + k, sizeof buf - k, "]");
    drk_gg_error(st, c->loc, "tensor '%s' in weights file '%s' is %s, not the declared type", name,
                 st->weights_path, buf);
    return false;
  }
  (void)want; /* the reader checked end - begin == dtype bytes x shape */
  size_t nb = (size_t)(e->end - e->begin);
  const uint8_t *p = (const uint8_t *)st->weights->base + e->begin;
  size_t align = (size_t)drk_dtype_bits(t->dt) / 8;
  if (align > 8) align = 8;
  /* Consumers read elements through typed pointers; copy rather than hand out a misaligned one. */
  if (nb && align > 1 && ((uintptr_t)p % align) != 0) p = drk_arena_memdup(st->g->arena, p, nb);
  *out_p = nb ? (const void *)p : "";
  *out_n = nb;
  return true;
}

static bool make_data(drk_gg_state_t *st, const drk_gg_type_t *t, const drk_gg_cdata_t *c,
                      const void **out_p, size_t *out_n) {
  drk_shape_t sh = {t->rank, t->dims};
  int64_t numel = drk_shape_numel(&sh);
  size_t want = numel >= 0 ? drk_dtype_nbytes(t->dt, numel) : 0;
  if (c->kind == 'e') {
    drk_gg_error(st, c->loc, "constant data elided; print the graph without a size limit to re-parse it");
    return false;
  }
  if (c->kind == 'w') return weights_data(st, t, c, numel, want, out_p, out_n);
  if (c->kind == 'h') {
    if (numel >= 0 && c->hex.n != want) {
      drk_gg_error(st, c->loc, "constant data has %zu bytes but %s with %lld elements needs %zu",
                   c->hex.n, drk_dtype_name(t->dt), (long long)numel, want);
      return false;
    }
    *out_p = c->hex.s;
    *out_n = c->hex.n;
    return true;
  }
  if (numel < 0) {
    drk_gg_error(st, c->loc, "a literal list needs a static shape");
    return false;
  }
  const drk_gg_lits_t *ls = c->lits;
  if ((int64_t)ls->n != numel) {
    drk_gg_error(st, c->loc, "literal list has %zu elements but the shape has %lld", ls->n, (long long)numel);
    return false;
  }
  drk_tensor_t tv;
  memset(&tv, 0, sizeof tv);
  tv.dtype = t->dt;
  tv.data = drk_arena_alloc(st->tmp, want + 1);
  tv.nbytes = want;
  for (size_t i = 0; i < ls->n; i++) {
    const drk_gg_lit_t *l = &ls->items[i];
    if (l->kind == 's') {
      drk_gg_error(st, l->loc, "string in constant data");
      return false;
    }
    if (drk_dtype_is_float(t->dt)) {
      drk_tensor_set_f64(&tv, (int64_t)i, l->f);
      continue;
    }
    if (l->kind == 'f') {
      drk_gg_error(st, l->loc, "float literal in %s constant data", drk_dtype_name(t->dt));
      return false;
    }
    if (!int_fits(t->dt, l->i)) {
      drk_gg_error(st, l->loc, "literal %lld out of range for %s", (long long)l->i, drk_dtype_name(t->dt));
      return false;
    }
    drk_tensor_set_i64(&tv, (int64_t)i, l->i);
  }
  *out_p = tv.data;
  *out_n = want;
  return true;
}

static bool make_stmt(drk_gg_state_t *st, drk_gg_results_t *rs, drk_gg_str_t opname, drk_gg_loc_t op_loc,
                      drk_gg_vals_t *args, drk_gg_attrs_t *attrs, drk_loc_t nloc) {
  drk_op_t op;
  if (!drk_op_from_name(opname.s, opname.n, &op)) {
    drk_gg_error(st, op_loc, "unknown op '%s'", opname.s);
    return false;
  }
  for (size_t i = 0; i < rs->n; i++)
    for (size_t j = 0; j < i; j++)
      if (strcmp(rs->items[i].name, rs->items[j].name) == 0) {
        drk_gg_error(st, rs->items[i].loc, "redefinition of value '%%%s'", rs->items[i].name);
        return false;
      }
  const char **names = drk_arena_alloc(st->tmp, sizeof(char *) * rs->n);
  for (size_t i = 0; i < rs->n; i++) names[i] = rs->items[i].name;
  drk_graph_t *g = st->g;
  drk_node_t *n = drk_graph_add_node(g, op, (int)args->n, args->items, (int)rs->n, names, nloc);
  for (size_t i = 0; i < rs->n; i++) {
    drk_value_t *v = n->outputs[i];
    v->dtype = rs->items[i].type->dt;
    v->shape = graph_shape(st, rs->items[i].type);
    v->loc = text_loc(st, rs->items[i].loc);
    sym_add(st, v->name, v);
  }
  for (size_t k = 0; k < attrs->n; k++) {
    const drk_gg_attr_t *s = &attrs->items[k];
    if (drk_node_attr(n, s->name)) {
      drk_gg_error(st, s->loc, "duplicate attribute '%s'", s->name);
      return false;
    }
    /* text writes a float attribute of 1.0 as 1: the table says which kind the op takes */
    const drk_attr_spec_t *spec = drk_attr_spec_find(op, s->name);
    drk_attr_kind_t kind = s->kind;
    if (spec && spec->kind == DRK_ATTR_FLOAT && kind == DRK_ATTR_INT) kind = DRK_ATTR_FLOAT;
    if (spec && spec->kind == DRK_ATTR_FLOATS && kind == DRK_ATTR_INTS) kind = DRK_ATTR_FLOATS;
    drk_attr_t *a = drk_node_add_attr(g, n, s->name, kind);
    if (kind != s->kind && kind == DRK_ATTR_FLOAT) {
      a->f = (double)s->i;
      continue;
    }
    if (kind != s->kind) {
      a->n = s->lits->n;
      a->floats = drk_arena_alloc(g->arena, sizeof(double) * (a->n + 1));
      for (size_t i = 0; i < a->n; i++) a->floats[i] = (double)s->lits->items[i].i;
      continue;
    }
    switch (s->kind) {
      case DRK_ATTR_INT: a->i = s->i; break;
      case DRK_ATTR_FLOAT: a->f = s->f; break;
      case DRK_ATTR_STRING: a->s = drk_graph_str(g, s->s); break;
      case DRK_ATTR_INTS:
        a->n = s->lits->n;
        a->ints = drk_arena_alloc(g->arena, sizeof(int64_t) * (a->n + 1));
        for (size_t i = 0; i < a->n; i++) a->ints[i] = s->lits->items[i].i;
        break;
      case DRK_ATTR_FLOATS:
        a->n = s->lits->n;
        a->floats = drk_arena_alloc(g->arena, sizeof(double) * (a->n + 1));
        for (size_t i = 0; i < a->n; i++) a->floats[i] = s->lits->items[i].f;
        break;
      case DRK_ATTR_STRINGS:
        a->n = s->lits->n;
        a->strings = drk_arena_alloc(g->arena, sizeof(char *) * (a->n + 1));
        for (size_t i = 0; i < a->n; i++) a->strings[i] = drk_graph_str(g, s->lits->items[i].s);
        break;
      case DRK_ATTR_TENSOR:
        a->tensor = drk_graph_new_const_value(g, NULL, s->ttype->dt, graph_shape(st, s->ttype),
                                              drk_arena_memdup(g->arena, s->tdata, s->tbytes), s->tbytes);
        a->tensor->loc = text_loc(st, s->loc);
        break;
    }
  }
  return true;
}

drk_graph_t *drk_graph_parse(const char *text, size_t len, const char *filename, drk_diag_t *d) {
  drk_gg_state_t st;
  memset(&st, 0, sizeof st);
  st.g = drk_graph_create("main");
  st.tmp = drk_arena_create();
  st.d = d;
  st.file = drk_graph_str(st.g, filename ? filename : "<input>");
  st.g->source = st.file;
  st.line = 1;
  st.col = 1;
  if (len > (size_t)INT32_MAX) {
    drk_loc_t l = drk_loc_none;
    l.file = st.file;
    drk_diag_error(d, l, "input too large (%zu bytes)", len);
    st.failed = true;
  } else {
    yyscan_t scanner;
    if (drk_gglex_init_extra(&st, &scanner) != 0) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
    YY_BUFFER_STATE buf = drk_gg_scan_bytes(text ? text : "", (int)len, scanner);
    int rc = drk_ggparse(scanner, &st);
    if (rc != 0 && !st.failed) {
      drk_loc_t l = drk_loc_none;
      l.file = st.file;
      drk_diag_error(d, l, "parse failed (%s)", rc == 2 ? "out of memory" : "syntax");
      st.failed = true;
    }
    drk_gg_delete_buffer(buf, scanner);
    drk_gglex_destroy(scanner);
  }
  drk_arena_destroy(st.tmp);
  if (st.failed) {
    drk_graph_destroy(st.g);
    return NULL;
  }
  return st.g;
}
