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

typedef struct wire {
  uint8_t *out;             /* the message without the cut fields */
  size_t n, cap;
  cut_t *cuts;
  size_t n_cuts, cap_cuts;
  bool oom;
} wire_t;

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

static void put_bytes(wire_t *w, const void *p, size_t k) {
  if (w->oom) return;
  if (w->n + k > w->cap) {
    size_t nc = w->cap ? w->cap : 1 << 16;
    while (nc < w->n + k) nc *= 2;
    uint8_t *q = realloc(w->out, nc);
    if (!q) {
      w->oom = true;
      return;
    }
    w->out = q, w->cap = nc;
  }
  memcpy(w->out + w->n, p, k);
  w->n += k;
}

static void put_varint(wire_t *w, uint64_t v) {
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

/* A TensorProto: its fields without a big raw_data, which becomes a cut. */
static bool strip_tensor(wire_t *w, const uint8_t *p, size_t end, size_t init, size_t *out_len) {
  size_t start = w->n, i = 0, pay = 0, len = 0;
  int seen_raw = 0;
  while (i < end) {
    size_t f0 = i;
    uint32_t num;
    int type;
    if (!next_field(p, end, &i, &num, &type, &pay, &len)) return false;
    if (num == FIELD_RAW_DATA && type == 2 && ++seen_raw && len >= MIN_CUT) {
      cut_t c = {init, p + pay, len, NULL};
      if (w->n_cuts == w->cap_cuts) {
        size_t nc = w->cap_cuts ? 2 * w->cap_cuts : 64;
        cut_t *q = realloc(w->cuts, nc * sizeof *q);
        if (!q) return false;
        w->cuts = q, w->cap_cuts = nc;
      }
      w->cuts[w->n_cuts++] = c;
      continue;
    }
    put_bytes(w, p + f0, i - f0);
  }
  *out_len = w->n - start;
  return seen_raw <= 1; /* a repeated raw_data: protobuf-c keeps the last; leave it to it */
}

/* The GraphProto: initializers stripped, every other field as it is. */
static bool strip_graph(wire_t *w, const uint8_t *p, size_t end) {
  size_t i = 0, pay = 0, len = 0, init = 0;
  while (i < end) {
    size_t f0 = i;
    uint32_t num;
    int type;
    if (!next_field(p, end, &i, &num, &type, &pay, &len)) return false;
    if (num != FIELD_INITIALIZER || type != 2) {
      put_bytes(w, p + f0, i - f0);
      continue;
    }
    /* The tensor's new length is known only after stripping it: strip into place, then
     * move it behind its key and length. */
    wire_t t = {0};
    t.cuts = w->cuts, t.n_cuts = w->n_cuts, t.cap_cuts = w->cap_cuts;
    size_t tl = 0;
    bool ok = strip_tensor(&t, p + pay, len, init++, &tl);
    w->cuts = t.cuts, w->n_cuts = t.n_cuts, w->cap_cuts = t.cap_cuts;
    if (!ok || t.oom) {
      free(t.out);
      return false;
    }
    put_varint(w, (uint64_t)FIELD_INITIALIZER << 3 | 2);
    put_varint(w, tl);
    put_bytes(w, t.out, tl);
    free(t.out);
  }
  return true;
}

/* The ModelProto with its graph stripped; false (nothing cut) when the bytes are not what
 * this reader expects. */
static bool strip_model(wire_t *w, const uint8_t *p, size_t end) {
  size_t i = 0, pay = 0, len = 0;
  int graphs = 0;
  while (i < end) {
    size_t f0 = i;
    uint32_t num;
    int type;
    if (!next_field(p, end, &i, &num, &type, &pay, &len)) return false;
    if (num != FIELD_GRAPH || type != 2) {
      put_bytes(w, p + f0, i - f0);
      continue;
    }
    if (++graphs > 1) return false; /* protobuf merges repeated messages: leave it to it */
    wire_t gw = {0};
    bool ok = strip_graph(&gw, p + pay, len);
    w->cuts = gw.cuts, w->n_cuts = gw.n_cuts, w->cap_cuts = gw.cap_cuts;
    if (!ok || gw.oom) {
      free(gw.out);
      return false;
    }
    put_varint(w, (uint64_t)FIELD_GRAPH << 3 | 2);
    put_varint(w, gw.n);
    put_bytes(w, gw.out, gw.n);
    free(gw.out);
  }
  return !w->oom;
}

/* ---- the parallel copy ---- */
typedef struct copy_job {
  cut_t *cuts;
  size_t n_cuts;
  size_t *first;          /* first[k]: the index of cut k's first CHUNK-sized piece */
} copy_job_t;

static void copy_pieces(void *arg, size_t lo, size_t hi) {
  copy_job_t *j = arg;
  size_t k = 0;
  for (size_t it = lo; it < hi; it++) {
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
  drk_par_ranges(pieces, 1, copy_pieces, &j);
  free(j.first);
  return true;
}

Onnx__ModelProto *drk_onnx_unpack_model(const uint8_t *data, size_t size) {
  wire_t w = {0};
  bool cut = size >= 4 * (size_t)MIN_CUT && strip_model(&w, data, size) && w.n_cuts > 0;
  Onnx__ModelProto *m = NULL;
  if (cut && (m = onnx__model_proto__unpack(NULL, w.n, w.out)) != NULL) {
    Onnx__GraphProto *g = m->graph;
    bool fits = g != NULL;
    for (size_t k = 0; fits && k < w.n_cuts; k++)
      fits = w.cuts[k].init < g->n_initializer && g->initializer[w.cuts[k].init] &&
             !g->initializer[w.cuts[k].init]->has_raw_data;
    if (fits && copy_cuts(w.cuts, w.n_cuts)) {
      for (size_t k = 0; k < w.n_cuts; k++) {
        Onnx__TensorProto *t = g->initializer[w.cuts[k].init];
        t->has_raw_data = 1;
        t->raw_data.data = w.cuts[k].dst;
        t->raw_data.len = w.cuts[k].len;
      }
    } else {
      for (size_t k = 0; k < w.n_cuts; k++) free(w.cuts[k].dst);
      onnx__model_proto__free_unpacked(m, NULL);
      m = NULL;
      cut = false;
    }
  } else {
    cut = false;
  }
  free(w.out);
  free(w.cuts);
  return cut ? m : onnx__model_proto__unpack(NULL, size, data);
}
