// calib's JaCoCo report for x's Java coverage build (calib/executors/native/coverage_java.py). Compiled in the
// coverage build against Debian's org.jacoco.core and ASM; run in the build sandbox as
//   java -cp <build>/report:<jacoco core>:<asm> CalibJacoco <build> <copies>
// It reads every copy of the execution data (<copies>/p*/jacoco.exec, written by the process that ran x:
// untrusted bytes, parsed only here), merges them, analyzes the class files of x's build (all but the
// harness's) and prints one JSON object on stdout:
//   {"methods": [{"class": "Outer$Inner", "name": "f", "first": 12, "last": 19, "lines": [[12, 2], ...]}],
//    "copies": [[...the same list, under one copy's data alone...], ...]}
// with JaCoCo's line status (1 not covered, 2 fully covered, 3 partly covered; lines without code left out):
// "methods" under all copies merged, "copies" one list per copy directory in copy order (a directory without
// a copy: nothing reached); or {"error": "..."} when a copy or a class cannot be read.
import java.io.File;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.jacoco.core.analysis.Analyzer;
import org.jacoco.core.analysis.CoverageBuilder;
import org.jacoco.core.analysis.IClassCoverage;
import org.jacoco.core.analysis.IMethodCoverage;
import org.jacoco.core.data.ExecutionDataStore;
import org.jacoco.core.tools.ExecFileLoader;

public class CalibJacoco {
    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int k = 0; k < s.length(); k++) {
            char c = s.charAt(k);
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c >= 0x7f) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    /** The lines of every method of ``classes`` under ``store``'s execution data, as a JSON list. */
    static String methods(ExecutionDataStore store, File[] classes) throws java.io.IOException {
        CoverageBuilder builder = new CoverageBuilder();
        Analyzer analyzer = new Analyzer(store, builder);
        for (File f : classes) analyzer.analyzeClass(Files.readAllBytes(f.toPath()), f.getName());
        StringBuilder out = new StringBuilder("[");
        boolean first = true;
        for (IClassCoverage c : builder.getClasses()) {
            for (IMethodCoverage m : c.getMethods()) {
                if (m.getFirstLine() < 0) continue;
                out.append(first ? "" : ",").append("{\"class\":").append(quote(c.getName()))
                   .append(",\"name\":").append(quote(m.getName())).append(",\"first\":").append(m.getFirstLine())
                   .append(",\"last\":").append(m.getLastLine()).append(",\"lines\":[");
                first = false;
                boolean any = false;
                for (int n = m.getFirstLine(); n <= m.getLastLine(); n++) {
                    int status = m.getLine(n).getStatus();
                    if (status == 0) continue;
                    out.append(any ? "," : "").append('[').append(n).append(',').append(status).append(']');
                    any = true;
                }
                out.append("]}");
            }
        }
        return out.append(']').toString();
    }

    public static void main(String[] argv) {
        StringBuilder out = new StringBuilder();
        try {
            File[] all = new File(argv[0]).listFiles();
            File[] copies = new File(argv[1]).listFiles();
            if (all == null || copies == null) throw new IllegalStateException("no build or copies directory");
            Arrays.sort(copies);  // p0000, p0001, ...: copy order
            List<File> classes = new ArrayList<>();
            for (File f : all) {
                String name = f.getName();
                if (name.endsWith(".class") && !name.startsWith("CalibMain") && !name.startsWith("CalibEntry")) classes.add(f);
            }
            File[] own = classes.toArray(new File[0]);
            Arrays.sort(own);
            ExecFileLoader merged = new ExecFileLoader();
            StringBuilder each = new StringBuilder("[");
            for (int k = 0; k < copies.length; k++) {
                File exec = new File(copies[k], "jacoco.exec");
                ExecFileLoader one = new ExecFileLoader();
                if (exec.isFile()) {
                    merged.load(exec);
                    one.load(exec);
                }
                each.append(k > 0 ? "," : "").append(methods(one.getExecutionDataStore(), own));
            }
            each.append(']');
            out.append("{\"methods\":").append(methods(merged.getExecutionDataStore(), own))
               .append(",\"copies\":").append(each).append('}');
        } catch (Throwable t) {
            String why = t.getClass().getSimpleName() + ": " + t.getMessage();
            Throwable cause = t.getCause();
            if (cause != null) why += " (" + cause.getClass().getSimpleName() + ": " + cause.getMessage() + ")";
            out.setLength(0);
            out.append("{\"error\":").append(quote(why.length() > 300 ? why.substring(0, 300) : why)).append('}');
        }
        System.out.println(out);
    }
}
