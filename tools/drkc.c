/* drkc: the compiler driver. A thin program over the libraries: it parses the command line,
 * loads a model (.onnx, .drkg) or a tile module (.drkt), runs the pass pipeline (a plain list
 * of calls, with --dump-after), and emits what --emit asks for. `drkc run` runs a model on
 * the CPU reference interpreter (or, later, a GPU) and writes its outputs.
 *
 * Exit status: 0 success, 1 user error (bad input, unknown option, unimplemented stage),
 * 2 usage error. Internal bugs abort through DRK_ASSERT. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/package/hostobj.h"
#include "backends/package/module.h"
#include "backends/targets.h"
#include "drk/drkrt.h"
#include "frontend/onnx/tensor_io.h"
#include "ir/graph.h"
#include "ir/interp.h"
#include "ir/tile.h"
#include "passes/precision_auto.h"
#include "pipeline/dynamic.h"
#include "pipeline/pipeline.h"
#include "tools/drkc.h"
#include "tools/report.h"
#include "tools/tune.h"
#include "search/db.h"
#include "search/tuned.h"

static const char usage_text[] =
    "usage: drkc INPUT [-o OUT] [--target=LIST] [--emit=KIND] [--dump-after=STAGE] [--bind=DIMS]\n"
    "                  [--shapes-from=DIR] [--freeze-input=NAME=FILE] [--precision=P] [--matmul-precision=M]\n"
    "                  [--accuracy-budget=E [--calibration=DIR]]\n"
    "                  [--layout=L] [--db=FILE [--require-tuned]] [--report] [--time-stages] [-v] [-q]\n"
    "       drkc run MODEL [--device=cpu|cuda[:N]] [--input-dir DIR | --input NAME=FILE ...]\n"
    "                      [--output-dir OUT] [--seed N] [--npy] [--check] [--bind=DIMS]\n"
    "                      [--target=LIST (default: the GPU's own arch)] [--portable]\n"
    "                      [--precision=P] [--matmul-precision=M] [--layout=L] [--db=FILE]\n"
    "       drkc tune MODEL [--trials=N] [--time=S] ... (drkc tune --help)\n"
    "       drkc db list|show|best|workloads|export|import|merge|prune|tag ... (drkc db --help)\n"
    "       drkc report LOG... -o REPORT.html (the tune logs as one page; drkc report --help)\n"
    "       drkc --help | --version\n"
    "\n"
    "INPUT is an ONNX model (.onnx), a graph dump (.drkg) or a tile module (.drkt).\n"
    "\n"
    "options:\n"
    "  -o OUT                  output file (default: stdout for text kinds; for files, the input's\n"
    "                          name with the kind's extension in the current folder: ./model.drkm)\n"
    "  --target=LIST           comma list of targets (default sm_90); also -arch=sm_90,\n"
    "                          --gpu-architecture=sm_90. Known: %s.\n"
    "                          sm_90 means Hopper at full speed: the module's plan is sm_90a\n"
    "                          (wgmma, TMA; every compute-capability-9.0 GPU runs it), and it\n"
    "                          carries a fallback plan of sm_80-class kernels with an sm_90\n"
    "                          cubin and compute_90 PTX, which the runtime takes on later GPUs\n"
    "                          (they JIT the PTX). sm_90a: the sm_90a plan alone. One plan\n"
    "                          serves every target: with an older target in the list\n"
    "                          (sm_87,sm_90) every image runs the oldest target's kernels (no\n"
    "                          wgmma; --report says so)\n"
    "  --portable              keep sm_90 portable: the sm_80-class plan alone (an sm_90 cubin\n"
    "                          and compute_90 PTX that later GPUs (Blackwell) JIT-compile)\n"
    "  --emit=KIND             %s | obj | lib (default module; schedules: every\n"
    "                          kernel's workload key, knob space and schedule, the text --schedules\n"
    "                          reads; obj: a host object embedding the module plus a C header\n"
    "                          OUT.h, lib: the same as a static archive; docs/deploy.md)\n"
    "  -c                      --emit=obj: -c -o model.o writes model.o and model.h, a typed C\n"
    "                          API (model_create, model_run, model_destroy) over libdrkrt\n"
    "  --host=TRIPLE           the CPU of the host object: x86_64-linux-gnu (default) or\n"
    "                          aarch64-linux-gnu (Jetson)\n"
    "  --name=NAME             the C API's name (default: OUT's base name, e.g. model)\n"
    "  --weights=W             embedded (the default) | external: the weights go to a side file\n"
    "                          next to OUT (model.weights), which the runtime reads (drkrun: next\n"
    "                          to the module; the header's NAME_create: its weights_path option);\n"
    "                          for models too big for an object's section\n"
    "  --dump-after=STAGE      print the IR after a stage of the pipeline to stderr (STAGE: %s,\n"
    "                          or all)\n"
    "  --bind=DIMS             give symbolic dims sizes, e.g. --bind=batch=2,seq=128 (the GPU\n"
    "                          path needs static shapes)\n"
    "  --shapes-from=DIR       bind symbolic dims to the shapes of DIR/input_0.pb ... (or .npy)\n"
    "  --dynamic=DIMS          one module for ranges of dims, e.g. --dynamic=batch=1..64,seq=1..2048:\n"
    "                          a plan per shape bucket, the runtime picks the smallest that holds\n"
    "                          the actual shape (docs/dynamic-shapes.md)\n"
    "  --buckets=LIST          the buckets' sizes, e.g. batch:1,8,64;seq:128,512,2048 (default:\n"
    "                          powers of two up to the range's end)\n"
    "  --freeze-input=NAME=FILE  compile for this value of input NAME (.pb or .npy): it becomes a\n"
    "                          constant and leaves the module's inputs (shape-like inputs such\n"
    "                          as Slice starts or Pad pads must be constants for the GPU path)\n"
    "  --precision=P           auto (keep the model's dtypes, the default) | fp32 | tf32 | bf16 |\n"
    "                          fp16 | fp8 (e4m3 matmuls/convs on sm_89, sm_90, gfx942; the rest\n"
    "                          f16); normalizations and fragile reductions stay f32, the\n"
    "                          model's interface keeps its dtypes\n"
    "  --accuracy-budget=E     with --precision=auto: choose per op group among fp8 (targets with\n"
    "                          fp8), fp16, bf16, tf32 and fp32, fastest first, keeping a choice only\n"
    "                          when every output's relative error against the f64 interpreter on\n"
    "                          the calibration inputs is at most E (0 < E < 1); --report shows it\n"
    "  --calibration=DIR       the budget's inputs: DIR/input_0.pb ... (or .npy); default: drawn\n"
    "                          as drkc run draws them (--seed 0)\n"
    "  --matmul-precision=M    highest (f32 math for f32 matmuls, the default) | high (TF32) |\n"
    "                          medium (bf16 inputs, f32 accumulation)\n"
    "  --quantize=int4-weight  MatMuls by a constant float weight [K, N] with K a multiple of the\n"
    "                          group get 4-bit weights (round to nearest, a scale and zero point\n"
    "                          per group of K), activations keep their dtype (W4A16)\n"
    "  --group-size=G          the group of --quantize (default 128; a multiple of 16)\n"
    "  --layout=L              auto (the default: NHWC for 2-D convs computing in f16, bf16 or\n"
    "                          f8 when every target is NVIDIA) | nchw (the model's layout) |\n"
    "                          nhwc (every 2-D float conv with constant weights); the layout\n"
    "                          changes go where the graph needs them, once\n"
    "  --fusion-aggressiveness=L  0 none, 1 elementwise chains, 2 (default) also reductions\n"
    "                          with their prologue/epilogue and matmul/conv epilogues, with\n"
    "                          sibling MatMuls of one input merged (q/k/v), 3 also attention\n"
    "                          (one flash kernel)\n"
    "  --max-graph-depth=N     most ops in one fused group (default 50)\n"
    "  --schedules=FILE        per-kernel schedules: lines of --emit=schedules, edited (any\n"
    "                          subset of a kernel's knobs; over --schedule's pins)\n"
    "  --schedule=K=V,...      pin schedule knobs of every kernel of a kind (default: the\n"
    "                          heuristic): mm.tile_n=64|128|256 (sm_90a matmul N tile),\n"
    "                          mm.split_k=1..16, mm.stages=2..8 (sm_90a matmul ring),\n"
    "                          mm.persistent=0|1|2 (sm_90a matmul: persistent ping-pong 1,\n"
    "                          cooperative 2), mm.cluster=1|2 (sm_90a matmul: 2 programs\n"
    "                          along M share B by TMA multicast), mm.staged=0|1 (sm_90a\n"
    "                          matmul epilogue through shared memory), mm.pair=0|1 (sm_90a:\n"
    "                          a fused group's paired MatMul, e.g. SwiGLU's up projection,\n"
    "                          in the gate's kernel), conv.hopper=0|1 (sm_90a NHWC convs on\n"
    "                          the TMA + wgmma kernel, default 1; 0: mma_sync),\n"
    "                          conv.tile_h, conv.tile_w=1..128 (its output window),\n"
    "                          flat.move_block=1024..8192 (flat kernels with data movement),\n"
    "                          attn.block_m=64|128 (flash attention rows per program),\n"
    "                          rows.spt=1|2|4|8 (row kernels: elements per thread and step)\n"
    "  --db=FILE|URL           compile every kernel with its best stable record in the kernel\n"
    "                          database (drkc tune fills it: an SQLite file, or a PostgreSQL\n"
    "                          postgresql://USER@HOST/DB) when there is one for its workload,\n"
    "                          this drkc version and the target's arch; the others keep the\n"
    "                          heuristic's schedule (a --schedules line wins over the database)\n"
    "  --require-tuned         with --db: fail, listing them, when a kernel with knobs has no\n"
    "                          usable record\n"
    "  --report                print kernels, planned memory and the precision mix to stderr\n"
    "                          (with --db: which kernels were tuned, by record id, and which not)\n"
    "  --time-stages           print the wall time of every pipeline stage to stderr\n"
    "  --jobs=N, -j N          kernels compiled at once (default: one per CPU); for drkc run\n"
    "                          also the reference interpreter's threads\n"
    "  --no-cache              do not use the compiled-kernel cache\n"
    "  -v                      say what each stage does\n"
    "  -q                      no progress line (drawn on a terminal for compiles over a second)\n"
    "\n"
    "drkc run: inputs are ONNX TensorProto files (input_0.pb ... in graph-input order) or .npy;\n"
    "inputs not given are drawn at random from --seed. Outputs go to OUT/output_0.pb ... (and\n"
    ".npy with --npy). --device=cpu runs the reference interpreter; --device=cuda compiles for\n"
    "the local GPU and runs there; --check also runs the interpreter on the same inputs and\n"
    "prints the relative error of every output with PASS/FAIL (with --device=cpu: the interpreter\n"
    "on the model after --precision against the model as given).\n";

/* The driver's own options; everything that shapes the compile is in c, the one options
 * struct every stage of the pipeline reads (pipeline/pipeline.h). */
typedef struct options {
  const char *input;
  const char *output;
  const char *targets_arg;
  const char *emit;
  const char *freeze[32]; /* --freeze-input NAME=FILE */
  const char *schedules_path; /* --schedules=FILE */
  drk_schedules_t schedules;  /* its lines (load_schedules) */
  bool quiet;                 /* -q: no progress line */
  bool portable;              /* --portable: sm_90 stays sm_90 (drk_target_resolve) */
  unsigned fallback;          /* a module's fallback plan's targets (drk_target_fallback), 0: none */
  const char *host;           /* --host: the host object's CPU (-c, --emit=obj|lib) */
  const char *name;           /* --name: the C API's name (default: the output's base name) */
  bool external_weights;      /* --weights=external */
  drk_compile_options_t c;
} options_t;

int drkc_usage_error(const char *fmt, const char *arg) {
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
const char *drkc_opt_value(int argc, char **argv, int *i, const char *const *names) {
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

/* The names of the stages with an IR to print, comma-separated (--help, --dump-after). */
static const char *stage_names(void) {
  static char buf[512];
  if (!buf[0]) {
    size_t n;
    const drk_stage_t *st = drk_pipeline_stages(&n);
    for (size_t i = 0; i < n; i++) {
      size_t len = strlen(buf);
      if (st[i].dump) snprintf(buf + len, sizeof buf - len, "%s%s", len ? ", " : "", st[i].name);
    }
  }
  return buf;
}

static const char *emit_names(void) {
  static char buf[256];
  if (!buf[0]) {
    size_t n;
    const drk_emit_kind_t *k = drk_emit_kinds(&n);
    for (size_t i = 0; i < n; i++) {
      size_t len = strlen(buf);
      snprintf(buf + len, sizeof buf - len, "%s%s", i ? " | " : "", k[i].kind);
    }
  }
  return buf;
}

/* Reads --schedules=FILE into o->schedules (freed by the caller with drk_schedules_free). */
static bool load_schedules(const char *path, drk_schedules_t *out, drk_diag_t *d) {
  if (!path) return true;
  size_t n = 0;
  char *text = drk_read_file(path, &n, d);
  bool ok = text && drk_schedules_parse(text, n, path, out, d);
  free(text);
  return ok;
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
      fprintf(stderr, "drkc: error: --emit=%s from a tile module (.drkt) is not supported; compile a graph "
                      "(.onnx, .drkg), or use --emit=tile\n", o->emit);
    }
  }
  drk_tile_module_destroy(m);
  return rc;
}

static char *default_output(const char *input, const char *ext) {
  const char *base = strrchr(input, '/');
  base = base ? base + 1 : input;
  const char *dot = strrchr(base, '.');
  size_t n = dot ? (size_t)(dot - base) : strlen(base);
  char *p = malloc(n + strlen(ext) + 1);
  memcpy(p, base, n);
  strcpy(p + n, ext);
  return p;
}

/* Writes the result to -o (or the default file for byte kinds, stdout for text): into a
 * temporary file of the target folder, renamed over the target once complete, so a failed
 * write (disk full, a file size limit, a kill) never leaves a truncated module where a good one
 * was. */
static int write_result_to(const options_t *o, const char *out, const void *data, size_t size, bool text,
                           const char *ext, size_t kernels, double seconds) {
  char *dflt = NULL;
  const char *path = out;
  if (!path && !text) path = dflt = default_output(o->input, ext);
  if (!path || strcmp(path, "-") == 0) {
    bool ok = fwrite(data, 1, size, stdout) == size && fflush(stdout) == 0;
    if (!ok) fprintf(stderr, "drkc: error: writing to standard output failed: %s\n", strerror(errno));
    return ok ? 0 : 1;
  }
  size_t n = strlen(path);
  char *tmp = malloc(n + 16);
  snprintf(tmp, n + 16, "%s.tmp.XXXXXX", path);
  int fd = mkstemp(tmp);
  FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
  bool ok = f != NULL;
  if (!ok) fprintf(stderr, "drkc: error: cannot write '%s': %s\n", path, strerror(errno));
  ok = ok && fwrite(data, 1, size, f) == size;
  int err = errno;
  if (f && fclose(f) != 0 && ok) ok = false, err = errno;
  if (f && !ok) fprintf(stderr, "drkc: error: writing '%s' failed: %s (the previous file, if any, is kept)\n", path,
                        strerror(err));
  if (ok) {
    mode_t um = umask(0);
    umask(um);
    chmod(tmp, 0666 & ~um); /* mkstemp makes 0600; a plain fopen would have made this */
    if (rename(tmp, path) != 0) {
      fprintf(stderr, "drkc: error: cannot write '%s': %s\n", path, strerror(errno));
      ok = false;
    }
  }
  if (!ok && fd >= 0) unlink(tmp);
  if (ok && !o->quiet && !text)
    fprintf(stderr, "drkc: wrote %s%s: %zu kernels, %.1f MB, %.1f s\n", strchr(path, '/') ? "" : "./", path, kernels,
            (double)size / 1e6, seconds);
  else if (ok && o->c.verbose)
    fprintf(stderr, "drkc: wrote %s (%zu bytes)\n", path, size);
  free(tmp);
  free(dflt);
  return ok ? 0 : 1;
}

/* -o naming the input would destroy the model: refused before compiling. */
static bool output_is_input(const char *out, const char *in) {
  struct stat a, b;
  return out && stat(out, &a) == 0 && stat(in, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static int write_result(const options_t *o, const void *data, size_t size, bool text, const char *ext,
                        size_t kernels, double seconds) {
  return write_result_to(o, o->output, data, size, text, ext, kernels, seconds);
}

/* -c / --emit=obj|lib: the module as a host object (or an archive of it) at OUT, and the C
 * header next to it (OUT's folder, the API's name + .h). */
static int write_host_outputs(const options_t *o, const void *module, size_t size, size_t kernels, double seconds,
                              drk_diag_t *d) {
  bool lib = strcmp(o->emit, "lib") == 0;
  char *dflt = o->output ? NULL : default_output(o->input, lib ? ".a" : ".o");
  const char *path = o->output ? o->output : dflt;
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  /* libmodel.a names the API model */
  char *name = o->name ? strdup(o->name) : drk_host_name_from_path(lib && strncmp(base, "lib", 3) == 0 && base[3] ? base + 3 : base);
  drk_host_arch_t arch = DRK_HOST_X86_64;
  void *obj = NULL, *ar = NULL;
  char *header = NULL, *hpath = NULL;
  size_t obj_size = 0, ar_size = 0;
  int rc = 1;
  if (o->host) drk_host_parse(o->host, &arch); /* checked in main */
  if (name && drk_host_object(module, size, name, arch, &obj, &obj_size, d) &&
      (!lib || drk_host_archive(obj, obj_size, "drkm_model.o", name, &ar, &ar_size, d)) &&
      drk_host_header(module, size, name, &header, d)) {
    size_t dir = (size_t)(base - path);
    hpath = malloc(dir + strlen(name) + 3);
    memcpy(hpath, path, dir);
    sprintf(hpath + dir, "%s.h", name);
    if (output_is_input(hpath, o->input)) {
      fprintf(stderr, "drkc: error: the header %s would overwrite the input model\n", hpath);
    } else {
      rc = write_result_to(o, path, lib ? ar : obj, lib ? ar_size : obj_size, false, NULL, kernels, seconds);
      if (rc == 0) rc = write_result_to(o, hpath, header, strlen(header), true, NULL, kernels, seconds);
      if (rc == 0 && !o->quiet) fprintf(stderr, "drkc: wrote %s: the C API %s_create/_run/_destroy\n", hpath, name);
    }
  }
  free(hpath);
  free(header);
  free(ar);
  free(obj);
  free(name);
  free(dflt);
  return rc;
}


/* The output's folder must exist and take a new file, checked before a compile that can take
 * many seconds: write_result's temporary file is made there. */
static bool output_writable(const char *path) {
  if (!path || strcmp(path, "-") == 0) return true;
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    fprintf(stderr, "drkc: error: cannot write '%s': %s\n", path, strerror(EISDIR));
    return false;
  }
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  bool ok = dir && access(dir, W_OK | X_OK) == 0;
  if (!ok) fprintf(stderr, "drkc: error: cannot write '%s': %s: %s\n", path, dir ? dir : "", strerror(errno));
  free(dir);
  return ok;
}

/* The model file's SHA-256 (provenance) on a thread of its own while the build runs: for
 * big models reading and hashing the file take seconds. */
typedef struct hash_job {
  const char *path;
  pthread_t thread;
  bool started, done, ok; /* done: hashed here or the thread joined */
  char hash[72];
} hash_job_t;

static void *hash_main(void *p) {
  hash_job_t *h = p;
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  size_t size = 0;
  char *bytes = drk_read_file(h->path, &size, &d);
  if (bytes) drk_modfile_sha256_string(bytes, size, h->hash);
  h->ok = bytes != NULL;
  free(bytes);
  return NULL;
}

/* drk_build_options_t.model_hash: the thread's result (joined once) */
static const char *hash_join(void *p) {
  hash_job_t *h = p;
  if (h->started && !h->done) h->done = pthread_join(h->thread, NULL) == 0;
  return h->done && h->ok ? h->hash : NULL;
}


/* ---- --db: tuned schedules from the kernel database (search/tuned.h) ---- */
/* Opens c->db for a compile for c->targets and sets the lowering's lookup hook; prints the
 * database's note (another version, another target, no stable records). */
static bool db_attach(drk_compile_options_t *c, drk_search_tuned_t **out) {
  *out = NULL;
  if (!c->db) {
    if (c->require_tuned) {
      fprintf(stderr, "drkc: error: --require-tuned needs --db=FILE (the kernel database)\n");
      return false;
    }
    return true;
  }
  char archs[256] = "";
  for (int t = 0; t < DRK_TARGET_COUNT; t++)
    if (c->targets & (1u << t)) {
      size_t len = strlen(archs);
      snprintf(archs + len, sizeof archs - len, "%s%s", len ? "," : "", drk_target_info((drk_target_t)t)->name);
    }
  char err[1200];
  if (!drk_search_tuned_open(c->db, archs, NULL, out, err, sizeof err)) {
    fprintf(stderr, "drkc: error: --db: %s\n", err);
    return false;
  }
  if (drk_search_tuned_note(*out)[0]) fprintf(stderr, "drkc: note: --db: %s\n", drk_search_tuned_note(*out));
  c->lookup = drk_search_tuned_lookup;
  c->lookup_ctx = *out;
  return true;
}

/* One line per kernel (a node's first launch names it, as --emit=schedules does): tuned from
 * the database, given by --schedules, or the heuristic's and why; --require-tuned fails when a
 * kernel with knobs is not tuned (listing every such kernel). */
static bool db_check(const drk_compile_options_t *c, drk_search_tuned_t *tuned, const drk_lowered_t *l) {
  if (!tuned || !l) return true;
  size_t n_knobs = 0, n_tuned = 0, n_untuned = 0, n_other = 0;
  FILE *rep = c->report;
  if (rep) fprintf(rep, "tuned schedules (--db=%s):\n", drk_search_tuned_db_name(tuned));
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < l->n_launches; i++) {
      const drk_launch_t *la = &l->launches[i];
      bool first = true;
      uint32_t space = 0;
      for (size_t j = 0; j < l->n_launches; j++)
        if (l->launches[j].node == la->node) {
          if (j < i) first = false;
          space |= l->launches[j].knob_space;
        }
      if (!first || !space) continue;
      /* a --schedules line names the kernels of its node (k<node>_...) */
      bool from_file = false;
      size_t node = (size_t)strtoull(la->kernel->name + 1, NULL, 10);
      for (size_t k = 0; c->schedules && k < c->schedules->n && !from_file; k++)
        from_file = c->schedules->entries[k].node == node;
      const drk_search_tuned_entry_t *e = drk_search_tuned_find(tuned, la->workload);
      bool ok = from_file || (e && e->status == DRK_SEARCH_DB_FOUND);
      if (pass == 0) {
        n_knobs++;
        if (e && e->status == DRK_SEARCH_DB_FOUND && !from_file) n_tuned++;
        if (!ok) n_untuned++;
        if (!ok && e && (e->status == DRK_SEARCH_DB_OTHER_VERSION || e->status == DRK_SEARCH_DB_OTHER_TARGET))
          n_other++;
        if (!rep) continue;
        if (from_file) fprintf(rep, "  %-28s wl=%s  --schedules line (the database is not asked)\n", la->kernel->name,
                               la->workload);
        else if (ok)
          fprintf(rep, "  %-28s wl=%s  tuned: record %lld, %.3f us, %s\n", la->kernel->name, la->workload,
                  (long long)e->record.id, e->record.time_us, e->record.schedule);
        else
          fprintf(rep, "  %-28s wl=%s  heuristic: %s\n", la->kernel->name, la->workload,
                  !e ? "not asked" : e->note[0] ? e->note : "no stable record");
      } else if (!ok && c->require_tuned) {
        fprintf(stderr, "  %-28s wl=%s  %s\n", la->kernel->name, la->workload,
                !e ? "not asked" : e->note[0] ? e->note : "no stable record");
      }
    }
    if (pass == 0) {
      if (rep) fprintf(rep, "  %zu of %zu kernels with knobs tuned from the database\n", n_tuned, n_knobs);
      if (n_other && !rep)
        fprintf(stderr, "drkc: note: --db: %zu kernels have records only from another drkc version or target (not "
                        "used; --report lists them)\n", n_other);
      if (!n_untuned || !c->require_tuned) return true;
      fprintf(stderr, "drkc: error: --require-tuned: %zu of %zu kernels with knobs have no usable record in %s:\n",
              n_untuned, n_knobs, drk_search_tuned_db_name(tuned));
    }
  }
  return false;
}

/* --weights=external: the side file next to the output, named after it (model.drkm, model.o:
 * model.weights; libmodel.a: model.weights, as its header), malloc'ed. */
static char *weights_path(const options_t *o, bool host_out) {
  bool lib = strcmp(o->emit, "lib") == 0;
  char *dflt = o->output ? NULL : default_output(o->input, lib ? ".a" : host_out ? ".o" : ".drkm");
  const char *path = o->output ? o->output : dflt;
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  char *stem = host_out ? (o->name ? strdup(o->name)
                                   : drk_host_name_from_path(lib && strncmp(base, "lib", 3) == 0 && base[3] ? base + 3 : base))
                        : default_output(base, "");
  size_t dir = (size_t)(base - path);
  char *out = malloc(dir + strlen(stem) + 16);
  memcpy(out, path, dir);
  sprintf(out + dir, "%s.weights", stem);
  free(stem);
  free(dflt);
  return out;
}

/* The pipeline up to the stage --emit needs (and plan-memory for --report), then the output. */
/* --dynamic: drk_dynamic_build (pipeline/dynamic.h) makes the module. */
static int compile_dynamic(options_t *o, bool host_out, char *wpath, drk_diag_t *d) {
  if (host_out || strcmp(o->emit, "module") != 0 || wpath) {
    free(wpath);
    fprintf(stderr, "drkc: error: not implemented: --dynamic writes a module (--emit=module, no -c, no "
                    "--weights=external)\n");
    return 2;
  }
  if (!has_suffix(o->input, ".onnx") && !has_suffix(o->input, ".drkg")) {
    fprintf(stderr, "drkc: error: --dynamic needs a graph (.onnx or .drkg), not '%s'\n", o->input);
    return 1;
  }
  char *dflt_out = !o->output ? default_output(o->input, ".drkm") : NULL;
  bool writable = output_writable(o->output ? o->output : dflt_out);
  free(dflt_out);
  if (!writable || output_is_input(o->output, o->input)) return 1;
  if (o->c.require_tuned) {
    fprintf(stderr, "drkc: error: not implemented: --require-tuned with --dynamic (--db applies to every bucket's "
                    "kernels, whose workload keys hold the bucket's shapes)\n");
    return 2;
  }
  drk_search_tuned_t *tuned = NULL;
  if (!db_attach(&o->c, &tuned)) return 1;
  hash_job_t hj = {.path = o->input};
  hash_main(&hj);
  hj.done = true;
  o->c.model_hash = hash_join;
  o->c.model_hash_ctx = &hj;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  void *data = NULL;
  size_t size = 0, kernels = 0;
  int rc = 1;
  if (drk_dynamic_build(&o->c, o->input, &data, &size, &kernels, d)) {
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    rc = write_result(o, data, size, false, ".drkm", kernels, sec);
  }
  free(data);
  drk_search_tuned_close(tuned);
  return rc;
}

static int compile(options_t *o) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  /* -c, --emit=obj|lib: the module, then wrapped for the host (write_host_outputs) */
  bool host_out = strcmp(o->emit, "obj") == 0 || strcmp(o->emit, "lib") == 0;
  const drk_emit_kind_t *ek = drk_emit_kind_find(host_out ? "module" : o->emit);
  drk_host_arch_t harch;
  if (o->host && !drk_host_parse(o->host, &harch)) {
    fprintf(stderr, "drkc: error: unknown --host '%s' (x86_64-linux-gnu, aarch64-linux-gnu)\n", o->host);
    return 2;
  }
  if (!host_out && (o->host || o->name)) {
    fprintf(stderr, "drkc: error: --host and --name apply to host objects (-c, --emit=obj, --emit=lib)\n");
    return 2;
  }
  if (host_out && o->name && !drk_host_name_ok(o->name)) {
    fprintf(stderr, "drkc: error: --name=%s: the C API's name must be a C identifier\n", o->name);
    return 2;
  }
  if (host_out && o->output && strcmp(o->output, "-") == 0) {
    fprintf(stderr, "drkc: error: --emit=%s writes a file and its header; give -o FILE\n", o->emit);
    return 2;
  }
  char *wpath = NULL;
  if (o->external_weights) {
    if (!host_out && strcmp(o->emit, "module") != 0) {
      fprintf(stderr, "drkc: error: --weights=external applies to modules and host objects (--emit=module, obj, lib)\n");
      return 2;
    }
    if (o->output && strcmp(o->output, "-") == 0) {
      fprintf(stderr, "drkc: error: --weights=external writes a side file next to the output; give -o FILE\n");
      return 2;
    }
    wpath = weights_path(o, host_out);
    const char *wb = strrchr(wpath, '/');
    o->c.weights_file = wb ? wb + 1 : wpath;
    if (output_is_input(wpath, o->input)) {
      fprintf(stderr, "drkc: error: the weights file %s would overwrite the input model\n", wpath);
      free(wpath);
      return 1;
    }
  }
  if (!ek) {
    free(wpath);
    fprintf(stderr, "drkc: error: unknown --emit kind '%s' (known: %s | obj | lib)\n", o->emit, emit_names());
    return 2;
  }
  if (o->c.buckets && !o->c.dynamic) {
    free(wpath);
    fprintf(stderr, "drkc: error: --buckets lists the sizes of --dynamic dims; give --dynamic too\n");
    return 2;
  }
  if (o->c.dynamic) return compile_dynamic(o, host_out, wpath, &d);
  if (has_suffix(o->input, ".drkt")) {
    if (strcmp(o->emit, "graph") == 0) {
      fprintf(stderr, "drkc: error: --emit=graph needs a graph (.onnx or .drkg); '%s' is a tile module\n", o->input);
      return 1;
    }
    return compile_tile_module(o, &d);
  }
  if (!has_suffix(o->input, ".onnx") && !has_suffix(o->input, ".drkg")) {
    fprintf(stderr, "drkc: error: '%s': unknown input kind (expected .onnx, .drkg or .drkt)\n", o->input);
    return 1;
  }
  if (output_is_input(o->output, o->input)) {
    fprintf(stderr, "drkc: error: -o %s is the input model; name another output file\n", o->output);
    return 1;
  }
  char *dflt_out = !o->output && !ek->text ? default_output(o->input, ek->ext) : NULL;
  bool writable = output_writable(o->output ? o->output : dflt_out);
  free(dflt_out);
  if (!writable) return 1;
  if (!load_schedules(o->schedules_path, &o->schedules, &d)) return 1;
  o->c.schedules = o->schedules.n ? &o->schedules : NULL;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  hash_job_t hj = {.path = o->input};
  bool module = strcmp(ek->kind, "module") == 0;
  if (module) {
    hj.started = pthread_create(&hj.thread, NULL, hash_main, &hj) == 0;
    if (!hj.started) hash_main(&hj), hj.done = true; /* no thread: hash here */
    o->c.model_hash = hash_join;
    o->c.model_hash_ctx = &hj;
  }
  drk_search_tuned_t *tuned = NULL;
  if (!db_attach(&o->c, &tuned)) {
    hash_join(&hj);
    return 1;
  }
  o->c.fallback_targets = module ? o->fallback : 0; /* modules (and host objects) only */
  drk_pipeline_t *p = drk_pipeline_create(&o->c, o->input, NULL, ek->kind, &d);
  const char *last = ek->after;
  if (o->c.report && drk_pipeline_stage_index(last) < drk_pipeline_stage_index("plan-memory") &&
      strcmp(ek->kind, "graph") != 0)
    last = "plan-memory";
  bool lowers = drk_pipeline_stage_index(last) >= drk_pipeline_stage_index("lower");
  if (tuned && !lowers) fprintf(stderr, "drkc: note: --db has no effect on --emit=%s (taken before lowering)\n", ek->kind);
  void *data = NULL;
  size_t size = 0;
  int rc = 1;
  if (p && (!tuned || !lowers || (drk_pipeline_run_to(p, "lower") && db_check(&o->c, tuned, drk_pipeline_lowered(p)))) &&
      drk_pipeline_run_to(p, last) && drk_pipeline_output(p, ek->kind, &data, &size)) {
    hash_join(&hj);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    /* the weights first: a module is never left without its side file */
    void *wdata = NULL;
    size_t wsize = 0;
    if (wpath && hj.ok) {
      if (!drk_pipeline_output(p, "weights", &wdata, &wsize)) {
        fprintf(stderr, "drkc: error: no weights blob for --weights=external\n");
        hj.ok = false;
      } else if (write_result_to(o, wpath, wdata, wsize, true, NULL, 0, sec) != 0) {
        hj.ok = false;
      } else if (!o->quiet) {
        fprintf(stderr, "drkc: wrote %s: the weights, %.1f MB\n", wpath, (double)wsize / 1e6);
      }
      free(wdata);
    }
    if (host_out && hj.ok) rc = write_host_outputs(o, data, size, drk_pipeline_kernel_count(p), sec, &d);
    else if (!module || hj.ok) rc = write_result(o, data, size, ek->text, ek->ext, drk_pipeline_kernel_count(p), sec);
    free(data);
  }
  hash_join(&hj);
  if (p && o->c.time_stages) drk_pipeline_print_times(p, stderr);
  drk_pipeline_destroy(p);
  drk_search_tuned_close(tuned);
  free(wpath);
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
  bool npy, check, portable;
  const char *target; /* --target for --device=cuda: default the device's own */
  const char *schedules_path;
  drk_schedules_t schedules;
  drk_compile_options_t c;
} run_options_t;

/* Random input for a graph input with a static shape: floats uniform in [-1, 1), integers in
 * [0, 4) or below the smallest axis a Gather indexes with them (token type ids: [0, 2)),
 * bools fair coins. */
static bool random_input(const drk_graph_t *g, const drk_value_t *v, uint64_t *rng, drk_tensor_t *out, drk_diag_t *d) {
  int64_t dims[DRK_MAX_RANK];
  if (v->shape.rank < 0 || v->shape.rank > DRK_MAX_RANK) {
    drk_diag_error(d, drk_loc_none, "input '%s' has unknown rank: give it with --input %s=FILE", v->name, v->name);
    return false;
  }
  for (int i = 0; i < v->shape.rank; i++) {
    if (v->shape.dims[i].sym) {
      drk_diag_error(d, drk_loc_none, "input '%s' has symbolic dim '%s': give it with --input %s=FILE or --bind=%s=N",
                     v->name, v->shape.dims[i].sym, v->name, v->shape.dims[i].sym);
      return false;
    }
    dims[i] = v->shape.dims[i].size;
  }
  if (!drk_tensor_alloc(out, v->dtype, v->shape.rank, dims)) {
    drk_diag_error(d, drk_loc_none, "input '%s': cannot allocate", v->name);
    return false;
  }
  int64_t n = drk_tensor_numel(out), bound = drk_graph_index_bound(g, v, 4);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = drk_splitmix64(rng);
    if (drk_dtype_is_float(v->dtype))
      drk_tensor_set_f64(out, i, (double)(r >> 11) * 0x1.0p-52 - 1.0);
    else if (v->dtype == DRK_DT_BOOL)
      drk_tensor_set_i64(out, i, (int64_t)(r & 1));
    else
      drk_tensor_set_i64(out, i, (int64_t)(r % (uint64_t)bound));
  }
  return true;
}

static bool file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static bool read_input_file(const char *path, drk_dtype_t expect, drk_tensor_t *out, drk_diag_t *d) {
  if (has_suffix(path, ".npy")) return drk_tensor_read_npy(path, out, d);
  return drk_tensor_read_pb_expect(path, expect, out, d);
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
      char want[256], got[256];
      size_t a = 0, b = 0;
      for (int i = 0; i < v->shape.rank && a + 40 < sizeof want; i++)
        a += v->shape.dims[i].sym ? (size_t)snprintf(want + a, sizeof want - a, "%s%.30s", i ? ", " : "", v->shape.dims[i].sym)
                                  : (size_t)snprintf(want + a, sizeof want - a, "%s%lld", i ? ", " : "",
                                                     (long long)v->shape.dims[i].size);
      for (int i = 0; i < t->rank && b + 24 < sizeof got; i++)
        b += (size_t)snprintf(got + b, sizeof got - b, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
      want[a] = got[b] = 0;
      drk_diag_error(d, drk_loc_none, "%s: input '%s' has shape [%s]; the model expects [%s]", src, v->name, got, want);
      return false;
    }
  }
  return true;
}

/* Tolerance of --check, as ‖gpu − ref‖ / ‖ref‖ (DESIGN.md, "Correctness oracles"): f32 math
 * that reorders reductions 1e-4, TF32 5e-4, f16/bf16 1e-2, fp8 6e-2; integers exact. The
 * reference is the model as given (before the precision policy), so a float output computed
 * in a lower precision gets that precision's tolerance. */
static double check_tolerance(drk_dtype_t t, const run_options_t *ro) {
  /* --accuracy-budget: the budget the choice was measured against (on the GPU not below f32's
   * 1e-4: its kernels reorder reductions and fuse ops the interpreter rounds one by one) */
  if (ro->c.accuracy_budget > 0 && drk_dtype_is_float(t)) {
    bool gpu = strncmp(ro->device, "cuda", 4) == 0;
    return gpu && ro->c.accuracy_budget < 1e-4 ? 1e-4 : ro->c.accuracy_budget;
  }
  bool half = ro->c.precision == DRK_PREC_FP16 || ro->c.precision == DRK_PREC_BF16 || ro->c.matmul == DRK_MMP_MEDIUM;
  bool tf32 = drk_precision_allow_tf32(&(drk_precision_options_t){.precision = ro->c.precision, .matmul = ro->c.matmul});
  if (ro->c.precision == DRK_PREC_FP8 && drk_dtype_is_float(t)) return 6e-2;
  if (half && (t == DRK_DT_F32 || t == DRK_DT_F64)) return 1e-2;
  switch (t) {
    case DRK_DT_F64: return 1e-5;
    case DRK_DT_F32: return tf32 ? 5e-4 : 1e-4;
    case DRK_DT_F16: case DRK_DT_BF16: return 1e-2;
    case DRK_DT_F8E4M3: case DRK_DT_F8E5M2: return 6e-2;
    default: return 0;
  }
}

static bool rt_ok(drk_status_t st, const char *what, drk_diag_t *d) {
  if (!st) return true;
  drk_diag_error(d, drk_loc_none, "%s: %s", what, drk_status_message(st));
  drk_status_destroy(st);
  return false;
}

/* The target for the runtime's device: sm_90 GPUs get sm_90a code (wgmma, TMA). */
static bool device_targets(drk_runtime_t *rt, unsigned *out_targets, drk_diag_t *d) {
  char arch[32];
  snprintf(arch, sizeof arch, "%s", drk_runtime_device_arch(rt));
  char *colon = strchr(arch, ':'); /* gfx942:sramecc+:xnack- */
  if (colon) *colon = 0;
  /* sm_90 becomes sm_90a in drk_target_resolve (unless --portable) */
  drk_diag_t quiet;
  drk_diag_init(&quiet, NULL);
  if (!drk_target_parse_list(arch, out_targets, &quiet)) {
    drk_diag_error(d, drk_loc_none, "the GPU is %s (%s), which drkc does not target (known: %s)",
                   drk_runtime_device_name(rt), arch, drk_target_known_list());
    return false;
  }
  return true;
}

/* Runs the rest of pipeline p (compiling g for the runtime's device) and the module on
 * `inputs`; returns its outputs (caller frees each). */
static bool run_on_gpu(drk_pipeline_t *p, const drk_graph_t *g, drk_runtime_t *rt, drk_tensor_t *inputs,
                       drk_tensor_t *out_outputs, drk_diag_t *d) {
  void *bytes = NULL;
  size_t size = 0;
  drk_module_t *m = NULL;
  drk_session_t *s = NULL;
  size_t no = g->n_outputs, bound = 0;
  bool ok = drk_pipeline_run_to(p, "package") && drk_pipeline_output(p, "module", &bytes, &size) &&
            rt_ok(drk_module_load_memory(NULL, bytes, size, &m), "loading the module", d) &&
            rt_ok(drk_session_create(rt, m, &s), "preparing the module", d);
  for (size_t i = 0; ok && i < g->n_inputs; i++)
    ok = rt_ok(drk_session_bind_input(s, i, inputs[i].data, inputs[i].nbytes, DRK_MEMORY_HOST), "binding an input", d);
  for (size_t i = 0; ok && i < no; i++) {
    const drk_value_t *v = g->outputs[i];
    int64_t dims[DRK_MAX_RANK];
    for (int k = 0; k < v->shape.rank; k++) dims[k] = v->shape.dims[k].size;
    ok = drk_tensor_alloc(&out_outputs[i], v->dtype, v->shape.rank, dims);
    if (!ok) drk_diag_error(d, drk_loc_none, "output '%s': cannot allocate", v->name);
    else bound++;
    ok = ok && rt_ok(drk_session_bind_output(s, i, out_outputs[i].data, out_outputs[i].nbytes, DRK_MEMORY_HOST),
                     "binding an output", d);
  }
  ok = ok && rt_ok(drk_session_run(s), "running the model", d);
  if (!ok)
    for (size_t i = 0; i < bound; i++) drk_tensor_free(&out_outputs[i]);
  drk_session_destroy(s);
  drk_module_destroy(m);
  free(bytes);
  return ok;
}

static int run_model(run_options_t *ro) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  bool gpu = strcmp(ro->device, "cuda") == 0 || strncmp(ro->device, "cuda:", 5) == 0;
  if (!gpu && strcmp(ro->device, "cpu") != 0) {
    fprintf(stderr, "drkc: error: unknown device '%s' (cpu, cuda, cuda:N)\n", ro->device);
    return 2;
  }
  if (!load_schedules(ro->schedules_path, &ro->schedules, &d)) return 1;
  drk_compile_options_t *o = &ro->c;
  o->schedules = ro->schedules.n ? &ro->schedules : NULL;
  o->command_line = "drkc run";
  drk_diag_t quiet;
  drk_diag_init(&quiet, NULL);
  drk_target_parse_list("sm_90", &o->targets, &quiet); /* CPU runs apply the policy as for sm_90 */
  /* the inputs' sizes, for an import that unrolls over a symbolic length (LSTM): read before the
   * model, whose dims are bound from the same inputs below */
  char *hint = o->bind ? NULL : drk_pipeline_import_hint(ro->model, ro->input_dir, (const char *const *)ro->named_inputs, ro->n_named);
  o->import_hint = hint;
  drk_pipeline_t *p = drk_pipeline_create(o, ro->model, NULL, "module", &d);
  drk_graph_t *g = p && drk_pipeline_run_to(p, "verify") ? drk_pipeline_graph(p) : NULL;
  o->import_hint = NULL; /* read by the import, done now */
  free(hint);
  if (!g) {
    drk_pipeline_destroy(p);
    return 1;
  }
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
      if (!src) { /* a directory that lacks an input is a mistake, not a request for random data */
        struct stat st;
        if (stat(ro->input_dir, &st) != 0 || !S_ISDIR(st.st_mode))
          drk_diag_error(&d, drk_loc_none, "--input-dir %s: %s", ro->input_dir,
                         stat(ro->input_dir, &st) != 0 ? strerror(errno) : "not a directory");
        else
          drk_diag_error(&d, drk_loc_none,
                         "--input-dir %s has no input_%zu.pb or input_%zu.npy for input %zu '%s' (give it with "
                         "--input %s=FILE, or leave out --input-dir for random inputs)",
                         ro->input_dir, i, i, i, v->name, v->name);
        goto done;
      }
    }
    bool ok = src ? read_input_file(src, v->dtype, &inputs[i], &d) && check_input(v, &inputs[i], src, &d)
                  : random_input(g, v, &rng, &inputs[i], &d);
    if (!ok) {
      drk_tensor_free(&inputs[i]); /* read but refused: not among the `loaded` freed below */
      goto done;
    }
    loaded++;
  }
  /* The optimizations (BN folding, the precision policy) come after the reference (the
   * model as given) is taken; with --quantize=int4-weight the reference is the quantized
   * model (its 4-bit weights dequantized exactly), so --check measures the kernels. */
  const char *ref_stage = o->quantize_group > 0 ? "quantize" : "verify-canonical";
  if (ro->check && o->quantize_group > 0)
    fprintf(stderr, "drkc: note: --check compares with the model after --quantize=int4-weight (its 4-bit weights "
            "dequantized), not with the float model\n");
  if (!drk_pipeline_bind_from_inputs(g, inputs, &d) || !drk_pipeline_run_to(p, ref_stage)) goto done;
  drk_tensor_t *ref = NULL;
  drk_runtime_t *rt = NULL;
  drk_search_tuned_t *tuned = NULL;
  bool ran = false;
  if (gpu) {
    drk_runtime_options_t rto = {.device = ro->device[4] == ':' ? atoi(ro->device + 5) : 0};
    if (!rt_ok(drk_runtime_create(&rto, &rt), "starting the GPU runtime", &d) ||
        !(ro->target ? drk_target_parse_list(ro->target, &o->targets, &d) : device_targets(rt, &o->targets, &d)) ||
        !(o->targets = drk_target_resolve(o->targets, ro->portable)) ||
        !db_attach(o, &tuned))
      goto gpu_done;
  } else if (o->db || o->require_tuned) {
    fprintf(stderr, "drkc: note: --db and --require-tuned apply to GPU runs (--device=cuda); ignored\n");
  }
  if (ro->check) {
    ref = calloc(no + 1, sizeof *ref);
    if (!drk_interp_run(g, inputs, ref, &d)) goto gpu_done;
  }
  if (!drk_pipeline_run_to(p, "verify-layout")) goto gpu_done;
  ran = gpu ? (!tuned || (drk_pipeline_run_to(p, "lower") && db_check(o, tuned, drk_pipeline_lowered(p)))) &&
                  run_on_gpu(p, g, rt, inputs, outputs, &d)
            : drk_interp_run(g, inputs, outputs, &d);
  if (ran && ref) {
    int failed = 0;
    for (size_t i = 0; i < no; i++) {
      double tol = check_tolerance(g->outputs[i]->dtype, ro);
      drk_check_t ck; /* relative error, or absolute where the reference is ~0 everywhere */
      drk_interp_check(&outputs[i], &ref[i], tol, &ck);
      failed += !ck.pass;
      char line[1024];
      char name[256]; /* the model's name, control characters escaped */
      drk_escape(g->outputs[i]->name, name, sizeof name);
      drk_interp_check_line(&ck, i, name, tol, line, sizeof line);
      printf("%s\n", line);
    }
    if (failed) {
      for (size_t i = 0; i < no; i++) drk_tensor_free(&outputs[i]);
      ran = false;
    }
  }
gpu_done:
  if (ref) {
    for (size_t i = 0; i < no; i++) drk_tensor_free(&ref[i]);
    free(ref);
  }
  drk_runtime_destroy(rt);
  drk_search_tuned_close(tuned);
  if (!ran) goto done;
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
    char name[256];
    drk_escape(g->outputs[i]->name, name, sizeof name);
    printf("output %zu '%s': %s[", i, name, drk_dtype_name(t->dtype));
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
  drk_pipeline_destroy(p);
  return rc;
}

/* Parses one of the compile options at argv[*i]: 1 taken, 0 not one of them, -1 bad value
 * (reported). */
int drkc_parse_compile_option(int argc, char **argv, int *i, drk_compile_options_t *c, const char **schedules_path) {
  static const char *const o_jobs[] = {"--jobs", "-j", NULL}, *const o_bind[] = {"--bind", NULL}, *const o_mmp[] = {"--matmul-precision", NULL},
                           *const o_prec[] = {"--precision", NULL}, *const o_fusion[] = {"--fusion-aggressiveness", NULL},
                           *const o_depth[] = {"--max-graph-depth", NULL}, *const o_sched[] = {"--schedule", NULL},
                           *const o_scheds[] = {"--schedules", NULL},
                           *const o_layout[] = {"--layout", NULL}, *const o_db[] = {"--db", NULL},
                           *const o_budget[] = {"--accuracy-budget", NULL}, *const o_calib[] = {"--calibration", NULL},
                           *const o_quant[] = {"--quantize", NULL}, *const o_group[] = {"--group-size", NULL};
  const char *v;
  char *end;
  if ((v = drkc_opt_value(argc, argv, i, o_bind))) {
    c->bind = v;
  } else if (strcmp(argv[*i], "--time-stages") == 0) {
    c->time_stages = true;
  } else if (strcmp(argv[*i], "--no-cache") == 0) {
    c->no_cache = true;
  } else if (strcmp(argv[*i], "--require-tuned") == 0) {
    c->require_tuned = true;
  } else if ((v = drkc_opt_value(argc, argv, i, o_db))) {
    if (!*v) {
      drkc_usage_error("--db needs a file or a URL (%s)", "the kernel database drkc tune writes");
      return -1;
    }
    c->db = v;
  } else if ((v = drkc_opt_value(argc, argv, i, o_jobs))) {
    c->jobs = (int)strtol(v, &end, 10);
    if (!*v || *end || c->jobs < 1) {
      drkc_usage_error("--jobs: a number >= 1, not '%s'", v);
      return -1;
    }
  } else if ((v = drkc_opt_value(argc, argv, i, o_mmp))) {
    if (!drk_matmul_precision_parse(v, &c->matmul)) {
      drkc_usage_error("--matmul-precision: highest, high or medium, not '%s'", v);
      return -1;
    }
  } else if ((v = drkc_opt_value(argc, argv, i, o_prec))) {
    if (!drk_precision_parse(v, &c->precision)) {
      drkc_usage_error("--precision: auto, fp32, tf32, bf16, fp16 or fp8, not '%s'", v);
      return -1;
    }
  } else if ((v = drkc_opt_value(argc, argv, i, o_budget))) {
    if (!drk_precision_budget_parse(v, &c->accuracy_budget)) {
      drkc_usage_error("--accuracy-budget: a relative error > 0 and < 1 (e.g. 1e-2), not '%s'", v);
      return -1;
    }
  } else if ((v = drkc_opt_value(argc, argv, i, o_calib))) {
    if (!*v) {
      drkc_usage_error("--calibration needs a folder (%s)", "input_0.pb ... as drkc run --input-dir reads");
      return -1;
    }
    c->calibration = v;
  } else if ((v = drkc_opt_value(argc, argv, i, o_quant))) {
    /* quantize_group < 0: --group-size came first (docs/precision.md "W4A16") */
    if (strcmp(v, "int4-weight") != 0) {
      drkc_usage_error("--quantize: int4-weight, not '%s'", v);
      return -1;
    }
    c->quantize_group = c->quantize_group < 0 ? -c->quantize_group : c->quantize_group > 0 ? c->quantize_group : 128;
  } else if ((v = drkc_opt_value(argc, argv, i, o_group))) {
    long gs = strtol(v, &end, 10);
    if (!*v || *end || gs < 16 || gs % 16 || gs > (1 << 20)) {
      drkc_usage_error("--group-size: a multiple of 16 (16 .. 1048576), not '%s'", v);
      return -1;
    }
    c->quantize_group = c->quantize_group > 0 ? (int)gs : -(int)gs;
  } else if ((v = drkc_opt_value(argc, argv, i, o_layout))) {
    if (!drk_layout_parse(v, &c->layout)) {
      drkc_usage_error("--layout: auto, nchw or nhwc, not '%s'", v);
      return -1;
    }
  } else if ((v = drkc_opt_value(argc, argv, i, o_fusion))) {
    c->fusion_level = (int)strtol(v, &end, 10);
    if (!*v || *end || c->fusion_level < 0 || c->fusion_level > 3) {
      drkc_usage_error("--fusion-aggressiveness: 0, 1, 2 or 3, not '%s'", v);
      return -1;
    }
    c->fusion_set = true;
  } else if ((v = drkc_opt_value(argc, argv, i, o_sched))) {
    char err[256];
    if (!drk_sched_knobs_parse(v, &c->knobs, err, sizeof err)) {
      drkc_usage_error("--schedule: %s", err);
      return -1;
    }
  } else if ((v = drkc_opt_value(argc, argv, i, o_scheds))) {
    if (!*v) {
      drkc_usage_error("--schedules needs a file (%s)", "the text --emit=schedules prints");
      return -1;
    }
    *schedules_path = v;
  } else if ((v = drkc_opt_value(argc, argv, i, o_depth))) {
    c->max_depth = (int)strtol(v, &end, 10);
    if (!*v || *end || c->max_depth < 1) {
      drkc_usage_error("--max-graph-depth: a number >= 1, not '%s'", v);
      return -1;
    }
    if (!c->fusion_set) c->fusion_level = 2;
    c->fusion_set = true;
  } else {
    return 0;
  }
  return 1;
}

/* --accuracy-budget goes with --precision=auto (which it makes choose per op group) and
 * leaves --matmul-precision to the choice; --calibration needs a budget (drkc.h). */
int drkc_check_budget_options(const drk_compile_options_t *c) {
  if (c->accuracy_budget > 0 && c->precision != DRK_PREC_AUTO)
    return drkc_usage_error("--accuracy-budget chooses the precision per op: it needs --precision=auto, not --precision=%s",
                            drk_precision_name(c->precision));
  if (c->accuracy_budget > 0 && c->matmul != DRK_MMP_HIGHEST)
    return drkc_usage_error("--accuracy-budget chooses tf32 and bf16 matmuls itself: leave out --matmul-precision=%s",
                            drk_matmul_precision_name(c->matmul));
  if (c->calibration && !(c->accuracy_budget > 0))
    return drkc_usage_error("--calibration=%s needs --precision=auto --accuracy-budget=E", c->calibration);
  return 0;
}

static int main_run(int argc, char **argv) {
  run_options_t ro = {.device = "cpu", .seed = 0};
  static const char *const o_device[] = {"--device", NULL}, *const o_indir[] = {"--input-dir", NULL},
                           *const o_outdir[] = {"--output-dir", NULL}, *const o_seed[] = {"--seed", NULL},
                           *const o_input[] = {"--input", NULL}, *const o_target[] = {"--target", NULL};
  for (int i = 2; i < argc; i++) {
    const char *v;
    int k;
    if ((v = drkc_opt_value(argc, argv, &i, o_device))) ro.device = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_indir))) ro.input_dir = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_outdir))) ro.output_dir = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_seed))) {
      char *end;
      ro.seed = strtoull(v, &end, 10);
      if (!*v || *end) return drkc_usage_error("--seed needs a number, got '%s'", v);
    } else if ((v = drkc_opt_value(argc, argv, &i, o_input))) {
      if (!strchr(v, '=')) return drkc_usage_error("--input needs NAME=FILE, got '%s'", v);
      if (ro.n_named == (int)DRK_ARRAY_LEN(ro.named_inputs)) return drkc_usage_error("too many --input options%s", "");
      ro.named_inputs[ro.n_named++] = v;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(usage_text, drk_target_known_list(), emit_names(), stage_names());
      return 0;
    } else if (strcmp(argv[i], "--npy") == 0) ro.npy = true;
    else if (strcmp(argv[i], "--check") == 0) ro.check = true;
    else if (strcmp(argv[i], "--portable") == 0) ro.portable = true;
    else if ((v = drkc_opt_value(argc, argv, &i, o_target))) ro.target = v;
    else if ((k = drkc_parse_compile_option(argc, argv, &i, &ro.c, &ro.schedules_path))) {
      if (k < 0) return 2;
    } else if (argv[i][0] == '-') return drkc_usage_error("unknown option '%s' for 'drkc run'", argv[i]);
    else if (ro.model) return drkc_usage_error("more than one model given ('%s')", argv[i]);
    else ro.model = argv[i];
  }
  if (!ro.model) return drkc_usage_error("drkc run needs a MODEL%s", "");
  if (drkc_check_budget_options(&ro.c)) return 2;
  if (ro.c.jobs > 0) drk_interp_set_threads(ro.c.jobs); /* else DRK_INTERP_THREADS or every CPU */
  int rc = run_model(&ro);
  drk_schedules_free(&ro.schedules);
  return rc;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "run") == 0) return main_run(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "tune") == 0) return drkc_tune_main(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "db") == 0) return drk_search_db_main(argc - 1, argv + 1);
  if (argc >= 2 && strcmp(argv[1], "report") == 0) return drkc_report_main(argc, argv);
  options_t o = {.emit = "module", .targets_arg = "sm_90"};
  static const char *const o_target[] = {"--target", "-arch", "--gpu-architecture", "--arch", NULL},
                           *const o_emit[] = {"--emit", NULL}, *const o_dump[] = {"--dump-after", NULL},
                           *const o_out[] = {"-o", "--output", NULL}, *const o_shapes[] = {"--shapes-from", NULL},
                           *const o_freeze[] = {"--freeze-input", NULL}, *const o_host[] = {"--host", NULL},
                           *const o_name[] = {"--name", NULL}, *const o_weights[] = {"--weights", NULL},
                           *const o_dyn[] = {"--dynamic", NULL}, *const o_buckets[] = {"--buckets", NULL};
  for (int i = 1; i < argc; i++) {
    const char *v;
    int k;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(usage_text, drk_target_known_list(), emit_names(), stage_names());
      return 0;
    }
    if (strcmp(argv[i], "--version") == 0) {
      drkc_print_version(stdout);
      return 0;
    }
    if (strcmp(argv[i], "-v") == 0) o.c.verbose = 1;
    else if (strcmp(argv[i], "-q") == 0) o.quiet = true;
    else if (strcmp(argv[i], "--portable") == 0) o.portable = true;
    else if (strcmp(argv[i], "-c") == 0) o.emit = "obj";
    else if ((v = drkc_opt_value(argc, argv, &i, o_host))) o.host = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_name))) o.name = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_weights))) {
      if (strcmp(v, "external") != 0 && strcmp(v, "embedded") != 0)
        return drkc_usage_error("--weights: embedded or external, not '%s'", v);
      o.external_weights = strcmp(v, "external") == 0;
    }
    else if ((v = drkc_opt_value(argc, argv, &i, o_target))) o.targets_arg = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_emit))) o.emit = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_dump))) o.c.dump_after = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_out))) o.output = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_shapes))) o.c.shapes_from = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_dyn))) o.c.dynamic = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_buckets))) o.c.buckets = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_freeze))) {
      if (o.c.n_freeze == (int)DRK_ARRAY_LEN(o.freeze)) return drkc_usage_error("too many --freeze-input options%s", "");
      o.freeze[o.c.n_freeze++] = v;
    }
    else if (strcmp(argv[i], "--report") == 0) o.c.report = stderr;
    else if ((k = drkc_parse_compile_option(argc, argv, &i, &o.c, &o.schedules_path))) {
      if (k < 0) return 2;
    }
    else if (argv[i][0] == '-' && argv[i][1]) return drkc_usage_error("unknown option '%s'", argv[i]);
    else if (o.input) return drkc_usage_error("more than one input given ('%s')", argv[i]);
    else o.input = argv[i];
  }
  if (!o.input) return drkc_usage_error("no input file%s", "");
  if (drkc_check_budget_options(&o.c)) return 2;
  o.c.freeze = o.freeze;
  o.c.progress = !o.quiet && !o.c.verbose;

  drk_diag_t d;
  drk_diag_init(&d, stderr);
  if (!drk_target_parse_list(o.targets_arg, &o.c.targets, &d)) return 1;
  o.fallback = drk_target_fallback(o.c.targets, o.portable);
  o.c.targets = drk_target_resolve(o.c.targets, o.portable);
  if (o.c.dump_after && strcmp(o.c.dump_after, "all") != 0) {
    int si = drk_pipeline_stage_index(o.c.dump_after);
    size_t n;
    if (si < 0 || !drk_pipeline_stages(&n)[si].dump) {
      fprintf(stderr, "drkc: error: %s '%s' for --dump-after (stages with an IR to print: %s, all)\n",
              si < 0 ? "unknown stage" : "nothing to print after stage", o.c.dump_after, stage_names());
      return 2;
    }
  }
  size_t cl = 1;
  for (int i = 0; i < argc; i++) cl += strlen(argv[i]) + 1;
  char *cmdline = calloc(1, cl);
  for (int i = 0; i < argc; i++) {
    if (i) strcat(cmdline, " ");
    strcat(cmdline, argv[i]);
  }
  o.c.command_line = cmdline;
  int rc = compile(&o);
  drk_schedules_free(&o.schedules);
  free(cmdline);
  return rc;
}
