package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

// labCorpus is n documents in a vocabulary corpus() never uses.
func labCorpus(n int) []*searchv1.Document {
	topics := []string{
		"enzyme protein kinase phosphorylation substrate receptor signalling pathway mutation",
		"neuron synapse cortex dopamine plasticity hippocampus memory firing axon",
		"tumour metastasis chemotherapy oncogene apoptosis biopsy carcinoma lymph remission",
		"vaccine antibody antigen immunity pathogen infection cytokine macrophage adjuvant",
	}
	var docs []*searchv1.Document
	for i := 0; i < n; i++ {
		w := topics[i%len(topics)]
		body := fmt.Sprintf("# Study %d\n\n## Findings\n\nTrial %d of cohort%d measured %s %s.\n", i, i, i%5, w, w)
		docs = append(docs, md(fmt.Sprintf("lab/study-%03d.md", i), "lab", fmt.Sprintf("Study %d", i), body))
	}
	return docs
}

// TestOutgrownModelRetrainsByItself: a large ingest in a new vocabulary
// after a small first corpus retrains the builtin model in the background,
// without any command, while searches keep answering.
func TestOutgrownModelRetrainsByItself(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	r := startReplica(t, pool, cfg)
	ctx := context.Background()

	first := mustIngest(t, r.client, corpus(8)...)
	st, err := r.client.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
	require.NoError(t, err)
	firstModel := st.EmbedderModel
	require.EqualValues(t, first.ChunksWritten, st.ModelTrainedChunks, "trained on every stored chunk")
	require.InDelta(t, 1, st.ModelTermCoverage, 1e-9)
	require.False(t, st.RetrainPending)
	require.NotNil(t, st.ModelTrainedAt)

	// Five times as many chunks, in words the model has never seen.
	mustIngest(t, r.client, labCorpus(40)...)
	var last *searchv1.GetIndexStatusResponse
	require.Eventually(t, func() bool {
		// Searches keep working while the model is replaced.
		out := search(t, r.client, &searchv1.SearchRequest{Query: "dopamine synapse plasticity", Limit: 3})
		require.NotEmpty(t, out.Results)
		last, err = r.client.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
		require.NoError(t, err)
		return last.EmbedderModel != firstModel && !last.RetrainPending
	}, 60*time.Second, 100*time.Millisecond, "the builtin model was never retrained")
	require.Equal(t, last.Chunks, last.ModelTrainedChunks, "the new model saw the whole corpus")
	require.Greater(t, last.ModelTermCoverage, 0.99)
	require.Empty(t, last.RetrainReason)

	// Every chunk carries a vector of the new model, and vector search
	// finds the new vocabulary.
	var stale int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM chunks c JOIN embedding_models m ON m.active
		WHERE c.embedding IS NULL OR c.embedding_model_id <> m.id`).Scan(&stale))
	require.Zero(t, stale)
	out := search(t, r.client, &searchv1.SearchRequest{Query: "dopamine synapse plasticity", Limit: 3,
		Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR})
	require.NotEmpty(t, out.Results)
	require.Equal(t, "lab", out.Results[0].Chunk.SourceCategory)
}

// TestRetrainRuleIsASetting: with the rule turned off, the same ingest
// leaves the first model in place and the status says a retrain would be
// due (coverage low) without running one.
func TestRetrainRuleIsASetting(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	cfg.Embedding.RetrainGrowth, cfg.Embedding.RetrainCoverage = 0, 0
	r := startReplica(t, pool, cfg)
	ctx := context.Background()
	mustIngest(t, r.client, corpus(8)...)
	st, err := r.client.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
	require.NoError(t, err)
	mustIngest(t, r.client, labCorpus(40)...)
	time.Sleep(500 * time.Millisecond)
	after, err := r.client.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
	require.NoError(t, err)
	require.Equal(t, st.EmbedderModel, after.EmbedderModel)
	require.False(t, after.RetrainPending)
	require.Less(t, after.ModelTermCoverage, 0.5, "the first model knows few of the new terms")
}

// manualCorpus is n long documents (about 30 chunks each), each in its own
// made-up vocabulary repeated in every chunk.
func manualCorpus(prefix string, n int) []*searchv1.Document {
	var docs []*searchv1.Document
	for d := 0; d < n; d++ {
		var words []string
		for k := 0; k < 24; k++ {
			words = append(words, fmt.Sprintf("%s%c%c%cum", prefix, 'b'+d%20, 'b'+k%20, 'b'+k/20))
		}
		var b strings.Builder
		fmt.Fprintf(&b, "# Manual %s %d\n\n", prefix, d)
		for p := 0; p < 160; p++ {
			fmt.Fprintf(&b, "Paragraph %d. %s.\n\n", p, strings.Join(words, " "))
		}
		docs = append(docs, md(fmt.Sprintf("manuals/%s-%02d.md", prefix, d), "manuals", fmt.Sprintf("Manual %s %d", prefix, d), b.String()))
	}
	return docs
}

// TestCappedSampleSatisfiesTheRetrainRule: a model trained on a capped
// sample of long documents knows their words, so the retrain rule does
// not ask for a retrain at every new chunk count (a sample of whole blocks
// of chunks knew two or three of eight manuals, 40 % of the terms, and
// asked again after every stream); a new topic still retrains it, once.
func TestCappedSampleSatisfiesTheRetrainRule(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	cfg.Embedding.Builtin.MaxTrainDocs = 64 // of about 250 chunks
	r := startReplica(t, pool, cfg)
	ctx := context.Background()
	trainings := func(result string) float64 {
		return counter(t, r.reg, "bmcis_search_embedder_trainings_total", "result", result)
	}
	status := func() *searchv1.GetIndexStatusResponse {
		st, err := r.client.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
		require.NoError(t, err)
		return st
	}
	note := 0
	ingestNote := func() {
		note++
		mustIngest(t, r.client, md(fmt.Sprintf("manuals/note-%d.md", note), "manuals", "Note", "# Note\n\nA short note.\n"))
	}

	first := mustIngest(t, r.client, manualCorpus("z", 8)...)
	require.Greater(t, first.ChunksWritten, int32(200), "long documents (about 30 chunks each)")
	st := status()
	require.NotEmpty(t, st.EmbedderModel, "trained at the end of the stream")
	require.EqualValues(t, 64, st.ModelTrainedChunks)
	require.GreaterOrEqual(t, st.ModelTermCoverage, 0.8, "the sample holds chunks of every manual")
	require.False(t, st.RetrainPending, st.RetrainReason)
	ingestNote()
	st = status()
	require.False(t, st.RetrainPending, st.RetrainReason)
	firstModel := st.EmbedderModel

	// Two hundred studies in four new topics: the model is retrained, once.
	mustIngest(t, r.client, labCorpus(200)...)
	require.Eventually(t, func() bool {
		st = status()
		return st.EmbedderModel != firstModel && !st.RetrainPending
	}, 60*time.Second, 100*time.Millisecond, "the model was never retrained")
	require.GreaterOrEqual(t, st.ModelTermCoverage, 0.8)
	ingestNote()
	st = status()
	require.False(t, st.RetrainPending, st.RetrainReason)
	require.EqualValues(t, 2, trainings("new"))
	require.Zero(t, trainings("unchanged"), "no retrain trained the active model again")
}
