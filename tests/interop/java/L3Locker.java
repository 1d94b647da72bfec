// L3: JSON {"expiryTime":N} on the JVM's nanosecond counter (CLOCK_MONOTONIC),
// with the expiry_ms * 1000 ns quirk, GETSET string compare, and a spinning
// blocking acquire.
final class L3Locker implements Locker {
    /** L3's default "expiry_ms": the largest int (lasts about 36 minutes). */
    static final long DEFAULT_EXPIRY_MS = Integer.MAX_VALUE;
    /** Spinning time after which the blocking acquire yields the thread, ns. */
    private static final long YIELD_AFTER_NS = 3_000_000_000L;

    private final LockerEnv env;
    /** The expiry this client last wrote and believes it holds, ns. */
    private long ownExpiry;

    L3Locker(LockerEnv env) {
        this.env = env;
    }

    /** The serializer's output: no spaces. */
    private static String value(long expiry) {
        return "{\"expiryTime\":" + expiry + "}";
    }

    /** "expiry_ms * 1000" nanoseconds: a configured 2000 ms lasts 2 ms. */
    private long newExpiry() {
        return System.nanoTime() + env.timeoutMs * 1000;
    }

    boolean tryAcquire() throws Exception {
        Resp r = env.redis;
        long expires = newExpiry();
        if (r.integer("SETNX", env.key, value(expires)) == 1) {
            ownExpiry = expires;
            return true;
        }
        String cur = r.bulk("GET", env.key);
        if (cur == null || cur.isEmpty()) {
            /* The widely copied code: "deleted, not expired" is handled by
             * calling itself again, but the result is dropped and it goes on
             * with the nil below, which throws. If that inner call acquired,
             * the lock is held and nobody will release it. */
            env.events.add("nil_get_recursion");
            tryAcquire();
        }
        /* Unknown fields are ignored and a missing expiryTime reads as 0, so
         * a token (M1's {"uid":...}) reads as expired. Not JSON: throws. */
        long t = JsonExpiry.read(cur);
        if (t < System.nanoTime()) {
            long e2 = newExpiry();
            String old = r.bulk("GETSET", env.key, value(e2));
            /* Nil or empty: our GETSET created the key. Equal as a string to
             * what GET saw: we won the takeover. Otherwise a racer won, and our
             * value has overwritten the winner's (which no longer recognises
             * its lock). */
            if (old == null || old.isEmpty() || old.equals(cur)) {
                env.events.add("takeover");
                ownExpiry = e2;
                return true;
            }
            env.events.disrupt("takeover_lost_value_overwritten");
        }
        return false;
    }

    @Override
    public boolean acquire() throws Exception {
        /* Spins on tryAcquire with no sleep; after 3 s it yields the thread
         * between attempts. Exceptions escape to the caller. */
        long start = System.nanoTime();
        for (;;) {
            if (env.stopped()) return false;
            if (tryAcquire()) return true;
            if (System.nanoTime() - start > YIELD_AFTER_NS) Thread.yield();
        }
    }

    @Override
    public void release() throws Exception {
        /* GET, and DEL if it parses to our own expiry: two commands, so a
         * takeover between them is deleted. */
        Resp r = env.redis;
        String cur = r.bulk("GET", env.key);
        if (cur != null && JsonExpiry.read(cur) == ownExpiry) {
            if (expired()) env.events.disrupt("del_after_expiry");
            r.integer("DEL", env.key);
        } else {
            env.events.add("release_not_own_expiry");
        }
    }

    @Override
    public boolean expired() {
        return System.nanoTime() > ownExpiry;
    }
}
