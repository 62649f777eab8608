package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// The stage means sum every series of a stage and divide the seconds
// spent between two readings by the observations between them; the vector
// paths count the answers between them.
func TestStageMeans(t *testing.T) {
	sum := 0.0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# HELP bmcis_search_stage_seconds x\nprocess_resident_memory_bytes 2048\n")
		fmt.Fprintf(w, "bmcis_search_stage_seconds_sum{caller=\"a\",stage=\"bm25\"} %g\n", sum)
		fmt.Fprintf(w, "bmcis_search_stage_seconds_count{caller=\"a\",stage=\"bm25\"} %g\n", sum*1000)
		fmt.Fprintf(w, "bmcis_search_stage_seconds_sum{caller=\"b\",stage=\"bm25\"} %g\n", sum)
		fmt.Fprintf(w, "bmcis_search_stage_seconds_count{caller=\"b\",stage=\"bm25\"} %g\n", sum*1000)
		fmt.Fprintf(w, "bmcis_search_stage_seconds_sum{stage=\"vector\"} %g\n", 3*sum)
		fmt.Fprintf(w, "bmcis_search_stage_seconds_count{stage=\"vector\"} %g\n", sum*1000)
		fmt.Fprintf(w, "bmcis_search_stage_seconds_bucket{stage=\"vector\",le=\"0.1\"} 7\n")
		fmt.Fprintf(w, "bmcis_search_vector_path_total{caller=\"a\",path=\"mirror\"} %g\n", 5*sum)
		fmt.Fprintf(w, "bmcis_search_vector_path_total{caller=\"b\",path=\"mirror\"} %g\n", sum)
		fmt.Fprintf(w, "bmcis_search_vector_path_total{path=\"pgvector\"} 4\n")
	}))
	defer srv.Close()
	ctx := context.Background()
	before, err := readService(ctx, srv.URL)
	require.NoError(t, err)
	sum = 2
	after, err := readService(ctx, srv.URL)
	require.NoError(t, err)
	require.Equal(t, "bm25 1.000, vector 3.000; vector sides answered by mirror 12", after.since(before), "pgvector answered none between")
	rss, err := metricValue(ctx, srv.URL, "process_resident_memory_bytes")
	require.NoError(t, err)
	require.Equal(t, 2048.0, rss)
	_, err = metricValue(ctx, srv.URL, "no_such_metric")
	require.ErrorContains(t, err, "no_such_metric not found")

	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "nope", http.StatusNotFound)
	}))
	defer bad.Close()
	_, err = readService(ctx, bad.URL)
	require.ErrorContains(t, err, "404")
}

// Percentiles are read at their nearest rank, from any order.
func TestPercentilesOf(t *testing.T) {
	ms := make([]float64, 0, 100)
	for i := 100; i >= 1; i-- {
		ms = append(ms, float64(i))
	}
	require.Equal(t, percentiles{51, 96, 100}, percentilesOf(ms))
	require.Equal(t, percentiles{}, percentilesOf(nil))
	require.Equal(t, percentiles{7, 7, 7}, percentilesOf([]float64{7}))
}
