package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kassahq/kassa/order"
)

// reindexBatch is how many orders one step of the reindex reads.
const reindexBatch = 500

// reindexStatuses brings the statuses column up to order.StatusRules when the
// database was written under older rules: each order whose statuses, computed
// for the moment it was last written, differ from the column is updated, if
// its version is still the one read (a replica of the older build may be
// writing meanwhile; what it writes, it indexes itself). It runs at Open
// under the migration lock, once per rules change.
func reindexStatuses(ctx context.Context, conn *pgxpool.Conn) error {
	var rules int64
	err := conn.QueryRow(ctx, `SELECT value FROM store_info WHERE name = 'statusRules'`).Scan(&rules)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: status rules: %w", err)
	}
	if rules >= order.StatusRules {
		return nil
	}
	type row struct {
		MerchantID string
		ID         string
		Version    int64
		Statuses   []string
		Body       []byte
	}
	var afterMerchant, afterID string
	for {
		rows, err := conn.Query(ctx, `SELECT merchant_id, id, version, statuses, body FROM orders
			WHERE (merchant_id, id) > ($1, $2) ORDER BY merchant_id, id LIMIT $3`, afterMerchant, afterID, reindexBatch)
		if err != nil {
			return fmt.Errorf("postgres: reindex statuses: %w", err)
		}
		batch, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		if err != nil {
			return fmt.Errorf("postgres: reindex statuses: %w", err)
		}
		for _, r := range batch {
			o, err := decode[order.Order]("order", r.Body)
			if err != nil {
				return err
			}
			st := statusStrings(o)
			if slices.Equal(st, r.Statuses) {
				continue
			}
			if _, err := conn.Exec(ctx, `UPDATE orders SET statuses = $1 WHERE merchant_id = $2 AND id = $3 AND version = $4`,
				st, r.MerchantID, r.ID, r.Version); err != nil {
				return fmt.Errorf("postgres: reindex order %s: %w", r.ID, err)
			}
		}
		if len(batch) < reindexBatch {
			break
		}
		afterMerchant, afterID = batch[len(batch)-1].MerchantID, batch[len(batch)-1].ID
	}
	_, err = conn.Exec(ctx, `INSERT INTO store_info (name, value) VALUES ('statusRules', $1)
		ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`, int64(order.StatusRules))
	if err != nil {
		return fmt.Errorf("postgres: status rules: %w", err)
	}
	return nil
}
