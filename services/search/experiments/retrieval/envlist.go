package retrieval

import (
	"fmt"
	"os"
	"strings"
)

// EnvList reads a comma-separated list of numbers from the environment
// variable name, for the experiments' settings (seeds, shares); def when
// it is unset or empty.
func EnvList[T uint64 | float64](name string, def []T) ([]T, error) {
	env := os.Getenv(name)
	if env == "" {
		return def, nil
	}
	var out []T
	for _, f := range strings.Split(env, ",") {
		var v T
		if _, err := fmt.Sscan(strings.TrimSpace(f), &v); err != nil {
			return nil, fmt.Errorf("%s: %q is not a number: %w", name, f, err)
		}
		out = append(out, v)
	}
	return out, nil
}
