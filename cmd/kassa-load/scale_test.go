package main

import (
	"testing"
	"time"

	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// TestRawInsertsInEveryQueryMode: the scale command's baseline runs on
// the URL it is given, in the query mode that URL names, as kassa does:
// behind a transaction pooler (docs/postgres.md) that is cache_describe,
// exec or simple_protocol. The body went as []byte, which the exec and
// simple_protocol modes send as bytea, refused by the jsonb column
// ("invalid input syntax for type json"), so scale failed at its baseline
// in those modes after measuring the replicas.
func TestRawInsertsInEveryQueryMode(t *testing.T) {
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			rate, lat, err := rawInserts(pgtest.FreshSchema(t)+"&default_query_exec_mode="+mode, 2, 200*time.Millisecond, 100)
			if err != nil {
				t.Fatal(err)
			}
			if rate <= 0 || len(lat) == 0 {
				t.Fatalf("%.1f inserts/s, %d latencies; want some", rate, len(lat))
			}
		})
	}
}
