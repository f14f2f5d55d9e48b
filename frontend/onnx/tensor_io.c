/* Tensor files: ONNX TensorProto (.pb) and NumPy .npy, to and from drk_tensor_t.
 *
 * Requires: the protobuf-c code generated from onnx.proto (shared with the importer's
 * TensorProto decoding). Guarantees: malformed files give an error naming the file, never a
 * crash; sizes are checked against the file before anything is allocated. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"
#include "tensor_io.h"

static drk_loc_t file_loc(const char *path) {
  drk_loc_t l = drk_loc_none;
  l.file = path;
  return l;
}

static bool write_all(const char *path, const void *p1, size_t n1, const void *p2, size_t n2, drk_diag_t *d) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    drk_diag_error(d, file_loc(path), "cannot create: %s", strerror(errno));
    return false;
  }
  bool ok = (n1 == 0 || fwrite(p1, 1, n1, f) == n1) && (n2 == 0 || fwrite(p2, 1, n2, f) == n2);
  ok = (fclose(f) == 0) && ok;
  if (!ok) drk_diag_error(d, file_loc(path), "write failed: %s", strerror(errno));
  return ok;
}

static bool check_tensor(const char *path, const drk_tensor_t *t, drk_diag_t *d) {
  if (t->rank < 0 || t->rank > DRK_MAX_RANK || (t->nbytes && !t->data) ||
      t->nbytes != drk_dtype_nbytes(t->dtype, drk_tensor_numel(t))) {
    drk_diag_error(d, file_loc(path), "cannot write a malformed tensor (rank %d, %zu bytes)", t->rank, t->nbytes);
    return false;
  }
  return true;
}

/* ---- TensorProto ---- */

bool drk_tensor_read_pb_buffer(const void *data, size_t size, const char *name, drk_tensor_t *out,
                               char **out_name, drk_diag_t *d) {
  drk_loc_t loc = file_loc(name ? name : "<buffer>");
  Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, size, data);
  if (!t) {
    drk_diag_error(d, loc, "not an ONNX TensorProto: protobuf parse failed (truncated or corrupt file)");
    return false;
  }
  drk_arena_t *a = drk_arena_create();
  drk_onnx_tensor_t dt;
  char err[256];
  bool ok = false;
  drk_tensor_t r;
  memset(&r, 0, sizeof r);
  if (!drk_onnx_tensor_decode(t, a, &dt, err, sizeof err)) {
    drk_diag_error(d, loc, "%s", err);
  } else if (dt.external) {
    drk_diag_error(d, loc, "unsupported: tensor file with external data");
  } else if (dt.rank > DRK_MAX_RANK) {
    drk_diag_error(d, loc, "unsupported: rank %d exceeds %d", dt.rank, DRK_MAX_RANK);
  } else if (!drk_tensor_alloc(&r, dt.dtype, dt.rank, dt.dims) || r.nbytes != dt.nbytes) {
    drk_tensor_free(&r);
    drk_diag_error(d, loc, "tensor too large (%zu bytes)", dt.nbytes);
  } else {
    if (dt.nbytes) memcpy(r.data, dt.data, dt.nbytes);
    char *nm = NULL;
    if (out_name && !(nm = strdup(t->name ? t->name : ""))) {
      drk_tensor_free(&r);
      drk_diag_error(d, loc, "out of memory");
    } else {
      if (out_name) *out_name = nm;
      *out = r;
      ok = true;
    }
  }
  drk_arena_destroy(a);
  onnx__tensor_proto__free_unpacked(t, NULL);
  return ok;
}

bool drk_tensor_read_pb(const char *path, drk_tensor_t *out, char **out_name, drk_diag_t *d) {
  size_t size;
  char *buf = drk_read_file(path, &size, d);
  if (!buf) return false;
  bool ok = drk_tensor_read_pb_buffer(buf, size, path, out, out_name, d);
  free(buf);
  return ok;
}

bool drk_tensor_read_pb_expect(const char *path, drk_dtype_t expect, drk_tensor_t *out, drk_diag_t *d) {
  size_t size;
  char *buf = drk_read_file(path, &size, d);
  if (!buf) return false;
  bool ok;
  Onnx__TensorProto *t = expect == DRK_DT_BF16 ? onnx__tensor_proto__unpack(NULL, size, (const uint8_t *)buf) : NULL;
  if (t && t->has_data_type && t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__UINT16) {
    /* Re-encode as BFLOAT16 with the same bits (uint16 values in int32_data or raw_data). */
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
    size_t n = onnx__tensor_proto__get_packed_size(t);
    uint8_t *p = malloc(n ? n : 1);
    ok = p && onnx__tensor_proto__pack(t, p) == n && drk_tensor_read_pb_buffer(p, n, path, out, NULL, d);
    if (!p) drk_diag_error(d, drk_loc_none, "%s: out of memory", path);
    free(p);
  } else {
    ok = drk_tensor_read_pb_buffer(buf, size, path, out, NULL, d);
  }
  if (t) onnx__tensor_proto__free_unpacked(t, NULL);
  free(buf);
  return ok;
}

bool drk_tensor_write_pb(const char *path, const drk_tensor_t *t, const char *tensor_name, drk_diag_t *d) {
  if (!check_tensor(path, t, d)) return false;
  Onnx__TensorProto p = ONNX__TENSOR_PROTO__INIT;
  int64_t dims[DRK_MAX_RANK];
  for (int i = 0; i < t->rank; i++) dims[i] = t->dims[i];
  p.n_dims = (size_t)t->rank;
  p.dims = dims;
  p.has_data_type = 1;
  p.data_type = drk_dtype_to_onnx(t->dtype);
  p.has_raw_data = 1;
  p.raw_data.len = t->nbytes;
  p.raw_data.data = t->data;
  p.name = (char *)(tensor_name ? tensor_name : "");
  size_t n = onnx__tensor_proto__get_packed_size(&p);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) {
    drk_diag_error(d, file_loc(path), "out of memory");
    return false;
  }
  onnx__tensor_proto__pack(&p, buf);
  bool ok = write_all(path, buf, n, NULL, 0, d);
  free(buf);
  return ok;
}

/* ---- NumPy .npy ---- */

static const struct {
  drk_dtype_t t;
  const char *descr; /* without the byte-order character */
} npy_types[] = {
    {DRK_DT_F64, "f8"}, {DRK_DT_F32, "f4"}, {DRK_DT_F16, "f2"}, {DRK_DT_I64, "i8"}, {DRK_DT_I32, "i4"},
    {DRK_DT_I16, "i2"}, {DRK_DT_I8, "i1"},  {DRK_DT_U8, "u1"},  {DRK_DT_BOOL, "b1"},
};

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

/* Finds `'key':` in the header dict and returns the position after the colon. */
static const char *npy_key(const char *h, const char *end, const char *key) {
  size_t kl = strlen(key);
  for (const char *p = h; p + kl + 2 <= end; p++) {
    if ((*p == '\'' || *p == '"') && memcmp(p + 1, key, kl) == 0 && p[kl + 1] == *p) {
      const char *q = skip_ws(p + kl + 2, end);
      if (q < end && *q == ':') return skip_ws(q + 1, end);
    }
  }
  return NULL;
}

bool drk_tensor_read_npy(const char *path, drk_tensor_t *out, drk_diag_t *d) {
  size_t size;
  char *buf = drk_read_file(path, &size, d);
  if (!buf) return false;
  bool ok = drk_tensor_read_npy_buffer(buf, size, path, out, d);
  free(buf);
  return ok;
}

bool drk_tensor_read_npy_buffer(const void *data, size_t size, const char *name, drk_tensor_t *out, drk_diag_t *d) {
  drk_loc_t loc = file_loc(name);
  const char *buf = data;
  const uint8_t *u = (const uint8_t *)buf;
  bool ok = false;
  size_t off = 0, hlen = 0;
  if (size < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) {
    drk_diag_error(d, loc, "not a .npy file (bad magic)");
    goto done;
  }
  if (u[6] == 1) {
    hlen = (size_t)u[8] | (size_t)u[9] << 8;
    off = 10;
  } else if ((u[6] == 2 || u[6] == 3) && size >= 12) {
    hlen = (size_t)u[8] | (size_t)u[9] << 8 | (size_t)u[10] << 16 | (size_t)u[11] << 24;
    off = 12;
  } else {
    drk_diag_error(d, loc, "unsupported .npy format version %d.%d", u[6], u[7]);
    goto done;
  }
  if (hlen > size - off) {
    drk_diag_error(d, loc, "truncated .npy header");
    goto done;
  }
  const char *h = buf + off, *he = h + hlen;
  const char *p = npy_key(h, he, "descr");
  if (!p || p >= he || (*p != '\'' && *p != '"')) {
    drk_diag_error(d, loc, "malformed .npy header: no 'descr'");
    goto done;
  }
  char q = *p++;
  const char *ds = p;
  while (p < he && *p != q) p++;
  size_t dl = (size_t)(p - ds);
  char descr[16] = "";
  if (p >= he || dl == 0 || dl >= sizeof descr) {
    drk_diag_error(d, loc, "malformed .npy header: bad 'descr'");
    goto done;
  }
  memcpy(descr, ds, dl);
  drk_dtype_t dt = DRK_DT_F32;
  bool found = false;
  char order = descr[0];
  for (size_t i = 0; i < DRK_ARRAY_LEN(npy_types) && !found; i++)
    if (strcmp(descr + 1, npy_types[i].descr) == 0) {
      dt = npy_types[i].t;
      found = true;
    }
  bool one_byte = found && drk_dtype_bits(dt) == 8;
  if (!found || !(order == '<' || order == '|' || order == '=' || (order == '>' && one_byte))) {
    drk_diag_error(d, loc, "unsupported .npy dtype '%s' (drkc reads little-endian f8 f4 f2 i8 i4 i2 i1 u1 b1)", descr);
    goto done;
  }
  p = npy_key(h, he, "fortran_order");
  if (!p || (size_t)(he - p) < 4) {
    drk_diag_error(d, loc, "malformed .npy header: no 'fortran_order'");
    goto done;
  }
  if (memcmp(p, "True", 4) == 0) {
    drk_diag_error(d, loc, "unsupported .npy layout: fortran_order (C order only)");
    goto done;
  }
  if ((size_t)(he - p) < 5 || memcmp(p, "False", 5) != 0) {
    drk_diag_error(d, loc, "malformed .npy header: bad 'fortran_order'");
    goto done;
  }
  p = npy_key(h, he, "shape");
  if (!p || p >= he || *p != '(') {
    drk_diag_error(d, loc, "malformed .npy header: no 'shape'");
    goto done;
  }
  p++;
  int rank = 0;
  int64_t dims[DRK_MAX_RANK];
  for (;;) {
    p = skip_ws(p, he);
    if (p < he && *p == ')') break;
    if (p >= he || *p < '0' || *p > '9') {
      drk_diag_error(d, loc, "malformed .npy header: bad 'shape'");
      goto done;
    }
    int64_t v = 0;
    while (p < he && *p >= '0' && *p <= '9') {
      if (v > (INT64_MAX - 9) / 10) {
        drk_diag_error(d, loc, "malformed .npy header: dim too large");
        goto done;
      }
      v = v * 10 + (*p++ - '0');
    }
    if (rank == DRK_MAX_RANK) {
      drk_diag_error(d, loc, "unsupported: rank exceeds %d", DRK_MAX_RANK);
      goto done;
    }
    dims[rank++] = v;
    p = skip_ws(p, he);
    if (p < he && *p == ',') p++;
  }
  /* Check the size against the file before allocating anything. */
  size_t avail = size - off - hlen;
  int64_t numel = 1;
  for (int i = 0; i < rank; i++)
    if (__builtin_mul_overflow(numel, dims[i], &numel) || numel > (int64_t)(avail + 1)) {
      numel = -1;
      break;
    }
  size_t need = numel < 0 ? SIZE_MAX : drk_dtype_nbytes(dt, numel);
  if (need > avail) {
    drk_diag_error(d, loc, "truncated .npy data (%zu bytes, shape needs more)", avail);
    goto done;
  }
  drk_tensor_t r;
  if (!drk_tensor_alloc(&r, dt, rank, dims)) {
    drk_diag_error(d, loc, "out of memory");
    goto done;
  }
  if (need) memcpy(r.data, buf + off + hlen, need);
  *out = r;
  ok = true;
done:
  return ok;
}

bool drk_tensor_write_npy(const char *path, const drk_tensor_t *t, drk_diag_t *d) {
  if (!check_tensor(path, t, d)) return false;
  const char *descr = NULL;
  for (size_t i = 0; i < DRK_ARRAY_LEN(npy_types); i++)
    if (npy_types[i].t == t->dtype) descr = npy_types[i].descr;
  if (!descr) {
    drk_diag_error(d, file_loc(path), "dtype %s cannot be expressed in .npy", drk_dtype_name(t->dtype));
    return false;
  }
  char shape[DRK_MAX_RANK * 24 + 8];
  size_t sl = 0;
  shape[sl++] = '(';
  for (int i = 0; i < t->rank; i++)
    sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
  if (t->rank == 1) shape[sl++] = ',';
  shape[sl++] = ')';
  shape[sl] = 0;
  char hdr[512];
  int n = snprintf(hdr + 10, sizeof hdr - 10, "{'descr': '%c%s', 'fortran_order': False, 'shape': %s, }",
                   drk_dtype_bits(t->dtype) == 8 ? '|' : '<', descr, shape);
  size_t total = 10 + (size_t)n + 1; /* + '\n' */
  size_t padded = (total + 63) / 64 * 64;
  memset(hdr + 10 + n, ' ', padded - total);
  hdr[padded - 1] = '\n';
  memcpy(hdr, "\x93NUMPY\x01\x00", 8);
  hdr[8] = (char)((padded - 10) & 0xff);
  hdr[9] = (char)((padded - 10) >> 8);
  return write_all(path, hdr, padded, t->data, t->nbytes, d);
}
