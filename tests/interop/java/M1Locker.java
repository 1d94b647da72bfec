// M1: a JVM token lock: SET key {"uid":"<uuid4>"} NX PX ttl, a 200 ms sleep
// between attempts, release by a compare-and-delete script retried every 200 ms.
import java.util.UUID;

final class M1Locker implements Locker {
    /** Default lock TTL, milliseconds. */
    static final long DEFAULT_TTL_MS = 30_000;
    /** Default sleep between acquire attempts, milliseconds. */
    static final long DEFAULT_RETRY_SLEEP_MS = 200;
    /** Sleep between release attempts, milliseconds. */
    private static final long RELEASE_RETRY_MS = 200;
    /** How long release keeps retrying, milliseconds. */
    private static final long RELEASE_DEADLINE_MS = 1000;
    private static final String RELEASE_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
        + "else return 0 end";

    private final LockerEnv env;
    private String token;
    /** When our PX lapses at the latest, epoch ms (instrumentation). */
    private long heldUntil;

    M1Locker(LockerEnv env) {
        this.env = env;
    }

    @Override
    public boolean acquire() throws Exception {
        /* The token is a JSON object with one field; other clients must treat
         * it as opaque. */
        token = "{\"uid\":\"" + UUID.randomUUID() + "\"}";
        for (;;) {
            if (env.stopped()) return false;
            long sent = System.currentTimeMillis();
            Object ok = env.redis.call("SET", env.key, token, "NX", "PX", Long.toString(env.timeoutMs));
            if ("OK".equals(ok)) {
                heldUntil = sent + env.timeoutMs;
                return true;
            }
            LockerEnv.sleepMs(env.retrySleepMs);
        }
    }

    @Override
    public void release() throws Exception {
        /* Compare-and-delete; 0 (expired, or someone else's) is retried every
         * 200 ms until 1 or the release deadline. */
        long deadline = System.currentTimeMillis() + RELEASE_DEADLINE_MS;
        for (;;) {
            if (env.redis.integer("EVAL", RELEASE_SCRIPT, "1", env.key, token) == 1) return;
            if (System.currentTimeMillis() >= deadline) {
                env.events.add("release_gave_up");
                return;
            }
            LockerEnv.sleepMs(RELEASE_RETRY_MS);
        }
    }

    @Override
    public boolean expired() {
        return System.currentTimeMillis() > heldUntil;
    }
}
