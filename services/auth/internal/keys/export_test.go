package keys

// SwapCompare replaces the hash comparison for a test and returns a function
// that restores it.
func SwapCompare(f func(x, y []byte) int) (restore func()) {
	old := compareHashes
	compareHashes = f
	return func() { compareHashes = old }
}
