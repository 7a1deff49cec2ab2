// calib native harness (C++17): the function's own translation unit. Placeholders filled by
// calib/executors/native/__init__.py:
//   CALIB_CONTEXT  - the kept items of x's file context between #line directives (empty without one;
//                    calib/executors/native/context.py), on the function's line so x's lines keep their numbers;
//   CALIB_FUNCTION - the function under test (truth or candidate), verbatim;
//   CALIB_CALL     - generated glue: reads the arguments from `args` with rd<T>, calls the function and
//                    writes the output object into `o` with the w overloads.
// What this file defines or redefines reaches the harness only through calib_call: one input's
// arguments (JSON text) in, the members of its output object (JSON text) out, or an exception.
#include <bits/stdc++.h>
#include <unistd.h>
using namespace std;

/*@CALIB_CONTEXT@*//*@CALIB_FUNCTION@*/

#include "calib_io.hpp"

namespace {
void calib_glue(const std::vector<J> &args, std::string &o) {
  /*@CALIB_CALL@*/
}
}  // namespace

extern "C" char *calib_call(const char *input) {
  jp = input;
  J all = jparse();
  std::string o;
  calib_glue(all.a, o);
  return strdup(o.c_str());
}
