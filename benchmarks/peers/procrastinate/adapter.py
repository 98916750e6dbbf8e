"""procrastinate adapter of benchmarks/peers/run.sh (same CLI as every adapter, see ../harness.py):
    drain URL N CONC | latency URL RATE SECS CONC | enqueue URL N | work URL CONC SLEEP_MS LOG

Defaults: LISTEN/NOTIFY on, fetch_job_polling_interval 5 s, jobs kept after success; the
psycopg pool is sized max(10, concurrency + 2), every connection opened (min_size = max_size,
pool.wait()) before a drain's clock. Drain: with PEERS_PREENQUEUED the harness has inserted the
rows (`enqueue`) and run VACUUM ANALYZE. procrastinate never requeues the jobs of a
dead worker by itself: its documented recipe ("retry stalled jobs") is a periodic call of
get_stalled_jobs() (workers silent for 30 s, heartbeat every 10 s) + retry_job(); the `work`
mode runs that recipe every 5 s so that the crash scenario measures it.
"""
import asyncio
import json
import os
import sys
import time

from procrastinate import App, PsycopgConnector

mode, url, *args = sys.argv[1:]
conc_arg = {"drain": 1, "latency": 2, "work": 0}.get(mode)
conc = int(args[conc_arg]) if conc_arg is not None else 1
app = App(  # noqa: the task module is __main__ on purpose (one-file adapter)
    connector=PsycopgConnector(conninfo=url, min_size=max(10, conc + 2), max_size=max(10, conc + 2)))
handler = None


@app.task(name="bench", queue="bench")
async def bench(n, t=0.0):
    await handler(n, t)


def pct(v, q):
    return v[round((len(v) - 1) * q)]


async def run_worker(conc):
    return asyncio.create_task(
        app.run_worker_async(queues=["bench"], concurrency=conc, install_signal_handlers=False, wait=True))


async def stop(task):
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


async def enqueue(n):
    for i in range(1, n + 1, 5000):
        await bench.batch_defer_async(*[{"n": k} for k in range(i, min(i + 5000, n + 1))])


async def main():
    global handler
    async with app.open_async():
        await app.schema_manager.apply_schema_async() if not await schema_exists() else None
        if mode == "enqueue":
            await enqueue(int(args[0]))
        elif mode == "drain":
            n = int(args[0])
            if not os.environ.get("PEERS_PREENQUEUED"):
                await enqueue(n)
            await app.connector.pool.wait()
            state = {"done": 0, "t1": None}
            ev = asyncio.Event()

            async def h(_n, _t):
                state["done"] += 1
                if state["done"] == n:
                    state["t1"] = time.perf_counter()
                    ev.set()

            handler = h
            t0 = time.perf_counter()
            w = await run_worker(conc)
            await ev.wait()
            secs = state["t1"] - t0
            await stop(w)
            print(json.dumps({"rows_per_s": n / secs, "seconds": secs, "handled": state["done"]}))
        elif mode == "latency":
            rate, secs = float(args[0]), float(args[1])
            total = int(rate * secs)
            lat = []

            async def h(_n, t):
                lat.append(time.time() * 1000 - t)

            handler = h
            w = await run_worker(conc)
            await asyncio.sleep(1)
            t0 = time.perf_counter()
            for i in range(total):
                wait = t0 + i / rate - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                await bench.defer_async(n=i, t=time.time() * 1000)
            offered = total / (time.perf_counter() - t0)
            deadline = time.monotonic() + 30
            while len(lat) < total and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            await stop(w)
            v = sorted(lat)
            print(json.dumps({"n": len(v), "expected": total, "offered_per_s": offered,
                              "p50": pct(v, .5), "p95": pct(v, .95), "p99": pct(v, .99), "max": v[-1]}))
        elif mode == "work":
            sleep_ms = int(args[1])
            fd = os.open(args[2], os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o644)

            async def h(n, _t):
                os.write(fd, f"S {n} {time.time() * 1000:.1f}\n".encode())
                await asyncio.sleep(sleep_ms / 1000)
                os.write(fd, f"D {n} {time.time() * 1000:.1f}\n".encode())

            handler = h
            await run_worker(conc)
            while True:  # the documented stalled-jobs recipe
                for job in await app.job_manager.get_stalled_jobs():
                    await app.job_manager.retry_job(job)
                await asyncio.sleep(5)
        else:
            raise SystemExit(f"unknown mode {mode}")


async def schema_exists():
    async with app.connector.pool.connection() as c:
        cur = await c.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL")
        return (await cur.fetchone())[0]


asyncio.run(main())
