-- Prompt processing speed per step (llama-server timings.prompt_per_second), and an index for listing
-- sessions by recency without a sort.
ALTER TABLE messages ADD COLUMN prompt_per_second REAL NOT NULL DEFAULT 0;
CREATE INDEX sessions_updated ON sessions (updated_at);
