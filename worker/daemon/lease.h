/*
 * lease.h: the Lua scripts of the task lease and the finished record in
 * Redis, in one place, so that the daemon sends them and a test runs them
 * against a real Redis (tests/worker/daemon/test_lease_redis.c).
 *
 * Keys (common/defaults.h): kiwi:lease:<id> = the holding worker's id, with
 * a PX time to live; kiwi:done:<id> = the finished record (result,
 * published, hash); kiwi:attempt:<id> = runs of the task so far. Each script
 * is called with EVAL and the KEYS/ARGV written beside it. Data only: no
 * function here talks to Redis.
 */
#ifndef KIWI_WORKER_LEASE_H
#define KIWI_WORKER_LEASE_H

/* KEYS[1] lease, ARGV[1] worker id: deletes the lease if that worker holds
 * it (1), else leaves it (0). */
extern const char kiwi_lua_lease_release[];

/* KEYS[1] lease, KEYS[2] done record, ARGV[1] worker id, ARGV[2] ttl in ms:
 * extends the lease if that worker holds it; takes it again if nobody does
 * and the task has no finished record (Redis lost it while the task ran:
 * stopping the task would lose it); 0 when another worker holds it or the
 * task finished meanwhile. */
extern const char kiwi_lua_lease_renew[];

/* KEYS[1] attempt counter, ARGV[1] ttl in s: the next run's number, from 1;
 * the counter lives as long as the finished record. */
extern const char kiwi_lua_attempt[];

/* KEYS[1] done record, KEYS[2] lease: {result, published, hash, holder},
 * nil for what is absent. A worker that finished the task keeps its lease
 * until the broker has acknowledged the result, so a record unpublished
 * under someone's lease is a result on its way, not one to produce again. */
extern const char kiwi_lua_done_look[];

#endif
