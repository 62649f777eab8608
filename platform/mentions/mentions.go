// Package mentions ties the vendor graph to the documents: it finds which
// entities (by name or alias) a chunk mentions, and keeps the
// entity_mentions table (entity, chunk, count) in step with both sides.
//
// Matching: names and text are normalized alike (letters and digits kept
// and lowercased, everything else a word break); an Aho-Corasick automaton
// (github.com/coregx/ahocorasick, leftmost-longest) finds names at word
// boundaries, the longest winning where names overlap ("Acme Cloud
// Platform" over "Acme"). Ambiguous names and names borne by many entities
// follow the rules of Ambiguous and MaxBearers.
//
// Keeping links in step (see Linker):
//   - a document write links its new chunks in the same transaction; its
//     old chunks' links go with the chunks (ON DELETE CASCADE), so do a
//     deleted document's;
//   - an import that changed entities re-links, in its own transaction,
//     only the chunks that hold every word of those entities' names (found
//     through the words index, chunk_terms, which the re-link itself keeps:
//     it first adds the chunks written since the last one) and the chunks
//     they were linked to.
//
// Both sides serialize on an advisory lock: writers of chunks take it
// shared, a re-link takes it exclusive, so a chunk is never linked with a
// matcher older than the graph it commits against.
package mentions
