// L4: epoch-millisecond expiry, blocking; takes over only when GETSET returns
// exactly what GET saw (a nil GETSET is NOT acquired); unlock is a bare DEL.
final class L4Locker implements Locker {
    /** Default validity, milliseconds. */
    static final long DEFAULT_TIMEOUT_MS = 60_000;
    /** Sleep after a nil GET before trying SETNX again, milliseconds. */
    private static final long NIL_SLEEP_MS = 100;

    private final LockerEnv env;
    /** The expiry this client wrote when it acquired, epoch ms (instrumentation). */
    private long heldUntil;

    L4Locker(LockerEnv env) {
        this.env = env;
    }

    @Override
    public boolean acquire() throws Exception {
        Resp r = env.redis;
        for (;;) {
            if (env.stopped()) return false;
            long v = System.currentTimeMillis() + env.timeoutMs;
            if (r.integer("SETNX", env.key, Long.toString(v)) == 1) {
                heldUntil = v;
                return true;
            }
            String cur = r.bulk("GET", env.key);
            if (cur == null) {
                /* Released between SETNX and GET: sleep 100 ms, SETNX again. */
                LockerEnv.sleepMs(NIL_SLEEP_MS);
                continue;
            }
            /* A value that is not a decimal throws out of acquire. */
            long now = System.currentTimeMillis();
            if (Long.parseLong(cur) < now) {
                long v2 = now + env.timeoutMs;
                String old = r.bulk("GETSET", env.key, Long.toString(v2));
                /* Strict: only the exact value GET saw wins. A nil GETSET is not
                 * acquired although our value is now in the key: nobody holds
                 * it until it expires. */
                if (cur.equals(old)) {
                    env.events.add("takeover");
                    heldUntil = v2;
                    return true;
                }
                if (old == null) env.events.add("nil_getset_not_acquired");
                else env.events.disrupt("takeover_lost_value_overwritten");
            }
            LockerEnv.sleepMs(env.retrySleepMs);
        }
    }

    @Override
    public void release() throws Exception {
        /* Unconditional DEL. */
        if (expired()) env.events.disrupt("del_after_expiry");
        env.redis.integer("DEL", env.key);
    }

    @Override
    public boolean expired() {
        return System.currentTimeMillis() > heldUntil;
    }
}
