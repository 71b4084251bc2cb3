/* cutil: checksums and a growable string buffer, in C. */
#ifndef CUTIL_H
#define CUTIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint32_t cutil_adler32(const void *data, size_t len);
uint32_t cutil_crc32(const void *data, size_t len);
uint64_t cutil_fnv1a(const void *data, size_t len);

typedef struct {
  char *data;
  size_t len, cap;
} cutil_strbuf;

void cutil_strbuf_init(cutil_strbuf *b);
void cutil_strbuf_free(cutil_strbuf *b);
int cutil_strbuf_append(cutil_strbuf *b, const char *s, size_t n);
int cutil_strbuf_puts(cutil_strbuf *b, const char *s);
int cutil_strbuf_printf(cutil_strbuf *b, const char *fmt, ...);
int cutil_strbuf_append_u64(cutil_strbuf *b, uint64_t v, unsigned base);

#ifdef __cplusplus
}
#endif

#endif
