package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/postgres"
)

// storeCommand runs "kassa store …".
const storeUsage = "usage: kassa store copy --data DIR --database-url URL\n       kassa store check --data DIR\n       kassa store rekey [--data DIR] [--store S --database-url U]"

func storeCommand(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0 && args[0] == "copy":
		return storeCopy(args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "check":
		return storeCheck(args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "rekey":
		return storeRekey(args[1:], stdout, stderr)
	case len(args) == 1 && isHelp(args[0]):
		fmt.Fprintln(stdout, storeUsage)
		return 0
	}
	fmt.Fprintln(stderr, storeUsage)
	return 2
}

// storeCopy copies a stopped server's bolt store, and the signing key it
// signs with, into an empty PostgreSQL database, in one transaction
// ("kassa store copy"); see docs/postgres.md, "Moving from bolt".
func storeCopy(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("store copy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", envDefault("data", "./kassa-data"), "data directory of the bolt store to copy, DATA/kassa.db (KASSA_DATA)")
	dbURL := fs.String("database-url", envDefault("database-url", ""), "PostgreSQL URL of the empty database to copy into (KASSA_DATABASE_URL)")
	hideSecrets(fs)
	if code, done := parseDataCommand(fs, args, data); done {
		return code
	}
	if *dbURL == "" {
		fmt.Fprintln(stderr, "kassa: store copy needs --database-url (or KASSA_DATABASE_URL)")
		return 2
	}
	if err := checkDatabaseURL(*dbURL); err != nil {
		fmt.Fprintf(stderr, "kassa: %v\n", err)
		return 2
	}
	fromEnv, err := envKey()
	if err != nil {
		fmt.Fprintf(stderr, "kassa: %v\n", err)
		return 2
	}
	// The key the bolt server signed with: KASSA_KEY when it was given one
	// (recorded as a check value only, as a replica given KASSA_KEY
	// records it), else DATA/server.key, which the replicas then share
	// through the database. Without either, the first replica records its own.
	key, checkOnly := fromEnv, fromEnv != nil
	if key == nil {
		key, err = readKeyFile(filepath.Join(*data, "server.key"))
		if err != nil && !errors.Is(err, iofs.ErrNotExist) {
			fmt.Fprintf(stderr, "kassa: %v\n", err)
			return 1
		}
	}
	in := catchInterrupts()
	defer in.stop()
	src, code := openStopped(in, *data, "copy", "nothing was copied", 1, stderr)
	if src == nil {
		return code
	}
	defer src.Close()
	// The key the copy carries is checked, before the database is touched,
	// against the check value the bolt store records of the key its server
	// signed with: a KASSA_KEY other than the server's, or a server.key
	// left beside a store whose server was given KASSA_KEY, would become
	// the replicas' key, and every link and token given out before dead.
	if err := src.SigningKey(key); errors.Is(err, bolt.ErrOtherSigningKey) {
		which := "KASSA_KEY"
		switch {
		case key == nil:
			which = "no KASSA_KEY and no " + filepath.Join(*data, "server.key")
		case !checkOnly:
			which = filepath.Join(*data, "server.key") + " (KASSA_KEY is not set)"
		}
		fmt.Fprintf(stderr, "kassa: %s: not the key the store's server signed its links and tokens with; set KASSA_KEY as the server had it (to copy with another key on purpose, run kassa store rekey first); nothing was copied\n", which)
		return 2
	} else if err != nil {
		fmt.Fprintf(stderr, "kassa: %v\n", err)
		return 1
	}
	// Migrated as serve migrates it.
	db, err := openStore(in.ctx, "postgres", *data, *dbURL, nil, -1, 0, slog.New(slog.NewTextHandler(stderr, nil)), 0)
	if err != nil && in.caught() != nil {
		return in.report(stderr, "store copy", "nothing was copied")
	}
	if err != nil {
		fmt.Fprintf(stderr, "kassa: open the database: %v\n", err)
		return 1
	}
	defer db.Close()
	start := time.Now()
	// An interrupt ends the copy's statements, which rolls it back; once
	// its COMMIT is sent the database's answer decides (Load).
	counts, err := db.(*postgres.Store).Load(in.ctx, func(put func(storage.Record) error) error {
		if err := src.Dump(in.ctx, put); err != nil {
			return err
		}
		if key == nil {
			return nil
		}
		return put(storage.Record{Kind: storage.KindSigningKey, Body: key, KeyCheckOnly: checkOnly})
	})
	if fe := (*fault.Error)(nil); errors.As(err, &fe) && fe.Code == "store_not_empty" {
		fmt.Fprintf(stderr, "kassa: %s; nothing was copied\n", fe.Message)
		return 2
	}
	if fault.IsOutcomeUnknown(err) {
		// The copy is one transaction into an empty database: a rerun
		// either makes it or finds it made and is refused, adding nothing.
		fmt.Fprintf(stderr, "kassa: copy: %v\n", err)
		fmt.Fprintln(stderr, "kassa store copy: whether the copy was committed is unknown; running kassa store copy again is safe: it copies into the database if it is still empty, and otherwise refuses it (exit 2), changing nothing")
		return 1
	}
	if err != nil && in.caught() != nil {
		return in.report(stderr, "store copy", "nothing was copied (the database holds no record; its schema is migrated)")
	}
	if err != nil {
		fmt.Fprintf(stderr, "kassa: copy: %v; nothing was copied (the database holds no record; its schema is migrated)\n", err)
		return 1
	}
	for _, k := range storage.RecordKinds() {
		fmt.Fprintf(stdout, "%-24s %d\n", k, counts[k])
	}
	switch {
	case key == nil:
		fmt.Fprintln(stdout, "no signing key in the data directory and no KASSA_KEY: the first replica records its own (links and tokens signed before are refused)")
	case checkOnly:
		fmt.Fprintln(stdout, "signing key: KASSA_KEY, recorded as a check value only; give every replica the same KASSA_KEY")
	}
	fmt.Fprintf(stdout, "copied %s into the database in %v\n", filepath.Join(*data, "kassa.db"), time.Since(start).Round(time.Millisecond))
	return 0
}

// boltStoreAt returns the path of the bolt store in the data directory
// data, or says there is none: opening it would make an empty store, and a
// mistyped directory would look like a store with nothing in it.
func boltStoreAt(data string, stderr io.Writer) (string, bool) {
	path := filepath.Join(data, "kassa.db")
	if !fileExists(path) {
		fmt.Fprintf(stderr, "kassa: no store at %s (--data names the server's data directory)\n", path)
		return path, false
	}
	return path, true
}

// openStopped opens the bolt store of a stopped server's data directory for
// reading only (store copy, store check): the file is never written, and a
// server holding it makes the open fail within 2 s rather than read a store
// that goes on changing. On failure it says why on stderr and returns nil and
// the exit code: 2 for a store in use, failed (the command's own) for one
// missing or unreadable. then is what to do once the server is stopped,
// and the command's name after "store". After in caught a signal, whatever
// the open did, it reports the interrupt, with interrupted for what the
// command left, and the code is the signal's.
func openStopped(in *interrupts, data, then, interrupted string, failed int, stderr io.Writer) (*bolt.ReadOnly, int) {
	path, ok := boltStoreAt(data, stderr)
	if !ok {
		return nil, failed
	}
	src, err := bolt.OpenReadOnly(path, 2*time.Second)
	if in.caught() != nil {
		if err == nil {
			src.Close()
		}
		return nil, in.report(stderr, "store "+then, interrupted)
	}
	if errors.Is(err, bolt.ErrInUse) {
		fmt.Fprintf(stderr, "kassa: %s is in use by another process (a kassa serve or kassa settle on this data directory): stop it, then %s\n", path, then)
		return nil, 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "kassa: %v\n", err)
		return nil, failed
	}
	return src, 0
}
