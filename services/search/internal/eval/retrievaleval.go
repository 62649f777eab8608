// Package eval is the harness of the retrieval experiments (the opt-in
// sweeps among its tests) over BEIR data sets; the loader and the metrics
// are platform/retrievaleval's.
package eval

import "github.com/bmcis/knowledge/platform/retrievaleval"

// The data set loader and the metrics live in platform/retrievaleval, where
// bmcisctl eval (a module of its own) reads them too; these names keep the
// harness and the sweeps of this package reading as before.
type (
	Document = retrievaleval.Document
	Query    = retrievaleval.Query
	Dataset  = retrievaleval.Dataset
	Qrels    = retrievaleval.Qrels
	Run      = retrievaleval.Run
	Metrics  = retrievaleval.Metrics
)

var (
	LoadBEIR     = retrievaleval.LoadBEIR
	ReadQrels    = retrievaleval.ReadQrels
	Dedupe       = retrievaleval.Dedupe
	NDCG         = retrievaleval.NDCG
	Recall       = retrievaleval.Recall
	Evaluate     = retrievaleval.Evaluate
	PairedNDCG10 = retrievaleval.PairedNDCG10
)
