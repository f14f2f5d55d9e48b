/* Interpreter: data movement (Reshape .. Dropout in graph_ops.def's MOVE group, except
 * Resize). Elements are moved bit-exactly (no rounding) through strided copies;
 * index inputs accept negative values (counted from the end) and out-of-range indices are
 * reported, never read. */
#include "interp_internal.h"

typedef struct copy_job {
  drk_tensor_t *dst;
  const drk_tensor_t *src;
  int64_t dbase, sbase;
  int rank;
  const int64_t *dims, *ds, *ss;
} copy_job_t;

static void copy_range(void *ctx, int64_t i0, int64_t i1, int tid) {
  const copy_job_t *j = ctx;
  int64_t *sts[2] = {(int64_t *)j->ds, (int64_t *)j->ss};
  drk_iiter_t it;
  drk_iiter_init(&it, j->rank, j->dims, 2, sts);
  drk_iiter_seek(&it, i0);
  int bits = drk_dtype_bits(j->src->dtype);
  uint8_t *d = j->dst->data;
  const uint8_t *s = j->src->data;
  int64_t dbase = j->dbase, sbase = j->sbase;
  for (int64_t i = i0; i < i1; i++) {
    int64_t di = dbase + it.off[0], si = sbase + it.off[1];
    switch (bits) {
      case 64: memcpy(d + di * 8, s + si * 8, 8); break;
      case 32: memcpy(d + di * 4, s + si * 4, 4); break;
      case 16: memcpy(d + di * 2, s + si * 2, 2); break;
      case 8: d[di] = s[si]; break;
      default: drk_icopy_elem(j->dst, di, j->src, si); break;
    }
    drk_iiter_next(&it);
  }
}

/* dst[dbase + idx.dstr] = src[sbase + idx.sstr] over dims (in parallel chunks when large;
 * sub-byte dtypes, two elements a byte, in one thread). */
static void copy_strided(drk_tensor_t *dst, int64_t dbase, const int64_t *dstr, const drk_tensor_t *src,
                         int64_t sbase, const int64_t *sstr, int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int k = 0; k < rank; k++) n *= dims[k];
  if (n == 0) return;
  int64_t ds[DRK_MAX_RANK], ss[DRK_MAX_RANK];
  for (int k = 0; k < rank; k++) {
    ds[k] = dstr[k];
    ss[k] = sstr[k];
  }
  copy_job_t j = {dst, src, dbase, sbase, rank, dims, ds, ss};
  if (n >= (1 << 16) && drk_dtype_bits(src->dtype) >= 8) drk_ipar_for(n, drk_ipar_grain(n, 1 << 14), copy_range, &j);
  else copy_range(&j, 0, n, 0);
}

static bool copy_out(drk_ictx_t *c, int i, const drk_tensor_t *x, int rank, const int64_t *dims) {
  if (!drk_iout(c, i, x->dtype, rank, dims)) return false;
  if (c->out[i].nbytes) memcpy(c->out[i].data, x->data, c->out[i].nbytes);
  return true;
}

static bool op_identity(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL)) return false;
  return copy_out(c, 0, c->in[0], c->in[0]->rank, c->in[0]->dims);
}

static bool op_dropout(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_FLOAT)) return false;
  const drk_tensor_t *tm = drk_iin(c, 2), *ratio = drk_iin(c, 1);
  bool training = tm && drk_tensor_numel(tm) == 1 && drk_tensor_get_i64(tm, 0) != 0;
  if (training && ratio && drk_tensor_numel(ratio) == 1 && drk_tensor_get_f64(ratio, 0) != 0)
    return drk_ierr(c, "training mode with a nonzero ratio is random; not supported");
  const drk_tensor_t *x = c->in[0];
  if (!copy_out(c, 0, x, x->rank, x->dims)) return false;
  if (c->n_out > 1) {
    if (!drk_iout(c, 1, DRK_DT_BOOL, x->rank, x->dims)) return false;
    memset(c->out[1].data, 1, c->out[1].nbytes);
  }
  return true;
}

static bool op_reshape(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL) || !drk_ireq(c, 1, DRK_DTM(I64))) return false;
  const drk_tensor_t *x = c->in[0];
  int64_t shp[DRK_MAX_RANK];
  int64_t n = drk_iread_ints(c, c->in[1], shp, DRK_MAX_RANK, "shape");
  if (n < 0) return false;
  if (c->in[1]->rank != 1) return drk_ierr(c, "shape must be 1-D");
  bool allowzero = drk_node_attr_int(c->n, "allowzero", 0) != 0;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < n; i++) {
    if (shp[i] == 0 && !allowzero) {
      if (i >= x->rank) return drk_ierr(c, "shape[%d] = 0 copies a dimension the input lacks", i);
      shp[i] = x->dims[i];
    }
    if (shp[i] == -1) {
      if (infer >= 0) return drk_ierr(c, "more than one -1 in shape");
      infer = i;
      continue;
    }
    if (shp[i] < 0) return drk_ierr(c, "invalid shape value %lld", (long long)shp[i]);
    if (!drk_numel_mul(&known, shp[i]))
      return drk_ierr(c, "shape value %d = %lld makes more than 2^56 elements", i, (long long)shp[i]);
  }
  int64_t total = drk_tensor_numel(x);
  if (infer >= 0) {
    if (known == 0 || total % known) return drk_ierr(c, "cannot infer the -1 dimension (%lld elements)", (long long)total);
    shp[infer] = total / known;
  } else if (known != total) {
    return drk_ierr(c, "shape has %lld elements, input has %lld", (long long)known, (long long)total);
  }
  return copy_out(c, 0, x, (int)n, shp);
}

static bool op_flatten(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL)) return false;
  const drk_tensor_t *x = c->in[0];
  int64_t a = drk_node_attr_int(c->n, "axis", 1);
  if (a < -x->rank || a > x->rank) return drk_ierr(c, "axis %lld out of range", (long long)a);
  if (a < 0) a += x->rank;
  int64_t d[2] = {1, 1};
  for (int i = 0; i < x->rank; i++) d[i < a ? 0 : 1] *= x->dims[i];
  return copy_out(c, 0, x, 2, d);
}

static bool op_squeeze(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL)) return false;
  const drk_tensor_t *x = c->in[0];
  bool sq[DRK_MAX_RANK] = {false};
  const drk_tensor_t *at = drk_iin(c, 1);
  if (at) {
    int64_t axes[DRK_MAX_RANK];
    int64_t n = drk_iread_ints(c, at, axes, DRK_MAX_RANK, "axes");
    if (n < 0) return false;
    for (int i = 0; i < n; i++) {
      int a;
      if (!drk_iaxis(c, axes[i], x->rank, &a)) return false;
      if (x->dims[a] != 1) return drk_ierr(c, "cannot squeeze axis %d of size %lld", a, (long long)x->dims[a]);
      sq[a] = true;
    }
  } else {
    for (int i = 0; i < x->rank; i++) sq[i] = x->dims[i] == 1;
  }
  int64_t d[DRK_MAX_RANK];
  int r = 0;
  for (int i = 0; i < x->rank; i++)
    if (!sq[i]) d[r++] = x->dims[i];
  return copy_out(c, 0, x, r, d);
}

static bool op_unsqueeze(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL) || !drk_ireq(c, 1, DRK_DTM(I64))) return false;
  const drk_tensor_t *x = c->in[0];
  int64_t axes[DRK_MAX_RANK];
  int64_t n = drk_iread_ints(c, c->in[1], axes, DRK_MAX_RANK, "axes");
  if (n < 0) return false;
  int r = x->rank + (int)n;
  if (r > DRK_MAX_RANK) return drk_ierr(c, "output rank %d too large", r);
  bool ins[DRK_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    int a;
    if (!drk_iaxis(c, axes[i], r, &a)) return false;
    if (ins[a]) return drk_ierr(c, "axis %d repeated", a);
    ins[a] = true;
  }
  int64_t d[DRK_MAX_RANK];
  for (int i = 0, j = 0; i < r; i++) d[i] = ins[i] ? 1 : x->dims[j++];
  return copy_out(c, 0, x, r, d);
}

static bool op_transpose(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL)) return false;
  const drk_tensor_t *x = c->in[0];
  int r = x->rank;
  size_t np;
  const int64_t *perm = drk_node_attr_ints(c->n, "perm", &np);
  int p[DRK_MAX_RANK];
  bool seen[DRK_MAX_RANK] = {false};
  if (perm && (int)np != r) return drk_ierr(c, "perm has %zu values, rank is %d", np, r);
  for (int i = 0; i < r; i++) {
    int64_t v = perm ? perm[i] : r - 1 - i;
    if (v < 0) v += r;
    if (v < 0 || v >= r || seen[v]) return drk_ierr(c, "perm is not a permutation");
    seen[v] = true;
    p[i] = (int)v;
  }
  int64_t od[DRK_MAX_RANK], xs[DRK_MAX_RANK], ss[DRK_MAX_RANK], os[DRK_MAX_RANK];
  drk_istrides(r, x->dims, xs);
  for (int i = 0; i < r; i++) {
    od[i] = x->dims[p[i]];
    ss[i] = xs[p[i]];
  }
  if (!drk_iout(c, 0, x->dtype, r, od)) return false;
  drk_istrides(r, od, os);
  copy_strided(&c->out[0], 0, os, x, 0, ss, r, od);
  return true;
}

static bool op_concat(drk_ictx_t *c) {
  const drk_tensor_t *x0 = c->in[0];
  if (!drk_ireq(c, 0, DRK_M_ALL)) return false;
  int axis;
  if (!drk_iaxis(c, drk_node_attr_int(c->n, "axis", 0), x0->rank, &axis)) return false;
  int64_t od[DRK_MAX_RANK];
  memcpy(od, x0->dims, sizeof od);
  od[axis] = 0;
  for (int i = 0; i < c->n_in; i++) {
    if (!drk_ireq(c, i, DRK_M_ALL)) return false;
    const drk_tensor_t *t = c->in[i];
    if (t->dtype != x0->dtype || t->rank != x0->rank) return drk_ierr(c, "input %d differs in dtype or rank", i);
    for (int k = 0; k < t->rank; k++)
      if (k != axis && t->dims[k] != x0->dims[k]) return drk_ierr(c, "input %d differs in dimension %d", i, k);
    od[axis] += t->dims[axis];
  }
  if (!drk_iout(c, 0, x0->dtype, x0->rank, od)) return false;
  int64_t os[DRK_MAX_RANK];
  drk_istrides(x0->rank, od, os);
  int64_t pos = 0;
  for (int i = 0; i < c->n_in; i++) {
    const drk_tensor_t *t = c->in[i];
    int64_t ts[DRK_MAX_RANK];
    drk_istrides(t->rank, t->dims, ts);
    copy_strided(&c->out[0], pos * os[axis], os, t, 0, ts, t->rank, t->dims);
    pos += t->dims[axis];
  }
  return true;
}

static bool op_split(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL)) return false;
  const drk_tensor_t *x = c->in[0];
  int axis;
  if (!drk_iaxis(c, drk_node_attr_int(c->n, "axis", 0), x->rank, &axis)) return false;
  int no = c->n_out;
  int64_t sizes[64];
  int64_t len = x->dims[axis];
  const drk_tensor_t *st = drk_iin(c, 1);
  if (st) {
    int64_t n = drk_iread_ints(c, st, sizes, 64, "split");
    if (n < 0) return false;
    if (n != no) return drk_ierr(c, "split has %lld values for %d outputs", (long long)n, no);
    int64_t s = 0;
    for (int i = 0; i < no; i++) {
      if (sizes[i] < 0) return drk_ierr(c, "negative split size");
      if (sizes[i] > DRK_MAX_NUMEL || (s += sizes[i]) > DRK_MAX_NUMEL) /* no int64 wrap on the way to `len` */
        return drk_ierr(c, "split sizes sum to more than 2^56");
    }
    if (s != len) return drk_ierr(c, "split sizes sum to %lld, axis has %lld", (long long)s, (long long)len);
  } else {
    int64_t num = drk_node_attr_int(c->n, "num_outputs", no);
    if (num != no) return drk_ierr(c, "num_outputs=%lld but %d outputs", (long long)num, no);
    int64_t chunk = (len + no - 1) / no;
    if (!drk_node_attr(c->n, "num_outputs") && len % no) return drk_ierr(c, "axis of %lld does not split evenly in %d", (long long)len, no);
    int64_t left = len;
    for (int i = 0; i < no; i++) {
      sizes[i] = chunk < left ? chunk : left;
      left -= sizes[i];
    }
  }
  int64_t xs[DRK_MAX_RANK], pos = 0;
  drk_istrides(x->rank, x->dims, xs);
  for (int i = 0; i < no; i++) {
    int64_t od[DRK_MAX_RANK], os[DRK_MAX_RANK];
    memcpy(od, x->dims, sizeof od);
    od[axis] = sizes[i];
    if (!drk_iout(c, i, x->dtype, x->rank, od)) return false;
    drk_istrides(x->rank, od, os);
    copy_strided(&c->out[i], 0, os, x, pos * xs[axis], xs, x->rank, od);
    pos += sizes[i];
  }
  return true;
}

static bool op_slice(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL) || !drk_ireq(c, 1, DRK_M_IDX) || !drk_ireq(c, 2, DRK_M_IDX)) return false;
  const drk_tensor_t *x = c->in[0];
  int r = x->rank;
  int64_t st[DRK_MAX_RANK * 2], en[DRK_MAX_RANK * 2], ax[DRK_MAX_RANK * 2], sp[DRK_MAX_RANK * 2];
  int64_t n = drk_iread_ints(c, c->in[1], st, DRK_MAX_RANK, "starts");
  if (n < 0) return false;
  if (drk_iread_ints(c, c->in[2], en, DRK_MAX_RANK, "ends") != n) return n < 0 ? false : drk_ierr(c, "starts and ends differ in length");
  if (drk_iin(c, 3)) {
    if (drk_iread_ints(c, c->in[3], ax, DRK_MAX_RANK, "axes") != n) return drk_ierr(c, "axes length differs from starts");
  } else {
    for (int i = 0; i < n; i++) ax[i] = i;
  }
  if (drk_iin(c, 4)) {
    if (drk_iread_ints(c, c->in[4], sp, DRK_MAX_RANK, "steps") != n) return drk_ierr(c, "steps length differs from starts");
  } else {
    for (int i = 0; i < n; i++) sp[i] = 1;
  }
  int64_t start[DRK_MAX_RANK], step[DRK_MAX_RANK], od[DRK_MAX_RANK];
  bool seen[DRK_MAX_RANK] = {false};
  for (int i = 0; i < r; i++) {
    start[i] = 0;
    step[i] = 1;
    od[i] = x->dims[i];
  }
  for (int i = 0; i < n; i++) {
    int a;
    if (!drk_iaxis(c, ax[i], r, &a)) return false;
    if (seen[a]) return drk_ierr(c, "axis %d repeated", a);
    seen[a] = true;
    int64_t dim = x->dims[a], s = st[i], e = en[i], k = sp[i];
    if (k == 0) return drk_ierr(c, "step must not be 0");
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (k > 0) {
      s = s < 0 ? 0 : s > dim ? dim : s;
      e = e < 0 ? 0 : e > dim ? dim : e;
      od[a] = e > s ? (e - s + k - 1) / k : 0;
    } else {
      s = s < 0 ? -1 : s > dim - 1 ? dim - 1 : s;
      e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
      od[a] = s > e ? (s - e + (-k) - 1) / (-k) : 0;
    }
    start[a] = s;
    step[a] = k;
  }
  if (!drk_iout(c, 0, x->dtype, r, od)) return false;
  int64_t xs[DRK_MAX_RANK], os[DRK_MAX_RANK], ss[DRK_MAX_RANK], base = 0;
  drk_istrides(r, x->dims, xs);
  drk_istrides(r, od, os);
  for (int i = 0; i < r; i++) {
    ss[i] = xs[i] * step[i];
    if (od[i]) base += start[i] * xs[i];
  }
  copy_strided(&c->out[0], 0, os, x, base, ss, r, od);
  return true;
}

static bool idx_at(drk_ictx_t *c, const drk_tensor_t *idx, int64_t i, int64_t dim, int64_t *out) {
  int64_t v = drk_tensor_get_i64(idx, i);
  if (v < -dim || v >= dim) return drk_ierr(c, "index %lld out of range [-%lld, %lld)", (long long)v, (long long)dim, (long long)dim);
  *out = v < 0 ? v + dim : v;
  return true;
}

static bool op_gather(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL) || !drk_ireq(c, 1, DRK_M_IDX)) return false;
  const drk_tensor_t *x = c->in[0], *idx = c->in[1];
  int axis;
  if (!drk_iaxis(c, drk_node_attr_int(c->n, "axis", 0), x->rank, &axis)) return false;
  int orank = x->rank - 1 + idx->rank;
  if (orank > DRK_MAX_RANK) return drk_ierr(c, "output rank too large");
  int64_t od[DRK_MAX_RANK];
  int r = 0;
  for (int i = 0; i < axis; i++) od[r++] = x->dims[i];
  for (int i = 0; i < idx->rank; i++) od[r++] = idx->dims[i];
  for (int i = axis + 1; i < x->rank; i++) od[r++] = x->dims[i];
  if (!drk_iout(c, 0, x->dtype, orank, od)) return false;
  int64_t outer = 1, inner = 1, len = x->dims[axis], ni = drk_tensor_numel(idx);
  for (int i = 0; i < axis; i++) outer *= x->dims[i];
  for (int i = axis + 1; i < x->rank; i++) inner *= x->dims[i];
  for (int64_t j = 0; j < ni; j++) {
    int64_t k = 0;
    if (!idx_at(c, idx, j, len, &k)) return false;
    for (int64_t o = 0; o < outer; o++)
      for (int64_t in = 0; in < inner; in++)
        drk_icopy_elem(&c->out[0], (o * ni + j) * inner + in, x, (o * len + k) * inner + in);
  }
  return true;
}

static bool op_gather_elements(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL) || !drk_ireq(c, 1, DRK_M_IDX)) return false;
  const drk_tensor_t *x = c->in[0], *idx = c->in[1];
  int axis;
  if (!drk_iaxis(c, drk_node_attr_int(c->n, "axis", 0), x->rank, &axis)) return false;
  if (idx->rank != x->rank) return drk_ierr(c, "indices must have the data's rank");
  if (!drk_iout(c, 0, x->dtype, idx->rank, idx->dims)) return false;
  int64_t xs[DRK_MAX_RANK], zero[DRK_MAX_RANK] = {0};
  drk_istrides(x->rank, x->dims, xs);
  int64_t *sts[1] = {xs};
  (void)zero;
  drk_iiter_t it;
  drk_iiter_init(&it, idx->rank, idx->dims, 1, sts);
  for (int64_t j = 0, n = drk_tensor_numel(idx); j < n; j++) {
    int64_t k = 0;
    if (!idx_at(c, idx, j, x->dims[axis], &k)) return false;
    drk_icopy_elem(&c->out[0], j, x, it.off[0] - it.idx[axis] * xs[axis] + k * xs[axis]);
    drk_iiter_next(&it);
  }
  return true;
}

static bool op_gather_nd(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL) || !drk_ireq(c, 1, DRK_DTM(I64))) return false;
  const drk_tensor_t *x = c->in[0], *idx = c->in[1];
  int64_t b = drk_node_attr_int(c->n, "batch_dims", 0);
  if (idx->rank < 1) return drk_ierr(c, "indices must have rank >= 1");
  int64_t q = idx->dims[idx->rank - 1];
  if (b < 0 || b >= idx->rank || b >= x->rank || q < 1 || b + q > x->rank) return drk_ierr(c, "batch_dims/indices shape inconsistent with data");
  for (int i = 0; i < b; i++)
    if (idx->dims[i] != x->dims[i]) return drk_ierr(c, "batch dimension %d differs", i);
  int64_t od[DRK_MAX_RANK];
  int r = 0;
  for (int i = 0; i < idx->rank - 1; i++) od[r++] = idx->dims[i];
  for (int i = (int)(b + q); i < x->rank; i++) {
    if (r >= DRK_MAX_RANK) return drk_ierr(c, "output rank too large");
    od[r++] = x->dims[i];
  }
  if (!drk_iout(c, 0, x->dtype, r, od)) return false;
  int64_t xs[DRK_MAX_RANK];
  drk_istrides(x->rank, x->dims, xs);
  int64_t slice = 1, nb = 1, per_batch = 1;
  for (int i = (int)(b + q); i < x->rank; i++) slice *= x->dims[i];
  for (int i = 0; i < b; i++) nb *= idx->dims[i];
  for (int i = (int)b; i < idx->rank - 1; i++) per_batch *= idx->dims[i];
  int64_t bstride = 1;
  for (int i = (int)b; i < x->rank; i++) bstride *= x->dims[i];
  for (int64_t bi = 0; bi < nb; bi++)
    for (int64_t j = 0; j < per_batch; j++) {
      int64_t t = bi * per_batch + j, off = bi * bstride;
      for (int64_t k = 0; k < q; k++) {
        int64_t v = 0;
        if (!idx_at(c, idx, t * q + k, x->dims[b + k], &v)) return false;
        off += v * xs[b + k];
      }
      for (int64_t s = 0; s < slice; s++) drk_icopy_elem(&c->out[0], t * slice + s, x, off + s);
    }
  return true;
}

static bool op_scatter_nd(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL) || !drk_ireq(c, 1, DRK_DTM(I64)) || !drk_ireq(c, 2, DRK_M_ALL)) return false;
  const drk_tensor_t *x = c->in[0], *idx = c->in[1], *u = c->in[2];
  if (u->dtype != x->dtype) return drk_ierr(c, "updates dtype differs from data");
  const char *red = drk_node_attr_string(c->n, "reduction", "none");
  int mode = !strcmp(red, "none") ? 0 : !strcmp(red, "add") ? 1 : !strcmp(red, "mul") ? 2 : !strcmp(red, "max") ? 3 : !strcmp(red, "min") ? 4 : -1;
  if (mode < 0) return drk_ierr(c, "reduction '%s' not supported", red);
  if (idx->rank < 1) return drk_ierr(c, "indices must have rank >= 1");
  int64_t q = idx->dims[idx->rank - 1];
  if (q < 1 || q > x->rank) return drk_ierr(c, "indices' last dimension %lld exceeds the data rank", (long long)q);
  if (u->rank != idx->rank - 1 + x->rank - q) return drk_ierr(c, "updates have the wrong rank");
  for (int i = 0; i < idx->rank - 1; i++)
    if (u->dims[i] != idx->dims[i]) return drk_ierr(c, "updates shape mismatch");
  for (int i = 0; i < x->rank - q; i++)
    if (u->dims[idx->rank - 1 + i] != x->dims[q + i]) return drk_ierr(c, "updates shape mismatch");
  if (!copy_out(c, 0, x, x->rank, x->dims)) return false;
  int64_t xs[DRK_MAX_RANK], slice = 1, nupd = 1;
  drk_istrides(x->rank, x->dims, xs);
  for (int i = (int)q; i < x->rank; i++) slice *= x->dims[i];
  for (int i = 0; i < idx->rank - 1; i++) nupd *= idx->dims[i];
  bool isf = drk_dtype_is_float(x->dtype);
  drk_tensor_t *o = &c->out[0];
  for (int64_t t = 0; t < nupd; t++) {
    int64_t off = 0;
    for (int64_t k = 0; k < q; k++) {
      int64_t v = 0;
      if (!idx_at(c, idx, t * q + k, x->dims[k], &v)) return false;
      off += v * xs[k];
    }
    for (int64_t s = 0; s < slice; s++) {
      if (mode == 0) {
        drk_icopy_elem(o, off + s, u, t * slice + s);
      } else if (isf) {
        double a = drk_tensor_get_f64(o, off + s), b = drk_tensor_get_f64(u, t * slice + s);
        double r = mode == 1 ? a + b : mode == 2 ? a * b : mode == 3 ? (a > b ? a : b) : (a < b ? a : b);
        drk_tensor_set_f64(o, off + s, r);
      } else {
        int64_t a = drk_tensor_get_i64(o, off + s), b = drk_tensor_get_i64(u, t * slice + s);
        int64_t r = mode == 1 ? a + b : mode == 2 ? a * b : mode == 3 ? (a > b ? a : b) : (a < b ? a : b);
        drk_tensor_set_i64(o, off + s, r);
      }
    }
  }
  return true;
}

static bool op_expand(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL) || !drk_ireq(c, 1, DRK_DTM(I64))) return false;
  const drk_tensor_t *x = c->in[0];
  drk_tensor_t sh = {0};
  int64_t n = drk_iread_ints(c, c->in[1], sh.dims, DRK_MAX_RANK, "shape");
  if (n < 0) return false;
  sh.rank = (int)n;
  const drk_tensor_t *ts[2] = {x, &sh};
  int r;
  int64_t od[DRK_MAX_RANK], xs[DRK_MAX_RANK], os[DRK_MAX_RANK];
  if (!drk_ibroadcast(c, 2, ts, &r, od)) return false;
  if (!drk_iout(c, 0, x->dtype, r, od)) return false;
  drk_ibstrides(x, r, od, xs);
  drk_istrides(r, od, os);
  copy_strided(&c->out[0], 0, os, x, 0, xs, r, od);
  return true;
}

static bool op_tile(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL) || !drk_ireq(c, 1, DRK_DTM(I64))) return false;
  const drk_tensor_t *x = c->in[0];
  int64_t rep[DRK_MAX_RANK];
  int64_t n = drk_iread_ints(c, c->in[1], rep, DRK_MAX_RANK, "repeats");
  if (n < 0) return false;
  if (n != x->rank) return drk_ierr(c, "repeats has %lld values, rank is %d", (long long)n, x->rank);
  int64_t od[DRK_MAX_RANK];
  for (int i = 0; i < x->rank; i++) {
    if (rep[i] < 0) return drk_ierr(c, "negative repeat");
    od[i] = x->dims[i] * rep[i];
  }
  if (!drk_iout(c, 0, x->dtype, x->rank, od)) return false;
  int64_t xs[DRK_MAX_RANK];
  drk_istrides(x->rank, x->dims, xs);
  int64_t idx[DRK_MAX_RANK] = {0};
  for (int64_t j = 0, tot = drk_tensor_numel(&c->out[0]); j < tot; j++) {
    int64_t off = 0;
    for (int i = 0; i < x->rank; i++) off += (idx[i] % x->dims[i]) * xs[i];
    drk_icopy_elem(&c->out[0], j, x, off);
    for (int i = x->rank - 1; i >= 0; i--) {
      if (++idx[i] < od[i]) break;
      idx[i] = 0;
    }
  }
  return true;
}

static bool op_pad(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL) || !drk_ireq(c, 1, DRK_DTM(I64))) return false;
  const drk_tensor_t *x = c->in[0], *cv = drk_iin(c, 2), *at = drk_iin(c, 3);
  int r = x->rank;
  const char *mode = drk_node_attr_string(c->n, "mode", "constant");
  int m = !strcmp(mode, "constant") ? 0 : !strcmp(mode, "reflect") ? 1 : !strcmp(mode, "edge") ? 2 : !strcmp(mode, "wrap") ? 3 : -1;
  if (m < 0) return drk_ierr(c, "mode '%s' not supported", mode);
  int64_t axes[DRK_MAX_RANK], pads[2 * DRK_MAX_RANK];
  int64_t na = r;
  if (at) {
    na = drk_iread_ints(c, at, axes, DRK_MAX_RANK, "axes");
    if (na < 0) return false;
  } else {
    for (int i = 0; i < r; i++) axes[i] = i;
  }
  int64_t np = drk_iread_ints(c, c->in[1], pads, 2 * DRK_MAX_RANK, "pads");
  if (np < 0) return false;
  if (np != 2 * na) return drk_ierr(c, "pads has %lld values, expected %lld", (long long)np, (long long)(2 * na));
  int64_t pb[DRK_MAX_RANK] = {0}, pe[DRK_MAX_RANK] = {0}, od[DRK_MAX_RANK];
  for (int i = 0; i < na; i++) {
    int a;
    if (!drk_iaxis(c, axes[i], r, &a)) return false;
    pb[a] = pads[i];
    pe[a] = pads[na + i];
  }
  for (int i = 0; i < r; i++) {
    od[i] = x->dims[i] + pb[i] + pe[i];
    if (od[i] < 0) return drk_ierr(c, "pads make dimension %d negative", i);
    if (m != 0 && x->dims[i] == 0 && od[i] > 0) return drk_ierr(c, "cannot pad an empty axis in mode '%s'", mode);
  }
  if (cv && drk_tensor_numel(cv) > 1) return drk_ierr(c, "constant_value must be a scalar");
  if (cv && cv->dtype != x->dtype) return drk_ierr(c, "constant_value dtype differs from data");
  if (!drk_iout(c, 0, x->dtype, r, od)) return false;
  int64_t xs[DRK_MAX_RANK];
  drk_istrides(r, x->dims, xs);
  int64_t idx[DRK_MAX_RANK] = {0};
  bool have_cv = cv && drk_tensor_numel(cv) == 1;
  for (int64_t j = 0, tot = drk_tensor_numel(&c->out[0]); j < tot; j++) {
    int64_t off = 0;
    bool outside = false;
    for (int i = 0; i < r; i++) {
      int64_t p = idx[i] - pb[i], n = x->dims[i];
      if (p < 0 || p >= n) {
        switch (m) {
          case 0: outside = true; break;
          case 1:
            if (n == 1) p = 0;
            else {
              int64_t per = 2 * (n - 1);
              p = ((p % per) + per) % per;
              if (p >= n) p = per - p;
            }
            break;
          case 2: p = p < 0 ? 0 : n - 1; break;
          case 3: p = ((p % n) + n) % n; break;
        }
      }
      off += p * xs[i];
    }
    if (outside) {
      if (have_cv) drk_icopy_elem(&c->out[0], j, cv, 0);
    } else {
      drk_icopy_elem(&c->out[0], j, x, off);
    }
    for (int i = r - 1; i >= 0; i--) {
      if (++idx[i] < od[i]) break;
      idx[i] = 0;
    }
  }
  return true;
}

static bool op_depth_to_space(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL)) return false;
  const drk_tensor_t *x = c->in[0];
  if (x->rank != 4) return drk_ierr(c, "input must be 4-D");
  int64_t b = drk_node_attr_int(c->n, "blocksize", 0);
  if (b <= 0 || x->dims[1] % (b * b)) return drk_ierr(c, "blocksize %lld must divide channels", (long long)b);
  bool crd = !strcmp(drk_node_attr_string(c->n, "mode", "DCR"), "CRD");
  int64_t N = x->dims[0], C = x->dims[1] / (b * b), H = x->dims[2], W = x->dims[3];
  int64_t od[4] = {N, C, H * b, W * b};
  if (!drk_iout(c, 0, x->dtype, 4, od)) return false;
  /* view the input as 6-D and permute */
  int64_t v6[6], xs6[6], perm[6];
  if (crd) {
    int64_t d[6] = {N, C, b, b, H, W}, p[6] = {0, 1, 4, 2, 5, 3};
    memcpy(v6, d, sizeof d);
    memcpy(perm, p, sizeof p);
  } else {
    int64_t d[6] = {N, b, b, C, H, W}, p[6] = {0, 3, 4, 1, 5, 2};
    memcpy(v6, d, sizeof d);
    memcpy(perm, p, sizeof p);
  }
  drk_istrides(6, v6, xs6);
  int64_t pd[6], ps[6], os[6];
  for (int i = 0; i < 6; i++) {
    pd[i] = v6[perm[i]];
    ps[i] = xs6[perm[i]];
  }
  drk_istrides(6, pd, os);
  copy_strided(&c->out[0], 0, os, x, 0, ps, 6, pd);
  return true;
}

static bool op_space_to_depth(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL)) return false;
  const drk_tensor_t *x = c->in[0];
  if (x->rank != 4) return drk_ierr(c, "input must be 4-D");
  int64_t b = drk_node_attr_int(c->n, "blocksize", 0);
  if (b <= 0 || x->dims[2] % b || x->dims[3] % b) return drk_ierr(c, "blocksize %lld must divide H and W", (long long)b);
  int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2] / b, W = x->dims[3] / b;
  int64_t od[4] = {N, C * b * b, H, W};
  if (!drk_iout(c, 0, x->dtype, 4, od)) return false;
  bool crd = !strcmp(drk_node_attr_string(c->n, "mode", "DCR"), "CRD");
  int64_t v6[6] = {N, C, H, b, W, b}, p[6] = {0, 3, 5, 1, 2, 4}, xs6[6], pd[6], ps[6], os[6];
  if (crd) {
    int64_t pc[6] = {0, 1, 3, 5, 2, 4};
    memcpy(p, pc, sizeof p);
  }
  drk_istrides(6, v6, xs6);
  for (int i = 0; i < 6; i++) {
    pd[i] = v6[p[i]];
    ps[i] = xs6[p[i]];
  }
  drk_istrides(6, pd, os);
  copy_strided(&c->out[0], 0, os, x, 0, ps, 6, pd);
  return true;
}

static bool op_trilu(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL)) return false;
  const drk_tensor_t *x = c->in[0], *kt = drk_iin(c, 1);
  if (x->rank < 2) return drk_ierr(c, "input must have rank >= 2");
  int64_t k = 0;
  if (kt) {
    if (drk_tensor_numel(kt) != 1 || !drk_dtype_is_int(kt->dtype)) return drk_ierr(c, "k must be an integer scalar");
    k = drk_tensor_get_i64(kt, 0);
  }
  bool upper = drk_node_attr_int(c->n, "upper", 1) != 0;
  if (!copy_out(c, 0, x, x->rank, x->dims)) return false;
  int64_t R = x->dims[x->rank - 2], C = x->dims[x->rank - 1], nb;
  if (R == 0 || C == 0) return true;
  nb = drk_tensor_numel(x) / (R * C);
  drk_tensor_t zero = {0};
  uint64_t zbits = 0;
  zero.dtype = x->dtype;
  zero.data = &zbits;
  for (int64_t bi = 0; bi < nb; bi++)
    for (int64_t i = 0; i < R; i++)
      for (int64_t j = 0; j < C; j++) {
        bool keep = upper ? j - i >= k : j - i <= k;
        if (!keep) drk_icopy_elem(&c->out[0], (bi * R + i) * C + j, &zero, 0);
      }
  return true;
}

static bool op_one_hot(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_NUM) || !drk_ireq(c, 1, DRK_M_NUM) || !drk_ireq(c, 2, DRK_M_ALL)) return false;
  const drk_tensor_t *idx = c->in[0], *dt = c->in[1], *vals = c->in[2];
  if (drk_tensor_numel(dt) != 1) return drk_ierr(c, "depth must be a scalar");
  if (drk_tensor_numel(vals) != 2) return drk_ierr(c, "values must have 2 elements");
  int64_t depth = (int64_t)drk_tensor_get_f64(dt, 0);
  if (depth < 1) return drk_ierr(c, "depth must be positive");
  int r = idx->rank + 1;
  if (r > DRK_MAX_RANK) return drk_ierr(c, "output rank too large");
  int axis;
  if (!drk_iaxis(c, drk_node_attr_int(c->n, "axis", -1), r, &axis)) return false;
  int64_t od[DRK_MAX_RANK];
  for (int i = 0, j = 0; i < r; i++) od[i] = i == axis ? depth : idx->dims[j++];
  if (!drk_iout(c, 0, vals->dtype, r, od)) return false;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; i++) outer *= od[i];
  for (int i = axis + 1; i < r; i++) inner *= od[i];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t v = (int64_t)drk_tensor_get_f64(idx, o * inner + in);
      if (v < 0) v += depth;
      for (int64_t d = 0; d < depth; d++) drk_icopy_elem(&c->out[0], (o * depth + d) * inner + in, vals, d == v ? 1 : 0);
    }
  return true;
}

static bool op_shape(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL)) return false;
  const drk_tensor_t *x = c->in[0];
  int64_t r = x->rank, s = drk_node_attr_int(c->n, "start", 0), e = drk_node_attr_int(c->n, "end", r);
  if (s < 0) s += r;
  if (e < 0) e += r;
  s = s < 0 ? 0 : s > r ? r : s;
  e = e < 0 ? 0 : e > r ? r : e;
  int64_t n = e > s ? e - s : 0;
  if (!drk_iout(c, 0, DRK_DT_I64, 1, &n)) return false;
  for (int64_t i = 0; i < n; i++) ((int64_t *)c->out[0].data)[i] = x->dims[s + i];
  return true;
}

static bool op_size(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL)) return false;
  if (!drk_iout(c, 0, DRK_DT_I64, 0, NULL)) return false;
  *(int64_t *)c->out[0].data = drk_tensor_numel(c->in[0]);
  return true;
}

static bool op_constant_of_shape(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_DTM(I64))) return false;
  int64_t d[DRK_MAX_RANK];
  int64_t n = drk_iread_ints(c, c->in[0], d, DRK_MAX_RANK, "shape");
  if (n < 0) return false;
  const drk_attr_t *a = drk_node_attr(c->n, "value");
  drk_tensor_t val = {0};
  float zero = 0;
  if (a) {
    if (a->kind != DRK_ATTR_TENSOR || !a->tensor) return drk_ierr(c, "attribute 'value' must be a tensor");
    if (!drk_tensor_from_const(&val, a->tensor) || drk_tensor_numel(&val) != 1) return drk_ierr(c, "'value' must hold one element");
  } else {
    val.dtype = DRK_DT_F32;
    val.data = &zero;
  }
  for (int i = 0; i < n; i++)
    if (d[i] < 0) return drk_ierr(c, "negative dimension in shape");
  if (!drk_iout(c, 0, val.dtype, (int)n, d)) return false;
  for (int64_t i = 0, t = drk_tensor_numel(&c->out[0]); i < t; i++) drk_icopy_elem(&c->out[0], i, &val, 0);
  return true;
}

static bool op_range(drk_ictx_t *c) {
  unsigned mask = DRK_M_FLOAT | DRK_DTM(I64) | DRK_DTM(I32) | DRK_DTM(I16);
  for (int i = 0; i < 3; i++) {
    if (!drk_ireq(c, i, mask)) return false;
    if (c->in[i]->dtype != c->in[0]->dtype || drk_tensor_numel(c->in[i]) != 1) return drk_ierr(c, "inputs must be scalars of one dtype");
  }
  drk_dtype_t t = c->in[0]->dtype;
  int64_t n;
  if (drk_dtype_is_float(t)) {
    double s = drk_tensor_get_f64(c->in[0], 0), l = drk_tensor_get_f64(c->in[1], 0), d = drk_tensor_get_f64(c->in[2], 0);
    if (d == 0) return drk_ierr(c, "delta must not be 0");
    double cnt = ceil((l - s) / d);
    if (!(cnt < 1e12)) return drk_ierr(c, "too many elements");
    n = cnt > 0 ? (int64_t)cnt : 0;
    if (!drk_iout(c, 0, t, 1, &n)) return false;
    for (int64_t i = 0; i < n; i++) drk_tensor_set_f64(&c->out[0], i, s + (double)i * d);
  } else {
    int64_t s = drk_tensor_get_i64(c->in[0], 0), l = drk_tensor_get_i64(c->in[1], 0), d = drk_tensor_get_i64(c->in[2], 0);
    if (d == 0) return drk_ierr(c, "delta must not be 0");
    double cnt = ceil(((double)l - (double)s) / (double)d);
    if (!(cnt < 1e12)) return drk_ierr(c, "too many elements");
    n = cnt > 0 ? (int64_t)cnt : 0;
    if (!drk_iout(c, 0, t, 1, &n)) return false;
    for (int64_t i = 0; i < n; i++) drk_tensor_set_i64(&c->out[0], i, s + i * d);
  }
  return true;
}

drk_iop_fn drk_interp_lookup_move(drk_op_t op) {
  switch (op) {
    case DRK_OP_RESHAPE: return op_reshape;
    case DRK_OP_FLATTEN: return op_flatten;
    case DRK_OP_SQUEEZE: return op_squeeze;
    case DRK_OP_UNSQUEEZE: return op_unsqueeze;
    case DRK_OP_TRANSPOSE: return op_transpose;
    case DRK_OP_CONCAT: return op_concat;
    case DRK_OP_SPLIT: return op_split;
    case DRK_OP_SLICE: return op_slice;
    case DRK_OP_GATHER: return op_gather;
    case DRK_OP_GATHER_ELEMENTS: return op_gather_elements;
    case DRK_OP_GATHER_ND: return op_gather_nd;
    case DRK_OP_SCATTER_ND: return op_scatter_nd;
    case DRK_OP_EXPAND: return op_expand;
    case DRK_OP_TILE: return op_tile;
    case DRK_OP_PAD: return op_pad;
    case DRK_OP_DEPTH_TO_SPACE: return op_depth_to_space;
    case DRK_OP_SPACE_TO_DEPTH: return op_space_to_depth;
    case DRK_OP_TRILU: return op_trilu;
    case DRK_OP_ONE_HOT: return op_one_hot;
    case DRK_OP_SHAPE: return op_shape;
    case DRK_OP_SIZE: return op_size;
    case DRK_OP_CONSTANT_OF_SHAPE: return op_constant_of_shape;
    case DRK_OP_RANGE: return op_range;
    case DRK_OP_IDENTITY: return op_identity;
    case DRK_OP_DROPOUT: return op_dropout;
    default: return NULL;
  }
}
