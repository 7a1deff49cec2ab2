// calib native harness (Java). Placeholders filled by calib/executors/native/__init__.py:
//   CALIB_FUNCTION - the method under test (truth or candidate), verbatim, inside class Target;
//   CALIB_CALL     - generated glue: reads the arguments from `args`, calls the method and writes the
//                    output object into `o` with the W.w overloads.
// Protocol: stdin holds one JSON array: the batch key (a random string the host chose for this run), then
// the input states (each a JSON array of argument values). Before any input, one line
// {"key": key, "ready": true}; for input k (counted from 0), one line {"key": key, "i": k, "out": {...}}
// goes to the original stdout. The method's own System.out goes to a buffer and is reported as "stdout";
// an exception is reported as "raised": its class name; StackOverflowError and OutOfMemoryError make the
// input invalid ({"key": key, "i": k, "error": ...}). The host keeps only lines with the key, which lives
// in a local of main (docs/native-executors.md, "What the harness guarantees").
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import java.util.function.*;
import java.util.stream.*;

class Target {
/*@CALIB_FUNCTION@*/
}

public class Main {
    static final class P {
        final String s; int k;
        P(String s) { this.s = s; }
        void ws() { while (k < s.length() && Character.isWhitespace(s.charAt(k))) k++; }
        Object parse() {
            ws();
            char c = s.charAt(k);
            if (c == '[') {
                k++; List<Object> v = new ArrayList<>(); ws();
                if (s.charAt(k) == ']') { k++; return v; }
                while (true) { v.add(parse()); ws(); char d = s.charAt(k++); if (d == ']') return v; }
            }
            if (c == '"') {
                k++; StringBuilder b = new StringBuilder();
                while (s.charAt(k) != '"') {
                    char x = s.charAt(k);
                    if (x == '\\') {
                        char e = s.charAt(++k);
                        switch (e) {
                            case 'n': b.append('\n'); break; case 't': b.append('\t'); break;
                            case 'r': b.append('\r'); break; case 'b': b.append('\b'); break;
                            case 'f': b.append('\f'); break;
                            case 'u': b.append((char) Integer.parseInt(s.substring(k + 1, k + 5), 16)); k += 4; break;
                            default: b.append(e);
                        }
                    } else b.append(x);
                    k++;
                }
                k++; return b.toString();
            }
            if (s.startsWith("true", k)) { k += 4; return Boolean.TRUE; }
            if (s.startsWith("false", k)) { k += 5; return Boolean.FALSE; }
            if (s.startsWith("null", k)) { k += 4; return null; }
            int start = k;
            while (k < s.length() && "+-0123456789.eE".indexOf(s.charAt(k)) >= 0) k++;
            String t = s.substring(start, k);
            if (t.contains(".") || t.contains("e") || t.contains("E")) return Double.parseDouble(t);
            return Long.parseLong(t);
        }
    }

    // ---- readers ----
    static long i(Object o) { return o instanceof Long ? (Long) o : o instanceof Double ? (long) (double) (Double) o : Boolean.TRUE.equals(o) ? 1 : 0; }
    static double d(Object o) { return o instanceof Double ? (Double) o : (double) i(o); }
    static boolean b(Object o) { return Boolean.TRUE.equals(o); }
    static String s(Object o) { return o == null ? null : (String) o; }
    static char c(Object o) { String t = s(o); return t == null || t.isEmpty() ? '\0' : t.charAt(0); }
    @SuppressWarnings("unchecked") static List<Object> l(Object o) { return (List<Object>) o; }
    static int[] ints(Object o) { return l(o).stream().mapToInt(x -> (int) i(x)).toArray(); }
    static long[] longs(Object o) { return l(o).stream().mapToLong(Main::i).toArray(); }
    static double[] doubles(Object o) { return l(o).stream().mapToDouble(Main::d).toArray(); }
    static short[] shorts(Object o) { List<Object> v = l(o); short[] r = new short[v.size()]; for (int k = 0; k < r.length; k++) r[k] = (short) i(v.get(k)); return r; }
    static byte[] bytes(Object o) { List<Object> v = l(o); byte[] r = new byte[v.size()]; for (int k = 0; k < r.length; k++) r[k] = (byte) i(v.get(k)); return r; }
    static float[] floats(Object o) { List<Object> v = l(o); float[] r = new float[v.size()]; for (int k = 0; k < r.length; k++) r[k] = (float) d(v.get(k)); return r; }
    static boolean[] booleans(Object o) { List<Object> v = l(o); boolean[] r = new boolean[v.size()]; for (int k = 0; k < r.length; k++) r[k] = b(v.get(k)); return r; }
    static char[] chars(Object o) { List<Object> v = l(o); char[] r = new char[v.size()]; for (int k = 0; k < r.length; k++) r[k] = c(v.get(k)); return r; }
    static String[] strings(Object o) { return l(o).stream().map(Main::s).toArray(String[]::new); }

    // ---- writers ----
    static final class W {
        static void str(StringBuilder o, String s) {
            if (s == null) { o.append("null"); return; }
            o.append('"');
            for (int k = 0; k < s.length(); k++) {
                char ch = s.charAt(k);
                if (ch == '"' || ch == '\\') o.append('\\').append(ch);
                else if (ch < 0x20 || ch >= 0x7f) o.append(String.format("\\u%04x", (int) ch));
                else o.append(ch);
            }
            o.append('"');
        }
        static void w(StringBuilder o, long x) { o.append(x); }
        static void w(StringBuilder o, int x) { o.append(x); }
        static void w(StringBuilder o, short x) { o.append(x); }
        static void w(StringBuilder o, byte x) { o.append(x); }
        static void w(StringBuilder o, boolean x) { o.append(x); }
        static void w(StringBuilder o, char x) { str(o, String.valueOf(x)); }
        static void w(StringBuilder o, double x) {
            if (Double.isNaN(x)) o.append("\"nan\""); else if (Double.isInfinite(x)) o.append(x > 0 ? "\"inf\"" : "\"-inf\"");
            else o.append(Double.toString(x));
        }
        static void w(StringBuilder o, float x) { w(o, (double) x); }
        static void w(StringBuilder o, String x) { str(o, x); }
        static void w(StringBuilder o, Object x) {
            if (x == null) o.append("null");
            else if (x instanceof String) str(o, (String) x);
            else if (x instanceof Character) w(o, (char) (Character) x);
            else if (x instanceof Double || x instanceof Float) w(o, ((Number) x).doubleValue());
            else if (x instanceof Number) o.append(((Number) x).longValue());
            else if (x instanceof Boolean) o.append(x);
            else if (x instanceof int[]) w(o, Arrays.stream((int[]) x).boxed().toArray());
            else if (x instanceof long[]) w(o, Arrays.stream((long[]) x).boxed().toArray());
            else if (x instanceof double[]) w(o, Arrays.stream((double[]) x).boxed().toArray());
            else if (x instanceof Object[]) {
                o.append('['); Object[] a = (Object[]) x;
                for (int k = 0; k < a.length; k++) { if (k > 0) o.append(','); w(o, a[k]); }
                o.append(']');
            } else if (x instanceof Collection) w(o, ((Collection<?>) x).toArray());
            else if (x.getClass().isArray()) {
                int n = java.lang.reflect.Array.getLength(x); Object[] a = new Object[n];
                for (int k = 0; k < n; k++) a[k] = java.lang.reflect.Array.get(x, k);
                w(o, a);
            } else str(o, String.valueOf(x));
        }
    }

    static void call(List<Object> args, StringBuilder o) throws Throwable {
        /*@CALIB_CALL@*/
    }

    public static void main(String[] argv) throws IOException {
        String input = new String(System.in.readAllBytes(), StandardCharsets.UTF_8);
        List<Object> all = l(new P(input).parse());
        if (all.isEmpty() || !(all.get(0) instanceof String) || ((String) all.get(0)).length() > 64) {
            System.err.println("calib: malformed input JSON"); System.exit(3);
        }
        String head = "{\"key\":\"" + all.get(0) + "\",";  // the host's key is hex: nothing to escape
        all = new ArrayList<>(all.subList(1, all.size()));
        PrintStream real = new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PrintStream fake = new PrintStream(buf, true, "UTF-8");
        System.setOut(fake);
        real.println(head + "\"ready\":true}");
        real.flush();
        for (int k = 0; k < all.size(); k++) {
            StringBuilder o = new StringBuilder();
            buf.reset();
            String error = null;
            try {
                call(l(all.get(k)), o);
            } catch (StackOverflowError e) {
                error = "recursion";
            } catch (OutOfMemoryError e) {
                error = "memory";
            } catch (Throwable t) {
                o.setLength(0);
                o.append("\"raised\":"); W.str(o, t.getClass().getName());
            }
            fake.flush();
            StringBuilder line = new StringBuilder(head).append("\"i\":").append(k);
            if (error != null) { line.append(",\"error\":\"").append(error).append("\"}"); }
            else {
                String printed = buf.toString(StandardCharsets.UTF_8);
                if (printed.length() > 65536) printed = printed.substring(0, 65536);
                line.append(",\"out\":{").append(o).append(",\"stdout\":");
                W.str(line, printed);
                line.append("}}");
            }
            real.println(line);
            real.flush();
        }
    }
}
