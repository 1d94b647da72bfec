// What every reproduced legacy locker offers the contention harness: acquire by
// its own algorithm, release by its own algorithm, on one client's connection.
interface Locker {
    /**
     * Acquires the lock the way the locker does. True: the locker believes it
     * holds the lock (its caller enters the critical section). False: the run
     * ended while it was still trying (the harness's stop, not the locker's).
     * An exception is one that the locker lets escape to its caller.
     */
    boolean acquire() throws Exception;

    /** Releases the lock the way the locker does. */
    void release() throws Exception;

    /**
     * Whether the lock this client holds has expired by the locker's own
     * clock and rule: instrumentation for the harness, not part of any locker.
     */
    boolean expired();
}
