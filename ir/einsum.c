/* Einsum term parsing (see einsum.h). */
#include "einsum.h"

int drk_einsum_label_id(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  if (ch >= 'A' && ch <= 'Z') return 26 + ch - 'A';
  return -1;
}

int drk_einsum_parse_term(const char *s, const char *e, int *labels, int max, bool *has_ell) {
  int n = 0;
  *has_ell = false;
  while (s < e) {
    if (*s == ' ') {
      s++;
      continue;
    }
    if (*s == '.') {
      if (e - s < 3 || s[1] != '.' || s[2] != '.' || *has_ell || n >= max) return -1;
      *has_ell = true;
      labels[n++] = -2;
      s += 3;
      continue;
    }
    int id = drk_einsum_label_id(*s);
    if (id < 0 || n >= max) return -1;
    labels[n++] = id;
    s++;
  }
  return n;
}
