/* cksum: Adler-32, CRC-32 and FNV-1a of files (or of stdin). */
#include <stdio.h>
#include <stdlib.h>

#include "cutil.h"

static int sum_stream(FILE *f, const char *name) {
  cutil_strbuf all, line;
  char chunk[4096];
  size_t n;
  cutil_strbuf_init(&all);
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
    if (cutil_strbuf_append(&all, chunk, n))
      return 1;
  cutil_strbuf_init(&line);
  cutil_strbuf_printf(&line, "%08x %08x ", (unsigned)cutil_adler32(all.data, all.len),
                      (unsigned)cutil_crc32(all.data, all.len));
  cutil_strbuf_append_u64(&line, cutil_fnv1a(all.data, all.len), 16);
  cutil_strbuf_printf(&line, " %zu %s\n", all.len, name);
  fputs(line.data, stdout);
  cutil_strbuf_free(&line);
  cutil_strbuf_free(&all);
  return 0;
}

int main(int argc, char **argv) {
  int status = 0;
  if (argc < 2)
    return sum_stream(stdin, "-");
  for (int i = 1; i < argc; i++) {
    FILE *f = fopen(argv[i], "rb");
    if (!f) {
      perror(argv[i]);
      status = 1;
      continue;
    }
    status |= sum_stream(f, argv[i]);
    fclose(f);
  }
  return status;
}
