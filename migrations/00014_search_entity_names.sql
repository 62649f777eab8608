-- No service reaches into another's schema any more: data crosses over
-- gRPC (docs/DATA-OWNERSHIP.md). Search keeps its own copy of the entity
-- names it links mentions with and names vendors by (search.entity_names),
-- fed by vendorgraph (SearchService.SyncEntityNames, inside an import), and
-- re-links itself; vendorgraph asks search for a vendor's evidence
-- (SearchService.GetEntityEvidence). So every grant of 00013 is revoked,
-- and a mention's entity is one of search's names (the foreign key moves
-- from vendorgraph.entities to search.entity_names). The names are copied
-- once here from the graph.

-- +goose Up
CREATE TABLE search.entity_names (
    entity_id   uuid    PRIMARY KEY,
    name        text    NOT NULL,
    entity_type text    NOT NULL,
    is_vendor   boolean NOT NULL,
    aliases     text[]  NOT NULL DEFAULT '{}'
);
ALTER TABLE search.entity_names OWNER TO bmcis_search;
GRANT SELECT, INSERT, UPDATE, DELETE ON search.entity_names TO bmcis_search;

INSERT INTO search.entity_names (entity_id, name, entity_type, is_vendor, aliases)
SELECT e.id, e.name, e.entity_type, e.is_vendor,
       coalesce((SELECT array_agg(a.alias ORDER BY a.alias) FROM vendorgraph.vendor_aliases a WHERE a.entity_id = e.id), '{}')
FROM vendorgraph.entities e;

ALTER TABLE search.entity_mentions DROP CONSTRAINT entity_mentions_entity_id_fkey;
ALTER TABLE search.entity_mentions ADD CONSTRAINT entity_mentions_entity_id_fkey
    FOREIGN KEY (entity_id) REFERENCES search.entity_names (entity_id) ON DELETE CASCADE;

REVOKE ALL ON vendorgraph.entities, vendorgraph.vendor_aliases FROM bmcis_search;
REVOKE USAGE ON SCHEMA vendorgraph FROM bmcis_search;
REVOKE ALL ON SEQUENCE search.mention_graph_version FROM bmcis_vendorgraph;
REVOKE ALL ON search.documents, search.chunks, search.entity_mentions, search.chunk_terms, search.mention_state FROM bmcis_vendorgraph;
REVOKE USAGE ON SCHEMA search FROM bmcis_vendorgraph;

-- +goose Down
-- 00013's grants again.
GRANT USAGE ON SCHEMA search TO bmcis_vendorgraph;
GRANT SELECT ON search.documents, search.chunks TO bmcis_vendorgraph;
GRANT SELECT, INSERT, DELETE ON search.entity_mentions TO bmcis_vendorgraph;
GRANT SELECT, INSERT ON search.chunk_terms TO bmcis_vendorgraph;
GRANT SELECT, UPDATE ON search.mention_state TO bmcis_vendorgraph;
GRANT USAGE ON SEQUENCE search.mention_graph_version TO bmcis_vendorgraph;
GRANT USAGE ON SCHEMA vendorgraph TO bmcis_search;
GRANT SELECT ON vendorgraph.entities, vendorgraph.vendor_aliases TO bmcis_search;
DELETE FROM search.entity_mentions m WHERE NOT EXISTS (SELECT 1 FROM vendorgraph.entities e WHERE e.id = m.entity_id);
ALTER TABLE search.entity_mentions DROP CONSTRAINT entity_mentions_entity_id_fkey;
ALTER TABLE search.entity_mentions ADD CONSTRAINT entity_mentions_entity_id_fkey
    FOREIGN KEY (entity_id) REFERENCES vendorgraph.entities (id) ON DELETE CASCADE;
DROP TABLE search.entity_names;
