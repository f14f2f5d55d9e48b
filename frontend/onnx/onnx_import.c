/* ONNX importer: model, graph inputs/outputs, initializers (raw_data, typed fields, external
 * data), value types. Nodes are converted by onnx_opset.c.
 *
 * Requires: protobuf-c code generated from the system's onnx.proto. Guarantees: any byte
 * string gives either a graph or errors through the diagnostics, never a crash or leak;
 * weights are not copied (constants point into the unpacked message or external-data
 * mmaps, both kept as graph blobs), except where a narrowing typed field or a misaligned
 * external offset forces a conversion. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_import.h"
#include "onnx_internal.h"
#include "onnx_unpack.h"

/* ---- string map ---- */

void drk_onnx_map_init(drk_onnx_map_t *m, drk_arena_t *a) {
  memset(m, 0, sizeof *m);
  m->arena = a;
}

static size_t map_slot(const drk_onnx_map_t *m, const char *key) {
  size_t mask = m->cap - 1;
  size_t i = (size_t)drk_hash_fnv1a(key, strlen(key), 0) & mask;
  while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & mask;
  return i;
}

void *drk_onnx_map_get(const drk_onnx_map_t *m, const char *key) {
  if (!m->cap) return NULL;
  size_t i = map_slot(m, key);
  return m->keys[i] ? m->vals[i] : NULL;
}

bool drk_onnx_map_put(drk_onnx_map_t *m, const char *key, void *val) {
  if ((m->n + 1) * 2 > m->cap) {
    drk_onnx_map_t old = *m;
    m->cap = old.cap ? old.cap * 2 : 64;
    m->keys = drk_arena_alloc(m->arena, m->cap * sizeof *m->keys);
    m->vals = drk_arena_alloc(m->arena, m->cap * sizeof *m->vals);
    for (size_t i = 0; i < old.cap; i++)
      if (old.keys[i]) {
        size_t j = map_slot(m, old.keys[i]);
        m->keys[j] = old.keys[i];
        m->vals[j] = old.vals[i];
      }
  }
  size_t i = map_slot(m, key);
  if (m->keys[i]) return false;
  m->keys[i] = key;
  m->vals[i] = val;
  m->n++;
  return true;
}

/* ---- context helpers ---- */

bool drk_onnx_is_known(const drk_onnx_ctx_t *c, const drk_value_t *v) {
  return v && v->id < c->cap_known && c->dtype_known[v->id];
}

void drk_onnx_set_known(drk_onnx_ctx_t *c, const drk_value_t *v) {
  if (v->id >= c->cap_known) {
    size_t cap = c->cap_known;
    c->dtype_known = drk_arena_grow(c->scratch, c->dtype_known, sizeof(bool), &cap, (size_t)v->id + 1);
    for (size_t i = c->cap_known; i < cap; i++) c->dtype_known[i] = false;
    c->cap_known = cap;
  }
  c->dtype_known[v->id] = true;
}

/* Not a name of the model (every node output is reserved before the nodes are imported, see
 * drk_onnx_import_buffer) nor one made earlier: the graph's name index decides. */
const char *drk_onnx_fresh_name(drk_onnx_ctx_t *c, const char *hint) {
  for (;;) {
    const char *s = drk_arena_printf(c->scratch, "%s__%u", hint && *hint ? hint : "t", c->fresh++);
    if (!drk_onnx_map_get(&c->values, s) && !drk_graph_name_taken(c->g, s)) {
      drk_graph_reserve_name(c->g, s);
      return s;
    }
  }
}

int64_t drk_onnx_domain_opset(const drk_onnx_ctx_t *c, const char *domain) {
  bool want_default = !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
  for (size_t i = 0; i < c->model->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = c->model->opset_import[i];
    bool is_default = !o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0;
    if (want_default ? is_default : (o->domain && strcmp(o->domain, domain) == 0))
      return o->has_version ? o->version : -1;
  }
  return -1;
}

static drk_loc_t file_loc(const drk_onnx_ctx_t *c) {
  drk_loc_t l = drk_loc_none;
  l.file = c->file;
  return l;
}

/* ---- tensors ---- */

const char *drk_onnx_dtype_name(int code) {
  static const char *const names[] = {
      "UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64",
      "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128",
      "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",
      "INT4", "FLOAT4E2M1", "FLOAT8E8M0", "UINT2", "INT2"};
  if (code >= 0 && (size_t)code < DRK_ARRAY_LEN(names)) return names[code];
  return "<invalid>";
}

bool drk_onnx_tensor_decode(const Onnx__TensorProto *t, drk_arena_t *a, drk_onnx_tensor_t *out,
                            char *err, size_t errn) {
  int code = t->has_data_type ? t->data_type : 0;
  drk_onnx_tensor_t r = {0};
  if (!drk_dtype_from_onnx(code, &r.dtype)) {
    snprintf(err, errn, "unsupported dtype %s (code %d)", drk_onnx_dtype_name(code), code);
    return false;
  }
  if (t->segment) {
    snprintf(err, errn, "unsupported segmented tensor");
    return false;
  }
  if (t->n_dims > DRK_ONNX_MAX_RANK) {
    snprintf(err, errn, "tensor rank %zu exceeds %d", t->n_dims, DRK_ONNX_MAX_RANK);
    return false;
  }
  r.rank = (int)t->n_dims;
  r.dims = t->dims;
  r.numel = 1;
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0) {
      snprintf(err, errn, "tensor dim %zu is negative (%lld)", i, (long long)t->dims[i]);
      return false;
    }
    if (__builtin_mul_overflow(r.numel, t->dims[i], &r.numel) || r.numel > ((int64_t)1 << 56)) {
      snprintf(err, errn, "tensor element count overflows");
      return false;
    }
  }
  r.nbytes = drk_dtype_nbytes(r.dtype, r.numel);
  if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    r.external = true;
    *out = r;
    return true;
  }
  if (t->has_raw_data) {
    if (t->raw_data.len != r.nbytes) {
      snprintf(err, errn, "raw_data holds %zu bytes, expected %zu for %s[%lld]", t->raw_data.len,
               r.nbytes, drk_dtype_name(r.dtype), (long long)r.numel);
      return false;
    }
    r.data = r.nbytes ? t->raw_data.data : NULL;
    *out = r;
    return true;
  }
  size_t have = 0, want = (size_t)r.numel;
  const char *field = "";
  switch (r.dtype) {
  case DRK_DT_F32: have = t->n_float_data; field = "float_data"; r.data = t->float_data; break;
  case DRK_DT_F64: have = t->n_double_data; field = "double_data"; r.data = t->double_data; break;
  case DRK_DT_I64: have = t->n_int64_data; field = "int64_data"; r.data = t->int64_data; break;
  case DRK_DT_I32: have = t->n_int32_data; field = "int32_data"; r.data = t->int32_data; break;
  default: have = t->n_int32_data; field = "int32_data"; break;
  }
  bool packed4 = r.dtype == DRK_DT_I4 || r.dtype == DRK_DT_U4;
  if (packed4) want = r.nbytes; /* ONNX packs two 4-bit values per int32_data entry */
  if (have != want) {
    size_t any = t->n_float_data + t->n_double_data + t->n_int64_data + t->n_int32_data +
                 t->n_uint64_data + t->n_string_data;
    if (any == 0)
      snprintf(err, errn, "tensor has no data (expected %zu %s values)", want, drk_dtype_name(r.dtype));
    else
      snprintf(err, errn, "tensor holds %zu values in %s, expected %zu for %s", have, field, want,
               drk_dtype_name(r.dtype));
    return false;
  }
  if (r.data == NULL && want > 0) { /* narrowing from int32_data */
    int bytes = packed4 ? 1 : drk_dtype_bits(r.dtype) / 8;
    uint8_t *p = drk_arena_alloc(a, r.nbytes);
    for (size_t i = 0; i < want; i++) {
      uint32_t v = (uint32_t)t->int32_data[i];
      if (r.dtype == DRK_DT_BOOL) v = v != 0;
      if (bytes == 1) p[i] = (uint8_t)v;
      else {
        uint16_t h = (uint16_t)v;
        memcpy(p + 2 * i, &h, 2);
      }
    }
    r.data = p;
  }
  if (want == 0) r.data = NULL;
  *out = r;
  return true;
}

static void release_mmap(void *base, size_t size) { munmap(base, size); }
static void release_model(void *base, size_t size) {
  (void)size;
  onnx__model_proto__free_unpacked(base, NULL);
}

static bool parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s) return false;
  uint64_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return false;
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*s - '0'), &v)) return false;
  }
  *out = v;
  return true;
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

static const void *external_data(drk_onnx_ctx_t *c, const Onnx__TensorProto *t, const drk_onnx_tensor_t *dt,
                                 const char *name, drk_loc_t loc) {
  const char *location = NULL, *offset_s = NULL, *length_s = NULL;
  for (size_t i = 0; i < t->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = t->external_data[i];
    if (!e->key) continue;
    if (strcmp(e->key, "location") == 0) location = e->value;
    else if (strcmp(e->key, "offset") == 0) offset_s = e->value;
    else if (strcmp(e->key, "length") == 0) length_s = e->value;
  }
  if (!location || !*location) {
    drk_diag_error(c->d, loc, "tensor '%s': external data without a 'location'", name);
    return NULL;
  }
  if (!c->base_dir) {
    drk_diag_error(c->d, loc, "tensor '%s': external data '%s' needs the model's directory (model loaded from memory)",
                   name, location);
    return NULL;
  }
  if (path_escapes(location)) {
    drk_diag_error(c->d, loc, "tensor '%s': external data location '%s' leaves the model's directory", name,
                   location);
    return NULL;
  }
  uint64_t offset = 0, length = 0;
  if (offset_s && !parse_u64(offset_s, &offset)) {
    drk_diag_error(c->d, loc, "tensor '%s': bad external data offset '%s'", name, offset_s);
    return NULL;
  }
  if (length_s && !parse_u64(length_s, &length)) {
    drk_diag_error(c->d, loc, "tensor '%s': bad external data length '%s'", name, length_s);
    return NULL;
  }
  if (length_s && length != dt->nbytes) {
    drk_diag_error(c->d, loc, "tensor '%s': external data length %llu, expected %zu bytes for %s[%lld]", name,
                   (unsigned long long)length, dt->nbytes, drk_dtype_name(dt->dtype), (long long)dt->numel);
    return NULL;
  }
  const char *path = drk_arena_printf(c->scratch, "%s/%s", c->base_dir, location);
  drk_onnx_ext_t *x = NULL;
  for (size_t i = 0; i < c->n_ext; i++)
    if (strcmp(c->ext[i].path, path) == 0) x = &c->ext[i];
  if (!x) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      int e = fd < 0 ? errno : EINVAL;
      if (fd >= 0) close(fd);
      drk_diag_error(c->d, loc, "tensor '%s': cannot open external data file '%s': %s", name, path, strerror(e));
      return NULL;
    }
    void *base = NULL;
    size_t size = (size_t)st.st_size;
    if (size > 0) {
      base = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (base == MAP_FAILED) {
        int e = errno;
        close(fd);
        drk_diag_error(c->d, loc, "tensor '%s': cannot map external data file '%s': %s", name, path, strerror(e));
        return NULL;
      }
      drk_graph_add_blob(c->g, base, size, release_mmap);
    }
    close(fd);
    drk_onnx_ext_t nx = {drk_arena_strdup(c->scratch, path), base, size};
    DRK_VEC_PUSH(c->scratch, c->ext, c->n_ext, c->cap_ext, nx);
    x = &c->ext[c->n_ext - 1];
  }
  if (offset > x->size || dt->nbytes > x->size - offset) {
    drk_diag_error(c->d, loc, "tensor '%s': external data [%llu, +%zu) is outside '%s' (%zu bytes)", name,
                   (unsigned long long)offset, dt->nbytes, path, x->size);
    return NULL;
  }
  if (dt->nbytes == 0) return "";
  const uint8_t *p = (const uint8_t *)x->base + offset;
  size_t align = (size_t)drk_dtype_bits(dt->dtype) / 8;
  if (align > 8) align = 8;
  /* Consumers read elements through typed pointers; copy rather than hand out a misaligned one. */
  if (align > 1 && ((uintptr_t)p % align) != 0) return drk_arena_memdup(c->g->arena, p, dt->nbytes);
  return p;
}

drk_value_t *drk_onnx_tensor_value(drk_onnx_ctx_t *c, const Onnx__TensorProto *t, const char *name,
                                   bool listed, drk_loc_t loc) {
  drk_onnx_tensor_t dt;
  char err[256];
  if (!drk_onnx_tensor_decode(t, c->g->arena, &dt, err, sizeof err)) {
    drk_diag_error(c->d, loc, "tensor '%s': %s", name, err);
    return NULL;
  }
  const void *data = dt.data;
  if (dt.external && !(data = external_data(c, t, &dt, name, loc))) return NULL;
  if (dt.nbytes == 0) data = NULL;
  drk_shape_t s = drk_graph_shape_static(c->g, dt.rank, dt.dims);
  drk_value_t *v = listed ? drk_graph_add_const(c->g, name, dt.dtype, s, data, dt.nbytes)
                          : drk_graph_new_const_value(c->g, name, dt.dtype, s, data, dt.nbytes);
  v->loc = loc;
  drk_onnx_set_known(c, v);
  return v;
}

/* ---- types ---- */

bool drk_onnx_apply_type(drk_onnx_ctx_t *c, drk_value_t *v, const Onnx__ValueInfoProto *vi, drk_loc_t loc) {
  const Onnx__TypeProto *tp = vi ? vi->type : NULL;
  if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) return true;
  if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
    const char *what = tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE   ? "sequence"
                       : tp->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE      ? "map"
                       : tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE ? "optional"
                       : tp->value_case == ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE ? "sparse tensor"
                                                                                    : "non-tensor";
    drk_diag_error(c->d, loc, "unsupported %s type of value '%s'", what, v->name);
    return false;
  }
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  if (tt->has_elem_type && tt->elem_type != 0) {
    drk_dtype_t dt;
    if (!drk_dtype_from_onnx(tt->elem_type, &dt)) {
      drk_diag_error(c->d, loc, "unsupported dtype %s of value '%s'", drk_onnx_dtype_name(tt->elem_type), v->name);
      return false;
    }
    if (v->kind != DRK_VALUE_CONST) {
      v->dtype = dt;
      drk_onnx_set_known(c, v);
    }
  }
  if (tt->shape && v->kind != DRK_VALUE_CONST) {
    if (tt->shape->n_dim > DRK_ONNX_MAX_RANK) {
      drk_diag_error(c->d, loc, "value '%s': rank %zu exceeds %d", v->name, tt->shape->n_dim, DRK_ONNX_MAX_RANK);
      return false;
    }
    int rank = (int)tt->shape->n_dim;
    drk_dim_t dims[DRK_ONNX_MAX_RANK];
    for (int i = 0; i < rank; i++) {
      const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
      if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
        if (d->dim_value < 0) {
          drk_diag_error(c->d, loc, "value '%s': dim %d is negative (%lld)", v->name, i, (long long)d->dim_value);
          return false;
        }
        dims[i] = (drk_dim_t){d->dim_value, NULL};
      } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
                 *d->dim_param) {
        dims[i] = (drk_dim_t){-1, d->dim_param};
      } else {
        dims[i] = (drk_dim_t){-1, drk_arena_printf(c->scratch, "unk__%u", c->fresh++)};
      }
    }
    v->shape = drk_graph_shape(c->g, rank, dims);
  }
  return true;
}

/* ---- model ---- */

/* protobuf-c recurses once per nesting level while unpacking; refuse absurd nesting (a
 * fuzzer's favourite) before it can exhaust the stack. Truncation is left to the unpacker. */
static bool pb_depth_ok(const uint8_t *p, size_t n, const ProtobufCMessageDescriptor *desc, int depth) {
  if (depth > 64) return false;
  size_t i = 0;
  while (i < n) {
    uint64_t key = 0;
    int shift = 0;
    while (i < n && shift < 64) {
      uint8_t b = p[i++];
      key |= (uint64_t)(b & 0x7f) << shift;
      shift += 7;
      if (!(b & 0x80)) break;
    }
    switch (key & 7) {
    case 0:
      while (i < n && (p[i++] & 0x80)) {}
      break;
    case 1: i += 8; break;
    case 5: i += 4; break;
    case 2: {
      uint64_t len = 0;
      shift = 0;
      while (i < n && shift < 64) {
        uint8_t b = p[i++];
        len |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) break;
      }
      if (len > n - i) return true;
      const ProtobufCFieldDescriptor *f =
          desc && key >> 3 <= 0x1fffffff ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3)) : NULL;
      if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && !pb_depth_ok(p + i, (size_t)len, f->descriptor, depth + 1))
        return false;
      i += (size_t)len;
      break;
    }
    default: return true; /* groups or garbage: the unpacker rejects them */
    }
  }
  return true;
}

static drk_graph_t *import_model(drk_onnx_ctx_t *c, const void *data, size_t size) {
  drk_loc_t floc = file_loc(c);
  if (!pb_depth_ok(data, size, &onnx__model_proto__descriptor, 0)) {
    drk_diag_error(c->d, floc, "not an ONNX model: messages nested too deeply");
    return NULL;
  }
  Onnx__ModelProto *m = drk_onnx_unpack_model(data, size);
  if (!m) {
    drk_diag_error(c->d, floc, "not an ONNX model: protobuf parse failed (truncated or corrupt file)");
    return NULL;
  }
  const char *gname = m->graph && m->graph->name && *m->graph->name ? m->graph->name : "onnx";
  drk_graph_t *g = drk_graph_create(gname);
  drk_graph_add_blob(g, m, 0, release_model);
  c->g = g;
  c->model = m;
  c->file = drk_graph_str(g, c->file);
  floc.file = c->file;
  g->source = c->file;

  if (!m->has_ir_version) {
    drk_diag_error(c->d, floc, "not an ONNX model: no ir_version");
    goto fail;
  }
  if (m->ir_version < DRK_ONNX_MIN_IR || m->ir_version > DRK_ONNX_MAX_IR) {
    drk_diag_error(c->d, floc, "unsupported IR version %lld (drkc reads IR versions %d-%d)",
                   (long long)m->ir_version, DRK_ONNX_MIN_IR, DRK_ONNX_MAX_IR);
    goto fail;
  }
  c->opset = drk_onnx_domain_opset(c, "");
  if (c->opset < 0 && m->n_opset_import == 0 && m->ir_version < 3) c->opset = 1;
  if (c->opset < DRK_ONNX_MIN_OPSET || c->opset > DRK_ONNX_MAX_OPSET) {
    if (c->opset < 0)
      drk_diag_error(c->d, floc, "unsupported model: no opset import for domain 'ai.onnx'");
    else
      drk_diag_error(c->d, floc, "unsupported opset %lld for domain 'ai.onnx' (drkc reads opsets %d-%d)",
                     (long long)c->opset, DRK_ONNX_MIN_OPSET, DRK_ONNX_MAX_OPSET);
    goto fail;
  }
  const Onnx__GraphProto *gp = m->graph;
  if (!gp) {
    drk_diag_error(c->d, floc, "not an ONNX model: no graph");
    goto fail;
  }
  if (gp->n_sparse_initializer) {
    drk_diag_error(c->d, floc, "unsupported sparse initializer '%s'",
                   gp->sparse_initializer[0]->values && gp->sparse_initializer[0]->values->name
                       ? gp->sparse_initializer[0]->values->name
                       : "");
    goto fail;
  }
  for (size_t i = 0; i < gp->n_initializer && !c->inputs_only; i++) {
    const Onnx__TensorProto *t = gp->initializer[i];
    if (!t->name || !*t->name) {
      drk_diag_error(c->d, floc, "initializer #%zu has no name", i);
      goto fail;
    }
    if (drk_onnx_map_get(&c->values, t->name)) {
      drk_diag_error(c->d, floc, "initializer '%s' is defined twice", t->name);
      goto fail;
    }
    drk_value_t *v = drk_onnx_tensor_value(c, t, t->name, true, floc);
    if (!v) goto fail;
    drk_onnx_map_put(&c->values, v->name, v);
  }
  for (size_t i = 0; i < gp->n_value_info; i++)
    if (gp->value_info[i]->name) drk_onnx_map_put(&c->infos, gp->value_info[i]->name, gp->value_info[i]);
  for (size_t i = 0; i < gp->n_output; i++)
    if (gp->output[i]->name) drk_onnx_map_put(&c->infos, gp->output[i]->name, gp->output[i]);
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    if (!vi->name || !*vi->name) {
      drk_diag_error(c->d, floc, "graph input #%zu has no name", i);
      goto fail;
    }
    drk_value_t *prev = drk_onnx_map_get(&c->values, vi->name);
    if (prev && prev->kind == DRK_VALUE_CONST) continue; /* an initializer: a constant, not an input */
    bool is_init = false; /* inputs only: the initializers' names, their data left unread */
    for (size_t k = 0; c->inputs_only && k < gp->n_initializer && !is_init; k++)
      is_init = gp->initializer[k]->name && !strcmp(gp->initializer[k]->name, vi->name);
    if (is_init) continue;
    if (prev) {
      drk_diag_error(c->d, floc, "graph input '%s' is listed twice", vi->name);
      goto fail;
    }
    drk_shape_t unknown = {-1, NULL};
    drk_value_t *v = drk_graph_add_input(g, vi->name, DRK_DT_F32, unknown);
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type ||
        !vi->type->tensor_type->has_elem_type || vi->type->tensor_type->elem_type == 0) {
      if (!drk_onnx_apply_type(c, v, vi, floc)) goto fail;
      drk_diag_error(c->d, floc, "graph input '%s' has no tensor element type", vi->name);
      goto fail;
    }
    if (!drk_onnx_apply_type(c, v, vi, floc)) goto fail;
    drk_onnx_map_put(&c->values, v->name, v);
  }
  if (c->inputs_only) return g;
  /* the names later nodes define: a helper value made by an earlier node's rewrite must not
   * take one (the model may name a value "x_k__0" itself) */
  for (size_t i = 0; i < gp->n_node; i++)
    for (size_t k = 0; k < gp->node[i]->n_output; k++)
      if (gp->node[i]->output[k] && *gp->node[i]->output[k]) drk_graph_reserve_name(g, gp->node[i]->output[k]);
  for (size_t i = 0; i < gp->n_node; i++)
    if (!drk_onnx_import_node(c, gp->node[i], (int)i)) goto fail;
  if (gp->n_output == 0) {
    drk_diag_error(c->d, floc, "graph has no outputs");
    goto fail;
  }
  for (size_t i = 0; i < gp->n_output; i++) {
    const Onnx__ValueInfoProto *vi = gp->output[i];
    drk_value_t *v = vi->name ? drk_onnx_map_get(&c->values, vi->name) : NULL;
    if (!v) {
      drk_diag_error(c->d, floc, "graph output '%s' is not defined by any node, input or initializer",
                     vi->name ? vi->name : "");
      goto fail;
    }
    if (!drk_onnx_apply_type(c, v, vi, v->kind == DRK_VALUE_NODE ? v->loc : floc)) goto fail;
    drk_graph_add_output(g, v);
  }
  return g;
fail:
  drk_graph_destroy(g);
  c->g = NULL;
  return NULL;
}

int64_t drk_onnx_bound_size(const drk_onnx_ctx_t *c, const char *sym) {
  size_t n = sym ? strlen(sym) : 0;
  for (const char *p = c->bind; p && *p && n;) {
    while (*p == ',' || *p == ' ') p++;
    const char *eq = strchr(p, '='), *end = strchr(p, ',');
    if (!eq || (end && end < eq)) return -1;
    const char *ne = eq;
    while (ne > p && ne[-1] == ' ') ne--;
    if ((size_t)(ne - p) == n && !memcmp(p, sym, n)) {
      char *e;
      long long v = strtoll(eq + 1, &e, 10);
      return e > eq + 1 && v >= 0 ? (int64_t)v : -1;
    }
    p = end ? end + 1 : NULL;
  }
  return -1;
}

static drk_graph_t *import_impl(const void *data, size_t size, const char *file, const char *base_dir,
                                const char *bind, bool inputs_only, drk_diag_t *d) {
  drk_onnx_ctx_t c;
  memset(&c, 0, sizeof c);
  c.d = d;
  c.bind = bind;
  c.inputs_only = inputs_only;
  c.scratch = drk_arena_create();
  c.file = file;
  c.base_dir = base_dir;
  drk_onnx_map_init(&c.values, c.scratch);
  drk_onnx_map_init(&c.infos, c.scratch);
  drk_graph_t *g = import_model(&c, data, size);
  drk_arena_destroy(c.scratch);
  return g;
}

drk_graph_t *drk_onnx_import_buffer(const void *data, size_t size, const char *name, const char *base_dir,
                                    drk_diag_t *d) {
  return import_impl(data, size, name ? name : "<buffer>", base_dir, NULL, false, d);
}

static drk_graph_t *import_file(const char *path, const char *bind, bool inputs_only, drk_diag_t *d);

drk_graph_t *drk_onnx_import(const char *path, drk_diag_t *d) { return import_file(path, NULL, false, d); }

drk_graph_t *drk_onnx_import_bound(const char *path, const char *bind, drk_diag_t *d) { return import_file(path, bind, false, d); }

drk_graph_t *drk_onnx_import_inputs(const char *path, drk_diag_t *d) { return import_file(path, NULL, true, d); }

static drk_graph_t *import_file(const char *path, const char *bind, bool inputs_only, drk_diag_t *d) {
  drk_loc_t loc = drk_loc_none;
  loc.file = path;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int e = fd < 0 ? errno : EINVAL;
    if (fd >= 0) close(fd);
    drk_diag_error(d, loc, "cannot open: %s", strerror(e));
    return NULL;
  }
  size_t size = (size_t)st.st_size;
  void *base = NULL;
  if (size > 0) {
    base = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
      int e = errno;
      close(fd);
      drk_diag_error(d, loc, "cannot map: %s", strerror(e));
      return NULL;
    }
  }
  close(fd);
  char *dir = strdup(path);
  char *slash = dir ? strrchr(dir, '/') : NULL;
  const char *base_dir = ".";
  if (slash) {
    if (slash == dir) slash[1] = 0;
    else *slash = 0;
    base_dir = dir;
  }
  /* The unpacked message holds its own copy of every field; the file mapping can go. */
  drk_graph_t *g = import_impl(size ? base : "", size, path, base_dir, bind, inputs_only, d);
  if (base) munmap(base, size);
  free(dir);
  return g;
}
