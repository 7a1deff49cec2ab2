/* calib native harness (C): the function's own translation unit. Placeholders filled by
 * calib/executors/native/__init__.py:
 *   CALIB_CONTEXT  - the kept items of x's file context between #line directives (empty without one;
 *                    calib/executors/native/context.py), on the function's line so x's lines keep their numbers;
 *   CALIB_FUNCTION - the function under test (truth or candidate), verbatim;
 *   CALIB_CALL     - generated glue: reads the arguments of one input from `args`, calls the function and
 *                    writes the output object with the w_* helpers of calib_io.h.
 * Whatever this file defines or redefines reaches the harness (harness.c) only through calib_call. */
#define _GNU_SOURCE
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the function under test ---- */
/*@CALIB_CONTEXT@*//*@CALIB_FUNCTION@*/
/* ---- end of the function under test ---- */

#include "calib_io.h"

void calib_call(J args) {
  /*@CALIB_CALL@*/
}
