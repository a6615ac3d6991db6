package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
)

// storeCheck verifies a stopped server's bolt store without writing to it
// ("kassa store check"): bbolt's page check, then every record, index,
// order and document series (bolt.ReadOnly.Check). It prints one line per
// problem and the records of each kind, and exits 0 when the store is
// sound, 1 when it found problems, 2 when it could not check.
func storeCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("store check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", envDefault("data", "./kassa-data"), "data directory of the bolt store to check, DATA/kassa.db (KASSA_DATA)")
	if code, done := parseDataCommand(fs, args, data); done {
		return code
	}
	in := catchInterrupts()
	defer in.stop()
	src, code := openStopped(in, *data, "check", "nothing was checked (a check writes nothing)", 2, stderr)
	if src == nil {
		return code
	}
	defer src.Close()
	path := filepath.Join(*data, "kassa.db")
	start := time.Now()
	problems := 0
	counts, err := src.Check(in.ctx, func(p bolt.Problem) {
		problems++
		fmt.Fprintln(stdout, p)
	})
	if err != nil && in.caught() != nil {
		// The problems printed were found; the rest of the store was not
		// looked at.
		return in.report(stderr, "store check", fmt.Sprintf("the check did not finish (%d problems found before it; a check writes nothing)", problems))
	}
	if err != nil {
		fmt.Fprintf(stderr, "kassa: cannot check %s: %v\n", path, err)
		return 2
	}
	for _, k := range storage.RecordKinds() {
		if k != storage.KindSigningKey {
			fmt.Fprintf(stdout, "%-24s %d\n", k, counts[k])
		}
	}
	if problems > 0 {
		noun := "problems"
		if problems == 1 {
			noun = "problem"
		}
		fmt.Fprintf(stdout, "%s: %d %s, checked in %v\n", path, problems, noun, time.Since(start).Round(time.Millisecond))
		return 1
	}
	fmt.Fprintf(stdout, "%s is sound, checked in %v\n", path, time.Since(start).Round(time.Millisecond))
	return 0
}
