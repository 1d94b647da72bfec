// How L3's JSON deserializer reads a value into its one-field class: unknown
// fields ignored, a missing (or null) expiryTime is 0, numbers and numeric
// strings coerced to long, anything after the object ignored; the rest throws.
import java.math.BigDecimal;
import java.math.RoundingMode;

final class JsonExpiry {
    private static final String FIELD = "expiryTime";

    private final String s;
    private int i;

    private JsonExpiry(String s) {
        this.s = s;
    }

    /** The expiryTime of `text`; throws on null, non-objects and bad JSON. */
    static long read(String text) {
        if (text == null) throw new NullPointerException("no value to deserialize");
        JsonExpiry p = new JsonExpiry(text);
        p.ws();
        if (p.i >= text.length()) throw new IllegalArgumentException("no content");
        if (text.startsWith("null", p.i)) throw new NullPointerException("JSON null");
        return p.object();
    }

    private long object() {
        expect('{');
        long expiry = 0;
        ws();
        if (peek() == '}') {
            i++;
            return expiry;
        }
        for (;;) {
            ws();
            String name = string();
            ws();
            expect(':');
            ws();
            if (name.equals(FIELD)) expiry = fieldValue(); /* duplicates: the last wins */
            else skipValue();
            ws();
            char c = next();
            if (c == '}') return expiry;
            if (c != ',') throw bad("expected , or }");
        }
    }

    private long fieldValue() {
        char c = peek();
        if (c == 'n') {
            literal("null");
            return 0;
        }
        BigDecimal d;
        if (c == '"') {
            String t = string().trim();
            try {
                d = new BigDecimal(t);
            } catch (NumberFormatException e) {
                throw bad("expiryTime string is not a number");
            }
        } else {
            d = number();
        }
        /* Fractions are truncated; out of the long range fails. */
        return d.setScale(0, RoundingMode.DOWN).longValueExact();
    }

    private void skipValue() {
        char c = peek();
        if (c == '{') {
            i++;
            ws();
            if (peek() == '}') {
                i++;
                return;
            }
            for (;;) {
                ws();
                string();
                ws();
                expect(':');
                ws();
                skipValue();
                ws();
                char d = next();
                if (d == '}') return;
                if (d != ',') throw bad("expected , or }");
            }
        } else if (c == '[') {
            i++;
            ws();
            if (peek() == ']') {
                i++;
                return;
            }
            for (;;) {
                ws();
                skipValue();
                ws();
                char d = next();
                if (d == ']') return;
                if (d != ',') throw bad("expected , or ]");
            }
        } else if (c == '"') {
            string();
        } else if (c == 't') {
            literal("true");
        } else if (c == 'f') {
            literal("false");
        } else if (c == 'n') {
            literal("null");
        } else {
            number();
        }
    }

    private String string() {
        expect('"');
        StringBuilder b = new StringBuilder();
        for (;;) {
            char c = next();
            if (c == '"') return b.toString();
            if (c < 0x20) throw bad("control character in string");
            if (c != '\\') {
                b.append(c);
                continue;
            }
            char e = next();
            switch (e) {
                case '"': case '\\': case '/': b.append(e); break;
                case 'b': b.append('\b'); break;
                case 'f': b.append('\f'); break;
                case 'n': b.append('\n'); break;
                case 'r': b.append('\r'); break;
                case 't': b.append('\t'); break;
                case 'u':
                    if (i + 4 > s.length()) throw bad("short \\u escape");
                    try {
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                    } catch (NumberFormatException x) {
                        throw bad("bad \\u escape");
                    }
                    i += 4;
                    break;
                default: throw bad("bad escape");
            }
        }
    }

    private BigDecimal number() {
        int start = i;
        if (i < s.length() && s.charAt(i) == '-') i++;
        while (i < s.length() && "0123456789.eE+-".indexOf(s.charAt(i)) >= 0) i++;
        try {
            return new BigDecimal(s.substring(start, i));
        } catch (NumberFormatException e) {
            throw bad("bad number");
        }
    }

    private void literal(String word) {
        if (!s.startsWith(word, i)) throw bad("expected " + word);
        i += word.length();
    }

    private void ws() {
        while (i < s.length() && " \t\r\n".indexOf(s.charAt(i)) >= 0) i++;
    }

    private char peek() {
        if (i >= s.length()) throw bad("unexpected end");
        return s.charAt(i);
    }

    private char next() {
        char c = peek();
        i++;
        return c;
    }

    private void expect(char c) {
        if (next() != c) throw bad("expected " + c);
    }

    private IllegalArgumentException bad(String why) {
        return new IllegalArgumentException("cannot deserialize \"" + s + "\": " + why + " at " + i);
    }
}
