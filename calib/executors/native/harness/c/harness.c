/* calib native harness (C): main, the input reader and the result channel. Compiled apart from the
 * function under test (function.c, its own translation unit; calib_io.h is what they share).
 * Protocol: stdin holds one JSON array: the batch key (a random string the host chose for this run),
 * then the input states (each a JSON array of argument values). Before any input, one line
 * {"key": key, "ready": true}; for input k (counted from 0), one line {"key": key, "i": k, "out": {...}}
 * goes to the original stdout, which nothing else in the process writes to by name: the function's
 * stdout (fd 1) is a private temporary file, reported as "stdout". The host keeps only lines with the
 * key, which the function never sees (docs/native-executors.md, "What the harness guarantees"). */
#define _GNU_SOURCE
#include <ctype.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib_io.h"

static const char *jp;
static void jws(void) { while (*jp == ' ' || *jp == '\n' || *jp == '\r' || *jp == '\t') jp++; }
static void jfail(void) { fprintf(stderr, "calib: malformed input JSON\n"); exit(3); }
static void jput(char **b, size_t *n, size_t *cap, unsigned c) {
  if (*n + 4 >= *cap) { *cap = *cap * 2 + 16; *b = realloc(*b, *cap); }
  if (c < 0x80) (*b)[(*n)++] = (char)c;
  else if (c < 0x800) { (*b)[(*n)++] = (char)(0xC0 | (c >> 6)); (*b)[(*n)++] = (char)(0x80 | (c & 63)); }
  else { (*b)[(*n)++] = (char)(0xE0 | (c >> 12)); (*b)[(*n)++] = (char)(0x80 | ((c >> 6) & 63));
         (*b)[(*n)++] = (char)(0x80 | (c & 63)); }
}
static J jparse(void) {
  J v; memset(&v, 0, sizeof v); jws();
  if (*jp == '[') {
    int cap = 4; jp++; v.t = 5; v.a = malloc(sizeof(J) * cap); jws();
    if (*jp == ']') { jp++; return v; }
    for (;;) {
      if (v.n == cap) { cap *= 2; v.a = realloc(v.a, sizeof(J) * cap); }
      v.a[v.n++] = jparse(); jws();
      if (*jp == ',') { jp++; continue; }
      if (*jp == ']') { jp++; return v; }
      jfail();
    }
  }
  if (*jp == '"') {
    size_t n = 0, cap = 16; char *b = malloc(cap); jp++;
    while (*jp != '"') {
      if (!*jp) jfail();
      if (*jp == '\\') {
        jp++;
        switch (*jp) {
          case 'n': jput(&b, &n, &cap, '\n'); break; case 't': jput(&b, &n, &cap, '\t'); break;
          case 'r': jput(&b, &n, &cap, '\r'); break; case 'b': jput(&b, &n, &cap, '\b'); break;
          case 'f': jput(&b, &n, &cap, '\f'); break;
          case 'u': { char h[5] = {0}; memcpy(h, jp + 1, 4); jput(&b, &n, &cap, (unsigned)strtoul(h, NULL, 16)); jp += 4; break; }
          default: jput(&b, &n, &cap, (unsigned char)*jp);
        }
        jp++;
      } else { jput(&b, &n, &cap, (unsigned char)*jp); jp++; }
    }
    jp++; b[n] = 0; v.t = 4; v.s = b; v.n = (int)n; return v;
  }
  if (!strncmp(jp, "true", 4)) { jp += 4; v.t = 1; v.i = 1; return v; }
  if (!strncmp(jp, "false", 5)) { jp += 5; v.t = 1; return v; }
  if (!strncmp(jp, "null", 4)) { jp += 4; return v; }
  { const char *s = jp; char *e; int isnum = 0;
    while (*jp == '-' || *jp == '+' || isdigit((unsigned char)*jp) || *jp == '.' || *jp == 'e' || *jp == 'E') {
      if (*jp == '.' || *jp == 'e' || *jp == 'E') isnum = 1; jp++; }
    if (jp == s) jfail();
    if (isnum) { v.t = 3; v.d = strtod(s, &e); } else { v.t = 2; v.i = strtoll(s, &e, 10); v.d = (double)v.i; }
  }
  return v;
}
long long j_int(J v) { return v.t == 3 ? (long long)v.d : v.i; }
double j_num(J v) { return v.t == 2 ? (double)v.i : v.d; }
char *j_str(J v) { char *s = malloc((size_t)v.n + 1); memcpy(s, v.s ? v.s : "", (size_t)v.n); s[v.n] = 0; return s; }

/* ---- writer: into a growing buffer, flushed as one line per input ---- */
static char *wb; static size_t wn, wcap;
static void wraw(const char *s, size_t n) {
  if (wn + n + 1 >= wcap) { wcap = (wcap + n) * 2 + 64; wb = realloc(wb, wcap); }
  memcpy(wb + wn, s, n); wn += n;
}
void w(const char *s) { wraw(s, strlen(s)); }
void w_null(void) { w("null"); }
void w_int(long long x) { char t[32]; snprintf(t, sizeof t, "%lld", x); w(t); }
void w_uint(unsigned long long x) { char t[32]; snprintf(t, sizeof t, "%llu", x); w(t); }
void w_bool(int x) { w(x ? "true" : "false"); }
void w_num(double x) {
  char t[40];
  if (isnan(x)) { w("\"nan\""); return; }
  if (isinf(x)) { w(x > 0 ? "\"inf\"" : "\"-inf\""); return; }
  snprintf(t, sizeof t, "%.17g", x);
  if (!strpbrk(t, ".eE")) strcat(t, ".0");
  w(t);
}
static void w_strn(const char *s, size_t n) {
  w("\"");
  for (size_t k = 0; k < n; k++) {
    unsigned char c = (unsigned char)s[k]; char t[8];
    if (c == '"' || c == '\\') { t[0] = '\\'; t[1] = (char)c; wraw(t, 2); }
    else if (c < 0x20 || c >= 0x7f) { snprintf(t, sizeof t, "\\u%04x", c); w(t); } /* bytes, not code points */
    else wraw((const char *)&c, 1);
  }
  w("\"");
}
void w_str(const char *s) { if (!s) w_null(); else w_strn(s, strlen(s)); }
void w_char(char c) { w_strn(&c, 1); }

/* ---- the function's own stdout ---- */
static int cap_fd = -1;
static void capture_begin(void) {
  fflush(stdout);
  if (ftruncate(cap_fd, 0) != 0 || lseek(cap_fd, 0, SEEK_SET) < 0) { perror("calib"); exit(3); }
}
static void capture_end(void) {
  char buf[4096]; ssize_t got; size_t total = 0;
  fflush(stdout); lseek(cap_fd, 0, SEEK_SET); w(",\"stdout\":\"");
  while ((got = read(cap_fd, buf, sizeof buf)) > 0 && total < (1u << 16)) {
    for (ssize_t k = 0; k < got; k++) {
      unsigned char c = (unsigned char)buf[k]; char t[8];
      if (c == '"' || c == '\\') { t[0] = '\\'; t[1] = (char)c; wraw(t, 2); }
      else if (c < 0x20 || c >= 0x7f) { snprintf(t, sizeof t, "\\u%04x", c); w(t); }
      else wraw((const char *)&c, 1);
    }
    total += (size_t)got;
  }
  w("\"");
}

/* one whole record on the channel (write(2) directly: no stdio buffer the function could reach) */
static int out_fd = -1;
static void put(const char *s, size_t n) {
  while (n > 0) { ssize_t k = write(out_fd, s, n); if (k <= 0) exit(3); s += k; n -= (size_t)k; }
}

/* x's coverage build only (-DCALIB_COVERAGE; docs/native-executors.md, "Validity and line coverage"):
 * after its input (one process per input) libgcov writes the counts to function.gcda under $GCOV_PREFIX
 * (the process's private /tmp), and the input's record carries that file (hex, at most 1 MiB) as "cov";
 * the host keeps every copy. */
#ifdef CALIB_COVERAGE
void __gcov_dump(void);
void __gcov_reset(void);
static void put_gcda(void) {
  static const char digits[] = "0123456789abcdef";
  char path[4096], hex[8192]; unsigned char buf[4096]; size_t got, total = 0;
  const char *dir = getenv("GCOV_PREFIX");
  __gcov_dump();
  __gcov_reset();
  if (!dir || snprintf(path, sizeof path, "%s/function.gcda", dir) >= (int)sizeof path) return;
  FILE *f = fopen(path, "rb");
  if (!f) return;
  put(",\"cov\":\"", 8);
  while (total < (1u << 20) && (got = fread(buf, 1, sizeof buf, f)) > 0) {
    for (size_t k = 0; k < got; k++) { hex[2 * k] = digits[buf[k] >> 4]; hex[2 * k + 1] = digits[buf[k] & 15]; }
    put(hex, 2 * got);
    total += got;
  }
  fclose(f);
  put("\"", 1);
}
#else
static void put_gcda(void) {}
#endif

int main(void) {
  size_t n = 0, cap = 1 << 16; char *in = malloc(cap); size_t got;
  while ((got = fread(in + n, 1, cap - n - 1, stdin)) > 0) { n += got; if (n + 1 >= cap) { cap *= 2; in = realloc(in, cap); } }
  in[n] = 0; jp = in;
  J all = jparse();
  if (all.t != 5 || all.n < 1 || all.a[0].t != 4 || all.a[0].n > 64) jfail();
  char key[80];
  snprintf(key, sizeof key, "{\"key\":\"%s\",", all.a[0].s);  /* the host's key is hex: nothing to escape */
  memset(all.a[0].s, 0, (size_t)all.a[0].n);
  out_fd = dup(1);
  char path[] = "/tmp/calib-stdout-XXXXXX";
  cap_fd = mkstemp(path);
  if (cap_fd < 0 || out_fd < 0) { perror("calib"); return 3; }
  unlink(path);
  dup2(cap_fd, 1);
  put(key, strlen(key)); put("\"ready\":true}\n", 14);
  for (int k = 1; k < all.n; k++) {
    char head[48];
    wn = 0;
    capture_begin();
    calib_call(all.a[k].t == 5 ? all.a[k] : (J){0});
    capture_end();
    snprintf(head, sizeof head, "\"i\":%d,\"out\":{", k - 1);
    put(key, strlen(key)); put(head, strlen(head)); put(wb, wn); put("}", 1);
    put_gcda();
    put("}\n", 2);
  }
  return 0;
}
