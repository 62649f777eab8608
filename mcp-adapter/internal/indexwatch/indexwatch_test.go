package indexwatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

func TestEpochMovesOnChangeAndStopsBeingCurrentWhenTheStreamDoes(t *testing.T) {
	v7 := version{index: 7, vectors: 3, model: "m1"}
	// Each row: what happens (a message with a version, or the stream
	// lost), how long after the previous row, and the epoch and currency
	// expected right after.
	type step struct {
		msg     *version // nil: the stream is lost
		after   time.Duration
		epoch   uint64
		current bool
	}
	msg := func(index, vectors int64, model string) *version {
		return &version{index: index, vectors: vectors, model: model}
	}
	lost := (*version)(nil)
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"the first message makes the first epoch; heartbeats with the same version keep it", []step{
			{&v7, 0, 1, true},
			{&v7, time.Second, 1, true},
			{&v7, time.Second, 1, true},
		}},
		{"a write, a vectors change or a retrain moves the epoch", []step{
			{&v7, 0, 1, true},
			{msg(8, 3, "m1"), 100 * time.Millisecond, 2, true},
			{msg(8, 4, "m1"), 100 * time.Millisecond, 3, true},
			{msg(8, 4, "m2"), 100 * time.Millisecond, 4, true},
		}},
		{"replicas at different points move it each time", []step{
			{msg(8, 3, "m1"), 0, 1, true},
			{&v7, 100 * time.Millisecond, 2, true},
			{msg(8, 3, "m1"), 100 * time.Millisecond, 3, true},
		}},
		{"a broken stream is not current at once", []step{
			{&v7, 0, 1, true},
			{lost, time.Millisecond, 1, false},
		}},
		{"back with the same version: current again, same epoch; with another: moved", []step{
			{&v7, 0, 1, true},
			{lost, 0, 1, false},
			{&v7, 5 * time.Second, 1, true},
			{lost, 0, 1, false},
			{msg(9, 3, "m1"), time.Second, 2, true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s state
			var last version // the epoch's version: the last one seen
			now := time.Unix(1_800_000_000, 0)
			for i, st := range tc.steps {
				now = now.Add(st.after)
				if st.msg == nil {
					s.lost()
				} else {
					s.observe(*st.msg, now)
					last = *st.msg
				}
				epoch, ver, current := s.current(now)
				require.Equal(t, st.epoch, epoch, "step %d", i)
				require.Equal(t, last.String(), ver, "step %d", i)
				require.Equal(t, st.current, current, "step %d", i)
			}
		})
	}
}

func TestASilentStreamStopsBeingCurrentAfterThreeHeartbeats(t *testing.T) {
	var s state
	at := time.Unix(1_800_000_000, 0)
	s.observe(version{index: 1}, at)
	for _, tc := range []struct {
		name    string
		silent  time.Duration
		current bool
	}{
		{"one missed heartbeat", 2 * Heartbeat, true},
		{"three heartbeats, exactly", StaleAfter, true},
		{"past three", StaleAfter + time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, current := s.current(at.Add(tc.silent))
			require.Equal(t, tc.current, current)
		})
	}
}

func TestNotCurrentBeforeTheFirstMessage(t *testing.T) {
	w := New(nil, nil, nil)
	epoch, _, current := w.Epoch()
	require.Zero(t, epoch)
	require.False(t, current)
}

// TestVersionString: every field of an IndexVersion, the ranking settings
// included, tells versions apart; the string of a message is the one the
// watcher reports for it.
func TestVersionString(t *testing.T) {
	base := &searchv1.IndexVersion{IndexGeneration: 7, VectorsGeneration: 3, EmbedderModel: "m1", Settings: "s1"}
	for _, tc := range []struct {
		name string
		v    *searchv1.IndexVersion
	}{
		{"index generation", &searchv1.IndexVersion{IndexGeneration: 8, VectorsGeneration: 3, EmbedderModel: "m1", Settings: "s1"}},
		{"vectors generation", &searchv1.IndexVersion{IndexGeneration: 7, VectorsGeneration: 4, EmbedderModel: "m1", Settings: "s1"}},
		{"model", &searchv1.IndexVersion{IndexGeneration: 7, VectorsGeneration: 3, EmbedderModel: "m2", Settings: "s1"}},
		{"settings", &searchv1.IndexVersion{IndexGeneration: 7, VectorsGeneration: 3, EmbedderModel: "m1", Settings: "s2"}},
		{"no settings (an older search)", &searchv1.IndexVersion{IndexGeneration: 7, VectorsGeneration: 3, EmbedderModel: "m1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NotEqual(t, Version(base), Version(tc.v))
			var s state
			s.observe(versionOf(base), time.Now())
			s.observe(versionOf(tc.v), time.Now())
			epoch, ver, _ := s.current(time.Now())
			require.Equal(t, uint64(2), epoch, "the epoch moved")
			require.Equal(t, Version(tc.v), ver)
		})
	}
}
