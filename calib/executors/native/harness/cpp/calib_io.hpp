// calib native harness (C++17): the JSON reader and writer the function's translation unit
// (function.cpp) and the harness's own (harness.cpp, built as main.cpp) each compile for themselves.
// Everything here has internal linkage (an unnamed namespace), so a macro of the function's source that
// changes this code in function.cpp changes only function.cpp's copy, never the harness's.
#ifndef CALIB_IO_HPP
#define CALIB_IO_HPP
#include <bits/stdc++.h>
#include <unistd.h>

namespace {
struct J {
  int t = 0;  // 0 null 1 bool 2 int 3 num 4 str 5 arr
  long long i = 0; double d = 0; std::string s; std::vector<J> a;
};
const char *jp;
void jws() { while (*jp && isspace((unsigned char)*jp)) jp++; }
void jput(std::string &b, unsigned c) {
  if (c < 0x80) b += (char)c;
  else if (c < 0x800) { b += (char)(0xC0 | (c >> 6)); b += (char)(0x80 | (c & 63)); }
  else { b += (char)(0xE0 | (c >> 12)); b += (char)(0x80 | ((c >> 6) & 63)); b += (char)(0x80 | (c & 63)); }
}
J jparse() {
  J v; jws();
  if (*jp == '[') {
    jp++; v.t = 5; jws();
    if (*jp == ']') { jp++; return v; }
    for (;;) { v.a.push_back(jparse()); jws(); char c = *jp++; if (c == ']') return v; if (c != ',') exit(3); }
  }
  if (*jp == '"') {
    jp++; v.t = 4;
    while (*jp != '"') {
      if (!*jp) exit(3);
      if (*jp == '\\') {
        jp++;
        switch (*jp) {
          case 'n': v.s += '\n'; break; case 't': v.s += '\t'; break; case 'r': v.s += '\r'; break;
          case 'b': v.s += '\b'; break; case 'f': v.s += '\f'; break;
          case 'u': { char h[5] = {0}; memcpy(h, jp + 1, 4); jput(v.s, (unsigned)strtoul(h, nullptr, 16)); jp += 4; break; }
          default: v.s += *jp;
        }
      } else v.s += *jp;
      jp++;
    }
    jp++; return v;
  }
  if (!strncmp(jp, "true", 4)) { jp += 4; v.t = 1; v.i = 1; return v; }
  if (!strncmp(jp, "false", 5)) { jp += 5; v.t = 1; return v; }
  if (!strncmp(jp, "null", 4)) { jp += 4; return v; }
  const char *s = jp; bool isnum = false;
  while (*jp == '-' || *jp == '+' || isdigit((unsigned char)*jp) || *jp == '.' || *jp == 'e' || *jp == 'E') {
    if (*jp == '.' || *jp == 'e' || *jp == 'E') isnum = true;
    jp++;
  }
  if (jp == s) exit(3);
  if (isnum) { v.t = 3; v.d = strtod(s, nullptr); } else { v.t = 2; v.i = strtoll(s, nullptr, 10); v.d = (double)v.i; }
  return v;
}

template <class T> struct Rd {
  static T get(const J &v) {
    if constexpr (std::is_same_v<T, bool>) return v.i != 0;
    else if constexpr (std::is_same_v<T, char>) return v.s.empty() ? '\0' : v.s[0];
    else if constexpr (std::is_floating_point_v<T>) return (T)(v.t == 2 ? (double)v.i : v.d);
    else return (T)(v.t == 3 ? (long long)v.d : v.i);
  }
};
template <> struct Rd<std::string> { static std::string get(const J &v) { return v.s; } };
template <class T> struct Rd<std::vector<T>> {
  static std::vector<T> get(const J &v) { std::vector<T> r; for (auto &e : v.a) r.push_back(Rd<T>::get(e)); return r; }
};
template <class T> T rd(const J &v) { return Rd<T>::get(v); }

void wstr(std::string &o, const std::string &s) {
  o += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') { o += '\\'; o += (char)c; }
    else if (c < 0x20 || c >= 0x7f) { char t[8]; snprintf(t, sizeof t, "\\u%04x", c); o += t; }
    else o += (char)c;
  }
  o += '"';
}
void w(std::string &o, bool x) { o += x ? "true" : "false"; }
void w(std::string &o, char x) { wstr(o, std::string(1, x)); }
void w(std::string &o, const std::string &x) { wstr(o, x); }
void w(std::string &o, const char *x) { if (x) wstr(o, x); else o += "null"; }
template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0> void w(std::string &o, T x) { o += std::to_string(x); }
template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0> void w(std::string &o, T x) {
  double d = (double)x;
  if (std::isnan(d)) { o += "\"nan\""; return; }
  if (std::isinf(d)) { o += d > 0 ? "\"inf\"" : "\"-inf\""; return; }
  char t[40]; snprintf(t, sizeof t, "%.17g", d);
  if (!strpbrk(t, ".eE")) strcat(t, ".0");
  o += t;
}
template <class T> void w(std::string &o, const std::vector<T> &v) {
  o += '['; for (size_t k = 0; k < v.size(); k++) { if (k) o += ','; w(o, (T)v[k]); } o += ']';
}
template <class A, class B> void w(std::string &o, const std::pair<A, B> &p) { o += '['; w(o, p.first); o += ','; w(o, p.second); o += ']'; }
template <class T> void w(std::string &o, const std::optional<T> &p) { if (p) w(o, *p); else o += "null"; }

}  // namespace
#endif
