/* Module file tests: write -> read round trip of every section (fields and bytes), the
 * version-mismatch message, truncated and corrupted files (every single-byte flip must be
 * rejected), writer validation, the checksums' reference values, and the runtime's status
 * codes for the same cases. The optional PRECISION section: round trip, modules without it,
 * a section of an unknown version (skipped), and truncated or inconsistent sections with
 * valid checksums (each a precise error), and its table printer. The FALLBACK section: a nested
 * module on the parent's weights (round trip, the runtime's provenance), a later version
 * skipped, and each inconsistency refused with its message. argv[1] (optional): where
 * to save the module as a fuzz seed. */
#include <math.h>

#include "tests/runtime/test_util.h"

#include "drk/drkrt.h"

static int str_eq(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }

static void check_same(const drk_modfile_t *a, const drk_modfile_t *b) {
  CHECK(b->format_version == DRK_MODFILE_FORMAT_VERSION);
  CHECK(str_eq(a->prov.drkc_version, b->prov.drkc_version) && str_eq(a->prov.command_line, b->prov.command_line));
  CHECK(str_eq(a->prov.model_hash, b->prov.model_hash) && str_eq(a->prov.targets, b->prov.targets));
  CHECK(a->arena_size == b->arena_size && a->weights_offset == b->weights_offset);
  CHECK(a->weights_size == b->weights_size && !memcmp(a->weights, b->weights, (size_t)a->weights_size));
  CHECK(a->n_weight_entries == b->n_weight_entries);
  for (uint32_t i = 0; i < a->n_weight_entries && i < b->n_weight_entries; i++)
    CHECK(str_eq(a->weight_entries[i].name, b->weight_entries[i].name) && a->weight_entries[i].offset == b->weight_entries[i].offset && a->weight_entries[i].size == b->weight_entries[i].size);
  CHECK(a->n_kernels == b->n_kernels);
  for (uint32_t i = 0; i < a->n_kernels && i < b->n_kernels; i++) {
    const drk_modfile_kernel_t *x = &a->kernels[i], *y = &b->kernels[i];
    CHECK(str_eq(x->name, y->name) && x->slot == y->slot && x->dyn_smem == y->dyn_smem && x->n_params == y->n_params);
    CHECK(!memcmp(x->grid, y->grid, 12) && !memcmp(x->block, y->block, 12) && !memcmp(x->cluster, y->cluster, 12));
    for (uint32_t p = 0; p < x->n_params && p < y->n_params; p++) {
      const drk_modfile_param_t *q = &x->params[p], *r = &y->params[p];
      CHECK(q->kind == r->kind);
      if (q->kind == DRK_MODFILE_PARAM_BUFFER) CHECK(q->offset == r->offset && q->size == r->size);
      if (q->kind == DRK_MODFILE_PARAM_SCALAR) CHECK(q->scalar_size == r->scalar_size && !memcmp(q->scalar, r->scalar, q->scalar_size));
      if (q->kind == DRK_MODFILE_PARAM_TMA) CHECK(q->tma == r->tma);
    }
  }
  CHECK(a->n_inputs == b->n_inputs && a->n_outputs == b->n_outputs);
  for (int io = 0; io < 2; io++)
    for (uint32_t i = 0; i < (io ? a->n_outputs : a->n_inputs) && i < (io ? b->n_outputs : b->n_inputs); i++) {
      const drk_modfile_tensor_t *x = io ? &a->outputs[i] : &a->inputs[i], *y = io ? &b->outputs[i] : &b->inputs[i];
      CHECK(str_eq(x->name, y->name) && x->dtype == y->dtype && x->rank == y->rank && x->offset == y->offset && x->size == y->size);
      CHECK(!memcmp(x->dims, y->dims, sizeof(int64_t) * x->rank));
    }
  CHECK(a->n_tmas == b->n_tmas);
  for (uint32_t i = 0; i < a->n_tmas && i < b->n_tmas; i++) CHECK(!memcmp(&a->tmas[i], &b->tmas[i], sizeof(drk_modfile_tma_t)));
  CHECK(a->n_images == b->n_images);
  for (uint32_t i = 0; i < a->n_images && i < b->n_images; i++) {
    const drk_modfile_image_t *x = &a->images[i], *y = &b->images[i];
    CHECK(x->kind == y->kind && x->slot == y->slot && str_eq(x->targets, y->targets) && x->size == y->size && !memcmp(x->data, y->data, (size_t)x->size));
    CHECK(((uintptr_t)y->data - (uintptr_t)b->weights) % 256 == 0); /* images stay 256B-aligned in the file */
  }
  CHECK(a->precision_version == b->precision_version && a->n_node_precision == b->n_node_precision);
  CHECK(!a->kernel_precision == !b->kernel_precision || !a->n_kernels);
  for (uint32_t i = 0; a->kernel_precision && b->kernel_precision && i < a->n_kernels && i < b->n_kernels; i++)
    CHECK(!memcmp(&a->kernel_precision[i], &b->kernel_precision[i], sizeof(drk_modfile_kernel_prec_t)));
  for (uint32_t i = 0; i < a->n_node_precision && i < b->n_node_precision; i++) {
    const drk_modfile_node_prec_t *x = &a->node_precision[i], *y = &b->node_precision[i];
    CHECK(str_eq(x->name, y->name) && str_eq(x->onnx, y->onnx) && str_eq(x->op, y->op));
    CHECK(x->kernel == y->kernel && x->n_kernels == y->n_kernels && x->compute == y->compute && x->from == y->from);
  }
}

/* ---- the PRECISION section ---- */
#define PB(c) (1u << DRK_MODFILE_PREC_##c)
/* Kernels: vadd (one Add), vscale and with_tma (the two kernels of an mm group: a MatMul,
 * an f16 -> f32 Cast in its epilogue); a Reshape runs in no kernel. */
static const drk_modfile_kernel_prec_t test_kprec[3] = {
    {0, DRK_MODFILE_GROUP_SINGLE, 0, 0, PB(F32), PB(F16)},
    {1, DRK_MODFILE_GROUP_MM, PB(F16), PB(F32), PB(F32), PB(F16) | PB(F32)},
    {1, DRK_MODFILE_GROUP_MM, PB(F16), PB(F32), 0, PB(F32)},
};
static const drk_modfile_node_prec_t test_nprec[4] = {
    {"s", "/add", "Add", 0, 1, DRK_MODFILE_PREC_F16, 0},
    {"y", "/fc/MatMul", "MatMul", 1, 2, DRK_MODFILE_PREC_F16, 0},
    {"r", "", "Reshape", DRK_MODFILE_NO_KERNEL, 0, DRK_MODFILE_PREC_F16, 0},
    {"c", "", "Cast", 1, 2, DRK_MODFILE_PREC_F32, DRK_MODFILE_PREC_F16},
};

static uint32_t rd32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static void wr64(unsigned char *p, uint64_t v) { wr32(p, (uint32_t)v), wr32(p + 4, (uint32_t)(v >> 32)); }

/* The PRECISION section's table entry in module c (NULL: none). */
static unsigned char *prec_entry(unsigned char *c) {
  uint64_t table = rd64(c + 24);
  for (uint32_t i = 0; i < rd32(c + 32); i++)
    if (rd32(c + table + 32 * (uint64_t)i) == 12) return c + table + 32 * (uint64_t)i;
  return NULL;
}

/* Recomputes the checksums after a patch, so the reader's structural checks are reached. */
static void fix_crcs(unsigned char *c) {
  uint64_t table = rd64(c + 24);
  uint32_t nsec = rd32(c + 32);
  for (uint32_t i = 0; i < nsec; i++) {
    unsigned char *e = c + table + 32 * (uint64_t)i;
    wr32(e + 24, drk_modfile_crc32(0, c + rd64(e + 8), (size_t)rd64(e + 16)));
  }
  wr32(c + 56, drk_modfile_crc32(0, c + table, 32 * (size_t)nsec));
  wr32(c + 60, drk_modfile_crc32(0, c, 60));
}

/* Patches 4 bytes at `at` of the PRECISION section of a copy of a (size 0: sets the
 * section size to v instead, zeroing the bytes it drops), and expects the reader and the
 * runtime to refuse it with `want` in the message. */
static void expect_bad_prec(const void *a, size_t na, size_t at, uint32_t v, int size_patch, const char *want) {
  unsigned char *c = malloc(na);
  memcpy(c, a, na);
  unsigned char *e = prec_entry(c);
  CHECK(e != NULL);
  if (!e) { free(c); return; }
  uint64_t off = rd64(e + 8), sz = rd64(e + 16);
  if (size_patch) {
    memset(c + off + v, 0, (size_t)(sz - v));
    wr64(e + 16, v);
  } else {
    wr32(c + off + at, v);
  }
  fix_crcs(c);
  char err[1024] = "";
  drk_modfile_t *r = NULL;
  drk_modfile_result_t res = drk_modfile_read(c, na, NULL, &r, err, sizeof err);
  CHECK(res == DRK_MODFILE_ERR_FORMAT);
  if (res == DRK_MODFILE_OK) drk_modfile_free(NULL, r);
  CHECK_CONTAINS(err, want);
  drk_module_t *rm = NULL;
  drk_status_t st = drk_module_load_memory(NULL, c, na, &rm);
  CHECK(drk_status_code(st) == DRK_STATUS_BAD_MODULE && rm == NULL);
  CHECK_CONTAINS(drk_status_message(st), want);
  drk_status_destroy(st);
  free(c);
}

static char *print_prec(const drk_modfile_t *m) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  drk_modfile_print_precision(m, f, "  ");
  fclose(f);
  return buf;
}

/* a: a module with t's kernels and the test_kprec/test_nprec section. */
static void test_precision(const void *a, size_t na, drk_modfile_t *desc) {
  char err[1024];
  drk_modfile_t *r = NULL;
  CHECK(drk_modfile_read(a, na, NULL, &r, err, sizeof err) == DRK_MODFILE_OK);
  if (r) {
    CHECK(r->precision_version == DRK_MODFILE_PRECISION_VERSION && r->n_node_precision == 4);
    char *txt = print_prec(r);
    CHECK_CONTAINS(txt, "precision: 4 graph nodes, 3 kernels; precision mix (float nodes by compute dtype): 1 f32 3 f16\n");
    CHECK_CONTAINS(txt, "vadd                           -         -         f32       f16            single    %s (Add f16)\n");
    CHECK_CONTAINS(txt, "vscale                         f16       f32       f32       f32,f16        mm        %y (MatMul f16), %c (Cast f16->f32)\n");
    CHECK_CONTAINS(txt, "with_tma                       f16       f32       -         f32            mm        %y (MatMul f16), %c (Cast f16->f32)\n");
    CHECK_CONTAINS(txt, "  no kernel: %r (Reshape f16)\n");
    free(txt);
    drk_modfile_free(NULL, r);
  }
  /* the section comes last (readers that predate it skip it) */
  unsigned char *c = malloc(na);
  memcpy(c, a, na);
  unsigned char *e = prec_entry(c);
  CHECK(e && e == c + rd64(c + 24) + 32 * (uint64_t)(rd32(c + 32) - 1));
  /* an unknown section version is skipped: the module loads without the table */
  uint64_t off = e ? rd64(e + 8) : 0;
  wr32(c + off, 2);
  fix_crcs(c);
  CHECK(drk_modfile_read(c, na, NULL, &r, err, sizeof err) == DRK_MODFILE_OK);
  if (r) {
    CHECK(r->precision_version == 2 && !r->kernel_precision && !r->node_precision && !r->n_node_precision);
    char *txt = print_prec(r);
    CHECK_CONTAINS(txt, "PRECISION section version 2, this reader knows version 1 (skipped)");
    free(txt);
    void *b = NULL;
    size_t nb = 0;
    CHECK(drk_modfile_write(r, &b, &nb, err, sizeof err) == DRK_MODFILE_ERR_INVALID);
    CHECK_CONTAINS(err, "writes PRECISION section version 1, not 2");
    drk_modfile_free(NULL, r);
  }
  free(c);

  /* truncated or inconsistent sections with valid checksums: precise errors, no crash */
  const size_t K = 16, N = 16 + 3 * 16; /* first kernel record, first node record */
  expect_bad_prec(a, na, 0, 0, 0, "PRECISION section has version 0");
  expect_bad_prec(a, na, 0, 2, 1, "PRECISION section has 2 bytes, too few for its version");
  expect_bad_prec(a, na, 0, 12, 1, "PRECISION section is truncated: 12 bytes, its header alone is 16");
  expect_bad_prec(a, na, 0, 16 + 3 * 16 + 4 * 24 - 8, 1, "PRECISION section has 152 bytes, but 3 kernel and 4 node records take 160 (truncated or corrupted)");
  expect_bad_prec(a, na, 4, 4, 0, "PRECISION section describes 4 kernels, the KERNELS section has 3");
  expect_bad_prec(a, na, 8, 5, 0, "but 3 kernel and 5 node records take");
  expect_bad_prec(a, na, 8, 0xffffffffu, 0, "but 3 kernel and 4294967295 node records take");
  expect_bad_prec(a, na, 12, 1, 0, "PRECISION section: reserved header field is not zero");
  expect_bad_prec(a, na, K, 99, 0, "precision of kernel 0 ('vadd'): node 99 of 4");
  expect_bad_prec(a, na, K, 1, 0, "precision of kernel 0 ('vadd'): its node 1 ('y') does not run it");
  expect_bad_prec(a, na, K + 4, 7, 0, "precision of kernel 0 ('vadd'): group kind 7 out of range");
  expect_bad_prec(a, na, K + 8, 1, 0, "precision of kernel 0 ('vadd'): a precision mask has bits outside the codes 1..8");
  expect_bad_prec(a, na, K + 12, 0x200u << 16, 0, "a precision mask has bits outside");
  expect_bad_prec(a, na, K + 16 + 8, PB(F16), 0, "precision of kernel 1 ('vscale'): matrix products without an accumulator precision");
  expect_bad_prec(a, na, N, 0xfffffff0u, 0, "string reference 4294967280 outside");
  expect_bad_prec(a, na, N + 8, 0x7fffffffu, 0, "string reference 2147483647 outside");
  expect_bad_prec(a, na, N + 12, 3, 0, "precision of node 0 ('s'): kernels [3, +1) outside the 3-kernel table");
  expect_bad_prec(a, na, N + 16, 0, 0, "precision of node 0 ('s'): kernel 0 with 0 kernels");
  expect_bad_prec(a, na, N + 20, 9, 0, "precision of node 0 ('s'): precision code 9/0 out of range");
  expect_bad_prec(a, na, N + 20, 0x01000004u, 0, "node record 0 ('s'): reserved bytes are not zero");
  expect_bad_prec(a, na, N + 2 * 24 + 12, 0, 0, "precision of node 2 ('r'): kernel 0 with 0 kernels");

  /* the writer refuses inconsistent records the same way */
  drk_modfile_kernel_prec_t kp[3];
  memcpy(kp, test_kprec, sizeof kp);
  kp[2].anchor = 0;
  desc->kernel_precision = kp;
  void *b = NULL;
  size_t nb = 0;
  CHECK(drk_modfile_write(desc, &b, &nb, err, sizeof err) == DRK_MODFILE_ERR_INVALID);
  CHECK_CONTAINS(err, "precision of kernel 2 ('with_tma'): its node 0 ('s') does not run it");
  desc->kernel_precision = NULL;
  CHECK(drk_modfile_write(desc, &b, &nb, err, sizeof err) == DRK_MODFILE_ERR_INVALID);
  CHECK_CONTAINS(err, "kernel_precision is NULL for 3 kernels");
  desc->kernel_precision = test_kprec;

  /* a module without the section (as written before it existed) still loads */
  desc->precision_version = 0, desc->kernel_precision = NULL, desc->node_precision = NULL, desc->n_node_precision = 0;
  CHECK(drk_modfile_write(desc, &b, &nb, err, sizeof err) == DRK_MODFILE_OK);
  if (b) {
    CHECK(rd32((unsigned char *)b + 32) == 10 + desc->n_images && !prec_entry(b));
    CHECK(drk_modfile_read(b, nb, NULL, &r, err, sizeof err) == DRK_MODFILE_OK);
    if (r) {
      check_same(desc, r);
      CHECK(r->precision_version == 0 && !r->kernel_precision && !r->node_precision);
      char *txt = print_prec(r);
      CHECK_CONTAINS(txt, "precision: not recorded");
      free(txt);
      drk_modfile_free(NULL, r);
    }
    drk_module_t *rm = NULL;
    drk_status_t st = drk_module_load_memory(NULL, b, nb, &rm);
    CHECK(st == NULL && rm && drk_module_num_kernels(rm) == 3);
    drk_status_destroy(st);
    drk_module_destroy(rm);
    free(b);
  }
  desc->precision_version = DRK_MODFILE_PRECISION_VERSION, desc->kernel_precision = test_kprec;
  desc->node_precision = test_nprec, desc->n_node_precision = 4;
}

/* ---- the PRECISION_AUTO section ---- */
static const drk_modfile_auto_group_t test_agroups[3] = {
    {"/fc1/MatMul", "MatMul", 3, DRK_MODFILE_PREC_F8E4M3},
    {"ln", "LayerNormalization", 1, DRK_MODFILE_PREC_F32},
    {"/fc2/MatMul", "MatMul", 2, DRK_MODFILE_PREC_TF32},
};
static const drk_modfile_auto_output_t test_aoutputs[2] = {{"y", false, 4.92e-3}, {"zero", true, 0.0}};

static unsigned char *sec_entry(unsigned char *c, uint32_t kind) {
  uint64_t table = rd64(c + 24);
  for (uint32_t i = 0; i < rd32(c + 32); i++)
    if (rd32(c + table + 32 * (uint64_t)i) == kind) return c + table + 32 * (uint64_t)i;
  return NULL;
}

/* Written, read back equal (byte-exact rewrite), printed; patched with valid checksums: an
 * unknown version is skipped, inconsistent records are precise errors; the writer refuses a
 * choice that is not one and a NaN error. */
static void test_auto(drk_modfile_t m) {
  char err[1024];
  m.auto_version = DRK_MODFILE_AUTO_VERSION, m.auto_budget = 1e-2;
  m.auto_groups = test_agroups, m.n_auto_groups = 3, m.auto_outputs = test_aoutputs, m.n_auto_outputs = 2;
  void *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  CHECK(drk_modfile_write(&m, &a, &na, err, sizeof err) == DRK_MODFILE_OK);
  if (!a) return;
  drk_modfile_t *r = NULL;
  CHECK(drk_modfile_read(a, na, NULL, &r, err, sizeof err) == DRK_MODFILE_OK);
  if (r) {
    CHECK(r->auto_version == 1 && r->auto_budget == 1e-2 && r->n_auto_groups == 3 && r->n_auto_outputs == 2);
    for (int i = 0; i < 3 && r->auto_groups; i++)
      CHECK(!strcmp(r->auto_groups[i].name, test_agroups[i].name) && !strcmp(r->auto_groups[i].op, test_agroups[i].op) &&
            r->auto_groups[i].n_nodes == test_agroups[i].n_nodes && r->auto_groups[i].choice == test_agroups[i].choice);
    for (int i = 0; i < 2 && r->auto_outputs; i++)
      CHECK(!strcmp(r->auto_outputs[i].name, test_aoutputs[i].name) && r->auto_outputs[i].error == test_aoutputs[i].error &&
            r->auto_outputs[i].absolute == test_aoutputs[i].absolute);
    CHECK(drk_modfile_write(r, &b, &nb, err, sizeof err) == DRK_MODFILE_OK);
    CHECK(nb == na && b && !memcmp(a, b, na));
    free(b);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    drk_modfile_print_auto(r, f, "  ");
    fclose(f);
    CHECK_CONTAINS(buf, "  precision auto: budget 1e-02, 3 op groups\n");
    CHECK_CONTAINS(buf, "    group /fc1/MatMul (MatMul, 3 nodes) f8e4m3\n");
    CHECK_CONTAINS(buf, "    group /fc2/MatMul (MatMul, 2 nodes) tf32\n");
    CHECK_CONTAINS(buf, "    output 'y': rel error 4.92e-03 <= 1e-02\n");
    CHECK_CONTAINS(buf, "    output 'zero': absolute error 0.00e+00 <= 1e-02\n");
    free(buf);
    drk_modfile_free(NULL, r);
  }
  unsigned char *c = malloc(na);
  struct { uint32_t at, v; int kind; const char *want; } bad[] = {
      {0, 0, 0, "PRECISION_AUTO section has version 0"},
      {4, 4, 0, "but 4 group and 2 output records take"},
      {12, 1, 0, "PRECISION_AUTO section: reserved header field is not zero"},
      {24 + 12, 9, 0, "group 0 ('/fc1/MatMul'): precision code 9 is not a choice"},
      {24 + 12, 0x0100u | 6u, 0, "group record 0: reserved bytes are not zero"},
      {24 + 48 + 4, 2, 0, "output record 0: flags 2"},
      {24 + 48 + 12, 0x7ff80000u, 0, "output 0 ('y'): error nan"},
      {16 + 4, 0x3ff00000u, 0, "budget 1 is not in (0, 1)"},
      {24 + 48, 0xfffffff0u, 0, "string reference 4294967280 outside"},
      {0, 2, 1, "skipped"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    memcpy(c, a, na);
    unsigned char *e = sec_entry(c, 14);
    CHECK(e != NULL);
    if (!e) break;
    if (bad[k].at == 16 + 4) wr32(c + rd64(e + 8) + 16, 0); /* budget 1.0: low word 0, high 0x3ff00000 */
    wr32(c + rd64(e + 8) + bad[k].at, bad[k].v);
    fix_crcs(c);
    drk_modfile_result_t res = drk_modfile_read(c, na, NULL, &r, err, sizeof err);
    if (bad[k].kind == 1) { /* an unknown version: skipped */
      CHECK(res == DRK_MODFILE_OK);
      if (res == DRK_MODFILE_OK) {
        CHECK(r->auto_version == 2 && !r->auto_groups && !r->auto_outputs);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        drk_modfile_print_auto(r, f, "");
        fclose(f);
        CHECK_CONTAINS(buf, "PRECISION_AUTO section version 2, this reader knows version 1 (skipped)");
        free(buf);
        drk_modfile_free(NULL, r);
      }
      continue;
    }
    CHECK(res == DRK_MODFILE_ERR_FORMAT);
    if (res == DRK_MODFILE_OK) drk_modfile_free(NULL, r);
    CHECK_CONTAINS(err, bad[k].want);
  }
  free(c);
  free(a);
  drk_modfile_auto_group_t g2[3];
  memcpy(g2, test_agroups, sizeof g2);
  g2[1].choice = DRK_MODFILE_PREC_INT;
  m.auto_groups = g2;
  CHECK(drk_modfile_write(&m, &b, &nb, err, sizeof err) == DRK_MODFILE_ERR_INVALID);
  CHECK_CONTAINS(err, "group 1 ('ln'): precision code 8 is not a choice");
  drk_modfile_auto_output_t o2[2] = {{"y", false, NAN}, {"zero", true, 0.0}};
  m.auto_groups = test_agroups, m.auto_outputs = o2;
  CHECK(drk_modfile_write(&m, &b, &nb, err, sizeof err) == DRK_MODFILE_ERR_INVALID);
  CHECK_CONTAINS(err, "output 0 ('y'): error nan");
}

/* ---- the FALLBACK section ---- */

/* Writes m with fallback f (its bytes) and reads it back, expecting `want` in the reader's
 * error (NULL: success; the parsed module is returned, else NULL). */
static drk_modfile_t *with_fallback(drk_modfile_t m, const drk_modfile_t *f, bool shares, const char *want, void **out,
                                    size_t *out_n) {
  char err[1024];
  void *fb = NULL, *a = NULL;
  size_t nfb = 0, na = 0;
  CHECK(drk_modfile_write(f, &fb, &nfb, err, sizeof err) == DRK_MODFILE_OK);
  m.fallback = fb, m.fallback_size = nfb, m.fallback_shares_weights = shares;
  CHECK(drk_modfile_write(&m, &a, &na, err, sizeof err) == DRK_MODFILE_OK);
  free(fb);
  drk_modfile_t *r = NULL;
  err[0] = 0;
  drk_modfile_result_t res = drk_modfile_read(a, na, NULL, &r, err, sizeof err);
  if (want) {
    CHECK(res == DRK_MODFILE_ERR_FORMAT && !r);
    CHECK_CONTAINS(err, want);
    free(a);
    return NULL;
  }
  CHECK(res == DRK_MODFILE_OK && r);
  if (!r) fprintf(stderr, "read: %s\n", err);
  *out = a, *out_n = na;
  return r;
}

static void test_fallback(drk_modfile_t m) {
  char err[1024];
  drk_modfile_t f = m; /* the portable plan: no weights of its own, other code and kernels */
  f.prov.targets = "sm_90";
  f.weights = NULL, f.weights_size = 0, f.weight_entries = NULL, f.n_weight_entries = 0;
  f.n_kernels = 2, f.precision_version = 0, f.kernel_precision = NULL, f.node_precision = NULL, f.n_node_precision = 0;
  f.arena_size = m.arena_size + 4096;
  void *a = NULL;
  size_t na = 0;
  drk_modfile_t *r = with_fallback(m, &f, true, NULL, &a, &na);
  if (r) {
    const drk_modfile_t *x = r->fallback_module;
    CHECK(x && r->fallback_shares_weights && r->fallback_size && x->n_kernels == 2 && !strcmp(x->prov.targets, "sm_90"));
    CHECK(x && x->weights == r->weights && x->weights_size == r->weights_size && x->n_weight_entries == r->n_weight_entries);
    CHECK(x && x->arena_size == m.arena_size + 4096 && x->n_inputs == r->n_inputs);
    void *b = NULL;
    size_t nb = 0;
    CHECK(drk_modfile_write(r, &b, &nb, err, sizeof err) == DRK_MODFILE_OK); /* reader output writes the same bytes */
    CHECK(nb == na && b && !memcmp(a, b, na));
    free(b);
    drk_module_t *rm = NULL;
    drk_status_t st = drk_module_load_memory(NULL, a, na, &rm);
    CHECK(!st && rm);
    if (rm) CHECK_CONTAINS(drk_module_provenance(rm), "; fallback for other devices: targets sm_90");
    if (rm) CHECK(!strcmp(drk_module_targets(rm), m.prov.targets));
    drk_module_destroy(rm);
    drk_status_destroy(st);
    /* a later FALLBACK version is skipped (the main plan still loads); unknown flags and a size
     * that disagrees with the section are errors */
    unsigned char *c = malloc(na), *e;
    memcpy(c, a, na);
    if ((e = sec_entry(c, 16))) {
      unsigned char *sec = c + rd64(e + 8);
      drk_modfile_t *y = NULL;
      wr32(sec, 2), fix_crcs(c);
      CHECK(drk_modfile_read(c, na, NULL, &y, err, sizeof err) == DRK_MODFILE_OK && y && !y->fallback_module && !y->fallback);
      drk_modfile_free(NULL, y), y = NULL;
      wr32(sec, 1), wr32(sec + 4, 3), fix_crcs(c);
      CHECK(drk_modfile_read(c, na, NULL, &y, err, sizeof err) == DRK_MODFILE_ERR_FORMAT && !y);
      CHECK_CONTAINS(err, "FALLBACK section: unknown flags 0x3");
      wr32(sec + 4, 1), wr64(sec + 8, rd64(sec + 8) - 8), fix_crcs(c);
      CHECK(drk_modfile_read(c, na, NULL, &y, err, sizeof err) == DRK_MODFILE_ERR_FORMAT && !y);
      CHECK_CONTAINS(err, "FALLBACK section: a ");
    } else {
      CHECK(!"no FALLBACK section in the module");
    }
    free(c);
    drk_modfile_free(NULL, r);
    free(a);
  }
  /* a fallback of its own weights (not shared) */
  drk_modfile_t g = m;
  g.prov.targets = "sm_90";
  if ((r = with_fallback(m, &g, false, NULL, &a, &na))) {
    CHECK(r->fallback_module && !r->fallback_shares_weights && r->fallback_module->weights != r->weights);
    CHECK(r->fallback_module && r->fallback_module->weights_size == m.weights_size);
    drk_modfile_free(NULL, r);
    free(a);
  }
  /* shares the weights but holds some; another arena offset for them; other inputs */
  with_fallback(m, &g, true, "it shares the weights but has its own", &a, &na);
  drk_modfile_t h = f;
  h.weights_offset = m.weights_offset + 256;
  with_fallback(m, &h, true, "it shares the weights but has its own, or puts them at another arena offset", &a, &na);
  drk_modfile_tensor_t in2 = m.inputs[0];
  in2.name = "other";
  h = f, h.inputs = &in2;
  with_fallback(m, &h, true, "its inputs and outputs are not the module's", &a, &na);
  /* a fallback with a fallback of its own */
  void *inner = NULL;
  size_t ninner = 0;
  CHECK(drk_modfile_write(&f, &inner, &ninner, err, sizeof err) == DRK_MODFILE_OK);
  h = f, h.fallback = inner, h.fallback_size = ninner, h.fallback_shares_weights = false;
  with_fallback(m, &h, true, "the fallback module has a FALLBACK section of its own", &a, &na);
  free(inner);
}

int main(int argc, char **argv) {
  char err[1024];
  /* checksums against their published check values */
  CHECK(drk_modfile_crc32(0, "123456789", 9) == 0xCBF43926u);
  {
    /* the 8-bytes-a-step path (4 KB and up) against the bytewise one, any length and offset,
     * chained across calls */
    enum { BIG = 3 * 4096 + 77 };
    static uint8_t buf[BIG];
    uint32_t x = 12345;
    for (size_t i = 0; i < BIG; i++) x = x * 1103515245u + 12345u, buf[i] = (uint8_t)(x >> 16);
    for (size_t off = 0; off < 9; off++)
      for (size_t len = 4090; len + off <= BIG; len += 1531) {
        uint32_t ref = 0;
        for (size_t i = 0; i < len; i++) ref = drk_modfile_crc32(ref, buf + off + i, 1);
        CHECK(drk_modfile_crc32(0, buf + off, len) == ref);
        CHECK(drk_modfile_crc32(drk_modfile_crc32(0, buf + off, 5000 < len ? 5000 : len / 2),
                                buf + off + (5000 < len ? 5000 : len / 2), len - (5000 < len ? 5000 : len / 2)) == ref);
      }
  }
  char hash[72];
  drk_modfile_sha256_string("abc", 3, hash);
  CHECK(!strcmp(hash, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  drk_modfile_sha256_string("", 0, hash);
  CHECK(!strcmp(hash, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
  {
    /* the x86 SHA extensions (where this CPU has them) against the portable rounds, lengths
     * around the block and padding edges */
    static uint8_t buf[1000];
    uint32_t x = 777;
    for (size_t i = 0; i < sizeof buf; i++) x = x * 1103515245u + 12345u, buf[i] = (uint8_t)(x >> 16);
    for (size_t len = 0; len <= sizeof buf; len += len < 130 ? 1 : 97) {
      uint8_t a[32], b[32];
      drk_modfile_sha256_impl(buf, len, a, false);
      drk_modfile_sha256_impl(buf, len, b, true);
      CHECK(!memcmp(a, b, 32));
    }
    uint8_t d[32];
    drk_modfile_sha256_impl("abc", 3, d, true);
    CHECK(d[0] == 0xba && d[31] == 0xad);
  }

  test_module_t t;
  test_module_init(&t, 0, 64 * 1024);
  /* Exercise every section: a TMA descriptor and param, a second image for another platform. */
  drk_modfile_kernel_t ks[3] = {t.k[0], t.k[1], t.k[1]};
  drk_modfile_param_t tp[2] = {t.p[1][0], {DRK_MODFILE_PARAM_TMA, 0, 0, 0, {0}, 0}};
  ks[2].name = "with_tma", ks[2].params = tp, ks[2].n_params = 2, ks[2].cluster[0] = ks[2].cluster[1] = ks[2].cluster[2] = 1;
  static const unsigned char hsaco[] = "\x7f" "ELF fake gfx942 code object";
  drk_modfile_image_t imgs[2] = {t.img, {DRK_MODFILE_IMAGE_HSACO, 0, "gfx942", hsaco, sizeof hsaco}};
  t.m.kernels = ks, t.m.n_kernels = 3;
  t.m.tmas = &t.tma, t.m.n_tmas = 1;
  t.m.images = imgs, t.m.n_images = 2;
  t.m.precision_version = DRK_MODFILE_PRECISION_VERSION;
  t.m.kernel_precision = test_kprec, t.m.node_precision = test_nprec, t.m.n_node_precision = 4;
  char model_hash[72];
  drk_modfile_sha256_string("model bytes", 11, model_hash);
  t.m.prov.model_hash = model_hash;

  void *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  CHECK(drk_modfile_write(&t.m, &a, &na, err, sizeof err) == DRK_MODFILE_OK);
  if (!a) { fprintf(stderr, "write failed: %s\n", err); return 1; }
  if (argc > 1) {
    FILE *f = fopen(argv[1], "wb");
    CHECK(f && fwrite(a, 1, na, f) == na);
    if (f) fclose(f);
  }
  drk_modfile_t *r = NULL;
  CHECK(drk_modfile_read(a, na, NULL, &r, err, sizeof err) == DRK_MODFILE_OK);
  if (!r) { fprintf(stderr, "read failed: %s\n", err); return 1; }
  check_same(&t.m, r);
  CHECK(drk_modfile_write(r, &b, &nb, err, sizeof err) == DRK_MODFILE_OK);
  CHECK(nb == na && b && !memcmp(a, b, na)); /* byte-exact */
  CHECK(((uintptr_t)r->weights - (uintptr_t)a) % 256 == 0);
  drk_modfile_free(NULL, r);
  free(b);
  { /* the blob built from the entries' data (weights NULL): the same bytes */
    drk_modfile_t m2 = t.m;
    drk_modfile_weight_t w2 = t.w;
    w2.data = t.weights, w2.data_size = t.w.size;
    m2.weights = NULL, m2.weight_entries = &w2;
    CHECK(drk_modfile_write(&m2, &b, &nb, err, sizeof err) == DRK_MODFILE_OK);
    CHECK(nb == na && b && !memcmp(a, b, na));
    free(b);
    w2.data_size = t.w.size + 1; /* more data than the range */
    CHECK(drk_modfile_write(&m2, &b, &nb, err, sizeof err) == DRK_MODFILE_ERR_INVALID);
    CHECK_CONTAINS(err, "bytes of data for a");
    w2.data = NULL; /* no data at all */
    CHECK(drk_modfile_write(&m2, &b, &nb, err, sizeof err) == DRK_MODFILE_ERR_INVALID);
    CHECK_CONTAINS(err, "weights is NULL");
  }

  test_precision(a, na, &t.m);
  test_auto(t.m);
  test_fallback(t.m);

  /* version mismatch: names both versions and the writer */
  unsigned char *c = malloc(na);
  memcpy(c, a, na);
  c[8] = 7;
  CHECK(drk_modfile_read(c, na, NULL, &r, err, sizeof err) == DRK_MODFILE_ERR_VERSION);
  CHECK_CONTAINS(err, "module format version 7");
  CHECK_CONTAINS(err, "reads format versions 1 and 2");
  CHECK_CONTAINS(err, "written by drkc 0.1.0");
  /* version 2 is for modules with shape buckets: one without its BUCKETS section is refused
   * (the header checksum made right, so the reader gets that far) */
  c[8] = 2;
  c[60] = c[61] = c[62] = c[63] = 0;
  {
    uint32_t crc = drk_modfile_crc32(0, c, 60);
    for (int i = 0; i < 4; i++) c[60 + i] = (unsigned char)(crc >> (8 * i));
  }
  CHECK(drk_modfile_read(c, na, NULL, &r, err, sizeof err) == DRK_MODFILE_ERR_FORMAT);
  CHECK_CONTAINS(err, "format version 2 without a BUCKETS section");
  c[8] = 7;
  drk_module_t *rm = NULL;
  drk_status_t st = drk_module_load_memory(NULL, c, na, &rm);
  CHECK(drk_status_code(st) == DRK_STATUS_VERSION_MISMATCH && rm == NULL);
  CHECK_CONTAINS(drk_status_message(st), "format version 7");
  drk_status_destroy(st);

  /* truncation at every length */
  for (size_t len = 0; len < na; len += (len < 128 ? 1 : 61)) {
    drk_modfile_result_t res = drk_modfile_read(a, len, NULL, &r, err, sizeof err);
    CHECK(res == DRK_MODFILE_ERR_FORMAT);
    if (res != DRK_MODFILE_ERR_FORMAT) { fprintf(stderr, "  length %zu accepted\n", len); break; }
  }
  CHECK(drk_modfile_read(a, na - 1, NULL, &r, err, sizeof err) == DRK_MODFILE_ERR_FORMAT);
  CHECK_CONTAINS(err, "truncated");

  /* every single-byte corruption is rejected, none crashes */
  size_t undetected = 0;
  for (size_t i = 0; i < na; i++) {
    memcpy(c, a, na);
    c[i] ^= 0x5a;
    r = NULL;
    drk_modfile_result_t res = drk_modfile_read(c, na, NULL, &r, err, sizeof err);
    if (res == DRK_MODFILE_OK) { undetected++; drk_modfile_free(NULL, r); if (undetected < 5) fprintf(stderr, "  flip at %zu undetected\n", i); }
  }
  CHECK(undetected == 0);
  /* a flip inside the weights names the section */
  memcpy(c, a, na);
  const unsigned char *wp = memchr(a, 0, 1); (void)wp;
  drk_modfile_read(a, na, NULL, &r, err, sizeof err);
  size_t woff = (size_t)((const unsigned char *)r->weights - (const unsigned char *)a);
  drk_modfile_free(NULL, r);
  c[woff + 5] ^= 1;
  CHECK(drk_modfile_read(c, na, NULL, &r, err, sizeof err) == DRK_MODFILE_ERR_FORMAT);
  CHECK_CONTAINS(err, "WEIGHTS");
  CHECK_CONTAINS(err, "checksum mismatch");
  st = drk_module_load_memory(NULL, c, na, &rm);
  CHECK(drk_status_code(st) == DRK_STATUS_BAD_MODULE);
  CHECK_CONTAINS(drk_status_message(st), "module in memory: section");
  drk_status_destroy(st);
  CHECK(drk_modfile_read("hello world, not a module", 25, NULL, &r, err, sizeof err) == DRK_MODFILE_ERR_FORMAT);
  free(c);

  /* the runtime's host-side module API on the good bytes */
  CHECK(drk_module_load_memory(NULL, a, na, &rm) == NULL);
  if (rm) {
    CHECK(drk_module_num_inputs(rm) == 1 && drk_module_num_outputs(rm) == 1 && drk_module_num_kernels(rm) == 3);
    drk_tensor_info_t info;
    CHECK(drk_module_output_info(rm, 0, &info) == NULL && !strcmp(info.name, "y") && info.size_bytes == TEST_N * 4 && info.dims[1] == TEST_N);
    st = drk_module_input_info(rm, 3, &info);
    CHECK(drk_status_code(st) == DRK_STATUS_INVALID_ARGUMENT);
    drk_status_destroy(st);
    CHECK(!strcmp(drk_module_kernel_name(rm, 2), "with_tma"));
    CHECK_CONTAINS(drk_module_provenance(rm), "drkc 0.1.0");
    CHECK_CONTAINS(drk_module_provenance(rm), model_hash);
    drk_module_destroy(rm);
  }
  st = drk_module_load_file(NULL, "/nonexistent/model.drkm", &rm);
  CHECK(drk_status_code(st) == DRK_STATUS_IO);
  CHECK_CONTAINS(drk_status_message(st), "/nonexistent/model.drkm");
  drk_status_destroy(st);

  { /* --weights=external: an empty WEIGHTS section and EXTERNAL_WEIGHTS (file, size, hash);
     * the module loads without its weights, runs nothing until it gets the right ones */
    drk_modfile_t mx = t.m;
    void *blob = NULL;
    size_t nblob = 0;
    CHECK(drk_modfile_weights_blob(&mx, &blob, &nblob) && nblob == mx.weights_size && !memcmp(blob, t.weights, nblob));
    drk_modfile_sha256(blob, nblob, mx.weights_sha256);
    mx.weights_file = "model.weights";
    void *x = NULL;
    size_t nx = 0;
    CHECK(drk_modfile_write(&mx, &x, &nx, err, sizeof err) == DRK_MODFILE_OK);
    CHECK(x && nx + mx.weights_size - 64 <= na); /* the blob is not in it */
    drk_modfile_t *rx = NULL;
    CHECK(x && drk_modfile_read(x, nx, NULL, &rx, err, sizeof err) == DRK_MODFILE_OK);
    if (rx) {
      CHECK(rx->weights == NULL && rx->weights_size == mx.weights_size && str_eq(rx->weights_file, "model.weights"));
      CHECK(!memcmp(rx->weights_sha256, mx.weights_sha256, 32));
      void *x2 = NULL;
      size_t nx2 = 0;
      CHECK(drk_modfile_write(rx, &x2, &nx2, err, sizeof err) == DRK_MODFILE_OK && nx2 == nx && !memcmp(x, x2, nx));
      free(x2);
      drk_modfile_free(NULL, rx);
    }
    drk_module_t *mm = NULL;
    drk_status_t sx = drk_module_load_memory(NULL, x, nx, &mm);
    CHECK(!sx && mm && str_eq(drk_module_weights_file(mm), "model.weights"));
    CHECK_CONTAINS(drk_module_provenance(mm), "(in model.weights)");
    if (mm) {
      sx = drk_module_set_weights(mm, blob, nblob - 1);
      CHECK(drk_status_code(sx) == DRK_STATUS_BAD_MODULE);
      CHECK_CONTAINS(drk_status_message(sx), "the module needs");
      drk_status_destroy(sx);
      ((unsigned char *)blob)[7] ^= 1;
      sx = drk_module_set_weights(mm, blob, nblob);
      CHECK(drk_status_code(sx) == DRK_STATUS_BAD_MODULE);
      CHECK_CONTAINS(drk_status_message(sx), "SHA-256");
      drk_status_destroy(sx);
      ((unsigned char *)blob)[7] ^= 1;
      CHECK(drk_module_set_weights(mm, blob, nblob) == NULL);
      sx = drk_module_load_weights(mm, "/nonexistent/model.weights");
      CHECK(drk_status_code(sx) == DRK_STATUS_IO);
      CHECK_CONTAINS(drk_status_message(sx), "/nonexistent/model.weights");
      drk_status_destroy(sx);
      drk_module_destroy(mm);
    }
    /* an EXTERNAL_WEIGHTS section of a version this reader does not know: refused (the weights would be missing) */
    unsigned char *c = malloc(nx);
    memcpy(c, x, nx);
    uint64_t table = rd64(c + 24);
    for (uint32_t i = 0; i < rd32(c + 32); i++) {
      unsigned char *e = c + table + 32 * (uint64_t)i;
      if (rd32(e) == 13) wr32(c + rd64(e + 8), 2);
    }
    fix_crcs(c);
    CHECK(drk_modfile_read(c, nx, NULL, &rx, err, sizeof err) == DRK_MODFILE_ERR_FORMAT);
    CHECK_CONTAINS(err, "EXTERNAL_WEIGHTS section version 2, this reader knows 1");
    free(c);
    mx.weights_file = "dir/model.weights";
    void *bad = NULL;
    CHECK(drk_modfile_write(&mx, &bad, &nx, err, sizeof err) == DRK_MODFILE_ERR_INVALID && !bad);
    CHECK_CONTAINS(err, "has a '/'");
    free(blob);
    free(x);
  }

  /* the writer refuses inconsistent descriptions */
  ks[0].slot = 9;
  CHECK(drk_modfile_write(&t.m, &b, &nb, err, sizeof err) == DRK_MODFILE_ERR_INVALID);
  CHECK_CONTAINS(err, "no image has code slot 9");
  ks[0].slot = 0;
  t.m.weights_offset = 100;
  CHECK(drk_modfile_write(&t.m, &b, &nb, err, sizeof err) == DRK_MODFILE_ERR_INVALID);
  CHECK_CONTAINS(err, "not a multiple of 256");

  free(a);
  test_module_fini(&t);
  if (!failures) printf("test_module: ok (%zu-byte module)\n", na);
  return check_status("test_module");
}
