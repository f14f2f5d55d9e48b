/* Host-side modules: reads a .drkm through the package reader and answers questions about
 * it. Needs no GPU driver, so tools can inspect modules anywhere. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "runtime/src/internal.h"

static drk_status_t from_modfile(const drk_allocator_t *a, drk_modfile_result_t r, const char *err) {
  switch (r) {
  case DRK_MODFILE_OK: return NULL;
  case DRK_MODFILE_ERR_VERSION: return drk_rt_status(a, DRK_STATUS_VERSION_MISMATCH, "%s", err);
  case DRK_MODFILE_ERR_NOMEM: return drk_rt_status(a, DRK_STATUS_OUT_OF_MEMORY, "%s", err);
  default: return drk_rt_status(a, DRK_STATUS_BAD_MODULE, "%s", err);
  }
}

static drk_status_t finish(const drk_allocator_t *alloc, const void *data, size_t size, void *owned,
                           drk_module_t **out) {
  alloc = drk_rt_allocator(alloc);
  drk_module_t *m = drk_rt_alloc(alloc, sizeof *m, 16);
  if (!m) return drk_rt_status(alloc, DRK_STATUS_OUT_OF_MEMORY, "out of memory for the module object");
  char err[1024] = "";
  drk_modfile_result_t r = drk_modfile_read(data, size, alloc, &m->mf, err, sizeof err);
  if (r) {
    drk_rt_free(alloc, m, sizeof *m);
    return from_modfile(alloc, r, err);
  }
  m->alloc = *alloc;
  m->owned = owned;
  m->owned_size = owned ? size : 0;
  const drk_modfile_provenance_t *p = &m->mf->prov;
  snprintf(m->provenance, sizeof m->provenance, "drkc %s; targets %s; model %s; %u kernels, %" PRIu64 " weight bytes, arena %" PRIu64 " bytes",
           *p->drkc_version ? p->drkc_version : "?", *p->targets ? p->targets : "?",
           *p->model_hash ? p->model_hash : "?", m->mf->n_kernels, m->mf->weights_size, m->mf->arena_size);
  if (m->mf->fallback_module) {
    drk_module_t *fb = drk_rt_alloc(alloc, sizeof *fb, 16);
    if (!fb) {
      drk_modfile_free(alloc, m->mf);
      drk_rt_free(alloc, m, sizeof *m);
      return drk_rt_status(alloc, DRK_STATUS_OUT_OF_MEMORY, "out of memory for the module object");
    }
    fb->alloc = *alloc;
    fb->mf = m->mf->fallback_module;
    size_t pl = strlen(m->provenance);
    memcpy(fb->provenance, m->provenance, pl + 1);
    snprintf(fb->provenance + pl, sizeof fb->provenance - pl, "; the fallback plan: targets %s, %u kernels",
             *fb->mf->prov.targets ? fb->mf->prov.targets : "?", fb->mf->n_kernels);
    m->fallback = fb;
    size_t len = strlen(m->provenance);
    snprintf(m->provenance + len, sizeof m->provenance - len, "; fallback for other devices: targets %s",
             *fb->mf->prov.targets ? fb->mf->prov.targets : "?");
  }
  if (m->mf->weights_file) {
    size_t len = strlen(m->provenance);
    snprintf(m->provenance + len, sizeof m->provenance - len, " (in %s)", m->mf->weights_file);
  }
  *out = m;
  return NULL;
}

drk_status_t drk_module_load_memory(const drk_allocator_t *alloc, const void *data, size_t size,
                                    drk_module_t **out_module) {
  if (!out_module || (!data && size)) return drk_rt_status(alloc, DRK_STATUS_INVALID_ARGUMENT, "drk_module_load_memory: NULL argument");
  return drk_rt_status_wrap(finish(alloc, data, size, NULL, out_module), "module in memory");
}

drk_status_t drk_module_load_file(const drk_allocator_t *alloc, const char *path, drk_module_t **out_module) {
  if (!path || !out_module) return drk_rt_status(alloc, DRK_STATUS_INVALID_ARGUMENT, "drk_module_load_file: NULL argument");
  FILE *f = fopen(path, "rb");
  if (!f) return drk_rt_status(alloc, DRK_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
  long size = -1;
  if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
  if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return drk_rt_status(alloc, DRK_STATUS_IO, "%s: cannot determine the file size", path);
  }
  /* 256-byte alignment keeps weights and images at the alignment the format gives them. */
  void *data = drk_rt_alloc(alloc, (size_t)size, 256);
  if (!data) {
    fclose(f);
    return drk_rt_status(alloc, DRK_STATUS_OUT_OF_MEMORY, "%s: out of memory reading %ld bytes", path, size);
  }
  size_t got = fread(data, 1, (size_t)size, f);
  fclose(f);
  if (got != (size_t)size) {
    drk_rt_free(alloc, data, (size_t)size);
    return drk_rt_status(alloc, DRK_STATUS_IO, "%s: short read (%zu of %ld bytes)", path, got, size);
  }
  drk_status_t st = finish(alloc, data, (size_t)size, data, out_module);
  if (st) drk_rt_free(alloc, data, (size_t)size);
  return drk_rt_status_wrap(st, "%s", path);
}

const char *drk_module_weights_file(const drk_module_t *m) { return m ? m->mf->weights_file : NULL; }

drk_status_t drk_module_set_weights(drk_module_t *m, const void *data, size_t size) {
  if (!m || (!data && size)) return drk_rt_status(m ? &m->alloc : NULL, DRK_STATUS_INVALID_ARGUMENT, "drk_module_set_weights: NULL argument");
  const drk_modfile_t *mf = m->mf;
  if (!mf->weights_file)
    return drk_rt_status(&m->alloc, DRK_STATUS_INVALID_ARGUMENT, "drk_module_set_weights: the module's weights are in the module itself");
  if (size != mf->weights_size)
    return drk_rt_status(&m->alloc, DRK_STATUS_BAD_MODULE, "weights for %s: %zu bytes, the module needs %" PRIu64 " (another build's weights?)", mf->weights_file, size, mf->weights_size);
  uint8_t h[32];
  drk_modfile_sha256(data, size, h);
  if (memcmp(h, mf->weights_sha256, 32) != 0)
    return drk_rt_status(&m->alloc, DRK_STATUS_BAD_MODULE, "weights for %s: their SHA-256 is not the one the module records (another build's weights, or a corrupted file)", mf->weights_file);
  m->mf->weights = data;
  if (m->fallback && m->mf->fallback_shares_weights) m->fallback->mf->weights = data;
  return NULL;
}

drk_status_t drk_module_load_weights(drk_module_t *m, const char *path) {
  if (!m) return drk_rt_status(NULL, DRK_STATUS_INVALID_ARGUMENT, "drk_module_load_weights: NULL module");
  if (!m->mf->weights_file)
    return drk_rt_status(&m->alloc, DRK_STATUS_INVALID_ARGUMENT, "drk_module_load_weights: the module's weights are in the module itself");
  if (!path) path = m->mf->weights_file;
  FILE *f = fopen(path, "rb");
  if (!f) return drk_rt_status(&m->alloc, DRK_STATUS_IO, "%s: cannot open the module's weights: %s", path, strerror(errno));
  long size = -1;
  if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
  if (size < 0 || fseek(f, 0, SEEK_SET) != 0 || (uint64_t)size != m->mf->weights_size) {
    fclose(f);
    return drk_rt_status(&m->alloc, DRK_STATUS_BAD_MODULE, "%s: %ld bytes, the module needs %" PRIu64 " (another build's weights?)", path, size, m->mf->weights_size);
  }
  /* 256-byte alignment, as the blob has inside a module */
  void *data = drk_rt_alloc(&m->alloc, size ? (size_t)size : 1, 256);
  if (!data) {
    fclose(f);
    return drk_rt_status(&m->alloc, DRK_STATUS_OUT_OF_MEMORY, "%s: out of memory reading %ld bytes", path, size);
  }
  size_t got = fread(data, 1, (size_t)size, f);
  fclose(f);
  drk_status_t st = got == (size_t)size ? drk_module_set_weights(m, data, (size_t)size)
                                        : drk_rt_status(&m->alloc, DRK_STATUS_IO, "%s: short read (%zu of %ld bytes)", path, got, size);
  if (st) {
    drk_rt_free(&m->alloc, data, size ? (size_t)size : 1);
    return drk_rt_status_wrap(st, "%s", path);
  }
  drk_rt_free(&m->alloc, m->weights_owned, m->weights_owned_size);
  m->weights_owned = data;
  m->weights_owned_size = size ? (size_t)size : 1;
  return NULL;
}

void drk_module_destroy(drk_module_t *m) {
  if (!m) return;
  drk_allocator_t a = m->alloc;
  drk_rt_free(&a, m->fallback, sizeof *m->fallback);
  drk_modfile_free(&a, m->mf);
  drk_rt_free(&a, m->owned, m->owned_size);
  drk_rt_free(&a, m->weights_owned, m->weights_owned_size);
  drk_rt_free(&a, m, sizeof *m);
}

/* With buckets the tables hold every bucket's tensors; the graph's are one bucket's. */
static uint32_t n_buckets(const drk_module_t *m) { return m->mf->n_buckets ? m->mf->n_buckets : 1; }
size_t drk_module_num_inputs(const drk_module_t *m) { return m ? drk_modfile_user_inputs(m->mf) : 0; }
size_t drk_module_num_outputs(const drk_module_t *m) { return m ? m->mf->n_outputs / n_buckets(m) : 0; }
size_t drk_module_num_kernels(const drk_module_t *m) { return m ? m->mf->n_kernels : 0; }

static drk_status_t tensor_info(const drk_module_t *m, size_t index, drk_tensor_info_t *out, int output) {
  size_t n = output ? drk_module_num_outputs(m) : drk_module_num_inputs(m);
  if (!m || !out || index >= n)
    return drk_rt_status(m ? &m->alloc : NULL, DRK_STATUS_INVALID_ARGUMENT, "%s index %zu out of range (module has %zu)", output ? "output" : "input", index, n);
  /* the largest bucket's (the last: every dim at its range's end) */
  size_t last = (n_buckets(m) - 1) * ((output ? m->mf->n_outputs : m->mf->n_inputs) / n_buckets(m));
  const drk_modfile_tensor_t *t = output ? &m->mf->outputs[last + index] : &m->mf->inputs[last + index];
  drk_tensor_info_t info = {t->name, t->dtype, t->rank, {0}, t->size};
  for (uint32_t d = 0; d < t->rank && d < DRK_TENSOR_MAX_RANK; d++) info.dims[d] = t->dims[d];
  *out = info;
  return NULL;
}

drk_status_t drk_module_input_info(const drk_module_t *m, size_t index, drk_tensor_info_t *out_info) { return tensor_info(m, index, out_info, 0); }
drk_status_t drk_module_output_info(const drk_module_t *m, size_t index, drk_tensor_info_t *out_info) { return tensor_info(m, index, out_info, 1); }
const char *drk_module_targets(const drk_module_t *m) { return m ? m->mf->prov.targets : ""; }
const char *drk_module_kernel_name(const drk_module_t *m, size_t index) { return m && index < m->mf->n_kernels ? m->mf->kernels[index].name : NULL; }
const char *drk_module_provenance(const drk_module_t *m) { return m ? m->provenance : ""; }

size_t drk_module_num_dynamic_dims(const drk_module_t *m) { return m ? m->mf->n_dyn_dims : 0; }
size_t drk_module_num_buckets(const drk_module_t *m) { return m ? n_buckets(m) : 0; }

int drk_module_dynamic_axis(const drk_module_t *m, int output, size_t index, uint32_t axis) {
  if (!m) return -1;
  size_t t = output ? m->mf->n_inputs / n_buckets(m) + index : index;
  for (uint32_t j = 0; j < m->mf->n_dyn_axes; j++)
    if (m->mf->dyn_axes[j].tensor == t && m->mf->dyn_axes[j].axis == axis) return (int)m->mf->dyn_axes[j].dim;
  return -1;
}

const char *drk_module_dynamic_dim(const drk_module_t *m, size_t i, int64_t *out_lo, int64_t *out_hi) {
  if (!m || i >= m->mf->n_dyn_dims) return NULL;
  if (out_lo) *out_lo = m->mf->dyn_dims[i].lo;
  if (out_hi) *out_hi = m->mf->dyn_dims[i].hi;
  return m->mf->dyn_dims[i].name;
}

drk_status_t drk_module_bucket_info(const drk_module_t *m, size_t b, int64_t *out_sizes, size_t *out_first_kernel,
                                    size_t *out_n_kernels) {
  if (!m || b >= n_buckets(m))
    return drk_rt_status(m ? &m->alloc : NULL, DRK_STATUS_INVALID_ARGUMENT, "bucket %zu out of range (module has %zu)", b,
                         m ? (size_t)n_buckets(m) : 0);
  const drk_modfile_t *mf = m->mf;
  for (uint32_t d = 0; out_sizes && d < mf->n_dyn_dims; d++) out_sizes[d] = mf->buckets[b].size[d];
  if (out_first_kernel) *out_first_kernel = mf->n_buckets ? mf->buckets[b].first_kernel : 0;
  if (out_n_kernels) *out_n_kernels = mf->n_buckets ? mf->buckets[b].n_kernels : mf->n_kernels;
  return NULL;
}
