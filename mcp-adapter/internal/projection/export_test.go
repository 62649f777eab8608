package projection

import (
	"slices"
	"testing"
)

// AddForTest adds a mode and fields to the table and the registry for the
// duration of t: what adding them in the source does.
func AddForTest(t testing.TB, s Spec, fields ...Field) {
	t.Helper()
	oldTable, oldRegistry := table, registry
	table = append(slices.Clone(table), s)
	registry = append(slices.Clone(registry), fields...)
	t.Cleanup(func() { table, registry = oldTable, oldRegistry })
}
