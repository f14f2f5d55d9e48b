/* Reader of safetensors weight files; see safetensors.h. The header's JSON is parsed by a
 * small recursive-descent reader that accepts exactly what the format needs: an object of
 * objects (tensor entries) plus "__metadata__" (an object of strings, skipped). */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  const char *p, *e;
  drk_arena_t *a;
  char *err;
  size_t errn;
  bool failed;
} jr_t;

static bool jfail(jr_t *j, const char *fmt, ...) DRK_PRINTF(2, 3);
static bool jfail(jr_t *j, const char *fmt, ...) {
  if (!j->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->err, j->errn, fmt, ap);
    va_end(ap);
  }
  j->failed = true;
  return false;
}

static void jws(jr_t *j) {
  while (j->p < j->e && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static bool jchar(jr_t *j, char c) {
  jws(j);
  if (j->p < j->e && *j->p == c) {
    j->p++;
    return true;
  }
  return false;
}

static bool jexpect(jr_t *j, char c) {
  if (jchar(j, c)) return true;
  return jfail(j, "header JSON: expected '%c'", c);
}

/* A string; \uXXXX beyond ASCII is kept as '?' (names are matched byte for byte). */
static bool jstring(jr_t *j, char **out) {
  jws(j);
  if (j->p >= j->e || *j->p != '"') return jfail(j, "header JSON: expected a string");
  j->p++;
  char *s = drk_arena_alloc(j->a, (size_t)(j->e - j->p) + 1);
  size_t n = 0;
  while (j->p < j->e && *j->p != '"') {
    char c = *j->p++;
    if (c == '\\') {
      if (j->p >= j->e) break;
      char x = *j->p++;
      switch (x) {
        case 'n': c = '\n'; break;
        case 't': c = '\t'; break;
        case 'r': c = '\r'; break;
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'u': {
          if (j->e - j->p < 4) return jfail(j, "header JSON: bad \\u escape");
          unsigned v = 0;
          for (int k = 0; k < 4; k++) {
            char h = *j->p++;
            v = v * 16 + (unsigned)(h >= '0' && h <= '9' ? h - '0' : (h | 32) >= 'a' && (h | 32) <= 'f' ? (h | 32) - 'a' + 10 : 99);
            if (v > 0xffff) return jfail(j, "header JSON: bad \\u escape");
          }
          c = v && v < 0x80 ? (char)v : '?';
          break;
        }
        default: c = x;
      }
    }
    s[n++] = c;
  }
  if (j->p >= j->e) return jfail(j, "header JSON: unterminated string");
  j->p++;
  s[n] = 0;
  *out = s;
  return true;
}

static bool juint(jr_t *j, uint64_t *out) {
  jws(j);
  if (j->p >= j->e || *j->p < '0' || *j->p > '9') return jfail(j, "header JSON: expected a non-negative integer");
  uint64_t v = 0;
  while (j->p < j->e && *j->p >= '0' && *j->p <= '9') {
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*j->p - '0'), &v))
      return jfail(j, "header JSON: integer out of range");
    j->p++;
  }
  *out = v;
  return true;
}

/* [u, u, ...] into v (at most max). */
static bool juints(jr_t *j, uint64_t *v, int max, int *n) {
  *n = 0;
  if (!jexpect(j, '[')) return false;
  if (jchar(j, ']')) return true;
  do {
    if (*n >= max) return jfail(j, "header JSON: list longer than %d", max);
    if (!juint(j, &v[(*n)++])) return false;
  } while (jchar(j, ','));
  return jexpect(j, ']');
}

static bool skip_string_object(jr_t *j) {
  if (!jexpect(j, '{')) return false;
  if (jchar(j, '}')) return true;
  do {
    char *k, *v;
    if (!jstring(j, &k) || !jexpect(j, ':') || !jstring(j, &v)) return false;
  } while (jchar(j, ','));
  return jexpect(j, '}');
}

static const struct {
  const char *name;
  drk_dtype_t dt;
} st_dtypes[] = {
    {"F64", DRK_DT_F64}, {"F32", DRK_DT_F32}, {"F16", DRK_DT_F16}, {"BF16", DRK_DT_BF16},
    {"F8_E4M3", DRK_DT_F8E4M3}, {"F8_E5M2", DRK_DT_F8E5M2}, {"I64", DRK_DT_I64}, {"I32", DRK_DT_I32},
    {"I16", DRK_DT_I16}, {"I8", DRK_DT_I8}, {"U8", DRK_DT_U8}, {"BOOL", DRK_DT_BOOL},
};

static bool entry(jr_t *j, drk_st_entry_t *t) {
  bool has_dt = false, has_shape = false, has_off = false;
  if (!jexpect(j, '{')) return false;
  if (!jchar(j, '}')) do {
      char *k;
      if (!jstring(j, &k) || !jexpect(j, ':')) return false;
      if (strcmp(k, "dtype") == 0) {
        char *v;
        if (!jstring(j, &v)) return false;
        size_t i = 0;
        while (i < sizeof st_dtypes / sizeof st_dtypes[0] && strcmp(st_dtypes[i].name, v) != 0) i++;
        if (i == sizeof st_dtypes / sizeof st_dtypes[0])
          return jfail(j, "tensor '%s': unsupported safetensors dtype '%s'", t->name, v);
        t->dtype = st_dtypes[i].dt;
        has_dt = true;
      } else if (strcmp(k, "shape") == 0) {
        uint64_t d[DRK_ST_MAX_RANK];
        if (!juints(j, d, DRK_ST_MAX_RANK, &t->rank)) return false;
        for (int i = 0; i < t->rank; i++) {
          if (d[i] > ((uint64_t)1 << 56)) return jfail(j, "tensor '%s': dimension too large", t->name);
          t->dims[i] = (int64_t)d[i];
        }
        has_shape = true;
      } else if (strcmp(k, "data_offsets") == 0) {
        uint64_t o[2];
        int n;
        if (!juints(j, o, 2, &n)) return false;
        if (n != 2) return jfail(j, "tensor '%s': data_offsets needs 2 numbers", t->name);
        t->begin = o[0];
        t->end = o[1];
        has_off = true;
      } else {
        return jfail(j, "tensor '%s': unknown key '%s'", t->name, k);
      }
    } while (jchar(j, ','));
  if (!jexpect(j, '}')) return false;
  if (!has_dt || !has_shape || !has_off)
    return jfail(j, "tensor '%s': needs dtype, shape and data_offsets", t->name);
  return true;
}

void drk_safetensors_release(void *base, size_t size) {
  if (base) munmap(base, size);
}

bool drk_safetensors_open(const char *path, drk_arena_t *a, drk_safetensors_t *out, char *err, size_t errn) {
  memset(out, 0, sizeof *out);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    int e = fd < 0 ? errno : EINVAL;
    if (fd >= 0) close(fd);
    snprintf(err, errn, "cannot open weights file '%s': %s", path, strerror(e));
    return false;
  }
  size_t size = (size_t)sb.st_size;
  void *base = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  int e = errno;
  close(fd);
  if (base == MAP_FAILED) {
    snprintf(err, errn, "cannot map weights file '%s': %s", path, strerror(e));
    return false;
  }
  const uint8_t *b = base;
  uint64_t hn = 0;
  if (size < 8) {
    snprintf(err, errn, "weights file '%s': %zu bytes, too short for a safetensors header", path, size);
    goto fail;
  }
  for (int i = 7; i >= 0; i--) hn = hn << 8 | b[i];
  if (hn > size - 8) {
    snprintf(err, errn, "weights file '%s': header length %llu exceeds the file (%zu bytes)", path,
             (unsigned long long)hn, size);
    goto fail;
  }
  jr_t j = {(const char *)b + 8, (const char *)b + 8 + hn, a, err, errn, false};
  drk_st_entry_t *es = NULL;
  size_t n = 0, cap = 0;
  if (!jexpect(&j, '{')) goto jfailed;
  if (!jchar(&j, '}')) do {
      char *k;
      if (!jstring(&j, &k) || !jexpect(&j, ':')) goto jfailed;
      if (strcmp(k, "__metadata__") == 0) {
        if (!skip_string_object(&j)) goto jfailed;
        continue;
      }
      drk_st_entry_t t;
      memset(&t, 0, sizeof t);
      t.name = k;
      if (!entry(&j, &t)) goto jfailed;
      uint64_t data0 = 8 + hn;
      if (t.end < t.begin || t.end > size - data0) {
        jfail(&j, "tensor '%s': data_offsets [%llu, %llu) outside the data (%llu bytes)", k,
              (unsigned long long)t.begin, (unsigned long long)t.end, (unsigned long long)(size - data0));
        goto jfailed;
      }
      int64_t numel = 1;
      for (int i = 0; i < t.rank; i++) {
        if (t.dims[i] && numel > ((int64_t)1 << 56) / t.dims[i]) {
          jfail(&j, "tensor '%s': too many elements", k);
          goto jfailed;
        }
        numel *= t.dims[i];
      }
      size_t want = drk_dtype_nbytes(t.dtype, numel);
      if (t.end - t.begin != want) {
        jfail(&j, "tensor '%s': %llu data bytes but %s with %lld elements needs %zu", k,
              (unsigned long long)(t.end - t.begin), drk_dtype_name(t.dtype), (long long)numel, want);
        goto jfailed;
      }
      t.begin += data0;
      t.end += data0;
      DRK_VEC_PUSH(a, es, n, cap, t);
    } while (jchar(&j, ','));
  if (!jexpect(&j, '}')) goto jfailed;
  out->base = base;
  out->size = size;
  out->entries = es;
  out->n = n;
  return true;
jfailed: {
  char tmp[512];
  snprintf(tmp, sizeof tmp, "%s", err);
  snprintf(err, errn, "weights file '%s': %s", path, tmp);
}
fail:
  drk_safetensors_release(base, size);
  return false;
}

const drk_st_entry_t *drk_safetensors_find(const drk_safetensors_t *s, const char *name) {
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->entries[i].name, name) == 0) return &s->entries[i];
  return NULL;
}
