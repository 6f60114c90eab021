/*
 * lease.c: the Lua scripts of lease.h. Compare-and-delete and
 * compare-and-extend: a lease is only touched by its holder.
 */
#include "worker/daemon/lease.h"

const char kiwi_lua_lease_release[]
    = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

const char kiwi_lua_lease_renew[] = "local v = redis.call('get', KEYS[1]) "
                                    "if v == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end "
                                    "if not v and redis.call('exists', KEYS[2]) == 0 then "
                                    "redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end "
                                    "return 0";

const char kiwi_lua_attempt[] = "local n = redis.call('incr', KEYS[1]) redis.call('expire', KEYS[1], ARGV[1]) return n";

const char kiwi_lua_done_look[] = "local r = redis.call('hmget', KEYS[1], 'result', 'published', 'hash') "
                                  "r[4] = redis.call('get', KEYS[2]) return r";
