/* Unpacking a ModelProto whose weights are big (onnx_unpack.h).
 *
 * protobuf-c copies every bytes field while it unpacks, one after the other on one thread;
 * for a model of a gigabyte and more that copy (and the page faults of its fresh memory) is
 * most of the import. Here the big raw_data fields of the main graph's initializers are cut
 * out of a copy of the message's framing (the rest of the bytes: a few megabytes), protobuf-c
 * unpacks that, and the cut fields are copied into their own malloc'ed buffers on every core,
 * then attached to their TensorProtos as if protobuf-c had put them there (free_unpacked
 * frees them with the same allocator).
 *
 * The cut covers exactly ModelProto.graph (field 7) -> GraphProto.initializer (field 5) ->
 * TensorProto.raw_data (field 9). Anything this reader does not expect (a repeated graph or
 * raw_data field, groups, a length past the end) makes it step aside: the plain unpack then
 * sees the original bytes and reports what is wrong with them. */
#include "onnx_unpack.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ir/support.h"

enum {
  MIN_CUT = 1 << 16,        /* raw_data below this stays with protobuf-c */
  CHUNK = 8 << 20,          /* copy work item */
  FIELD_GRAPH = 7,          /* ModelProto.graph */
  FIELD_INITIALIZER = 5,    /* GraphProto.initializer */
  FIELD_RAW_DATA = 9,       /* TensorProto.raw_data */
};

typedef struct cut {
  size_t init;              /* index among the graph's initializers */
  const uint8_t *src;
  size_t len;
  uint8_t *dst;
} cut_t;

typedef struct buf {
  uint8_t *p;
  size_t n, cap;
  bool oom;
} buf_t;

typedef struct cuts {
  cut_t *v;
  size_t n, cap;
} cuts_t;

/* A varint at p[*i] (< end); false when truncated or longer than 10 bytes. */
static bool get_varint(const uint8_t *p, size_t end, size_t *i, uint64_t *v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 70 && *i < end; shift += 7) {
    uint8_t b = p[(*i)++];
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return true;
    }
  }
  return false;
}

static void put_bytes(buf_t *w, const void *p, size_t k) {
  if (w->oom) return;
  if (w->n + k > w->cap) {
    size_t nc = w->cap ? w->cap : 1 << 16;
    while (nc < w->n + k) nc *= 2;
    uint8_t *q = realloc(w->p, nc);
    if (!q) {
      w->oom = true;
      return;
    }
    w->p = q, w->cap = nc;
  }
  memcpy(w->p + w->n, p, k);
  w->n += k;
}

static void put_varint(buf_t *w, uint64_t v) {
  uint8_t b[10];
  size_t k = 0;
  do {
    b[k] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) b[k] |= 0x80;
    k++;
  } while (v);
  put_bytes(w, b, k);
}

/* One field at p[*i]: its number, wire type, and (type 2) payload [*pay, *pay + *len); *i
 * moves past it. False on anything unexpected. */
static bool next_field(const uint8_t *p, size_t end, size_t *i, uint32_t *num, int *type, size_t *pay, size_t *len) {
  uint64_t key, v;
  if (!get_varint(p, end, i, &key) || (key >> 3) == 0 || (key >> 3) > 0x1fffffff) return false;
  *num = (uint32_t)(key >> 3), *type = (int)(key & 7);
  switch (*type) {
  case 0: return get_varint(p, end, i, &v);
  case 1: if (end - *i < 8) return false; *i += 8; return true;
  case 5: if (end - *i < 4) return false; *i += 4; return true;
  case 2:
    if (!get_varint(p, end, i, &v) || v > end - *i) return false;
    *pay = *i, *len = (size_t)v;
    *i += (size_t)v;
    return true;
  default: return false; /* groups */
  }
}

/* The field each level of the cut descends through: ModelProto.graph, GraphProto.initializer,
 * TensorProto.raw_data (the cut itself). */
static const uint32_t level_field[3] = {FIELD_GRAPH, FIELD_INITIALIZER, FIELD_RAW_DATA};

/* Copies message p[0, end) of `level` into w, every field as it is except level_field[level]:
 * a nested message is stripped one level down (and written with its new length), a big
 * raw_data becomes a cut of initializer `init`. False when the bytes are not what this reader
 * expects: a repeated graph (protobuf merges it) or raw_data (protobuf keeps the last). */
static bool strip(buf_t *w, cuts_t *c, const uint8_t *p, size_t end, int level, size_t init) {
  size_t i = 0, pay = 0, len = 0, seen = 0;
  while (i < end) {
    size_t f0 = i;
    uint32_t num;
    int type;
    if (!next_field(p, end, &i, &num, &type, &pay, &len)) return false;
    if (num != level_field[level] || type != 2) {
      put_bytes(w, p + f0, i - f0);
      continue;
    }
    if (++seen > 1 && level != 1) return false;
    if (level == 2) {
      if (len < MIN_CUT) {
        put_bytes(w, p + f0, i - f0);
        continue;
      }
      if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 64;
        cut_t *q = realloc(c->v, nc * sizeof *q);
        if (!q) return false;
        c->v = q, c->cap = nc;
      }
      c->v[c->n++] = (cut_t){init, p + pay, len, NULL};
      continue;
    }
    buf_t sub = {0};
    bool ok = strip(&sub, c, p + pay, len, level + 1, seen - 1) && !sub.oom;
    if (ok) {
      put_varint(w, (uint64_t)level_field[level] << 3 | 2);
      put_varint(w, sub.n);
      put_bytes(w, sub.p, sub.n);
    }
    free(sub.p);
    if (!ok) return false;
  }
  return !w->oom;
}

/* ---- the parallel copy ---- */
typedef struct copy_job {
  cut_t *cuts;
  size_t n_cuts;
  size_t *first;          /* first[k]: the index of cut k's first CHUNK-sized piece */
} copy_job_t;

static void copy_pieces(void *arg, int64_t lo, int64_t hi, int tid) {
  (void)tid;
  copy_job_t *j = arg;
  size_t k = 0;
  for (size_t it = (size_t)lo; it < (size_t)hi; it++) {
    while (k + 1 < j->n_cuts && j->first[k + 1] <= it) k++;
    size_t off = (it - j->first[k]) * (size_t)CHUNK, len = j->cuts[k].len - off;
    memcpy(j->cuts[k].dst + off, j->cuts[k].src + off, len < CHUNK ? len : CHUNK);
  }
}

static bool copy_cuts(cut_t *cuts, size_t n) {
  copy_job_t j = {cuts, n, calloc(n + 1, sizeof(size_t))};
  if (!j.first) return false;
  size_t pieces = 0;
  for (size_t k = 0; k < n; k++) {
    if (!(cuts[k].dst = malloc(cuts[k].len))) {
      free(j.first);
      return false;
    }
    j.first[k] = pieces;
    pieces += (cuts[k].len + CHUNK - 1) / CHUNK;
  }
  drk_ipar_for((int64_t)pieces, 1, copy_pieces, &j);
  free(j.first);
  return true;
}

Onnx__ModelProto *drk_onnx_unpack_model(const uint8_t *data, size_t size) {
  buf_t w = {0};
  cuts_t c = {0};
  bool cut = size >= 4 * (size_t)MIN_CUT && strip(&w, &c, data, size, 0, 0) && c.n > 0;
  Onnx__ModelProto *m = NULL;
  if (cut && (m = onnx__model_proto__unpack(NULL, w.n, w.p)) != NULL) {
    Onnx__GraphProto *g = m->graph;
    bool fits = g != NULL;
    for (size_t k = 0; fits && k < c.n; k++)
      fits = c.v[k].init < g->n_initializer && g->initializer[c.v[k].init] &&
             !g->initializer[c.v[k].init]->has_raw_data;
    if (fits && copy_cuts(c.v, c.n)) {
      for (size_t k = 0; k < c.n; k++) {
        Onnx__TensorProto *t = g->initializer[c.v[k].init];
        t->has_raw_data = 1;
        t->raw_data.data = c.v[k].dst;
        t->raw_data.len = c.v[k].len;
      }
    } else {
      for (size_t k = 0; k < c.n; k++) free(c.v[k].dst);
      onnx__model_proto__free_unpacked(m, NULL);
      m = NULL;
      cut = false;
    }
  } else {
    cut = false;
  }
  free(w.p);
  free(c.v);
  return cut ? m : onnx__model_proto__unpack(NULL, size, data);
}
