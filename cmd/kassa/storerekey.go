package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/postgres"
)

// keyForgetter is a store that records the signing key its server signs
// with and can forget it: bolt's (bolt.Store.ForgetSigningKey) and
// PostgreSQL's (postgres.Store.ForgetSigningKey).
type keyForgetter interface {
	ForgetSigningKey(ctx context.Context) (forgot bool, err error)
}

// storeRekey lets a stopped server's store take another signing key
// ("kassa store rekey"): it forgets the check value of the key the store's
// server signed with (on PostgreSQL, also the key the replicas share), so
// that the next start records the key it is given, from KASSA_KEY or
// DATA/server.key, instead of refusing it. A bolt store held by a running
// server is refused through its file lock; a PostgreSQL database, which
// its replicas hold no lock of while they serve, while kassa sessions are
// on it (postgres.Store.ForgetSigningKey, docs/decisions.md).
func storeRekey(args []string, stdout, stderr io.Writer) int {
	data, kind, dbURL, code, done := parseStoreCommand("store rekey", args, stderr, "data directory of the bolt store, DATA/kassa.db (KASSA_DATA)",
		"PostgreSQL URL for --store postgres (KASSA_DATABASE_URL), to the database itself, not through a connection pooler")
	if done {
		return code
	}
	where := "the database"
	if *kind == "bolt" {
		path, ok := boltStoreAt(*data, stderr)
		if !ok {
			return 1
		}
		where = path
	}
	db, err := openStore(context.Background(), *kind, *data, *dbURL, nil, 0, 2*time.Second, slog.New(slog.NewTextHandler(stderr, nil)), 0)
	if errors.Is(err, bolt.ErrInUse) {
		fmt.Fprintf(stderr, "kassa: %v: stop it, then rekey\n", err)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "kassa: open store: %v\n", err)
		return 1
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	forgot, err := db.(keyForgetter).ForgetSigningKey(ctx)
	if errors.Is(err, postgres.ErrInUse) {
		fmt.Fprintf(stderr, "kassa: %v: stop every replica (and any kassa settle on the database), then rekey: a replica still serving would go on signing with the old key\n", err)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "kassa: %v\n", err)
		return 1
	}
	if !forgot {
		fmt.Fprintf(stdout, "%s records no signing key: the next start records the one it is given\n", where)
		return 0
	}
	if *kind == "postgres" {
		fmt.Fprintf(stdout, "%s no longer records the signing key: the next replica to start records the one it is given (KASSA_KEY, or else its DATA/server.key, which the replicas without KASSA_KEY then share: if the old key was a replica's server.key, that file still holds it, so to leave a key that leaked set KASSA_KEY or remove the replicas' server.key files), and the access tokens, document links and checkout links signed with the old one are refused\n", where)
		return 0
	}
	// A server.key left in place is the old key again at a start without
	// KASSA_KEY: the rekey would then change nothing, which an operator
	// rotating a leaked key must be told.
	keyFile := filepath.Join(*data, "server.key")
	if _, err := os.Stat(keyFile); err == nil {
		fmt.Fprintf(stdout, "%s no longer records the signing key: the next start records the one it is given, KASSA_KEY, or else %s, which still holds the key used so far (to leave that key, set KASSA_KEY or remove %s so that the next start makes a new one); the access tokens, document links and checkout links signed with a key other than the one recorded then are refused\n", where, keyFile, keyFile)
		return 0
	}
	fmt.Fprintf(stdout, "%s no longer records the signing key: the next start records the one it is given (KASSA_KEY, or else a new DATA/server.key), and the access tokens, document links and checkout links signed with the old one are refused\n", where)
	return 0
}
