"""x's file context in the C and C++ executors (calib/executors/native/context.py).

The context is the file before x, as calib.data cuts it (possibly starting inside a construct). Every
comparison compiles and runs real code in the sandbox; expected outputs are recomputed here in Python
(zlib.crc32 is the same CRC-32 as zlib's C crc32, hashlib.md5 the same MD5 as OpenSSL's).
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib

import pytest

from calib.executors.native.context import kept_items
from tests.executors.native.test_native import compare, needs

# a file cut mid-function (its first two lines are the end of an earlier function), then the items x uses
C_CONTEXT = """    total += n;
  return total; }
#include <string.h>
#include <zlib.h>
typedef unsigned int qty_t;
typedef struct {
  int id;
  qty_t count;
} record;
#define LIMIT 100
static unsigned long mix(unsigned long h, int v) { return (h * 31u) ^ (unsigned long)v; }
int main(void) { return 0; }
"""
C_X = """unsigned long record_digest(record r, const char *tag) {
  unsigned long h = crc32(0L, Z_NULL, 0);
  h = crc32(h, (const unsigned char *)tag, (unsigned int)strlen(tag));
  if (r.count > LIMIT) {
    h = mix(h, r.id);
  }
  return mix(h, (int)r.count);
}"""


def _mix(h: int, v: int) -> int:
    return ((h * 31) % 2**64) ^ (v % 2**64)


def _digest(state: dict, *, last_mix: bool = True) -> int:
    rec, tag = state["r"], state["tag"]
    h = zlib.crc32(tag.encode())
    if rec["count"] > 100:
        h = _mix(h, rec["id"])
    count = rec["count"] - 2**32 if rec["count"] >= 2**31 else rec["count"]  # (int)r.count
    return _mix(h, count) if last_mix else h


def test_kept_items_skip_a_cut_construct_and_x_itself():
    kept = kept_items("c", C_CONTEXT + "unsigned long record_digest(record r, const char *t) { return 0; }\n",
                      "record_digest")
    assert kept.splitlines()[0] == "#include <string.h>"  # the cut function's tail is left out
    assert "static unsigned long mix" in kept and "int main(void)" in kept
    assert "record_digest" not in kept


@needs("c")
@pytest.mark.skipif(not os.path.exists("/usr/include/zlib.h"), reason="zlib1g-dev is not installed")
def test_c_function_using_its_files_types_helpers_and_a_system_library():
    candidate = C_X.replace("if (r.count > LIMIT)", "if (r.count >= LIMIT + 1)")
    wrong = C_X.replace("return mix(h, (int)r.count);", "return h;")
    result = compare("c", C_X, [candidate, wrong], context=C_CONTEXT)
    assert result.valid_inputs == 10 and result.conclusive, result.reason
    for row in result.inputs:
        assert json.loads(row.output)["return"] == _digest(row.state), row.state
    # the wrong candidate (no last mix) agrees where mixing changes nothing: h * 31 ^ count == h
    agree = [_digest(row.state, last_mix=False) == _digest(row.state) for row in result.inputs]
    assert result.candidates[0].sim_func == 1.0 and result.candidates[1].sim_func == sum(agree) / 10
    assert result.coverage == 1.0  # the pool has a count over LIMIT, and the choice takes it


@needs("c")
def test_a_missing_external_header_is_unsupported_with_its_name():
    result = compare("c", C_X, [C_X], context=C_CONTEXT.replace("<zlib.h>", "<not_here/zlib.h>"))
    assert not result.conclusive and result.reason == "unsupported: external header <not_here/zlib.h> is not installed"


@needs("c")
def test_compiler_messages_name_the_context_and_x_keeps_its_line_numbers():
    broken = C_CONTEXT.replace("#define LIMIT 100", "#define LIMIT 100\nstatic int off(void) { return undeclared; }")
    result = compare("c", C_X, [], context=broken)
    assert result.reason.startswith("unparsable: x does not compile") and "context.c:" in result.reason


CPP_CONTEXT = """#include <openssl/md5.h>
namespace inv {
struct Item { int id; double price; };
inline double tax(double v) { return v * 1.25; }
}
using inv::Item;
static const int kLimit = 50;
"""
CPP_X = """std::string label(int id, double price) {
  Item it{id, price};
  unsigned char d[MD5_DIGEST_LENGTH];
  std::string key = std::to_string(it.id);
  MD5(reinterpret_cast<const unsigned char *>(key.data()), key.size(), d);
  std::string out;
  for (int k = 0; k < 2; k++) { char b[3]; snprintf(b, 3, "%02x", d[k]); out += b; }
  if (it.id > kLimit) out += "+";
  return out + std::to_string((long)inv::tax(it.price));
}"""


@needs("cpp")
@pytest.mark.skipif(not os.path.exists("/usr/include/openssl/md5.h"), reason="libssl-dev is not installed")
def test_cpp_function_using_its_files_namespace_class_and_openssl():
    result = compare("cpp", CPP_X, [CPP_X], context=CPP_CONTEXT, input_timeout=2.0)
    assert result.valid_inputs == 10, result.reason
    for row in result.inputs:
        state = row.state
        want = hashlib.md5(str(state["id"]).encode()).hexdigest()[:4] + ("+" if state["id"] > 50 else "")
        want += str(int(state["price"] * 1.25))  # (long) truncates toward zero, as int() does
        assert json.loads(row.output)["return"] == want, state
    assert result.candidates[0].sim_func == (1.0 if result.conclusive else None)


VOWELS = """int count_vowels(const char *s, int cap) {
  int n = 0;
  for (const char *p = s; *p; ++p) {
    if (strchr("aeiou", *p)) n++;
  }
  return n > cap ? cap : n;
}"""


@needs("cpp")
def test_cpp_const_char_pointer_is_a_string():
    result = compare("cpp", VOWELS, [VOWELS], input_timeout=2.0)
    assert result.conclusive, result.reason
    for row in result.inputs:  # the same count in Python, capped
        want = min(sum(ch in "aeiou" for ch in row.state["s"]), row.state["cap"])
        assert json.loads(row.output)["return"] == want, row.state


def test_signatures_are_read_with_tree_sitter_and_misreadings_are_named():
    from calib.executors.native.c import parse_c
    from calib.executors.native.types import Unsupported

    # comments and a pointer result in the head are read; the regular expression used to take the comment's
    # parentheses or a for header for the signature
    sig = parse_c("/* scale (x) by k */\nstatic inline const char *\npick (int k /* >= 0 */, int n)\n"
                  "{ return k ? \"a\" : \"b\"; }")
    assert sig.name == "pick" and [p.name for p in sig.params] == ["k", "n"] and sig.returns.kind == "str"
    for source, why in [("int f (a, b)\n int a; int b;\n{ return a + b; }", "a K&R-style definition"),
                        ("int f (int x ARG_UNUSED, int y) { return y; }", "a signature with a macro or syntax error"),
                        ("int f (int (*cmp)(int, int), int n) { return n; }", "a function pointer parameter")]:
        with pytest.raises(Unsupported, match=why):
            parse_c(source)
