/* Target fingerprints and workload/target features (search/features.h). */
#include "search/features.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/support.h"

void drk_search_target_format(const drk_search_target_t *t, char *buf, size_t n) {
  snprintf(buf, n, "arch=%s;sms=%d;sm_mhz=%d;mem_mhz=%d;bw_gbs=%.6g;l2_bytes=%lld;driver=%s;cuda=%s;name=%s", t->arch,
           t->sms, t->sm_mhz, t->mem_mhz, t->bw_gbs, (long long)t->l2_bytes, t->driver, t->cuda, t->name);
}

static bool copy_field(char *dst, size_t cap, const char *v, size_t len, const char *key, char *err, size_t n) {
  if (len >= cap) {
    snprintf(err, n, "target item %s: '%.*s' longer than %zu characters", key, (int)len, v, cap - 1);
    return false;
  }
  memcpy(dst, v, len);
  dst[len] = 0;
  return true;
}

static bool parse_num(const char *v, size_t len, double *out, const char *key, char *err, size_t n) {
  char b[64];
  if (len == 0 || len >= sizeof b) {
    snprintf(err, n, "target item %s: '%.*s' is not a number", key, (int)len, v);
    return false;
  }
  memcpy(b, v, len);
  b[len] = 0;
  char *end;
  *out = strtod(b, &end);
  if (*end || !isfinite(*out) || *out < 0) {
    snprintf(err, n, "target item %s: '%s' is not a number >= 0", key, b);
    return false;
  }
  return true;
}

bool drk_search_target_parse(const char *text, drk_search_target_t *out, char *err, size_t n) {
  drk_search_target_t t;
  memset(&t, 0, sizeof t);
  const char *p = text;
  while (*p) {
    /* the name takes the rest of the text: it may contain ';' */
    const char *eq = strchr(p, '=');
    if (!eq) {
      snprintf(err, n, "target item '%s' is not key=value", p);
      return false;
    }
    size_t kl = (size_t)(eq - p);
    const char *v = eq + 1;
    bool is_name = kl == 4 && strncmp(p, "name", 4) == 0;
    const char *end = is_name ? v + strlen(v) : strchr(v, ';');
    if (!end) end = v + strlen(v);
    size_t vl = (size_t)(end - v);
    char key[32];
    snprintf(key, sizeof key, "%.*s", (int)(kl < 31 ? kl : 31), p);
    double num = 0;
    bool ok = true;
    if (!strcmp(key, "arch")) ok = copy_field(t.arch, sizeof t.arch, v, vl, key, err, n);
    else if (!strcmp(key, "driver")) ok = copy_field(t.driver, sizeof t.driver, v, vl, key, err, n);
    else if (!strcmp(key, "cuda")) ok = copy_field(t.cuda, sizeof t.cuda, v, vl, key, err, n);
    else if (is_name) ok = copy_field(t.name, sizeof t.name, v, vl, key, err, n);
    else if (!strcmp(key, "sms")) ok = parse_num(v, vl, &num, key, err, n), t.sms = (int)num;
    else if (!strcmp(key, "sm_mhz")) ok = parse_num(v, vl, &num, key, err, n), t.sm_mhz = (int)num;
    else if (!strcmp(key, "mem_mhz")) ok = parse_num(v, vl, &num, key, err, n), t.mem_mhz = (int)num;
    else if (!strcmp(key, "bw_gbs")) ok = parse_num(v, vl, &num, key, err, n), t.bw_gbs = num;
    else if (!strcmp(key, "l2_bytes")) ok = parse_num(v, vl, &num, key, err, n), t.l2_bytes = (int64_t)num;
    else {
      snprintf(err, n, "unknown target item '%s' (known: arch, sms, sm_mhz, mem_mhz, bw_gbs, l2_bytes, driver, cuda, name)",
               key);
      return false;
    }
    if (!ok) return false;
    p = *end ? end + 1 : end;
  }
  *out = t;
  return true;
}

void drk_search_target_key(const drk_search_target_t *t, char out[17]) {
  char buf[512];
  drk_search_target_format(t, buf, sizeof buf);
  uint64_t h = drk_hash_fnv1a(buf, strlen(buf), 0xcbf29ce484222325ull);
  snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* The value of item `key=` in a description, or NULL. */
static const char *desc_item(const char *d, const char *key, size_t *len) {
  size_t kl = strlen(key);
  for (const char *p = d; *p;) {
    while (*p == ' ' || *p == '\t' || *p == ',') p++;
    const char *tok = p;
    while (*p && *p != ' ' && *p != '\t' && *p != ',') p++;
    if ((size_t)(p - tok) > kl && strncmp(tok, key, kl) == 0 && tok[kl] == '=') {
      *len = (size_t)(p - tok) - kl - 1;
      return tok + kl + 1;
    }
  }
  return NULL;
}

static double desc_num(const char *d, const char *key) {
  size_t len;
  const char *v = desc_item(d, key, &len);
  if (!v) return 0;
  char b[32];
  snprintf(b, sizeof b, "%.*s", (int)(len < 31 ? len : 31), v);
  double x = strtod(b, NULL);
  return isfinite(x) && x > 0 ? x : 0;
}

static float log2_scaled(double x) { return x >= 1 ? (float)(log2(x) / 16.0) : 0.0f; }

void drk_search_workload_features(const char *description, float out[DRK_SEARCH_WORKLOAD_FEATURES]) {
  for (int i = 0; i < DRK_SEARCH_WORKLOAD_FEATURES; i++) out[i] = 0;
  if (!description || !*description) return;
  double m = desc_num(description, "M"), nn = desc_num(description, "N"), k = desc_num(description, "K");
  if (m == 0) m = desc_num(description, "rows");
  if (nn == 0) nn = desc_num(description, "cols");
  if (k == 0) k = desc_num(description, "elems");
  out[0] = log2_scaled(m);
  out[1] = log2_scaled(nn);
  out[2] = log2_scaled(k);
  out[3] = log2_scaled(m * (nn > 0 ? nn : 1) * (k > 0 ? k : 1)) / 3.0f;
  size_t len;
  const char *dt = desc_item(description, "dtype", &len);
  if (dt) {
    if ((len == 3 && !strncmp(dt, "f32", 3)) || (len == 4 && !strncmp(dt, "tf32", 4))) out[4] = 1;
    else if ((len == 3 && !strncmp(dt, "f16", 3)) || (len == 4 && !strncmp(dt, "bf16", 4))) out[5] = 1;
    else if (len >= 2 && !strncmp(dt, "f8", 2)) out[6] = 1;
  }
}

void drk_search_target_features(const drk_search_target_t *t, float out[DRK_SEARCH_TARGET_FEATURES]) {
  for (int i = 0; i < DRK_SEARCH_TARGET_FEATURES; i++) out[i] = 0;
  if (!t) return;
  out[0] = (float)t->sms / 160.0f;
  out[1] = t->l2_bytes > 0 ? (float)(log2((double)t->l2_bytes) / 32.0) : 0.0f;
  out[2] = (float)(t->bw_gbs / 5000.0);
  out[3] = (float)t->sm_mhz / 2500.0f;
  int gen = 0;
  if (!strncmp(t->arch, "sm_", 3)) gen = atoi(t->arch + 3) / 10;
  else if (!strncmp(t->arch, "gfx", 3)) gen = atoi(t->arch + 3) / 100;
  out[4] = (float)gen / 10.0f;
}

void drk_search_context_features(const char *description, const drk_search_target_t *t,
                                 float out[DRK_SEARCH_CONTEXT_FEATURES]) {
  drk_search_workload_features(description, out);
  drk_search_target_features(t, out + DRK_SEARCH_WORKLOAD_FEATURES);
}

void drk_search_description_kind(const char *description, char *buf, size_t n) {
  if (n) buf[0] = 0;
  if (!description) return;
  const char *p = description;
  while (*p == ' ') p++;
  size_t len = strcspn(p, " \t,");
  if (memchr(p, '=', len)) return;
  snprintf(buf, n, "%.*s", (int)len, p);
}
