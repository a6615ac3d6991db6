package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/kassahq/kassa/storage/bolt"
)

// storeRekey lets a stopped server's bolt store take another signing key
// ("kassa store rekey"): it forgets the check value of the key the store's
// server signed with (bolt.Store.ForgetSigningKey), so that the next start
// records the key it is given, from KASSA_KEY or DATA/server.key, instead
// of refusing it. PostgreSQL's counterpart is DELETE FROM signing_key
// (docs/postgres.md).
func storeRekey(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("store rekey", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", envDefault("data", "./kassa-data"), "data directory of the bolt store, DATA/kassa.db (KASSA_DATA)")
	if code, done := parseDataCommand(fs, args, data); done {
		return code
	}
	path, ok := boltStoreAt(*data, stderr)
	if !ok {
		return 1
	}
	db, err := openStore(context.Background(), "bolt", *data, "", nil, 0, 2*time.Second, slog.New(slog.NewTextHandler(stderr, nil)), 0)
	if errors.Is(err, bolt.ErrInUse) {
		fmt.Fprintf(stderr, "kassa: %v: stop it, then rekey\n", err)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "kassa: open store: %v\n", err)
		return 1
	}
	defer db.Close()
	forgot, err := db.(*bolt.Store).ForgetSigningKey()
	if err != nil {
		fmt.Fprintf(stderr, "kassa: %v\n", err)
		return 1
	}
	if !forgot {
		fmt.Fprintf(stdout, "%s records no signing key: the next start records the one it is given\n", path)
		return 0
	}
	fmt.Fprintf(stdout, "%s no longer records the signing key: the next start records the one it is given (KASSA_KEY, or else DATA/server.key), and the access tokens, document links and checkout links signed with the old one are refused\n", path)
	return 0
}
