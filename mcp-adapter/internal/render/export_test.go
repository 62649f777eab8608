package render

// FixedParts is how many spans of the JSON block k counts once (for tests).
func (k *Kept) FixedParts() int { return len(k.draft.fixed) }
