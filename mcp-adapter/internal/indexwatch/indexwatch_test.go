package indexwatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// script answers the versions (or errors) given, one per read.
type script struct {
	steps []any
	at    int
}

func (s *script) read(context.Context) (string, error) {
	step := s.steps[s.at]
	s.at++
	if err, ok := step.(error); ok {
		return "", err
	}
	return step.(string), nil
}

func TestEpochMovesOnChangeAndStopsBeingCurrentWhenSearchIsSilent(t *testing.T) {
	down := errors.New("unavailable")
	// Each row: what the read answers, how long after the previous row
	// Epoch is asked, and the epoch and currency expected then.
	type step struct {
		answer  any
		after   time.Duration
		epoch   uint64
		current bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"the first read makes the first epoch; an unchanged version keeps it", []step{
			{"7/m1", 0, 1, true},
			{"7/m1", 100 * time.Millisecond, 1, true},
		}},
		{"a write or a retrain moves the epoch", []step{
			{"7/m1", 0, 1, true},
			{"8/m1", 100 * time.Millisecond, 2, true},
			{"8/m2", 100 * time.Millisecond, 3, true},
		}},
		{"replicas at different points move it each time", []step{
			{"8/m1", 0, 1, true},
			{"7/m1", 100 * time.Millisecond, 2, true},
			{"8/m1", 100 * time.Millisecond, 3, true},
		}},
		{"failed reads: current for three intervals, then not", []step{
			{"7/m1", 0, 1, true},
			{down, 100 * time.Millisecond, 1, true},
			{down, 200 * time.Millisecond, 1, true},
			{down, 1 * time.Millisecond, 1, false},
		}},
		{"back after an outage: the same version is current again, a new one moves", []step{
			{"7/m1", 0, 1, true},
			{down, 400 * time.Millisecond, 1, false},
			{"7/m1", 100 * time.Millisecond, 1, true},
			{down, 400 * time.Millisecond, 1, false},
			{"9/m1", 100 * time.Millisecond, 2, true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{}
			for _, st := range tc.steps {
				s.steps = append(s.steps, st.answer)
			}
			now := time.Unix(1_800_000_000, 0)
			w, err := New(s.read, 100*time.Millisecond, func() time.Time { return now })
			require.NoError(t, err)
			for i, st := range tc.steps {
				now = now.Add(st.after)
				_ = w.Poll(context.Background())
				epoch, current := w.Epoch()
				require.Equal(t, st.epoch, epoch, "step %d", i)
				require.Equal(t, st.current, current, "step %d", i)
			}
		})
	}
}

func TestNotCurrentBeforeTheFirstRead(t *testing.T) {
	w, err := New(func(context.Context) (string, error) { return "", errors.New("refused") }, time.Second, nil)
	require.NoError(t, err)
	require.Error(t, w.Poll(context.Background()))
	_, current := w.Epoch()
	require.False(t, current)
}

func TestNewRefusesBadSettings(t *testing.T) {
	read := func(context.Context) (string, error) { return "", nil }
	_, err := New(nil, time.Second, nil)
	require.ErrorContains(t, err, "no version reader")
	_, err = New(read, 0, nil)
	require.ErrorContains(t, err, "interval must be positive")
}
