package stacktest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

var shared struct {
	sync.Mutex
	installed bool
	stacks    map[string]*sharedStack
	order     []*sharedStack
}

type sharedStack struct {
	once  sync.Once
	proc  *procTB
	stack *Stack
	err   error
}

// Main runs the package's tests, then stops the shared stacks, drops their
// databases and removes the built binaries. Call it from TestMain:
//
//	func TestMain(m *testing.M) { stacktest.Main(m) }
func Main(m *testing.M) {
	os.Exit(MainCode(m))
}

// MainCode is Main for a TestMain that has more to do: it returns the exit
// code instead of exiting.
func MainCode(m *testing.M) int {
	shared.Lock()
	shared.installed = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	order := shared.order
	shared.order, shared.stacks = nil, nil
	shared.Unlock()
	for i := len(order) - 1; i >= 0; i-- {
		ss := order[i]
		ss.proc.runCleanups()
		// A failed start was already reported to the tests; a failure
		// while stopping is reported here.
		if ss.err == nil && ss.proc.Failed() {
			fmt.Fprintf(os.Stderr, "stacktest: stopping shared stack %s:\n%s\n", ss.proc.name, ss.proc.output())
			if code == 0 {
				code = 1
			}
		}
	}
	build.Lock()
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
		build.dir, build.built = "", nil
	}
	build.Unlock()
	return code
}

// Shared returns the stack named key, started with opts on first use and
// then prepared by setup (ingest, import, keys); later calls return the same
// stack. It stays up until Main ends. If starting or setup failed, every
// test asking for it fails with the reason.
func Shared(t testing.TB, key string, opts Options, setup func(t testing.TB, s *Stack)) *Stack {
	t.Helper()
	shared.Lock()
	if !shared.installed {
		shared.Unlock()
		t.Fatal("stacktest.Shared needs stacktest.Main: add `func TestMain(m *testing.M) { stacktest.Main(m) }` to the package")
	}
	if shared.stacks == nil {
		shared.stacks = map[string]*sharedStack{}
	}
	ss := shared.stacks[key]
	if ss == nil {
		ss = &sharedStack{proc: &procTB{name: key}}
		shared.stacks[key] = ss
		shared.order = append(shared.order, ss)
	}
	shared.Unlock()
	ss.once.Do(func() {
		ss.err = ss.proc.run(func(tb testing.TB) {
			s, err := start(tb, opts)
			if err != nil {
				tb.Fatal(err)
			}
			ss.stack = s
			if setup != nil {
				setup(tb, s)
			}
		})
	})
	if ss.err != nil {
		t.Fatalf("shared stack %q: %v", key, ss.err)
	}
	return ss.stack
}

// procTB is the testing.TB of shared stacks: they outlive any one test, so
// their clean-ups run when Main ends. Only the methods stacktest,
// platform/testdb and testify's require call are implemented; a failure
// aborts the set-up it happens in (run recovers it) and is reported to every
// test that asks for the stack.
type procTB struct {
	testing.TB // nil: any other method panics

	name     string
	mu       sync.Mutex
	cleanups []func()
	lines    []string
	failed   bool
}

type procFailure struct{ msg string }

// run calls f and turns a fatal failure inside it into an error.
func (p *procTB) run(f func(testing.TB)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if pf, ok := r.(procFailure); ok {
				err = fmt.Errorf("%s", pf.msg)
				return
			}
			panic(r)
		}
	}()
	f(p)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed {
		return fmt.Errorf("%s", strings.Join(p.lines, "\n"))
	}
	return nil
}

func (p *procTB) Helper()      {}
func (p *procTB) Name() string { return p.name }

func (p *procTB) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

func (p *procTB) runCleanups() {
	p.mu.Lock()
	fs := p.cleanups
	p.cleanups = nil
	p.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

func (p *procTB) Context() context.Context { return context.Background() }

func (p *procTB) TempDir() string {
	d, err := os.MkdirTemp("", "bmcis-stacktest-")
	if err != nil {
		p.Fatal(err)
	}
	p.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func (p *procTB) Log(args ...any) { p.add(fmt.Sprintln(args...)) }

func (p *procTB) Logf(format string, args ...any) { p.add(fmt.Sprintf(format, args...)) }

func (p *procTB) add(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, strings.TrimRight(s, "\n"))
}

func (p *procTB) Error(args ...any) { p.Log(args...); p.Fail() }

func (p *procTB) Errorf(format string, args ...any) { p.Logf(format, args...); p.Fail() }

func (p *procTB) Fail() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed = true
}

func (p *procTB) Failed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

func (p *procTB) FailNow() {
	p.Fail()
	panic(procFailure{msg: p.output()})
}

func (p *procTB) Fatal(args ...any) { p.Log(args...); p.FailNow() }

func (p *procTB) Fatalf(format string, args ...any) { p.Logf(format, args...); p.FailNow() }

func (p *procTB) Skip(args ...any) { p.Fatal(append([]any{"skip in shared set-up:"}, args...)...) }

func (p *procTB) Skipf(format string, args ...any) {
	p.Fatalf("skip in shared set-up: "+format, args...)
}

func (p *procTB) SkipNow() { p.Fatal("skip in shared set-up") }

func (p *procTB) Skipped() bool { return false }

func (p *procTB) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}
