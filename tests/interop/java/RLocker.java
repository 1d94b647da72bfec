// R: the algorithm of Redis's own SETNX documentation, in epoch seconds: take
// over only if GETSET returned an expired value; release only before our own
// timeout has passed.
final class RLocker extends TryLocker {
    /** Default lock timeout, milliseconds (used in whole seconds, rounded up). */
    static final long DEFAULT_TIMEOUT_MS = 10_000;

    /** The expiry we wrote, epoch seconds. */
    private long mine;

    RLocker(LockerEnv env) {
        super(env);
    }

    private static long unixTime() {
        return System.currentTimeMillis() / 1000;
    }

    private long timeoutS() {
        return (env.timeoutMs + 999) / 1000;
    }

    @Override
    boolean tryLock() throws Exception {
        Resp r = env.redis;
        for (;;) {
            long now = unixTime();
            /* Value: unix_time + lock_timeout + 1. */
            long v = now + timeoutS() + 1;
            if (r.integer("SETNX", env.key, Long.toString(v)) == 1) {
                mine = v;
                return true;
            }
            String cur = r.bulk("GET", env.key);
            /* Nil: the holder released between SETNX and GET; start over. */
            if (cur == null) {
                if (env.stopped()) return false;
                continue;
            }
            if (now <= Long.parseLong(cur)) return false; /* not expired: retry later */
            /* Expired: GETSET, and acquired only if the old value is itself
             * expired (nil counts: our GETSET created the key). */
            String old = r.bulk("GETSET", env.key, Long.toString(v));
            if (old == null || now > Long.parseLong(old)) {
                env.events.add("takeover");
                mine = v;
                return true;
            }
            env.events.disrupt("takeover_lost_value_overwritten");
            return false;
        }
    }

    @Override
    public void release() throws Exception {
        /* DEL only while our own timeout has not passed (now <= acquired +
         * timeout): later, the key may belong to whoever took it over. */
        if (unixTime() <= mine - 1) env.redis.integer("DEL", env.key);
        else env.events.add("release_skipped_timeout_passed");
    }

    /** Expired as contenders judge it: now_s > the value. */
    @Override
    public boolean expired() {
        return unixTime() > mine;
    }
}
