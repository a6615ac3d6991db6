package postgres

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

// Exclusive runs fn while this replica holds the start lock, an advisory
// lock of the schema held by a transaction of its own (withAdvisoryLock):
// steps of a start that check and then create
// (the first sandbox merchant when none exists) run one replica at a time, so
// replicas starting together on an empty database make one.
func (s *Store) Exclusive(ctx context.Context, fn func() error) error {
	return withAdvisoryLock(ctx, s.pool, lockStart, "start", func(*pgx.Conn) error { return fn() })
}

// SigningKey gives every replica on the database one signing key, since an
// access token, a document link or a checkout link made on one replica is
// checked on whichever the load balancer picks next.
//
// The first replica to start records the key it has. A key from KASSA_KEY
// (fromEnv) is recorded as its HMAC only: a replica with another KASSA_KEY, or
// with none, is refused, so the mismatch shows at start and not as random 401s.
// A key of the replica's own (DATA/server.key) is recorded itself, and every
// replica without KASSA_KEY signs with the recorded one from then on.
func (s *Store) SigningKey(ctx context.Context, local []byte, fromEnv bool) ([]byte, error) {
	check := storage.SigningKeyCheck(local)
	var own []byte
	if !fromEnv {
		own = local
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: signing key: %w", err)
	}
	defer conn.Release()
	// Durably: a recorded key lost in a crash would let another replica
	// record its own, and the tokens signed with this one fail with 401.
	if err := s.durably(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO signing_key (id, key_check, key) VALUES (1, $1, $2) ON CONFLICT (id) DO NOTHING`, check, own)
		return err
	}); err != nil {
		return nil, fmt.Errorf("postgres: signing key: %w", err)
	}
	var recordedCheck, recorded []byte
	if err := s.pool.QueryRow(ctx, `SELECT key_check, key FROM signing_key WHERE id = 1`).Scan(&recordedCheck, &recorded); err != nil {
		return nil, fmt.Errorf("postgres: signing key: %w", err)
	}
	switch {
	case fromEnv && !hmac.Equal(recordedCheck, check):
		if recorded != nil {
			return nil, errors.New("KASSA_KEY differs from the signing key this database's replicas share (kept in the database): unset KASSA_KEY to use it, or see docs/postgres.md to change keys")
		}
		return nil, errors.New("KASSA_KEY differs from the key the other replicas on this database sign with: give every replica the same KASSA_KEY (docs/postgres.md)")
	case fromEnv:
		return local, nil
	case recorded == nil:
		return nil, errors.New("the replicas on this database sign with KASSA_KEY: set the same KASSA_KEY on this replica")
	case !hmac.Equal(storage.SigningKeyCheck(recorded), recordedCheck):
		return nil, errors.New("postgres: signing key: the recorded key does not match its check value")
	}
	return recorded, nil
}

// durably runs fn in a transaction of conn that commits durably whatever
// synchronous_commit the database or role sets (setSyncCommit), for the
// writes that do not go through Update (a store copy, the signing key).
func (s *Store) durably(ctx context.Context, conn *pgxpool.Conn, fn func(pgx.Tx) error) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // nothing once committed
	if s.syncCommit {
		if _, err := tx.Exec(ctx, setSyncCommit); err != nil {
			return err
		}
	}
	if err := fn(tx); err != nil {
		return err
	}
	// As in Update (wire.go), the caller's context does not reach COMMIT:
	// once it is sent the server may apply it whatever the client does.
	if tx.Conn().IsClosed() {
		return errors.New("postgres: the connection was lost before COMMIT was sent")
	}
	if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
		return commitFailed(err)
	}
	return nil
}

// commitFailed is the error of a COMMIT sent on its own (durably): as it
// was when the server answered it (an error, or ROLLBACK for a transaction
// that failed before), so nothing was written; otherwise (the connection
// broke once it was sent, a FATAL as its answer) the outcome is unknown,
// which the error says (fault.OutcomeUnknown), as Update's does. Not
// pgconn.SafeToRetry: a connection cut where the server answers COMMIT
// makes this pgx report "conn closed", which it takes as never sent
// (TestStoreCopyCommitAnswerLost), and a copy the database had committed
// was then reported as not made.
func commitFailed(err error) error {
	var pe *pgconn.PgError
	if errors.Is(err, pgx.ErrTxCommitRollback) || errors.As(err, &pe) && pe.Severity != "FATAL" {
		return err
	}
	return fault.OutcomeUnknown(err, "postgres: COMMIT was sent but not answered, so whether it committed is unknown")
}
