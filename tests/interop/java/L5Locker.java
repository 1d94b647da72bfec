// L5: epoch seconds with a fraction (a Python client's float), non-blocking;
// a nil GET counts as expired; release is GET, compare, DEL.
import java.math.BigDecimal;

final class L5Locker extends TryLocker {
    /** Default validity, milliseconds. */
    static final long DEFAULT_TIMEOUT_MS = 60_000;

    /** The value this client last wrote. */
    private String mine;

    L5Locker(LockerEnv env) {
        super(env);
    }

    /** time.time(), from the millisecond clock. */
    private static double now() {
        return System.currentTimeMillis() / 1000.0;
    }

    /** The float as Python's str() writes it: shortest form, plain, ".0" when whole. */
    static String pythonStr(double d) {
        String s = new BigDecimal(Double.toString(d)).toPlainString();
        return s.indexOf('.') >= 0 ? s : s + ".0";
    }

    /** float(): like Java's parser, minus the Java-only type suffixes. */
    static double pythonFloat(String s) {
        String t = s.trim();
        if (t.isEmpty() || "dDfF".indexOf(t.charAt(t.length() - 1)) >= 0)
            throw new NumberFormatException("could not convert string to float: " + s);
        return Double.parseDouble(t);
    }

    @Override
    boolean tryLock() throws Exception {
        Resp r = env.redis;
        double now = now();
        String v = pythonStr(now + env.timeoutMs / 1000.0);
        if (r.integer("SETNX", env.key, v) == 1) {
            mine = v;
            return true;
        }
        String cur = r.bulk("GET", env.key);
        /* Nil counts as expired and goes straight to GETSET. A value that float()
         * cannot read raises out of tryLock. */
        if (cur == null || pythonFloat(cur) < now) {
            String old = r.bulk("GETSET", env.key, v);
            /* GETSET nil counts as acquired; so does an old value that is itself
             * expired. */
            if (old == null || pythonFloat(old) < now) {
                env.events.add("takeover");
                mine = v;
                return true;
            }
            env.events.disrupt("takeover_lost_value_overwritten");
        }
        return false;
    }

    @Override
    public void release() throws Exception {
        /* GET, compare with our value, DEL: not atomic. */
        Resp r = env.redis;
        String cur = r.bulk("GET", env.key);
        if (cur != null && cur.equals(mine)) {
            if (expired()) env.events.disrupt("del_after_expiry");
            r.integer("DEL", env.key);
        } else {
            env.events.add("release_not_ours");
        }
    }

    @Override
    public boolean expired() {
        return mine == null || now() > pythonFloat(mine);
    }
}
