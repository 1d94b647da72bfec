// L1's two older generations: INCR as the lock, EXPIRE as a separate command;
// the second one also DELs the key when a second INCR passes 2.
final class L1IncrLocker extends TryLocker {
    /** Longest value the first generation used for EXPIRE, seconds. */
    static final long DEFAULT_EXPIRE_S = 60;

    private final boolean breaksDeadlocks;

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
                env.events.add("deadlock_break_del");
                r.integer("DEL", env.key);
            }
            return false;
        }
        /* EXPIRE as its own command: a crash before it leaves a key that never
         * expires (contenders then increment it forever). */
        long seconds = Math.max(1, (env.timeoutMs + 999) / 1000);
        r.integer("EXPIRE", env.key, Long.toString(seconds));
        return true;
    }

    @Override
    public void release() throws Exception {
        env.redis.integer("DEL", env.key);
    }
}
