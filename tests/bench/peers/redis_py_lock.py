"""Bench peer: redis-py's Lock, one process per client, contending for one key
with the GET/SET counter critical section; prints its figures as one JSON line.

Usage: redis_py_lock.py HOST PORT KEY COUNTER CLIENTS SECONDS default|tuned
"""
import json
import multiprocessing as mp
import sys
import time

try:
    import redis
except ImportError:
    print(json.dumps({"skipped": "skipped: python3-redis is not installed (make bench-peers)"}))
    sys.exit(0)

TTL_S = 30  # lock lifetime, seconds: the same 30 s every locker in the bench uses
SLEEP_S = {"default": None, "tuned": 0.002}  # retry sleep, seconds; None: the library's


def client(index, args, ready, go, end_ns, last_release, last_releaser, out):
    host, port, key, counter, sleep = args
    res = {"acq": 0, "tta": [], "handoff": [], "errors": 0, "error": ""}
    try:
        r = redis.Redis(host=host, port=port)
        r.ping()
        lock = r.lock(key, timeout=TTL_S) if sleep is None else r.lock(key, timeout=TTL_S, sleep=sleep)
    except Exception as e:  # the run fails visibly, not silently
        res["errors"] += 1
        res["error"] = "connect: %s" % e
        ready.wait()
        out.put(res)
        return
    ready.wait()
    go.wait()
    end = end_ns.value
    try:
        while time.monotonic_ns() < end:
            t0 = time.monotonic_ns()
            got = lock.acquire(blocking_timeout=max(0.0, (end - t0) / 1e9))
            t1 = time.monotonic_ns()
            res["tta"].append(t1 - t0)  # a wait cut off by the end counts too
            if not got:
                break
            last = last_release.value
            if last and last_releaser.value != index + 1:  # to another client only
                res["handoff"].append(t1 - last)
            v = r.get(counter)
            r.set(counter, int(v) + 1 if v is not None else 1)
            res["acq"] += 1
            last_releaser.value = index + 1
            last_release.value = time.monotonic_ns()
            lock.release()
    except Exception as e:
        res["errors"] += 1
        res["error"] = "%s: %s" % (type(e).__name__, e)
    out.put(res)


def main():
    host, port, key, counter = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    clients, seconds, variant = int(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
    ctx = mp.get_context("fork")
    ready = ctx.Barrier(clients + 1)
    go = ctx.Event()
    end_ns = ctx.Value("q", 0, lock=False)
    last_release = ctx.Value("q", 0, lock=False)
    last_releaser = ctx.Value("i", 0, lock=False)
    out = ctx.Queue()
    args = (host, port, key, counter, SLEEP_S[variant])
    procs = [ctx.Process(target=client,
                         args=(i, args, ready, go, end_ns, last_release, last_releaser, out))
             for i in range(clients)]
    for p in procs:
        p.start()
    ready.wait()
    start = time.monotonic_ns()
    end_ns.value = start + int(seconds * 1e9)
    go.set()
    results = [out.get(timeout=seconds + 60) for _ in procs]
    for p in procs:
        p.join()
    errors = [r["error"] for r in results if r["error"]]
    print(json.dumps({
        "version": "redis-py %s" % redis.__version__,
        "clients": clients,
        "seconds": seconds,
        "acquisitions": sum(r["acq"] for r in results),
        "per_client": [r["acq"] for r in results],
        "gave_up": 0,
        "errors": sum(r["errors"] for r in results),
        "error": errors[0] if errors else "",
        "tta_ns": [t for r in results for t in r["tta"]],
        "handoff_ns": [t for r in results for t in r["handoff"]],
    }))


if __name__ == "__main__":
    main()
