// A contention run: N client threads, each on its own connection, loop
// acquire / read-sleep-increment the shared counter / release until the run
// ends, and record what happened. Every K-th acquisition can skip its release.
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.function.Function;

final class Contention {
    /** What the command line asked for. */
    static final class Config {
        String kind;
        String host = "127.0.0.1";
        int port = 6379;
        String key;
        String counterKey;
        int clients = 4;
        double seconds = 5;
        long csSleepMs;
        long timeoutMs = -1;    /* -1: the locker's own default */
        long retrySleepMs = -1; /* -1: the locker's own default */
        long abandonEvery;      /* 0: never */
        int readTimeoutMs = Resp.DEFAULT_TIMEOUT_MS; /* connect and read, ms */
    }

    /** One client's figures. */
    static final class ClientStats {
        long acquisitions;
        long acquireErrors;
        long csErrors;
        long releaseErrors;
        long abandoned;
        long commands;
        final List<Double> acquireMs = new ArrayList<>();
        String lastError;
    }

    /** A run's result. */
    static final class Result {
        long counterStart;
        long counterEnd;
        final List<ClientStats> clients = new ArrayList<>();
        final LockerEnv.Events events = new LockerEnv.Events();
    }

    private final Config cfg;
    private final Function<LockerEnv, Locker> factory;

    Contention(Config cfg, Function<LockerEnv, Locker> factory) {
        this.cfg = cfg;
        this.factory = factory;
    }

    static long readCounter(Resp r, String key) throws IOException {
        String v = r.bulk("GET", key);
        return v == null ? 0 : Long.parseLong(v);
    }

    Result run() throws Exception {
        Result res = new Result();
        try (Resp r = new Resp(cfg.host, cfg.port, cfg.readTimeoutMs)) {
            res.counterStart = readCounter(r, cfg.counterKey);
        }
        CountDownLatch ready = new CountDownLatch(cfg.clients);
        CountDownLatch go = new CountDownLatch(1);
        long[] stopAt = new long[1];
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < cfg.clients; i++) {
            ClientStats st = new ClientStats();
            res.clients.add(st);
            Thread t = new Thread(() -> client(st, res.events, ready, go, stopAt), "client-" + i);
            threads.add(t);
            t.start();
        }
        ready.await();
        stopAt[0] = System.nanoTime() + (long) (cfg.seconds * 1e9);
        go.countDown(); /* publishes stopAt to the clients */
        for (Thread t : threads) t.join();
        try (Resp r = new Resp(cfg.host, cfg.port, cfg.readTimeoutMs)) {
            res.counterEnd = readCounter(r, cfg.counterKey);
        }
        return res;
    }

    private void client(ClientStats st, LockerEnv.Events events, CountDownLatch ready,
                        CountDownLatch go, long[] stopAt) {
        Resp[] conn = new Resp[1];
        boolean counted = false;
        try {
            conn[0] = new Resp(cfg.host, cfg.port, cfg.readTimeoutMs);
            ready.countDown();
            counted = true;
            go.await();
            loop(st, events, conn, stopAt[0]);
        } catch (Exception e) {
            st.acquireErrors++;
            st.lastError = e.toString();
        } finally {
            if (!counted) ready.countDown();
            closeCounting(st, conn);
        }
    }

    /** Adds the connection's commands to the client's and closes it. */
    private static void closeCounting(ClientStats st, Resp[] conn) {
        if (conn[0] == null) return;
        st.commands += conn[0].commands();
        try {
            conn[0].close();
        } catch (IOException ignored) {
            /* closing a socket we are done with */
        }
        conn[0] = null;
    }

    private LockerEnv env(Resp redis, long stopAt, LockerEnv.Events events) {
        return new LockerEnv(redis, cfg.key, cfg.timeoutMs, cfg.retrySleepMs, stopAt, events);
    }

    private void loop(ClientStats st, LockerEnv.Events events, Resp[] conn, long stopAt)
        throws Exception {
        Locker locker = factory.apply(env(conn[0], stopAt, events));
        while (System.nanoTime() - stopAt < 0) {
            long t0 = System.nanoTime();
            boolean held;
            try {
                held = locker.acquire();
            } catch (Exception e) {
                st.acquireErrors++;
                st.lastError = e.toString();
                if (!(e instanceof Resp.ErrorReply) && e instanceof IOException) {
                    /* The connection's state is unknown: start afresh, like a
                     * restarted process. */
                    closeCounting(st, conn);
                    conn[0] = new Resp(cfg.host, cfg.port, cfg.readTimeoutMs);
                    locker = factory.apply(env(conn[0], stopAt, events));
                }
                LockerEnv.sleepMs(Math.max(1, cfg.retrySleepMs));
                continue;
            }
            if (!held) break;
            st.acquireMs.add((System.nanoTime() - t0) / 1e6);
            if (criticalSection(st, conn[0])) st.acquisitions++;
            /* A holder still in its critical section after its validity: anyone
             * may take the lock over meanwhile, by the protocol's own rule. */
            if (locker.expired()) events.disrupt("overran_validity");
            if (cfg.abandonEvery > 0 && st.acquireMs.size() % cfg.abandonEvery == 0) {
                /* A crashed holder: no release, and its successor process starts
                 * with no memory of the lock. */
                st.abandoned++;
                locker = factory.apply(env(conn[0], stopAt, events));
                continue;
            }
            try {
                locker.release();
            } catch (Exception e) {
                st.releaseErrors++;
                st.lastError = e.toString();
            }
        }
    }

    /** GET C, sleep, SET C v+1. True when the increment was written. */
    private boolean criticalSection(ClientStats st, Resp redis) {
        try {
            long v = readCounter(redis, cfg.counterKey);
            LockerEnv.sleepMs(cfg.csSleepMs);
            redis.call("SET", cfg.counterKey, Long.toString(v + 1));
            return true;
        } catch (Exception e) {
            st.csErrors++;
            st.lastError = e.toString();
            return false;
        }
    }
}
