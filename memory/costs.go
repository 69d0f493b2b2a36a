package memory

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// EngineCosts is one engine's measured cost model as the scheduler writes it (engine/swap.Costs in JSON); the
// store keeps it whole and does not read its fields.
type EngineCosts struct {
	Key       string
	Costs     json.RawMessage
	UpdatedAt time.Time
}

// SaveEngineCosts stores the cost model of the engine named key, replacing the one stored before.
func (s *Store) SaveEngineCosts(ctx context.Context, key string, costs []byte) error {
	if key == "" {
		return fmt.Errorf("memory: save engine costs: empty key: %w", ErrInvalidInput)
	}
	if !json.Valid(costs) {
		return fmt.Errorf("memory: save engine costs for %q: not JSON: %w", key, ErrInvalidInput)
	}
	return s.withTx(ctx, "save engine costs", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO engine_costs (key, costs, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET costs = excluded.costs, updated_at = excluded.updated_at`,
			key, string(costs), toMillis(time.Now()))
		if err != nil {
			return fmt.Errorf("memory: save engine costs for %q: %w", key, err)
		}
		return nil
	})
}

// LoadEngineCosts returns the stored cost model of the engine named key; ok is false when none is stored.
func (s *Store) LoadEngineCosts(ctx context.Context, key string) (c EngineCosts, ok bool, err error) {
	var costs string
	var at int64
	err = s.db.QueryRowContext(ctx, `SELECT costs, updated_at FROM engine_costs WHERE key = ?`, key).Scan(&costs, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return EngineCosts{}, false, nil
	}
	if err != nil {
		return EngineCosts{}, false, fmt.Errorf("memory: engine costs for %q: %w", key, err)
	}
	return EngineCosts{Key: key, Costs: json.RawMessage(costs), UpdatedAt: fromMillis(at)}, true, nil
}

// ListEngineCosts returns every stored cost model, the most recently updated first.
func (s *Store) ListEngineCosts(ctx context.Context) ([]EngineCosts, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key, costs, updated_at FROM engine_costs ORDER BY updated_at DESC, key`)
	if err != nil {
		return nil, fmt.Errorf("memory: engine costs: %w", err)
	}
	defer rows.Close()
	var out []EngineCosts
	for rows.Next() {
		var c EngineCosts
		var costs string
		var at int64
		if err := rows.Scan(&c.Key, &costs, &at); err != nil {
			return nil, fmt.Errorf("memory: engine costs: %w", err)
		}
		c.Costs, c.UpdatedAt = json.RawMessage(costs), fromMillis(at)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory: engine costs: %w", err)
	}
	return out, nil
}
