package dbhealth_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/dbhealth"
)

func TestTrackerHysteresis(t *testing.T) {
	o := dbhealth.Options{DownAfter: 3, UpAfter: 2}
	tests := []struct {
		name     string
		outcomes []bool
		want     []bool // state after each outcome
	}{
		{"steady up", []bool{true, true, true}, []bool{true, true, true}},
		{"one or two failures do not flap", []bool{false, false, true, false, false, true}, []bool{true, true, true, true, true, true}},
		{"three failures turn it down", []bool{false, false, false}, []bool{true, true, false}},
		{"one good ping in an outage is not enough", []bool{false, false, false, true, false, true, true}, []bool{true, true, false, false, false, false, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := dbhealth.NewTracker(o)
			var got []bool
			for _, ok := range tc.outcomes {
				up, _ := tr.Observe(ok)
				got = append(got, up)
			}
			require.Equal(t, tc.want, got)
		})
	}
}

type switchable struct{ down atomic.Bool }

func (s *switchable) Ping(context.Context) error {
	if s.down.Load() {
		return errors.New("connection refused")
	}
	return nil
}

func TestWatchReportsChanges(t *testing.T) {
	var mu sync.Mutex
	var reports []bool
	last := func() []bool { mu.Lock(); defer mu.Unlock(); return append([]bool(nil), reports...) }
	p := &switchable{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		dbhealth.Watch(ctx, p, dbhealth.Options{Interval: 5 * time.Millisecond, Timeout: time.Second, DownAfter: 2, UpAfter: 2},
			func(up bool) { mu.Lock(); reports = append(reports, up); mu.Unlock() })
	}()
	require.Eventually(t, func() bool { return len(last()) == 1 }, time.Second, time.Millisecond)
	p.down.Store(true)
	require.Eventually(t, func() bool { return len(last()) == 2 }, time.Second, time.Millisecond)
	p.down.Store(false)
	require.Eventually(t, func() bool { return len(last()) == 3 }, time.Second, time.Millisecond)
	cancel()
	<-done
	require.Equal(t, []bool{true, false, true}, last())
}
