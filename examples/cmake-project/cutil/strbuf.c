#include "cutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cutil_strbuf_init(cutil_strbuf *b) {
  b->data = NULL;
  b->len = b->cap = 0;
}

void cutil_strbuf_free(cutil_strbuf *b) {
  free(b->data);
  cutil_strbuf_init(b);
}

static int reserve(cutil_strbuf *b, size_t extra) {
  size_t need = b->len + extra + 1;
  if (need <= b->cap)
    return 0;
  size_t cap = b->cap ? b->cap : 32;
  while (cap < need)
    cap *= 2;
  char *p = realloc(b->data, cap);
  if (!p)
    return -1;
  b->data = p;
  b->cap = cap;
  return 0;
}

int cutil_strbuf_append(cutil_strbuf *b, const char *s, size_t n) {
  if (reserve(b, n))
    return -1;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

int cutil_strbuf_puts(cutil_strbuf *b, const char *s) { return cutil_strbuf_append(b, s, strlen(s)); }

int cutil_strbuf_printf(cutil_strbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || reserve(b, (size_t)n))
    return -1;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return 0;
}

int cutil_strbuf_append_u64(cutil_strbuf *b, uint64_t v, unsigned base) {
  static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  char tmp[65];
  size_t i = sizeof tmp;
  if (base < 2 || base > 36)
    return -1;
  do {
    tmp[--i] = digits[v % base];
    v /= base;
  } while (v);
  return cutil_strbuf_append(b, tmp + i, sizeof tmp - i);
}
