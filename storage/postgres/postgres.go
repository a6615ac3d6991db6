// Package postgres is kassa's PostgreSQL store, for several stateless kassa
// replicas on one database. It keeps every guarantee of the embedded store:
//
//   - An Update is one database transaction (READ COMMITTED). GetOrder in an
//     Update locks the order row (SELECT … FOR UPDATE), so concurrent
//     captures of one order on different replicas run one after the other,
//     each on the other's result; UpdateOrder still checks the version.
//   - Idempotency: GetIdempotency in an Update first takes a transaction
//     advisory lock on the (merchant, key) pair, so the same key sent to two
//     replicas at once executes once and the second request, after waiting,
//     finds the record and replays it. The primary key backs it up.
//   - Document numbers come from a row per (merchant, series) updated in the
//     transaction: gapless, and a rollback gives the number back. Of one
//     store's transactions, half the pool at most wait for such a row with
//     a connection; the others wait for a turn without one (turns.go).
//   - Background work (due tasks, pending notifications, expiring orders) is
//     claimed with FOR UPDATE SKIP LOCKED, so two replicas never take the
//     same row; settlement runs hold a transaction advisory lock, so runs on
//     several replicas happen one after the other and settle nothing twice.
//   - Serialization failures and deadlocks retry the whole transaction.
//   - Round trips are saved without changing outcomes (wire.go): BEGIN goes
//     with the first statement, and writes that can only succeed or fail go
//     with the next statement or with COMMIT.
//
// Records are stored as the same JSON as in storage/bolt; the columns beside
// them serve lookups, lists and jobs. The schema is created by versioned
// migrations embedded in the binary, applied at Open under an advisory lock
// so that replicas starting together migrate once.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/ordercache"
	"github.com/kassahq/kassa/storage"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options tune the store.
type Options struct {
	// Clock is the store's time (tx.Now); default time.Now.
	Clock func() time.Time
	// MaxConns caps the connection pool; default: pool_max_conns of the
	// URL, or else 32.
	MaxConns int32
	// DecodedOrderBytes bounds the cache of decoded orders (package
	// ordercache): 0 is its default, negative none.
	DecodedOrderBytes int64
	// Logger, when set, hears why Open waits: for another session's
	// migration lock (and which sessions hold it), or for a migration of
	// this one blocked by other sessions' locks, every so often until it
	// goes on. Without it, a replica that is not ready says nothing of why.
	// It is also warned, once, of each setting of the database server
	// under which a crash of its machine may lose acknowledged writes or
	// damage the cluster (fsync or full_page_writes off).
	Logger *slog.Logger
}

// Store is a PostgreSQL-backed storage.Store.
type Store struct {
	pool      *pgxpool.Pool
	clock     func() time.Time
	decoded   *ordercache.Decoded
	merchants storage.MerchantCache
	closed    atomic.Bool
	// turns: a few transactions at a time wait for a shared row (turns.go).
	turns turns
	// syncCommit: the database or role has synchronous_commit = off, so
	// every write transaction sets it on (setSyncCommit).
	syncCommit bool
	// outboxSkipScans counts the claims that skip-scanned the merchants
	// with pending messages (PendingOutbox), for tests.
	outboxSkipScans atomic.Int64
}

// setSyncCommit starts a write transaction where synchronous_commit is off
// for kassa's sessions (ALTER DATABASE or ALTER ROLE … SET, a tuning seen on
// managed databases): COMMIT is then answered before its WAL is flushed, and
// a crash of the server loses writes kassa acknowledged. A transaction's own
// setting governs its commit. It goes in BEGIN's round trip, and only where
// the setting is off (read once at Open), so a default setup sends nothing
// more; local, on and the settings that wait for a standby are kept.
const setSyncCommit = `SET LOCAL synchronous_commit = on`

// lockKind names one of the store's own advisory locks. They take the
// two-key form, (kind, a hash of the schema): deployments in different
// schemas of one database (search_path in the URL) do not wait for each
// other, and the one-key (bigint) space, a separate set of locks in
// PostgreSQL, is left to the idempotency and authorization keys' hashes
// (advisoryKey), which therefore never meet these.
type lockKind int32

const (
	lockMigrate    lockKind = 0x6b617301 // "kas" 1
	lockSettlement lockKind = 0x6b617302
	lockReindex    lockKind = 0x6b617303
	lockStart      lockKind = 0x6b617304
)

// schemaKey is the second key of the store's advisory locks: the schema its
// tables are in, which every connection of one store shares.
const schemaKey = `hashtext(coalesce(current_schema(), ''))`

// legacyLockMigrate is the migration lock of builds before the two-key
// locks: one id for the whole database. A replica of such a build may
// start beside this one on the same schema during a rolling upgrade, so
// while any migration those builds carry (up to legacyMigrations) is still
// to apply, this build takes that lock too (see migrate).
const (
	legacyLockMigrate int64 = 0x6b61737361_01
	legacyMigrations        = 10
)

// defaultConnectTimeout bounds one connection attempt (dial and startup)
// when the URL sets no connect_timeout.
const defaultConnectTimeout = 10 * time.Second

// defaultPingTimeout bounds the ping the pool sends on a connection idle
// for over a second before it hands it out, when the URL sets no
// pool_ping_timeout. pgxpool's default is none: the ping then waited as long
// as the caller's context, which the background jobs' never end, so a
// pooled connection gone silent (a failover that moved the database's
// address, a NAT or balancer that dropped the flow: no answer and no reset)
// held notification delivery and the jobs until TCP gave up, a quarter of
// an hour, or for good behind a pooler that keeps its side alive. An empty
// query takes a round trip; one not answered within this drops the
// connection, and the pool tries the next or opens one.
const defaultPingTimeout = time.Second

// defaultUserTimeout is how long data sent on a connection may go
// unacknowledged before the kernel fails it (TCP_USER_TIMEOUT, Linux), when
// the URL sets no tcp_user_timeout. Without it, a statement already sent on
// a connection gone silent (a failover that moved the database's address, a
// NAT or balancer that dropped the flow: no answer and no reset) waited for
// TCP to give up retransmitting, about a quarter of an hour, in which
// notification delivery and the background jobs, whose contexts never end,
// stood still, and a SIGTERM waited for it past its 30 s grace. It bounds
// only silence at the TCP level: a database busy with a long lock wait, a
// slow query or a checkpoint has its kernel acknowledge what was sent, and
// keeps its connections. Long enough for a network blip to pass; short
// enough that a statement sent before a SIGTERM fails within the shutdown's
// 30 s grace. A connection gone silent while idle is also ended by the
// keepalive (Go's default, 15 s idle then a probe every 15 s), which this
// bounds too: about 30 s rather than 2½ minutes.
const defaultUserTimeout = 20 * time.Second

// clientParams are sent in every connection's startup, over whatever the
// database, the role or the URL set: pgx sends text as UTF-8 and reads it
// back as UTF-8, and refuses simple-protocol queries (the advisory lock
// waits at start) unless both hold. Without them, a database or role with
// client_encoding = 'LATIN1' (or any database not in UTF8, whose
// client_encoding defaults to its own) or standard_conforming_strings =
// off failed the start, and with only the first the server would have kept
// kassa's UTF-8 read as Latin-1. PgBouncer passes both on (docs/postgres.md).
var clientParams = map[string]string{"client_encoding": "UTF8", "standard_conforming_strings": "on"}

// unsafeSetting is a setting of the database server under which a crash
// of its machine may lose or damage what kassa wrote, and what it risks.
type unsafeSetting struct{ setting, risk string }

// unsafeSettings are those of fsync and full_page_writes, as the server
// reports them, that are off. They are the cluster's (postgresql.conf), which
// no session can override, unlike synchronous_commit: Open warns, and
// serves (test and CI clusters run with fsync = off on purpose).
func unsafeSettings(fsync, fullPageWrites string) []unsafeSetting {
	var out []unsafeSetting
	if fsync == "off" {
		out = append(out, unsafeSetting{"fsync", "an operating-system crash or a power loss of its machine may lose writes kassa acknowledged and leave the cluster damaged beyond repair; turn it on unless the data is disposable"})
	}
	if fullPageWrites == "off" {
		out = append(out, unsafeSetting{"full_page_writes", "an operating-system crash or a power loss of its machine may leave pages half written, which recovery cannot repair: the cluster damaged; turn it on unless its storage writes pages atomically"})
	}
	return out
}

// CheckURL reports the error Open would return for url before it connects:
// one that cannot be parsed, or whose host or database name took part of
// a password (see hostError). The error never shows the password. A command
// refuses such a URL as a usage error before it does anything else.
func CheckURL(url string) error {
	_, err := parseURL(url)
	return err
}

// parseURL parses url as Open takes it.
func parseURL(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, urlError(err)
	}
	if err := hostError(url, &cfg.ConnConfig.Config); err != nil {
		return nil, err
	}
	userTimeout, err := takeUserTimeout(cfg.ConnConfig.RuntimeParams)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.DialFunc = dialFunc(cfg.ConnConfig.ConnectTimeout, userTimeout)
	// pgx closes a connection on a FATAL by its localized severity only,
	// which a server with lc_messages other than English writes otherwise.
	cfg.ConnConfig.OnPgError = func(_ *pgconn.PgConn, pe *pgconn.PgError) bool { return !endsBackend(pe) }
	return cfg, nil
}

// takeUserTimeout reads and removes the URL's tcp_user_timeout from params
// (pgx, which does not know it, keeps it there to send to the server):
// libpq's connection option, a whole number of milliseconds, 0 for the
// system's default, read on the client's side only, as libpq does. Sent in
// the startup packet it would set the server's socket too, but a pooler
// refuses the connection (PgBouncer: unsupported startup parameter); the
// server's own is set in postgresql.conf (docs/postgres.md).
func takeUserTimeout(params map[string]string) (time.Duration, error) {
	v, ok := params["tcp_user_timeout"]
	if !ok {
		return defaultUserTimeout, nil
	}
	delete(params, "tcp_user_timeout")
	ms, err := strconv.ParseInt(v, 10, 32)
	if err != nil || ms < 0 {
		return 0, errors.New("postgres: the database URL's tcp_user_timeout must be a whole number of milliseconds, 0 for the system's default")
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// dialFunc dials as pgx's own dialer (Go's keepalive; the URL's
// connect_timeout, if any, bounds the dial as pgx's does) and sets
// TCP_USER_TIMEOUT on TCP connections where the system has it (see
// setUserTimeout); 0 leaves the system's default.
func dialFunc(connectTimeout, userTimeout time.Duration) pgconn.DialFunc {
	d := &net.Dialer{Timeout: connectTimeout}
	if userTimeout > 0 {
		d.Control = func(network, _ string, c syscall.RawConn) error {
			return setUserTimeout(network, c, userTimeout)
		}
	}
	return d.DialContext
}

// Open connects, applies the migrations this binary carries, and returns the store.
// ctx bounds connecting and waiting for another replica's migration; a
// migration this one has begun runs to its end (see migrate).
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// Without a bound, a URL that names a port where something other
		// than PostgreSQL listens waits, silent, for the whole start deadline.
		// A handshake takes milliseconds; the URL's connect_timeout overrides.
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	if !urlSets(url, "pool_ping_timeout") {
		cfg.PingTimeout = defaultPingTimeout
	}
	for k, v := range clientParams {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		// Names kassa's sessions in pg_stat_activity, the server's logs and
		// what a waiting start logs of lock holders; a name of the URL or
		// PGAPPNAME (pgx reads both into RuntimeParams) is kept. A startup
		// parameter, which PgBouncer passes on.
		cfg.ConnConfig.RuntimeParams["application_name"] = "kassa"
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !urlSets(url, "pool_max_conns"):
		cfg.MaxConns = 32
	case cfg.MaxConns < 2:
		// Exclusive holds its lock on one connection while fn works on
		// another: with one, kassa serve would hang at start.
		return nil, errors.New("postgres: pool_max_conns must be at least 2")
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	var syncCommit, encoding, fsync, fullPageWrites string
	if err := pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), current_setting('server_encoding'),
		current_setting('fsync'), current_setting('full_page_writes')`).Scan(&syncCommit, &encoding, &fsync, &fullPageWrites); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %w", oneLineError{err})
	}
	if opts.Logger != nil {
		for _, u := range unsafeSettings(fsync, fullPageWrites) {
			opts.Logger.Warn("postgres: the database server runs with "+u.setting+" = off: "+u.risk, "setting", u.setting)
		}
	}
	if encoding != "UTF8" && encoding != "SQL_ASCII" {
		// Text kassa accepts (any Unicode) that the database's encoding
		// has no character for would be refused as invalid, a valid order
		// answered 400; refused before the migrations make anything.
		// SQL_ASCII keeps the bytes as sent, always valid UTF-8.
		pool.Close()
		return nil, fmt.Errorf("postgres: the database's encoding is %s, which cannot hold all the text kassa stores: create it with ENCODING 'UTF8' (createdb -E UTF8 -T template0)", encoding)
	}
	if err := migrate(ctx, pool, opts.Logger); err != nil {
		pool.Close()
		return nil, err
	}
	if err := reindexStatuses(context.WithoutCancel(ctx), pool, opts.Logger); err != nil {
		pool.Close()
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	return &Store{pool: pool, clock: opts.Clock, decoded: ordercache.NewDecoded(opts.DecodedOrderBytes),
		turns: turns{per: int(cfg.MaxConns / 2)}, syncCommit: syncCommit == "off"}, nil
}

// Unreachable reports whether err, from Open, is the database not being
// reached yet: no connection could be made (refused, no route, a name that
// does not resolve, no answer within the connect timeout) or the server
// refused it while starting up, shutting down or full (57P03, 53300). A
// caller starting beside its database may try again; a refused login, an
// unknown database, a bad URL, a server that refuses TLS the URL requires
// or a certificate that does not verify will not change by waiting.
func Unreachable(err error) bool {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(ce, &pe) {
		return pe.Code == "57P03" || pe.Code == "53300"
	}
	// Only what the network says: a refused, reset or unresolved dial, no
	// answer in time, a connection closed in the startup (a server going
	// down). pgx's other connect errors (TLS refused, x509, a bad setting)
	// are answers, and would be the same on every try.
	var ne net.Error
	return errors.As(ce, &ne) || pgconn.Timeout(ce) || errors.Is(ce, context.DeadlineExceeded) ||
		errors.Is(ce, io.EOF) || errors.Is(ce, io.ErrUnexpectedEOF)
}

// oneLineError is a connect error of pgx in one line. pgx writes one as a
// header and a tab-indented line per address and TLS mode tried (the same
// line twice under sslmode=prefer), so a failed start printed three lines,
// which a log read by line cuts into three records.
type oneLineError struct{ err error }

func (e oneLineError) Unwrap() error { return e.err }

func (e oneLineError) Error() string {
	lines := strings.Split(e.err.Error(), "\n")
	tried := make([]string, 0, len(lines)-1)
	for _, l := range lines[1:] {
		if l = strings.TrimSpace(l); l != "" && !slices.Contains(tried, l) {
			tried = append(tried, l)
		}
	}
	if len(tried) == 0 {
		return strings.TrimSpace(lines[0])
	}
	return strings.TrimSpace(lines[0]) + " " + strings.Join(tried, "; ")
}

// urlError says why a database URL could not be parsed without quoting it.
// pgx quotes it with the password masked, but only as best it can: after an
// unescaped '@' in the password, the rest of it was shown, in a message that
// goes to the logs.
func urlError(err error) error {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return fmt.Errorf("postgres: %w", err)
	}
	// Error is "cannot parse `URL`: why": pgx's own words follow the last
	// "`: ".
	msg := pe.Error()
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		return fmt.Errorf("postgres: cannot parse the database URL: %s", unquoted(msg[i+len("`: "):]))
	}
	return errors.New("postgres: cannot parse the database URL")
}

// quotedText is a double-quoted string as Go's %q writes it.
var quotedText = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// unquoted is pgx's reason with what it quotes of the URL left out: the
// piece it could not read can be the rest of a password with a space or an
// '&' in it ("missing "=" after "rest""). Its own token "=" stays.
func unquoted(reason string) string {
	return quotedText.ReplaceAllStringFunc(reason, func(q string) string {
		if q == `"="` {
			return q
		}
		return `"…"`
	})
}

// hostError refuses a URL whose host, or whose path (the database name), has
// an '@' in it. pgx, as libpq, ends the user info at the first '@', so an '@'
// not written %40 in the password made the rest of it part of the host:
// looked up in DNS, and named in every connection error, which reaches the
// logs. A '/' in the password before it ends the host instead, and the rest
// became the database name, named in those errors too. No host name or
// address has an '@' (a Unix socket's directory, a path, is left alone), and
// a database name with one is written %40 in a URL.
func hostError(url string, cc *pgconn.Config) error {
	hosts := []string{cc.Host}
	for _, f := range cc.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	for _, h := range hosts {
		if strings.Contains(h, "@") && !strings.HasPrefix(h, "/") {
			return errors.New(`postgres: the database URL's host has an "@" in it: write an "@" in the user name or password as %40`)
		}
	}
	rest, ok := strings.CutPrefix(url, "postgresql://")
	if !ok {
		rest, ok = strings.CutPrefix(url, "postgres://")
	}
	rest, _, _ = strings.Cut(rest, "?")
	if i := strings.IndexByte(rest, '/'); ok && i >= 0 {
		if strings.Contains(rest[i:], "@") {
			return errors.New(`postgres: the database URL's path has an "@" in it: write a "/" in the user name or password as %2F, an "@" in the database name as %40`)
		}
	}
	return nil
}

// urlSets reports whether the URL gives the pool setting name:
// pool_max_conns is the one way kassa serve has to size the pool, for
// replicas that together must stay under the database's max_connections,
// and pool_ping_timeout overrides defaultPingTimeout. pgxpool has read them
// by then, and keeps no sign of whether they were given.
func urlSets(url, name string) bool {
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		return false
	}
	_, ok := cc.RuntimeParams[name]
	return ok
}

// migrate applies, in order, every embedded migration not yet recorded in
// schema_migrations, each in its own transaction (or none, see
// noTransaction), then fills the session columns rows lack, while holding an
// advisory lock (withAdvisoryLock) so that concurrent starts wait for each other (and
// none lists sessions by a column not yet filled).
//
// A replica of an older build waits for that lock with pg_advisory_lock,
// holding a snapshot, and a concurrent index build waits for every older
// snapshot: the database then ends one of the two with a deadlock error. If
// it is this replica's, it lets go of the lock, so the older one goes on,
// and starts over: the migration was not recorded, and the index it left
// invalid is built again.
//
// ctx bounds reaching the database and waiting for the lock, not the
// migrations it then applies: cancelled, one rolls back, so a migration
// longer than the caller's deadline (a large table's index build, one
// waiting on a long transaction) would be started over at every start and
// never finish. The process ending still stops it.
//
// The lock is the schema's own (lockKind), so deployments in other schemas
// do not wait. A replica of a build before it takes the database-wide
// legacyLockMigrate instead; while a migration such a build may also apply
// is pending, this one takes that lock as well, after its own, so the two
// never migrate one schema at once. Then, and only then, schemas migrating
// at the same moment still wait for each other.
func migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	run := context.WithoutCancel(ctx)
	w := lockWaiter{pool: pool, log: log}
	for attempt := 1; ; attempt++ {
		err := w.withAdvisoryLock(ctx, lockMigrate, "migration", func(*pgx.Conn) error {
			// The migrations run on a connection of their own: the lock's
			// stays in its transaction until they are done.
			conn, err := pool.Acquire(ctx)
			if err != nil {
				return fmt.Errorf("postgres: %w", err)
			}
			defer conn.Release()
			legacy, err := legacyPending(ctx, conn)
			if err != nil {
				return err
			}
			if legacy {
				// A session lock, taken on the connection that builds the
				// indexes: an older build waiting for it holds a snapshot
				// the build waits for, and only when both waits are of one
				// session does the database see the cycle and end it.
				if err := w.wait(ctx, conn, "migration", legacyHolders, `SELECT pg_try_advisory_lock($1)`, nil, legacyLockMigrate); err != nil {
					return err
				}
				defer conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, legacyLockMigrate)
			}
			defer w.watchBlocked(conn, "migration")()
			if err := applyMigrations(run, conn, log); err != nil {
				return err
			}
			return fillSessionColumns(run, conn)
		})
		var pe *pgconn.PgError
		if attempt >= 5 || !errors.As(err, &pe) || pe.Code != "40P01" {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
}

// withAdvisoryLock runs fn while a connection of pool holds the advisory
// lock key of this schema, waiting for it while another connection holds it;
// what names the lock in errors. fn is given that connection, in the
// transaction that holds the lock: its work goes on the pool's.
//
// The lock is a transaction lock, held by a transaction left open on its
// connection until fn returns, not a session lock: behind a pooler in
// transaction mode (PgBouncer), a session lock stays with whichever server
// connection ran the statement that took it, which the pooler then gives to
// other clients, so another replica could be granted it there (advisory locks
// nest in a session) and the unlock, run on another server connection, left
// it held. An open transaction keeps its server connection. Ended by the
// process dying, it ends the transaction, and the lock with it, as a
// session's end did.
//
// It waits by trying every 50 ms, not with pg_advisory_xact_lock: a statement
// waiting on a lock holds a snapshot all along, and the holder's concurrent
// index build (a migration) would wait for that snapshot, a deadlock. Each
// try is a transaction of its own (a build waits for the whole transaction
// of a snapshot it saw, so a try it caught must end at once), and while fn
// runs the transaction that took the lock holds no snapshot (READ
// COMMITTED, and no portal left open: simple), so it holds back no index
// build.
func withAdvisoryLock(ctx context.Context, pool *pgxpool.Pool, kind lockKind, what string, fn func(*pgx.Conn) error) error {
	return lockWaiter{pool: pool}.withAdvisoryLock(ctx, kind, what, fn)
}

// lockWaiter takes the store's advisory locks on connections of pool, and
// tells log (when not nil) what it waits for.
type lockWaiter struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

// waitLogEvery is how long a wait goes on before it is logged, and then
// between its log lines.
var waitLogEvery = 5 * time.Second

func (w lockWaiter) withAdvisoryLock(ctx context.Context, kind lockKind, what string, fn func(*pgx.Conn) error) error {
	locked, err := holdLock(ctx, w.pool, what, func(conn *pgx.Conn) (bool, error) {
		// Each try in a transaction of its own: a concurrent index build
		// (the holder migrating) waits for the whole transaction of every
		// snapshot it saw, and a try running at that moment held one; kept
		// open across tries, the waiter's transaction would then end only
		// once the build was done, a deadlock (seen: four replicas opening
		// one fresh schema at once, TestConcurrentOpenMigratesOnce).
		anew := func() error { _, err := conn.Exec(ctx, `ROLLBACK; `+beginLockTx); return err }
		return true, w.wait(ctx, conn, what, kindHolders, `SELECT pg_try_advisory_xact_lock($1, `+schemaKey+`)`, anew, kind)
	})
	if err != nil {
		return err
	}
	defer locked.end()
	return fn(locked.conn)
}

// simple makes a statement with args go by the simple protocol. The
// extended protocol's unnamed portal outlives the statement until the next
// one, with its snapshot: a transaction holding a lock (holdLock), idle
// between tries or while its holder migrates, would keep that snapshot, and
// a concurrent index build waits for every older snapshot (seen: the build
// of migration 8 waited for its own lock's transaction).
func simple(args []any) []any {
	return append([]any{pgx.QueryExecModeSimpleProtocol}, args...)
}

// heldLock is a connection whose open transaction holds an advisory lock.
type heldLock struct{ conn *pgx.Conn }

// end releases the lock: the connection is closed, which ends the
// transaction (behind a pooler, the pooler drops or resets the server
// connection of a client gone mid-transaction). Bounded: on a connection
// gone silent (a peer or NAT that dropped it without a reset), unbounded
// the ROLLBACK would wait for TCP keepalive to give up, a quarter of an
// hour in which Open, its work done, did not return; the server ends the
// transaction with the connection either way.
func (l heldLock) end() {
	ctx, cancel := context.WithTimeout(context.Background(), lockEndWait)
	defer cancel()
	l.conn.Exec(ctx, `ROLLBACK`)
	l.conn.Close(ctx)
}

// lockEndWait bounds heldLock.end.
const lockEndWait = 5 * time.Second

// holdLock opens a transaction on a connection of its own and runs take in
// it, which takes a transaction advisory lock (false: it was not taken). A
// connection of its own, not one of pool: the work under the lock takes
// pool's, and a pool of one connection (Options.MaxConns) would wait for
// itself. The transaction is kept from idle_in_transaction_session_timeout,
// which would end it, and the lock, while a long migration runs.
func holdLock(ctx context.Context, pool *pgxpool.Pool, what string, take func(*pgx.Conn) (bool, error)) (heldLock, error) {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return heldLock{}, fmt.Errorf("postgres: %s lock: %w", what, err)
	}
	l := heldLock{conn}
	if _, err := conn.Exec(ctx, beginLockTx); err != nil {
		l.end()
		return heldLock{}, fmt.Errorf("postgres: %s lock: %w", what, err)
	}
	ok, err := take(conn)
	if err != nil || !ok {
		l.end()
		return heldLock{}, err
	}
	return l, nil
}

// beginLockTx begins the transaction that takes (and holds) a transaction
// advisory lock.
const beginLockTx = `BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL idle_in_transaction_session_timeout = 0`

// Sessions holding an advisory lock, found in pg_locks from the arguments
// of its pg_try_advisory_lock: the two-key form (objsubid 2), or the
// one-key form, split in its high and low halves (objsubid 1).
const (
	kindHolders   = `l.classid = $1::bigint AND l.objid::bigint = ` + schemaKey + `::bigint & 4294967295 AND l.objsubid = 2`
	legacyHolders = `l.classid = $1::bigint >> 32 AND l.objid::bigint = $1::bigint & 4294967295 AND l.objsubid = 1`
)

// wait runs try, a pg_try_advisory_lock of args, every 50 ms until it
// succeeds or ctx ends, and anew, when given, after each failed try. Every
// waitLogEvery it logs the sessions that hold the lock (holders selects them
// in pg_locks l).
func (w lockWaiter) wait(ctx context.Context, conn querier, what, holders, try string, anew func() error, args ...any) error {
	start := time.Now()
	next := start.Add(waitLogEvery)
	for {
		var locked bool
		if err := conn.QueryRow(ctx, try, simple(args)...).Scan(&locked); err != nil {
			return fmt.Errorf("postgres: %s lock: %w", what, err)
		}
		if locked {
			if w.log != nil && time.Since(start) >= waitLogEvery {
				w.log.Info("postgres: got the "+what+" lock", "waited", time.Since(start).Round(time.Millisecond).String())
			}
			return nil
		}
		if w.log != nil && time.Now().After(next) {
			next = time.Now().Add(waitLogEvery)
			w.log.Warn("postgres: waiting for the "+what+" lock, held by another session (a replica migrating or starting)",
				"waited", time.Since(start).Round(time.Second).String(),
				"holders", sessions(ctx, conn, `SELECT l.pid FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
					AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND `+holders, args...))
		}
		if anew != nil {
			if err := anew(); err != nil {
				return fmt.Errorf("postgres: %s lock: %w", what, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres: %s lock: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// watchBlocked logs, every waitLogEvery until the returned func is called,
// the sessions whose locks block conn's statement (a long transaction on a
// table a migration alters). It looks from another connection of the pool.
func (w lockWaiter) watchBlocked(conn *pgxpool.Conn, what string) (stop func()) {
	if w.log == nil {
		return func() {}
	}
	pid := conn.Conn().PgConn().PID()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(waitLogEvery):
			}
			c, err := w.pool.Acquire(ctx)
			if err != nil {
				continue
			}
			blockers := sessions(ctx, c, `SELECT unnest(pg_blocking_pids($1::int))`, int64(pid))
			c.Release()
			if len(blockers) > 0 {
				w.log.Warn("postgres: the "+what+" waits for locks other sessions hold (end or commit their transactions)",
					"waited", time.Since(start).Round(time.Second).String(), "pid", pid, "blockers", blockers)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// querier is a connection, of the pool or one of its own (holdLock).
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// sessions describes, from pg_stat_activity, the backends whose pids pids
// selects: no statement text, which may carry customer data, only what
// finds the session.
func sessions(ctx context.Context, conn querier, pids string, args ...any) []string {
	rows, err := conn.Query(ctx, `SELECT format('pid %s, application %L, client %s, %s, transaction open %s, waiting on %s',
		a.pid, a.application_name, coalesce(host(a.client_addr), 'local'), coalesce(a.state, '?'),
		coalesce(date_trunc('second', now() - a.xact_start)::text, 'no'), coalesce(a.wait_event_type || ':' || a.wait_event, 'nothing'))
		FROM pg_stat_activity a WHERE a.pid IN (`+pids+`)`, simple(args)...)
	if err != nil {
		return []string{"unknown: " + err.Error()}
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return []string{"unknown: " + err.Error()}
	}
	return out
}

// legacyPending reports whether a migration that builds with the legacy
// migration lock also carry is not yet recorded in the schema.
func legacyPending(ctx context.Context, conn *pgxpool.Conn) (bool, error) {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'schema_migrations')`).Scan(&exists); err != nil {
		return false, fmt.Errorf("postgres: %w", err)
	}
	if !exists {
		return true, nil
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM schema_migrations WHERE version BETWEEN 1 AND $1`, legacyMigrations).Scan(&n); err != nil {
		return false, fmt.Errorf("postgres: %w", err)
	}
	return n < legacyMigrations, nil
}

// noTransaction, as a migration's first line, runs it outside a transaction:
// a single statement PostgreSQL refuses in one, CREATE INDEX CONCURRENTLY IF
// NOT EXISTS. It is recorded once the statement has completed; a start cut off
// before that runs it again.
const noTransaction = "-- kassa:no-transaction\n"

// concurrentIndex finds the name of the index a no-transaction migration
// builds.
var concurrentIndex = regexp.MustCompile(`(?i)CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+(\w+)`)

// extensionLine, in a no-transaction migration's header, names an extension
// its index needs (an operator class): it is made first, if missing. A
// role that may not make it (42501: no CREATE right on the database, or
// an untrusted extension), or a server without it (0A000, 58P01 before
// PostgreSQL 15), leaves the migration pending: the start logs the SQL that
// makes it and goes on, and the next start tries again. Such a migration
// only adds an index the store is correct without.
var extensionLine = regexp.MustCompile(`(?m)^-- kassa:extension (\w+)$`)

// extensionMissing reports whether err says the extension could not be made
// for want of a right or of the extension itself.
func extensionMissing(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42501" || pe.Code == "0A000" || pe.Code == "58P01")
}

// notOwner reports whether err is PostgreSQL's refusal of DDL to a user
// that does not own the table (42501).
func notOwner(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42501"
}

// indexesBuilt reports whether every index a no-transaction migration
// builds exists in the current schema and is valid.
func indexesBuilt(ctx context.Context, conn *pgxpool.Conn, sql string) (bool, error) {
	names := concurrentIndex.FindAllStringSubmatch(sql, -1)
	for _, m := range names {
		found, valid, err := schemaIndex(ctx, conn, m[1])
		if err != nil || !found || !valid {
			return false, err
		}
	}
	return len(names) > 0, nil
}

// schemaIndex reports whether the index name exists in the current schema,
// where a migration builds it (found by its name alone, through the search
// path, it could be another deployment's in a schema later in the path),
// and whether it is valid. The schema is matched by name:
// current_schema()::regnamespace would read it as an identifier, folding
// "Kassa" to another schema, kassa, or to none.
func schemaIndex(ctx context.Context, conn *pgxpool.Conn, name string) (found, valid bool, err error) {
	err = conn.QueryRow(ctx, `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = $1 AND n.nspname = current_schema()`, name).Scan(&valid)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	return err == nil, valid, err
}

// statementOf is a migration's SQL without its comment lines.
func statementOf(sql string) string {
	var out []string
	for _, l := range strings.Split(sql, "\n") {
		if l != "" && !strings.HasPrefix(l, "--") {
			out = append(out, l)
		}
	}
	return strings.Join(out, " ")
}

func applyMigrations(ctx context.Context, conn *pgxpool.Conn, log *slog.Logger) error {
	// Created only when missing, where CREATE TABLE would put it: PostgreSQL
	// refuses even CREATE TABLE IF NOT EXISTS to a user without the CREATE
	// right on the schema, and such a user may run a migrated database.
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'schema_migrations')`).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
	}
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	slices.Sort(files)
	for _, f := range files {
		name := strings.TrimPrefix(f, "migrations/")
		version, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("postgres: migration %s: name must start with its version", name)
		}
		var applied bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, version).Scan(&applied); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		if applied {
			continue
		}
		sql, err := migrations.ReadFile(f)
		if err != nil {
			return err
		}
		if strings.HasPrefix(string(sql), noTransaction) {
			// An index already built and valid (by a DBA, or by a build
			// whose replica was killed before recording it) is recorded
			// with no DDL, which a user that does not own the table may
			// not run even with IF NOT EXISTS.
			built, err := indexesBuilt(ctx, conn, string(sql))
			if err != nil {
				return fmt.Errorf("postgres: migration %s: %w", name, err)
			}
			if built {
				if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, version, name); err != nil {
					return fmt.Errorf("postgres: migration %s: %w", name, err)
				}
				continue
			}
		}
		m := extensionLine.FindStringSubmatch(string(sql))
		optional := m != nil && strings.HasPrefix(string(sql), noTransaction)
		if optional {
			_, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS `+pgx.Identifier{m[1]}.Sanitize())
			if extensionMissing(err) {
				if log != nil {
					var schema string
					conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema)
					log.Warn("postgres: migration "+name+" is left pending: this database user cannot create the "+m[1]+
						" extension, so order lists by status go on without the index it needs (slower for small merchants' rare statuses); "+
						"a user with CREATE on the database runs the SQL given here, and the next start builds the index if it is not built then",
						"extension", m[1], "error", err.Error(),
						"sql", "CREATE EXTENSION IF NOT EXISTS "+m[1]+"; "+
							strings.Replace(statementOf(string(sql)), " ON ", " ON "+pgx.Identifier{schema}.Sanitize()+".", 1))
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("postgres: migration %s: %w", name, err)
			}
		}
		if strings.HasPrefix(string(sql), noTransaction) {
			err = applyOutsideTransaction(ctx, conn, string(sql))
			if optional && notOwner(err) {
				// The extension exists, but this user only reads and writes
				// the tables (the owner started first, with the extension
				// missing then): it cannot build the index, which the store
				// is correct without, so it starts and leaves the migration
				// to the owner's next start or the DBA.
				if log != nil {
					var schema string
					conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema)
					log.Warn("postgres: migration "+name+" is left pending: this database user does not own the tables, so it cannot build "+
						"the index order lists by status need (slower for small merchants' rare statuses); the next start of a replica "+
						"as the schema's owner builds it, or the owner or a DBA runs the SQL given here",
						"error", err.Error(),
						"sql", strings.Replace(statementOf(string(sql)), " ON ", " ON "+pgx.Identifier{schema}.Sanitize()+".", 1))
				}
				continue
			}
			if err == nil {
				_, err = conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, version, name)
			}
		} else {
			err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, noStatementTimeout); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, string(sql)); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, version, name)
				return err
			})
		}
		if err != nil {
			return fmt.Errorf("postgres: migration %s: %w", name, err)
		}
	}
	return nil
}

// noStatementTimeout starts a migration's transaction. A statement_timeout
// of the database or role (a DBA's bound on the application's statements)
// would cut a migration longer than it (a large table's index build, or a
// wait for a long transaction) at the same point at every start: each
// start would fail and the migration never finish. lock_timeout is left:
// a lock wait it ends depends on other sessions, and the next start may
// get the lock.
const noStatementTimeout = `SET LOCAL statement_timeout = 0`

// applyOutsideTransaction runs a no-transaction migration. A concurrent
// build that was cut off (the replica killed, the statement cancelled, a
// deadlock) leaves its index INVALID under its name, which IF NOT EXISTS would
// take as built: such an index is dropped first. Only this file's own index
// names are looked at, in the current schema, and only under the migration
// lock, so no other replica's build is under way.
//
// Its statements run without a statement_timeout (see noStatementTimeout).
// With no transaction to SET LOCAL in, the session's is set to 0 and reset
// once they are done, so the connection goes back to the pool with the
// database's; where none is set (the default), nothing is sent.
func applyOutsideTransaction(ctx context.Context, conn *pgxpool.Conn, sql string) error {
	var limited bool
	if err := conn.QueryRow(ctx, `SELECT current_setting('statement_timeout') <> '0'`).Scan(&limited); err != nil {
		return err
	}
	if limited {
		if _, err := conn.Exec(ctx, `SET statement_timeout = 0`); err != nil {
			return err
		}
		defer func() {
			if _, err := conn.Exec(context.Background(), `RESET statement_timeout`); err != nil {
				// Not back to the database's setting: not for reuse.
				conn.Conn().Close(context.Background())
			}
		}()
	}
	for _, m := range concurrentIndex.FindAllStringSubmatch(sql, -1) {
		// In the current schema only (schemaIndex): one of another
		// deployment's schema, its build cut off or under way, is not ours
		// to drop.
		found, valid, err := schemaIndex(ctx, conn, m[1])
		if err != nil {
			return err
		}
		if found && !valid {
			var schema string
			if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
				return err
			}
			if _, err := conn.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+pgx.Identifier{schema, m[1]}.Sanitize()); err != nil {
				return err
			}
		}
	}
	_, err := conn.Exec(ctx, sql)
	return err
}

// Pool is the connection pool, for benchmarks and health checks.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool once the connections in use are released; later
// transactions fail with storage.ErrClosed.
func (s *Store) Close() error {
	s.closed.Store(true)
	s.pool.Close()
	return nil
}

// maxAttempts bounds the retries of a transaction that lost a serialization
// race, a deadlock or a NOWAIT lock (about a second of waiting in all).
const maxAttempts = 40

// reconnectFor bounds the retries of transactions that found no connection
// or lost theirs: long enough for a database's fast restart (under a
// second), short enough that a database that is down is answered as such.
const reconnectFor = 2 * time.Second

// Update runs fn in a read-write transaction and commits it.
func (s *Store) Update(ctx context.Context, fn func(storage.Tx) error) error {
	return s.run(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, true, fn)
}

// View runs fn in a read-only transaction on one snapshot.
func (s *Store) View(ctx context.Context, fn func(storage.Tx) error) error {
	return s.run(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, false, fn)
}

func (s *Store) run(ctx context.Context, opts pgx.TxOptions, writable bool, fn func(storage.Tx) error) error {
	if ctx.Err() != nil {
		return storage.WaitEnded(ctx, nil)
	}
	start := time.Now()
	// lastLost is the error of the latest attempt that found no connection
	// or lost its own: when the caller's deadline then ends the retries,
	// that is why nothing was done, not a slow database (/readyz's 2 s
	// equal the reconnect window, and an outage read "did not answer in
	// time").
	var lastLost *connLost
	// wanted: the turns of shared rows (turns.go) an attempt found taken,
	// which the next ones wait for before they take a connection.
	var wanted []string
	for attempt := 1; ; attempt++ {
		held, err := s.turns.waitAll(ctx, wanted)
		if err != nil {
			return err
		}
		err = s.once(ctx, opts, writable, held, fn)
		held.release()
		if tt := (*turnTaken)(nil); errors.As(err, &tt) {
			if ctx.Err() != nil {
				return storage.WaitEnded(ctx, nil)
			}
			// Not a lost race: nothing to pause for, and each turn is
			// missed at most once, so the attempt does not count.
			wanted = addKey(wanted, tt.key)
			attempt--
			continue
		}
		var lost *connLost
		isLost := errors.As(err, &lost)
		if isLost {
			lastLost = lost
		} else if lastLost != nil && ctx.Err() != nil && fault.Is(err, fault.Unavailable) {
			return lastLost.err // this attempt only met the deadline
		}
		// Lost connections are bounded by time, the rest by attempts: a
		// refused connection fails in a millisecond, and forty of those
		// would not outlast a restart.
		spent := isLost && time.Since(start) > reconnectFor || !isLost && attempt >= maxAttempts
		if err == nil || spent || !retryable(err) || ctx.Err() != nil {
			if isLost {
				return lost.err
			}
			if spent && retryable(err) {
				// Every attempt lost to another transaction (a lock held
				// past lock_timeout, a serialization failure, a deadlock):
				// each was rolled back, so nothing was done, and the same
				// request may succeed once the contention passes.
				// storage.ErrContended tells it from an outage.
				return storeUnavailable("the database refused the change for contention on every attempt (a lock held elsewhere, a serialization failure or a deadlock)",
					fmt.Errorf("%w: %w", storage.ErrContended, err))
			}
			return readOnlyUnavailable(err)
		}
		pause := time.Duration(rand.IntN(min(attempt*5, 50))+1) * time.Millisecond
		if isLost {
			pause = 50*time.Millisecond + time.Duration(rand.IntN(50))*time.Millisecond
			if d, ok := ctx.Deadline(); ok && time.Until(d) < pause {
				return lost.err // the next attempt could not begin in time
			}
		}
		time.Sleep(pause)
	}
}

func (s *Store) once(ctx context.Context, opts pgx.TxOptions, writable bool, held heldTurns, fn func(storage.Tx) error) (err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		if s.closed.Load() {
			return storage.ErrClosed
		}
		if ctx.Err() != nil {
			return storage.WaitEnded(ctx, err) // every connection busy: nothing was sent
		}
		// No connection, so nothing was sent: the database is down or
		// restarting. Tried again for a moment, then answered as such.
		return &connLost{storeUnavailable("the database cannot be reached", err)}
	}
	defer conn.Release()
	var setup []string
	if writable && s.syncCommit {
		setup = append(setup, setSyncCommit)
	}
	w := newWire(ctx, s.pool, conn, opts, setup...)
	t := &tx{ctx: ctx, tx: w, now: s.clock().UTC(), writable: writable, decoded: s.decoded, decodedMerchants: &s.merchants,
		shared: &s.turns, held: held, outboxSkipScans: &s.outboxSkipScans}
	if writable {
		t.merchants = make(map[string][]byte)
		t.locked = make(map[string]int64)
		t.unusedKeys = make(map[string]bool)
	}
	defer func() {
		if p := recover(); p != nil {
			w.rollback()
			err = fault.Internalf(fmt.Errorf("panic: %v\n%s", p, debug.Stack()), "panic in transaction")
		}
	}()
	err = fn(t)
	if t.missedTurn != "" {
		// Whatever fn made of takeTurn's error, the attempt ends here: it
		// holds no lock of the row, and runs again with its turn.
		w.rollback()
		return &turnTaken{t.missedTurn}
	}
	if err != nil {
		w.rollback()
		var h *heldErr
		if errors.As(err, &h) {
			err = h.err
		}
		if ctx.Err() != nil && (fault.Is(err, fault.Internal) || queryCanceled(err)) {
			// The caller's context ended a statement (a lock wait, a
			// database that does not answer) before COMMIT was sent: the
			// transaction is rolled back, or its connection dropped, so
			// nothing was written. An error of fn's own kind stands.
			return storage.WaitEnded(ctx, err)
		}
		if conn.Conn().IsClosed() {
			// COMMIT was never sent, and the server rolls back a
			// transaction whose connection is gone: nothing was written.
			return &connLost{err}
		}
		return err
	}
	if err := w.commit(); err != nil {
		w.rollback()
		var lost *connLost
		if errors.As(err, &lost) {
			return err // COMMIT never ran (wire.commit)
		}
		return dbErr(err, "commit")
	}
	for _, f := range t.afterCommit {
		f()
	}
	return nil
}

// retryable: the transaction lost to another one, or its connection broke
// before COMMIT, and may simply run again. 55P03 is a NOWAIT lock that was
// held (see GetOrder): the holder may be waiting for this transaction, so
// this one steps back instead.
func retryable(err error) bool {
	var lost *connLost
	if errors.As(err, &lost) {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01" || pe.Code == "55P03")
}

// readOnlyUnavailable answers a write the database refused as read-only
// (25006: a standby the address points at during a failover, or
// default_transaction_read_only) as store_unavailable, 503 with Retry-After,
// rather than an internal error: the refusal aborted the transaction, so
// nothing was written, and the same request succeeds once the address
// reaches the primary again.
func readOnlyUnavailable(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "25006" {
		return err
	}
	return storeUnavailable("the database is read-only (a standby?)", err)
}

// storeUnavailable is the error of a transaction the database did not let
// happen (why says how): nothing was written, and the same request may be
// sent again shortly (503 store_unavailable with Retry-After).
func storeUnavailable(why string, err error) *fault.Error {
	return &fault.Error{Kind: fault.Unavailable, Code: "store_unavailable", Message: why + "; nothing was done, retry shortly", Err: err}
}

// connLost is the error of a transaction whose connection broke before its
// COMMIT was sent: a pooled connection the server closed while it sat idle
// (a restart, pg_terminate_backend, a proxy's idle timeout), or one cut
// mid-transaction. The server rolled it back, so it runs again on another
// connection rather than answering 500 for a request a retry would serve.
type connLost struct{ err error }

func (e *connLost) Error() string { return e.err.Error() }
func (e *connLost) Unwrap() error { return e.err }

// errLostRace makes the whole transaction run again: what it read changed
// before it wrote (see PutMerchant).
var errLostRace = &pgconn.PgError{Code: "40001", Message: "a row read in this transaction changed; retrying"}

// statementCancelled explains a 57014 kassa did not ask for.
const statementCancelled = "the database cancelled a statement (its statement_timeout?)"

// queryCanceled reports whether the database cancelled a statement of the
// transaction (57014): its statement_timeout, or a cancel request.
func queryCanceled(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "57014"
}

// dbErr turns a database error into a fault: a unique violation is a
// Conflict; text PostgreSQL cannot hold (NUL, invalid UTF-8), which neither
// matches a stored value nor may be stored, is Invalid; a statement the
// database cancelled, or a disk with no room, is Unavailable; anything else
// is Internal. The cause
// is kept for errors.As.
func dbErr(err error, what string) error {
	var h *heldErr
	if errors.As(err, &h) {
		return h.err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505":
			return &fault.Error{Kind: fault.Conflict, Code: "conflict", Message: what + ": already exists", Err: err}
		case "22021", "22P05":
			return &fault.Error{Kind: fault.Invalid, Code: "invalid_text",
				Message: "text must be valid UTF-8 without NUL characters", Err: err}
		case "57014":
			// A statement_timeout of the database or role (a DBA's bound,
			// which kassa leaves in place: docs/postgres.md) ended a
			// statement, most often a wait for a lock another transaction
			// holds, or an operator cancelled it. The transaction is
			// aborted, so nothing is written, and the same request may
			// succeed once the lock is free. One cancelled by the caller's
			// context is told apart in once (storage.WaitEnded); the commit
			// cancelled past commitTimeout, in wire.commit.
			return storeUnavailable(statementCancelled, err)
		case "53100":
			// disk_full: a table, an index or a temporary file could not
			// grow. The error aborted the transaction (a COMMIT after it
			// is answered ROLLBACK), so nothing is written, and the same
			// request succeeds once space is freed: as the bbolt store's
			// full disk, not an internal error. (A write-ahead log with
			// no room is not this error: the server stops, and the
			// connection is lost.)
			return storeUnavailable("the database's disk is full", err)
		}
	}
	return fault.Internalf(err, "postgres: %s", what)
}

// tx is one transaction. Its methods use the context of the Update or View.
type tx struct {
	ctx      context.Context
	tx       *wire
	now      time.Time
	writable bool
	decoded  *ordercache.Decoded
	// decodedMerchants is the store's cache of decoded merchants.
	decodedMerchants *storage.MerchantCache
	// claimed: this transaction holds background-work rows (DueTasks), so it
	// must not wait for an order lock (see GetOrder).
	claimed bool
	// merchants holds, in a writable transaction, the bodies of the
	// merchants it read (so that PutMerchant writes only over what it read)
	// and, as "client:<id>", the client ids it found unused.
	merchants map[string][]byte
	// locked maps "merchant/order" to the version at which this transaction
	// holds the order's row lock (it read the row FOR UPDATE, or created or
	// updated it): an update of that version cannot miss its row, so it is
	// held back to the next round trip (see UpdateOrder).
	locked map[string]int64
	// unusedKeys holds the "merchant/key" idempotency keys this transaction
	// found unused while holding their advisory lock: no one else can store
	// them before it ends, so their record is held back too.
	unusedKeys map[string]bool
	// afterCommit runs once the transaction committed.
	afterCommit []func()
	// shared is the store's turns of shared rows; held, those this attempt
	// has; missedTurn, one another transaction had (turns.go).
	shared     *turns
	held       heldTurns
	missedTurn string
	// customPlans: this transaction plans each statement for its values
	// (planForValues).
	customPlans bool
	// outboxSkipScans is the store's count of skip-scanning claims.
	outboxSkipScans *atomic.Int64
}

var errReadOnly = fault.Internalf(nil, "write in a read-only transaction")

func (t *tx) Now() time.Time { return t.now }

// SharedNow is the database server's time, which every replica reads alike
// (storage.SharedClock); a delivery's lease is set and judged on it.
func (t *tx) SharedNow() (time.Time, error) {
	var now time.Time
	if _, err := t.scanRow("read the database's clock", `SELECT clock_timestamp()`, nil, &now); err != nil {
		return time.Time{}, err
	}
	return now, nil
}

// planForValues makes the rest of the transaction plan each statement for
// the values it is sent with, for the lists, whose best plan depends on
// them (a merchant of 400 000 orders or of 2 000, a status most of its
// orders have or few). pgx prepares a statement once per connection, and
// after five executions PostgreSQL may go on with a plan made without the
// values, estimated for an average merchant: a list filter then kept one
// merchant's plan for every other (a status filter of the big merchant of
// a million-order store: 760 ms instead of 0.35 ms; docs/postgres.md). The
// SET is held like a write: a list's query flushes it first, with BEGIN
// when the list is the transaction's first statement (as in a GET), so it
// adds no round trip there. Through a pooler
// in transaction mode (cache_describe) each statement is planned anew
// already; LOCAL ends with the transaction either way.
func (t *tx) planForValues() {
	if t.customPlans {
		return
	}
	t.customPlans = true
	t.tx.held = append(t.tx.held, heldWrite{sql: `SET LOCAL plan_cache_mode = force_custom_plan`,
		fail: func(err error) error { return dbErr(err, "plan for values") }})
}

// later holds back a statement whose only outcomes are success or an error
// (a write, or a lock to take before the next read), to be sent with the
// transaction's next statement or its commit; fail maps its error (nil:
// dbErr with what). Its error is then returned there.
func (t *tx) later(what string, fail func(error) error, sql string, args ...any) error {
	if !t.writable {
		return errReadOnly
	}
	if fail == nil {
		fail = func(err error) error { return dbErr(err, what) }
	}
	t.tx.held = append(t.tx.held, heldWrite{sql: sql, args: args, fail: fail})
	return nil
}

func (t *tx) exec(what, sql string, args ...any) (int64, error) {
	if !t.writable {
		return 0, errReadOnly
	}
	tag, err := t.tx.Exec(t.ctx, sql, args...)
	if err != nil {
		return 0, dbErr(err, what)
	}
	return tag.RowsAffected(), nil
}

// body reads one bytea column; ok is false when no row matched.
func (t *tx) body(what, sql string, args ...any) ([]byte, bool, error) {
	var b []byte
	ok, err := t.scanRow(what, sql, args, &b)
	return b, ok, err
}

// scanRow reads the one row sql selects into dest; false when there is none.
// An argument with text PostgreSQL cannot hold matches no row and is not
// sent: the server would refuse it and abort the whole transaction, so a
// caller that goes on to look elsewhere (a session by id, then by order id)
// would fail.
func (t *tx) scanRow(what, sql string, args []any, dest ...any) (bool, error) {
	if slices.ContainsFunc(args, cannotHold) {
		return false, nil
	}
	err := t.tx.QueryRow(t.ctx, sql, args...).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, dbErr(err, what) // an earlier held write's error passes as it is
	}
	return true, nil
}

// cannotHold reports whether v is text PostgreSQL cannot store or compare.
func cannotHold(v any) bool {
	switch v := v.(type) {
	case string:
		return cannotHoldText(v)
	case *string:
		return v != nil && cannotHoldText(*v)
	case []string:
		return slices.ContainsFunc(v, cannotHoldText)
	}
	return false
}

func cannotHoldText(s string) bool { return !order.Storable(s) }

// bodies reads the bytea column of every row.
func (t *tx) bodies(what, sql string, args ...any) ([][]byte, error) {
	return collect(t, what, pgx.RowTo[[]byte], sql, args...)
}

// collect reads every row sql selects, each through scan. As in scanRow,
// an argument with text PostgreSQL cannot hold matches no row.
func collect[T any](t *tx, what string, scan pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	if slices.ContainsFunc(args, cannotHold) {
		return nil, nil
	}
	rows, err := t.tx.Query(t.ctx, sql, args...)
	if err != nil {
		return nil, dbErr(err, what)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, dbErr(err, what)
	}
	return out, nil
}

// forUpdate is the clause that locks a row read in an Update until commit,
// so that the transaction's later write is based on the latest value and a
// concurrent one (on any replica) waits for it: a single-use token or a
// session is then consumed once.
func (t *tx) forUpdate() string {
	if t.writable {
		return " FOR UPDATE"
	}
	return ""
}

// lockFor is the clause that claims rows for background work: inside an
// Update, rows another transaction holds are skipped, not waited for.
func (t *tx) lockFor() string {
	if t.writable {
		return " FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// advisoryKey maps a name to a 64-bit advisory lock id.
func advisoryKey(parts ...string) int64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	return int64(h.Sum64())
}

// advisoryLock takes the transaction advisory lock key ahead of the
// transaction's next statement: it goes in that statement's round trip and
// runs first, so the statement's snapshot is taken once the lock is granted.
func (t *tx) advisoryLock(key int64) error {
	return t.later("advisory lock", nil, `SELECT pg_advisory_xact_lock($1)`, key)
}

// kindLock takes the store's transaction advisory lock kind of this schema,
// the way advisoryLock does.
func (t *tx) kindLock(kind lockKind) error {
	return t.later("advisory lock", nil, `SELECT pg_advisory_xact_lock($1, `+schemaKey+`)`, kind)
}

func timeKey(at time.Time) []byte { return storage.AppendTimeKey(nil, at) }

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

var (
	_ storage.Store = (*Store)(nil)
	_ storage.Tx    = (*tx)(nil)
)
