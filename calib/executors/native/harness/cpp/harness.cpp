// calib native harness (C++17): main, the input reader and the result channel. Compiled apart from the
// function under test (function.cpp, its own translation unit), which it calls through calib_call.
// Protocol: stdin holds one JSON array: the batch key (a random string the host chose for this run),
// then the input states (each a JSON array of argument values). Before any input, one line
// {"key": key, "ready": true}; for input k (counted from 0), one line {"key": key, "i": k, "out": {...}}
// goes to the original stdout. The function's own stdout (printf or std::cout, fd 1) goes to a private
// temporary file and is reported as "stdout"; an exception is reported as "raised": its (mangled) type
// name. The host keeps only lines with the key (docs/native-executors.md, "What the harness guarantees").
#include "calib_io.hpp"

extern "C" char *calib_call(const char *input);

namespace {
int out_fd = -1;
void put(const std::string &s) {  // one whole record (write(2) directly: no stream the function could reach)
  const char *p = s.data(); size_t n = s.size();
  while (n > 0) { ssize_t k = write(out_fd, p, n); if (k <= 0) exit(3); p += k; n -= (size_t)k; }
}
// x's coverage build only (-DCALIB_COVERAGE; docs/native-executors.md, "Validity and line coverage"):
// after its input (one process per input) libgcov writes the counts to function.gcda under $GCOV_PREFIX
// (the process's private /tmp), and the input's record carries that file (hex, at most 1 MiB) as "cov";
// the host keeps every copy.
#ifdef CALIB_COVERAGE
extern "C" void __gcov_dump(void);
extern "C" void __gcov_reset(void);
void add_gcda(std::string &line) {
  __gcov_dump();
  __gcov_reset();
  const char *dir = getenv("GCOV_PREFIX");
  if (!dir) return;
  FILE *f = fopen((std::string(dir) + "/function.gcda").c_str(), "rb");
  if (!f) return;
  static const char digits[] = "0123456789abcdef";
  unsigned char buf[4096]; size_t got, total = 0;
  line += ",\"cov\":\"";
  while (total < (1u << 20) && (got = fread(buf, 1, sizeof buf, f)) > 0) {
    for (size_t k = 0; k < got; k++) { line += digits[buf[k] >> 4]; line += digits[buf[k] & 15]; }
    total += got;
  }
  fclose(f);
  line += "\"";
}
#else
void add_gcda(std::string &) {}
#endif
[[noreturn]] void fail() { fputs("calib: malformed input JSON\n", stderr); exit(3); }
}  // namespace

int main() {
  std::ios::sync_with_stdio(true);
  std::string in((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  // the top-level array: the key, then each input's JSON text (parsed again inside calib_call)
  jp = in.c_str(); jws();
  if (*jp++ != '[') fail();
  J key = jparse(); jws();
  if (key.t != 4 || key.s.size() > 64) fail();
  std::vector<std::string> inputs;
  while (*jp == ',') {
    jp++; jws();
    const char *start = jp;
    jparse();
    inputs.emplace_back(start, (size_t)(jp - start)); jws();
  }
  if (*jp != ']') fail();
  std::string head = "{\"key\":\"" + key.s + "\",";  // the host's key is hex: nothing to escape
  std::fill(key.s.begin(), key.s.end(), '\0');
  out_fd = dup(1);
  char path[] = "/tmp/calib-stdout-XXXXXX";
  int cap = mkstemp(path);
  if (cap < 0 || out_fd < 0) { perror("calib"); return 3; }
  unlink(path);
  dup2(cap, 1);
  put(head + "\"ready\":true}\n");
  for (size_t k = 0; k < inputs.size(); k++) {
    std::string o;
    std::cout.flush(); fflush(stdout);
    if (ftruncate(cap, 0) != 0 || lseek(cap, 0, SEEK_SET) < 0) return 3;
    try {
      char *got = calib_call(inputs[k].c_str());
      o = got; free(got);
    } catch (const std::exception &e) {
      o = "\"raised\":"; wstr(o, typeid(e).name());
    } catch (...) {
      o = "\"raised\":\"unknown\"";
    }
    std::cout.flush(); fflush(stdout);
    lseek(cap, 0, SEEK_SET);
    std::string printed; char buf[4096]; ssize_t got;
    while ((got = read(cap, buf, sizeof buf)) > 0 && printed.size() < (1u << 16)) printed.append(buf, (size_t)got);
    std::string line = head + "\"i\":" + std::to_string(k) + ",\"out\":{" + o + ",\"stdout\":";
    wstr(line, printed);
    line += "}";
    add_gcda(line);
    line += "}\n";
    put(line);
  }
  return 0;
}
