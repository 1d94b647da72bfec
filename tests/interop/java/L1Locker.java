// L1: epoch-millisecond timestamp, non-blocking tryLock, a catch-all handler
// that deletes the key, and an unlock that trusts a per-thread owner flag.
final class L1Locker extends TryLocker {
    /** Set only when SETNX won, never on the GETSET path (as in the field). */
    private boolean owner;
    /** The timestamp this client wrote when it acquired (instrumentation). */
    private long heldUntil;

    L1Locker(LockerEnv env) {
        super(env);
    }

    @Override
    boolean tryLock() throws Exception {
        Resp r = env.redis;
        try {
            /* Value: now_ms + timeout_ms + 1. SETNX won: the thread owns it. */
            long v = System.currentTimeMillis() + env.timeoutMs + 1;
            if (r.integer("SETNX", env.key, Long.toString(v)) == 1) {
                owner = true;
                heldUntil = v;
                return true;
            }
            /* GET, parsed as a signed 64-bit decimal: a nil reply or any other
             * format throws here and lands in the catch-all below. */
            long t = Long.parseLong(r.bulk("GET", env.key));
            long now = System.currentTimeMillis();
            if (now > t) {
                /* Expired: GETSET a new timestamp; acquired if the old value is
                 * itself expired. This path does not mark the thread as owner. */
                long v2 = now + env.timeoutMs + 1;
                long old = Long.parseLong(r.bulk("GETSET", env.key, Long.toString(v2)));
                if (now > old) {
                    env.events.add("takeover");
                    heldUntil = v2;
                    return true;
                }
                env.events.disrupt("takeover_lost_value_overwritten");
            }
            return false;
        } catch (Exception e) {
            /* The one handler for everything (nil GET racing a release, nil
             * GETSET, a foreign format, I/O): DEL the key and report "not
             * acquired". Whoever holds the lock at this instant loses it. */
            env.events.disrupt("catch_all_del");
            r.integer("DEL", env.key);
            return false;
        }
    }

    @Override
    public void release() throws Exception {
        Resp r = env.redis;
        if (owner) {
            /* Owner: DEL unconditionally, even if the lock expired and was taken
             * over by someone else meanwhile. */
            owner = false;
            if (expired()) env.events.disrupt("owner_del_after_expiry");
            r.integer("DEL", env.key);
            return;
        }
        /* Not owner (acquired through GETSET): GET; nil: done; DEL only if the
         * value is expired, so our own unexpired lock stays until it expires. */
        String cur = r.bulk("GET", env.key);
        if (cur == null) return;
        if (System.currentTimeMillis() > Long.parseLong(cur)) {
            r.integer("DEL", env.key);
        } else {
            env.events.add("unlock_left_unexpired");
        }
    }

    @Override
    public boolean expired() {
        return System.currentTimeMillis() > heldUntil;
    }
}
