// Non-blocking lockers (L1 and its INCR generations, R, L5) only offer tryLock;
// their callers poll it. This adapter is that caller: tryLock, sleep, repeat.
abstract class TryLocker implements Locker {
    protected final LockerEnv env;

    TryLocker(LockerEnv env) {
        this.env = env;
    }

    /** One attempt, never blocking: true when acquired. */
    abstract boolean tryLock() throws Exception;

    @Override
    public final boolean acquire() throws Exception {
        for (;;) {
            if (env.stopped()) return false;
            if (tryLock()) return true;
            LockerEnv.sleepMs(env.retrySleepMs);
        }
    }
}
