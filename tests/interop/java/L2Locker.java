// L2: epoch-millisecond timestamp, a blocking lock() whose clock is read once
// and frozen, a sleep of "100 ns", and an unconditional DEL to unlock.
final class L2Locker implements Locker {
    /** What L2 adds to its frozen clock for the value, milliseconds. */
    static final long DEFAULT_EXPIRY_MS = 5000;
    /** L2's acquire deadline, milliseconds past the frozen clock (never fires). */
    private static final long ACQUIRE_TIMEOUT_MS = 10_000;

    private final LockerEnv env;
    /** The expiry written by the last lock(), epoch ms (instrumentation). */
    private long heldUntil;

    L2Locker(LockerEnv env) {
        this.env = env;
    }

    @Override
    public boolean acquire() {
        Resp r = env.redis;
        /* The clock is read ONCE: the value written and every expiry comparison
         * use this instant, however long the wait. */
        final long frozen = System.currentTimeMillis();
        final String v = Long.toString(frozen + env.timeoutMs);
        heldUntil = frozen + env.timeoutMs;
        try {
            /* The deadline is compared with the frozen clock, so it never fires. */
            while (frozen < frozen + ACQUIRE_TIMEOUT_MS) {
                if (env.stopped()) return false;
                if (r.integer("SETNX", env.key, v) == 1) return true;
                String cur = r.bulk("GET", env.key);
                if (cur != null && Long.parseLong(cur) < frozen) {
                    /* Expired by the frozen clock: GETSET; acquired if the old
                     * value parses and is older than the frozen clock. A nil
                     * reply throws in the parse, see the handler below. */
                    if (Long.parseLong(r.bulk("GETSET", env.key, v)) < frozen) {
                        env.events.add("takeover");
                        return true;
                    }
                    env.events.disrupt("takeover_lost_value_overwritten");
                }
                /* "100 ns": Thread.sleep rounds it up to a whole millisecond. */
                Thread.sleep(0, 100);
            }
            return false;
        } catch (Exception e) {
            /* lock() swallows every exception and returns normally: the caller
             * goes on as if it held the lock (nil GETSET, foreign value, I/O). */
            env.events.disrupt("swallowed_exception_proceeds");
            return true;
        }
    }

    @Override
    public void release() throws Exception {
        /* Unconditional DEL, whoever holds the key now. */
        if (expired()) env.events.disrupt("del_after_expiry");
        env.redis.integer("DEL", env.key);
    }

    @Override
    public boolean expired() {
        return System.currentTimeMillis() > heldUntil;
    }
}
