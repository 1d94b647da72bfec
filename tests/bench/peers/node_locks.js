'use strict';
// Bench peer: node-redlock or redis-semaphore's Mutex, one node process with a
// connection per client, contending for one key with the GET/SET counter
// critical section; prints its figures as one JSON line.
//
// Usage: node node_locks.js HOST PORT KEY COUNTER CLIENTS SECONDS VARIANT
// VARIANT: redlock-default, redlock-tuned, semaphore-default, semaphore-tuned

const TTL_MS = 30000; // lock lifetime: the same 30 s every locker in the bench uses
const TUNED_RETRY_MS = 2; // the tuned variants' pause between attempts
const DRAIN_MS = 15000; // after the run, how long waiters may take to give up

function load(name) {
  try {
    return require(name);
  } catch (e) {
    return null;
  }
}

function skip(why) {
  const line = JSON.stringify({ skipped: 'skipped: ' + why + ' (make bench-peers)' });
  process.stdout.write(line + '\n', () => process.exit(0));
}

const now = () => Number(process.hrtime.bigint());

// One way to take and give back the lock; acquire resolves to a release
// function, or to null when this attempt gave up (the client tries again).
function redlockVariant(Redlock, tuned) {
  const opts = tuned
    ? { retryCount: -1, retryDelay: TUNED_RETRY_MS, retryJitter: TUNED_RETRY_MS }
    : {};
  return (client, key) => {
    const rl = new Redlock([client], opts);
    return async () => {
      try {
        const lock = await rl.lock(key, TTL_MS);
        return () => lock.unlock();
      } catch (e) {
        if (e instanceof Redlock.LockError) return null;
        throw e;
      }
    };
  };
}

function semaphoreVariant(Mutex, tuned) {
  return (client, key, endNs) => async () => {
    const left = Math.max(1, Math.floor((endNs() - now()) / 1e6));
    const opts = { lockTimeout: TTL_MS, acquireTimeout: left };
    if (tuned) opts.retryInterval = TUNED_RETRY_MS;
    const m = new Mutex(client, key, opts);
    try {
      await m.acquire();
    } catch (e) {
      if (e && e.name === 'TimeoutError') return null;
      if (e && /timeout/i.test(String(e.message))) return null;
      throw e;
    }
    return () => m.release();
  };
}

async function main() {
  const [host, portS, key, counter, clientsS, secondsS, variant] = process.argv.slice(2);
  const port = Number(portS), clients = Number(clientsS), seconds = Number(secondsS);
  const Redis = load('ioredis');
  if (!Redis) return skip('ioredis is not installed');
  let make, version;
  const [lib, kind] = variant.split('-');
  if (lib === 'redlock') {
    const Redlock = load('redlock');
    if (!Redlock) return skip('node-redlock is not installed');
    make = redlockVariant(Redlock, kind === 'tuned');
    version = 'redlock ' + require('redlock/package.json').version;
  } else {
    const sem = load('redis-semaphore');
    if (!sem) return skip('redis-semaphore is not installed');
    make = semaphoreVariant(sem.Mutex, kind === 'tuned');
    version = 'redis-semaphore ' + require('redis-semaphore/package.json').version;
  }
  version += ', ioredis ' + require('ioredis/package.json').version + ', node ' + process.version;

  let end = 0;
  const endNs = () => end;
  const conns = [];
  for (let i = 0; i < clients; i++) {
    const c = new Redis({ host, port, lazyConnect: true, maxRetriesPerRequest: 1 });
    await c.connect();
    await c.ping();
    conns.push(c);
  }
  let lastRelease = 0, lastReleaser = -1;
  const tta = [], handoff = [], perClient = new Array(clients).fill(0);
  let gaveUp = 0, errors = 0, error = '';

  async function worker(i) {
    const c = conns[i];
    const acquire = make(c, key, endNs);
    try {
      while (now() < end) {
        const t0 = now();
        let release = null;
        while (!release && now() < end) {
          release = await acquire();
          if (!release && now() < end) gaveUp++; // not the run's own end
        }
        const t1 = now();
        tta.push(t1 - t0); // a wait cut off by the end counts too
        if (!release) break;
        if (t1 >= end) { // taken after the run: given back untouched, not counted
          await release();
          break;
        }
        if (lastRelease && lastReleaser !== i) handoff.push(t1 - lastRelease); // to another client
        const v = await c.get(counter);
        await c.set(counter, v === null ? 1 : Number(v) + 1);
        perClient[i]++;
        lastReleaser = i;
        lastRelease = now();
        await release();
      }
    } catch (e) {
      errors++;
      if (!error) error = String((e && e.message) || e);
    }
  }

  end = now() + seconds * 1e9;
  const all = Promise.all(conns.map((_, i) => worker(i)));
  const timer = new Promise((resolve) => setTimeout(resolve, seconds * 1000 + DRAIN_MS, 'late'));
  const how = await Promise.race([all, timer]);
  if (how === 'late' && !error) error = 'some waiters were still waiting ' + DRAIN_MS + ' ms after the run';
  const line = JSON.stringify({
    version,
    clients,
    seconds,
    acquisitions: perClient.reduce((a, b) => a + b, 0),
    per_client: perClient,
    gave_up: gaveUp,
    errors,
    error,
    tta_ns: tta,
    handoff_ns: handoff,
  });
  for (const c of conns) c.disconnect();
  // A pipe takes long lines asynchronously: exit only once this one is written.
  process.stdout.write(line + '\n', () => process.exit(0));
}

main().catch((e) => {
  const line = JSON.stringify({ errors: 1, error: String((e && e.message) || e) });
  process.stdout.write(line + '\n', () => process.exit(1));
});
