/* A small program with the shapes of call sites an inliner meets: tiny
 * helpers, a hot loop, a switch-heavy function, recursion and a function
 * used once. Used by examples/log_demo.py. */
#include <stddef.h>
#include <string.h>

typedef struct { unsigned char *data; size_t len, cap; } buffer;

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }
static int is_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int to_lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static int push(buffer *b, unsigned char c) {
  if (b->len == b->cap)
    return -1;
  b->data[b->len++] = c;
  return 0;
}

int normalize(buffer *out, const char *in, size_t n) {
  int last_space = 1;
  for (size_t i = 0; i < n; i++) {
    int c = to_lower((unsigned char)in[i]);
    if (is_space(c)) {
      if (!last_space && push(out, ' '))
        return -1;
      last_space = 1;
    } else {
      if (push(out, (unsigned char)c))
        return -1;
      last_space = 0;
    }
  }
  return 0;
}

static unsigned hash_step(unsigned h, unsigned char c) { return (h ^ c) * 16777619u; }

unsigned hash(const buffer *b) {
  unsigned h = 2166136261u;
  for (size_t i = 0; i < b->len; i++)
    h = hash_step(h, b->data[i]);
  return h;
}

static int classify(int c) {
  switch (c) {
  case 'a': case 'e': case 'i': case 'o': case 'u': return 1;
  case '0': case '1': case '2': case '3': case '4':
  case '5': case '6': case '7': case '8': case '9': return 2;
  case ' ': return 3;
  case '.': case ',': case ';': case '!': case '?': return 4;
  default: return 0;
  }
}

void histogram(const buffer *b, unsigned counts[5]) {
  memset(counts, 0, 5 * sizeof(unsigned));
  for (size_t i = 0; i < b->len; i++)
    counts[classify(b->data[i])]++;
}

static unsigned long fib(unsigned n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

size_t copy_prefix(buffer *dst, const buffer *src, size_t n) {
  size_t k = min_size(min_size(n, src->len), dst->cap);
  memcpy(dst->data, src->data, k);
  dst->len = k;
  return k;
}

int main(int argc, char **argv) {
  unsigned char storage[256], other[64];
  buffer b = {storage, 0, sizeof storage}, p = {other, 0, sizeof other};
  unsigned counts[5];
  const char *text = argc > 1 ? argv[1] : "Hello,  World! 42 times.";
  if (normalize(&b, text, strlen(text)))
    return 1;
  histogram(&b, counts);
  copy_prefix(&p, &b, 10);
  return (int)((hash(&b) ^ hash(&p) ^ counts[1] ^ fib((unsigned)argc + 5)) & 0x7f);
}
