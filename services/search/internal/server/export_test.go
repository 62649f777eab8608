package server

// RankingSettings is c's ranking fingerprint (IndexVersion.settings).
func RankingSettings(c Config) string { return c.rankingSettings() }
