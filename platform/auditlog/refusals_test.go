package auditlog

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRefusalLimiter: per address, the first perWindow refusals of a
// window are recorded and the rest summarised once when it ends (by the
// sweep, by the address's next refusal, or by being pushed out of the
// table); other addresses are not affected.
func TestRefusalLimiter(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	refusal := func(addr string) Entry {
		return Entry{ClientAddress: addr, Tool: "POST /mcp", Target: "/mcp", Outcome: "AUTH_INVALID"}
	}
	summary := func(n int64, addr string, at time.Time) Entry {
		return Entry{Time: at, ClientAddress: addr, Tool: "POST /mcp", Target: SuppressedSummary(n, addr), Outcome: "AUTH_INVALID"}
	}
	type step struct {
		addr    string        // a refusal from addr; "" sweeps
		at      time.Duration // after t0
		allowed bool
		due     []Entry
	}
	tests := []struct {
		name      string
		addresses int
		steps     []step
	}{
		{"under the limit", 10, []step{
			{"a", 0, true, nil}, {"a", time.Second, true, nil}, {"", time.Hour, false, nil},
		}},
		{"over the limit, summarised by the sweep at the window's end", 10, []step{
			{"a", 0, true, nil}, {"a", 1, true, nil}, {"a", 2, false, nil}, {"a", 3, false, nil}, {"a", 4, false, nil},
			{"b", 5, true, nil},
			{"", time.Minute - 1, false, nil},
			{"", time.Minute, false, []Entry{summary(3, "a", t0.Add(time.Minute))}},
			{"", 2 * time.Minute, false, nil}, // once
			{"a", 2 * time.Minute, true, nil}, // a new window
		}},
		{"summarised by the next refusal after the window", 10, []step{
			{"a", 0, true, nil}, {"a", 1, true, nil}, {"a", 2, false, nil},
			{"a", time.Minute, true, []Entry{summary(1, "a", t0.Add(time.Minute))}},
			{"", 3 * time.Minute, false, nil},
		}},
		{"summarised when pushed out of the table", 1, []step{
			{"a", 0, true, nil}, {"a", 1, true, nil}, {"a", 2, false, nil}, {"a", 3, false, nil},
			{"b", 4, true, []Entry{summary(2, "a", time.Time{})}}, // the eviction's time is the clock's
			{"", time.Hour, false, nil},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newRefusalLimiter(2, time.Minute, tc.addresses)
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				var due []Entry
				if s.addr == "" {
					due = l.due(now, false)
				} else {
					var allowed bool
					allowed, due = l.allow(refusal(s.addr), now)
					require.Equal(t, s.allowed, allowed, "step %d", i)
				}
				for j := range due {
					if s.due[j].Time.IsZero() {
						due[j].Time = time.Time{}
					}
				}
				require.Equal(t, s.due, due, "step %d", i)
			}
			require.Empty(t, l.due(t0.Add(24*time.Hour), true), "every suppressed refusal was summarised")
		})
	}
}

func TestIsRefusal(t *testing.T) {
	tests := []struct {
		e    Entry
		want bool
	}{
		{Entry{ClientAddress: "10.0.0.1", Outcome: "AUTH_INVALID"}, true},
		{Entry{ClientAddress: "10.0.0.1", Outcome: "SERVICE_UNAVAILABLE"}, true},
		{Entry{ClientAddress: "10.0.0.1", Principal: "k1", Outcome: "RATE_LIMIT"}, false}, // authenticated: never limited
		{Entry{ClientAddress: "10.0.0.1", Outcome: OK}, false},
		{Entry{Outcome: "AUTH_INVALID"}, false}, // stdio: one local client
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, IsRefusal(tc.e), "%+v", tc.e)
	}
}

// TestRefusalWindowKeepsOnlyItsSummary: an address's window outlives its
// summary (the table forgets it only when pushed out), so it keeps no more
// of the last refusal than the summary says, each field cut as the trail
// cuts it: a flood of long paths, queries or client names from many
// addresses cannot pin them in memory.
func TestRefusalWindowKeepsOnlyItsSummary(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 1<<20)
	l := newRefusalLimiter(1, time.Minute, 10)
	e := Entry{ClientAddress: "10.0.0.1", ClientName: "agent/" + long, Tool: "GET /v1/chunks/{id}", Target: "/v1/chunks/" + long,
		Query: long, DocumentIDs: []string{long}, Outcome: "AUTH_INVALID\xff" + long}
	for range 2 {
		_, _ = l.allow(e, t0)
	}
	w, ok := l.addrs.Peek("10.0.0.1")
	require.True(t, ok)
	require.Equal(t, Entry{ClientName: Cut("agent/"+long, MaxLabel), Tool: e.Tool,
		Outcome: Cut("AUTH_INVALID\uFFFD"+long, MaxLabel)}, w.last)

	due := l.due(t0.Add(time.Minute), false)
	require.Equal(t, []Entry{{Time: t0.Add(time.Minute), ClientAddress: "10.0.0.1", ClientName: w.last.ClientName,
		Tool: e.Tool, Target: SuppressedSummary(1, "10.0.0.1"), Outcome: w.last.Outcome}}, due)
}

// TestRefusalSummaryNamesEachKind: a window's suppressed refusals of
// several tools or outcomes are summarised with each kind counted, not as
// the last one's tool alone (which read as if all had been that tool);
// one kind keeps the plain summary. The kinds kept are bounded.
func TestRefusalSummaryNamesEachKind(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	type refusal struct {
		tool, outcome string
		n             int
	}
	tests := []struct {
		name     string
		refusals []refusal // after one recorded refusal (the limit is 1)
		tool     string
		outcome  string
		target   string
	}{
		{"one kind", []refusal{{"semantic_search", "AUTH_INVALID", 3}},
			"semantic_search", "AUTH_INVALID", "3 further refusals from a suppressed"},
		{"several tools", []refusal{{"semantic_search", "AUTH_INVALID", 1}, {"find_vendor_info", "AUTH_INVALID", 5}, {"resources/read", "AUTH_INVALID", 5}},
			"find_vendor_info", "AUTH_INVALID",
			"11 further refusals from a suppressed: 5 find_vendor_info AUTH_INVALID, 5 resources/read AUTH_INVALID, 1 semantic_search AUTH_INVALID"},
		{"several outcomes", []refusal{{"POST /v1/search", "AUTH_INVALID", 2}, {"POST /v1/search", "RATE_LIMIT", 4}},
			"POST /v1/search", "RATE_LIMIT",
			"6 further refusals from a suppressed: 4 POST /v1/search RATE_LIMIT, 2 POST /v1/search AUTH_INVALID"},
		{"more kinds than kept", []refusal{
			{"t1", "X", 1}, {"t2", "X", 1}, {"t3", "X", 1}, {"t4", "X", 1}, {"t5", "X", 1},
			{"t6", "X", 1}, {"t7", "X", 1}, {"t8", "X", 2}, {"t9", "X", 1}, {"t10", "X", 1}},
			"t8", "X",
			"11 further refusals from a suppressed: 2 t8 X, 1 t1 X, 1 t2 X, 1 t3 X, 1 t4 X, 1 t5 X, 1 t6 X, 1 t7 X, 2 of other kinds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newRefusalLimiter(1, time.Minute, 10)
			allowed, _ := l.allow(Entry{ClientAddress: "a", Tool: "semantic_search", Outcome: "AUTH_INVALID"}, t0)
			require.True(t, allowed)
			for _, r := range tc.refusals {
				for range r.n {
					allowed, due := l.allow(Entry{ClientAddress: "a", Tool: r.tool, Outcome: r.outcome}, t0.Add(time.Second))
					require.False(t, allowed)
					require.Empty(t, due)
				}
			}
			due := l.due(t0.Add(time.Minute), false)
			require.Equal(t, []Entry{{Time: t0.Add(time.Minute), ClientAddress: "a", Tool: tc.tool, Outcome: tc.outcome, Target: tc.target}}, due)
			require.Empty(t, l.due(t0.Add(time.Hour), true), "once")
		})
	}
}
