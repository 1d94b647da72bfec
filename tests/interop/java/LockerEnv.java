// One client's surroundings as a locker sees them: its connection, the key, the
// locker's tunables, the run's stop instant and the quirk counters.
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

final class LockerEnv {
    /** Quirk counters shared by all clients of a run, by event name. */
    static final class Events {
        private final ConcurrentHashMap<String, LongAdder> counts = new ConcurrentHashMap<>();

        private final LongAdder disruptions = new LongAdder();

        void add(String name) {
            counts.computeIfAbsent(name, k -> new LongAdder()).increment();
        }

        /**
         * An event after which another client's live lock may be gone or
         * overwritten, or a client may be in the critical section without a
         * valid lock: deletes and overwrites of values that may be someone
         * else's, proceeding without the lock, holding past the validity.
         */
        void disrupt(String name) {
            add(name);
            disruptions.increment();
        }

        long disruptions() {
            return disruptions.sum();
        }

        Map<String, Long> snapshot() {
            Map<String, Long> m = new TreeMap<>();
            counts.forEach((k, v) -> m.put(k, v.sum()));
            return m;
        }
    }

    final Resp redis;
    final String key;
    /** The locker's validity (or expiry constant), milliseconds. */
    final long timeoutMs;
    /** Sleep between attempts where the locker sleeps a configurable time, milliseconds. */
    final long retrySleepMs;
    /** System.nanoTime() at which the run ends. */
    final long stopAtNanos;
    final Events events;

    LockerEnv(Resp redis, String key, long timeoutMs, long retrySleepMs, long stopAtNanos,
              Events events) {
        this.redis = redis;
        this.key = key;
        this.timeoutMs = timeoutMs;
        this.retrySleepMs = retrySleepMs;
        this.stopAtNanos = stopAtNanos;
        this.events = events;
    }

    /**
     * The harness's stop: blocking loops check it so a run can end. It is not part
     * of any locker's algorithm (L2's, for one, would otherwise wait forever).
     */
    boolean stopped() {
        return System.nanoTime() - stopAtNanos >= 0;
    }

    static void sleepMs(long ms) throws InterruptedException {
        if (ms > 0) Thread.sleep(ms);
    }
}
