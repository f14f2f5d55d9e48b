/* Tile IR parser (.drkt): pure, reentrant, prefix drk_tt; tile_lex.l is its lexer.
 *
 * Requires: nothing but the text. Guarantees: on success a module whose names resolve
 * (every operand was defined earlier in the text, in the same kernel), whose layouts are
 * well formed and whose ops have as many result types as result names; the first error
 * stops the parse and is reported as `file:line:col: error: msg`. Everything is allocated
 * from the module's arena, so dropping the module on error frees all of it. Semantic rules
 * (dominance, operand types, ...) are the verifier's.
 *
 * Shape of the text (docs/tile-ir.md):
 *   #name = kind{key = value, ...}
 *   kernel @name(%p: type {attrs}, ...) grid(a, b, c) block(N) cluster(x, y, z) smem(N) {
 *     %r0, %r1 = opname %a, %b {key = value} : type0, type1 (%arg: type) {
 *       ...
 *     } {
 *       ...
 *     }
 *   } */
%define api.pure full
%define api.prefix {drk_tt}
%define parse.error detailed
%locations
%lex-param {void *scanner}
%parse-param {void *scanner} {struct drk_tt_pstate *ps}

%code requires {
#include "tile.h"

#define DRK_TT_MAX_DEPTH 64

/* A string -> pointer table (open addressing) for value, layout and kernel names. */
typedef struct drk_tt_map {
  const char **keys;
  void **vals;
  size_t cap, n;
} drk_tt_map_t;

struct drk_tt_pstate {
  drk_tile_module_t *m;
  drk_diag_t *d;
  const char *file;
  int line, col;
  int eof_nl;
  int failed; /* an error was reported */
  unsigned kseen; /* kernel header clauses seen */
  drk_tile_kernel_t *k;
  drk_tt_map_t values, layouts, kernels;
  drk_tile_region_t *rstack[DRK_TT_MAX_DEPTH];
  int depth;
};

typedef struct drk_tt_list {
  void **v;
  size_t n, cap;
} drk_tt_list_t;

typedef struct drk_tt_ints {
  int64_t *v;
  size_t n, cap;
  drk_loc_t loc;
} drk_tt_ints_t;

typedef struct drk_tt_named { /* a name with a location (and a type, for region args) */
  const char *name;
  drk_loc_t loc;
  drk_tile_type_t type;
} drk_tt_named_t;

typedef struct drk_tt_karg { /* one argument of grid(...), block(...), ... */
  drk_tile_value_t *param;
  int64_t c;
  int is_int;
  drk_loc_t loc;
} drk_tt_karg_t;

int drk_tt_lex_error(struct drk_tt_pstate *ps, void *yylloc, const char *msg);
}

%code {
#include <string.h>

int drk_ttlex(DRK_TTSTYPE *lval, DRK_TTLTYPE *lloc, void *scanner);
static void drk_tterror(DRK_TTLTYPE *l, void *scanner, struct drk_tt_pstate *ps, const char *msg);

static drk_loc_t mkloc(struct drk_tt_pstate *ps, const DRK_TTLTYPE *l) {
  drk_loc_t loc = drk_loc_none;
  loc.file = ps->file;
  loc.line = l->first_line;
  loc.col = l->first_column;
  return loc;
}

DRK_PRINTF(3, 4) static void perr(struct drk_tt_pstate *ps, drk_loc_t loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  drk_diag_verror(ps->d, loc, "error", fmt, ap);
  va_end(ap);
  ps->failed = 1;
}

#define FAIL(L, ...) do { perr(ps, mkloc(ps, &(L)), __VA_ARGS__); YYABORT; } while (0)
#define FAILAT(LOC, ...) do { perr(ps, (LOC), __VA_ARGS__); YYABORT; } while (0)

static size_t map_hash(const char *s) { return (size_t)drk_hash_fnv1a(s, strlen(s), 0); }

static void *map_get(drk_tt_map_t *mp, const char *key) {
  if (!mp->cap) return NULL;
  for (size_t i = map_hash(key) & (mp->cap - 1);; i = (i + 1) & (mp->cap - 1)) {
    if (!mp->keys[i]) return NULL;
    if (strcmp(mp->keys[i], key) == 0) return mp->vals[i];
  }
}

static void map_put(drk_arena_t *a, drk_tt_map_t *mp, const char *key, void *val) {
  if ((mp->n + 1) * 2 > mp->cap) {
    drk_tt_map_t nm = {0};
    nm.cap = mp->cap ? mp->cap * 2 : 64;
    nm.keys = drk_arena_alloc(a, sizeof *nm.keys * nm.cap);
    nm.vals = drk_arena_alloc(a, sizeof *nm.vals * nm.cap);
    for (size_t i = 0; i < mp->cap; i++)
      if (mp->keys[i]) map_put(a, &nm, mp->keys[i], mp->vals[i]);
    *mp = nm;
  }
  size_t i = map_hash(key) & (mp->cap - 1);
  while (mp->keys[i] && strcmp(mp->keys[i], key) != 0) i = (i + 1) & (mp->cap - 1);
  if (!mp->keys[i]) mp->n++;
  mp->keys[i] = key;
  mp->vals[i] = val;
}

static drk_tt_list_t *list_new(struct drk_tt_pstate *ps) { return drk_arena_alloc(ps->m->arena, sizeof(drk_tt_list_t)); }
static drk_tt_list_t *list_push(struct drk_tt_pstate *ps, drk_tt_list_t *l, void *v) {
  DRK_VEC_PUSH(ps->m->arena, l->v, l->n, l->cap, v);
  return l;
}

/* Defines a name in the current kernel; false (and reported) if already defined. */
static bool define_value(struct drk_tt_pstate *ps, drk_tile_value_t *v) {
  if (map_get(&ps->values, v->name)) {
    perr(ps, v->loc, "redefinition of value '%%%s'", v->name);
    return false;
  }
  map_put(ps->m->arena, &ps->values, v->name, v);
  return true;
}

static bool push_region(struct drk_tt_pstate *ps, drk_tile_region_t *r, drk_loc_t loc) {
  if (ps->depth >= DRK_TT_MAX_DEPTH) {
    perr(ps, loc, "regions nested deeper than %d", DRK_TT_MAX_DEPTH);
    return false;
  }
  ps->rstack[ps->depth++] = r;
  return true;
}

static bool int_attr(struct drk_tt_pstate *ps, const drk_tile_attr_t *a, int *out) {
  if (a->kind != DRK_TA_INT || a->i < -(1 << 20) || a->i > (1 << 20)) {
    perr(ps, a->loc, "layout attribute '%s' must be an integer in [-2^20, 2^20]", a->name);
    return false;
  }
  *out = (int)a->i;
  return true;
}

static bool ints_attr(struct drk_tt_pstate *ps, const drk_tile_attr_t *a, int *out, int *rank, int want) {
  if (a->kind != DRK_TA_INTS || a->n < 1 || a->n > DRK_TILE_MAX_RANK || (want && (int)a->n != want)) {
    if (want) perr(ps, a->loc, "layout attribute '%s' must be a list of %d integers", a->name, want);
    else perr(ps, a->loc, "layout attribute '%s' must be a list of 1 to %d integers", a->name, DRK_TILE_MAX_RANK);
    return false;
  }
  if (*rank && (int)a->n != *rank) {
    perr(ps, a->loc, "layout attribute '%s' has %zu entries, expected %d", a->name, a->n, *rank);
    return false;
  }
  *rank = (int)a->n;
  for (size_t i = 0; i < a->n; i++) {
    if (a->ints[i] < -(1 << 20) || a->ints[i] > (1 << 20)) {
      perr(ps, a->loc, "layout attribute '%s': entry out of range", a->name);
      return false;
    }
    out[i] = (int)a->ints[i];
  }
  return true;
}

/* Builds a layout from `kind{attrs}`; keys per kind are fixed and all required. */
static const drk_tile_layout_t *make_layout(struct drk_tt_pstate *ps, const char *name, drk_loc_t nloc,
                                            const char *kind, drk_loc_t kloc, drk_tt_list_t *attrs) {
  static const char *const keys[DRK_TL_COUNT] = {"spt tpw wpc order", "parent dim", "wpc instr", "wpc instr",
                                                 "wpc instr", "parent op_idx k_width", "swizzle order"};
  drk_tile_layout_t l;
  memset(&l, 0, sizeof l);
  int k = -1;
  for (int i = 0; i < DRK_TL_COUNT; i++)
    if (strcmp(kind, drk_tile_layout_kind_name((drk_tile_layout_kind_t)i)) == 0) k = i;
  if (k < 0) {
    perr(ps, kloc, "unknown layout kind '%s' (blocked, slice, mma_sync, wgmma, mfma, dot_op, shared)", kind);
    return NULL;
  }
  l.kind = (drk_tile_layout_kind_t)k;
  l.name = name;
  l.loc = nloc;
  int rank = 0, seen = 0, n_keys = 0;
  char buf[64];
  snprintf(buf, sizeof buf, "%s", keys[k]);
  const char *key_list[4];
  for (char *t = strtok(buf, " "); t; t = strtok(NULL, " ")) key_list[n_keys++] = t;
  for (size_t i = 0; i < attrs->n; i++) {
    const drk_tile_attr_t *a = attrs->v[i];
    int ki = -1;
    for (int j = 0; j < n_keys; j++)
      if (strcmp(a->name, key_list[j]) == 0) ki = j;
    if (ki < 0) {
      perr(ps, a->loc, "unknown attribute '%s' for a %s layout (expected: %s)", a->name, kind, keys[k]);
      return NULL;
    }
    if (seen & (1 << ki)) {
      perr(ps, a->loc, "duplicate attribute '%s'", a->name);
      return NULL;
    }
    seen |= 1 << ki;
    const char *n = a->name;
    bool ok = true;
    if (strcmp(n, "spt") == 0) ok = ints_attr(ps, a, l.spt, &rank, 0);
    else if (strcmp(n, "tpw") == 0) ok = ints_attr(ps, a, l.tpw, &rank, 0);
    else if (strcmp(n, "wpc") == 0) ok = ints_attr(ps, a, l.wpc, &rank, l.kind == DRK_TL_BLOCKED ? 0 : 2);
    else if (strcmp(n, "order") == 0) ok = ints_attr(ps, a, l.order, &rank, 0);
    else if (strcmp(n, "instr") == 0) { int r2 = 0; ok = ints_attr(ps, a, l.instr, &r2, 2); }
    else if (strcmp(n, "dim") == 0) ok = int_attr(ps, a, &l.dim);
    else if (strcmp(n, "op_idx") == 0) ok = int_attr(ps, a, &l.op_idx);
    else if (strcmp(n, "k_width") == 0) ok = int_attr(ps, a, &l.k_width);
    else if (strcmp(n, "swizzle") == 0) ok = int_attr(ps, a, &l.swizzle);
    else if (strcmp(n, "parent") == 0) {
      if (a->kind != DRK_TA_LAYOUT) {
        perr(ps, a->loc, "layout attribute 'parent' must be a layout (#name)");
        return NULL;
      }
      l.parent = a->layout;
    }
    if (!ok) return NULL;
  }
  if (seen != (1 << n_keys) - 1) {
    perr(ps, kloc, "%s layout needs all of: %s", kind, keys[k]);
    return NULL;
  }
  if (l.kind == DRK_TL_BLOCKED || l.kind == DRK_TL_SHARED) l.rank = rank;
  else if (l.kind == DRK_TL_SLICE) l.rank = l.parent->rank - 1;
  else l.rank = 2;
  char msg[200];
  if (!drk_tile_layout_check(&l, msg, sizeof msg)) {
    perr(ps, kloc, "%s", msg);
    return NULL;
  }
  if (map_get(&ps->layouts, name)) {
    perr(ps, nloc, "redefinition of layout '#%s'", name);
    return NULL;
  }
  const drk_tile_layout_t *r = drk_tile_layout_add(ps->m, &l);
  map_put(ps->m->arena, &ps->layouts, r->name, (void *)r);
  return r;
}

static bool dtype_of(struct drk_tt_pstate *ps, const char *s, drk_loc_t loc, drk_dtype_t *out) {
  if (!drk_dtype_from_name(s, strlen(s), out)) {
    perr(ps, loc, "unknown element type '%s'", s);
    return false;
  }
  return true;
}

static drk_tile_type_t *new_type(struct drk_tt_pstate *ps) {
  return drk_arena_alloc(ps->m->arena, sizeof(drk_tile_type_t));
}

/* Applies one `name(args)` clause of a kernel header. */
static bool kernel_clause(struct drk_tt_pstate *ps, const char *name, drk_loc_t loc, drk_tt_list_t *args,
                          unsigned *seen) {
  static const char *const names[] = {"grid", "block", "smem", "cluster"};
  int w = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(name, names[i]) == 0) w = i;
  if (w < 0) {
    perr(ps, loc, "unknown kernel clause '%s' (grid, block, cluster, smem)", name);
    return false;
  }
  if (*seen & (1u << w)) {
    perr(ps, loc, "duplicate kernel clause '%s'", name);
    return false;
  }
  *seen |= 1u << w;
  size_t max = (w == 0 || w == 3) ? 3 : 1;
  if (args->n > max) {
    perr(ps, loc, "'%s' takes %s", name, max == 3 ? "1 to 3 arguments" : "one argument");
    return false;
  }
  drk_tile_kernel_t *k = ps->k;
  for (size_t i = 0; i < args->n; i++) {
    drk_tt_karg_t *a = args->v[i];
    if (w != 0 && !a->is_int) {
      perr(ps, a->loc, "'%s' takes integer constants", name);
      return false;
    }
    if (w == 0) {
      k->grid[i].param = a->param;
      k->grid[i].c = a->c;
    } else if (w == 1) {
      k->block = a->c;
    } else if (w == 2) {
      k->smem = a->c;
    } else {
      k->cluster[i] = a->c;
    }
  }
  return true;
}
}

%union {
  int64_t i;
  double f;
  const char *s;
  drk_tile_type_t *type;
  drk_tt_list_t *list;
  drk_tt_ints_t *ints;
  drk_tile_attr_t *attr;
  drk_tile_region_t *region;
  drk_tt_karg_t *karg;
}

%token <s> VALUE "value name" GLOBAL "kernel name" LREF "layout name" IDENT "identifier"
%token <i> INT "integer" DIM "dimension"
%token <f> FLOAT "float"
%token NL "newline" ROPEN "region '{'" LEXERR "invalid token"

%type <type> type
%type <list> params_opt params attrs_opt attr_list results_opt results operands_opt operands types_opt types
%type <list> regions_opt regions rargs kargs
%type <ints> dims ints
%type <attr> attr
%type <region> region region_open
%type <karg> karg

%%

module:
    %empty
  | module decl NL
  | module NL
  ;

decl:
    layout_def
  | kernel
  ;

layout_def:
    LREF '=' IDENT '{' attr_list '}' {
      if (!make_layout(ps, $1, mkloc(ps, &@1), $3, mkloc(ps, &@3), $5)) YYABORT;
    }
  ;

kernel:
    kernel_head '(' params_opt ')' kclauses body_open stmts '}' {
      ps->depth--;
      ps->k = NULL;
    }
  ;

kernel_head:
    IDENT GLOBAL {
      if (strcmp($1, "kernel") != 0) FAIL(@1, "expected 'kernel' or a layout definition, found '%s'", $1);
      if (map_get(&ps->kernels, $2)) FAIL(@2, "redefinition of kernel '@%s'", $2);
      ps->k = drk_tile_kernel_create(ps->m, $2, mkloc(ps, &@1));
      map_put(ps->m->arena, &ps->kernels, ps->k->name, ps->k);
      memset(&ps->values, 0, sizeof ps->values);
      ps->kseen = 0;
    }
  ;

params_opt:
    %empty { $$ = NULL; }
  | params { $$ = $1; }
  ;

params:
    param { $$ = NULL; }
  | params ',' param { $$ = NULL; }
  ;

param:
    VALUE ':' type attrs_opt {
      drk_tile_value_t *v = drk_tile_kernel_add_param(ps->m, ps->k, $1, *$3, mkloc(ps, &@1));
      if (!define_value(ps, v)) YYABORT;
      if ($4) {
        drk_tile_kernel_t *k = ps->k;
        int i = k->n_params - 1;
        k->param_n_attrs[i] = (int)$4->n;
        k->param_attrs[i] = drk_arena_alloc(ps->m->arena, sizeof(drk_tile_attr_t) * $4->n);
        for (size_t j = 0; j < $4->n; j++) k->param_attrs[i][j] = *(drk_tile_attr_t *)$4->v[j];
      }
    }
  ;

kclauses:
    %empty
  | kclauses kclause
  ;

kclause:
    IDENT '(' kargs ')' {
      if (!kernel_clause(ps, $1, mkloc(ps, &@1), $3, &ps->kseen)) YYABORT;
    }
  ;

kargs:
    karg { $$ = list_push(ps, list_new(ps), $1); }
  | kargs ',' karg { $$ = list_push(ps, $1, $3); }
  ;

karg:
    INT {
      $$ = drk_arena_alloc(ps->m->arena, sizeof *$$);
      $$->c = $1;
      $$->is_int = 1;
      $$->loc = mkloc(ps, &@1);
    }
  | VALUE {
      drk_tile_value_t *v = map_get(&ps->values, $1);
      if (!v || v->param_of != ps->k) FAIL(@1, "'%%%s' is not a parameter of this kernel", $1);
      $$ = drk_arena_alloc(ps->m->arena, sizeof *$$);
      $$->param = v;
      $$->c = 1;
      $$->loc = mkloc(ps, &@1);
    }
  | IDENT '(' VALUE ',' INT ')' {
      if (strcmp($1, "cdiv") != 0) FAIL(@1, "expected 'cdiv', found '%s'", $1);
      drk_tile_value_t *v = map_get(&ps->values, $3);
      if (!v || v->param_of != ps->k) FAIL(@3, "'%%%s' is not a parameter of this kernel", $3);
      if ($5 < 1) FAIL(@5, "cdiv divisor must be positive");
      $$ = drk_arena_alloc(ps->m->arena, sizeof *$$);
      $$->param = v;
      $$->c = $5;
      $$->loc = mkloc(ps, &@1);
    }
  ;

body_open:
    ROPEN { if (!push_region(ps, ps->k->body, mkloc(ps, &@1))) YYABORT; }
  ;

stmts:
    %empty
  | stmts stmt NL
  | stmts NL
  ;

stmt:
    results_opt IDENT operands_opt attrs_opt types_opt regions_opt {
      drk_tile_opcode_t code;
      drk_loc_t loc = mkloc(ps, &@2);
      if (!drk_tile_op_from_name($2, strlen($2), &code)) FAIL(@2, "unknown op '%s'", $2);
      size_t nres = $1 ? $1->n : 0, ntypes = $5 ? $5->n : 0;
      if (nres != ntypes) {
        if (!ntypes) FAILAT(loc, "'%s' has results but no ': type' list", $2);
        FAILAT(loc, "'%s' has %zu result name(s) but %zu type(s)", $2, nres, ntypes);
      }
      if (nres > 1024 || ($3 && $3->n > 1024) || ($6 && $6->n > 16)) FAILAT(loc, "too many operands, results or regions");
      drk_tile_type_t *types = nres ? drk_arena_alloc(ps->m->arena, sizeof *types * nres) : NULL;
      const char **names = nres ? drk_arena_alloc(ps->m->arena, sizeof *names * nres) : NULL;
      for (size_t i = 0; i < nres; i++) {
        types[i] = *(drk_tile_type_t *)$5->v[i];
        names[i] = ((drk_tt_named_t *)$1->v[i])->name;
      }
      drk_tile_op_t *op = drk_tile_op_create(ps->m, code, $3 ? (int)$3->n : 0, $3 ? (drk_tile_value_t **)$3->v : NULL,
                                             (int)nres, types, names, $6 ? (int)$6->n : 0,
                                             $6 ? (drk_tile_region_t **)$6->v : NULL, loc);
      for (size_t i = 0; i < nres; i++) {
        op->results[i]->loc = ((drk_tt_named_t *)$1->v[i])->loc;
        if (!define_value(ps, op->results[i])) YYABORT;
      }
      if ($4) {
        op->n_attrs = (int)$4->n;
        op->cap_attrs = $4->n;
        op->attrs = drk_arena_alloc(ps->m->arena, sizeof(drk_tile_attr_t) * $4->n);
        for (size_t j = 0; j < $4->n; j++) op->attrs[j] = *(drk_tile_attr_t *)$4->v[j];
      }
      drk_tile_region_append(ps->m, ps->rstack[ps->depth - 1], op);
    }
  ;

results_opt:
    %empty { $$ = NULL; }
  | results '=' { $$ = $1; }
  ;

results:
    VALUE {
      drk_tt_named_t *n = drk_arena_alloc(ps->m->arena, sizeof *n);
      n->name = $1;
      n->loc = mkloc(ps, &@1);
      $$ = list_push(ps, list_new(ps), n);
    }
  | results ',' VALUE {
      drk_tt_named_t *n = drk_arena_alloc(ps->m->arena, sizeof *n);
      n->name = $3;
      n->loc = mkloc(ps, &@3);
      $$ = list_push(ps, $1, n);
    }
  ;

operands_opt:
    %empty { $$ = NULL; }
  | operands { $$ = $1; }
  ;

operands:
    VALUE {
      drk_tile_value_t *v = map_get(&ps->values, $1);
      if (!v) FAIL(@1, "use of undefined value '%%%s'", $1);
      $$ = list_push(ps, list_new(ps), v);
    }
  | operands ',' VALUE {
      drk_tile_value_t *v = map_get(&ps->values, $3);
      if (!v) FAIL(@3, "use of undefined value '%%%s'", $3);
      $$ = list_push(ps, $1, v);
    }
  ;

attrs_opt:
    %empty { $$ = NULL; }
  | '{' attr_list '}' { $$ = $2; }
  ;

attr_list:
    attr { $$ = list_push(ps, list_new(ps), $1); }
  | attr_list ',' attr { $$ = list_push(ps, $1, $3); }
  ;

attr:
    IDENT '=' INT {
      $$ = drk_arena_alloc(ps->m->arena, sizeof *$$);
      $$->name = $1; $$->kind = DRK_TA_INT; $$->i = $3; $$->loc = mkloc(ps, &@1);
    }
  | IDENT '=' FLOAT {
      $$ = drk_arena_alloc(ps->m->arena, sizeof *$$);
      $$->name = $1; $$->kind = DRK_TA_FLOAT; $$->f = $3; $$->loc = mkloc(ps, &@1);
    }
  | IDENT '=' IDENT {
      $$ = drk_arena_alloc(ps->m->arena, sizeof *$$);
      $$->name = $1; $$->kind = DRK_TA_IDENT; $$->s = $3; $$->loc = mkloc(ps, &@1);
    }
  | IDENT '=' LREF {
      const drk_tile_layout_t *l = map_get(&ps->layouts, $3);
      if (!l) FAIL(@3, "undefined layout '#%s'", $3);
      $$ = drk_arena_alloc(ps->m->arena, sizeof *$$);
      $$->name = $1; $$->kind = DRK_TA_LAYOUT; $$->layout = l; $$->loc = mkloc(ps, &@1);
    }
  | IDENT '=' '[' ']' {
      $$ = drk_arena_alloc(ps->m->arena, sizeof *$$);
      $$->name = $1; $$->kind = DRK_TA_INTS; $$->loc = mkloc(ps, &@1);
    }
  | IDENT '=' '[' ints ']' {
      $$ = drk_arena_alloc(ps->m->arena, sizeof *$$);
      $$->name = $1; $$->kind = DRK_TA_INTS; $$->loc = mkloc(ps, &@1);
      $$->n = $4->n; $$->ints = $4->v;
    }
  ;

ints:
    INT {
      $$ = drk_arena_alloc(ps->m->arena, sizeof *$$);
      DRK_VEC_PUSH(ps->m->arena, $$->v, $$->n, $$->cap, $1);
    }
  | ints ',' INT { $$ = $1; DRK_VEC_PUSH(ps->m->arena, $$->v, $$->n, $$->cap, $3); }
  ;

types_opt:
    %empty { $$ = NULL; }
  | ':' types { $$ = $2; }
  ;

types:
    type { $$ = list_push(ps, list_new(ps), $1); }
  | types ',' type { $$ = list_push(ps, $1, $3); }
  ;

regions_opt:
    %empty { $$ = NULL; }
  | regions { $$ = $1; }
  ;

regions:
    region { $$ = list_push(ps, list_new(ps), $1); }
  | regions region { $$ = list_push(ps, $1, $2); }
  ;

region:
    region_open stmts '}' { ps->depth--; $$ = $1; }
  ;

region_open:
    ROPEN {
      $$ = drk_tile_region_create(ps->m, ps->k, 0, NULL, NULL, mkloc(ps, &@1));
      if (!push_region(ps, $$, mkloc(ps, &@1))) YYABORT;
    }
  | '(' rargs ')' ROPEN {
      size_t n = $2->n;
      if (n > 1024) FAIL(@1, "too many region arguments");
      drk_tile_type_t *t = drk_arena_alloc(ps->m->arena, sizeof *t * n);
      const char **names = drk_arena_alloc(ps->m->arena, sizeof *names * n);
      for (size_t i = 0; i < n; i++) {
        drk_tt_named_t *a = $2->v[i];
        t[i] = a->type;
        names[i] = a->name;
      }
      $$ = drk_tile_region_create(ps->m, ps->k, (int)n, t, names, mkloc(ps, &@1));
      for (size_t i = 0; i < n; i++) {
        $$->args[i]->loc = ((drk_tt_named_t *)$2->v[i])->loc;
        if (!define_value(ps, $$->args[i])) YYABORT;
      }
      if (!push_region(ps, $$, mkloc(ps, &@1))) YYABORT;
    }
  ;

rargs:
    VALUE ':' type {
      drk_tt_named_t *a = drk_arena_alloc(ps->m->arena, sizeof *a);
      a->name = $1; a->loc = mkloc(ps, &@1); a->type = *$3;
      $$ = list_push(ps, list_new(ps), a);
    }
  | rargs ',' VALUE ':' type {
      drk_tt_named_t *a = drk_arena_alloc(ps->m->arena, sizeof *a);
      a->name = $3; a->loc = mkloc(ps, &@3); a->type = *$5;
      $$ = list_push(ps, $1, a);
    }
  ;

type:
    IDENT {
      $$ = new_type(ps);
      $$->kind = DRK_TT_SCALAR;
      if (!dtype_of(ps, $1, mkloc(ps, &@1), &$$->dtype)) YYABORT;
    }
  | IDENT '<' dims IDENT '>' {
      $$ = new_type(ps);
      if (strcmp($1, "ptr") != 0 || $3->n) FAIL(@1, "expected 'ptr<dtype>' or a shaped type with a layout");
      $$->kind = DRK_TT_SCALAR;
      $$->is_ptr = true;
      if (!dtype_of(ps, $4, mkloc(ps, &@4), &$$->dtype)) YYABORT;
    }
  | IDENT '<' dims IDENT ',' LREF '>' {
      $$ = new_type(ps);
      if (!dtype_of(ps, $4, mkloc(ps, &@4), &$$->dtype)) YYABORT;
      if (strcmp($1, "tile") == 0) $$->kind = DRK_TT_TILE;
      else if (strcmp($1, "smem") == 0) $$->kind = DRK_TT_SMEM;
      else if (strcmp($1, "tmadesc") == 0) $$->kind = DRK_TT_TMADESC;
      else FAIL(@1, "unknown type '%s' (tile, smem, tmadesc, ptr or a dtype)", $1);
      $$->rank = (int)$3->n;
      for (size_t i = 0; i < $3->n; i++) $$->dims[i] = $3->v[i];
      $$->layout = map_get(&ps->layouts, $6);
      if (!$$->layout) FAIL(@6, "undefined layout '#%s'", $6);
    }
  | IDENT '<' dims IDENT '<' IDENT '>' ',' LREF '>' {
      $$ = new_type(ps);
      if (strcmp($1, "tile") != 0) FAIL(@1, "only 'tile' types may hold pointers");
      if (strcmp($4, "ptr") != 0) FAIL(@4, "expected 'ptr<dtype>'");
      $$->kind = DRK_TT_TILE;
      $$->is_ptr = true;
      if (!dtype_of(ps, $6, mkloc(ps, &@6), &$$->dtype)) YYABORT;
      $$->rank = (int)$3->n;
      for (size_t i = 0; i < $3->n; i++) $$->dims[i] = $3->v[i];
      $$->layout = map_get(&ps->layouts, $9);
      if (!$$->layout) FAIL(@9, "undefined layout '#%s'", $9);
    }
  ;

dims:
    %empty { $$ = drk_arena_alloc(ps->m->arena, sizeof *$$); }
  | dims DIM {
      if ($1->n >= DRK_TILE_MAX_RANK) FAIL(@2, "more than %d dimensions", DRK_TILE_MAX_RANK);
      $$ = $1;
      DRK_VEC_PUSH(ps->m->arena, $$->v, $$->n, $$->cap, $2);
    }
  ;

%%

int drk_tt_lex_error(struct drk_tt_pstate *ps, void *yylloc, const char *msg) {
  perr(ps, mkloc(ps, (DRK_TTLTYPE *)yylloc), "%s", msg);
  return LEXERR;
}

static void drk_tterror(DRK_TTLTYPE *l, void *scanner, struct drk_tt_pstate *ps, const char *msg) {
  (void)scanner;
  if (ps->failed) return; /* the lexer already said what was wrong */
  perr(ps, mkloc(ps, l), "%s", msg);
}
