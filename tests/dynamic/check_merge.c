/* Checks a module with shape buckets against exact-shape modules of its buckets, without a GPU:
 *
 *   check_merge DYNAMIC.drkm EXACT_0.drkm ... EXACT_{n-1}.drkm   (one per bucket, in bucket order,
 *                                                                 compiled with the same flags)
 *
 * Bucket b must launch what the exact module launches (kernel for kernel: grid, block, cluster,
 * shared memory, parameters), the code named by each launch must be the exact module's kernel or
 * one an earlier bucket holds under the name given, and every arena reference must land on the
 * same thing: a weight parameter on the same bytes of the merged weights blob, an activation (or
 * input, output, TMA base) at the same distance past the weights. This is what the merge in
 * pipeline/dynamic.c must preserve and what a wrong relocation would break silently. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/package/module.h"

static int fails;
#define FAIL(...) (fprintf(stderr, "FAIL: " __VA_ARGS__), fputc('\n', stderr), fails++)

static void *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *b = len > 0 ? malloc((size_t)len) : NULL;
  if (b && fread(b, 1, (size_t)len, f) != (size_t)len) free(b), b = NULL;
  fclose(f);
  *n = (size_t)len;
  return b;
}

static drk_modfile_t *load(const char *path, void **bytes) {
  size_t n = 0;
  char err[512];
  drk_modfile_t *m = NULL;
  *bytes = slurp(path, &n);
  if (!*bytes || drk_modfile_read(*bytes, n, NULL, &m, err, sizeof err)) {
    FAIL("%s: %s", path, *bytes ? err : "cannot read");
    return NULL;
  }
  return m;
}

static uint64_t align256(uint64_t x) { return (x + 255) & ~(uint64_t)255; }

/* Offset off (size bytes) of exact module e, seen in dynamic module d. */
static int same_place(const drk_modfile_t *d, uint64_t doff, const drk_modfile_t *e, uint64_t off, uint64_t size) {
  if (off < e->weights_size) {
    if (doff >= d->weights_size || size > d->weights_size - doff || size > e->weights_size - off) return 0;
    return !memcmp((const char *)d->weights + doff, (const char *)e->weights + off, (size_t)size);
  }
  return off >= align256(e->weights_size) && doff >= align256(d->weights_size) &&
         doff - align256(d->weights_size) == off - align256(e->weights_size);
}

static void check_bucket(const drk_modfile_t *d, uint32_t b, const drk_modfile_t *e, const char *epath) {
  const drk_modfile_bucket_t *B = &d->buckets[b];
  if (B->n_kernels != e->n_kernels) {
    FAIL("bucket %u: %u kernels, %s has %u", b, B->n_kernels, epath, e->n_kernels);
    return;
  }
  if (B->arena_size - align256(d->weights_size) != e->arena_size - align256(e->weights_size))
    FAIL("bucket %u: activation arena %llu bytes, %s's %llu", b, (unsigned long long)(B->arena_size - align256(d->weights_size)),
         epath, (unsigned long long)(e->arena_size - align256(e->weights_size)));
  for (uint32_t i = 0; i < B->n_kernels; i++) {
    const drk_modfile_kernel_t *k = &d->kernels[B->first_kernel + i], *x = &e->kernels[i];
    if (memcmp(k->grid, x->grid, sizeof k->grid) || memcmp(k->block, x->block, sizeof k->block) ||
        memcmp(k->cluster, x->cluster, sizeof k->cluster) || k->dyn_smem != x->dyn_smem || k->n_params != x->n_params) {
      FAIL("bucket %u kernel %u (%s): launch differs from %s's %s", b, i, k->name, epath, x->name);
      continue;
    }
    if (k->slot == b && strcmp(k->name, x->name)) FAIL("bucket %u kernel %u: %s, %s has %s", b, i, k->name, epath, x->name);
    if (k->slot > b) FAIL("bucket %u kernel %u (%s): code in the later slot %u", b, i, k->name, k->slot);
    if (k->slot < b) { /* shared: an earlier bucket's kernel of that name */
      const drk_modfile_bucket_t *S = &d->buckets[k->slot];
      int found = 0;
      for (uint32_t j = S->first_kernel; j < S->first_kernel + S->n_kernels; j++)
        found |= d->kernels[j].slot == k->slot && !strcmp(d->kernels[j].name, k->name);
      if (!found) FAIL("bucket %u kernel %u: shared code %s is no kernel of bucket %u", b, i, k->name, k->slot);
    }
    for (uint32_t p = 0; p < k->n_params; p++) {
      const drk_modfile_param_t *a = &k->params[p], *y = &x->params[p];
      int ok = a->kind == y->kind;
      if (ok && a->kind == DRK_MODFILE_PARAM_BUFFER) ok = a->size == y->size && same_place(d, a->offset, e, y->offset, y->size);
      if (ok && a->kind == DRK_MODFILE_PARAM_SCALAR) ok = a->scalar_size == y->scalar_size && !memcmp(a->scalar, y->scalar, 8);
      if (ok && a->kind == DRK_MODFILE_PARAM_TMA) {
        drk_modfile_tma_t t = d->tmas[a->tma], u = e->tmas[y->tma];
        ok = same_place(d, t.offset, e, u.offset, 0);
        t.offset = u.offset = 0;
        ok = ok && !memcmp(&t, &u, sizeof t);
      }
      if (!ok) FAIL("bucket %u kernel %u (%s) parameter %u: not the exact module's", b, i, k->name, p);
    }
  }
  uint32_t ni = d->n_inputs / d->n_buckets, no = d->n_outputs / d->n_buckets;
  if (ni != e->n_inputs || no != e->n_outputs) {
    FAIL("bucket %u: %u inputs and %u outputs, %s has %u and %u", b, ni, no, epath, e->n_inputs, e->n_outputs);
    return;
  }
  for (uint32_t t = 0; t < ni + no; t++) {
    const drk_modfile_tensor_t *a = t < ni ? &d->inputs[b * ni + t] : &d->outputs[b * no + t - ni];
    const drk_modfile_tensor_t *y = t < ni ? &e->inputs[t] : &e->outputs[t - ni];
    if (strcmp(a->name, y->name) || a->rank != y->rank || memcmp(a->dims, y->dims, sizeof a->dims) || a->size != y->size ||
        !same_place(d, a->offset, e, y->offset, 0))
      FAIL("bucket %u tensor %u (%s): not the exact module's", b, t, a->name);
  }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: check_merge DYNAMIC.drkm EXACT_0.drkm ...\n");
    return 2;
  }
  void *db = NULL;
  drk_modfile_t *d = load(argv[1], &db);
  if (!d) return 1;
  if (d->n_buckets != (uint32_t)(argc - 2)) FAIL("%s has %u buckets, %d exact modules given", argv[1], d->n_buckets, argc - 2);
  uint32_t shared = 0;
  for (uint32_t b = 0; b < d->n_buckets && b + 2 < (uint32_t)argc; b++) {
    void *eb = NULL;
    drk_modfile_t *e = load(argv[b + 2], &eb);
    if (e) check_bucket(d, b, e, argv[b + 2]);
    for (uint32_t k = d->buckets[b].first_kernel; k < d->buckets[b].first_kernel + d->buckets[b].n_kernels; k++)
      shared += d->kernels[k].slot != b;
    drk_modfile_free(NULL, e);
    free(eb);
  }
  printf("%s: %u buckets against their exact-shape modules: %s (%u launches run shared code)\n", argv[1], d->n_buckets,
         fails ? "FAILED" : "same launches, code and arena references", shared);
  drk_modfile_free(NULL, d);
  free(db);
  return fails ? 1 : 0;
}
