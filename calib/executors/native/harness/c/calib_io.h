/* calib native harness (C): what the function's translation unit (function.c) and the harness's own
 * (harness.c, built as main.c) share. The function and the glue that calls it are compiled apart from
 * the harness, so a macro or a definition in the function's source (`#define main`, its own `fwrite`)
 * cannot change the harness: its global symbols are made local to its object before the link. */
#ifndef CALIB_IO_H
#define CALIB_IO_H
#include <stdbool.h>

/* one JSON value; t: 0 null 1 bool 2 int 3 num 4 str 5 arr */
typedef struct J { int t; long long i; double d; char *s; struct J *a; int n; } J;

long long j_int(J v);
double j_num(J v);
char *j_str(J v);

/* the writer: appends to the output object of the current input (only that input's record) */
void w(const char *s);
void w_null(void);
void w_int(long long x);
void w_uint(unsigned long long x);
void w_bool(int x);
void w_num(double x);
void w_str(const char *s);
void w_char(char c);
#define W_ARRAY(writer, arr, len) do { w("["); for (long long _k = 0; _k < (long long)(len); _k++) { \
  if (_k) w(","); writer((arr)[_k]); } w("]"); } while (0)

/* defined in function.c: read one input's arguments, call the function, write its output members */
void calib_call(J args);
#endif
