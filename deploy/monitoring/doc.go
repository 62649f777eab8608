// Package monitoring holds the operators' view of BMCIS Knowledge: the
// Prometheus alert rules (alerts.yaml, with promtool unit tests) and the
// Grafana dashboard (dashboard.json), described in docs/OPERATIONS.md.
//
// Its test checks them with promtool and checks that every metric they
// name is exposed by the running services.
package monitoring
