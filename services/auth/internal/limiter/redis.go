package limiter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bmcis/knowledge/platform/ratelimit"
)

// gcraScript is evaluate() in Lua: one call reads every tier of a key,
// decides, and (only when every tier conforms) writes them all, atomically,
// with Redis server time, so every replica sees the same clock and counts.
//
// KEYS[1]  the key's state hash (fields <tier>:t and <tier>:f per tier: tat, frac)
// ARGV[1]  optional fixed "now" in microseconds, for tests; empty in production
// ARGV[2]  the number of tiers, n
// ARGV     then per tier: name, window (microseconds), limit
//
// Returns {allowed, reset_us, exhausted_mask, remaining_1 .. remaining_n}.
// Numbers are formatted with %.0f before being stored: Lua's default number
// formatting keeps 14 digits, which would round microsecond timestamps.
const gcraScript = `
local now
if ARGV[1] ~= nil and ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local n = tonumber(ARGV[2])
local names, fields = {}, {}
for i = 1, n do
  names[i] = ARGV[3 * i]
  fields[2 * i - 1] = names[i] .. ':t'
  fields[2 * i] = names[i] .. ':f'
end
local f = redis.call('HMGET', KEYS[1], unpack(fields))
local allowed = true
local nt, nf, rem = {}, {}, {}
local wait, mask = 0, 0
for i = 1, n do
  local w = tonumber(ARGV[3 * i + 1])
  local l = tonumber(ARGV[3 * i + 2])
  local tat = tonumber(f[2 * i - 1]) or 0
  local fr = tonumber(f[2 * i]) or 0
  if fr >= l then fr = l - 1 end
  if tat < now then tat = now; fr = 0 end
  local q = math.floor(w / l)
  local nx = tat + q
  local m = fr + (w - q * l)
  if m >= l then m = m - l; nx = nx + 1 end
  if nx < now + w or (nx == now + w and m == 0) then
    nt[i] = nx; nf[i] = m
    rem[i] = math.floor(((now + w - nx) * l - m) / w)
    if rem[i] < 0 then rem[i] = 0 end
    if rem[i] > l - 1 then rem[i] = l - 1 end
  else
    allowed = false
    mask = mask + 2 ^ (i - 1)
    rem[i] = -1
    local wt = nx - w - now
    if m > 0 then wt = wt + 1 end
    if wt > wait then wait = wt end
  end
end
local out = {}
if not allowed then
  out[1] = 0; out[2] = wait; out[3] = mask
  for i = 1, n do
    if rem[i] >= 0 then out[3 + i] = rem[i] + 1 else out[3 + i] = 0 end
  end
  return out
end
local longest = 0
local set = {}
for i = 1, n do
  if nt[i] - now > longest then longest = nt[i] - now end
  set[4 * i - 3] = names[i] .. ':t'
  set[4 * i - 2] = string.format('%.0f', nt[i])
  set[4 * i - 1] = names[i] .. ':f'
  set[4 * i] = string.format('%.0f', nf[i])
end
redis.call('HSET', KEYS[1], unpack(set))
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.floor(longest / 1000) + 1000))
local reset = nt[1] - now
if nf[1] > 0 then reset = reset + 1 end
out[1] = 1; out[2] = reset; out[3] = 0
for i = 1, n do out[3 + i] = rem[i] end
return out
`

var script = redis.NewScript(gcraScript)

// Redis is the shared backend: every replica pointing at the same Redis (and
// prefix) shares exact counts.
type Redis struct {
	client    redis.UniversalClient
	prefix    string
	testClock Clock
	dials     *dialWatch
}

// dialWatch follows the client's connects to Redis, so Allow can tell a call
// whose context ended while it waited for a pool turn (busy: every connection
// was in use) from one whose context ended while a connect hung (Redis down):
// go-redis returns the context's own error in both cases.
type dialWatch struct {
	inFlight   atomic.Int64
	lastFailed atomic.Bool
}

// hanging reports whether a connect to Redis is under way, or one failed
// since Redis last answered: either way a call that ran out of time may have
// been waiting on it. (A connect's own timeout can end a moment after the
// call's, so in-flight alone could miss it.)
func (w *dialWatch) hanging() bool { return w.inFlight.Load() > 0 || w.lastFailed.Load() }

func (w *dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		w.inFlight.Add(1)
		defer w.inFlight.Add(-1)
		c, err := next(ctx, network, addr)
		w.lastFailed.Store(err != nil)
		return c, err
	}
}

func (w *dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (w *dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// RedisOption adjusts a Redis limiter.
type RedisOption func(*Redis)

// WithTestClock makes the script use clock instead of Redis server time.
// Only for tests that need a frozen or stepped clock; production must use
// server time so replicas with skewed clocks still agree.
func WithTestClock(clock Clock) RedisOption { return func(r *Redis) { r.testClock = clock } }

// NewRedis returns a limiter storing its state under prefix+key in client.
// It adds a hook to client that follows its connects (dialWatch).
func NewRedis(client redis.UniversalClient, prefix string, opts ...RedisOption) *Redis {
	r := &Redis{client: client, prefix: prefix, dials: &dialWatch{}}
	for _, o := range opts {
		o(r)
	}
	client.AddHook(r.dials)
	return r
}

// Allow implements Limiter in one round trip (EVALSHA; EVAL once per Redis
// restart, when the script cache is empty).
func (r *Redis) Allow(ctx context.Context, key string, limits Limits) (Decision, error) {
	if err := limits.Validate(); err != nil {
		return Decision{}, err
	}
	n := len(limits)
	args := make([]any, 0, 2+3*n)
	if r.testClock != nil {
		args = append(args, r.testClock().UnixMicro())
	} else {
		args = append(args, "")
	}
	args = append(args, n)
	for i, t := range ratelimit.Tiers {
		args = append(args, t.Name, windowMicros(i), limits[i])
	}
	res, err := script.Run(ctx, r.client, []string{r.prefix + key}, args...).Int64Slice()
	if r.busy(ctx, err) {
		return Decision{}, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	if err != nil {
		return Decision{}, fmt.Errorf("redis rate-limit script: %w", err)
	}
	r.dials.lastFailed.Store(false) // Redis answered: an older failed connect is stale
	if len(res) != 3+n {
		return Decision{}, errors.New("redis rate-limit script: reply has " + strconv.Itoa(len(res)) + " values, want " + strconv.Itoa(3+n))
	}
	d := Decision{
		Allowed:   res[0] == 1,
		Reset:     time.Duration(res[1]) * time.Microsecond,
		Remaining: Limits(res[3:]),
	}
	for i := range n {
		if res[2]&(1<<i) != 0 {
			d.Exhausted = append(d.Exhausted, i)
		}
	}
	return d, nil
}

// busy reports whether err means this process had no free connection in
// time, which says nothing about Redis: PoolTimeout ran out (ErrPoolTimeout),
// or ctx ended while the call waited for a pool turn. go-redis returns ctx's
// own error there, but also while a connect to Redis hangs (and a dial
// timeout matches context.DeadlineExceeded too), so ctx's error is busy only
// when it is not a network error and no connect is hanging or failing.
func (r *Redis) busy(ctx context.Context, err error) bool {
	if errors.Is(err, redis.ErrPoolTimeout) {
		return true
	}
	if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
		return false
	}
	// Not *net.OpError (a connect or read that timed out); net.Error would
	// not do: context.DeadlineExceeded itself satisfies it.
	var opErr *net.OpError
	return !errors.As(err, &opErr) && !r.dials.hanging()
}
