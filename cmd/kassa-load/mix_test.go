package main

import "testing"

func TestParseMix(t *testing.T) {
	for in, want := range map[string][2]int{"": {1, 1}, "get=2,list=0": {2, 0}, "list=3": {1, 3}, "get=100": {100, 1}} {
		g, l, err := parseMix(in)
		if err != nil || g != want[0] || l != want[1] {
			t.Errorf("parseMix(%q) = %d, %d, %v; want %v", in, g, l, err, want)
		}
	}
	for _, in := range []string{"get=0", "get=101", "list=-1", "get", "put=1", "get=1x", "get=", "get=1,"} {
		if _, _, err := parseMix(in); err == nil {
			t.Errorf("parseMix(%q) took it", in)
		}
	}
}
