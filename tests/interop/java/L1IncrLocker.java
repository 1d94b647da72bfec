// L1's two older generations: INCR as the lock, EXPIRE as a separate command;
// the second one also DELs the key when a second INCR passes 2.
final class L1IncrLocker extends TryLocker {
    /** The EXPIRE the first generation used, seconds. */
    static final long DEFAULT_EXPIRE_S = 60;

    private final boolean breaksDeadlocks;
    /** When the EXPIRE set at acquisition lapses, epoch ms (instrumentation). */
    private long heldUntil;

    L1IncrLocker(LockerEnv env, boolean breaksDeadlocks) {
        super(env);
        this.breaksDeadlocks = breaksDeadlocks;
    }

    @Override
    boolean tryLock() throws Exception {
        Resp r = env.redis;
        /* INCR: 1 means we created the key and hold it; more means busy. On a
         * timestamp written by another protocol this adds 1 to it; on a value
         * that is not an integer Redis answers an error, which escapes. */
        if (r.integer("INCR", env.key) > 1) {
            if (breaksDeadlocks && r.integer("INCR", env.key) > 2) {
                /* Second generation: a second INCR past 2 is taken as a
                 * deadlock and broken with DEL, live holder or not. */
                env.events.disrupt("deadlock_break_del");
                r.integer("DEL", env.key);
            }
            return false;
        }
        /* EXPIRE as its own command: a crash before it leaves a key that never
         * expires (contenders then increment it forever). */
        long seconds = Math.max(1, (env.timeoutMs + 999) / 1000);
        heldUntil = System.currentTimeMillis() + seconds * 1000;
        r.integer("EXPIRE", env.key, Long.toString(seconds));
        return true;
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
