package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
)

// reindexBatch is how many orders one step of the reindex reads and commits.
const reindexBatch = 500

// reindexStatuses brings the statuses column up to order.StatusRules when the
// database was written under older rules: each order whose statuses, computed
// for the moment it was last written, differ from the column is updated, if
// its version is still the one read (a replica of the older build may be
// writing meanwhile; what it writes, it indexes itself).
//
// It runs at Open, after the migrations and outside their lock, with no
// deadline: a large table takes a while, and other replicas must not wait on
// it (lists already go by each order's own statuses, so a row not yet swept
// is passed over, never a 500). One replica sweeps, under a try-lock; each
// batch commits with its position, so a replica stopped mid-sweep leaves the
// next start to go on from there.
//
// The sweeping replica serves only once it is done: 1 000 000 orders take
// about 90 s, so log hears when it begins, how far it got every
// waitLogEvery, and when it ends; a start silent for minutes looks hung.
func reindexStatuses(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	// The lock is held by a transaction of its own (see withAdvisoryLock);
	// the sweep runs on another connection.
	lock, err := holdLock(ctx, pool, "reindex", func(conn *pgx.Conn) (bool, error) {
		var locked bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, `+schemaKey+`)`, simple([]any{lockReindex})...).Scan(&locked); err != nil {
			return false, fmt.Errorf("postgres: reindex lock: %w", err)
		}
		return locked, nil
	})
	if err != nil || lock.conn == nil {
		return err // nil: another replica is sweeping
	}
	defer lock.end()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer conn.Release()
	// The rules are read under the lock, so a replica that waited out
	// another's sweep sees it done instead of sweeping again.
	var rules int64
	err = conn.QueryRow(ctx, `SELECT value FROM store_info WHERE name = 'statusRules'`).Scan(&rules)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: status rules: %w", err)
	}
	if rules >= order.StatusRules {
		return nil
	}

	var after [2]string // merchant_id, id
	var sweep int64
	var position string
	err = conn.QueryRow(ctx, `SELECT value, position FROM store_info WHERE name = 'statusRulesSweep'`).Scan(&sweep, &position)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("postgres: status rules: %w", err)
	case sweep == order.StatusRules && position != "":
		if err := json.Unmarshal([]byte(position), &after); err != nil {
			return fmt.Errorf("postgres: status rules sweep position %q: %w", position, err)
		}
	}
	resumed := "" // the order a stopped sweep got to
	if after != [2]string{} {
		resumed = after[0] + "/" + after[1]
	}
	sl := storage.NewSweepLog(log, "postgres", waitLogEvery)
	type row struct {
		MerchantID string
		ID         string
		Version    int64
		Statuses   []string
		Body       []byte
	}
	for {
		rows, err := conn.Query(ctx, `SELECT merchant_id, id, version, statuses, body FROM orders
			WHERE (merchant_id, id) > ($1, $2) ORDER BY merchant_id, id LIMIT $3`, after[0], after[1], reindexBatch)
		if err != nil {
			return fmt.Errorf("postgres: reindex statuses: %w", err)
		}
		batch, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		if err != nil {
			return fmt.Errorf("postgres: reindex statuses: %w", err)
		}
		if len(batch) == 0 {
			break
		}
		sl.Begin("this replica serves once done, others start meanwhile", "from", rules, "resumedAfter", resumed)
		last := batch[len(batch)-1]
		after = [2]string{last.MerchantID, last.ID}
		pos, _ := json.Marshal(after)
		var updated int // of this batch
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, r := range batch {
				o, err := decode[order.Order]("order", r.Body)
				if err != nil {
					// Its reads fail the same way; the sweep must not stop every start.
					continue
				}
				if st := statusStrings(o); !slices.Equal(st, r.Statuses) {
					updated++
					if _, err := tx.Exec(ctx, `UPDATE orders SET statuses = $1 WHERE merchant_id = $2 AND id = $3 AND version = $4`,
						st, r.MerchantID, r.ID, r.Version); err != nil {
						return fmt.Errorf("order %s/%s: %w", r.MerchantID, r.ID, err)
					}
				}
			}
			_, err := tx.Exec(ctx, `INSERT INTO store_info (name, value, position) VALUES ('statusRulesSweep', $1, $2)
				ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, position = EXCLUDED.position`, int64(order.StatusRules), string(pos))
			return err
		})
		if err != nil {
			return fmt.Errorf("postgres: reindex statuses: %w", err)
		}
		sl.Add(len(batch), updated)
		sl.Progress("after", after[0]+"/"+after[1])
		if len(batch) < reindexBatch {
			break
		}
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO store_info (name, value) VALUES ('statusRules', $1)
			ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`, int64(order.StatusRules)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM store_info WHERE name = 'statusRulesSweep'`)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: status rules: %w", err)
	}
	sl.Done()
	return nil
}
