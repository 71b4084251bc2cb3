/* A cJSON workload for the regalloc speed studies: parses the JSON file
 * argv[1], prints it formatted and unformatted, duplicates and compares the
 * tree, minifies the text, argv[2] times (default 3); prints a checksum of
 * every output so that variants can be checked against each other. */
#include "cJSON.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long mix(unsigned long h, const char *s) {
  for (; *s; ++s)
    h = h * 1099511628211UL ^ (unsigned char)*s;
  return h;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: cjson_bench FILE.json [ROUNDS]\n");
    return 2;
  }
  int rounds = argc > 2 ? atoi(argv[2]) : 3;
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc(n + 1);
  if (fread(text, 1, n, f) != (size_t)n) {
    perror(argv[1]);
    return 1;
  }
  text[n] = 0;
  fclose(f);
  unsigned long h = 14695981039346656037UL;
  for (int r = 0; r < rounds; ++r) {
    cJSON *root = cJSON_Parse(text);
    if (!root) {
      fprintf(stderr, "parse error\n");
      return 1;
    }
    char *pretty = cJSON_Print(root), *flat = cJSON_PrintUnformatted(root);
    h = mix(mix(h, pretty), flat);
    cJSON *copy = cJSON_Duplicate(root, 1);
    h = h * 31 + (unsigned long)cJSON_Compare(root, copy, 1);
    cJSON_Minify(pretty);
    h = mix(h, pretty);
    free(pretty);
    free(flat);
    cJSON_Delete(copy);
    cJSON_Delete(root);
  }
  printf("%016lx\n", h);
  free(text);
  return 0;
}
