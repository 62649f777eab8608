package limiter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// gcraScript is evaluate() in Lua: one call reads the three tiers of a key,
// decides, and (only when every tier conforms) writes all three, atomically,
// with Redis server time, so every replica sees the same clock and counts.
//
// KEYS[1]  the key's state hash (fields t1 f1 t2 f2 t3 f3: tat and frac per tier)
// ARGV     window1 limit1 window2 limit2 window3 limit3 (microseconds, units)
// ARGV[7]  optional fixed "now" in microseconds, for tests; empty in production
//
// Returns {allowed, remaining1, remaining2, remaining3, reset_us, exhausted_mask}.
// Numbers are formatted with %.0f before being stored: Lua's default number
// formatting keeps 14 digits, which would round microsecond timestamps.
const gcraScript = `
local now
if ARGV[7] ~= nil and ARGV[7] ~= '' then
  now = tonumber(ARGV[7])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local f = redis.call('HMGET', KEYS[1], 't1', 'f1', 't2', 'f2', 't3', 'f3')
local allowed = true
local nt, nf, rem = {}, {}, {}
local wait, mask = 0, 0
for i = 1, 3 do
  local w = tonumber(ARGV[2 * i - 1])
  local l = tonumber(ARGV[2 * i])
  local tat = tonumber(f[2 * i - 1]) or 0
  local fr = tonumber(f[2 * i]) or 0
  if fr >= l then fr = l - 1 end
  if tat < now then tat = now; fr = 0 end
  local q = math.floor(w / l)
  local n = tat + q
  local m = fr + (w - q * l)
  if m >= l then m = m - l; n = n + 1 end
  if n < now + w or (n == now + w and m == 0) then
    nt[i] = n; nf[i] = m
    rem[i] = math.floor(((now + w - n) * l - m) / w)
    if rem[i] < 0 then rem[i] = 0 end
    if rem[i] > l - 1 then rem[i] = l - 1 end
  else
    allowed = false
    mask = mask + 2 ^ (i - 1)
    rem[i] = -1
    local wt = n - w - now
    if m > 0 then wt = wt + 1 end
    if wt > wait then wait = wt end
  end
end
if not allowed then
  for i = 1, 3 do
    if rem[i] >= 0 then rem[i] = rem[i] + 1 else rem[i] = 0 end
  end
  return {0, rem[1], rem[2], rem[3], wait, mask}
end
local longest = 0
for i = 1, 3 do
  if nt[i] - now > longest then longest = nt[i] - now end
end
redis.call('HSET', KEYS[1],
  't1', string.format('%.0f', nt[1]), 'f1', string.format('%.0f', nf[1]),
  't2', string.format('%.0f', nt[2]), 'f2', string.format('%.0f', nf[2]),
  't3', string.format('%.0f', nt[3]), 'f3', string.format('%.0f', nf[3]))
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.floor(longest / 1000) + 1000))
local reset = nt[1] - now
if nf[1] > 0 then reset = reset + 1 end
return {1, rem[1], rem[2], rem[3], reset, 0}
`

var script = redis.NewScript(gcraScript)

// Redis is the shared backend: every replica pointing at the same Redis (and
// prefix) shares exact counts.
type Redis struct {
	client    redis.UniversalClient
	prefix    string
	testClock Clock
}

// RedisOption adjusts a Redis limiter.
type RedisOption func(*Redis)

// WithTestClock makes the script use clock instead of Redis server time.
// Only for tests that need a frozen or stepped clock; production must use
// server time so replicas with skewed clocks still agree.
func WithTestClock(clock Clock) RedisOption { return func(r *Redis) { r.testClock = clock } }

// NewRedis returns a limiter storing its state under prefix+key in client.
func NewRedis(client redis.UniversalClient, prefix string, opts ...RedisOption) *Redis {
	r := &Redis{client: client, prefix: prefix}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Allow implements Limiter in one round trip (EVALSHA; EVAL once per Redis
// restart, when the script cache is empty).
func (r *Redis) Allow(ctx context.Context, key string, limits Limits) (Decision, error) {
	if err := limits.Validate(); err != nil {
		return Decision{}, err
	}
	args := make([]any, 0, 7)
	for t := Minute; t < numTiers; t++ {
		args = append(args, windowMicros(t), limits.Get(t))
	}
	if r.testClock != nil {
		args = append(args, r.testClock().UnixMicro())
	} else {
		args = append(args, "")
	}
	res, err := script.Run(ctx, r.client, []string{r.prefix + key}, args...).Int64Slice()
	if errors.Is(err, redis.ErrPoolTimeout) {
		// Every connection was busy: this process is overloaded, which says
		// nothing about Redis.
		return Decision{}, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	if err != nil {
		return Decision{}, fmt.Errorf("redis rate-limit script: %w", err)
	}
	if len(res) != 6 {
		return Decision{}, errors.New("redis rate-limit script: reply has " + strconv.Itoa(len(res)) + " values, want 6")
	}
	d := Decision{
		Allowed:   res[0] == 1,
		Remaining: Limits{Minute: res[1], Hour: res[2], Day: res[3]},
		Reset:     time.Duration(res[4]) * time.Microsecond,
	}
	for t := Minute; t < numTiers; t++ {
		if res[5]&(1<<t) != 0 {
			d.Exhausted = append(d.Exhausted, t)
		}
	}
	return d, nil
}
