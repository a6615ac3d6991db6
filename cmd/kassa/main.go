// Command kassa is the reference server of the kassa payment library: one
// static binary that serves the /v1 interface over an embedded bbolt store
// (or PostgreSQL, for several replicas), as a sandbox on a laptop or in CI,
// or in production.
//
//	kassa serve                                             run the server (defaults: 127.0.0.1:8080, ./kassa-data)
//	kassa companies import --country SE file.csv            replace a country's companies in the search directory
//	kassa settle [--data DIR] [--store S --database-url U]  run settlements now (the server also runs them daily)
//	kassa store copy --data DIR --database-url U            move a stopped bolt deployment to PostgreSQL
//	kassa store check --data DIR                            verify a stopped server's bolt store, writing nothing
//	kassa store rekey [--data DIR] [--store S --database-url U]  let a stopped server's store take another signing key
//	kassa version                                           print the version
//	kassa help                                              print usage
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/company"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/internal/durable"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/server"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/postgres"
)

// Version is set at build time with -ldflags "-X main.Version=…".
var Version = "0.1.0-dev"

const usage = `kassa — B2B payments, checkout and order management

Usage:
  kassa serve [flags]                                     run the reference server
  kassa companies import --country SE [--data DIR] FILE   import a company directory (CSV: companyId,companyName)
  kassa settle [--data DIR] [--store S --database-url U]  run settlements now (the server also runs them daily)
  kassa store copy --data DIR --database-url U            copy a stopped server's bolt store into an empty PostgreSQL database
  kassa store check --data DIR                            verify a stopped server's bolt store (pages, records, indexes, orders, series)
  kassa store rekey [--data DIR] [--store S --database-url U]  let a stopped server's store take another signing key (KASSA_KEY)
  kassa version                                           print the version
  kassa help                                              print this help

Flags of serve (each also read from the environment variable shown):
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		serveFlags(new(serveConfig)).PrintDefaults()
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "companies":
		return companies(args[1:], stdout, stderr)
	case "settle":
		return settle(args[1:], stdout, stderr)
	case "store":
		return storeCommand(args[1:], stdout, stderr)
	case "version", "--version", "-v":
		// Every other command refuses what it does not take; a script's
		// "kassa version --json" must not pass as if it were understood.
		// Its help succeeds as theirs does ("kassa help version").
		if len(args) == 2 && isHelp(args[1]) {
			fmt.Fprintln(stdout, "usage: kassa version (prints the version)")
			return 0
		}
		if len(args) > 1 {
			fmt.Fprintf(stderr, "kassa version: unexpected argument %q\n", args[1])
			return 2
		}
		fmt.Fprintf(stdout, "kassa %s\n", Version)
		return 0
	case "help", "--help", "-h":
		// "kassa help settle" is settle's own help, as "kassa settle --help".
		if len(args) > 1 && !isHelp(args[1]) {
			return run(append(slices.Clone(args[1:]), "--help"), stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		fs := serveFlags(new(serveConfig))
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0
	default:
		fmt.Fprintf(stderr, "kassa: unknown command %q (try kassa help)\n", args[0])
		return 2
	}
}

const companiesUsage = "usage: kassa companies import --country SE [--data DIR] FILE"

// isHelp reports whether arg asks for help, as "kassa help" and every
// command's -h and --help do.
func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "--help", "-help":
		return true
	}
	return false
}

// parseFlags parses a command's flags and tells whether the command stops
// there, with its exit code: -h and --help print the flags and succeed (as
// "kassa help" does); a bad flag is a usage error.
func parseFlags(fs *flag.FlagSet, args []string) (code int, done bool) {
	switch err := fs.Parse(args); {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		return 0, true
	default:
		return 2, true
	}
}

// noArguments reports whether the command line held nothing after its
// flags, and says what it held otherwise. Parsing stops at the first
// argument that is no flag, so "--sandbox false" would leave "false" and
// every flag after it unread: the server would start with the sandbox on,
// and on the default store if --store followed.
func noArguments(fs *flag.FlagSet, stderr io.Writer) bool {
	if fs.NArg() == 0 {
		return true
	}
	fmt.Fprintf(stderr, "kassa %s: unexpected argument %q, and the flags after it were not read (a boolean flag takes its value after \"=\": --sandbox=false)\n",
		fs.Name(), fs.Arg(0))
	return false
}

// parseStoreCommand parses the flags of a command that works on either
// store (settle, store rekey): --data, --store and --database-url, each
// checked, the URL's password hidden from the usage. done, with the exit
// code, when the command ends here, which is said on stderr.
func parseStoreCommand(name string, args []string, stderr io.Writer, dataUsage, urlUsage string) (data, kind, dbURL *string, code int, done bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	data = fs.String("data", envDefault("data", "./kassa-data"), dataUsage)
	kind = fs.String("store", envDefault("store", "bolt"), "bolt or postgres (KASSA_STORE)")
	dbURL = fs.String("database-url", envDefault("database-url", ""), urlUsage)
	hideSecrets(fs)
	if code, done := parseDataCommand(fs, args, data); done {
		return nil, nil, nil, code, true
	}
	if err := checkStore(*kind, *dbURL); err != nil {
		fmt.Fprintf(stderr, "kassa: %v\n", err)
		return nil, nil, nil, 2, true
	}
	return data, kind, dbURL, 0, false
}

// parseDataCommand parses the flags of a command that takes flags only,
// one of them the data directory: done, with the exit code, when the
// command ends here (help, a flag or an argument it does not take, an
// empty --data), each said on the flag set's output.
func parseDataCommand(fs *flag.FlagSet, args []string, data *string) (code int, done bool) {
	if code, done := parseFlags(fs, args); done {
		return code, true
	}
	if !noArguments(fs, fs.Output()) || !dataGiven(*data, fs.Output()) {
		return 2, true
	}
	return 0, false
}

// dataGiven reports whether --data names a directory, and says otherwise:
// an empty one (KASSA_DATA set to nothing by a template) would be the
// working directory, where a store, key or companies would be looked for
// or made as if it were the data directory.
func dataGiven(data string, stderr io.Writer) bool {
	if data != "" {
		return true
	}
	fmt.Fprintln(stderr, "kassa: --data (KASSA_DATA) is empty; give the data directory, e.g. ./kassa-data")
	return false
}

type serveConfig struct {
	addr, data, clientID, clientSecret, tlsCert, tlsKey, baseURL string
	opsAddr, backupToken                                         string
	sandbox                                                      bool
	// badSandboxEnv: KASSA_SANDBOX held no boolean, which --sandbox would
	// refuse too (read as false, it would turn the sandbox off silently).
	badSandboxEnv                            bool
	logLevel                                 string
	settleAt                                 string
	webhookURL, webhookSecret, webhookEvents string
	store, databaseURL                       string
	orderCacheMB                             int
	maxConnections                           int
	cpuProfile                               string
	idempotencyTTL                           string
	notificationRetention                    string
	authorizationRetention                   string
	maxBodyMB                                int
	bodyMemoryMB                             int
	storeTimeout                             string
	shutdownDelay                            string
	startTimeout                             string
	trustedProxies                           string
}

// envInt reads KASSA_<NAME> as a whole-number flag's default; one that is no
// number gives math.MinInt, which every such flag's range check refuses,
// naming the flag and its variable.
func envInt(name string, def int) int {
	n, err := strconv.Atoi(envDefault(name, strconv.Itoa(def)))
	if err != nil {
		return math.MinInt
	}
	return n
}

// durationIn parses the value of the duration flag name, which must lie
// from lo to hi; otherwise it says so on stderr, with an example.
func durationIn(stderr io.Writer, name, value, lo, hi, example string) (time.Duration, bool) {
	d, err := time.ParseDuration(value)
	least, _ := time.ParseDuration(lo)
	most, _ := time.ParseDuration(hi)
	if err != nil || d < least || d > most {
		fmt.Fprintf(stderr, "kassa: bad --%s %q (%s): want a duration from %s to %s, e.g. %s\n", name, value, envName(name), lo, hi, example)
		return 0, false
	}
	return d, true
}

// envName is the environment variable of the flag name: KASSA_<NAME>.
func envName(name string) string {
	return "KASSA_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// envDefault reads KASSA_<NAME> as a flag's default.
func envDefault(name, def string) string {
	if v, ok := os.LookupEnv(envName(name)); ok {
		return v
	}
	return def
}

// secretFlags take secrets: a client secret, a token, a database URL with
// its password.
var secretFlags = []string{"client-secret", "backup-token", "webhook-secret", "database-url"}

// hideSecrets masks the defaults that fs's secret flags took from the
// environment: the usage, printed by -h and after every mistyped flag, to a
// stderr that goes to the logs, showed them whole. "xxxxx" still says that
// one is set.
func hideSecrets(fs *flag.FlagSet) *flag.FlagSet {
	for _, name := range secretFlags {
		if f := fs.Lookup(name); f != nil && f.DefValue != "" {
			f.DefValue = "xxxxx"
		}
	}
	// A URL with a password is refused at start, which shows it as xxxxx;
	// the usage would otherwise show it whole.
	for _, name := range []string{"base-url", "webhook-url"} {
		if f := fs.Lookup(name); f != nil && strings.Contains(f.DefValue, "@") {
			r, ok := redactURL(f.DefValue)
			if !ok {
				r = "xxxxx"
			}
			f.DefValue = r
		}
	}
	return fs
}

// flagSet reports whether the command line gave the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func serveFlags(c *serveConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", envDefault("addr", "127.0.0.1:8080"), "listen address (KASSA_ADDR)")
	fs.StringVar(&c.opsAddr, "ops-addr", envDefault("ops-addr", ""), "listen address of the operations endpoints, plain HTTP for an internal network: /metrics, /healthz, /readyz, and /backup with --backup-token; when set, --addr answers /metrics 404 (the health routes stay on it too); default none: /metrics is served on --addr (KASSA_OPS_ADDR)")
	fs.StringVar(&c.backupToken, "backup-token", envDefault("backup-token", ""), "a secret of at least 24 characters that serves GET /backup on --ops-addr to a request sending it as 'Authorization: Bearer …' (bolt: a tar of the data directory's state, signing key included, taken while serving); default none: no /backup. Prefer the environment variable: a flag shows in the process list (KASSA_BACKUP_TOKEN)")
	fs.StringVar(&c.data, "data", envDefault("data", "./kassa-data"), "data directory; the store is DATA/kassa.db (KASSA_DATA)")
	fs.StringVar(&c.clientID, "client-id", envDefault("client-id", ""), "create or keep the sandbox merchant with this client id (KASSA_CLIENT_ID)")
	fs.StringVar(&c.clientSecret, "client-secret", envDefault("client-secret", ""), "secret for --client-id, at least 12 characters (KASSA_CLIENT_SECRET)")
	fs.StringVar(&c.tlsCert, "tls-cert", envDefault("tls-cert", ""), "TLS certificate file; serve HTTPS when set with --tls-key (KASSA_TLS_CERT)")
	fs.StringVar(&c.tlsKey, "tls-key", envDefault("tls-key", ""), "TLS private key file (KASSA_TLS_KEY)")
	fs.StringVar(&c.baseURL, "base-url", envDefault("base-url", ""), "public base URL used in links (KASSA_BASE_URL); default http(s)://ADDR")
	sb, err := strconv.ParseBool(envDefault("sandbox", "true"))
	c.badSandboxEnv = err != nil
	fs.BoolVar(&c.sandbox, "sandbox", sb, "enable /sandbox/v1: test clock, buyer simulation, fixtures (KASSA_SANDBOX)")
	fs.StringVar(&c.logLevel, "log-level", envDefault("log-level", "info"), "debug, info, warn or error (KASSA_LOG_LEVEL)")
	fs.StringVar(&c.trustedProxies, "trusted-proxies", envDefault("trusted-proxies", ""), "comma-separated networks (CIDR) or addresses of the reverse proxies or load balancers in front of the server, whose X-Forwarded-For names the client for the per-address limits of company search and checkout; default none (KASSA_TRUSTED_PROXIES)")
	fs.StringVar(&c.settleAt, "settle-at", envDefault("settle-at", "02:00"), "daily settlement run time, HH:MM UTC on the server's clock (KASSA_SETTLE_AT)")
	fs.StringVar(&c.store, "store", envDefault("store", "bolt"), "bolt (one file in --data) or postgres (--database-url; several replicas may share it) (KASSA_STORE)")
	fs.StringVar(&c.databaseURL, "database-url", envDefault("database-url", ""), "PostgreSQL URL for --store postgres, e.g. postgres://user:pw@host/db (KASSA_DATABASE_URL)")
	fs.StringVar(&c.webhookURL, "webhook-url", envDefault("webhook-url", ""), "notification URL of the sandbox merchant (KASSA_WEBHOOK_URL)")
	fs.StringVar(&c.webhookSecret, "webhook-secret", envDefault("webhook-secret", ""), "signing secret for --webhook-url, at least 24 characters; default: made once and printed (KASSA_WEBHOOK_SECRET)")
	fs.StringVar(&c.webhookEvents, "webhook-events", envDefault("webhook-events", "order.*"), "comma-separated topics for --webhook-url (KASSA_WEBHOOK_EVENTS)")
	fs.IntVar(&c.orderCacheMB, "order-cache-mb", envInt("order-cache-mb", 64), "memory for the order caches (decoded orders, and responses served to GET /v1/orders/{id}; half each), in MiB; 0 turns them off (KASSA_ORDER_CACHE_MB)")
	fs.IntVar(&c.maxConnections, "max-connections", envInt("max-connections", 4096), "connections held open at once; past it, an idle one, or one silent for a second since it was opened, is closed to make room, or new ones wait in the kernel's backlog (KASSA_MAX_CONNECTIONS)")
	fs.IntVar(&c.maxBodyMB, "max-body-mb", envInt("max-body-mb", 1), "largest request body in MiB, 1 to 64; 1000 order lines of long non-ASCII text, or a client that escapes it as \\uXXXX, can need 2 to 5 (KASSA_MAX_BODY_MB)")
	fs.IntVar(&c.bodyMemoryMB, "body-memory-mb", envInt("body-memory-mb", 16), "request bodies held decoded at once, in MiB of the bytes read (a body larger than all of it takes all of it), from 1 to 1048576: a request waits for its share once its body is read and before it is decoded, and one that has not got it when --store-timeout passes is answered 503 server_busy with nothing done; it bounds the memory of requests being decoded and waiting for the store, up to twenty times their bodies, not bodies still arriving (KASSA_BODY_MEMORY_MB)")
	fs.StringVar(&c.idempotencyTTL, "idempotency-ttl", envDefault("idempotency-ttl", "24h"), "how long an Idempotency-Key is remembered, from 1h to 720h (KASSA_IDEMPOTENCY_TTL)")
	fs.StringVar(&c.notificationRetention, "notification-retention", envDefault("notification-retention", "720h"), "how long the delivery log keeps a delivered or failed notification, from its creation, from 24h to 87600h; pending ones are kept however old (KASSA_NOTIFICATION_RETENTION)")
	fs.StringVar(&c.authorizationRetention, "authorization-retention", envDefault("authorization-retention", "720h"), "how long an authorization token is kept past its expiry, used or not, from --idempotency-ttl to 87600h (KASSA_AUTHORIZATION_RETENTION)")
	fs.StringVar(&c.storeTimeout, "store-timeout", envDefault("store-timeout", "10s"), "longest a request waits for the store (a free database connection, a lock another request holds), from 1s to 30s; past it, it is answered 503 store_unavailable with nothing done, while a commit already sent is still waited for (KASSA_STORE_TIMEOUT)")
	fs.StringVar(&c.shutdownDelay, "shutdown-delay", envDefault("shutdown-delay", "0s"), "on SIGTERM, how long /readyz answers 503 draining while every request is still served, before the server stops listening: a load balancer polling /readyz stops sending requests here first; from 0s to 5m, e.g. twice the balancer's health-check interval (KASSA_SHUTDOWN_DELAY)")
	fs.StringVar(&c.startTimeout, "start-timeout", envDefault("start-timeout", "1m"), "--store postgres: longest the start waits for the database, from 1s to 1h: a database not reachable yet (started with kassa) is tried again with backoff, each failure logged, and another replica's migration is waited for; past it, serve exits 1 (KASSA_START_TIMEOUT)")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "diagnostics: write a CPU profile of the whole run to this file")
	return hideSecrets(fs)
}

// envKey is the key KASSA_KEY gives, nil when it is not set.
func envKey() ([]byte, error) {
	v := os.Getenv("KASSA_KEY")
	if v == "" {
		return nil, nil
	}
	k, err := hex.DecodeString(v)
	if err != nil || len(k) < 32 {
		// hex.DecodeString refuses an odd count too: say so, or a
		// 65-digit key reads as refused for being short.
		return nil, errors.New("KASSA_KEY must be an even number of hex digits, at least 64")
	}
	return k, nil
}

// loadKey reads the server's signing key from DATA/server.key, creating it on
// first start. KASSA_KEY (at least 64 hex digits) overrides it. On PostgreSQL the
// replicas then agree on one key through the database (Store.SigningKey).
func loadKey(dir string) ([]byte, error) {
	k, _, err := loadOrMakeKey(dir)
	return k, err
}

// loadOrMakeKey is loadKey, and whether it made DATA/server.key.
func loadOrMakeKey(dir string) (key []byte, made bool, err error) {
	if k, err := envKey(); k != nil || err != nil {
		return k, false, err
	}
	path := filepath.Join(dir, "server.key")
	if k, err := readKeyFile(path); !errors.Is(err, fs.ErrNotExist) {
		return k, false, err // there, but unreadable or bad: never a new key in its place
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, false, err
	}
	// Durably: links and tokens signed with a key lost in a crash would be
	// refused. Created only if absent: of two servers starting at once on
	// an empty directory, the second reads the first one's key instead of
	// replacing it under the one already serving.
	created, err := durable.CreateFile(path, []byte(hex.EncodeToString(k)+"\n"), 0o600)
	if err != nil {
		return nil, false, err
	}
	if !created {
		return loadOrMakeKey(dir)
	}
	return k, true, nil
}

// boltSigningKey checks key, the key serve signs with, against the one the
// bolt store's server signed with before (its check value, recorded at the
// first start: bolt.Store.SigningKey), as a PostgreSQL database's replicas
// are checked: a start with another key would serve, and refuse every
// access token, document link and checkout link given out before. The
// refusal says which key the store was signed with, where it can tell.
//
// made says this start made server.key, there being none: refused, it is
// removed again, so that the directory is left as the start found it and
// no key that nothing was signed with reads as the lost one.
func boltSigningKey(st *bolt.Store, key []byte, data string, made bool) error {
	err := st.SigningKey(key)
	if !errors.Is(err, bolt.ErrOtherSigningKey) {
		return err
	}
	const change = "to change keys on purpose, stop the server and run kassa store rekey first (README, KASSA_KEY)"
	path := filepath.Join(data, "server.key")
	if made {
		if rerr := os.Remove(path); rerr != nil {
			return fmt.Errorf("%s was missing, and the key this start made in its place is not the one this store's links and tokens were signed with; removing it failed: %v; put server.key back from a backup, or set the KASSA_KEY the server had; %s", path, rerr, change)
		}
		return fmt.Errorf("%s was missing, and the key this start made in its place is not the one this store's links and tokens were signed with, so it removed it again: put server.key back from a backup, or set the KASSA_KEY the server had; %s", path, change)
	}
	if os.Getenv("KASSA_KEY") == "" {
		return fmt.Errorf("%s is not the key this store's links and tokens were signed with: if the server was given KASSA_KEY, set the same KASSA_KEY; if server.key was lost, put it back from a backup; %s", path, change)
	}
	if own, ferr := readKeyFile(path); ferr == nil && st.SigningKey(own) == nil {
		return fmt.Errorf("KASSA_KEY differs from %s, the key this store's links and tokens were signed with: unset KASSA_KEY to use it; %s", path, change)
	}
	return fmt.Errorf("KASSA_KEY differs from the key this store's links and tokens were signed with (the store keeps a check value of it): set the KASSA_KEY the server had; %s", change)
}

// readKeyFile reads a signing key file (DATA/server.key); an error wrapping
// fs.ErrNotExist when there is none.
func readKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(k) < 32 {
		return nil, fmt.Errorf("%s is not a valid key", path)
	}
	return k, nil
}

func serve(args []string, stdout, stderr io.Writer) int {
	var c serveConfig
	fs := serveFlags(&c)
	fs.SetOutput(stderr)
	if code, done := parseDataCommand(fs, args, &c.data); done {
		return code
	}
	if c.addr == "" {
		// net.Listen takes "" as ":0": every interface, on a port of the
		// kernel's choosing, where the default is the loopback only.
		fmt.Fprintln(stderr, "kassa: --addr (KASSA_ADDR) is empty; give host:port, e.g. 127.0.0.1:8080 (\":8080\" listens on every interface)")
		return 2
	}
	if err := checkListenAddr(c.addr, "127.0.0.1:8080"); err != nil {
		fmt.Fprintf(stderr, "kassa: bad --addr %q (KASSA_ADDR): %v\n", c.addr, err)
		return 2
	}
	if err := checkOpsAddr(c.opsAddr, c.addr); err != nil {
		fmt.Fprintf(stderr, "kassa: bad --ops-addr %q (KASSA_OPS_ADDR): %v\n", c.opsAddr, err)
		return 2
	}
	settleAt, err := time.Parse("15:04", c.settleAt)
	if err != nil {
		fmt.Fprintf(stderr, "kassa: bad --settle-at %q (want HH:MM)\n", c.settleAt)
		return 2
	}
	// Shorter than a client's retry window would let a retried capture run
	// twice; longer only grows the store.
	idempotencyTTL, ok := durationIn(stderr, "idempotency-ttl", c.idempotencyTTL, "1h", "720h", "48h")
	if !ok {
		return 2
	}
	// Under a day, a merchant could find a notification gone before it
	// had a look at why it failed; the schedule itself ends within 15 h.
	notificationRetention, ok := durationIn(stderr, "notification-retention", c.notificationRetention, "24h", "87600h", "2160h")
	if !ok {
		return 2
	}
	// Never below the Idempotency-Key's retention: a create-order retried
	// once its key is gone must still find the token, to learn which order
	// it made (docs/decisions.md), where kassa.New would silently raise it.
	authorizationRetention, ok := durationIn(stderr, "authorization-retention", c.authorizationRetention, "1h", "87600h", "2160h")
	if !ok {
		return 2
	}
	if authorizationRetention < idempotencyTTL {
		fmt.Fprintf(stderr, "kassa: bad --authorization-retention %q (%s): want at least --idempotency-ttl (%s), up to 87600h\n",
			c.authorizationRetention, envName("authorization-retention"), idempotencyTTL)
		return 2
	}
	// Under a second, a request would fail behind an ordinary busy moment;
	// over 30 s, with the 25 s a commit may still take (PostgreSQL: 15 s,
	// 5 s for its cancel, 5 s to settle a lost answer), its answer could
	// miss the 60 s write timeout.
	storeTimeout, ok := durationIn(stderr, "store-timeout", c.storeTimeout, "1s", "30s", "10s")
	if !ok {
		return 2
	}
	startTimeout, ok := durationIn(stderr, "start-timeout", c.startTimeout, "1s", "1h", "1m")
	if !ok {
		return 2
	}
	// Past a few minutes an orchestrator has long since killed the process
	// (Kubernetes waits 30 s by default).
	shutdownDelay, ok := durationIn(stderr, "shutdown-delay", c.shutdownDelay, "0s", "5m", "10s")
	if !ok {
		return 2
	}
	if c.badSandboxEnv && !flagSet(fs, "sandbox") {
		fmt.Fprintf(stderr, "kassa: bad KASSA_SANDBOX %q (want true or false)\n", os.Getenv("KASSA_SANDBOX"))
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		fmt.Fprintf(stderr, "kassa: bad --log-level %q\n", c.logLevel)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	if (c.tlsCert == "") != (c.tlsKey == "") {
		fmt.Fprintln(stderr, "kassa: --tls-cert and --tls-key go together")
		return 2
	}
	// The pair is loaded before the store opens and the port is taken, so a
	// bad certificate fails the start instead of following "listening".
	var tlsConfig *tls.Config
	if c.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			if encryptedKey(c.tlsKey) {
				// Go's error says only that the key did not parse.
				fmt.Fprintf(stderr, "kassa: --tls-key: %s is encrypted with a password, which kassa does not ask for: give it the key unencrypted (openssl pkey -in KEY -out PLAIN), readable by its user only\n", c.tlsKey)
				return 1
			}
			fmt.Fprintf(stderr, "kassa: --tls-cert/--tls-key: %v\n", err)
			return 1
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		warnCertificateDates(log, c.tlsCert, cert.Leaf, time.Now())
	}
	if c.baseURL != "" {
		if err := checkBaseURL(c.baseURL); err != nil {
			fmt.Fprintf(stderr, "kassa: bad --base-url%s: %v\n", shownURL(c.baseURL), err)
			return 2
		}
	}
	proxies, err := parseTrustedProxies(c.trustedProxies)
	if err != nil {
		fmt.Fprintf(stderr, "kassa: bad --trusted-proxies (KASSA_TRUSTED_PROXIES): %v\n", err)
		return 2
	}
	if c.orderCacheMB < 0 || c.orderCacheMB > 1<<20 {
		fmt.Fprintln(stderr, "kassa: --order-cache-mb (KASSA_ORDER_CACHE_MB) must be a whole number from 0 (off) to 1048576")
		return 2
	}
	if c.maxBodyMB < 1 || c.maxBodyMB > 64 {
		fmt.Fprintln(stderr, "kassa: --max-body-mb (KASSA_MAX_BODY_MB) must be a whole number from 1 to 64")
		return 2
	}
	// A body larger than the budget takes all of it and is served alone
	// (server.Config.BodyMemory), so no floor above 1 is needed; the bound
	// above is the order cache's, past any machine's memory.
	if c.bodyMemoryMB < 1 || c.bodyMemoryMB > 1<<20 {
		fmt.Fprintln(stderr, "kassa: --body-memory-mb (KASSA_BODY_MEMORY_MB) must be a whole number from 1 to 1048576")
		return 2
	}
	if c.maxConnections < 1 {
		fmt.Fprintln(stderr, "kassa: --max-connections (KASSA_MAX_CONNECTIONS) must be a whole number, at least 1")
		return 2
	}
	if (c.clientID == "") != (c.clientSecret == "") {
		fmt.Fprintln(stderr, "kassa: --client-id and --client-secret go together")
		return 2
	}
	// The secret is all that keeps the merchant's orders from anyone who
	// can reach the server: one a few guesses find would hand them over (a
	// generated one has 32 random characters).
	if c.clientSecret != "" && utf8.RuneCountInString(c.clientSecret) < minClientSecret {
		fmt.Fprintf(stderr, "kassa: --client-secret (KASSA_CLIENT_SECRET) needs at least %d characters; leave out both --client-id and --client-secret to have a merchant with a generated secret made and printed\n", minClientSecret)
		return 2
	}
	// The backup holds the signing key and every merchant's data: a token
	// a few guesses find would hand them over, and one without a listener
	// to serve it on would look set while nothing served it.
	if c.backupToken != "" && utf8.RuneCountInString(c.backupToken) < minBackupToken {
		fmt.Fprintf(stderr, "kassa: --backup-token (KASSA_BACKUP_TOKEN) needs at least %d characters\n", minBackupToken)
		return 2
	}
	// HTTP takes the whitespace around a header's value off and carries no
	// control character, so such a token (a file's trailing newline) would
	// refuse every backup, 401, with nothing saying why.
	if c.backupToken != strings.TrimSpace(c.backupToken) || strings.ContainsFunc(c.backupToken, unicode.IsControl) {
		fmt.Fprintln(stderr, "kassa: --backup-token (KASSA_BACKUP_TOKEN) has whitespace around it or a control character in it, which no request can send in its Authorization header")
		return 2
	}
	if c.backupToken != "" && c.opsAddr == "" {
		fmt.Fprintln(stderr, "kassa: --backup-token (KASSA_BACKUP_TOKEN) serves /backup on the operations listener: give --ops-addr too")
		return 2
	}
	// With no topic the URL would receive nothing while the start looked
	// fine (KASSA_WEBHOOK_EVENTS set to nothing by a template, say).
	if c.webhookURL != "" && len(webhookTopics(c.webhookEvents)) == 0 {
		fmt.Fprintln(stderr, "kassa: --webhook-events (KASSA_WEBHOOK_EVENTS) names no topic for --webhook-url; give e.g. order.*")
		return 2
	}
	// Checked before the store is made: refused after it, an empty store
	// would already hold a sandbox merchant whose generated secret was
	// printed by a start that failed, and not again by the next one.
	if c.webhookURL != "" {
		if err := webhookRequest(c).Validate(); err != nil {
			fmt.Fprintf(stderr, "kassa: --webhook-url: %v\n", err)
			return 2
		}
	}
	if err := checkStore(c.store, c.databaseURL); err != nil {
		fmt.Fprintf(stderr, "kassa: %v\n", err)
		return 2
	}
	// A usage error like the flags': found before the data directory is made.
	if _, err := envKey(); err != nil {
		fmt.Fprintf(stderr, "kassa: %v\n", err)
		return 2
	}
	if err := os.MkdirAll(c.data, 0o700); err != nil {
		fmt.Fprintf(stderr, "kassa: data directory: %v\n", err)
		return 1
	}
	// Writes of these files that a crash cut short left temporaries beside them.
	for _, p := range []string{filepath.Join(c.data, "server.key"), filepath.Join(c.data, "sandbox-clock.json"), filepath.Join(c.data, "kassa.db"), filepath.Join(companiesDir(c.data), "*.csv")} {
		if n, err := durable.RemoveLeftovers(p); err != nil {
			log.Warn("removing leftover temporary files", "path", p, "err", err)
		} else if n > 0 {
			log.Info("removed leftover temporary files", "path", p, "count", n)
		}
	}
	key, madeKey, err := loadOrMakeKey(c.data)
	if err != nil {
		fmt.Fprintf(stderr, "kassa: %v\n", err)
		return 1
	}
	clock := server.NewClock(c.sandbox)
	cacheBytes := int64(c.orderCacheMB) << 19
	if cacheBytes == 0 {
		cacheBytes = -1
	}
	db, err := serveStore(context.Background(), c.store, c.data, c.databaseURL, clock.Now, cacheBytes, 0, log, startTimeout)
	if err != nil {
		fmt.Fprintf(stderr, "kassa: open store: %v\n", err)
		return 1
	}
	defer db.Close()
	// Only once the store is held (bolt: its file lock): a second serve on
	// the directory of a running one would otherwise write back the offset
	// it read, undoing on disk a move the running server made meanwhile.
	// Nothing reads the clock before: the store keeps its Now for later.
	if c.sandbox {
		if err := clock.PersistTo(filepath.Join(c.data, "sandbox-clock.json")); err != nil {
			fmt.Fprintf(stderr, "kassa: %v\n", err)
			return 1
		}
	}
	bs, _ := db.(*bolt.Store)
	if bs != nil {
		// So did a backup, when the process died during one: a whole copy
		// of the store, removed whatever its age, as no other server can
		// be writing one while this one holds the store's lock.
		if n, err := removeBackupSpools(c.data); err != nil {
			log.Warn("removing a backup's leftover spool files", "data", c.data, "err", err)
		} else if n > 0 {
			log.Info("removed a backup's leftover spool files", "data", c.data, "count", n)
		}
	}
	if bs != nil {
		if err := boltSigningKey(bs, key, c.data, madeKey); err != nil {
			fmt.Fprintf(stderr, "kassa: %v\n", err)
			return 1
		}
	}
	pg, _ := db.(*postgres.Store)
	if pg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		key, err = pg.SigningKey(ctx, key, os.Getenv("KASSA_KEY") != "")
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "kassa: %v\n", err)
			return 1
		}
	}

	tcp, err := listenTCP(c.addr)
	if err != nil {
		fmt.Fprintf(stderr, "kassa: listen: %v\n", err)
		return 1
	}
	ln := newLimitListener(tcp, c.maxConnections)
	var opsLn *limitListener
	if c.opsAddr != "" {
		opsTCP, err := listenTCP(c.opsAddr)
		if err != nil {
			tcp.Close()
			fmt.Fprintf(stderr, "kassa: listen on --ops-addr (KASSA_OPS_ADDR): %v\n", err)
			return 1
		}
		opsLn = newLimitListener(opsTCP, opsConnections)
		defer opsLn.Close() // a start that fails after this point
	}
	scheme := "http"
	if c.tlsCert != "" {
		scheme = "https"
	}
	listening := scheme + "://" + ln.Addr().String()
	if c.baseURL == "" {
		c.baseURL = listening
	}
	c.baseURL = strings.TrimRight(c.baseURL, "/")

	dir, err := loadCompanies(c.data)
	if err != nil {
		fmt.Fprintf(stderr, "kassa: company directory: %v\n", err)
		return 1
	}

	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "kassa: --cpuprofile: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	metrics := server.NewMetrics()
	var backup func(io.Writer) error // PostgreSQL's is pg_dump's
	if bs != nil {
		backup = func(w io.Writer) error { return writeBackup(w, c.data, bs) }
	}
	healthy, _ := db.(interface{ Healthy() error }) // bolt's; asked at every readiness probe
	var srv *server.Server
	ledger := kassa.New(server.InstrumentStore(db, metrics), kassa.Options{
		OrderCacheBytes:        cacheBytes,
		IdempotencyTTL:         idempotencyTTL,
		NotificationRetention:  notificationRetention,
		AuthorizationRetention: authorizationRetention,
		DocumentURL:            func(o *order.Order, l *order.Ledger) string { return srv.DocumentURL(o, l) },
		CheckoutURL:            func(merchantID, sessionID string) string { return srv.CheckoutURL(merchantID, sessionID) },
	})
	srv = server.New(server.Config{
		Ledger: ledger, Logger: log, Key: key, BaseURL: c.baseURL, Sandbox: c.sandbox, Clock: clock, MaxBodyBytes: int64(c.maxBodyMB) << 20,
		Metrics: metrics, Version: Version, Companies: dir, Delivery: kassa.DeliveryOptions{AllowPrivateNetworks: c.sandbox},
		StoreTimeout: storeTimeout, BodyMemory: int64(c.bodyMemoryMB) << 20, TrustedProxies: proxies, SeparateOps: opsLn != nil, Backup: backup, BackupToken: c.backupToken,
		Ready: func(ctx context.Context) error {
			// A store that stopped taking writes (bolt, after a commit of
			// unknown outcome) needs a restart, which a supervisor makes
			// of this.
			if healthy != nil {
				if err := healthy.Healthy(); err != nil {
					return err
				}
			}
			// A real read: an empty transaction never reaches PostgreSQL
			// (BEGIN waits for a first statement), so it would stay ready
			// with the database down.
			return db.View(ctx, func(tx storage.Tx) error {
				if _, err := tx.GetMerchant("readyz"); err != nil && !fault.Is(err, fault.NotFound) {
					return err
				}
				return nil
			})
		},
	})

	ctx := context.Background()
	ensure := func() error { return ensureMerchant(ctx, ledger, c, stdout) }
	if pg != nil {
		err = pg.Exclusive(ctx, ensure) // replicas starting together make one merchant
	} else {
		err = ensure()
	}
	if err != nil {
		fmt.Fprintf(stderr, "kassa: %v\n", err)
		return 1
	}
	if c.webhookURL != "" {
		if err := configureWebhook(ctx, ledger, c, stdout); err != nil {
			fmt.Fprintf(stderr, "kassa: --webhook-url: %v\n", err)
			return 2
		}
	}

	// Listen for SIGTERM before announcing the address, so that a supervisor
	// that signals right after start still gets a graceful shutdown.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sig)

	// The background work stops with jobs; the webhook POSTs under way
	// then get the shutdown's grace to be answered (see runDelivery). The
	// store closes (deferred above) only once all of it has returned, so a
	// job's last transaction and a POST's record are not cut by the close.
	jobs, stopJobs := context.WithCancel(ctx)
	posts, cutPosts := context.WithCancel(context.WithoutCancel(ctx))
	var background sync.WaitGroup
	background.Go(func() { runJobs(jobs, ledger, log, clock, settleAt) })
	background.Go(func() {
		runDelivery(jobs, posts, ledger, log, kassa.DeliveryOptions{AllowPrivateNetworks: c.sandbox})
	})
	stopped := make(chan struct{})
	go func() { background.Wait(); close(stopped) }()
	defer func() { stopJobs(); cutPosts(); <-stopped }()

	hs := httpServer(srv.Handler(), log, ln)
	hs.TLSConfig = tlsConfig
	errc := make(chan error, 1)
	go func() {
		if c.tlsCert != "" {
			errc <- hs.ServeTLS(ln, "", "")
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	// The operations listener: plain HTTP on an internal network, with
	// the API's timeouts, for a scraper and probes, so a few connections.
	var ops *http.Server
	var opsErrc chan error // nil without one: never ready
	if opsLn != nil {
		ops = httpServer(srv.OpsHandler(), log, opsLn)
		opsErrc = make(chan error, 1)
		go func() { opsErrc <- ops.Serve(opsLn) }()
		// Before "listening", which tells a supervisor (and the tests) that
		// the start is complete.
		routes := "/metrics, /healthz, /readyz"
		if c.backupToken != "" {
			routes += ", /backup"
		}
		fmt.Fprintf(stdout, "operations (%s) on http://%s\n", routes, opsLn.Addr())
		log.Info("operations listening", "addr", opsLn.Addr().String())
	}
	if c.baseURL == listening {
		fmt.Fprintf(stdout, "kassa %s listening on %s (data %s, sandbox %v)\n", Version, listening, c.data, c.sandbox)
	} else {
		// Behind a balancer the base URL is its address: the line named
		// that as where this process listened.
		fmt.Fprintf(stdout, "kassa %s listening on %s (base URL %s, data %s, sandbox %v)\n", Version, listening, c.baseURL, c.data, c.sandbox)
	}
	log.Info("listening", "addr", ln.Addr().String(), "baseUrl", c.baseURL, "sandbox", c.sandbox)

	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "kassa: serve: %v\n", err)
			if ops != nil {
				ops.Close()
			}
			return 1
		}
	case err := <-opsErrc:
		// The operations listener failed: the server is not to run on
		// unwatched, so it stops as it does when the API's listener fails.
		fmt.Fprintf(stderr, "kassa: serve --ops-addr: %v\n", err)
		hs.Close()
		return 1
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
		listenerFailed := shutdownDelay > 0 && !drain(srv, hs, sig, shutdownDelay, log, errc, opsErrc)
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// A second signal (an operator pressing Ctrl-C again, a supervisor
		// that will not wait) cuts the grace short: connections still open
		// are closed now, and the store still closes in order.
		go func() {
			select {
			case s := <-sig:
				log.Warn("second signal: not waiting for the requests still open", "signal", s.String())
				// A third one ends the process at once, as with no handler.
				signal.Stop(sig)
				cancel()
			case <-sctx.Done():
			}
		}()
		stopJobs()
		// The operations listener drains alongside: a scrape or probe under
		// way is answered, and it stops with the API, not before it (an
		// orchestrator would read a closed port as the process gone).
		var opsDone sync.WaitGroup
		if ops != nil {
			opsDone.Go(func() {
				if err := ops.Shutdown(sctx); err != nil {
					ops.Close()
				}
			})
		}
		// Shutdown stops accepting and waits for in-flight requests to finish.
		if err := hs.Shutdown(sctx); err != nil {
			// Clients still sending or reading after the grace (a slow
			// link, the timeouts allow 60 s) are cut off; what they
			// changed is committed or not, as for any dropped connection.
			log.Warn("shutdown grace ended; closing the connections still open", "err", err)
			hs.Close()
		}
		opsDone.Wait()
		// Webhook POSTs under way have the rest of the grace to be answered.
		select {
		case <-stopped:
		case <-sctx.Done():
			log.Warn("shutdown grace ended; cutting the webhook POSTs still open")
		}
		if listenerFailed {
			// As a listener failing outside the delay ends serve.
			log.Info("stopped")
			return 1
		}
	}
	log.Info("stopped")
	return 0
}

// drain serves on for delay with /readyz answering draining and every
// connection closed after its answer, so that a load balancer takes this
// replica out and its clients reconnect to another before the listener
// closes: without it, a request sent in the moment between the stop and the
// balancer's next health check met a refused or reset connection. A second
// signal ends the delay: the stop goes on gracefully, and a third cuts its
// grace short. A listener that fails meanwhile ends it too (nothing more
// comes in to drain), and drain then reports false: the stop goes on
// gracefully and serve exits 1, as for such a failure outside the delay.
func drain(srv *server.Server, hs *http.Server, sig <-chan os.Signal, delay time.Duration, log *slog.Logger, errc, opsErrc <-chan error) bool {
	srv.Drain()
	hs.SetKeepAlivesEnabled(false)
	log.Info("draining: /readyz answers 503 while requests are still served", "delay", delay.String())
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case s := <-sig:
		log.Warn("second signal: not waiting for the rest of the shutdown delay", "signal", s.String())
	case err := <-errc:
		log.Error("the API listener failed while draining; stopping now", "err", err)
		return false
	case err := <-opsErrc: // nil without --ops-addr: never
		log.Error("the operations listener failed while draining; stopping now", "err", err)
		return false
	}
	return true
}

// certificateWarnWindow is how soon before its end a certificate is
// warned about at start: a few renewal attempts' time.
const certificateWarnWindow = 14 * 24 * time.Hour

// warnCertificateDates logs, at start, a certificate that every client
// will refuse (expired, or not valid yet) or that soon will be: Go serves
// it without a word, and the only trace was then a handshake error per
// connection.
func warnCertificateDates(log *slog.Logger, file string, leaf *x509.Certificate, now time.Time) {
	if leaf == nil {
		return
	}
	switch {
	case now.After(leaf.NotAfter):
		log.Error("the TLS certificate has expired: clients will refuse every connection; renew it and restart", "file", file, "notAfter", leaf.NotAfter)
	case now.Before(leaf.NotBefore):
		log.Error("the TLS certificate is not valid yet: clients will refuse every connection", "file", file, "notBefore", leaf.NotBefore)
	case leaf.NotAfter.Sub(now) < certificateWarnWindow:
		log.Warn("the TLS certificate expires soon; renew it and restart (it is read at start only)", "file", file, "notAfter", leaf.NotAfter)
	}
}

// encryptedKey reports whether the PEM file at name holds a private key
// encrypted with a password, in PKCS #8 or in OpenSSL's legacy form.
func encryptedKey(name string) bool {
	rest, err := os.ReadFile(name)
	if err != nil {
		return false
	}
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return false
		}
		if b.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED") {
			return true
		}
	}
}

// opsConnections bounds the operations listener's open connections: a
// scraper and a few probes need a handful, and a flood there must not take
// the process's file descriptors from the API.
const opsConnections = 64

// checkOpsAddr refuses an --ops-addr that is set but no listen address
// (checkListenAddr), or that is --addr itself, which could only fail to
// bind after the data directory was made.
func checkOpsAddr(ops, addr string) error {
	if ops == "" {
		return nil
	}
	if err := checkListenAddr(ops, "127.0.0.1:9090"); err != nil {
		return err
	}
	// Port 0 takes a port of the kernel's choosing, a new one each.
	if _, port, _ := net.SplitHostPort(ops); ops == addr && strings.TrimLeft(port, "0") != "" {
		return errors.New("it is --addr (KASSA_ADDR) itself: the operations endpoints need a port of their own")
	}
	return nil
}

// checkListenAddr refuses a listen address that is no host:port with a
// numeric port, before anything is made: net.Listen would take a service
// name ("localhost:http" is port 80), and one it refuses ("8080", no port)
// failed the start only after the data directory, its key and an empty
// store were made. example is shown in the message.
func checkListenAddr(a, example string) error {
	if a != strings.TrimSpace(a) {
		// A template's stray space: net.Listen looks " 127.0.0.1" up as a name.
		return errors.New("it has whitespace around it")
	}
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		_, p, _ := strings.Cut(example, ":")
		return fmt.Errorf("want host:port, e.g. %s (\":%s\" listens on every interface)", example, p)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return errors.New("the port must be a number from 0 to 65535")
	}
	return nil
}

// parseTrustedProxies reads --trusted-proxies: networks in CIDR form, or
// single addresses, separated by commas.
func parseTrustedProxies(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("%q is no network: write it as 10.0.0.0/8 or fd00::/8", f)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is no address or network: write it as 10.0.0.7 or 10.0.0.0/8", f)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// checkBaseURL refuses a --base-url the links could not be made from: they
// are the base with a path appended (checkout links, document links, Location
// headers), so a base without scheme or host, or with a query or fragment,
// would hand buyers and merchants broken links while the server looked fine.
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	var ue *url.Error
	switch {
	case errors.As(err, &ue):
		return ue.Err // the url.Error repeats s, password and all
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("want an absolute http:// or https:// URL")
	case u.Host == "" || u.Opaque != "":
		return errors.New("no host")
	case u.User != nil:
		return errors.New("must not carry credentials")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#"):
		return errors.New("links append a path to it: no query or fragment")
	}
	return nil
}

// shownURL is s as an error message quotes it, after a space: without its
// password, as stderr goes to a log. One that does not parse cannot be cut
// apart reliably, nor one whose user info did not parse as such (without
// "//", "u:pw@host" is scheme "u" and an opaque "pw@host", which Redacted
// keeps), so with an '@' it is not shown (the reason still is).
func shownURL(s string) string {
	if r, ok := redactURL(s); ok {
		return fmt.Sprintf(" %q", r)
	}
	return ""
}

// redactURL is s with its password as xxxxx, and false when it cannot be
// shown (see shownURL).
func redactURL(s string) (string, bool) {
	if u, err := url.Parse(s); err == nil && (u.User != nil || !strings.Contains(s, "@")) {
		return u.Redacted(), true
	}
	if strings.Contains(s, "@") {
		return "", false
	}
	return s, true
}

// maxHeaderBytes bounds a request's header block (431 past it).
const maxHeaderBytes = 64 << 10

// httpServer is an HTTP server of serve for h on ln, the API's or the
// operations listener, which take the same timeouts and bounds.
func httpServer(h http.Handler, log *slog.Logger, ln *limitListener) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second,
		// No request of the API needs large headers; Go's default (1 MiB)
		// let each unfinished request hold a megabyte before any check.
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnState:      ln.ConnState}
}

// ensureMerchant creates the sandbox merchant on an empty store (printing its
// credentials once) or keeps the one named by --client-id with its secret.
func ensureMerchant(ctx context.Context, ledger *kassa.Ledger, c serveConfig, stdout io.Writer) error {
	if c.clientID != "" {
		_, created, err := ledger.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "sandbox", ClientID: c.clientID, ClientSecret: c.clientSecret, Sandbox: true})
		if err != nil {
			return err
		}
		if created {
			fmt.Fprintf(stdout, "created merchant with client id %s\n", c.clientID)
		}
		return nil
	}
	has, err := ledger.HasMerchants(ctx)
	if err != nil || has {
		return err
	}
	creds, _, err := ledger.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "sandbox", Sandbox: true})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "created sandbox merchant %s\n  client id:     %s\n  client secret: %s\n(the secret is shown only now; keep it)\n",
		creds.MerchantID, creds.ClientID, creds.ClientSecret)
	return nil
}

// companiesDir holds imported directories, one CSV per country (SE.csv …).
func companiesDir(data string) string { return filepath.Join(data, "companies") }

// loadCompanies builds the search directory: the bundled dataset, with each
// country imported into DATA/companies replacing the bundled one.
func loadCompanies(data string) (*company.Directory, error) {
	d := company.Bundled(server.SandboxCompanies())
	entries, err := os.ReadDir(companiesDir(data))
	if errors.Is(err, os.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		country, ok := strings.CutSuffix(e.Name(), ".csv")
		if !ok || e.IsDir() {
			continue
		}
		f, err := os.Open(filepath.Join(companiesDir(data), e.Name()))
		if err != nil {
			return nil, err
		}
		cs, err := company.ReadCSV(country, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		d.Set(country, cs)
	}
	return d, nil
}

// checkCompanyNames refuses a name an order refuses as a billing
// address's companyName (text, and at most 100 characters where ReadCSV
// takes 200): the hosted checkout puts it there, where it would be refused
// on a field the page does not show, and no buyer of that company could
// check out. Only the import checks: a directory imported before the rule
// still loads, so that it cannot stop a server starting.
func checkCompanyNames(cs []company.Company) error {
	for _, c := range cs {
		var f fault.Fields
		order.ValidateAddress(&f, "", &order.Address{CompanyName: c.Name})
		if l := f.List(); len(l) > 0 {
			return fmt.Errorf("company %s: the name %s", c.ID, l[0].Message)
		}
	}
	return nil
}

// companies implements "kassa companies import --country XX FILE": it
// validates the whole file first and then replaces the country's directory
// atomically (write to a temporary file, rename), so a bad file changes nothing.
func companies(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && isHelp(args[0]) {
		fmt.Fprintln(stdout, companiesUsage)
		return 0
	}
	if len(args) == 0 || args[0] != "import" {
		fmt.Fprintln(stderr, companiesUsage)
		return 2
	}
	fs := flag.NewFlagSet("companies import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	country := fs.String("country", "", "ISO 3166-1 alpha-2 country code")
	data := fs.String("data", envDefault("data", "./kassa-data"), "data directory (KASSA_DATA)")
	if code, done := parseFlags(fs, args[1:]); done {
		return code
	}
	if !order.ValidCountry(*country) || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: kassa companies import --country SE [--data DIR] FILE (country: ISO 3166-1 alpha-2)")
		return 2
	}
	if !dataGiven(*data, stderr) {
		return 2
	}
	intr := catchInterrupts()
	defer intr.stop()
	unchanged := fmt.Sprintf("the %s directory was not changed", *country)
	in, err := openCtx(intr.ctx, fs.Arg(0)) // a FIFO's open waits for a writer
	if err != nil && intr.caught() != nil {
		return intr.report(stderr, "companies import", unchanged)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kassa: %v\n", err)
		return 1
	}
	defer in.Close()
	// A pipe or FIFO that blocks the read is woken by the interrupt.
	context.AfterFunc(intr.ctx, func() { in.SetReadDeadline(time.Now()) })
	cs, err := company.ReadCSV(*country, ctxReader{intr.ctx, in})
	if err == nil {
		err = checkCompanyNames(cs)
	}
	// Past this point the write replaces the file whole or not at all, and
	// is not cut short.
	if intr.caught() != nil {
		return intr.report(stderr, "companies import", unchanged)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kassa: %s: %v\n", fs.Arg(0), err)
		return 1
	}
	// An import before the first start makes the data directory; one made
	// by a mistyped --data is said, or the server started on the right one
	// would keep the old list with nothing to tell why.
	_, statErr := os.Stat(*data)
	if err := os.MkdirAll(companiesDir(*data), 0o700); err != nil {
		fmt.Fprintf(stderr, "kassa: %v\n", err)
		return 1
	}
	if errors.Is(statErr, os.ErrNotExist) {
		fmt.Fprintf(stderr, "kassa: made the data directory %s (it did not exist)\n", *data)
	}
	path := filepath.Join(companiesDir(*data), *country+".csv")
	// An import killed while it wrote (Ctrl-C, SIGTERM, the OOM killer)
	// left a temporary copy of its whole list; serve removes those only
	// when it starts, so a daily import cut short each day would pile them up.
	if _, err := durable.RemoveLeftovers(path); err != nil {
		fmt.Fprintf(stderr, "kassa: removing leftover temporary files: %v\n", err)
	}
	var buf bytes.Buffer
	err = company.WriteCSV(&buf, cs)
	if err == nil {
		err = durable.WriteFile(path, buf.Bytes(), 0o600)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kassa: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "imported %d %s companies into %s; restart kassa serve to use them\n", len(cs), *country, path)
	return 0
}

// serveStore opens serve's store: openStore, which a test wraps to watch
// how serve uses its store.
var serveStore = openStore

// listenTCP opens serve's listeners; a test replaces it to make one fail.
var listenTCP = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

// openStore opens the store the flags name (PostgreSQL: until ctx ends, an
// interrupted command's); cacheBytes bounds its cache of decoded orders
// (0: the default, negative: none). log hears why opening PostgreSQL waits,
// and of a status sweep either store runs before it opens.
// With retryFor (serve's --start-timeout), a PostgreSQL that cannot be
// reached yet is tried again, with backoff, for that long (the bound of the
// whole open); without, once, within a minute.
func openStore(ctx context.Context, kind, data, databaseURL string, clock func() time.Time, cacheBytes int64, lockWait time.Duration, log *slog.Logger, retryFor time.Duration) (storage.Store, error) {
	if err := checkStore(kind, databaseURL); err != nil {
		return nil, err
	}
	switch kind {
	case "bolt":
		path := filepath.Join(data, "kassa.db")
		st, err := bolt.Open(path, bolt.Options{Clock: clock, DecodedOrderBytes: cacheBytes, Timeout: lockWait, Logger: log})
		if errors.Is(err, bolt.ErrInUse) {
			return nil, storeInUse(path)
		}
		return st, err
	case "postgres":
		// The bound covers reaching the database and waiting for another
		// replica's migration; one this replica begins runs to its end.
		bound := time.Minute
		if retryFor > 0 {
			bound = retryFor
		}
		ctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		opts := postgres.Options{Clock: clock, DecodedOrderBytes: cacheBytes, Logger: log}
		pause := 500 * time.Millisecond
		for attempt := 1; ; attempt++ {
			st, err := postgres.Open(ctx, databaseURL, opts)
			if err != nil && retryFor > 0 && ctx.Err() != nil && !postgres.Unreachable(err) {
				// A wait for another replica's migration ran out.
				return nil, fmt.Errorf("the start did not complete within %v (--start-timeout): %w", retryFor, err)
			}
			if err == nil || retryFor == 0 || !postgres.Unreachable(err) {
				return st, err
			}
			// An orchestrator may start the database and kassa together:
			// a refused or unresolved address is waited for, not fatal.
			// The last attempt goes a moment before the deadline, so that
			// its error is the database's, not the deadline's.
			d, _ := ctx.Deadline()
			wait := min(pause, time.Until(d)-100*time.Millisecond)
			if wait <= 0 {
				return nil, fmt.Errorf("the database could not be reached within %v (--start-timeout), %d attempts: %w", retryFor, attempt, err)
			}
			log.Warn("database not reachable yet; trying again", "attempt", attempt, "in", wait.Round(time.Millisecond).String(), "err", err)
			startPause(wait)
			if !time.Now().Before(d) {
				// The pause overran the deadline (a stalled machine): an
				// attempt now would fail on the deadline before it dialed,
				// and read as a migration's wait running out. By the clock,
				// not ctx.Err: the timer that cancels ctx may not have run
				// yet when the pause ends.
				return nil, fmt.Errorf("the database could not be reached within %v (--start-timeout), %d attempts: %w", retryFor, attempt, err)
			}
			pause = min(pause*2, 5*time.Second)
		}
	}
	return nil, fmt.Errorf("unknown --store %q (bolt or postgres)", kind)
}

// startPause waits between openStore's attempts; a test replaces it to
// oversleep, as a loaded machine does.
var startPause = time.Sleep

// storeInUse is openStore's error for a bolt store that another process
// holds: a server or a settle writing it, or a store check or store copy
// reading it (a shared lock, which a writer waits for as for another writer).
type storeInUse string

func (p storeInUse) Error() string {
	return fmt.Sprintf("%s is in use by another process: a kassa serve, settle, store check or store copy on this data directory", string(p))
}

func (storeInUse) Unwrap() error { return bolt.ErrInUse }

// checkStore refuses a --store openStore could not open, before a command
// has done anything: serve would otherwise have made the data directory and
// its key first, and answered a usage error as a failure to open.
func checkStore(kind, databaseURL string) error {
	switch {
	case kind != "bolt" && kind != "postgres":
		return fmt.Errorf("unknown --store %q (KASSA_STORE): bolt or postgres", kind)
	case kind == "postgres" && databaseURL == "":
		return errors.New("--store postgres needs --database-url (or KASSA_DATABASE_URL)")
	case kind == "postgres":
		return checkDatabaseURL(databaseURL)
	}
	return nil
}

// checkDatabaseURL refuses a --database-url that Open could only refuse
// once the command had begun (serve: after making the data directory and
// its key), naming the flag; the reason never shows the password.
func checkDatabaseURL(u string) error {
	if err := postgres.CheckURL(u); err != nil {
		return fmt.Errorf("bad --database-url (KASSA_DATABASE_URL): %w", err)
	}
	return nil
}

// minBackupToken is the fewest characters --backup-token may have.
const minBackupToken = 24

// minClientSecret is the fewest characters --client-secret may have.
const minClientSecret = 12

// configureWebhook points the sandbox merchant's notifications at
// --webhook-url: the --client-id merchant, or else the oldest sandbox merchant.
// Flags applied before are not applied again, so a restart keeps the topics
// and secret the merchant changed through the API since.
func configureWebhook(ctx context.Context, ledger *kassa.Ledger, c serveConfig, stdout io.Writer) error {
	var target *storage.Merchant
	err := ledger.Store().View(ctx, func(tx storage.Tx) error {
		if c.clientID != "" {
			m, err := tx.GetMerchantByClientID(c.clientID)
			target = m
			return err
		}
		ms, err := tx.ListMerchants()
		for _, m := range ms {
			if m.Sandbox && (target == nil || m.CreatedAt.Before(target.CreatedAt)) {
				target = m
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	if target == nil {
		return errors.New("no sandbox merchant to configure")
	}
	set, err := ledger.SetWebhook(ctx, target.ID, webhookRequest(c))
	if err != nil {
		return err
	}
	if set.Secret != "" {
		fmt.Fprintf(stdout, "notifications of merchant %s go to %s\n  signing secret: %s\n(the secret is shown only now; keep it)\n",
			target.ID, set.URL, set.Secret)
	}
	return nil
}

// webhookRequest is the notification settings the --webhook-* flags declare.
func webhookRequest(c serveConfig) kassa.SetWebhookRequest {
	return kassa.SetWebhookRequest{URL: c.webhookURL, Events: webhookTopics(c.webhookEvents), Secret: c.webhookSecret, Declared: true}
}

// webhookTopics reads --webhook-events: topics separated by commas.
func webhookTopics(list string) []string {
	var events []string
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e != "" {
			events = append(events, e)
		}
	}
	return events
}

// runDelivery delivers notifications every second until ctx ends. A sandbox
// may deliver to private addresses (a receiver on the developer's machine).
//
// A run waits for all its POSTs, up to the client's timeout, so a run is
// started each tick even while earlier ones still wait (up to deliveryRuns at
// once): a new notification to another merchant goes out within a tick,
// not after a slow receiver's answers. A run leaves alone the merchants an
// earlier run still posts to, so overlapping runs do not pile up on one
// receiver. As many slow receivers as runs would still hold every run, so
// one more run, started each tick when the last has ended, leaves alone the
// receivers found slow, and delivers the other merchants' meanwhile.
//
// Once stop ends no run starts, and runDelivery returns when the runs under
// way have ended: their POSTs go on until posts ends (the shutdown's grace),
// so a receiver's answer that arrives meanwhile is recorded rather than cut
// off, and the notification is not sent again after the restart.
func runDelivery(stop, posts context.Context, ledger *kassa.Ledger, log *slog.Logger, opts kassa.DeliveryOptions) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	failures := &errorLog{log: log, msg: "notification delivery", every: deliveryErrorEvery, now: time.Now}
	start := func(slots chan struct{}, opts kassa.DeliveryOptions) {
		select {
		case slots <- struct{}{}:
			wg.Go(func() {
				defer func() { <-slots }()
				// A full batch means more may be due now: claim again at
				// once instead of waiting a tick, or delivery would top out
				// at one batch a second.
				for more := true; more && stop.Err() == nil; {
					more = false // and so after a panic: the next tick tries again
					guard(log, "notification delivery", func() {
						s, err := ledger.DeliverNotifications(posts, opts)
						if err != nil && posts.Err() == nil {
							failures.failed(err)
						} else {
							if err == nil {
								failures.succeeded()
							}
							if s != (kassa.DeliveryStats{}) {
								log.Info("notification delivery", "delivered", s.Delivered, "retrying", s.Retrying, "failed", s.Failed)
							}
						}
						more = err == nil && s.More
					})
				}
			})
		default: // every such run still waits on its receivers
		}
	}
	runs, prompt := make(chan struct{}, deliveryRuns), make(chan struct{}, 1)
	promptOpts := opts
	promptOpts.SkipSlowReceivers = true
	for {
		start(runs, opts)
		start(prompt, promptOpts)
		select {
		case <-stop.Done():
			return
		case <-t.C:
		}
	}
}

// deliveryErrorEvery is how often at most a failure of notification
// delivery is logged while it goes on.
var deliveryErrorEvery = time.Minute

// errorLog logs the failures of a loop that runs every second at a bounded
// rate. A failing store fails every run: the database unreachable, one line
// each 2 s (a run's connection retries); read-only during a failover, two a
// second (the usual run and the one skipping slow receivers), for as long as
// it lasted, burying every other line. Now a failure is logged when none was
// in the last every, with how many were not logged since the last line and
// since when it fails; the first success after a logged failure says it
// recovered. So a failure shows within every of its start (at once when none
// was logged in the last every), and a failing or flapping store adds at most
// two lines per every.
type errorLog struct {
	log   *slog.Logger
	msg   string
	every time.Duration
	now   func() time.Time

	mu       sync.Mutex
	failing  time.Time // the first failure since the last success; zero when none
	logged   time.Time // when a failure was last logged
	reported bool      // a failure was logged and no success since
	unlogged int       // failures not logged since the last line
}

func (e *errorLog) failed(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	if e.failing.IsZero() {
		e.failing = now
	}
	if !e.logged.IsZero() && now.Sub(e.logged) < e.every {
		e.unlogged++
		return
	}
	attrs := []any{"err", err}
	if e.unlogged > 0 {
		attrs = append(attrs, "notLogged", e.unlogged)
	}
	if d := now.Sub(e.failing); d > 0 {
		attrs = append(attrs, "failingFor", d.Round(time.Second).String())
	}
	e.log.Error(e.msg, attrs...)
	e.logged, e.reported, e.unlogged = now, true, 0
}

func (e *errorLog) succeeded() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failing.IsZero() {
		return
	}
	if e.reported {
		e.log.Info(e.msg+" recovered", "failedFor", e.now().Sub(e.failing).Round(time.Second).String(), "notLogged", e.unlogged)
		e.reported, e.unlogged = false, 0
	}
	e.failing = time.Time{}
}

// deliveryRuns bounds the delivery runs of one server at once that post to
// any receiver, slow or not; one more run posts only to receivers not found
// slow. So the server's POSTs in flight are at most (deliveryRuns+1) ×
// DeliveryOptions.Parallel.
const deliveryRuns = 4

// runJobs runs the periodic work of the server until ctx ends: the daily
// settlement run, the scheduled tasks (auto-capture, token expiry,
// reminders), the expiry marking of orders, the idempotency-record sweep,
// the delivery log's retention sweep and the authorization tokens', a pass
// of them every minute.
//
// A job with a backlog (a day of expiries after an outage, the first
// retention sweep of a store holding millions of old notifications) works in
// small transactions for at most jobBudget in a pass, then yields to the
// next job, and the next pass begins after jobRest instead of a minute: one
// job's backlog neither holds up the others nor waits a minute between
// slices, and API traffic gets the store between each of its transactions.
func runJobs(ctx context.Context, ledger *kassa.Ledger, log *slog.Logger, clock *server.Clock, settleAt time.Time) {
	j := jobs{ledger: ledger, log: log, clock: clock, settleAt: settleAt, wall: time.Now, budget: jobBudget}
	// The first pass runs the latest settlement time, not the next: if it
	// passed while no server ran (a deploy, an outage), that day is settled
	// now rather than folded into the next day's run. A day already settled
	// is not settled twice, as with a replica that runs a minute late.
	j.nextSettle = settleCutoff(clock.Now(), settleAt)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		start := time.Now()
		wait := time.Minute
		if j.pass(ctx) {
			wait = jobRest
		}
		t.Reset(max(time.Until(start.Add(wait)), 0))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// jobBudget is how long one job may go on in a pass of runJobs while it
// has more to do; jobRest is the pause before the next pass then.
const (
	jobBudget = 5 * time.Second
	jobRest   = time.Second
)

// jobs is the state of runJobs' passes.
type jobs struct {
	ledger     *kassa.Ledger
	log        *slog.Logger
	clock      *server.Clock
	settleAt   time.Time
	nextSettle time.Time
	wall       func() time.Time // measures the budget
	budget     time.Duration
}

// pass runs each job once, each for up to the budget, and reports whether
// one of them stopped with work left.
func (j *jobs) pass(ctx context.Context) (more bool) {
	// The schedule follows the server's clock, so the sandbox test clock
	// can move a merchant to the next settlement in seconds.
	if now := j.clock.Now(); !now.Before(j.nextSettle) {
		// Up to the day's settlement time, not to now: every replica
		// runs this, and the later ones must find the day settled.
		// A run that panicked is tried again at the next tick.
		guard(j.log, "settlement run", func() {
			// A run that failed as the server shuts down (ctx ended) is
			// not an error to log, nor a run made: the day is settled
			// by the next server's first pass.
			switch made, err := j.ledger.RunSettlementsBefore(ctx, settleCutoff(now, j.settleAt)); {
			case err == nil:
				j.log.Info("settlement run", "settlements", len(made))
				j.nextSettle = nextAt(now, j.settleAt)
			case ctx.Err() == nil:
				j.log.Error("settlement run", "err", err)
			}
		})
	}
	// The jobs that move money or what a merchant sees of an order go
	// first; the sweeps only keep the store tidy.
	guard(j.log, "scheduled tasks", func() { more = j.runTasks(ctx) || more })
	guard(j.log, "expiry job", func() {
		more = j.batches(ctx, "expiry job", "expired", func() (int, bool, error) {
			n, err := j.ledger.ExpireOrders(ctx, kassa.ExpiryBatch)
			return n, n == kassa.ExpiryBatch, err
		}) || more
	})
	guard(j.log, "idempotency sweep", func() {
		more = j.batches(ctx, "idempotency sweep", "removed", func() (int, bool, error) {
			return j.ledger.SweepIdempotencyOnce(ctx, 1000)
		}) || more
	})
	guard(j.log, "notification retention sweep", func() {
		// A batch per transaction, so the sweep holds the writer (bbolt's
		// one, or PostgreSQL's row locks) only briefly between requests.
		more = j.batches(ctx, "notification retention sweep", "removed", func() (int, bool, error) {
			return j.ledger.SweepNotificationsOnce(ctx, 500)
		}) || more
	})
	guard(j.log, "authorization token retention sweep", func() {
		more = j.batches(ctx, "authorization token retention sweep", "removed", func() (int, bool, error) {
			return j.ledger.SweepAuthorizationsOnce(ctx, 500)
		}) || more
	})
	return more
}

// drain runs step, one transaction or a few of a job, which reports whether
// the job has more to do, until it has not, ctx ends or the budget has
// passed (between steps: a step is never cut short). It always runs one
// step, and reports whether the job stopped with work left.
func (j *jobs) drain(ctx context.Context, step func() (more bool)) bool {
	end := j.wall().Add(j.budget)
	for step() {
		if ctx.Err() != nil {
			return false
		}
		if !j.wall().Before(end) {
			return true
		}
	}
	return false
}

// batches drains a job whose step handles a batch (removes or expires
// records) and reports how many and whether more may be left, and logs
// the count under what.
func (j *jobs) batches(ctx context.Context, job, what string, step func() (int, bool, error)) bool {
	done := 0
	left := j.drain(ctx, func() bool {
		n, more, err := step()
		done += n
		if err != nil && ctx.Err() == nil {
			j.log.Error(job, "err", err)
		}
		return err == nil && more
	})
	if done > 0 {
		j.log.Info(job, what, done)
	}
	return left
}

// guard runs one step of a background job and logs a panic in it, with its
// stack, instead of letting it end the process: the stores recover a panic
// inside a transaction, but one outside (a job's own code, a store's, an
// HTTP client's) would take the API and every other job down with it. Each
// job's work is transactional, so what the step committed stays done and
// what it had not is taken up again by a later run: a task stays due, a
// notification keeps its claim until the lease ends.
func guard(log *slog.Logger, job string, step func()) {
	defer func() {
		if p := recover(); p != nil {
			log.Error(job, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		}
	}()
	step()
}

// runTasks works through the due tasks, a batch at a time, for up to the
// budget, so a backlog (a day of token expiries, say) drains within a pass
// or a few, and reports whether it stopped with tasks left.
func (j *jobs) runTasks(ctx context.Context) bool {
	const batch = 100
	var total kassa.TaskStats
	left := j.drain(ctx, func() bool {
		// A run that set failing tasks aside answers their errors beside
		// what it did: both are logged, and a full batch goes on.
		s, err := j.ledger.RunTasks(ctx, batch)
		total.AutoCaptured += s.AutoCaptured
		total.TokensExpired += s.TokensExpired
		total.RemindersSent += s.RemindersSent
		total.Rescheduled += s.Rescheduled
		total.Failed += s.Failed
		total.TasksProcessed += s.TasksProcessed
		if err != nil && ctx.Err() == nil {
			j.log.Error("scheduled tasks", "err", err)
		}
		return s.TasksProcessed == batch
	})
	if total.TasksProcessed > 0 {
		j.log.Info("scheduled tasks", "autoCaptured", total.AutoCaptured, "tokensExpired", total.TokensExpired,
			"remindersSent", total.RemindersSent, "rescheduled", total.Rescheduled, "failed", total.Failed)
	}
	return left
}

// nextAt is the first time after now at the hour and minute of at (UTC).
func nextAt(now, at time.Time) time.Time {
	now = now.UTC()
	t := time.Date(now.Year(), now.Month(), now.Day(), at.Hour(), at.Minute(), 0, 0, time.UTC)
	if !t.After(now) {
		t = t.AddDate(0, 0, 1)
	}
	return t
}

// settleCutoff is the latest settlement time at or before now: the daily
// run settles what occurred before it.
func settleCutoff(now, at time.Time) time.Time { return nextAt(now, at).AddDate(0, 0, -1) }

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// settle runs settlements on a stopped server's data ("kassa settle").
func settle(args []string, stdout, stderr io.Writer) int {
	data, kind, dbURL, code, done := parseStoreCommand("settle", args, stderr, "data directory (KASSA_DATA)",
		"PostgreSQL URL for --store postgres (KASSA_DATABASE_URL)")
	if done {
		return code
	}
	in := catchInterrupts()
	defer in.stop()
	// A sandbox's settlements are dated by its clock, as the server's daily
	// run dates them: by real time, a run after the clock was moved on would
	// date a settlement before the captures it holds.
	clockPath := filepath.Join(*data, "sandbox-clock.json")
	sandbox := fileExists(clockPath)
	clock := server.NewClock(sandbox)
	if *kind == "bolt" {
		if _, ok := boltStoreAt(*data, stderr); !ok {
			return 1 // not "0 settlements", as a run with nothing to do
		}
	}
	// A running server holds a bolt file: fail fast instead of waiting for it.
	db, err := openStore(in.ctx, *kind, *data, *dbURL, clock.Now, 0, 2*time.Second, slog.New(slog.NewTextHandler(stderr, nil)), 0)
	if err != nil && in.caught() != nil {
		return in.report(stderr, "settle", "no settlement was written")
	}
	if err != nil {
		// The hint is for a bolt store in use only: on PostgreSQL settle
		// runs beside the replicas, and a database that cannot be reached
		// has nothing to do with whether a server runs.
		hint := ""
		if errors.Is(err, bolt.ErrInUse) {
			hint = " (a running server settles daily by itself)"
		}
		fmt.Fprintf(stderr, "kassa: open store: %v%s\n", err, hint)
		return 1
	}
	defer db.Close()
	// Read (and written back, as PersistTo does) only once the store is
	// held: a running server holds it, and it moves its clock meanwhile,
	// which a write of the offset read before would undo on disk.
	if sandbox {
		if err := clock.PersistTo(clockPath); err != nil {
			fmt.Fprintf(stderr, "kassa: %v\n", err)
			return 1
		}
	}
	// An interrupt ends the run's wait for the store and its statements;
	// once its commit is under way the store's answer decides, so a run
	// that committed is reported as made.
	made, err := kassa.New(db, kassa.Options{}).RunSettlements(in.ctx)
	switch {
	case err != nil && fault.IsOutcomeUnknown(err):
		// The run takes its items off the queue in the transaction that
		// saves its settlements, so a rerun settles only what this one did
		// not, whichever way it went.
		fmt.Fprintf(stderr, "kassa: settle: %v\n", err)
		fmt.Fprintln(stderr, "kassa settle: whether the settlements were written is unknown; running kassa settle again is safe: it settles only what no settlement holds yet")
		return 1
	case err != nil && in.caught() != nil:
		return in.report(stderr, "settle", "no settlement was written")
	case err != nil:
		fmt.Fprintf(stderr, "kassa: settle: %v\n", err)
		return 1
	}
	for _, s := range made {
		fmt.Fprintf(stdout, "%s %s store %q %s: gross %s, refunds %s, fees %s, adjustments %s, recourses %s, net %s (%d transactions)\n",
			s.Reference, s.MerchantID, s.StoreID, s.Currency, money.New(s.Gross, s.Currency).Amount(), money.New(s.Refunds, s.Currency).Amount(),
			money.New(s.Fees, s.Currency).Amount(), money.New(s.Adjustments, s.Currency).Amount(), money.New(s.Recourses, s.Currency).Amount(),
			money.New(s.Net, s.Currency).Amount(), s.TransactionCount)
	}
	fmt.Fprintf(stdout, "%d settlements\n", len(made))
	return 0
}
