package check_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/bmcis/knowledge/deploy/check"
)

// Every overlay ships the Grafana dashboard and the Prometheus alert rules
// of deploy/monitoring as ConfigMaps, byte for byte, the dashboard labelled
// for Grafana's sidecar.
func TestMonitoringConfigMaps(t *testing.T) {
	root := repoRoot(t)
	dashboard, err := os.ReadFile(filepath.Join(root, "deploy", "monitoring", "dashboard.json"))
	require.NoError(t, err)
	rules, err := os.ReadFile(filepath.Join(root, "deploy", "monitoring", "alerts.yaml"))
	require.NoError(t, err)
	for _, ov := range overlays {
		t.Run(ov, func(t *testing.T) {
			cms := map[string]*corev1.ConfigMap{}
			for _, cm := range check.Of[*corev1.ConfigMap](rendered(t, ov)) {
				cms[cm.Name] = cm
			}
			require.Contains(t, cms, "bmcis-grafana-dashboard")
			require.Contains(t, cms, "bmcis-prometheus-rules")
			require.Equal(t, "1", cms["bmcis-grafana-dashboard"].Labels["grafana_dashboard"])
			require.Equal(t, string(dashboard), cms["bmcis-grafana-dashboard"].Data["bmcis-knowledge.json"])
			require.Equal(t, string(rules), cms["bmcis-prometheus-rules"].Data["bmcis-alerts.yaml"])
		})
	}
}
