package embedding

import (
	"context"
	"fmt"
	"time"

	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// SweepOptions say what a sweep may do.
type SweepOptions struct {
	// Wait for the embedding lock instead of skipping when it is taken.
	Wait bool
	// Train a builtin model when none is active.
	Train bool
	// Bulk allows dropping and rebuilding the HNSW index for big writes.
	Bulk bool
	// Reindex trains (builtin) or re-registers (remote) a model, re-embeds
	// every chunk with it and activates it; it also resizes the column when
	// BMCIS_EMBEDDING_DIMENSIONS changed.
	Reindex bool
	// RetrainOf, with Reindex, retrains only while that model row is still
	// the active one (another replica may have retrained meanwhile), and
	// re-embeds nothing when the retrain yields that model again
	// (SweepReport.Unchanged).
	RetrainOf int64
}

// SweepReport says what a sweep did.
type SweepReport struct {
	Skipped      bool   // the lock was taken elsewhere, or this replica cannot load the active model
	Unchanged    bool   // a retrain trained the model already active: nothing re-embedded
	Trained      bool   // a builtin model was trained
	Model        string // model id in use after the sweep ("" if none)
	Embedded     int64  // chunks given a vector
	Queued       int64  // of which queued for the HNSW index (MergeQueued)
	Rebuilt      bool   // the HNSW index was rebuilt
	Resized      bool   // the column was resized
	TrainTime    time.Duration
	EmbedTime    time.Duration
	WriteTime    time.Duration
	IndexTime    time.Duration
	TrainedOn    int
	TotalChunks  int64
	NotTrainedOn string // why no model could be trained, if so
}

// stageBatch is how many chunks are embedded and staged at a time.
const stageBatch = 2000

// Sweep gives every chunk a vector from the active model, training or
// registering one first when allowed (see the package comment).
func (m *Manager) Sweep(ctx context.Context, opt SweepOptions) (SweepReport, error) {
	var rep SweepReport
	if !opt.Reindex && m.Unusable() != "" {
		// This replica cannot load the active model (Sync logged why):
		// replicas that can embed the pending chunks.
		rep.Skipped = true
		return rep, nil
	}
	sess, err := m.st.LockEmbedding(ctx, opt.Wait)
	if err != nil {
		return rep, err
	}
	if sess == nil {
		rep.Skipped = true
		return rep, nil
	}
	defer sess.Close()

	colDims, err := m.st.EmbeddingColumnDims(ctx)
	if err != nil {
		return rep, err
	}
	if colDims != m.cfg.Dims {
		if !opt.Reindex {
			return rep, m.CheckCompatible(ctx)
		}
		if err := sess.ResizeEmbeddings(ctx, m.cfg.Dims); err != nil {
			return rep, err
		}
		rep.Resized = true
		m.set(nil, nil)
	}
	activeRow, err := sess.ActiveModel(ctx)
	if err != nil {
		return rep, err
	}
	if opt.RetrainOf != 0 && (activeRow == nil || activeRow.ID != opt.RetrainOf) {
		rep.Skipped = true
		return rep, nil
	}
	var target *Active
	all := false
	switch {
	case opt.Reindex:
		if target, err = m.newModel(ctx, sess, &rep); err != nil || target == nil {
			return rep, err
		}
		if opt.RetrainOf != 0 && target.Row == activeRow.ID {
			// The same sample trains the same model (embed.Sample): every
			// stored vector is already this model's.
			rep.Unchanged, rep.Model = true, target.ModelID
			return rep, nil
		}
		all = true
	case activeRow == nil:
		if m.cfg.Provider == ProviderBuiltin && !opt.Train {
			return rep, nil
		}
		if target, err = m.newModel(ctx, sess, &rep); err != nil || target == nil {
			return rep, err
		}
	default:
		cur := m.Current()
		if cur != nil && cur.Row == activeRow.ID {
			target = cur
			break
		}
		// The session's read leaves the parameters out: read them only now.
		row, err := m.modelRow(ctx, activeRow.ID)
		if err != nil {
			return rep, err
		}
		if target, err = m.activate(row); err != nil {
			return rep, err
		}
	}
	rep.Model = target.ModelID

	for pass := 0; pass < 3; pass++ {
		pending, total, err := sess.Pending(ctx, target.Row, all)
		if err != nil {
			return rep, err
		}
		rep.TotalChunks = total
		isActive := activeRow != nil && activeRow.ID == target.Row && !all
		if pending == 0 && isActive {
			break
		}
		bulk := opt.Bulk && pending >= int64(m.cfg.BulkMin) && pending*100 >= total*int64(m.cfg.BulkPercent)
		if isActive && !bulk {
			// Incremental: the model is already live, so vectors are queued
			// (searchable at once) and merged into the HNSW index later.
			n, err := m.enqueue(ctx, sess, target, &rep)
			if err != nil {
				return rep, err
			}
			rep.Embedded += n
			rep.Queued += n
			// No second pass to count what other streams wrote meanwhile
			// (a scan of every chunk): each stream's own sweep embeds its
			// chunks, and the periodic sweep catches anything left.
			break
		}
		if err := sess.StartStage(ctx, m.cfg.Dims); err != nil {
			return rep, err
		}
		var after int64
		for {
			batch, err := sess.PendingTexts(ctx, target.Row, all, after, stageBatch)
			if err != nil {
				return rep, err
			}
			if len(batch) == 0 {
				break
			}
			after = batch[len(batch)-1].ID
			ids, vecs, err := m.embedBatch(ctx, target, batch, &rep)
			if err != nil {
				return rep, err
			}
			t0 := time.Now()
			if err := sess.Stage(ctx, ids, vecs); err != nil {
				return rep, err
			}
			rep.WriteTime += time.Since(t0)
		}
		t0 := time.Now()
		if bulk {
			if err := sess.DropVectorIndex(ctx); err != nil {
				return rep, err
			}
		}
		n, err := sess.Apply(ctx, target.Row)
		if err != nil {
			return rep, err
		}
		rep.WriteTime += time.Since(t0)
		rep.Embedded += n
		activeRow = &store.Model{ID: target.Row, ModelID: target.ModelID, Provider: target.Provider, Dimensions: target.Dims, Active: true}
		m.set(target, nil)
		all = false
		t0 = time.Now()
		built, err := sess.EnsureVectorIndex(ctx, m.cfg.MaintenanceMem)
		if err != nil {
			return rep, err
		}
		if built {
			rep.Rebuilt = true
			rep.IndexTime += time.Since(t0)
		}
	}
	if built, err := sess.EnsureVectorIndex(ctx, m.cfg.MaintenanceMem); err != nil {
		return rep, err
	} else if built {
		rep.Rebuilt = true
	}
	m.set(target, nil)
	return rep, nil
}

func (m *Manager) embedBatch(ctx context.Context, target *Active, batch []store.ChunkText, rep *SweepReport) ([]int64, [][]float32, error) {
	ids := make([]int64, len(batch))
	texts := make([]string, len(batch))
	for i, c := range batch {
		ids[i], texts[i] = c.ID, c.Text
	}
	t0 := time.Now()
	vecs, err := target.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, nil, fmt.Errorf("embed chunks: %w", err)
	}
	rep.EmbedTime += time.Since(t0)
	return ids, vecs, nil
}

// enqueue embeds the chunks still missing a vector of the active model
// and queues the vectors (store.EmbedSession.Enqueue): searchable when it
// returns, merged into the HNSW index in the background (MergeQueued).
func (m *Manager) enqueue(ctx context.Context, sess *store.EmbedSession, target *Active, rep *SweepReport) (int64, error) {
	if err := sess.StartStage(ctx, m.cfg.Dims); err != nil {
		return 0, err
	}
	var after int64
	for {
		batch, err := sess.PendingTexts(ctx, target.Row, false, after, stageBatch)
		if err != nil {
			return 0, err
		}
		if len(batch) == 0 {
			break
		}
		after = batch[len(batch)-1].ID
		ids, vecs, err := m.embedBatch(ctx, target, batch, rep)
		if err != nil {
			return 0, err
		}
		t0 := time.Now()
		if err := sess.Stage(ctx, ids, vecs); err != nil {
			return 0, err
		}
		rep.WriteTime += time.Since(t0)
	}
	t0 := time.Now()
	n, err := sess.Enqueue(ctx, target.Row)
	rep.WriteTime += time.Since(t0)
	return n, err
}

// newModel trains a builtin model on every stored chunk, or registers the
// configured remote model; the row is not active until Apply.
func (m *Manager) newModel(ctx context.Context, sess *store.EmbedSession, rep *SweepReport) (*Active, error) {
	if m.cfg.Provider != ProviderBuiltin {
		id, err := sess.RegisterModel(ctx, store.NewModel{ModelID: m.remote.ModelID(), Provider: m.cfg.Provider, Dimensions: m.cfg.Dims})
		if err != nil {
			return nil, err
		}
		return &Active{Row: id, ModelID: m.remote.ModelID(), Provider: m.cfg.Provider, Dims: m.cfg.Dims, Embedder: m.remote}, nil
	}
	t0 := time.Now()
	_, total, err := sess.Pending(ctx, 0, true)
	if err != nil {
		return nil, err
	}
	if total < int64(m.cfg.MinTrainChunks) {
		rep.NotTrainedOn = fmt.Sprintf("%d chunks stored, at least %d needed", total, m.cfg.MinTrainChunks)
		return nil, nil
	}
	// The sample and its order depend on the documents, not on the order
	// ingestion stored their chunks in (embed.Sample); streaming keeps
	// memory at the sample's size.
	limit := m.cfg.Builtin.MaxTrainDocs
	if limit <= 0 {
		limit = embed.DefaultBuiltinConfig().MaxTrainDocs
	}
	sample := embed.NewSample(limit)
	if err := sess.AllTexts(ctx, sample.Add); err != nil {
		return nil, err
	}
	texts := sample.Texts()
	b, err := embed.TrainBuiltin(ctx, m.an, texts, m.cfg.Builtin)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		rep.NotTrainedOn = err.Error()
		m.log.Warn("builtin embedder not trained; vector search stays off until it can be", "reason", err.Error())
		return nil, nil
	}
	params, err := b.MarshalBinary()
	if err != nil {
		return nil, err
	}
	id, err := sess.RegisterModel(ctx, store.NewModel{ModelID: b.ModelID(), Provider: ProviderBuiltin, Dimensions: m.cfg.Dims, Params: params})
	if err != nil {
		return nil, err
	}
	rep.Trained = true
	rep.TrainedOn = len(texts)
	rep.TrainTime = time.Since(t0)
	subN, subRows := b.Subwords()
	m.log.Info("builtin embedder trained", "model", b.ModelID(), "chunks", len(texts), "vocabulary", b.VocabSize(),
		"subword_n", subN, "subword_rows", subRows, "components", b.Dimensions(), "contrastive_epochs", m.cfg.Builtin.Contrastive.Epochs, "seconds", rep.TrainTime.Seconds())
	return &Active{Row: id, ModelID: b.ModelID(), Provider: ProviderBuiltin, Dims: m.cfg.Dims, Embedder: pad(b, m.cfg.Dims),
		Builtin: b, TrainedAt: time.Now()}, nil
}
