/* drk_onnx_unpack_model (frontend/onnx/onnx_unpack.h) against protobuf-c's own unpack: the
 * same message (compared by packing both) on a model with big and small raw_data, typed and
 * external initializers and unknown fields; and on thousands of truncated and corrupted
 * copies of it, the same answer (both NULL, or the same message). */
#include <stdlib.h>
#include <string.h>

#include "frontend/onnx/onnx_unpack.h"
#include "ir/support.h"
#include "tests/common/check.h"

static bool same(const Onnx__ModelProto *a, const Onnx__ModelProto *b) {
  if (!a || !b) return a == b;
  size_t na = onnx__model_proto__get_packed_size(a), nb = onnx__model_proto__get_packed_size(b);
  if (na != nb) return false;
  uint8_t *pa = malloc(na + 1), *pb = malloc(nb + 1);
  onnx__model_proto__pack(a, pa);
  onnx__model_proto__pack(b, pb);
  bool eq = memcmp(pa, pb, na) == 0;
  free(pa);
  free(pb);
  return eq;
}

static int compare(const uint8_t *p, size_t n) {
  Onnx__ModelProto *a = onnx__model_proto__unpack(NULL, n, p), *b = drk_onnx_unpack_model(p, n);
  int ok = same(a, b);
  if (a) onnx__model_proto__free_unpacked(a, NULL);
  if (b) onnx__model_proto__free_unpacked(b, NULL);
  return ok;
}

enum { NT = 5 };

int main(void) {
  static uint8_t big0[300000], big1[70000], small[100];
  uint64_t s = 1;
  for (size_t i = 0; i < sizeof big0; i++) big0[i] = (uint8_t)drk_splitmix64(&s);
  for (size_t i = 0; i < sizeof big1; i++) big1[i] = (uint8_t)drk_splitmix64(&s);
  for (size_t i = 0; i < sizeof small; i++) small[i] = (uint8_t)i;

  Onnx__TensorProto t[NT], *tp[NT];
  int64_t dims[NT] = {75000, 17500, 25, 3, 4};
  float fd[3] = {1, 2, 3};
  Onnx__StringStringEntryProto loc = ONNX__STRING_STRING_ENTRY_PROTO__INIT, *locp = &loc;
  loc.key = "location", loc.value = "w.bin";
  const char *names[NT] = {"big0", "big1", "small", "typed", "external"};
  for (int i = 0; i < NT; i++) {
    onnx__tensor_proto__init(&t[i]);
    t[i].name = (char *)names[i];
    t[i].has_data_type = 1, t[i].data_type = i == 2 ? ONNX__TENSOR_PROTO__DATA_TYPE__UINT8 : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t[i].n_dims = 1, t[i].dims = &dims[i];
    tp[i] = &t[i];
  }
  t[0].has_raw_data = 1, t[0].raw_data = (ProtobufCBinaryData){sizeof big0, big0};
  t[1].has_raw_data = 1, t[1].raw_data = (ProtobufCBinaryData){sizeof big1, big1};
  t[2].has_raw_data = 1, t[2].raw_data = (ProtobufCBinaryData){sizeof small, small};
  t[3].n_float_data = 3, t[3].float_data = fd;
  t[4].has_data_location = 1, t[4].data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  t[4].n_external_data = 1, t[4].external_data = &locp;

  Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
  g.name = "g", g.n_initializer = NT, g.initializer = tp;
  Onnx__OperatorSetIdProto op = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opp = &op;
  op.has_version = 1, op.version = 17, op.domain = "";
  Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
  m.has_ir_version = 1, m.ir_version = 8, m.graph = &g, m.n_opset_import = 1, m.opset_import = &opp;
  m.producer_name = "test_unpack";

  size_t n = onnx__model_proto__get_packed_size(&m);
  uint8_t *p = malloc(n + 64);
  onnx__model_proto__pack(&m, p);

  /* the whole model: the big raw_data really were cut and put back */
  Onnx__ModelProto *u = drk_onnx_unpack_model(p, n);
  CHECK(u && u->graph && u->graph->n_initializer == NT);
  if (u && u->graph && u->graph->n_initializer == NT) {
    CHECK(u->graph->initializer[0]->has_raw_data && u->graph->initializer[0]->raw_data.len == sizeof big0 &&
          memcmp(u->graph->initializer[0]->raw_data.data, big0, sizeof big0) == 0);
    CHECK(memcmp(u->graph->initializer[1]->raw_data.data, big1, sizeof big1) == 0);
    CHECK(u->graph->initializer[2]->raw_data.len == sizeof small);
  }
  if (u) onnx__model_proto__free_unpacked(u, NULL);
  CHECK(compare(p, n));

  /* an unknown field after the graph */
  uint8_t *q = malloc(n + 64);
  memcpy(q, p, n);
  const uint8_t unknown[] = {0xf8, 0x07, 0x2a}; /* field 127, varint 42 */
  memcpy(q + n, unknown, sizeof unknown);
  CHECK(compare(q, n + sizeof unknown));

  /* truncations: every length near the framing, a sample elsewhere */
  int bad = 0, tried = 0;
  for (size_t k = 0; k < n; k += (k < 400 || n - k < 400) ? 1 : 997, tried++) bad += !compare(p, k);
  /* corruptions: one byte changed at a random place, mostly in the framing */
  for (int r = 0; r < 3000; r++, tried++) {
    memcpy(q, p, n);
    size_t at = (size_t)(drk_splitmix64(&s) % (r % 2 ? n : 64));
    if (r % 3 == 0 && at < n) at = n - 1 - at % 200;
    q[at] ^= (uint8_t)(1 + drk_splitmix64(&s) % 255);
    bad += !compare(q, n);
  }
  CHECK(bad == 0);
  if (bad) fprintf(stderr, "%d of %d mutated models unpacked differently\n", bad, tried);

  /* two graph fields (protobuf merges them): left to protobuf-c, same result */
  size_t gn = onnx__graph_proto__get_packed_size(&g);
  uint8_t *two = malloc(n + gn + 16), *w = two;
  memcpy(w, p, n), w += n;
  *w++ = 0x3a; /* field 7, length-delimited */
  size_t v = gn;
  do {
    *w = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) *w |= 0x80;
    w++;
  } while (v);
  onnx__graph_proto__pack(&g, w), w += gn;
  CHECK(compare(two, (size_t)(w - two)));

  free(two);
  free(q);
  free(p);
  if (!failures) printf("OK (%d mutated models)\n", tried);
  return check_status("test_unpack");
}
