/*@CALIB_CONTEXT@*/
// calib native harness (Java), built as CalibMain.java. Placeholders filled by calib/executors/native/java.py:
//   CALIB_CONTEXT  - (first line) the JDK imports of x's file context;
//   CALIB_FUNCTION - x's class (from the file context, else `class Target`) opened, with the members x uses,
//                    then the method under test (truth or candidate), verbatim;
//   CALIB_CALL     - generated glue: a class CalibCall nested in x's class (so private members are
//                    reachable) whose `call` reads the arguments from `args`, builds the instance, calls the
//                    method and writes the output object into `o` with the W.w overloads; then the braces
//                    closing x's classes, and CalibEntry (the binary name of CalibCall, a constant).
// Protocol: stdin holds one JSON array: the batch key (a random string the host chose for this run), then
// the input states (each a JSON array of argument values). Before any input, one line
// {"key": key, "ready": true}; for input k (counted from 0), one line {"key": key, "i": k, "out": {...}}
// goes to the original stdout. The method's own System.out goes to a buffer and is reported as "stdout";
// an exception is reported as "raised": its class name; StackOverflowError and OutOfMemoryError make the
// input invalid ({"key": key, "i": k, "error": ...}). The host keeps only lines with the key, which lives
// in a local of main (docs/native-executors.md, "What the harness guarantees").
// Isolation: every input loads x's classes (every class of this build but CalibMain's) in a class loader
// of its own, so static fields and static initializers start afresh; one JVM serves the batch.
// Coverage (CALIB_COVERAGE=1, the JaCoCo agent loaded): after each input the record carries that input's
// execution data ("cov", hex, at most 1 MiB), taken from the agent and reset.
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import java.util.function.*;
import java.util.stream.*;

/*@CALIB_FUNCTION@*/
/*@CALIB_CALL@*/
public class CalibMain {
    /** What the glue class of each input's loader implements (this interface is the application loader's). */
    public interface Call { void call(java.util.List<Object> args, StringBuilder o) throws Throwable; }

    /** x's classes, defined anew for each input; everything else (CalibMain, the JDK, the agent) is shared. */
    static final class Fresh extends ClassLoader {
        Fresh(ClassLoader parent) { super(parent); }
        @Override protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (name.startsWith("CalibMain") || name.indexOf('.') >= 0) return super.loadClass(name, resolve);
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                if (c == null) {
                    byte[] b;
                    try (InputStream in = getParent().getResourceAsStream(name + ".class")) {
                        if (in == null) return super.loadClass(name, resolve);
                        b = in.readAllBytes();
                    } catch (IOException e) { throw new ClassNotFoundException(name, e); }
                    c = defineClass(name, b, 0, b.length, CalibMain.class.getProtectionDomain());
                }
                if (resolve) resolveClass(c);
                return c;
            }
        }
    }

    static final class P {
        final String s; int k;
        P(String s) { this.s = s; }
        void ws() { while (k < s.length() && Character.isWhitespace(s.charAt(k))) k++; }
        Object parse() {
            ws();
            char c = s.charAt(k);
            if (c == '[') {
                k++; java.util.List<Object> v = new java.util.ArrayList<>(); ws();
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
    public static long i(Object o) { return o instanceof Long ? (Long) o : o instanceof Double ? (long) (double) (Double) o : Boolean.TRUE.equals(o) ? 1 : 0; }
    public static double d(Object o) { return o instanceof Double ? (Double) o : (double) i(o); }
    public static boolean b(Object o) { return Boolean.TRUE.equals(o); }
    public static String s(Object o) { return o == null ? null : (String) o; }
    public static char c(Object o) { String t = s(o); return t == null || t.isEmpty() ? '\0' : t.charAt(0); }
    @SuppressWarnings("unchecked") public static java.util.List<Object> l(Object o) { return (java.util.List<Object>) o; }
    public static int[] ints(Object o) { return l(o).stream().mapToInt(x -> (int) i(x)).toArray(); }
    public static long[] longs(Object o) { return l(o).stream().mapToLong(CalibMain::i).toArray(); }
    public static double[] doubles(Object o) { return l(o).stream().mapToDouble(CalibMain::d).toArray(); }
    public static short[] shorts(Object o) { java.util.List<Object> v = l(o); short[] r = new short[v.size()]; for (int k = 0; k < r.length; k++) r[k] = (short) i(v.get(k)); return r; }
    public static byte[] bytes(Object o) { java.util.List<Object> v = l(o); byte[] r = new byte[v.size()]; for (int k = 0; k < r.length; k++) r[k] = (byte) i(v.get(k)); return r; }
    public static float[] floats(Object o) { java.util.List<Object> v = l(o); float[] r = new float[v.size()]; for (int k = 0; k < r.length; k++) r[k] = (float) d(v.get(k)); return r; }
    public static boolean[] booleans(Object o) { java.util.List<Object> v = l(o); boolean[] r = new boolean[v.size()]; for (int k = 0; k < r.length; k++) r[k] = b(v.get(k)); return r; }
    public static char[] chars(Object o) { java.util.List<Object> v = l(o); char[] r = new char[v.size()]; for (int k = 0; k < r.length; k++) r[k] = c(v.get(k)); return r; }
    public static String[] strings(Object o) { return l(o).stream().map(CalibMain::s).toArray(String[]::new); }

    // ---- writers ----
    public static final class W {
        public static void str(StringBuilder o, String s) {
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
        public static void w(StringBuilder o, long x) { o.append(x); }
        public static void w(StringBuilder o, int x) { o.append(x); }
        public static void w(StringBuilder o, short x) { o.append(x); }
        public static void w(StringBuilder o, byte x) { o.append(x); }
        public static void w(StringBuilder o, boolean x) { o.append(x); }
        public static void w(StringBuilder o, char x) { str(o, String.valueOf(x)); }
        public static void w(StringBuilder o, double x) {
            if (Double.isNaN(x)) o.append("\"nan\""); else if (Double.isInfinite(x)) o.append(x > 0 ? "\"inf\"" : "\"-inf\"");
            else o.append(Double.toString(x));
        }
        public static void w(StringBuilder o, float x) { w(o, (double) x); }
        public static void w(StringBuilder o, String x) { str(o, x); }
        public static void w(StringBuilder o, Object x) {
            if (x == null) o.append("null");
            else if (x instanceof String) str(o, (String) x);
            else if (x instanceof Character) w(o, (char) (Character) x);
            else if (x instanceof Double || x instanceof Float) w(o, ((Number) x).doubleValue());
            else if (x instanceof Number) o.append(((Number) x).longValue());
            else if (x instanceof Boolean) o.append(x);
            else if (x instanceof int[]) w(o, java.util.Arrays.stream((int[]) x).boxed().toArray());
            else if (x instanceof long[]) w(o, java.util.Arrays.stream((long[]) x).boxed().toArray());
            else if (x instanceof double[]) w(o, java.util.Arrays.stream((double[]) x).boxed().toArray());
            else if (x instanceof Object[]) {
                o.append('['); Object[] a = (Object[]) x;
                for (int k = 0; k < a.length; k++) { if (k > 0) o.append(','); w(o, a[k]); }
                o.append(']');
            } else if (x instanceof java.util.Collection) w(o, ((java.util.Collection<?>) x).toArray());
            else if (x.getClass().isArray()) {
                int n = java.lang.reflect.Array.getLength(x); Object[] a = new Object[n];
                for (int k = 0; k < n; k++) a[k] = java.lang.reflect.Array.get(x, k);
                w(o, a);
            } else str(o, String.valueOf(x));
        }
    }

    public static void main(String[] argv) throws IOException {
        String input = new String(System.in.readAllBytes(), StandardCharsets.UTF_8);
        java.util.List<Object> all = l(new P(input).parse());
        if (all.isEmpty() || !(all.get(0) instanceof String) || ((String) all.get(0)).length() > 64) {
            System.err.println("calib: malformed input JSON"); System.exit(3);
        }
        String head = "{\"key\":\"" + all.get(0) + "\",";  // the host's key is hex: nothing to escape
        all = new java.util.ArrayList<>(all.subList(1, all.size()));
        PrintStream real = new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PrintStream fake = new PrintStream(buf, true, "UTF-8");
        System.setOut(fake);
        // x's coverage build (CALIB_COVERAGE=1 and the JaCoCo agent present): the agent, reached by reflection
        // (its classes are not compiled against), in locals of main; the data of the start-up dropped
        Object agent = null;
        java.lang.reflect.Method dump = null;
        if ("1".equals(System.getenv("CALIB_COVERAGE"))) {
            try {
                agent = Class.forName("org.jacoco.agent.rt.RT").getMethod("getAgent").invoke(null);
                dump = Class.forName("org.jacoco.agent.rt.IAgent").getMethod("getExecutionData", boolean.class);
                dump.invoke(agent, true);
            } catch (Throwable t) {
                dump = null;
            }
        }
        ClassLoader shared = CalibMain.class.getClassLoader();
        real.println(head + "\"ready\":true}");
        real.flush();
        for (int k = 0; k < all.size(); k++) {
            StringBuilder o = new StringBuilder();
            buf.reset();
            String error = null;
            try {
                Class<?> glue = new Fresh(shared).loadClass(CalibEntry.CALL);
                java.lang.reflect.Constructor<?> make = glue.getDeclaredConstructor();
                make.setAccessible(true);
                ((Call) make.newInstance()).call(l(all.get(k)), o);
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
            if (error != null) { line.append(",\"error\":\"").append(error).append("\""); }
            else {
                String printed = buf.toString(StandardCharsets.UTF_8);
                if (printed.length() > 65536) printed = printed.substring(0, 65536);
                line.append(",\"out\":{").append(o).append(",\"stdout\":");
                W.str(line, printed);
                line.append("}");
            }
            if (dump != null) {
                byte[] data = null;
                try { data = (byte[]) dump.invoke(agent, true); } catch (Throwable t) { data = null; }
                if (data != null && data.length <= (1 << 20)) {
                    char[] hex = new char[2 * data.length];
                    for (int n = 0; n < data.length; n++) {
                        hex[2 * n] = Character.forDigit((data[n] >> 4) & 15, 16);
                        hex[2 * n + 1] = Character.forDigit(data[n] & 15, 16);
                    }
                    line.append(",\"cov\":\"").append(hex).append('"');
                }
            }
            line.append('}');
            real.println(line);
            real.flush();
        }
    }
}
