// Package upgrade holds the rolling upgrade test: the previous release's
// binaries (the commit in deploy/upgrade/PREVIOUS_RELEASE) and this
// checkout's run side by side on one private PostgreSQL and one Redis under
// a steady read and write load, and each service is replaced in the order
// docs/UPGRADE.md gives while the test checks what clients see, that the
// limiter keeps counting, that models and snapshots work across the two
// releases, and that every acknowledged write is kept.
//
// It runs with `make test-upgrade`, which builds both releases with
// deploy/upgrade/build.sh and names their directories in
// BMCIS_UPGRADE_PREVIOUS_BIN and BMCIS_UPGRADE_CURRENT_BIN; without them the
// test skips.
package upgrade
