// Package ctxtest holds contexts for tests of code that checks for
// cancellation as it works.
package ctxtest

import "context"

// CancelAfter is a context that reports itself cancelled from its
// (CancelAt+1)-th Err check on, counting the checks in Checks: a test learns
// both that the work stopped and after how many checks, without a clock.
// Done never closes: the code under test must poll Err.
type CancelAfter struct {
	context.Context
	CancelAt, Checks int
}

// Err counts the check and reports context.Canceled past CancelAt checks.
func (c *CancelAfter) Err() error {
	c.Checks++
	if c.Checks > c.CancelAt {
		return context.Canceled
	}
	return nil
}
