package main

import (
	"strings"
	"testing"
)

// TestVersionAndHelpTakeNoStrayArguments: a command line with more than
// the command was a usage error everywhere but here, where `kassa version
// extra` printed the version and exited 0, so a script's typo passed
// unseen. `kassa help <command>` is the command's own help, as its --help.
func TestVersionAndHelpTakeNoStrayArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{[]string{"version"}, 0, "kassa ", ""},
		{[]string{"--version"}, 0, "kassa ", ""},
		{[]string{"version", "extra"}, 2, "", `kassa version: unexpected argument "extra"`},
		{[]string{"-v", "--json"}, 2, "", `kassa version: unexpected argument "--json"`},
		{[]string{"help"}, 0, "Usage", ""},
		{[]string{"help", "settle"}, 0, "", "-data"},
		{[]string{"help", "store", "copy"}, 0, "", "-database-url"},
		{[]string{"help", "help"}, 0, "Usage", ""},
		{[]string{"help", "--help"}, 0, "Usage", ""},
		{[]string{"help", "nonsense"}, 2, "", `unknown command "nonsense"`},
		// version's help succeeds as every other command's does.
		{[]string{"help", "version"}, 0, "usage: kassa version", ""},
		{[]string{"version", "--help"}, 0, "usage: kassa version", ""},
		{[]string{"-v", "-h"}, 0, "usage: kassa version", ""},
	} {
		code, out, errb := run3(tc.args...)
		if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errb, tc.err) {
			t.Errorf("kassa %s: exit %d, stdout %.200q, stderr %.200q; want exit %d, %q in stdout, %q in stderr",
				strings.Join(tc.args, " "), code, out, errb, tc.code, tc.out, tc.err)
		}
		if tc.code == 2 && out != "" {
			t.Errorf("kassa %s: a usage error printed on stdout: %q", strings.Join(tc.args, " "), out)
		}
	}
}

func run3(args ...string) (int, string, string) {
	var out, errb strings.Builder
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestGroupCommandsHelp: "kassa store --help" and "kassa companies -h" ask
// for help, which succeeds as every command's --help does; a missing
// subcommand stays a usage error.
func TestGroupCommandsHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"store", "--help"}, 0}, {[]string{"help", "store"}, 0}, {[]string{"store"}, 2}, {[]string{"store", "bogus"}, 2},
		{[]string{"companies", "-h"}, 0}, {[]string{"help", "companies"}, 0}, {[]string{"companies"}, 2},
	} {
		code, out, errb := run3(tc.args...)
		usage, group := out, tc.args[0]
		if tc.code != 0 {
			usage = errb
		}
		if group == "help" {
			group = tc.args[1]
		}
		if code != tc.code || !strings.Contains(usage, "usage: kassa "+group) {
			t.Errorf("kassa %s: exit %d, stdout %q, stderr %q; want exit %d and the usage", strings.Join(tc.args, " "), code, out, errb, tc.code)
		}
	}
}
