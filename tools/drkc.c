/* drkc: the compiler driver. A thin program over the libraries: it parses the command line,
 * loads a model (.onnx, .drkg) or a tile module (.drkt), runs the pass pipeline (a plain list
 * of calls, with --dump-after), and emits what --emit asks for. `drkc run` runs a model on
 * the CPU reference interpreter (or, later, a GPU) and writes its outputs.
 *
 * Exit status: 0 success, 1 user error (bad input, unknown option, unimplemented stage),
 * 2 usage error. Internal bugs abort through DRK_ASSERT. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/targets.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/onnx/tensor_io.h"
#include "ir/graph.h"
#include "ir/interp.h"
#include "ir/tile.h"
#include "passes/passes.h"

static const char usage_text[] =
    "usage: drkc INPUT [-o OUT] [--target=LIST] [--emit=KIND] [--dump-after=PASS] [-v]\n"
    "       drkc run MODEL [--device=cpu|cuda[:N]] [--input-dir DIR | --input NAME=FILE ...]\n"
    "                      [--output-dir OUT] [--seed N] [--npy] [--check]\n"
    "       drkc --help | --version\n"
    "\n"
    "INPUT is an ONNX model (.onnx), a graph dump (.drkg) or a tile module (.drkt).\n"
    "\n"
    "options:\n"
    "  -o OUT                  output file (default: stdout for text kinds, INPUT.drkm for modules)\n"
    "  --target=LIST           comma list of targets (default sm_90); also -arch=sm_90,\n"
    "                          --gpu-architecture=sm_90. Known: %s\n"
    "  --emit=KIND             graph | tile | llvm | ptx | cubin | fatbin | hsaco | bundle | module\n"
    "                          (default module)\n"
    "  --dump-after=PASS       print the IR after PASS to stderr (PASS: %s, or all)\n"
    "  -v                      say what each stage does\n"
    "\n"
    "drkc run: inputs are ONNX TensorProto files (input_0.pb ... in graph-input order) or .npy;\n"
    "inputs not given are drawn at random from --seed. Outputs go to OUT/output_0.pb ... (and\n"
    ".npy with --npy). --device=cpu runs the reference interpreter.\n";

/* ---- the pass pipeline: a plain list of calls ---- */
typedef bool (*graph_pass_fn)(drk_graph_t *g, drk_diag_t *d);

static bool pass_verify(drk_graph_t *g, drk_diag_t *d) { return drk_graph_verify(g, d); }

static const struct {
  const char *name;
  graph_pass_fn run;
} graph_passes[] = {
    {"verify", pass_verify},
    {"canonicalize", drk_pass_pipeline_canonicalize}, /* infer shapes, fold constants, DCE */
    {"verify-canonical", pass_verify},
};

/* What each --emit kind needs; kinds whose stage does not exist yet fail naming it. */
static const struct {
  const char *kind;
  const char *stage; /* NULL: available */
} emit_kinds[] = {
    {"graph", NULL},
    {"tile", "lower-to-tile (graph IR -> tile IR)"},
    {"llvm", "nvptx/amdgpu code generation (tile IR -> LLVM IR)"},
    {"ptx", "nvptx code generation (tile IR -> LLVM IR -> PTX)"},
    {"cubin", "nvptx code generation (PTX -> ptxas -> cubin)"},
    {"fatbin", "fat binary packaging"},
    {"hsaco", "amdgpu code generation (tile IR -> gfx942 code object)"},
    {"bundle", "offload bundle packaging"},
    {"module", "module file (.drkm) packaging"},
};

typedef struct options {
  const char *input;
  const char *output;
  const char *targets_arg;
  unsigned targets;
  const char *emit;
  const char *dump_after;
  int verbose;
} options_t;

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "drkc: error: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(drkc --help for usage)\n");
  return 2;
}

static bool has_suffix(const char *s, const char *suf) {
  size_t n = strlen(s), m = strlen(suf);
  return n >= m && strcmp(s + n - m, suf) == 0;
}

/* Matches "--name=value", "--name value", "-name=value" (nvcc style); returns the value. */
static const char *opt_value(int argc, char **argv, int *i, const char *const *names) {
  const char *a = argv[*i];
  for (const char *const *n = names; *n; n++) {
    size_t len = strlen(*n);
    if (strncmp(a, *n, len) != 0) continue;
    if (a[len] == '=') return a + len + 1;
    if (a[len] == 0) {
      if (*i + 1 >= argc) return "";
      return argv[++*i];
    }
  }
  return NULL;
}

static const char *pass_names(void) {
  static char buf[256];
  if (!buf[0]) {
    strcat(buf, "import");
    for (size_t i = 0; i < DRK_ARRAY_LEN(graph_passes); i++) {
      strcat(buf, ", ");
      strcat(buf, graph_passes[i].name);
    }
  }
  return buf;
}

static bool dump_wanted(const options_t *o, const char *pass) {
  return o->dump_after && (strcmp(o->dump_after, pass) == 0 || strcmp(o->dump_after, "all") == 0);
}

/* Loads a graph from .onnx or .drkg. */
static drk_graph_t *load_graph(const char *path, drk_diag_t *d) {
  if (has_suffix(path, ".drkg")) {
    size_t n;
    char *text = drk_read_file(path, &n, d);
    if (!text) return NULL;
    drk_graph_t *g = drk_graph_parse(text, n, path, d);
    free(text);
    return g;
  }
  return drk_onnx_import(path, d);
}

static drk_graph_t *load_and_canonicalize(const char *path, const options_t *o, drk_diag_t *d) {
  drk_graph_t *g = load_graph(path, d);
  if (!g) return NULL;
  if (dump_wanted(o, "import")) {
    fprintf(stderr, "// ---- after import ----\n");
    drk_graph_print_ex(g, stderr, 4096);
  }
  for (size_t i = 0; i < DRK_ARRAY_LEN(graph_passes); i++) {
    if (o->verbose) fprintf(stderr, "drkc: pass %s\n", graph_passes[i].name);
    if (!graph_passes[i].run(g, d)) {
      drk_graph_destroy(g);
      return NULL;
    }
    if (dump_wanted(o, graph_passes[i].name)) {
      fprintf(stderr, "// ---- after %s ----\n", graph_passes[i].name);
      drk_graph_print_ex(g, stderr, 4096);
    }
  }
  return g;
}

static FILE *open_output(const char *path) {
  if (!path || strcmp(path, "-") == 0) return stdout;
  FILE *f = fopen(path, "w");
  if (!f) fprintf(stderr, "drkc: error: cannot write '%s': %s\n", path, strerror(errno));
  return f;
}

static int close_output(FILE *f) {
  if (f == stdout) return fflush(f) == 0 ? 0 : 1;
  return fclose(f) == 0 ? 0 : 1;
}

static int compile_tile_module(const options_t *o, drk_diag_t *d) {
  size_t n;
  char *text = drk_read_file(o->input, &n, d);
  if (!text) return 1;
  drk_tile_module_t *m = drk_tile_parse(text, n, o->input, d);
  free(text);
  if (!m) return 1;
  int rc = 1;
  if (drk_tile_verify(m, d)) {
    if (strcmp(o->emit, "tile") == 0) {
      FILE *f = open_output(o->output);
      if (f) {
        drk_tile_print(m, f);
        rc = close_output(f);
      }
    } else {
      for (size_t i = 0; i < DRK_ARRAY_LEN(emit_kinds); i++)
        if (strcmp(emit_kinds[i].kind, o->emit) == 0)
          fprintf(stderr, "drkc: error: --emit=%s needs the stage '%s', which is not implemented yet\n",
                  o->emit, emit_kinds[i].stage);
    }
  }
  drk_tile_module_destroy(m);
  return rc;
}

static int compile(const options_t *o) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  const char *stage = NULL;
  for (size_t i = 0; i < DRK_ARRAY_LEN(emit_kinds); i++)
    if (strcmp(emit_kinds[i].kind, o->emit) == 0) stage = emit_kinds[i].stage ? emit_kinds[i].stage : "";
  if (!stage) {
    fprintf(stderr, "drkc: error: unknown --emit kind '%s' (known: graph tile llvm ptx cubin fatbin "
                    "hsaco bundle module)\n", o->emit);
    return 2;
  }
  if (has_suffix(o->input, ".drkt")) {
    if (strcmp(o->emit, "graph") == 0) {
      fprintf(stderr, "drkc: error: --emit=graph needs a graph (.onnx or .drkg); '%s' is a tile module\n",
              o->input);
      return 1;
    }
    return compile_tile_module(o, &d);
  }
  if (!has_suffix(o->input, ".onnx") && !has_suffix(o->input, ".drkg")) {
    fprintf(stderr, "drkc: error: '%s': unknown input kind (expected .onnx, .drkg or .drkt)\n", o->input);
    return 1;
  }
  drk_graph_t *g = load_and_canonicalize(o->input, o, &d);
  if (!g) return 1;
  int rc = 1;
  if (strcmp(o->emit, "graph") == 0) {
    FILE *f = open_output(o->output);
    if (f) {
      drk_graph_print(g, f);
      rc = close_output(f);
    }
  } else {
    fprintf(stderr, "drkc: error: --emit=%s (targets %s) needs the stage '%s', which is not implemented yet; "
                    "available now: --emit=graph\n", o->emit, o->targets_arg, stage);
  }
  drk_graph_destroy(g);
  return rc;
}

/* ---- drkc run ---- */
typedef struct run_options {
  const char *model;
  const char *device;
  const char *input_dir;
  const char *output_dir;
  const char *named_inputs[64]; /* NAME=FILE */
  int n_named;
  uint64_t seed;
  bool npy, check;
} run_options_t;

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Random input for a graph input with a static shape: floats uniform in [-1, 1), integers in
 * [0, 4), bools fair coins. */
static bool random_input(const drk_value_t *v, uint64_t *rng, drk_tensor_t *out, drk_diag_t *d) {
  int64_t dims[DRK_MAX_RANK];
  if (v->shape.rank < 0 || v->shape.rank > DRK_MAX_RANK) {
    drk_diag_error(d, drk_loc_none, "input '%s' has unknown rank: give it with --input %s=FILE", v->name, v->name);
    return false;
  }
  for (int i = 0; i < v->shape.rank; i++) {
    if (v->shape.dims[i].sym) {
      drk_diag_error(d, drk_loc_none, "input '%s' has symbolic dim '%s': give it with --input %s=FILE",
                     v->name, v->shape.dims[i].sym, v->name);
      return false;
    }
    dims[i] = v->shape.dims[i].size;
  }
  if (!drk_tensor_alloc(out, v->dtype, v->shape.rank, dims)) {
    drk_diag_error(d, drk_loc_none, "input '%s': cannot allocate", v->name);
    return false;
  }
  int64_t n = drk_tensor_numel(out);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = rng_next(rng);
    if (drk_dtype_is_float(v->dtype))
      drk_tensor_set_f64(out, i, (double)(r >> 11) * 0x1.0p-52 - 1.0);
    else if (v->dtype == DRK_DT_BOOL)
      drk_tensor_set_i64(out, i, (int64_t)(r & 1));
    else
      drk_tensor_set_i64(out, i, (int64_t)(r % 4));
  }
  return true;
}

static bool file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static bool read_input_file(const char *path, drk_tensor_t *out, drk_diag_t *d) {
  if (has_suffix(path, ".npy")) return drk_tensor_read_npy(path, out, d);
  return drk_tensor_read_pb(path, out, NULL, d);
}

static bool check_input(const drk_value_t *v, const drk_tensor_t *t, const char *src, drk_diag_t *d) {
  if (t->dtype != v->dtype) {
    drk_diag_error(d, drk_loc_none, "%s: input '%s' must be %s, the file holds %s", src, v->name,
                   drk_dtype_name(v->dtype), drk_dtype_name(t->dtype));
    return false;
  }
  if (v->shape.rank >= 0) {
    bool ok = v->shape.rank == t->rank;
    for (int i = 0; ok && i < t->rank; i++)
      if (!v->shape.dims[i].sym && v->shape.dims[i].size != t->dims[i]) ok = false;
    if (!ok) {
      drk_diag_error(d, drk_loc_none, "%s: input '%s' has the wrong shape for the model", src, v->name);
      return false;
    }
  }
  return true;
}

static int run_model(const run_options_t *ro) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  if (strcmp(ro->device, "cpu") != 0) {
    if (strncmp(ro->device, "cuda", 4) == 0) {
      fprintf(stderr, "drkc: error: --device=%s needs the stages 'lower-to-tile' and 'nvptx code generation', "
                      "which are not implemented yet; use --device=cpu\n", ro->device);
      return 1;
    }
    fprintf(stderr, "drkc: error: unknown device '%s' (cpu, cuda, cuda:N)\n", ro->device);
    return 2;
  }
  if (ro->check) {
    fprintf(stderr, "drkc: error: --check compares a GPU run with the interpreter and needs --device=cuda\n");
    return 2;
  }
  options_t o = {0};
  drk_graph_t *g = load_and_canonicalize(ro->model, &o, &d);
  if (!g) return 1;
  int rc = 1;
  size_t ni = g->n_inputs, no = g->n_outputs;
  drk_tensor_t *inputs = calloc(ni + 1, sizeof *inputs);
  drk_tensor_t *outputs = calloc(no + 1, sizeof *outputs);
  uint64_t rng = ro->seed;
  size_t loaded = 0;
  for (int k = 0; k < ro->n_named; k++) {
    const char *eq = strchr(ro->named_inputs[k], '=');
    bool found = false;
    for (size_t i = 0; i < ni; i++)
      found |= strlen(g->inputs[i]->name) == (size_t)(eq - ro->named_inputs[k]) &&
               strncmp(g->inputs[i]->name, ro->named_inputs[k], (size_t)(eq - ro->named_inputs[k])) == 0;
    if (!found) {
      drk_diag_error(&d, drk_loc_none, "--input %s: the model has no input of that name", ro->named_inputs[k]);
      goto done;
    }
  }
  for (size_t i = 0; i < ni; i++) {
    const drk_value_t *v = g->inputs[i];
    char path[4096];
    const char *src = NULL;
    for (int k = 0; k < ro->n_named; k++) {
      const char *eq = strchr(ro->named_inputs[k], '=');
      if ((size_t)(eq - ro->named_inputs[k]) == strlen(v->name) &&
          strncmp(ro->named_inputs[k], v->name, strlen(v->name)) == 0) {
        src = eq + 1;
      }
    }
    if (!src && ro->input_dir) {
      snprintf(path, sizeof path, "%s/input_%zu.pb", ro->input_dir, i);
      if (file_exists(path)) src = path;
      else {
        snprintf(path, sizeof path, "%s/input_%zu.npy", ro->input_dir, i);
        if (file_exists(path)) src = path;
      }
    }
    bool ok = src ? read_input_file(src, &inputs[i], &d) && check_input(v, &inputs[i], src, &d)
                  : random_input(v, &rng, &inputs[i], &d);
    if (!ok) goto done;
    loaded++;
  }
  if (!drk_interp_run(g, inputs, outputs, &d)) goto done;
  if (ro->output_dir) {
    mkdir(ro->output_dir, 0777);
    for (size_t i = 0; i < no; i++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/output_%zu.pb", ro->output_dir, i);
      if (!drk_tensor_write_pb(path, &outputs[i], g->outputs[i]->name, &d)) goto done_out;
      if (ro->npy) {
        snprintf(path, sizeof path, "%s/output_%zu.npy", ro->output_dir, i);
        if (!drk_tensor_write_npy(path, &outputs[i], &d)) goto done_out;
      }
    }
  }
  for (size_t i = 0; i < no; i++) {
    const drk_tensor_t *t = &outputs[i];
    printf("output %zu '%s': %s[", i, g->outputs[i]->name, drk_dtype_name(t->dtype));
    for (int k = 0; k < t->rank; k++) printf("%s%lld", k ? ", " : "", (long long)t->dims[k]);
    int64_t n = drk_tensor_numel(t);
    double sum = 0;
    for (int64_t k = 0; k < n; k++) sum += drk_tensor_get_f64(t, k);
    printf("] sum %.9g\n", sum);
  }
  rc = 0;
done_out:
  for (size_t i = 0; i < no; i++) drk_tensor_free(&outputs[i]);
done:
  for (size_t i = 0; i < loaded; i++) drk_tensor_free(&inputs[i]);
  free(inputs);
  free(outputs);
  drk_graph_destroy(g);
  return rc;
}

static int main_run(int argc, char **argv) {
  run_options_t ro = {.device = "cpu", .seed = 0};
  static const char *const o_device[] = {"--device", NULL}, *const o_indir[] = {"--input-dir", NULL},
                           *const o_outdir[] = {"--output-dir", NULL}, *const o_seed[] = {"--seed", NULL},
                           *const o_input[] = {"--input", NULL};
  for (int i = 2; i < argc; i++) {
    const char *v;
    if ((v = opt_value(argc, argv, &i, o_device))) ro.device = v;
    else if ((v = opt_value(argc, argv, &i, o_indir))) ro.input_dir = v;
    else if ((v = opt_value(argc, argv, &i, o_outdir))) ro.output_dir = v;
    else if ((v = opt_value(argc, argv, &i, o_seed))) {
      char *end;
      ro.seed = strtoull(v, &end, 10);
      if (!*v || *end) return usage_error("--seed needs a number, got '%s'", v);
    } else if ((v = opt_value(argc, argv, &i, o_input))) {
      if (!strchr(v, '=')) return usage_error("--input needs NAME=FILE, got '%s'", v);
      if (ro.n_named == (int)DRK_ARRAY_LEN(ro.named_inputs)) return usage_error("too many --input options%s", "");
      ro.named_inputs[ro.n_named++] = v;
    } else if (strcmp(argv[i], "--npy") == 0) ro.npy = true;
    else if (strcmp(argv[i], "--check") == 0) ro.check = true;
    else if (argv[i][0] == '-') return usage_error("unknown option '%s' for 'drkc run'", argv[i]);
    else if (ro.model) return usage_error("more than one model given ('%s')", argv[i]);
    else ro.model = argv[i];
  }
  if (!ro.model) return usage_error("drkc run needs a MODEL%s", "");
  return run_model(&ro);
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "run") == 0) return main_run(argc, argv);
  options_t o = {.emit = "module", .targets_arg = "sm_90"};
  static const char *const o_target[] = {"--target", "-arch", "--gpu-architecture", "--arch", NULL},
                           *const o_emit[] = {"--emit", NULL}, *const o_dump[] = {"--dump-after", NULL},
                           *const o_out[] = {"-o", "--output", NULL};
  for (int i = 1; i < argc; i++) {
    const char *v;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(usage_text, drk_target_known_list(), pass_names());
      return 0;
    }
    if (strcmp(argv[i], "--version") == 0) {
      printf("drkc %s\n", DRK_VERSION_STRING);
      return 0;
    }
    if (strcmp(argv[i], "-v") == 0) o.verbose = 1;
    else if ((v = opt_value(argc, argv, &i, o_target))) o.targets_arg = v;
    else if ((v = opt_value(argc, argv, &i, o_emit))) o.emit = v;
    else if ((v = opt_value(argc, argv, &i, o_dump))) o.dump_after = v;
    else if ((v = opt_value(argc, argv, &i, o_out))) o.output = v;
    else if (argv[i][0] == '-' && argv[i][1]) return usage_error("unknown option '%s'", argv[i]);
    else if (o.input) return usage_error("more than one input given ('%s')", argv[i]);
    else o.input = argv[i];
  }
  if (!o.input) return usage_error("no input file%s", "");
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  if (!drk_target_parse_list(o.targets_arg, &o.targets, &d)) return 1;
  if (o.dump_after && strcmp(o.dump_after, "all") != 0 && strcmp(o.dump_after, "import") != 0) {
    bool known = false;
    for (size_t i = 0; i < DRK_ARRAY_LEN(graph_passes); i++) known |= strcmp(graph_passes[i].name, o.dump_after) == 0;
    if (!known) {
      fprintf(stderr, "drkc: error: unknown pass '%s' for --dump-after (passes: %s, all)\n", o.dump_after, pass_names());
      return 2;
    }
  }
  return compile(&o);
}
