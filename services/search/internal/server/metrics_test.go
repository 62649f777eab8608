package server_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
)

// gauges returns the value of each series of a gauge family, keyed by the
// value of label ("" for a family without it); absent: no series at all.
func gauges(t *testing.T, reg *prometheus.Registry, name, label string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		require.Equal(t, dto.MetricType_GAUGE, mf.GetType(), name)
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					key = l.GetValue()
				}
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

// Sync outcomes are counted by result, and each source's last completed
// sync (when, and how many documents failed) is read from the sources table
// at scrape time, so any replica reports syncs another one received.
func TestSyncMetrics(t *testing.T) {
	r, pool := start(t)
	ctx := context.Background()
	require.Empty(t, gauges(t, r.reg, "bmcis_search_source_last_sync_timestamp_seconds", "source"))

	_, err := sendAll(t, r.client, syncHeader("docs"), doc(md("a.md", "", "A", "# A\n\nThe dugong page.")))
	require.NoError(t, err)
	require.EqualValues(t, 1, counter(t, r.reg, "bmcis_search_source_syncs_total", "result", "completed"))

	resp, err := sendAll(t, r.client, syncHeader("wiki"), doc(md("b.md", "", "B", "   ")))
	require.NoError(t, err)
	require.EqualValues(t, 1, resp.DocumentsFailed)
	require.EqualValues(t, 1, counter(t, r.reg, "bmcis_search_source_syncs_total", "result", "partial"))

	// A second header ends the stream in an error: nothing is recorded.
	_, err = sendAll(t, r.client, syncHeader("notes"), syncHeader("notes"))
	requireCode(t, err, codes.InvalidArgument)
	require.EqualValues(t, 1, counter(t, r.reg, "bmcis_search_source_syncs_total", "result", "failed"))

	var docsAt, wikiAt float64
	require.NoError(t, pool.QueryRow(ctx, `SELECT extract(epoch FROM last_sync_at)::float8 FROM sources WHERE name = 'docs'`).Scan(&docsAt))
	require.NoError(t, pool.QueryRow(ctx, `SELECT extract(epoch FROM last_sync_at)::float8 FROM sources WHERE name = 'wiki'`).Scan(&wikiAt))
	last := gauges(t, r.reg, "bmcis_search_source_last_sync_timestamp_seconds", "source")
	require.InDelta(t, docsAt, last["docs"], 0.001)
	require.InDelta(t, wikiAt, last["wiki"], 0.001)
	require.NotContains(t, last, "notes", "a sync that never completed has no completion time")
	failed := gauges(t, r.reg, "bmcis_search_source_last_sync_failed_documents", "source")
	require.Equal(t, map[string]float64{"docs": 0, "wiki": 1, "notes": 0}, failed)
}

// The active model's registration time is exported for its age, and a
// replica without a model exports none (an alert on age must not fire on an
// empty service).
func TestModelMetrics(t *testing.T) {
	r, pool := start(t)
	require.Empty(t, gauges(t, r.reg, "bmcis_search_embedder_model_created_timestamp_seconds", "provider"))
	require.Equal(t, map[string]float64{"": 0}, gauges(t, r.reg, "bmcis_search_embedder_model_unusable", ""))

	mustIngest(t, r.client, corpus(12)...)
	var provider string
	var createdAt float64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT provider, extract(epoch FROM created_at)::float8 FROM embedding_models WHERE active`).Scan(&provider, &createdAt))
	// The ingestion that trained the model waited for this replica to load it.
	created := gauges(t, r.reg, "bmcis_search_embedder_model_created_timestamp_seconds", "provider")
	require.Len(t, created, 1)
	// The gauge is in milliseconds and the replica's TrainedAt need not be
	// the row's created_at to the microsecond; the alert reads it in days.
	require.InDelta(t, createdAt, created[provider], 1)
	require.Equal(t, map[string]float64{"": 0}, gauges(t, r.reg, "bmcis_search_embedder_model_unusable", ""))
}
