#include "cutil.h"

static uint32_t crc_table[256];
static int crc_ready;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    crc_table[i] = c;
  }
  crc_ready = 1;
}

uint32_t cutil_adler32(const void *data, size_t len) {
  const unsigned char *p = data;
  uint32_t a = 1, b = 0;
  while (len > 0) {
    size_t n = len < 5552 ? len : 5552;
    len -= n;
    while (n--) {
      a += *p++;
      b += a;
    }
    a %= 65521u;
    b %= 65521u;
  }
  return (b << 16) | a;
}

uint32_t cutil_crc32(const void *data, size_t len) {
  const unsigned char *p = data;
  uint32_t c = 0xFFFFFFFFu;
  if (!crc_ready)
    crc_init();
  while (len--)
    c = crc_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint64_t cutil_fnv1a(const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ull;
  while (len--) {
    h ^= *p++;
    h *= 1099511628211ull;
  }
  return h;
}
