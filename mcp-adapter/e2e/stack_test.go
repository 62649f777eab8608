package e2e

import (
	"net"
	"sync"
	"testing"

	"github.com/bmcis/knowledge/platform/stacktest"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// demo is the package's shared stack: the demo documents and vendor graph.
func demo(t testing.TB) *stacktest.Stack {
	t.Helper()
	return stacktest.Shared(t, "demo", stacktest.Options{}, func(t testing.TB, s *stacktest.Stack) {
		s.IngestDemoDocs(t)
		s.ImportDemoGraph(t)
	})
}

var demoKey struct {
	sync.Mutex
	key string
}

// key is an API key of the demo stack with limits no test reaches.
func key(t testing.TB) string {
	t.Helper()
	s := demo(t)
	demoKey.Lock()
	defer demoKey.Unlock()
	if demoKey.key == "" {
		demoKey.key = s.CreateKey(t, stacktest.Key{Name: "mcp-e2e", PerMinute: 10_000_000, PerHour: 10_000_000, PerDay: 100_000_000})
	}
	return demoKey.key
}

// adapterHTTP runs the adapter binary over streamable HTTP against s and
// returns its base URL; it is stopped when the test ends.
func adapterHTTP(t testing.TB, s *stacktest.Stack, extra map[string]string) string {
	t.Helper()
	return adapterHTTPOn(t, s, stacktest.Listen(t), extra)
}

// adapterHTTPOn is adapterHTTP serving ln (stacktest.Listen), for a test
// that must know the address before the start.
func adapterHTTPOn(t testing.TB, s *stacktest.Stack, ln *net.TCPListener, extra map[string]string) string {
	t.Helper()
	a := s.StartAdapterHTTPOn(t, ln, extra)
	adapterLogs.Store(a.Base, a)
	return a.Base
}

// adapterLogs holds each adapterHTTP process by base URL.
var adapterLogs sync.Map

// adapterDrain is what the adapter at base logged since the last drain.
func adapterDrain(base string) string {
	a, ok := adapterLogs.Load(base)
	if !ok {
		return ""
	}
	return a.(*stacktest.Adapter).DrainLogs()
}

// adapterLog is what the adapter at base has logged so far.
func adapterLog(base string) string {
	a, ok := adapterLogs.Load(base)
	if !ok {
		return ""
	}
	return a.(*stacktest.Adapter).Logs()
}
