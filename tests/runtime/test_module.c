/* Module file tests: write -> read round trip of every section (fields and bytes), the
 * version-mismatch message, truncated and corrupted files (every single-byte flip must be
 * rejected), writer validation, the checksums' reference values, and the runtime's status
 * codes for the same cases. argv[1] (optional): where to save the module as a fuzz seed. */
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
}

int main(int argc, char **argv) {
  char err[1024];
  /* checksums against their published check values */
  CHECK(drk_modfile_crc32(0, "123456789", 9) == 0xCBF43926u);
  char hash[72];
  drk_modfile_sha256_string("abc", 3, hash);
  CHECK(!strcmp(hash, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  drk_modfile_sha256_string("", 0, hash);
  CHECK(!strcmp(hash, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));

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

  /* version mismatch: names both versions and the writer */
  unsigned char *c = malloc(na);
  memcpy(c, a, na);
  c[8] = 7;
  CHECK(drk_modfile_read(c, na, NULL, &r, err, sizeof err) == DRK_MODFILE_ERR_VERSION);
  CHECK_CONTAINS(err, "module format version 7");
  CHECK_CONTAINS(err, "reads format version 1");
  CHECK_CONTAINS(err, "written by drkc 0.1.0");
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
  if (g_failures) fprintf(stderr, "test_module: %d failures\n", g_failures);
  else printf("test_module: ok (%zu-byte module)\n", na);
  return g_failures ? 1 : 0;
}
