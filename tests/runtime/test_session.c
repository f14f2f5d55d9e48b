/* The driver-independent session code (runtime/src/session.c) without a GPU: the
 * kernel-parameter layout that the CUDA driver fills (several kernels mixing 8-byte
 * parameters and 128-byte TMA descriptors, the case whose store once overflowed), and a
 * session made through stub driver calls: tables, parameter values inside the store,
 * bindings, the order of calls in a run, profiling, and no leaks. A module with shape buckets
 * (drkc --dynamic): its BUCKETS records through the writer and reader, a graph captured per
 * bucket, the bucket a run at actual shapes picks, the zero fill and row copies that pad its
 * inputs and slice its outputs, profiling of the bucket's kernels, and the errors (a dim out of
 * range, a static dim changed, inputs disagreeing, a binding of the wrong size). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/src/session.h"
#include "tests/runtime/test_util.h"

static int live;
static void *count_alloc(void *u, size_t n, size_t a) {
  (void)u;
  void *p = aligned_alloc(a < 16 ? 16 : a, (n + 255) & ~(size_t)255);
  if (p) live++;
  return p;
}
static void count_free(void *u, void *p, size_t n) { (void)u, (void)n, free(p), live--; }
static drk_allocator_t al = {count_alloc, count_free, NULL};

#define B(off) {DRK_MODFILE_PARAM_BUFFER, (off), 16, 0, {0}, 0}
#define S(v) {DRK_MODFILE_PARAM_SCALAR, 0, 0, 4, {(v), 0, 0, 0}, 0}
#define T(i) {DRK_MODFILE_PARAM_TMA, 0, 0, 0, {0}, (i)}

/* Odd numbers of 8-byte parameters before each TMA descriptor, so that every descriptor
 * needs padding; the old size (8 per slot + 128 per descriptor) was too small here. */
static const drk_modfile_param_t k0[] = {B(0), T(0), S(7)};
static const drk_modfile_param_t k1[] = {S(1), S(2), S(3), T(1), T(0), B(64)};
static const drk_modfile_param_t k2[] = {T(1)};
static const drk_modfile_param_t k5[] = {B(128)};
static const drk_modfile_param_t k4[] = {S(9), B(256), S(4), T(0)};
static const drk_modfile_kernel_t kernels[] = {
    {"k0", 0, {1, 1, 1}, {32, 1, 1}, {0}, 0, k0, 3}, {"k1", 1, {1, 1, 1}, {32, 1, 1}, {0}, 0, k1, 6},
    {"k2", 0, {1, 1, 1}, {32, 1, 1}, {0}, 0, k2, 1}, {"k3", 2, {1, 1, 1}, {32, 1, 1}, {0}, 0, NULL, 0},
    {"k4", 1, {1, 1, 1}, {32, 1, 1}, {0}, 0, k4, 4}, {"k5", 2, {1, 1, 1}, {32, 1, 1}, {0}, 0, k5, 1},
};
#define NK (sizeof kernels / sizeof kernels[0])
#define NP 15

static size_t param_size(const drk_modfile_param_t *p) { return p->kind == DRK_MODFILE_PARAM_TMA ? 128 : 8; }

static void test_layout(const drk_modfile_t *mf) {
  size_t off[NP + 1];
  memset(off, 0xab, sizeof off);
  size_t total = drk_rt_param_layout(mf, off);
  CHECK(total == drk_rt_param_layout(mf, NULL));
  CHECK(off[NP] == (size_t)0xababababababababull); /* one entry per parameter, no more */
  size_t naive = 0, i = 0, end = 0;
  for (uint32_t k = 0; k < mf->n_kernels; k++)
    for (uint32_t p = 0; p < mf->kernels[k].n_params; p++, i++) {
      const drk_modfile_param_t *pa = &mf->kernels[k].params[p];
      naive += param_size(pa);
      CHECK(off[i] + param_size(pa) <= total);
      CHECK(off[i] >= end); /* in order, no overlap */
      if (pa->kind == DRK_MODFILE_PARAM_TMA) CHECK(off[i] % 128 == 0);
      else CHECK(off[i] % 8 == 0);
      end = off[i] + param_size(pa);
    }
  CHECK(i == NP);
  CHECK(end == total);
  CHECK(total > naive); /* padding counted: the case that overflowed */
  /* By hand: k0 B@0 T@128 S@256; k1 S@264 S@272 S@280 T@384 T@512 B@640; k2 T@768;
   * k4 S@896 B@904 S@912 T@1024; k5 B@1152. */
  static const size_t want[NP] = {0, 128, 256, 264, 272, 280, 384, 512, 640, 768, 896, 904, 912, 1024, 1152};
  for (size_t j = 0; j < NP; j++) CHECK(off[j] == want[j]);
  CHECK(total == 1160);
}

/* Stub driver: records the calls of a run. */
typedef struct stub_session {
  drk_rt_session_t base;
  char log[512];
  int released;
} stub_session_t;

static void note(drk_rt_session_t *s, const char *what, unsigned n) {
  char *log = ((stub_session_t *)s)->log;
  size_t l = strlen(log);
  snprintf(log + l, 512 - l, "%s%u ", what, n);
}
static drk_status_t stub_init(drk_rt_session_t *s) {
  s->arena = 0x100000;
  s->can_capture = 1;
  drk_rt_session_fill_params(s);
  return NULL;
}
static void stub_release(drk_rt_session_t *s) { ((stub_session_t *)s)->released = 1; }
static drk_status_t stub_enter(drk_rt_session_t *s) { (void)s; return NULL; }
static drk_status_t stub_record(drk_rt_session_t *s, uint32_t e) { note(s, "e", e); return NULL; }
static drk_status_t stub_copy(drk_rt_session_t *s, uint64_t off, const drk_rt_binding_t *b, int out) {
  note(s, out ? "out@" : "in@", (unsigned)off);
  note(s, ":", (unsigned)b->size);
  return NULL;
}
static drk_status_t stub_zero(drk_rt_session_t *s, uint64_t off, uint64_t size) {
  note(s, "z@", (unsigned)off);
  note(s, ":", (unsigned)size);
  return NULL;
}
static drk_status_t stub_launch(drk_rt_session_t *s, uint32_t k) { note(s, "k", k); return NULL; }
static drk_status_t stub_begin(drk_rt_session_t *s) { note(s, "begin", s->graph); return NULL; }
static drk_status_t stub_end(drk_rt_session_t *s, int inst) { note(s, "end", (unsigned)inst); return NULL; }
static drk_status_t stub_replay(drk_rt_session_t *s) { note(s, "graph", s->graph); return NULL; }
static drk_status_t stub_sync(drk_rt_session_t *s, int run) { note(s, "sync", (unsigned)run); return NULL; }
static drk_status_t stub_elapsed(drk_rt_session_t *s, float *ms, uint32_t from, uint32_t to) { (void)s; *ms = (float)(to - from); return NULL; }
static const drk_rt_session_ops_t stub_ops = {sizeof(stub_session_t), stub_init, stub_release, stub_enter, stub_record, stub_copy, stub_launch,
                                              stub_begin, stub_end, stub_replay, stub_sync, stub_elapsed, stub_zero};

static void test_session(const drk_modfile_t *mf) {
  void *sv = NULL;
  drk_status_t st = drk_rt_session_create(&stub_ops, NULL, &al, mf, "stub device", &sv);
  CHECK(!st && sv);
  if (st || !sv) return;
  stub_session_t *ss = sv;
  drk_rt_session_t *s = sv;
  CHECK(!strcmp(ss->log, "begin0 k0 k1 k2 k3 k4 k5 end1 sync0 "));
  CHECK(s->has_graph);
  CHECK(s->n_slots == 3 && s->slots[0] == 0 && s->slots[1] == 1 && s->slots[2] == 2);
  CHECK(s->kernel_slot[2] == 0 && s->kernel_slot[4] == 1 && s->kernel_slot[5] == 2);
  CHECK((uintptr_t)s->pstore % 128 == 0);
  for (uint32_t k = 0; k < mf->n_kernels; k++)
    for (uint32_t p = 0; p < mf->kernels[k].n_params; p++) {
      const drk_modfile_param_t *pa = &mf->kernels[k].params[p];
      uint8_t *v = s->kparams[k][p];
      CHECK(v >= s->pstore && v + param_size(pa) <= s->pstore + s->pstore_size);
      if (pa->kind == DRK_MODFILE_PARAM_TMA) CHECK((uintptr_t)v % 128 == 0);
      if (pa->kind == DRK_MODFILE_PARAM_BUFFER) {
        uint64_t a;
        memcpy(&a, v, 8);
        CHECK(a == 0x100000 + pa->offset);
      }
      if (pa->kind == DRK_MODFILE_PARAM_SCALAR) CHECK(v[0] == pa->scalar[0]);
    }
  float in[4], out[4];
  drk_rt_session_bind(s, 0, in, sizeof in, DRK_MEMORY_HOST, 0);
  drk_rt_session_bind(s, 0, out, sizeof out, DRK_MEMORY_HOST, 1);
  ss->log[0] = 0;
  CHECK(!drk_rt_session_run(s));
  CHECK(!strcmp(ss->log, "e7 in@16 :16 graph0 out@32 :16 e8 sync1 "));
  CHECK(drk_rt_session_kernel_ms(s) == NULL);
  CHECK(drk_rt_session_last_run_ms(s) == 1.0f);
  drk_rt_session_set_profiling(s, 1);
  ss->log[0] = 0;
  CHECK(!drk_rt_session_run(s));
  CHECK(!strcmp(ss->log, "e7 in@16 :16 e0 k0 e1 k1 e2 k2 e3 k3 e4 k4 e5 k5 e6 out@32 :16 e8 sync1 "));
  const float *ms = drk_rt_session_kernel_ms(s);
  CHECK(ms && ms[0] == 1.0f && ms[5] == 1.0f);
  drk_rt_session_destroy(s);
}

/* ---- a module with buckets: batch 1..4 and seq 1..8, buckets (2,4) (2,8) (4,4) (4,8); input x
 * f32 [batch, seq, 2] at 0, output y f32 [batch, 2] at 1024; two kernels a bucket ---- */
static const drk_modfile_param_t dk[] = {B(0), B(1024)};
static const drk_modfile_kernel_t dkernels[8] = {
    {"a0", 0, {1, 1, 1}, {32, 1, 1}, {0}, 0, dk, 2}, {"b0", 0, {1, 1, 1}, {32, 1, 1}, {0}, 0, dk, 2},
    {"a1", 1, {1, 1, 1}, {32, 1, 1}, {0}, 0, dk, 2}, {"b0", 0, {1, 1, 1}, {32, 1, 1}, {0}, 0, dk, 2}, /* shared code */
    {"a2", 2, {1, 1, 1}, {32, 1, 1}, {0}, 0, dk, 2}, {"b2", 2, {1, 1, 1}, {32, 1, 1}, {0}, 0, dk, 2},
    {"a3", 3, {1, 1, 1}, {32, 1, 1}, {0}, 0, dk, 2}, {"b3", 3, {1, 1, 1}, {32, 1, 1}, {0}, 0, dk, 2},
};
static const int64_t dsz[4][2] = {{2, 4}, {2, 8}, {4, 4}, {4, 8}};

static void make_dynamic(drk_modfile_t *mf, drk_modfile_tensor_t *ins, drk_modfile_tensor_t *outs, drk_modfile_bucket_t *bk,
                         drk_modfile_image_t *imgs) {
  static const drk_modfile_dyn_dim_t dims[2] = {{"batch", 1, 4, 0}, {"seq", 1, 8, 0}};
  static const drk_modfile_dyn_axis_t axes[3] = {{0, 0, 0}, {0, 1, 1}, {1, 0, 0}};
  for (int b = 0; b < 4; b++) {
    int64_t n = dsz[b][0], s = dsz[b][1];
    ins[b] = (drk_modfile_tensor_t){"x", 1, 3, {n, s, 2}, 0, (uint64_t)(n * s * 2 * 4)};
    outs[b] = (drk_modfile_tensor_t){"y", 1, 2, {n, 2}, 1024, (uint64_t)(n * 2 * 4)};
    bk[b] = (drk_modfile_bucket_t){{n, s}, 4096, (uint32_t)(2 * b), 2};
    imgs[b] = (drk_modfile_image_t){DRK_MODFILE_IMAGE_PTX, (uint32_t)b, "sm_90", "x", 1};
  }
  memset(mf, 0, sizeof *mf);
  mf->arena_size = 4096;
  mf->kernels = dkernels, mf->n_kernels = 8;
  mf->inputs = ins, mf->n_inputs = 4, mf->outputs = outs, mf->n_outputs = 4;
  mf->images = imgs, mf->n_images = 4;
  mf->dyn_dims = dims, mf->n_dyn_dims = 2;
  mf->buckets = bk, mf->n_buckets = 4;
  mf->dyn_axes = axes, mf->n_dyn_axes = 3;
}

/* A run at dims succeeds and the stub's log is want (printed when not). */
static void expect_run_log(drk_rt_session_t *s, stub_session_t *ss, const int64_t *const *dims, const char *want) {
  ss->log[0] = 0;
  CHECK(!drk_rt_session_run_shapes(s, dims));
  CHECK(!strcmp(ss->log, want));
  if (strcmp(ss->log, want)) fprintf(stderr, "  log: %s\n  want: %s\n", ss->log, want);
}

static void expect_error(drk_rt_session_t *s, const int64_t *const *dims, const char *want) {
  drk_status_t st = drk_rt_session_run_shapes(s, dims);
  CHECK(st && drk_status_code(st) == DRK_STATUS_INVALID_ARGUMENT && strstr(drk_status_message(st), want));
  if (st && !strstr(drk_status_message(st), want)) fprintf(stderr, "  got: %s\n  want: %s\n", drk_status_message(st), want);
  drk_status_destroy(st);
}

static void test_dynamic(void) {
  drk_modfile_t mf;
  drk_modfile_tensor_t ins[4], outs[4];
  drk_modfile_bucket_t bk[4];
  drk_modfile_image_t imgs[4];
  make_dynamic(&mf, ins, outs, bk, imgs);
  /* the records survive the writer and the reader; a module with buckets is format version 2 */
  void *bytes = NULL;
  size_t size = 0;
  char err[400] = "";
  drk_modfile_t *rd = NULL;
  CHECK(drk_modfile_write(&mf, &bytes, &size, err, sizeof err) == DRK_MODFILE_OK);
  CHECK(bytes && drk_modfile_read(bytes, size, NULL, &rd, err, sizeof err) == DRK_MODFILE_OK);
  if (rd) {
    CHECK(rd->format_version == DRK_MODFILE_FORMAT_VERSION_DYNAMIC && rd->n_buckets == 4 && rd->n_dyn_dims == 2);
    CHECK(!strcmp(rd->dyn_dims[1].name, "seq") && rd->dyn_dims[1].hi == 8 && rd->n_dyn_axes == 3);
    CHECK(rd->buckets[3].size[0] == 4 && rd->buckets[3].size[1] == 8 && rd->buckets[3].first_kernel == 6);
    CHECK(rd->dyn_axes[1].tensor == 0 && rd->dyn_axes[1].axis == 1 && rd->dyn_axes[1].dim == 1);
    drk_modfile_free(NULL, rd);
  }
  free(bytes);
  /* what the validator refuses: a bucket outside a range, a tensor not at its bucket's sizes */
  bk[1].size[1] = 9;
  CHECK(drk_modfile_validate(&mf, err, sizeof err) == DRK_MODFILE_ERR_INVALID && strstr(err, "outside its range"));
  bk[1].size[1] = 8;
  ins[2].dims[1] = 5, ins[2].size = 4 * 5 * 2 * 4;
  CHECK(drk_modfile_validate(&mf, err, sizeof err) == DRK_MODFILE_ERR_INVALID && strstr(err, "axis 1: size 5, expected 4"));
  ins[2].dims[1] = 4, ins[2].size = 4 * 4 * 2 * 4;
  CHECK(drk_modfile_validate(&mf, err, sizeof err) == DRK_MODFILE_OK);

  void *sv = NULL;
  drk_status_t st = drk_rt_session_create(&stub_ops, NULL, &al, &mf, "stub device", &sv);
  CHECK(!st && sv);
  if (st || !sv) return;
  stub_session_t *ss = sv;
  drk_rt_session_t *s = sv;
  CHECK(!strcmp(ss->log, "begin0 k0 k1 end1 begin1 k2 k3 end1 begin2 k4 k5 end1 begin3 k6 k7 end1 sync0 "));
  CHECK(s->n_in == 1 && s->n_out == 1 && s->n_slots == 4);
  float x[4 * 8 * 2], y[4 * 2];
  int64_t xd[3] = {3, 5, 2};
  const int64_t *dims[1] = {xd};
  /* batch 3, seq 5: only (4, 8) holds it; x zeroed, then 3 rows of 5 x 2 floats at the bucket's
   * row stride (8 x 2 floats); y's first 3 rows out */
  drk_rt_session_bind(s, 0, x, 3 * 5 * 2 * 4, DRK_MEMORY_HOST, 0);
  drk_rt_session_bind(s, 0, y, 3 * 2 * 4, DRK_MEMORY_HOST, 1);
  expect_run_log(s, ss, dims, "e9 z@0 :256 in@0 :40 in@64 :40 in@128 :40 graph3 out@1024 :24 e10 sync1 ");
  CHECK(drk_rt_session_last_bucket(s) == 3);
  int64_t od[8];
  uint32_t rank = 0;
  drk_rt_session_output_shape(s, 0, od, &rank);
  CHECK(rank == 2 && od[0] == 3 && od[1] == 2);
  /* an exact fit: bucket (2, 4), no padding, one copy each way */
  xd[0] = 2, xd[1] = 4;
  drk_rt_session_bind(s, 0, x, 2 * 4 * 2 * 4, DRK_MEMORY_HOST, 0);
  drk_rt_session_bind(s, 0, y, 2 * 2 * 4, DRK_MEMORY_HOST, 1);
  ss->log[0] = 0;
  CHECK(!drk_rt_session_run_shapes(s, dims));
  CHECK(!strcmp(ss->log, "e9 in@0 :64 graph0 out@1024 :16 e10 sync1 "));
  /* batch 1, seq 6: (2, 8) is smaller than (4, 8); batch padded: one block of 6 x 2 floats */
  xd[0] = 1, xd[1] = 6;
  drk_rt_session_bind(s, 0, x, 1 * 6 * 2 * 4, DRK_MEMORY_HOST, 0);
  drk_rt_session_bind(s, 0, y, 1 * 2 * 4, DRK_MEMORY_HOST, 1);
  ss->log[0] = 0;
  CHECK(!drk_rt_session_run_shapes(s, dims));
  CHECK(!strcmp(ss->log, "e9 z@0 :128 in@0 :48 graph1 out@1024 :8 e10 sync1 "));
  /* profiling times the bucket's kernels only */
  drk_rt_session_set_profiling(s, 1);
  ss->log[0] = 0;
  CHECK(!drk_rt_session_run_shapes(s, dims));
  CHECK(!strcmp(ss->log, "e9 z@0 :128 in@0 :48 e2 k2 e3 k3 e4 out@1024 :8 e10 sync1 "));
  const float *ms = drk_rt_session_kernel_ms(s);
  CHECK(ms && ms[0] == 0.0f && ms[2] == 1.0f && ms[3] == 1.0f && ms[6] == 0.0f);
  drk_rt_session_set_profiling(s, 0);
  /* the errors */
  xd[0] = 5, xd[1] = 4;
  expect_error(s, dims, "input 0 ('x') axis 0: dim 'batch' = 5 is outside the module's range 1..4");
  xd[0] = 2, xd[1] = 0;
  expect_error(s, dims, "dim 'seq' = 0 is outside the module's range 1..8");
  xd[1] = 4, xd[2] = 3;
  expect_error(s, dims, "input 0 ('x') axis 2: size 3, the module's is 2");
  xd[2] = 2, xd[0] = 3;
  expect_error(s, dims, "input 0 ('x'): 48 bytes bound, the actual shape takes 96");
  const int64_t *none[1] = {NULL};
  expect_error(s, none, "input 0 ('x'): no dims given");
  drk_rt_session_destroy(s);
}

/* The same buckets with seq masked (drk_pass_pad_mask): a length input after x, at 512 in each
 * bucket, that the caller does not see and each run fills with the actual seq. */
static void test_length_input(void) {
  drk_modfile_t mf;
  drk_modfile_tensor_t ins0[4], outs[4], ins[8];
  drk_modfile_bucket_t bk[4];
  drk_modfile_image_t imgs[4];
  make_dynamic(&mf, ins0, outs, bk, imgs);
  static const drk_modfile_dyn_dim_t dims[2] = {{"batch", 1, 4, 0}, {"seq", 1, 8, 2}};
  static const drk_modfile_dyn_axis_t axes[3] = {{0, 0, 0}, {0, 1, 1}, {2, 0, 0}}; /* y is tensor 2 now */
  for (int b = 0; b < 4; b++) ins[2 * b] = ins0[b], ins[2 * b + 1] = (drk_modfile_tensor_t){"drk_len_seq", 7, 0, {0}, 512, 8};
  mf.inputs = ins, mf.n_inputs = 8, mf.dyn_dims = dims, mf.dyn_axes = axes;
  void *bytes = NULL;
  size_t size = 0;
  char err[400] = "";
  drk_modfile_t *rd = NULL;
  CHECK(drk_modfile_write(&mf, &bytes, &size, err, sizeof err) == DRK_MODFILE_OK);
  CHECK(bytes && drk_modfile_read(bytes, size, NULL, &rd, err, sizeof err) == DRK_MODFILE_OK);
  if (rd) {
    CHECK(rd->dyn_dims[1].length_input == 2 && rd->dyn_dims[0].length_input == 0 && drk_modfile_user_inputs(rd) == 1);
    drk_modfile_free(NULL, rd);
  }
  free(bytes);
  for (int b = 0; b < 4; b++) ins[2 * b + 1].dtype = 6, ins[2 * b + 1].size = 4; /* a length input is an int64 scalar */
  CHECK(drk_modfile_validate(&mf, err, sizeof err) == DRK_MODFILE_ERR_INVALID && strstr(err, "not an int64 scalar"));
  if (!strstr(err, "not an int64 scalar")) fprintf(stderr, "  got: %s\n", err);
  for (int b = 0; b < 4; b++) ins[2 * b + 1].dtype = 7, ins[2 * b + 1].size = 8;
  void *sv = NULL;
  drk_status_t st = drk_rt_session_create(&stub_ops, NULL, &al, &mf, "stub device", &sv);
  CHECK(!st && sv);
  if (st || !sv) return;
  stub_session_t *ss = sv;
  drk_rt_session_t *s = sv;
  CHECK(s->n_in == 2 && s->n_user_in == 1);
  float x[4 * 8 * 2], y[4 * 2];
  int64_t xd[3] = {3, 5, 2};
  const int64_t *dims1[1] = {xd};
  drk_rt_session_bind(s, 0, x, 3 * 5 * 2 * 4, DRK_MEMORY_HOST, 0);
  drk_rt_session_bind(s, 0, y, 3 * 2 * 4, DRK_MEMORY_HOST, 1);
  expect_run_log(s, ss, dims1, "e9 z@0 :256 in@0 :40 in@64 :40 in@128 :40 in@512 :8 graph3 out@1024 :24 e10 sync1 ");
  CHECK(s->lengths[1] == 5);
  drk_rt_session_destroy(s);
}

int main(void) {
  static const drk_modfile_tensor_t in = {"x", 1, 1, {4}, 16, 16}, out = {"y", 1, 1, {4}, 32, 16};
  drk_modfile_t mf;
  memset(&mf, 0, sizeof mf);
  mf.arena_size = 4096;
  mf.kernels = kernels;
  mf.n_kernels = NK;
  mf.inputs = &in, mf.n_inputs = 1;
  mf.outputs = &out, mf.n_outputs = 1;
  test_layout(&mf);
  test_session(&mf);
  CHECK(live == 0);
  test_dynamic();
  CHECK(live == 0);
  test_length_input();
  CHECK(live == 0);
  if (!failures) printf("session: ok\n");
  return check_status("session");
}
