import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.rocketmq.filter.expression.*;
import org.apache.rocketmq.filter.parser.SelectorParser;

// Reads lines: hex(expr) [TAB set]... where set is "-" or hexKey:hexVal[,hexKey:hexVal]...
// Writes: "E" if the expression does not parse, else one of T F N X per set.
public class Harness {
    static String unhex(String h) {
        byte[] b = new byte[h.length() / 2];
        for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        return new String(b, StandardCharsets.UTF_8);
    }
    public static void main(String[] args) throws Exception {
        BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(new BufferedOutputStream(System.out), false, "UTF-8");
        String line;
        while ((line = r.readLine()) != null) {
            String[] f = line.split("\t", -1);
            String expr = unhex(f[0]);
            BooleanExpression e;
            try {
                e = SelectorParser.parse(expr);
            } catch (Throwable t) {
                out.println("E");
                continue;
            }
            StringBuilder sb = new StringBuilder("P");
            for (int i = 1; i < f.length; i++) {
                Map<String, String> m = new HashMap<>();
                if (!f[i].equals("-")) {
                    for (String kv : f[i].split(",")) {
                        String[] p = kv.split(":", -1);
                        m.put(unhex(p[0]), unhex(p[1]));
                    }
                }
                final Map<String, String> mm = m;
                EvaluationContext ctx = new EvaluationContext() {
                    public Object get(String name) { return mm.get(name); }
                    public Map<String, Object> keyValues() { return null; }
                };
                String res;
                try {
                    Object o = e.evaluate(ctx);
                    if (o == null) res = "N";
                    else if (o == Boolean.TRUE) res = "T";
                    else if (o == Boolean.FALSE) res = "F";
                    else res = "?" + o.getClass().getSimpleName();
                } catch (Throwable t) {
                    res = "X";
                }
                sb.append(' ').append(res);
            }
            out.println(sb);
        }
        out.flush();
    }
}
