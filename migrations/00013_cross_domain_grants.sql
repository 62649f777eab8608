-- The reads and writes that still cross a domain boundary, each granted by
-- name so the ownership test (migrations/roles_test.go) lists exactly
-- these and refuses everything else. Each is to move behind a buf
-- contract (docs/DATA-OWNERSHIP.md, "Crossings"):
--   vendorgraph reads search's chunks and documents for a vendor's evidence,
--   and re-links search's mentions after an import;
--   search reads vendorgraph's names to link mentions and name vendors.

-- +goose Up
GRANT USAGE ON SCHEMA search TO bmcis_vendorgraph;
GRANT SELECT ON search.documents, search.chunks TO bmcis_vendorgraph;
GRANT SELECT, INSERT, DELETE ON search.entity_mentions TO bmcis_vendorgraph;
GRANT SELECT, INSERT ON search.chunk_terms TO bmcis_vendorgraph;
GRANT SELECT, UPDATE ON search.mention_state TO bmcis_vendorgraph;
GRANT USAGE ON SEQUENCE search.mention_graph_version TO bmcis_vendorgraph;

GRANT USAGE ON SCHEMA vendorgraph TO bmcis_search;
GRANT SELECT ON vendorgraph.entities, vendorgraph.vendor_aliases TO bmcis_search;

-- +goose Down
REVOKE ALL ON vendorgraph.entities, vendorgraph.vendor_aliases FROM bmcis_search;
REVOKE USAGE ON SCHEMA vendorgraph FROM bmcis_search;
REVOKE ALL ON SEQUENCE search.mention_graph_version FROM bmcis_vendorgraph;
REVOKE ALL ON search.documents, search.chunks, search.entity_mentions, search.chunk_terms, search.mention_state FROM bmcis_vendorgraph;
REVOKE USAGE ON SCHEMA search FROM bmcis_vendorgraph;
