package postgres

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"strings"
	"time"

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
			return nil, errors.New("KASSA_KEY differs from the signing key this database's replicas share (kept in the database): unset KASSA_KEY to use it, or, to change keys on purpose, stop every replica and run kassa store rekey first (docs/postgres.md)")
		}
		return nil, errors.New("KASSA_KEY differs from the key the other replicas on this database sign with: give every replica the same KASSA_KEY, or, to change keys on purpose, stop every replica and run kassa store rekey first (docs/postgres.md)")
	case fromEnv:
		return local, nil
	case recorded == nil:
		return nil, errors.New("the replicas on this database sign with KASSA_KEY: set the same KASSA_KEY on this replica")
	case !hmac.Equal(storage.SigningKeyCheck(recorded), recordedCheck):
		return nil, errors.New("postgres: signing key: the recorded key does not match its check value")
	}
	return recorded, nil
}

// ErrInUse is ForgetSigningKey's refusal while other sessions of kassa are
// on the database: replicas serving go on signing with the key they read at
// their start, and the next one to start would record another, so that
// half the tokens and links would be refused.
var ErrInUse = errors.New("the database is in use by other kassa sessions")

// ForgetSigningKey removes the signing key the database records, its check
// value and, when the replicas share their first one's key, the key itself
// (kassa store rekey), so that the next replica to start records the key it
// has: the way to change keys on purpose, after which every link and token
// signed with the old key is refused. forgot is false when none was
// recorded.
//
// No replica may be serving meanwhile, and replicas hold nothing for as
// long as they serve (their advisory locks are held during a start or a
// job only), so the sessions are looked for by name: it refuses, with
// ErrInUse, while a session of this database other than the store's own,
// with the application_name of its own (kassa's sessions are named
// "kassa" unless the URL or PGAPPNAME names them otherwise), is in a
// statement or a transaction, was within the last minute (a kassa serve
// reads the database every second, for notification delivery), or cannot
// be seen by this role. An idle one older than that is not a replica but a
// connection pooler's server connection, kept after the replicas it
// served stopped. Behind a pooler the store's own sessions cannot be told
// from the others (pgx knows the pooler's id for a connection, not the
// server's pid), so it refuses to work there at all: it needs a URL to the
// database itself.
func (s *Store) ForgetSigningKey(ctx context.Context) (forgot bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("postgres: forget the signing key: %w", err)
	}
	defer conn.Release()
	if err := s.noOtherSessions(ctx, conn); err != nil {
		return false, err
	}
	if err := s.durably(ctx, conn, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM signing_key WHERE id = 1`)
		forgot = tag.RowsAffected() > 0
		return err
	}); err != nil {
		return false, fmt.Errorf("postgres: forget the signing key: %w", err)
	}
	return forgot, nil
}

// otherSessions selects, in pg_stat_activity a, the pids of the sessions
// ForgetSigningKey refuses to run beside ($1: the store's own pids). A
// session of another role is shown to a role without pg_read_all_stats
// with its application_name but no backend_type or state (NULL): it is
// one that cannot be seen, so it counts.
const otherSessions = `SELECT a.pid FROM pg_stat_activity a WHERE a.datname = current_database()
	AND coalesce(a.backend_type, 'client backend') = 'client backend' AND a.application_name = current_setting('application_name')
	AND a.pid <> ALL($1::int4[])
	AND (a.state IS DISTINCT FROM 'idle' OR a.state_change IS NULL OR a.state_change > clock_timestamp() - $2::float8 * interval '1 second')`

// sessionsActiveWithin is how recently an idle session must have been in
// a statement to be taken for a replica's (see ForgetSigningKey).
var sessionsActiveWithin = time.Minute

// noOtherSessions returns ErrInUse, naming the sessions, while there are
// sessions ForgetSigningKey refuses to run beside. conn is held; the
// pool's other connections are the store's own too. A session seen at the
// first look may be one the store has just closed (the lock connection of
// Open's migration, whose backend ends a moment after): the look is made
// again over a second before it refuses.
func (s *Store) noOtherSessions(ctx context.Context, conn *pgxpool.Conn) error {
	var server int32
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&server); err != nil {
		return fmt.Errorf("postgres: forget the signing key: %w", err)
	}
	if uint32(server) != conn.Conn().PgConn().PID() {
		return errors.New("postgres: the database URL goes through a connection pooler, behind which the replicas' sessions cannot be told from this one's: give a URL to the database itself, or stop every replica and DELETE FROM signing_key (docs/postgres.md)")
	}
	own := []int32{server}
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		own = append(own, int32(c.Conn().PgConn().PID()))
		c.Release()
	}
	within := sessionsActiveWithin.Seconds()
	for look := 1; ; look++ {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM (`+otherSessions+`) o`, own, within).Scan(&n); err != nil {
			return fmt.Errorf("postgres: forget the signing key: %w", err)
		}
		if n == 0 {
			return nil
		}
		if look == 10 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres: forget the signing key: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%w: %s", ErrInUse, strings.Join(sessions(ctx, conn, otherSessions, own, within), "; "))
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
	// once it is sent the server may apply it whatever the client does. Its
	// answer is waited for as Update's is, bounded by commitTimeout: a
	// connection gone silent is then of unknown outcome, and a COMMIT
	// waiting for a synchronous standby that is gone is cancelled, which
	// PostgreSQL answers as committed locally (docs/postgres.md). Without
	// the bound, store copy, store rekey and a replica's start waited for
	// good.
	if tx.Conn().IsClosed() {
		return errors.New("postgres: the connection was lost before COMMIT was sent")
	}
	commitCtx, stop := boundCommit(ctx, tx.Conn().PgConn())
	err = tx.Commit(commitCtx)
	if stop() {
		tx.Conn().Close(context.Background()) // dropped by the pool on release
	}
	if err != nil {
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
//
// The severity read is the unlocalized one: Severity is in the server's
// lc_messages ("FATALT" in Swedish). A PANIC (a WAL write or fsync that
// failed) ends the backend as a FATAL does, after a commit record it may
// have written.
func commitFailed(err error) error {
	var pe *pgconn.PgError
	if errors.Is(err, pgx.ErrTxCommitRollback) {
		return err
	}
	if errors.As(err, &pe) && !endsBackend(pe) {
		return err
	}
	return fault.OutcomeUnknown(err, "postgres: COMMIT was sent but not answered, so whether it committed is unknown")
}
