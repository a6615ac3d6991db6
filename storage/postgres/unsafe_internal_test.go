package postgres

import (
	"slices"
	"testing"
)

// TestUnsafeSettings: the server settings that make a crash of the
// database's machine lose acknowledged writes or damage the cluster are
// named, each once, and nothing else is.
func TestUnsafeSettings(t *testing.T) {
	for _, c := range []struct {
		fsync, fullPageWrites string
		want                  []string
	}{
		{"on", "on", nil},
		{"off", "on", []string{"fsync"}},
		{"on", "off", []string{"full_page_writes"}},
		{"off", "off", []string{"fsync", "full_page_writes"}},
	} {
		var got []string
		for _, u := range unsafeSettings(c.fsync, c.fullPageWrites) {
			if u.risk == "" {
				t.Errorf("fsync %s, full_page_writes %s: %s named without its risk", c.fsync, c.fullPageWrites, u.setting)
			}
			got = append(got, u.setting)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("fsync %s, full_page_writes %s: warned of %v, want %v", c.fsync, c.fullPageWrites, got, c.want)
		}
	}
}
