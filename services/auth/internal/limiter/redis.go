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

// luaNow is the scripts' clock: ARGV[1] when a test fixes it, else Redis
// server time, in microseconds.
const luaNow = `
local now
if ARGV[1] ~= nil and ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
`

// gcraScript is evaluate() in Lua: one call reads every tier of a key,
// decides, and (only when every tier conforms) writes them all, atomically,
// with Redis server time, so every replica sees the same clock and counts.
//
// KEYS[1]  the key's state hash (fields <tier>:t and <tier>:f per tier: tat, frac)
// KEYS[2]  the lease's record (<prefix>lease:<id>), when extra > 0
// ARGV[1]  optional fixed "now" in microseconds, for tests; empty in production
// ARGV[2]  the number of tiers, n
// ARGV     then per tier: name, window (microseconds), limit
// ARGV[3n+3] extra: units to prepay beyond the call, as many as fit (0..ratelimit.MaxLeaseUnits, clamped by the caller)
// ARGV[3n+4] the key (the lease record's owner), ARGV[3n+5] how long to keep the record (ms)
//
// When units beyond the call are charged, the lease record (a hash: key,
// units, until: now + keep in µs, as Memory keeps it, and <tier>:l, each
// tier's limit now, what a refund's unit is worth; Redis expires it then
// too) is written in the same step, so a lease is never granted
// unrecorded nor recorded uncharged.
//
// Returns {allowed, reset_us, exhausted_mask, remaining_1 .. remaining_n, extra}.
// Numbers are formatted with %.0f before being stored: Lua's default number
// formatting keeps 14 digits, which would round microsecond timestamps.
const gcraScript = luaNow + `
local n = tonumber(ARGV[2])
local extra = tonumber(ARGV[3 * n + 3]) or 0
local names, fields = {}, {}
for i = 1, n do
  names[i] = ARGV[3 * i]
  fields[2 * i - 1] = names[i] .. ':t'
  fields[2 * i] = names[i] .. ':f'
end
local function advance(tat, fr, k, w, l)
  local kw = k * w
  local q = math.floor(kw / l)
  local nx = tat + q
  local m = fr + (kw - q * l)
  if m >= l then m = m - l; nx = nx + 1 end
  return nx, m
end
local function conforms(nx, m, w)
  return nx < now + w or (nx == now + w and m == 0)
end
local function left(nx, m, w, l)
  local r = math.floor(((now + w - nx) * l - m) / w)
  if r < 0 then r = 0 end
  if r > l - 1 then r = l - 1 end
  return r
end
local f = redis.call('HMGET', KEYS[1], unpack(fields))
local allowed = true
local ft, ff, nt, nf, ws, ls = {}, {}, {}, {}, {}, {}
local wait, mask = 0, 0
for i = 1, n do
  local w = tonumber(ARGV[3 * i + 1])
  local l = tonumber(ARGV[3 * i + 2])
  ws[i] = w; ls[i] = l
  local tat = tonumber(f[2 * i - 1]) or 0
  local fr = tonumber(f[2 * i]) or 0
  if fr >= l then fr = l - 1 end
  if tat < now then tat = now; fr = 0 end
  ft[i] = tat; ff[i] = fr
  local nx, m = advance(tat, fr, 1, w, l)
  nt[i] = nx; nf[i] = m
  if not conforms(nx, m, w) then
    allowed = false
    mask = mask + 2 ^ (i - 1)
    local wt = nx - w - now
    if m > 0 then wt = wt + 1 end
    if wt > wait then wait = wt end
  end
end
local out = {}
if not allowed then
  out[1] = 0; out[2] = wait; out[3] = mask
  for i = 1, n do
    if conforms(nt[i], nf[i], ws[i]) then out[3 + i] = left(nt[i], nf[i], ws[i], ls[i]) + 1 else out[3 + i] = 0 end
  end
  out[4 + n] = 0
  return out
end
local k = 1 + extra
for i = 1, n do
  while k > 1 do
    local nx, m = advance(ft[i], ff[i], k, ws[i], ls[i])
    if conforms(nx, m, ws[i]) then break end
    k = k - 1
  end
end
local longest = 0
local set = {}
for i = 1, n do
  nt[i], nf[i] = advance(ft[i], ff[i], k, ws[i], ls[i])
  if nt[i] - now > longest then longest = nt[i] - now end
  set[4 * i - 3] = names[i] .. ':t'
  set[4 * i - 2] = string.format('%.0f', nt[i])
  set[4 * i - 1] = names[i] .. ':f'
  set[4 * i] = string.format('%.0f', nf[i])
end
redis.call('HSET', KEYS[1], unpack(set))
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.floor(longest / 1000) + 1000))
if k > 1 then
  local keep = tonumber(ARGV[3 * n + 5])
  local rec = {'key', ARGV[3 * n + 4], 'units', k - 1, 'until', string.format('%.0f', now + keep * 1000)}
  for i = 1, n do
    rec[#rec + 1] = names[i] .. ':l'
    rec[#rec + 1] = ls[i]
  end
  redis.call('HSET', KEYS[2], unpack(rec))
  redis.call('PEXPIRE', KEYS[2], keep)
end
local reset = nt[1] - now
if nf[1] > 0 then reset = reset + 1 end
out[1] = 1; out[2] = reset; out[3] = 0
for i = 1, n do out[3 + i] = left(nt[i], nf[i], ws[i], ls[i]) end
out[4 + n] = k - 1
return out
`

// refundScript is Memory.Refund in Lua (refund() for the arithmetic): the
// lease record KEYS[2] must exist and name the key ARGV[3n+4]; it is
// deleted, and, unless its until has passed, every tier of the key that has
// state and a recorded limit (<tier>:l) moves its TAT back by min(ARGV[3n+3],
// the recorded units) intervals of window / recorded limit, never before
// now. A key with no state is full already: nothing is written. Same KEYS[1]
// and tier ARGV as gcraScript. Returns the units given back as refund()
// counts them (0: no such record for this key, or nothing to give back).
const refundScript = luaNow + `
local n = tonumber(ARGV[2])
local rf = {'key', 'units', 'until'}
for i = 1, n do rf[3 + i] = ARGV[3 * i] .. ':l' end
local rec = redis.call('HMGET', KEYS[2], unpack(rf))
if rec[1] ~= ARGV[3 * n + 4] then return 0 end
redis.call('DEL', KEYS[2])
if (tonumber(rec[3]) or 0) <= now then return 0 end
local units = tonumber(ARGV[3 * n + 3]) or 0
local recorded = tonumber(rec[2]) or 0
if recorded < units then units = recorded end
local fields = {}
for i = 1, n do
  fields[2 * i - 1] = ARGV[3 * i] .. ':t'
  fields[2 * i] = ARGV[3 * i] .. ':f'
end
local f = redis.call('HMGET', KEYS[1], unpack(fields))
local set = {}
local back = 0
for i = 1, n do
  local tat = tonumber(f[2 * i - 1])
  local gl = tonumber(rec[3 + i])
  if tat ~= nil and gl ~= nil then
    local w = tonumber(ARGV[3 * i + 1])
    local l = tonumber(ARGV[3 * i + 2])
    local fr = tonumber(f[2 * i]) or 0
    if fr >= l then fr = l - 1 end
    local uw = units * w
    local q = math.floor(uw / gl)
    local nx = tat - q
    local m = fr
    if gl == l then m = fr - (uw - q * gl) end
    if m < 0 then m = m + l; nx = nx - 1 end
    local took = units
    if nx < now then
      took = 0
      if tat > now then
        took = math.floor((tat - now) * gl / w)
        if took > units then took = units end
      end
      nx = now; m = 0
    end
    if took > back then back = took end
    set[#set + 1] = fields[2 * i - 1]
    set[#set + 1] = string.format('%.0f', nx)
    set[#set + 1] = fields[2 * i]
    set[#set + 1] = string.format('%.0f', m)
  end
end
if #set > 0 then redis.call('HSET', KEYS[1], unpack(set)) end
return back
`

var refundLua = redis.NewScript(refundScript)

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
	return r.AllowExtra(ctx, key, limits, Lease{})
}

// leaseKey is where a lease's record is kept.
func (r *Redis) leaseKey(id string) string { return r.prefix + "lease:" + id }

// args are a script's ARGV: now, the tiers, then last (extra or units),
// clamped to 0..ratelimit.MaxLeaseUnits here so the scripts need not, then
// more (the lease record's key and keep).
func (r *Redis) args(limits Limits, last int64, more ...any) []any {
	n := len(limits)
	args := make([]any, 0, 3+3*n+len(more))
	if r.testClock != nil {
		args = append(args, r.testClock().UnixMicro())
	} else {
		args = append(args, "")
	}
	args = append(args, n)
	for i, t := range ratelimit.Tiers {
		args = append(args, t.Name, windowMicros(i), limits[i])
	}
	args = append(args, min(max(last, 0), ratelimit.MaxLeaseUnits))
	return append(args, more...)
}

// Refund implements Leaser in one round trip.
func (r *Redis) Refund(ctx context.Context, key string, limits Limits, id string, units int64) (int64, error) {
	if err := limits.Validate(); err != nil {
		return 0, err
	}
	if id == "" {
		return 0, nil
	}
	got, err := refundLua.Run(ctx, r.client, []string{r.prefix + key, r.leaseKey(id)}, r.args(limits, units, key)...).Int64()
	if err != nil {
		return 0, fmt.Errorf("redis rate-limit refund script: %w", err)
	}
	return got, nil
}

// AllowExtra implements Leaser in one round trip, like Allow.
func (r *Redis) AllowExtra(ctx context.Context, key string, limits Limits, lease Lease) (Decision, error) {
	if err := limits.Validate(); err != nil {
		return Decision{}, err
	}
	keys := []string{r.prefix + key}
	if lease.Units > 0 {
		if lease.ID == "" {
			return Decision{}, errNoLeaseID
		}
		keys = append(keys, r.leaseKey(lease.ID))
	} else {
		lease.Keep = 0
	}
	n := len(limits)
	res, err := script.Run(ctx, r.client, keys, r.args(limits, lease.Units, key, lease.keepMillis())...).Int64Slice()
	if r.busy(ctx, err) {
		return Decision{}, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	if err != nil {
		return Decision{}, fmt.Errorf("redis rate-limit script: %w", err)
	}
	r.dials.lastFailed.Store(false) // Redis answered: an older failed connect is stale
	if len(res) != 4+n {
		return Decision{}, errors.New("redis rate-limit script: reply has " + strconv.Itoa(len(res)) + " values, want " + strconv.Itoa(4+n))
	}
	d := Decision{
		Allowed:   res[0] == 1,
		Reset:     time.Duration(res[1]) * time.Microsecond,
		Remaining: Limits(res[3 : 3+n]),
		Extra:     res[3+n],
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
