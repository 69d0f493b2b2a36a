-- Measured cost models, one per engine (model, projector, GPU, speed flags: engine/swap.Key), kept as the
-- scheduler's own JSON so the store need not know its fields. Loaded at start, so a new process plans with
-- this machine's numbers instead of another machine's defaults.
CREATE TABLE engine_costs (
    key        TEXT PRIMARY KEY,
    costs      TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
