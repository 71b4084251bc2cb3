/* A codec workload for measuring generated code: compresses and
 * decompresses a deterministic text-like buffer with one codec (chosen at
 * build time: -DCODEC_LZ4, -DCODEC_BROTLI or -DCODEC_ZSTD), checks the
 * round trip, and prints a checksum of the compressed bytes (equal for
 * every correct build: a miscompile shows up as another checksum or a
 * failed round trip). Usage: codec_bench [rounds [KiB]] (default 3 rounds of
 * 1024 KiB). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(CODEC_LZ4)
#include "lz4.h"
#include "lz4hc.h"
#elif defined(CODEC_BROTLI)
#include <brotli/decode.h>
#include <brotli/encode.h>
#elif defined(CODEC_ZSTD)
#include "zstd.h"
#else
#error "define CODEC_LZ4, CODEC_BROTLI or CODEC_ZSTD"
#endif

static const char *Words[] = {"register", "allocation", "eviction", "policy", "compiler", "the", "of",
                              "a", "live", "range", "spill", "split", "copy", "load", "store",
                              "frequency", "block", "loop", "value", "interference", "hint", "cost"};

static void fill(unsigned char *buf, size_t n) {
  uint64_t s = 0x9e3779b97f4a7c15ull;
  size_t at = 0;
  while (at < n) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    const char *w = Words[s % (sizeof(Words) / sizeof(*Words))];
    size_t len = strlen(w);
    for (size_t i = 0; i < len && at < n; ++i)
      buf[at++] = (unsigned char)w[i];
    if (at < n)
      buf[at++] = (s >> 40) % 11 == 0 ? '\n' : ' ';
    if ((s >> 20) % 97 == 0 && at + 8 < n) /* some incompressible bytes */
      for (int i = 0; i < 8; ++i)
        buf[at++] = (unsigned char)(s >> (i * 8));
  }
}

static uint64_t fnv(const unsigned char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  const size_t n = (size_t)(argc > 2 ? atoi(argv[2]) : 1024) << 10;
  unsigned char *in = malloc(n), *back = malloc(n);
  size_t cap = 2 * n + 65536;
  unsigned char *out = malloc(cap);
  fill(in, n);
  uint64_t sum = 0;
  for (int r = 0; r < rounds; ++r) {
    size_t clen = 0, dlen = 0;
#if defined(CODEC_LZ4)
    clen = (size_t)LZ4_compress_HC((const char *)in, (char *)out, (int)n, (int)cap, 9);
    int d = LZ4_decompress_safe((const char *)out, (char *)back, (int)clen, (int)n);
    dlen = d < 0 ? 0 : (size_t)d;
#elif defined(CODEC_BROTLI)
    clen = cap;
    if (!BrotliEncoderCompress(7, 22, BROTLI_MODE_TEXT, n, in, &clen, out))
      clen = 0;
    dlen = n;
    if (BrotliDecoderDecompress(clen, out, &dlen, back) != BROTLI_DECODER_RESULT_SUCCESS)
      dlen = 0;
#else
    clen = ZSTD_compress(out, cap, in, n, 9);
    if (ZSTD_isError(clen))
      clen = 0;
    dlen = ZSTD_decompress(back, n, out, clen);
    if (ZSTD_isError(dlen))
      dlen = 0;
#endif
    if (clen == 0 || dlen != n || memcmp(in, back, n) != 0) {
      fprintf(stderr, "round trip failed (compressed %zu, decompressed %zu)\n", clen, dlen);
      return 1;
    }
    sum ^= fnv(out, clen) + (uint64_t)r;
  }
  printf("%016llx\n", (unsigned long long)sum);
  return 0;
}
