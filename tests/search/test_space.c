/* Search spaces, points, hashes, target fingerprints and workload features (search/space.h,
 * search/features.h), on the knob spaces that `drkc --emit=schedules` lists. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/features.h"
#include "search/space.h"
#include "tests/common/check.h"

/* lines as drkc --emit=schedules prints them (gpt_layer, sm_90a, fp16) */
static const char *mm_line =
    "k2_MatMul wl=9330790a0629e222d8313a9748526dfa mm_ws mm.tile_n=64 mm.split_k=1 mm.stages=6 mm.persistent=0 "
    "mm.cluster=1 mm.staged=1";
static const char *rows_line = "k22_LayerNormalization wl=baa512925c08b2307b3ea1a60fefaf51 rows rows.spt=4";

static bool no_split_k_above_8(void *ctx, const drk_sched_knobs_t *p, char *why, size_t n) {
  (void)ctx;
  if (p->v[DRK_KNOB_MM_SPLIT_K] > 8) {
    snprintf(why, n, "split_k %d > 8", p->v[DRK_KNOB_MM_SPLIT_K]);
    return false;
  }
  return true;
}

static void test_parse_line(void) {
  drk_search_space_t s;
  char err[600];
  CHECK(drk_search_space_parse_line(mm_line, &s, err, sizeof err), "%s", err);
  CHECK(s.n_dims == 6, "%d dims", s.n_dims);
  CHECK(drk_search_space_size(&s) == 3ull * 16 * 7 * 3 * 2 * 2, "size %llu",
        (unsigned long long)drk_search_space_size(&s));
  CHECK(!strcmp(s.kernel, "k2_MatMul"));
  CHECK(!strcmp(s.workload, "9330790a0629e222d8313a9748526dfa"));
  CHECK(!strcmp(s.kind, "mm_ws"));
  int d = drk_search_space_dim(&s, DRK_KNOB_MM_TILE_N);
  CHECK(d >= 0 && s.n_values[d] == 3 && s.values[d][0] == 64 && s.values[d][2] == 256);
  d = drk_search_space_dim(&s, DRK_KNOB_MM_STAGES);
  CHECK(d >= 0 && s.n_values[d] == 7 && s.values[d][0] == 2 && s.values[d][6] == 8);
  CHECK(s.heuristic.v[DRK_KNOB_MM_STAGES] == 6 && s.heuristic.set == s.mask);
  char buf[512];
  drk_search_point_format(&s, &s.heuristic, buf, sizeof buf);
  CHECK(!strcmp(buf, "mm.tile_n=64 mm.split_k=1 mm.stages=6 mm.persistent=0 mm.cluster=1 mm.staged=1"), "%s", buf);

  drk_search_space_t r;
  CHECK(drk_search_space_parse_line(rows_line, &r, err, sizeof err), "%s", err);
  CHECK(r.n_dims == 1 && r.n_values[0] == 4 && drk_search_space_size(&r) == 4);

  /* errors */
  CHECK(!drk_search_space_parse_line("k17_fused_attention wl=7f391485fa38c530cdafe7c0f83f95a0 attention", &s, err,
                                     sizeof err));
  CHECK_CONTAINS(err, "lists no knobs");
  CHECK(!drk_search_space_parse_line("k2_MatMul wl=123 mm_ws mm.tile_n=64", &s, err, sizeof err));
  CHECK_CONTAINS(err, "not 32 hex digits");
  CHECK(!drk_search_space_parse_line("k2_MatMul mm_ws mm.tile_n=96", &s, err, sizeof err));
  CHECK_CONTAINS(err, "mm.tile_n");
  CHECK(!drk_search_space_parse_line("k2_MatMul mm_ws mm.bogus=1", &s, err, sizeof err));
  CHECK_CONTAINS(err, "known key");
}

static void test_points(void) {
  drk_search_space_t s;
  char err[600];
  CHECK(drk_search_space_parse_line(mm_line, &s, err, sizeof err), "%s", err);
  uint64_t size = drk_search_space_size(&s);
  uint64_t *hashes = calloc(size, sizeof *hashes);
  for (uint64_t o = 0; o < size; o++) {
    drk_sched_knobs_t p, q;
    drk_search_point_from_ordinal(&s, o, &p);
    CHECK(drk_search_point_ordinal(&s, &p) == o);
    char buf[512];
    drk_search_point_format(&s, &p, buf, sizeof buf);
    CHECK(drk_search_point_parse(&s, buf, &q, err, sizeof err), "%s: %s", buf, err);
    CHECK(drk_search_point_equal(&p, &q) && drk_search_point_hash(&p) == drk_search_point_hash(&q), "%s", buf);
    hashes[o] = drk_search_point_hash(&p);
  }
  /* 4032 distinct points, 4032 distinct hashes */
  int dup = 0;
  for (uint64_t i = 0; i < size; i++)
    for (uint64_t j = i + 1; j < size; j++) dup += hashes[i] == hashes[j];
  CHECK(dup == 0, "%d hash collisions", dup);
  free(hashes);
  /* the hash ignores unpinned slots and the used pointer */
  drk_sched_knobs_t a = s.heuristic, b = s.heuristic;
  uint32_t used = 0;
  b.used = &used;
  b.v[DRK_KNOB_ROWS_SPT] = 77; /* not pinned */
  CHECK(drk_search_point_hash(&a) == drk_search_point_hash(&b) && drk_search_point_equal(&a, &b));
  /* commas or spaces; a missing knob, an extra one, an illegal value */
  drk_sched_knobs_t q;
  CHECK(drk_search_point_parse(&s, "mm.tile_n=128,mm.split_k=2, mm.stages=3 mm.persistent=1,mm.cluster=2 mm.staged=0",
                               &q, err, sizeof err),
        "%s", err);
  CHECK(!drk_search_point_parse(&s, "mm.tile_n=128", &q, err, sizeof err));
  CHECK_CONTAINS(err, "missing");
  CHECK(!drk_search_point_parse(&s, "mm.tile_n=64 mm.split_k=1 mm.stages=6 mm.persistent=0 mm.cluster=1 mm.staged=1 "
                                    "rows.spt=2",
                                &q, err, sizeof err));
  CHECK_CONTAINS(err, "not a knob of this kernel");
  CHECK(!drk_search_point_parse(&s, "mm.tile_n=65 mm.split_k=1 mm.stages=6 mm.persistent=0 mm.cluster=1 mm.staged=1",
                                &q, err, sizeof err));
  CHECK_CONTAINS(err, "power of two");
  /* features in 0..1 */
  float f[DRK_KNOB_COUNT];
  drk_search_point_from_ordinal(&s, size - 1, &q);
  drk_search_point_features(&s, &q, f);
  for (int d = 0; d < s.n_dims; d++) CHECK(f[d] == 1.0f);
  /* the prune hook */
  s.prune = no_split_k_above_8;
  char why[100];
  drk_sched_knobs_t big = s.heuristic;
  big.v[DRK_KNOB_MM_SPLIT_K] = 16;
  CHECK(!drk_search_point_valid(&s, &big, why, sizeof why));
  CHECK_CONTAINS(why, "split_k 16 > 8");
  CHECK(drk_search_point_valid(&s, &s.heuristic, why, sizeof why));
  /* random points are points; the generator is deterministic */
  drk_search_rng_t r1, r2;
  drk_search_rng_seed(&r1, 42);
  drk_search_rng_seed(&r2, 42);
  for (int i = 0; i < 100; i++) {
    drk_sched_knobs_t x, y;
    drk_search_point_random(&s, &r1, &x);
    drk_search_point_random(&s, &r2, &y);
    CHECK(drk_search_point_equal(&x, &y) && drk_search_point_ordinal(&s, &x) < size);
  }
}

static void test_target(void) {
  drk_search_target_t t = {"sm_90a", 132, 1980, 2619, 4800, 52428800, "560.35.03", "12.6", "NVIDIA H200; rev 1"}, u;
  char fp[512], err[600], k1[17], k2[17];
  drk_search_target_format(&t, fp, sizeof fp);
  CHECK(drk_search_target_parse(fp, &u, err, sizeof err), "%s", err);
  CHECK(!memcmp(&t, &u, sizeof t), "fingerprint round trip: %s", fp);
  drk_search_target_key(&t, k1);
  u.sm_mhz = 1755; /* a clock cap: another target */
  drk_search_target_key(&u, k2);
  CHECK(strlen(k1) == 16 && strcmp(k1, k2) != 0);
  CHECK(!drk_search_target_parse("arch=sm_90a;smz=3", &u, err, sizeof err));
  CHECK_CONTAINS(err, "unknown target item 'smz'");
  CHECK(!drk_search_target_parse("arch=sm_90a;sms=lots", &u, err, sizeof err));
  CHECK_CONTAINS(err, "not a number");
}

static void test_features(void) {
  float a[DRK_SEARCH_WORKLOAD_FEATURES], b[DRK_SEARCH_WORKLOAD_FEATURES];
  drk_search_workload_features("mm_ws M=128 N=768 K=768 dtype=f16", a);
  CHECK(fabsf(a[0] - 7.0f / 16) < 1e-6f && fabsf(a[2] - log2f(768) / 16) < 1e-5f && a[5] == 1 && a[4] == 0);
  drk_search_workload_features("rows rows=4096 cols=1024 dtype=f32", b);
  CHECK(fabsf(b[0] - 12.0f / 16) < 1e-6f && b[4] == 1);
  drk_search_workload_features(NULL, b);
  CHECK(b[0] == 0 && b[5] == 0);
  char kind[32];
  drk_search_description_kind("mm_ws M=1", kind, sizeof kind);
  CHECK(!strcmp(kind, "mm_ws"));
  drk_search_description_kind("M=1", kind, sizeof kind);
  CHECK(!strcmp(kind, ""));
}

int main(void) {
  test_parse_line();
  test_points();
  test_target();
  test_features();
  return check_status("search.space");
}
