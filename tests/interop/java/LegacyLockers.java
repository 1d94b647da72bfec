// Command-line entry of the JVM legacy lockers: `contend` runs N clients of one
// locker kind around a shared counter and prints one JSON summary line, with the
// field names of `lockbridge contend`.
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;

public final class LegacyLockers {
    private static final String USAGE =
        "usage: java LegacyLockers contend --kind KIND --key K --counter-key C\n"
        + "         [--host H] [--port P] [--clients N] [--seconds S] [--cs-sleep-ms X]\n"
        + "         [--timeout-ms T] [--retry-sleep-ms R] [--abandon-every K]\n"
        + "         [--read-timeout-ms M]\n"
        + "KIND: L1 L1-INCR L1-INCR2 L2 L3 L4 L5 R M1\n"
        + "  --timeout-ms   the locker's validity; defaults: L1 900000, L1-INCR* 60000\n"
        + "                 (EXPIRE, whole seconds), L2 5000, L3 2147483647 (its\n"
        + "                 expiry_ms, lasting expiry_ms*1000 ns), L4 60000, L5 60000,\n"
        + "                 R 10000 (whole seconds), M1 30000 (PX)\n"
        + "  --retry-sleep-ms  sleep between attempts (default 10; M1 200; L2 and L3\n"
        + "                 use their own loops and ignore it)\n"
        + "  --abandon-every K  every K-th acquisition of a client skips its release\n"
        + "  --read-timeout-ms M  connect and read timeout of every connection\n"
        + "                 (default 5000; 2000 is a common client library's default)\n";

    private LegacyLockers() {
    }

    /** A locker kind: how to make one client's locker, and its defaults (ms). */
    private static final class Kind {
        final Function<LockerEnv, Locker> factory;
        final long timeoutMs;
        final long retrySleepMs;

        Kind(Function<LockerEnv, Locker> factory, long timeoutMs, long retrySleepMs) {
            this.factory = factory;
            this.timeoutMs = timeoutMs;
            this.retrySleepMs = retrySleepMs;
        }
    }

    /** Default sleep between attempts of polling lockers, milliseconds. */
    private static final long DEFAULT_RETRY_SLEEP_MS = 10;

    private static Kind kind(String name) {
        switch (name) {
            case "L1": return new Kind(L1Locker::new, 900_000, DEFAULT_RETRY_SLEEP_MS);
            case "L1-INCR":
                return new Kind(e -> new L1IncrLocker(e, false),
                                L1IncrLocker.DEFAULT_EXPIRE_S * 1000, DEFAULT_RETRY_SLEEP_MS);
            case "L1-INCR2":
                return new Kind(e -> new L1IncrLocker(e, true),
                                L1IncrLocker.DEFAULT_EXPIRE_S * 1000, DEFAULT_RETRY_SLEEP_MS);
            case "L2": return new Kind(L2Locker::new, L2Locker.DEFAULT_EXPIRY_MS, DEFAULT_RETRY_SLEEP_MS);
            case "L3": return new Kind(L3Locker::new, L3Locker.DEFAULT_EXPIRY_MS, DEFAULT_RETRY_SLEEP_MS);
            case "L4": return new Kind(L4Locker::new, L4Locker.DEFAULT_TIMEOUT_MS, DEFAULT_RETRY_SLEEP_MS);
            case "L5": return new Kind(L5Locker::new, L5Locker.DEFAULT_TIMEOUT_MS, DEFAULT_RETRY_SLEEP_MS);
            case "R": return new Kind(RLocker::new, RLocker.DEFAULT_TIMEOUT_MS, DEFAULT_RETRY_SLEEP_MS);
            case "M1": return new Kind(M1Locker::new, M1Locker.DEFAULT_TTL_MS, M1Locker.DEFAULT_RETRY_SLEEP_MS);
            default: return null;
        }
    }

    public static void main(String[] args) {
        int code;
        try {
            code = run(args);
        } catch (UsageException e) {
            System.err.println("LegacyLockers: " + e.getMessage());
            System.err.print(USAGE);
            code = 1;
        } catch (Exception e) {
            System.err.println("LegacyLockers: " + e);
            code = 4;
        }
        System.exit(code);
    }

    private static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(String m) {
            super(m);
        }
    }

    private static int run(String[] args) throws Exception {
        if (args.length == 0 || !args[0].equals("contend"))
            throw new UsageException(args.length == 0 ? "no command" : "unknown command " + args[0]);
        Contention.Config cfg = parse(args);
        Kind k = kind(cfg.kind);
        if (cfg.timeoutMs < 0) cfg.timeoutMs = k.timeoutMs;
        if (cfg.retrySleepMs < 0) cfg.retrySleepMs = k.retrySleepMs;
        Contention.Result res = new Contention(cfg, k.factory).run();
        System.out.println(summary(cfg, res));
        return 0;
    }

    private static Contention.Config parse(String[] args) throws UsageException {
        Contention.Config c = new Contention.Config();
        for (int i = 1; i < args.length; i += 2) {
            String name = args[i];
            if (i + 1 >= args.length) throw new UsageException(name + " needs a value");
            String v = args[i + 1];
            switch (name) {
                case "--kind": c.kind = v; break;
                case "--host": c.host = v; break;
                case "--port": c.port = (int) number(name, v, 1, 65535); break;
                case "--key": c.key = v; break;
                case "--counter-key": c.counterKey = v; break;
                case "--clients": c.clients = (int) number(name, v, 1, 1000); break;
                case "--seconds": c.seconds = seconds(v); break;
                case "--cs-sleep-ms": c.csSleepMs = number(name, v, 0, 3_600_000); break;
                case "--timeout-ms": c.timeoutMs = number(name, v, 0, 1_000_000_000_000L); break;
                case "--retry-sleep-ms": c.retrySleepMs = number(name, v, 0, 3_600_000); break;
                case "--abandon-every": c.abandonEvery = number(name, v, 0, Long.MAX_VALUE); break;
                case "--read-timeout-ms": c.readTimeoutMs = (int) number(name, v, 1, 3_600_000); break;
                default: throw new UsageException("unknown option " + name);
            }
        }
        if (c.kind == null || kind(c.kind) == null) throw new UsageException("--kind is required: one of the KINDs");
        if (c.key == null || c.key.isEmpty()) throw new UsageException("--key is required");
        if (c.counterKey == null || c.counterKey.isEmpty()) throw new UsageException("--counter-key is required");
        if (c.key.equals(c.counterKey)) throw new UsageException("--key and --counter-key must differ");
        return c;
    }

    private static long number(String name, String v, long min, long max) throws UsageException {
        long n;
        try {
            if (!v.matches("-?[0-9]{1,19}")) throw new NumberFormatException();
            n = Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new UsageException(name + ": not an integer: " + v);
        }
        if (n < min || n > max) throw new UsageException(name + " must be in [" + min + ", " + max + "]");
        return n;
    }

    private static double seconds(String v) throws UsageException {
        if (!v.matches("[0-9]{1,6}(\\.[0-9]{1,3})?")) throw new UsageException("--seconds: bad duration " + v);
        double s = Double.parseDouble(v);
        if (s <= 0) throw new UsageException("--seconds must be positive");
        return s;
    }

    // ---- JSON, written by hand -----------------------------------------------------

    private static String summary(Contention.Config cfg, Contention.Result res) {
        long acq = 0, errs = 0, abandoned = 0, commands = 0, csErrs = 0, relErrs = 0;
        List<Double> ms = new ArrayList<>();
        StringBuilder per = new StringBuilder("[");
        String lastError = null;
        for (Contention.ClientStats st : res.clients) {
            acq += st.acquisitions;
            errs += st.acquireErrors;
            csErrs += st.csErrors;
            relErrs += st.releaseErrors;
            abandoned += st.abandoned;
            commands += st.commands;
            ms.addAll(st.acquireMs);
            if (st.lastError != null) lastError = st.lastError;
            if (per.length() > 1) per.append(',');
            per.append(st.acquisitions);
        }
        per.append(']');
        Collections.sort(ms);
        StringBuilder b = new StringBuilder("{\"event\":\"summary\"");
        b.append(",\"kind\":").append(str(cfg.kind));
        b.append(",\"key\":").append(str(cfg.key));
        b.append(",\"clients\":").append(cfg.clients);
        b.append(",\"seconds\":").append(fmt(cfg.seconds));
        b.append(",\"timeout_ms\":").append(cfg.timeoutMs);
        b.append(",\"acquisitions\":").append(acq);
        b.append(",\"counter_start\":").append(res.counterStart);
        b.append(",\"counter_end\":").append(res.counterEnd);
        /* Meaningful when this process was alone on the counter. */
        b.append(",\"lost_updates\":").append(acq - (res.counterEnd - res.counterStart));
        b.append(",\"acquire_errors\":").append(errs);
        b.append(",\"cs_errors\":").append(csErrs);
        b.append(",\"release_errors\":").append(relErrs);
        b.append(",\"abandoned\":").append(abandoned);
        b.append(",\"acquire_ms\":{\"p50\":").append(fmt(rank(ms, 50)))
         .append(",\"p99\":").append(fmt(rank(ms, 99)))
         .append(",\"max\":").append(fmt(ms.isEmpty() ? 0 : ms.get(ms.size() - 1))).append('}');
        b.append(",\"per_client\":").append(per);
        b.append(",\"commands\":").append(commands);
        b.append(",\"commands_per_acquisition\":").append(fmt(acq == 0 ? 0 : (double) commands / acq));
        b.append(",\"disruptions\":").append(res.events.disruptions());
        b.append(",\"events\":{");
        boolean first = true;
        for (Map.Entry<String, Long> e : res.events.snapshot().entrySet()) {
            if (!first) b.append(',');
            first = false;
            b.append(str(e.getKey())).append(':').append(e.getValue());
        }
        b.append('}');
        if (lastError != null) b.append(",\"last_error\":").append(str(lastError));
        return b.append('}').toString();
    }

    /** Nearest-rank percentile of sorted samples; 0 when there are none. */
    private static double rank(List<Double> sorted, int p) {
        if (sorted.isEmpty()) return 0;
        int i = (int) Math.ceil(p / 100.0 * sorted.size()) - 1;
        return sorted.get(Math.max(0, Math.min(sorted.size() - 1, i)));
    }

    private static String fmt(double d) {
        return String.format(Locale.ROOT, "%.3f", d);
    }

    private static String str(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
}
