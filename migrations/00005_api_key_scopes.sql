-- Per-key read scopes: the document categories and the MCP tools a key may
-- use. An empty array leaves that kind open, which is what every existing
-- key gets.

-- +goose Up
ALTER TABLE api_keys
    ADD COLUMN scope_categories text[] NOT NULL DEFAULT '{}',
    ADD COLUMN scope_tools      text[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE api_keys DROP COLUMN IF EXISTS scope_tools, DROP COLUMN IF EXISTS scope_categories;
