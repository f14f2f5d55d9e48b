/* Writing and reading the search's flat JSON lines (search/json.h). */
#include "search/json.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void drk_json_str(FILE *out, const char *s) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    switch (*p) {
      case '"': fputs("\\\"", out); break;
      case '\\': fputs("\\\\", out); break;
      case '\n': fputs("\\n", out); break;
      case '\r': fputs("\\r", out); break;
      case '\t': fputs("\\t", out); break;
      default:
        if (*p < 0x20) fprintf(out, "\\u%04x", *p);
        else fputc(*p, out);
    }
  }
  fputc('"', out);
}

void drk_json_num(FILE *out, double x) {
  if (!isfinite(x)) fputs("null", out);
  else if (x == floor(x) && fabs(x) < 1e15) fprintf(out, "%.0f", x);
  else fprintf(out, "%.17g", x);
}

void drk_json_num_known(FILE *out, double x) {
  if (x < 0) fputs("null", out);
  else drk_json_num(out, x);
}

typedef struct jp {
  const char *s, *start;
  char *err;
  size_t n;
} jp_t;

static bool jp_fail(jp_t *p, const char *what) {
  snprintf(p->err, p->n, "column %d: %s", (int)(p->s - p->start) + 1, what);
  return false;
}

static void jp_ws(jp_t *p) {
  while (*p->s == ' ' || *p->s == '\t' || *p->s == '\r' || *p->s == '\n') p->s++;
}

static void put_utf8(char **w, uint32_t c) {
  char *o = *w;
  if (c < 0x80) *o++ = (char)c;
  else if (c < 0x800) *o++ = (char)(0xc0 | (c >> 6)), *o++ = (char)(0x80 | (c & 0x3f));
  else if (c < 0x10000)
    *o++ = (char)(0xe0 | (c >> 12)), *o++ = (char)(0x80 | ((c >> 6) & 0x3f)), *o++ = (char)(0x80 | (c & 0x3f));
  else
    *o++ = (char)(0xf0 | (c >> 18)), *o++ = (char)(0x80 | ((c >> 12) & 0x3f)),
    *o++ = (char)(0x80 | ((c >> 6) & 0x3f)), *o++ = (char)(0x80 | (c & 0x3f));
  *w = o;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A string at p->s (at its '"') into malloc'ed *out. */
static bool jp_string(jp_t *p, char **out) {
  if (*p->s != '"') return jp_fail(p, "expected a string");
  p->s++;
  size_t cap = strlen(p->s) + 1;
  char *buf = malloc(cap), *w = buf;
  if (!buf) return jp_fail(p, "out of memory");
  for (;;) {
    unsigned char c = (unsigned char)*p->s;
    if (!c) {
      free(buf);
      return jp_fail(p, "unterminated string");
    }
    if (c < 0x20) {
      free(buf);
      return jp_fail(p, "control character in a string");
    }
    p->s++;
    if (c == '"') break;
    if (c != '\\') {
      *w++ = (char)c;
      continue;
    }
    char e = *p->s++;
    switch (e) {
      case '"': *w++ = '"'; break;
      case '\\': *w++ = '\\'; break;
      case '/': *w++ = '/'; break;
      case 'b': *w++ = '\b'; break;
      case 'f': *w++ = '\f'; break;
      case 'n': *w++ = '\n'; break;
      case 'r': *w++ = '\r'; break;
      case 't': *w++ = '\t'; break;
      case 'u': {
        uint32_t cp = 0;
        for (int i = 0; i < 4; i++) {
          int h = hexval(p->s[i]);
          if (h < 0) {
            free(buf);
            return jp_fail(p, "bad \\u escape");
          }
          cp = cp * 16 + (uint32_t)h;
        }
        p->s += 4;
        if (cp >= 0xd800 && cp < 0xdc00 && p->s[0] == '\\' && p->s[1] == 'u') {
          uint32_t lo = 0;
          bool ok = true;
          for (int i = 0; i < 4; i++) {
            int h = hexval(p->s[2 + i]);
            if (h < 0) ok = false;
            lo = lo * 16 + (uint32_t)(h < 0 ? 0 : h);
          }
          if (ok && lo >= 0xdc00 && lo < 0xe000) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            p->s += 6;
          }
        }
        if (cp == 0) {
          free(buf);
          return jp_fail(p, "\\u0000 in a string");
        }
        put_utf8(&w, cp);
        break;
      }
      default: free(buf); return jp_fail(p, "bad escape in a string");
    }
  }
  *w = 0;
  *out = buf;
  return true;
}

static bool jp_number(jp_t *p, double *out) {
  char *end;
  *out = strtod(p->s, &end);
  if (end == p->s || !isfinite(*out)) return jp_fail(p, "expected a value");
  p->s = end;
  return true;
}

bool drk_json_parse_object(const char *text, drk_json_object_t *o, char *err, size_t n) {
  memset(o, 0, sizeof *o);
  jp_t p = {text, text, err, n};
  jp_ws(&p);
  if (*p.s != '{') return jp_fail(&p, "expected '{'");
  p.s++;
  jp_ws(&p);
  if (*p.s == '}') {
    p.s++;
    goto end;
  }
  for (;;) {
    jp_ws(&p);
    if (o->n == DRK_JSON_MAX_FIELDS) {
      drk_json_object_free(o);
      return jp_fail(&p, "too many fields");
    }
    char *key;
    if (!jp_string(&p, &key)) {
      drk_json_object_free(o);
      return false;
    }
    drk_json_field_t *f = &o->f[o->n];
    if (strlen(key) >= sizeof f->key) {
      free(key);
      drk_json_object_free(o);
      return jp_fail(&p, "key too long");
    }
    snprintf(f->key, sizeof f->key, "%s", key);
    free(key);
    for (int i = 0; i < o->n; i++)
      if (!strcmp(o->f[i].key, f->key)) {
        drk_json_object_free(o);
        return jp_fail(&p, "duplicate key");
      }
    o->n++;
    jp_ws(&p);
    if (*p.s != ':') {
      drk_json_object_free(o);
      return jp_fail(&p, "expected ':'");
    }
    p.s++;
    jp_ws(&p);
    bool ok = true;
    if (*p.s == '"') {
      f->kind = DRK_JSON_STR;
      ok = jp_string(&p, &f->str);
    } else if (!strncmp(p.s, "true", 4) || !strncmp(p.s, "false", 5)) {
      f->kind = DRK_JSON_BOOL;
      f->b = *p.s == 't';
      p.s += f->b ? 4 : 5;
    } else if (!strncmp(p.s, "null", 4)) {
      f->kind = DRK_JSON_NULL;
      p.s += 4;
    } else if (*p.s == '[') {
      f->kind = DRK_JSON_ARRAY;
      p.s++;
      jp_ws(&p);
      if (*p.s == ']') p.s++;
      else
        for (;;) {
          if (f->n_array == DRK_JSON_MAX_ARRAY) {
            ok = jp_fail(&p, "array too long");
            break;
          }
          jp_ws(&p);
          if (!(ok = jp_number(&p, &f->array[f->n_array++]))) break;
          jp_ws(&p);
          if (*p.s == ',') {
            p.s++;
            continue;
          }
          if (*p.s == ']') {
            p.s++;
            break;
          }
          ok = jp_fail(&p, "expected ',' or ']'");
          break;
        }
    } else {
      f->kind = DRK_JSON_NUM;
      ok = jp_number(&p, &f->num);
    }
    if (!ok) {
      drk_json_object_free(o);
      return false;
    }
    jp_ws(&p);
    if (*p.s == ',') {
      p.s++;
      continue;
    }
    if (*p.s == '}') {
      p.s++;
      break;
    }
    drk_json_object_free(o);
    return jp_fail(&p, "expected ',' or '}'");
  }
end:
  jp_ws(&p);
  if (*p.s) {
    drk_json_object_free(o);
    return jp_fail(&p, "text after the object");
  }
  return true;
}

void drk_json_object_free(drk_json_object_t *o) {
  for (int i = 0; i < o->n; i++) {
    free(o->f[i].str);
    o->f[i].str = NULL;
  }
  o->n = 0;
}

const drk_json_field_t *drk_json_get(const drk_json_object_t *o, const char *key) {
  for (int i = 0; i < o->n; i++)
    if (!strcmp(o->f[i].key, key)) return &o->f[i];
  return NULL;
}
