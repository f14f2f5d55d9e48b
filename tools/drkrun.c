/* drkrun: loads a drkc module and runs it, like trtexec.
 *
 *   drkrun MODULE [--input-dir DIR] [--output-dir OUT] [--warmup N] [--iters N] [--profile]
 *          [--device N] [--latencies FILE]
 *
 * Inputs come from DIR/input_<i>.pb (ONNX TensorProto) or DIR/input_<i>.bin (raw bytes of
 * exactly the tensor's size); without --input-dir they are random (fixed seed). Outputs go
 * to OUT/output_<i>.pb (or .bin when built without the ONNX frontend). Reports the median,
 * min, p90 and mean latency of a run (GPU events, input copies + kernels + output copies),
 * then of resident runs (inputs and outputs left on the GPU: kernels only) and, with
 * --profile, per-kernel times. --latencies writes each resident run's latency (ms, one a line,
 * in run order) to FILE, to see drifts that a median hides. Exit status: 0 ok, 1 runtime error (including no
 * GPU driver), 2 usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#ifdef DRK_HAVE_GIT_HASH
#include "drk_git_hash.h"
#else
#define DRK_GIT_HASH "unknown"
#endif
#include "backends/package/fatbin.h"
#include "backends/package/module.h"
#include "drk/drkrt.h"
#ifdef DRK_HAVE_TENSOR_IO
#include "frontend/onnx/tensor_io.h"
#include "ir/graph.h"
#endif

static const char usage_text[] =
    "usage: drkrun MODULE [options]      run a compiled module (.drkm) on the GPU and time it\n"
    "       drkrun MODULE --list         what the module holds, with each kernel's precision (needs no GPU)\n"
    "       drkrun --help | --version\n"
    "options (--opt V and --opt=V alike):\n"
    "  --input-dir DIR     inputs from DIR/input_N.pb (default: random inputs, fixed seed)\n"
    "  --output-dir OUT    write the outputs as OUT/output_N.pb (default: not written)\n"
    "  --warmup N          untimed runs first (default 10)\n"
    "  --iters N           timed runs (default 100)\n"
    "  --profile           also time each kernel (trtexec-like table)\n"
    "  --device N          the CUDA device (default 0)\n"
    "  --weights FILE      the weights of a module compiled with --weights=external (default:\n"
    "                      the file the module names, next to the module)\n"
    "  --latencies FILE    write every timed run's latency (ms), a line each\n"
    "  --shapes DIMS       a module with shape buckets (drkc --dynamic): the sizes of its dynamic\n"
    "                      dims for random or .bin inputs, e.g. --shapes batch=3,seq=100 (default:\n"
    "                      each range's end; .pb inputs give their own shapes)\n";

static int usage(void) {
  fputs(usage_text, stderr);
  return 2;
}

/* --name V or --name=V: the value (argv[*i] advanced past it), or NULL when argv[*i] is not
 * this option; *missing is set when it is, without a value. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, int *missing) {
  size_t n = strlen(name);
  const char *a = argv[*i];
  if (strncmp(a, name, n) != 0) return NULL;
  if (a[n] == '=') return a + n + 1;
  if (a[n] != 0) return NULL;
  if (*i + 1 >= argc) {
    *missing = 1;
    return NULL;
  }
  return argv[++*i];
}

/* A whole non-negative number, or -1. */
static int count_arg(const char *v) {
  char *end;
  long x = strtol(v, &end, 10);
  return *v && !*end && x >= 0 && x <= 1000000000 ? (int)x : -1;
}

static int fail(drk_status_t st, const char *what) {
  fflush(stdout);
  fprintf(stderr, "drkrun: error: %s: %s\n", what, drk_status_message(st));
  drk_status_destroy(st);
  return 1;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static float percentile(float *v, size_t n, double p) {
  qsort(v, n, sizeof *v, cmp_float);
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

static int file_exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0;
}

static int read_raw(const char *path, void *dst, size_t size) {
  FILE *f = fopen(path, "rb");
  if (!f) { fprintf(stderr, "drkrun: error: %s: %s\n", path, strerror(errno)); return 0; }
  size_t got = fread(dst, 1, size, f);
  int extra = fgetc(f) != EOF;
  fclose(f);
  if (got != size || extra) {
    fprintf(stderr, "drkrun: error: %s: expected exactly %zu bytes\n", path, size);
    return 0;
  }
  return 1;
}

/* Fills a tensor with finite random values of its dtype (ONNX codes). */
static void fill_random(void *p, size_t size, int dtype, unsigned *seed) {
  unsigned char *b = p;
  for (size_t i = 0; i < size;) {
    unsigned r = (unsigned)rand_r(seed);
    if (dtype == 1 && i + 4 <= size) {
      float f = (float)((double)r / RAND_MAX * 2.0 - 1.0);
      memcpy(b + i, &f, 4), i += 4;
    } else if ((dtype == 10 || dtype == 16) && i + 2 <= size) {
      unsigned short h = dtype == 10 ? (unsigned short)(0x3800 | (r & 0x3ff) | ((r >> 12 & 1) << 15))
                                     : (unsigned short)(0x3f00 | (r & 0x7f) | ((r >> 12 & 1) << 15));
      memcpy(b + i, &h, 2), i += 2;
    } else if (dtype == 11 && i + 8 <= size) {
      double d = (double)r / RAND_MAX * 2.0 - 1.0;
      memcpy(b + i, &d, 8), i += 8;
    } else {
      b[i++] = (unsigned char)(r & 0x07); /* small non-negative integers, valid as indices */
    }
  }
}

static int load_input(const char *dir, size_t i, const drk_tensor_info_t *info, void *dst) {
  char path[4096];
  snprintf(path, sizeof path, "%s/input_%zu.pb", dir, i);
  if (file_exists(path)) {
#ifdef DRK_HAVE_TENSOR_IO
    drk_diag_t d;
    drk_diag_init(&d, stderr);
    drk_tensor_t t;
    drk_dtype_t want;
    if (!drk_dtype_from_onnx(info->dtype, &want)) want = DRK_DT_COUNT;
    if (!drk_tensor_read_pb_expect(path, want, &t, &d)) return 0;
    int ok = drk_dtype_to_onnx(t.dtype) == info->dtype && t.nbytes == info->size_bytes;
    if (ok) memcpy(dst, t.data, t.nbytes);
    else fprintf(stderr, "drkrun: error: %s: tensor has ONNX dtype %d and %zu bytes, input '%s' needs dtype %d and %llu bytes\n", path,
                 drk_dtype_to_onnx(t.dtype), t.nbytes, info->name, info->dtype, (unsigned long long)info->size_bytes);
    drk_tensor_free(&t);
    return ok;
#else
    fprintf(stderr, "drkrun: error: %s: reading TensorProto .pb files needs the ONNX frontend (frontend/onnx/tensor_io.h), "
                    "which this drkrun was built without; convert the input to raw bytes as input_%zu.bin\n", path, i);
    return 0;
#endif
  }
  snprintf(path, sizeof path, "%s/input_%zu.bin", dir, i);
  if (file_exists(path)) return read_raw(path, dst, (size_t)info->size_bytes);
  fprintf(stderr, "drkrun: error: input %zu ('%s'): neither %s/input_%zu.pb nor %s/input_%zu.bin exists\n", i, info->name, dir, i, dir, i);
  return 0;
}

static int save_output(const char *dir, size_t i, const drk_tensor_info_t *info, void *src) {
  char path[4096];
#ifdef DRK_HAVE_TENSOR_IO
  drk_dtype_t dt;
  if (drk_dtype_from_onnx(info->dtype, &dt)) {
    snprintf(path, sizeof path, "%s/output_%zu.pb", dir, i);
    drk_tensor_t t = {0};
    t.dtype = dt;
    t.rank = (int)info->rank;
    for (uint32_t d = 0; d < info->rank; d++) t.dims[d] = info->dims[d];
    t.data = src;
    t.nbytes = (size_t)info->size_bytes;
    drk_diag_t d;
    drk_diag_init(&d, stderr);
    return drk_tensor_write_pb(path, &t, info->name, &d);
  }
#endif
  snprintf(path, sizeof path, "%s/output_%zu.bin", dir, i);
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(src, 1, (size_t)info->size_bytes, f) == info->size_bytes;
  if (f && fclose(f)) ok = 0;
  if (!ok) fprintf(stderr, "drkrun: error: %s: cannot write\n", path);
  return ok;
}

/* --list of a module with buckets: the dims' ranges, then per bucket its sizes, kernels (those
 * whose code is its own image's, and those shared with an earlier bucket), image and arena. */
static void list_buckets(const drk_modfile_t *mf) {
  if (!mf->n_buckets) return;
  uint64_t code = 0;
  for (uint32_t i = 0; i < mf->n_images; i++) code += mf->images[i].size;
  printf("  dynamic dims:");
  for (uint32_t d = 0; d < mf->n_dyn_dims; d++)
    printf(" %s=%lld..%lld", mf->dyn_dims[d].name, (long long)mf->dyn_dims[d].lo, (long long)mf->dyn_dims[d].hi);
  printf("; %u buckets, weights %llu bytes shared by all, code %llu bytes\n", mf->n_buckets,
         (unsigned long long)mf->weights_size, (unsigned long long)code);
  for (uint32_t d = 0; d < mf->n_dyn_dims; d++)
    if (mf->dyn_dims[d].length_input)
      printf("  padded %s masked: input %u ('%s') holds its actual size, written by the runtime\n", mf->dyn_dims[d].name,
             mf->dyn_dims[d].length_input - 1, mf->inputs[mf->dyn_dims[d].length_input - 1].name);
  for (uint32_t b = 0; b < mf->n_buckets; b++) {
    const drk_modfile_bucket_t *B = &mf->buckets[b];
    uint64_t img = 0;
    uint32_t own = 0;
    for (uint32_t i = 0; i < mf->n_images; i++) img += mf->images[i].slot == b ? mf->images[i].size : 0;
    for (uint32_t k = B->first_kernel; k < B->first_kernel + B->n_kernels; k++) own += mf->kernels[k].slot == b;
    printf("  bucket %u:", b);
    for (uint32_t d = 0; d < mf->n_dyn_dims; d++) printf("%s%s=%lld", d ? "," : " ", mf->dyn_dims[d].name, (long long)B->size[d]);
    printf(": kernels %u..%u (%u own code, %u shared), image %llu bytes, arena %llu bytes\n", B->first_kernel,
           B->first_kernel + B->n_kernels - (B->n_kernels ? 1 : 0), own, B->n_kernels - own, (unsigned long long)img,
           (unsigned long long)B->arena_size);
  }
}

/* --list: what a module holds, read without a GPU (like cuobjdump --list-elf --list-ptx). */
/* A plan's code: its images (the fat binaries' entries) and its kernels. */
static void list_code(const drk_modfile_t *mf, const char *in) {
  char err[512];
  for (uint32_t i = 0; i < mf->n_images; i++) {
    const drk_modfile_image_t *im = &mf->images[i];
    printf("%s  image %u: slot %u, kind %d, %llu bytes, targets %s\n", in, i, im->slot, (int)im->kind,
           (unsigned long long)im->size, im->targets);
    if (im->kind != DRK_MODFILE_IMAGE_FATBIN) continue;
    drk_fatbin_image_t e[32];
    size_t ne = 0;
    if (drk_fatbin_parse(im->data, (size_t)im->size, e, 32, &ne, err, sizeof err) != 0) {
      printf("%s    bad fat binary: %s\n", in, err);
      continue;
    }
    for (size_t k = 0; k < ne && k < 32; k++) {
      char arch[16];
      drk_fatbin_format_arch(e[k].sm, e[k].arch_specific, arch, sizeof arch);
      printf("%s    %s %s, %zu bytes%s\n", in, e[k].kind == DRK_FATBIN_ELF ? "ELF" : "PTX", arch, e[k].size,
             e[k].compressed ? " (compressed)" : "");
    }
  }
  for (uint32_t i = 0; i < mf->n_kernels; i++) {
    const drk_modfile_kernel_t *k = &mf->kernels[i];
    printf("%s  kernel %u: %s grid(%u,%u,%u) block(%u)", in, i, k->name, k->grid[0], k->grid[1], k->grid[2], k->block[0]);
    if (k->cluster[0]) printf(" cluster(%u,%u,%u)", k->cluster[0], k->cluster[1], k->cluster[2]);
    printf(" smem %u, %u params\n", k->dyn_smem, k->n_params);
    for (uint32_t j = 0; j < k->n_params; j++) {
      if (k->params[j].kind != DRK_MODFILE_PARAM_TMA) continue;
      const drk_modfile_tma_t *t = &mf->tmas[k->params[j].tma];
      printf("%s    param %u: TMA dtype %u rank %u offset %llu dims", in, j, t->data_type, t->rank,
             (unsigned long long)t->offset);
      for (uint32_t r = 0; r < t->rank; r++) printf(" %llu", (unsigned long long)t->dims[r]);
      printf(" strides");
      for (uint32_t r = 0; r + 1 < t->rank; r++) printf(" %llu", (unsigned long long)t->strides[r]);
      printf(" box");
      for (uint32_t r = 0; r < t->rank; r++) printf(" %u", t->box[r]);
      printf(" swizzle %u\n", t->swizzle);
    }
  }
}

static int list_module(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "drkrun: error: %s: %s\n", path, strerror(errno));
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *buf = malloc(n > 0 ? (size_t)n : 1);
  bool ok = buf && n >= 0 && fread(buf, 1, (size_t)n, f) == (size_t)n;
  fclose(f);
  drk_modfile_t *mf = NULL;
  char err[512];
  if (!ok || drk_modfile_read(buf, (size_t)n, NULL, &mf, err, sizeof err) != DRK_MODFILE_OK) {
    fprintf(stderr, "drkrun: error: %s: %s\n", path, ok ? err : "cannot read");
    free(buf);
    return 1;
  }
  printf("module %s: format %u, drkc %s, model %s, targets %s\n  command: %s\n", path, mf->format_version,
         mf->prov.drkc_version, mf->prov.model_hash, mf->prov.targets, mf->prov.command_line);
  printf("  arena %llu bytes (weights %llu), %u kernels, %u inputs, %u outputs\n", (unsigned long long)mf->arena_size,
         (unsigned long long)mf->weights_size, mf->n_kernels, mf->n_inputs, mf->n_outputs);
  if (mf->weights_file) printf("  weights in the side file %s (--weights=external)\n", mf->weights_file);
  for (int io = 0; io < 2; io++)
    for (uint32_t i = 0; i < (io ? mf->n_outputs : mf->n_inputs); i++) {
      const drk_modfile_tensor_t *t = io ? &mf->outputs[i] : &mf->inputs[i];
      char name[256], dims[200] = "", dtype[32];
      size_t l = 0;
      for (uint32_t d = 0; d < t->rank && l + 24 < sizeof dims; d++)
        l += (size_t)snprintf(dims + l, sizeof dims - l, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
#ifdef DRK_HAVE_TENSOR_IO
      drk_escape(t->name, name, sizeof name); /* names are the model's: no raw control characters */
      drk_dtype_t dt;
      snprintf(dtype, sizeof dtype, "%s", drk_dtype_from_onnx(t->dtype, &dt) ? drk_dtype_name(dt) : "?");
#else /* the runtime-only build (no graph IR library): control characters as '?', the ONNX code */
      snprintf(name, sizeof name, "%s", t->name);
      for (char *c = name; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
      snprintf(dtype, sizeof dtype, "onnx-dtype-%d", (int)t->dtype);
#endif
      printf("  %s %u '%s': %s[%s], %llu bytes at arena offset %llu\n", io ? "output" : "input", i, name, dtype, dims,
             (unsigned long long)t->size, (unsigned long long)t->offset);
    }
  list_code(mf, "");
  if (mf->fallback_module) {
    const drk_modfile_t *fb = mf->fallback_module;
    printf("  fallback module (%llu bytes, for devices the code above does not run on): targets %s, arena %llu bytes, "
           "%u kernels, %s\n",
           (unsigned long long)mf->fallback_size, fb->prov.targets, (unsigned long long)fb->arena_size, fb->n_kernels,
           mf->fallback_shares_weights ? "the weights above" : "weights of its own");
    list_code(fb, "  ");
  }
  list_buckets(mf);
  drk_modfile_print_precision(mf, stdout, "  "); /* per-kernel precision table (PRECISION section) */
  drk_modfile_print_auto(mf, stdout, "  ");     /* --accuracy-budget's choice (PRECISION_AUTO section) */
  drk_modfile_free(NULL, mf);
  free(buf);
  return 0;
}

/* A module with shape buckets runs at actual shapes: each input's dims (drk_session_run_shapes). */
typedef struct dyn_run {
  int on;
  int64_t (*dims)[DRK_TENSOR_MAX_RANK];
  const int64_t **ptrs;
} dyn_run_t;

static drk_status_t run_once(drk_session_t *s, const dyn_run_t *dr) {
  return dr->on ? drk_session_run_shapes(s, dr->ptrs) : drk_session_run(s);
}

/* --shapes NAME=N,...: sizes of the module's dynamic dims into sizes[] (others keep theirs). */
static int parse_shapes(const drk_module_t *m, const char *spec, int64_t *sizes) {
  for (const char *p = spec; p && *p;) {
    const char *end = strchr(p, ','), *eq = strchr(p, '=');
    if (!end) end = p + strlen(p);
    size_t d = 0, nd = drk_module_num_dynamic_dims(m);
    while (d < nd && (!eq || eq > end || strlen(drk_module_dynamic_dim(m, d, NULL, NULL)) != (size_t)(eq - p) ||
                      strncmp(drk_module_dynamic_dim(m, d, NULL, NULL), p, (size_t)(eq - p))))
      d++;
    char *e = NULL;
    long long v = d < nd ? strtoll(eq + 1, &e, 10) : 0;
    if (d == nd || e != end || v < 1) {
      fprintf(stderr, "drkrun: error: --shapes: '%.*s' is not NAME=SIZE with NAME a dynamic dim of the module\n",
              (int)(end - p), p);
      return 0;
    }
    sizes[d] = v;
    p = *end ? end + 1 : end;
  }
  return 1;
}

/* An input of a module with buckets from DIR/input_N.pb at the file's own shape (dtype and the
 * static dims checked against the module), into *out (malloc'ed). */
static int load_input_dyn(const char *dir, size_t i, const drk_module_t *m, const drk_tensor_info_t *info, int64_t *dims,
                          void **out, size_t *out_bytes) {
#ifdef DRK_HAVE_TENSOR_IO
  char path[4096];
  snprintf(path, sizeof path, "%s/input_%zu.pb", dir, i);
  if (file_exists(path)) {
    drk_diag_t d;
    drk_diag_init(&d, stderr);
    drk_tensor_t t;
    drk_dtype_t want;
    if (!drk_dtype_from_onnx(info->dtype, &want)) want = DRK_DT_COUNT;
    if (!drk_tensor_read_pb_expect(path, want, &t, &d)) return 0;
    int ok = drk_dtype_to_onnx(t.dtype) == info->dtype && (uint32_t)t.rank == info->rank;
    for (uint32_t k = 0; ok && k < info->rank; k++) {
      ok = drk_module_dynamic_axis(m, 0, i, k) >= 0 || t.dims[k] == info->dims[k];
      dims[k] = t.dims[k];
    }
    if (!ok) fprintf(stderr, "drkrun: error: %s: dtype, rank or a static dim differs from input '%s' of the module\n", path, info->name);
    *out = ok ? malloc(t.nbytes ? t.nbytes : 1) : NULL;
    if (*out) memcpy(*out, t.data, t.nbytes), *out_bytes = t.nbytes;
    drk_tensor_free(&t);
    return *out != NULL;
  }
#endif
  (void)m, (void)dims, (void)out, (void)out_bytes;
  fprintf(stderr, "drkrun: error: input %zu ('%s'): a module with shape buckets reads its inputs' shapes from "
                  "%s/input_%zu.pb (or give --shapes and random inputs)\n", i, info->name, dir, i);
  return 0;
}

/* Times runs with inputs and outputs left in the device arena (unbound): the kernels alone,
 * as a deployment that keeps its tensors on the GPU sees them. Rebinds nothing: the caller's
 * later runs (profile, outputs) must rebind. */
static int time_resident(drk_session_t *s, const dyn_run_t *dr, size_t nin, size_t nout, int warmup, int iters, float *lat,
                         const char *lat_path) {
  drk_status_t st = NULL;
  for (size_t i = 0; i < nin && !st; i++) st = drk_session_bind_input(s, i, NULL, 0, DRK_MEMORY_HOST);
  for (size_t i = 0; i < nout && !st; i++) st = drk_session_bind_output(s, i, NULL, 0, DRK_MEMORY_HOST);
  for (int i = 0; i < warmup && !st; i++) st = run_once(s, dr);
  for (int i = 0; i < iters && !st; i++)
    if (!(st = run_once(s, dr))) drk_session_last_run_ms(s, &lat[i]);
  if (st) return !fail(st, "resident run");
  if (lat_path) { /* before percentile() sorts them */
    FILE *f = fopen(lat_path, "w");
    if (!f) { fprintf(stderr, "drkrun: error: cannot write '%s': %s\n", lat_path, strerror(errno)); return 0; }
    for (int i = 0; i < iters; i++) fprintf(f, "%.4f\n", lat[i]);
    if (fclose(f)) { fprintf(stderr, "drkrun: error: writing '%s' failed\n", lat_path); return 0; }
  }
  float mean = 0;
  for (int i = 0; i < iters; i++) mean += lat[i] / (float)iters;
  float med = percentile(lat, (size_t)iters, 0.5), p90 = percentile(lat, (size_t)iters, 0.9), mn = lat[0];
  printf("resident latency over %d runs (GPU events, kernels only, tensors stay on the GPU): median %.4f ms, min %.4f ms, p90 %.4f ms, mean %.4f ms\n",
         iters, med, mn, p90, mean);
  return 1;
}

int main(int argc, char **argv) {
  const char *module_path = NULL, *in_dir = NULL, *out_dir = NULL, *lat_path = NULL, *weights = NULL, *shapes = NULL;
  int warmup = 10, iters = 100, profile = 0, device = 0, list = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    int missing = 0;
    if (!strcmp(a, "--profile")) profile = 1;
    else if (!strcmp(a, "--list")) list = 1;
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) return fputs(usage_text, stdout), 0;
    else if (!strcmp(a, "--version")) return printf("drkrun %s (git %s)\n", DRKRUN_VERSION, DRK_GIT_HASH), 0;
    else if ((v = opt_value(argc, argv, &i, "--input-dir", &missing))) in_dir = v;
    else if ((v = opt_value(argc, argv, &i, "--output-dir", &missing))) out_dir = v;
    else if ((v = opt_value(argc, argv, &i, "--latencies", &missing))) lat_path = v;
    else if ((v = opt_value(argc, argv, &i, "--weights", &missing))) weights = v;
    else if ((v = opt_value(argc, argv, &i, "--shapes", &missing))) shapes = v;
    else if ((v = opt_value(argc, argv, &i, "--warmup", &missing)) ||
             (v = opt_value(argc, argv, &i, "--iters", &missing)) ||
             (v = opt_value(argc, argv, &i, "--device", &missing))) {
      int x = count_arg(v);
      const char *name = strncmp(a, "--warmup", 8) == 0 ? "--warmup" : strncmp(a, "--iters", 7) == 0 ? "--iters" : "--device";
      if (x < 0) {
        fprintf(stderr, "drkrun: error: %s needs a whole number, got '%s'\n", name, v);
        return 2;
      }
      if (name[2] == 'w') warmup = x;
      else if (name[2] == 'i') iters = x;
      else device = x;
    } else if (missing) {
      fprintf(stderr, "drkrun: error: %s needs a value\n", a);
      return usage();
    } else if (a[0] == '-') {
      fprintf(stderr, "drkrun: error: unknown option '%s'\n", a);
      return usage();
    } else if (!module_path) module_path = a;
    else {
      fprintf(stderr, "drkrun: error: more than one module given ('%s')\n", a);
      return usage();
    }
  }
  if (!module_path) {
    fprintf(stderr, "drkrun: error: no MODULE given\n");
    return usage();
  }
  if (iters < 1) {
    fprintf(stderr, "drkrun: error: --iters must be at least 1\n");
    return 2;
  }
  if (list) return list_module(module_path);

  drk_module_t *m = NULL;
  drk_status_t st = drk_module_load_file(NULL, module_path, &m);
  if (st) return fail(st, "loading the module");
  if (drk_module_weights_file(m)) { /* --weights=external: FILE, or the named file next to the module */
    char wp[4096];
    const char *slash = strrchr(module_path, '/');
    snprintf(wp, sizeof wp, "%.*s%s", slash ? (int)(slash - module_path + 1) : 0, module_path, drk_module_weights_file(m));
    if ((st = drk_module_load_weights(m, weights ? weights : wp))) {
      drk_module_destroy(m);
      return fail(st, "loading the weights");
    }
  } else if (weights) {
    fprintf(stderr, "drkrun: note: --weights ignored: the module holds its weights\n");
  }
  printf("module: %s\n  %s\n", module_path, drk_module_provenance(m));
  int64_t dyn_sizes[16];
  for (size_t d = 0; d < drk_module_num_dynamic_dims(m) && d < 16; d++) drk_module_dynamic_dim(m, d, NULL, &dyn_sizes[d]);
  if (shapes && !drk_module_num_dynamic_dims(m)) fprintf(stderr, "drkrun: note: --shapes ignored: the module has static shapes\n");
  if (shapes && drk_module_num_dynamic_dims(m) && !parse_shapes(m, shapes, dyn_sizes)) {
    drk_module_destroy(m);
    return 2;
  }

  drk_runtime_options_t ro = {.device = device};
  drk_runtime_t *rt = NULL;
  if ((st = drk_runtime_create(&ro, &rt))) {
    drk_module_destroy(m);
    return fail(st, "starting the runtime");
  }
  printf("device %d: %s\n", device, drk_runtime_device_name(rt));
  int rc = 1;
  drk_session_t *s = NULL;
  size_t nin = drk_module_num_inputs(m), nout = drk_module_num_outputs(m), nk = 0;
  void **in_bufs = calloc(nin + 1, sizeof *in_bufs), **out_bufs = calloc(nout + 1, sizeof *out_bufs);
  float *lat = calloc((size_t)iters, sizeof *lat), *kt = NULL, *one = NULL;
  size_t *in_size = calloc(nin + 1, sizeof *in_size), *out_size = calloc(nout + 1, sizeof *out_size);
  drk_tensor_info_t *out_info = calloc(nout + 1, sizeof *out_info);
  dyn_run_t dr = {drk_module_num_dynamic_dims(m) > 0, calloc(nin + 1, sizeof *dr.dims), calloc(nin + 1, sizeof *dr.ptrs)};
  unsigned seed = 12345;
  if (!in_bufs || !out_bufs || !lat || !in_size || !out_size || !out_info || !dr.dims || !dr.ptrs) { fprintf(stderr, "drkrun: error: out of memory\n"); goto done; }
  if ((st = drk_session_create(rt, m, &s))) { rc = fail(st, "preparing the module"); goto done; }
  /* the kernels of the plan the session runs (a module's fallback plan has its own) */
  nk = drk_session_num_kernels(s);
  if (strcmp(drk_session_targets(s), drk_module_targets(m)) != 0)
    printf("  running the module's fallback plan: targets %s, %zu kernels (no code for this device in the main plan)\n",
           drk_session_targets(s), nk);
  if (!(kt = calloc((size_t)iters * (nk + 1), sizeof *kt)) || !(one = calloc(nk + 1, sizeof *one))) {
    fprintf(stderr, "drkrun: error: out of memory\n");
    goto done;
  }
  for (size_t i = 0; i < nin; i++) {
    drk_tensor_info_t info;
    if ((st = drk_module_input_info(m, i, &info))) { rc = fail(st, "input"); goto done; }
    /* a module with buckets: the actual shape (--shapes, or the .pb file's), its bytes in proportion */
    uint64_t max_elems = 1, elems = 1;
    for (uint32_t k = 0; k < info.rank; k++) {
      int d = drk_module_dynamic_axis(m, 0, i, k);
      dr.dims[i][k] = d >= 0 && d < 16 ? dyn_sizes[d] : info.dims[k];
      max_elems *= (uint64_t)info.dims[k], elems *= (uint64_t)dr.dims[i][k];
    }
    dr.ptrs[i] = dr.dims[i];
    in_size[i] = dr.on && max_elems ? (size_t)(info.size_bytes * elems / max_elems) : (size_t)info.size_bytes;
    if (dr.on && in_dir) {
      if (!load_input_dyn(in_dir, i, m, &info, dr.dims[i], &in_bufs[i], &in_size[i])) goto done;
    } else {
      if (!(in_bufs[i] = malloc(in_size[i] ? in_size[i] : 1))) goto done;
      if (in_dir) { if (!load_input(in_dir, i, &info, in_bufs[i])) goto done; }
      else fill_random(in_bufs[i], in_size[i], info.dtype, &seed);
    }
    if ((st = drk_session_bind_input(s, i, in_bufs[i], in_size[i], DRK_MEMORY_HOST))) { rc = fail(st, "binding an input"); goto done; }
  }
  if (dr.on) { /* one run with the outputs unbound gives their actual shapes */
    if ((st = run_once(s, &dr))) { rc = fail(st, "first run"); goto done; }
    int64_t sz[16];
    size_t b = drk_session_last_bucket(s), nd = drk_module_num_dynamic_dims(m);
    drk_module_bucket_info(m, b, sz, NULL, NULL);
    int64_t act[16] = {0};
    for (size_t i = 0; i < nin; i++) {
      drk_tensor_info_t info;
      drk_module_input_info(m, i, &info);
      for (uint32_t k = 0; k < info.rank; k++) {
        int d = drk_module_dynamic_axis(m, 0, i, k);
        if (d >= 0 && d < 16) act[d] = dr.dims[i][k];
      }
    }
    printf("actual shape:");
    for (size_t d = 0; d < nd && d < 16; d++) printf(" %s=%lld", drk_module_dynamic_dim(m, d, NULL, NULL), (long long)act[d]);
    printf(" -> bucket %zu:", b);
    for (size_t d = 0; d < nd && d < 16; d++) printf(" %s=%lld", drk_module_dynamic_dim(m, d, NULL, NULL), (long long)sz[d]);
    printf("\n");
  }
  for (size_t i = 0; i < nout; i++) {
    drk_tensor_info_t *info = &out_info[i];
    if ((st = drk_module_output_info(m, i, info))) { rc = fail(st, "output"); goto done; }
    if (dr.on) { /* the actual shape the first run gave, bytes in proportion */
      uint64_t max_elems = 1, elems = 1;
      int64_t od[DRK_TENSOR_MAX_RANK];
      uint32_t rank;
      drk_session_output_shape(s, i, od, &rank);
      for (uint32_t k = 0; k < info->rank; k++) max_elems *= (uint64_t)info->dims[k], elems *= (uint64_t)od[k], info->dims[k] = od[k];
      info->size_bytes = max_elems ? info->size_bytes * elems / max_elems : 0;
    }
    out_size[i] = (size_t)info->size_bytes;
    if (!(out_bufs[i] = malloc(out_size[i] ? out_size[i] : 1))) goto done;
    if ((st = drk_session_bind_output(s, i, out_bufs[i], out_size[i], DRK_MEMORY_HOST))) { rc = fail(st, "binding an output"); goto done; }
  }
  for (int i = 0; i < warmup; i++)
    if ((st = run_once(s, &dr))) { rc = fail(st, "warm-up run"); goto done; }
  for (int i = 0; i < iters; i++) {
    if ((st = run_once(s, &dr))) { rc = fail(st, "timed run"); goto done; }
    drk_session_last_run_ms(s, &lat[i]);
  }
  float mean = 0;
  for (int i = 0; i < iters; i++) mean += lat[i] / (float)iters;
  float med = percentile(lat, (size_t)iters, 0.5), p90 = percentile(lat, (size_t)iters, 0.9), mn = lat[0];
  printf("latency over %d runs (GPU events, copies + kernels, CUDA graph): median %.4f ms, min %.4f ms, p90 %.4f ms, mean %.4f ms\n", iters, med, mn, p90, mean);
  if (!time_resident(s, &dr, nin, nout, warmup, iters, lat, lat_path)) goto done;
  for (size_t i = 0; i < nin; i++) /* rebind for the profiled runs and the outputs */
    if ((st = drk_session_bind_input(s, i, in_bufs[i], in_size[i], DRK_MEMORY_HOST))) { rc = fail(st, "binding an input"); goto done; }
  for (size_t i = 0; i < nout; i++)
    if ((st = drk_session_bind_output(s, i, out_bufs[i], out_size[i], DRK_MEMORY_HOST))) { rc = fail(st, "binding an output"); goto done; }
  if ((st = run_once(s, &dr))) { rc = fail(st, "final run"); goto done; }
  if (profile && nk) {
    drk_session_set_profiling(s, 1);
    for (int i = 0; i < iters; i++) {
      if ((st = run_once(s, &dr)) || (st = drk_session_kernel_times(s, one, nk))) { rc = fail(st, "profiled run"); goto done; }
      for (size_t k = 0; k < nk; k++) kt[k * (size_t)iters + (size_t)i] = one[k];
    }
    drk_session_set_profiling(s, 0);
    float total = 0;
    size_t k0 = 0, k1 = nk; /* a module with buckets: the kernels of the bucket that ran */
    if (dr.on) drk_module_bucket_info(m, drk_session_last_bucket(s), NULL, &k0, &k1), k1 += k0;
    for (size_t k = k0; k < k1; k++) total += (one[k] = percentile(kt + k * (size_t)iters, (size_t)iters, 0.5));
    printf("per kernel (median of %d profiled runs, launched one by one):\n  %4s %10s %6s  %s\n", iters, "#", "ms", "%", "kernel");
    for (size_t k = k0; k < k1; k++)
      printf("  %4zu %10.4f %5.1f%%  %s\n", k, one[k], total > 0 ? 100.0 * one[k] / total : 0.0, drk_session_kernel_name(s, k));
    printf("  total %.4f ms\n", total);
  }
  if (out_dir) {
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
      fprintf(stderr, "drkrun: error: cannot create %s: %s\n", out_dir, strerror(errno));
      goto done;
    }
    for (size_t i = 0; i < nout; i++)
      if (!save_output(out_dir, i, &out_info[i], out_bufs[i])) goto done;
    printf("wrote %zu outputs to %s\n", nout, out_dir);
  }
  rc = 0;
done:
  drk_session_destroy(s);
  drk_runtime_destroy(rt);
  drk_module_destroy(m);
  for (size_t i = 0; in_bufs && i < nin; i++) free(in_bufs[i]);
  for (size_t i = 0; out_bufs && i < nout; i++) free(out_bufs[i]);
  free(in_bufs), free(out_bufs), free(lat), free(kt), free(one), free(in_size), free(out_size), free(out_info);
  free(dr.dims), free(dr.ptrs);
  return rc;
}
