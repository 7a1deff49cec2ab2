// calib native harness (Rust). Placeholders filled by calib/executors/native/__init__.py:
//   CALIB_FUNCTION - the function under test (truth or candidate), verbatim (a method inside its impl block,
//                    opened on this line so that x keeps its line numbers: the coverage reader counts on it);
//   CALIB_CONTEXT  - what of x's file the build uses (types, helpers, std imports) and the reader and writer
//                    of each of its structs (rust.py, rust_context.py);
//   CALIB_CALL     - generated glue: reads the arguments from `args`, calls the function inside
//                    catch_unwind and writes the output object into `o`.
// Protocol: stdin holds one JSON array: the batch key (a random string the host chose for this run), then
// the input states (each a JSON array of argument values). Before any input, one line
// {"key": key, "ready": true}; for input k (counted from 0), one line {"key": key, "i": k, "out": {...}}
// goes to the original stdout. The function's own stdout (fd 1) goes to a private temporary file and is
// reported as "stdout"; a panic is reported as "panic": true. The host keeps only lines with the key
// (docs/native-executors.md, "What the harness guarantees"). x's coverage build (--cfg calib_coverage) adds
// "cov": the hex of the profile the runtime wrote after the input (coverage_rust.py).
// Every name of calib's own starts with Calib/calib/CALIB and the std traits are imported without a name
// (`as _`), so the context's own items and imports (`use std::io::Write;`, a struct `P`) do not clash.
#![allow(unused_imports, unused_mut, dead_code, unused_variables, non_snake_case)]
use std::collections::*;
use std::io::{Read as _, Seek as _, Write as _};
use std::os::unix::io::{AsRawFd as _, FromRawFd as _};

/*@CALIB_FUNCTION@*/

/*@CALIB_CONTEXT@*/

mod calib_sys {
    extern "C" {
        pub fn dup(fd: i32) -> i32;
        pub fn dup2(fd: i32, fd2: i32) -> i32;
    }
}

#[cfg(calib_coverage)]
extern "C" { fn __llvm_profile_write_file() -> i32; }

/// x's coverage build: the runtime writes this input's profile to the file `LLVM_PROFILE_FILE` names (read
/// before x ran), and the record carries it as "cov" (at most 1 MiB; a longer one is not sent).
#[cfg(calib_coverage)]
fn calib_put_cov(line: &mut String, path: &Option<String>) {
    unsafe { __llvm_profile_write_file(); }
    let Some(path) = path else { return };
    let mut data = Vec::new();
    // a plain file only: x may have put a link, a directory or a FIFO there (its own loss, never a hang)
    if !std::fs::symlink_metadata(path).map(|m| m.file_type().is_file()).unwrap_or(false) { return; }
    let Ok(f) = std::fs::File::open(path) else { return };
    if f.take((1 << 20) + 1).read_to_end(&mut data).is_err() || data.len() > (1 << 20) { return; }
    line.push_str(",\"cov\":\"");
    for b in data { line.push_str(&format!("{:02x}", b)); }
    line.push('"');
}
#[cfg(not(calib_coverage))]
fn calib_put_cov(_line: &mut String, _path: &Option<String>) {}

#[derive(Clone, Debug)]
enum CalibJ { Null, Bool(bool), Int(i64), Num(f64), Str(String), Arr(Vec<CalibJ>) }
static CALIB_NULL: CalibJ = CalibJ::Null;

struct CalibParser<'a> { s: &'a [u8], k: usize }
impl<'a> CalibParser<'a> {
    fn ws(&mut self) { while self.k < self.s.len() && (self.s[self.k] as char).is_whitespace() { self.k += 1; } }
    fn parse(&mut self) -> CalibJ {
        self.ws();
        let c = self.s[self.k];
        if c == b'[' {
            self.k += 1; let mut v = Vec::new(); self.ws();
            if self.s[self.k] == b']' { self.k += 1; return CalibJ::Arr(v); }
            loop {
                v.push(self.parse()); self.ws();
                let d = self.s[self.k]; self.k += 1;
                if d == b']' { return CalibJ::Arr(v); }
            }
        }
        if c == b'"' {
            self.k += 1; let mut out: Vec<u8> = Vec::new();
            while self.s[self.k] != b'"' {
                let b = self.s[self.k];
                if b == b'\\' {
                    self.k += 1;
                    let e = self.s[self.k];
                    match e {
                        b'n' => out.push(b'\n'), b't' => out.push(b'\t'), b'r' => out.push(b'\r'),
                        b'b' => out.push(8), b'f' => out.push(12),
                        b'u' => {
                            let h = std::str::from_utf8(&self.s[self.k + 1..self.k + 5]).unwrap();
                            let ch = char::from_u32(u32::from_str_radix(h, 16).unwrap()).unwrap_or('?');
                            let mut buf = [0u8; 4]; out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                            self.k += 4;
                        }
                        _ => out.push(e),
                    }
                } else { out.push(b); }
                self.k += 1;
            }
            self.k += 1;
            return CalibJ::Str(String::from_utf8_lossy(&out).into_owned());
        }
        for (word, v) in [("true", CalibJ::Bool(true)), ("false", CalibJ::Bool(false)), ("null", CalibJ::Null)] {
            if self.s[self.k..].starts_with(word.as_bytes()) { self.k += word.len(); return v; }
        }
        let start = self.k;
        while self.k < self.s.len() && b"+-0123456789.eE".contains(&self.s[self.k]) { self.k += 1; }
        let t = std::str::from_utf8(&self.s[start..self.k]).unwrap();
        if t.contains(|c| c == '.' || c == 'e' || c == 'E') { CalibJ::Num(t.parse().unwrap()) } else { CalibJ::Int(t.parse().unwrap()) }
    }
}

trait CalibFromJ { fn fj(j: &CalibJ) -> Self; }
macro_rules! fj_int { ($($t:ty),*) => { $(impl CalibFromJ for $t { fn fj(j: &CalibJ) -> Self {
    match j { CalibJ::Int(i) => *i as $t, CalibJ::Num(d) => *d as $t, CalibJ::Bool(b) => (*b as i64) as $t, _ => 0 as $t } } })* } }
fj_int!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f32, f64);
impl CalibFromJ for bool { fn fj(j: &CalibJ) -> Self { matches!(j, CalibJ::Bool(true)) } }
impl CalibFromJ for char { fn fj(j: &CalibJ) -> Self { if let CalibJ::Str(s) = j { s.chars().next().unwrap_or('\0') } else { '\0' } } }
impl CalibFromJ for String { fn fj(j: &CalibJ) -> Self { if let CalibJ::Str(s) = j { s.clone() } else { String::new() } } }
impl<T: CalibFromJ> CalibFromJ for Vec<T> { fn fj(j: &CalibJ) -> Self { if let CalibJ::Arr(v) = j { v.iter().map(T::fj).collect() } else { Vec::new() } } }

fn calib_wstr(o: &mut String, s: &str) {
    o.push('"');
    for ch in s.chars() {
        match ch {
            '"' => o.push_str("\\\""), '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 || (c as u32) >= 0x7f => {
                let mut buf = [0u16; 2];
                for u in c.encode_utf16(&mut buf) { o.push_str(&format!("\\u{:04x}", u)); }
            }
            c => o.push(c),
        }
    }
    o.push('"');
}
trait CalibW { fn w(&self, o: &mut String); }
macro_rules! w_int { ($($t:ty),*) => { $(impl CalibW for $t { fn w(&self, o: &mut String) { o.push_str(&self.to_string()); } })* } }
w_int!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize);
macro_rules! w_float { ($($t:ty),*) => { $(impl CalibW for $t { fn w(&self, o: &mut String) {
    if self.is_nan() { o.push_str("\"nan\""); } else if self.is_infinite() { o.push_str(if *self > 0.0 { "\"inf\"" } else { "\"-inf\"" }); }
    else { o.push_str(&format!("{:?}", *self as f64)); } } })* } }
w_float!(f32, f64);
impl CalibW for bool { fn w(&self, o: &mut String) { o.push_str(if *self { "true" } else { "false" }); } }
impl CalibW for char { fn w(&self, o: &mut String) { calib_wstr(o, &self.to_string()); } }
impl CalibW for String { fn w(&self, o: &mut String) { calib_wstr(o, self); } }
impl CalibW for str { fn w(&self, o: &mut String) { calib_wstr(o, self); } }
impl CalibW for () { fn w(&self, o: &mut String) { o.push_str("null"); } }
impl<T: CalibW + ?Sized> CalibW for &T { fn w(&self, o: &mut String) { (**self).w(o); } }
impl<T: CalibW> CalibW for Option<T> { fn w(&self, o: &mut String) { match self { Some(v) => v.w(o), None => o.push_str("null") } } }
impl<T: CalibW> CalibW for [T] { fn w(&self, o: &mut String) {
    o.push('['); for (k, v) in self.iter().enumerate() { if k > 0 { o.push(','); } v.w(o); } o.push(']'); } }
impl<T: CalibW> CalibW for Vec<T> { fn w(&self, o: &mut String) { self.as_slice().w(o); } }
impl<A: CalibW, B: CalibW> CalibW for (A, B) { fn w(&self, o: &mut String) { o.push('['); self.0.w(o); o.push(','); self.1.w(o); o.push(']'); } }

fn calib_call(args: &[CalibJ], o: &mut String) {
    /*@CALIB_CALL@*/
}

fn main() {
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).unwrap();
    let mut all = match (CalibParser { s: &input, k: 0 }).parse() { CalibJ::Arr(v) => v, _ => { eprintln!("calib: malformed input"); std::process::exit(3) } };
    let head = match all.first() {  // the host's key is hex: nothing to escape
        Some(CalibJ::Str(key)) if !all.is_empty() && key.len() <= 64 => format!("{{\"key\":\"{}\",", key),
        _ => { eprintln!("calib: malformed input"); std::process::exit(3) }
    };
    all.remove(0);
    input.iter_mut().for_each(|b| *b = 0);
    std::panic::set_hook(Box::new(|_| {}));
    let profile = std::env::var("LLVM_PROFILE_FILE").ok();  // read before x runs: x may change it
    let mut out = unsafe { std::fs::File::from_raw_fd(calib_sys::dup(1)) };
    let path = format!("{}/calib-stdout-{}", std::env::var("TMPDIR").unwrap_or("/tmp".into()), std::process::id());
    let mut cap = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    unsafe { calib_sys::dup2(cap.as_raw_fd(), 1); }
    out.write_all(format!("{}\"ready\":true}}\n", head).as_bytes()).unwrap(); out.flush().unwrap();
    for (k, item) in all.iter().enumerate() {
        let args: Vec<CalibJ> = if let CalibJ::Arr(v) = item { v.clone() } else { Vec::new() };
        let mut o = String::new();
        let _ = std::io::stdout().flush();
        cap.set_len(0).unwrap(); cap.seek(std::io::SeekFrom::Start(0)).unwrap();
        calib_call(&args, &mut o);
        let _ = std::io::stdout().flush();
        cap.seek(std::io::SeekFrom::Start(0)).unwrap();
        let mut printed = Vec::new();
        let _ = (&mut cap).take(1 << 16).read_to_end(&mut printed);
        let mut line = format!("{}\"i\":{},\"out\":{{{}", head, k, o);
        line.push_str(",\"stdout\":"); calib_wstr(&mut line, &String::from_utf8_lossy(&printed));
        line.push('}');
        calib_put_cov(&mut line, &profile);
        line.push_str("}\n");
        out.write_all(line.as_bytes()).unwrap(); out.flush().unwrap();
    }
}
