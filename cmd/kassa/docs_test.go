package main

import (
	"bytes"
	"flag"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// These tests keep README.md and docs/*.md true to the flags and
// environment variables of the kassa binary, as its own -h prints them.

// flagCommands are kassa's commands that take flags, as run is given them.
var flagCommands = [][]string{{"serve"}, {"companies", "import"}, {"settle"}, {"store", "copy"}, {"store", "check"}, {"store", "rekey"}}

// cliFlag is one flag as the command's -h prints it: its name and the
// lines that describe it (type, usage, default).
type cliFlag struct {
	name, block string
}

var usageHeader = regexp.MustCompile(`^  -([a-z0-9-]+)(?: |$)`)

// commandFlags runs "kassa CMD -h" and reads the flags it prints.
func commandFlags(t *testing.T, cmd []string) map[string]cliFlag {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(append(slices.Clone(cmd), "-h"), &out, &errb); code != 0 {
		t.Fatalf("kassa %s -h: exit %d, %s", strings.Join(cmd, " "), code, errb.String())
	}
	flags := map[string]cliFlag{}
	var cur string
	for line := range strings.Lines(out.String() + errb.String()) {
		if m := usageHeader.FindStringSubmatch(strings.TrimRight(line, "\n")); m != nil {
			cur = m[1]
			flags[cur] = cliFlag{name: cur, block: line}
		} else if cur != "" && strings.HasPrefix(line, "    \t") {
			f := flags[cur]
			f.block += line
			flags[cur] = f
		}
	}
	if len(flags) == 0 {
		t.Fatalf("kassa %s -h printed no flags: %s%s", strings.Join(cmd, " "), out.String(), errb.String())
	}
	return flags
}

// readsEnv reports whether the flag name of cmd takes its default from
// its environment variable: set to a value, the flag's -h differs.
func readsEnv(t *testing.T, cmd []string, name string) bool {
	t.Helper()
	before := commandFlags(t, cmd)[name].block
	for _, v := range []string{"guards-sentinel", "7", "true", "false"} {
		t.Setenv(envName(name), v)
		after := commandFlags(t, cmd)[name].block
		os.Unsetenv(envName(name))
		if after != before {
			return true
		}
	}
	return false
}

// unsetKassaEnv clears every KASSA_ variable for the test, so that the
// defaults it reads are the built-in ones.
func unsetKassaEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "KASSA_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docFiles are README.md and docs/*.md, by their path from the module root.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	names := []string{"README.md"}
	for _, d := range docs {
		names = append(names, filepath.ToSlash(strings.TrimPrefix(d, filepath.Join("..", "..")+string(filepath.Separator))))
	}
	return names
}

// readmeSection is the text of README.md's "## title" section.
func readmeSection(t *testing.T, title string) string {
	t.Helper()
	readme := readDoc(t, "README.md")
	_, rest, ok := strings.Cut(readme, "\n## "+title+"\n")
	if !ok {
		t.Fatalf("README.md has no section ## %s", title)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// flagRow is one row of the table of kassa serve's flags in README.md's
// "## Server flags": its environment variable and default cells.
type flagRow struct {
	env, def string
}

var flagCell = regexp.MustCompile("^`--([a-z0-9-]+)`$")

// serveFlagTable reads the rows of section's table whose first cell is a
// flag (`--addr`), by flag name.
func serveFlagTable(t *testing.T, section string) map[string]flagRow {
	t.Helper()
	rows := map[string]flagRow{}
	for line := range strings.Lines(section) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		m := flagCell.FindStringSubmatch(cells[0])
		if m == nil {
			continue
		}
		if len(cells) != 4 {
			t.Errorf("README.md's \"## Server flags\": the row of --%s has %d cells, not 4 (flag | environment variable | default | what it does): %s", m[1], len(cells), line)
			continue
		}
		if _, dup := rows[m[1]]; dup {
			t.Errorf("README.md's \"## Server flags\": --%s has two rows", m[1])
		}
		rows[m[1]] = flagRow{env: cells[1], def: cells[2]}
	}
	if len(rows) == 0 {
		t.Fatalf("README.md's \"## Server flags\" has no table of flags (| `--addr` | `KASSA_ADDR` | `127.0.0.1:8080` | … |): the way it lists them has changed; update this test")
	}
	return rows
}

// TestServeFlagsInReadme: every flag of kassa serve has a row in the table
// of README.md's "Server flags", and every row is a flag's; its environment
// column names KASSA_<NAME> when the flag is read from it, "none" when it
// is not; its default column starts with the flag's default as code
// (`24h`), or with "none" when the flag's default is empty.
func TestServeFlagsInReadme(t *testing.T) {
	unsetKassaEnv(t)
	rows := serveFlagTable(t, readmeSection(t, "Server flags"))
	flags := commandFlags(t, []string{"serve"})
	defaults := map[string]string{}
	serveFlags(&serveConfig{}).VisitAll(func(f *flag.Flag) { defaults[f.Name] = f.DefValue })
	for _, name := range sortedNames(flags) {
		if _, ok := defaults[name]; !ok {
			t.Fatalf("kassa serve -h prints --%s, which serveFlags does not define", name)
		}
	}
	for name := range rows {
		if _, ok := flags[name]; !ok {
			t.Errorf("README.md's \"## Server flags\" has a row for --%s, which kassa serve does not have (kassa serve -h): remove it, or add the flag", name)
		}
	}
	for _, name := range sortedNames(flags) {
		row, ok := rows[name]
		if !ok {
			t.Errorf("kassa serve has --%s, which the table of README.md's \"## Server flags\" does not list: add | `--%s` | environment variable | default | what it does |", name, name)
			continue
		}
		wantEnv := "none"
		if readsEnv(t, []string{"serve"}, name) {
			wantEnv = "`" + envName(name) + "`"
		}
		if row.env != wantEnv {
			t.Errorf("README.md's \"## Server flags\": the environment variable of --%s is %q, want %s", name, row.env, wantEnv)
		}
		wantDef := "none"
		if d := defaults[name]; d != "" {
			wantDef = "`" + d + "`"
		}
		if !strings.HasPrefix(row.def, wantDef) {
			t.Errorf("README.md's \"## Server flags\": the default of --%s is %q, but the flag's is %s: start the cell with %s", name, row.def, wantDef, wantDef)
		}
	}
}

// TestFlagUsageNamesEnv: a flag's usage (kassa CMD -h) names the
// variable it is read from, and names none when it reads none.
func TestFlagUsageNamesEnv(t *testing.T) {
	unsetKassaEnv(t)
	for _, cmd := range flagCommands {
		flags := commandFlags(t, cmd)
		for _, name := range sortedNames(flags) {
			reads, usage := readsEnv(t, cmd, name), flags[name].block
			names := regexp.MustCompile(`KASSA_[A-Z0-9_]+`).FindAllString(usage, -1)
			switch {
			case reads && !slices.Contains(names, envName(name)):
				t.Errorf("kassa %s --%s is read from %s, which its usage does not name: end it with (%s)", strings.Join(cmd, " "), name, envName(name), envName(name))
			case !reads && len(names) > 0:
				t.Errorf("kassa %s --%s names %v in its usage but is read from no variable", strings.Join(cmd, " "), name, names)
			}
		}
	}
}

// TestSubcommandSynopses: the one-line synopsis of each command other than
// serve, in kassa help, in the command's own usage message and in
// README.md, names every flag the command has.
func TestSubcommandSynopses(t *testing.T) {
	unsetKassaEnv(t)
	readme := readmeSection(t, "Server flags")
	for _, cmd := range flagCommands[1:] {
		prefix := "kassa " + strings.Join(cmd, " ")
		flags := commandFlags(t, cmd)
		var helpLine string
		for line := range strings.Lines(usage) {
			if strings.HasPrefix(strings.TrimSpace(line), prefix+" ") {
				helpLine = line
			}
		}
		// The message a command without its subcommand or arguments prints.
		var out, errb bytes.Buffer
		run(cmd[:1], &out, &errb)
		own := errb.String()
		if !strings.Contains(own, prefix) {
			own = "" // this command has no usage message of its own
		}
		var readmeSpan string
		for _, span := range inlineCode(readme) {
			if strings.HasPrefix(span, prefix+" ") {
				readmeSpan = span
			}
		}
		for where, text := range map[string]string{
			"kassa help (the usage constant in cmd/kassa/main.go)": helpLine,
			"README.md's \"## Server flags\"":                      readmeSpan,
		} {
			if text == "" {
				t.Errorf("%s has no synopsis `%s …`: add one naming its flags %v", where, prefix, sortedNames(flags))
				continue
			}
			for _, name := range sortedNames(flags) {
				if !strings.Contains(text, "--"+name) {
					t.Errorf("%s: the synopsis %q leaves out --%s, a flag of %s: add it", where, strings.TrimSpace(text), name, prefix)
				}
			}
		}
		if own != "" {
			for _, name := range sortedNames(flags) {
				if !strings.Contains(own, "--"+name) {
					t.Errorf("kassa %s: its usage message %q leaves out --%s: add it", cmd[0], strings.TrimSpace(own), name)
				}
			}
		}
	}
}

var (
	invocation   = regexp.MustCompile(`(?:^|[\s(])(?:[./\w-]*/)?kassa((?:[ \t]+[^\s&;|]+)*)`)
	flagToken    = regexp.MustCompile(`^\[?--([a-z0-9-]+)`)
	envToken     = regexp.MustCompile(`\bKASSA_[A-Z0-9_]+`)
	fencedBlock  = regexp.MustCompile("(?ms)^```[^\n]*\n(.*?)^```")
	inlineSpan   = regexp.MustCompile("`([^`]+)`")
	continuation = strings.NewReplacer("\\\n", " ")
)

// inlineCode is the text of the inline code spans of markdown text
// (outside fenced blocks), paragraph by paragraph, with line breaks as
// spaces.
func inlineCode(text string) []string {
	text = fencedBlock.ReplaceAllString(text, "")
	var spans []string
	for para := range strings.SplitSeq(text, "\n\n") {
		for _, m := range inlineSpan.FindAllStringSubmatch(para, -1) {
			spans = append(spans, strings.Join(strings.Fields(m[1]), " "))
		}
	}
	return spans
}

// codeLines are the command lines of markdown text: those of fenced and
// indented code blocks, a line ending in a backslash joined with the next.
func codeLines(text string) []string {
	var lines []string
	for _, m := range fencedBlock.FindAllStringSubmatch(text, -1) {
		lines = append(lines, strings.Split(continuation.Replace(m[1]), "\n")...)
	}
	for para := range strings.SplitSeq(fencedBlock.ReplaceAllString(text, ""), "\n\n") {
		if strings.HasPrefix(para, "    ") {
			lines = append(lines, strings.Split(continuation.Replace(para), "\n")...)
		}
	}
	return lines
}

// TestDocumentedFlagsExist: a flag that README.md or docs/*.md gives kassa
// is one it has: a flag in a command line that runs kassa (kassa serve
// --addr …, in code blocks and inline code), or an inline code span that
// starts with a flag (`--store-timeout`), which the docs use for kassa's.
func TestDocumentedFlagsExist(t *testing.T) {
	unsetKassaEnv(t)
	byCmd := map[string]map[string]cliFlag{}
	known := map[string]bool{"help": true}
	for _, cmd := range flagCommands {
		byCmd[strings.Join(cmd, " ")] = commandFlags(t, cmd)
		for name := range byCmd[strings.Join(cmd, " ")] {
			known[name] = true
		}
	}
	checked := 0
	for _, doc := range docFiles(t) {
		text := readDoc(t, doc)
		spans := inlineCode(text)
		for _, span := range spans {
			if m := flagToken.FindStringSubmatch(span); m != nil {
				checked++
				if !known[m[1]] {
					t.Errorf("%s: `%s` names --%s, which no kassa command has (kassa help, kassa CMD -h): correct the doc, or add the flag", doc, span, m[1])
				}
			}
		}
		for _, line := range append(codeLines(text), spans...) {
			for _, m := range invocation.FindAllStringSubmatch(line, -1) {
				args := strings.Fields(m[1])
				if i := slices.Index(args, "#"); i >= 0 {
					args = args[:i] // a shell comment
				}
				cmd := ""
				for _, c := range flagCommands {
					if len(args) >= len(c) && slices.Equal(args[:len(c)], c) {
						cmd = strings.Join(c, " ")
					}
				}
				for _, a := range args {
					fm := flagToken.FindStringSubmatch(a)
					if fm == nil || fm[1] == "help" {
						continue
					}
					checked++
					switch {
					case cmd == "":
						t.Errorf("%s: %q gives --%s to a kassa command that takes no flags", doc, strings.TrimSpace(m[0]), fm[1])
					case byCmd[cmd][fm[1]].name == "":
						t.Errorf("%s: %q gives --%s, which kassa %s does not have (kassa %s -h): correct the doc, or add the flag", doc, strings.TrimSpace(m[0]), fm[1], cmd, cmd)
					}
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d flag mentions found in README.md and docs/*.md: the way the docs write flags has changed; update this test", checked)
	}
}

// otherEnv are the variables the docs name that no flag of the binary
// reads, each with the file that reads it.
var otherEnv = map[string]string{
	"KASSA_KEY":               "cmd/kassa/main.go",
	"KASSA_TEST_DATABASE_URL": "storage/postgres/pgtest/pgtest.go",
	"KASSA_TEST_POOLER_URL":   "storage/postgres/pgtest/pgtest.go",
	"KASSA_EXPLAIN":           "storage/postgres/explain_test.go",
}

// TestDocumentedEnvExists: every KASSA_ variable README.md or docs/*.md
// names is read: a flag's, or one of otherEnv, which its file reads.
func TestDocumentedEnvExists(t *testing.T) {
	unsetKassaEnv(t)
	flagEnv := map[string]bool{}
	for _, cmd := range flagCommands {
		for name := range commandFlags(t, cmd) {
			if readsEnv(t, cmd, name) {
				flagEnv[envName(name)] = true
			}
		}
	}
	for v, file := range otherEnv {
		if !strings.Contains(readDoc(t, file), `"`+v+`"`) {
			t.Errorf("%s no longer reads %s (otherEnv in cmd/kassa/docs_test.go): update otherEnv, and the docs that name it", file, v)
		}
	}
	for _, doc := range docFiles(t) {
		for _, v := range envToken.FindAllString(readDoc(t, doc), -1) {
			if _, ok := otherEnv[v]; !ok && !flagEnv[v] {
				t.Errorf("%s names %s, which nothing reads: correct the doc; a new variable read outside the flags goes into otherEnv in cmd/kassa/docs_test.go", doc, v)
			}
		}
	}
	// KASSA_KEY is the binary's one variable that is no flag's; README.md says what it holds.
	if !strings.Contains(readmeSection(t, "Server flags"), "`KASSA_KEY`") {
		t.Errorf("README.md's \"## Server flags\" does not name `KASSA_KEY`, the signing key the binary reads")
	}
}

func sortedNames(flags map[string]cliFlag) []string {
	names := make([]string, 0, len(flags))
	for n := range flags {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// commands are kassa's commands, as kassa help lists them: "serve",
// "store copy", ….
func commands(t *testing.T) []string {
	t.Helper()
	var cmds []string
	for line := range strings.Lines(usage) {
		words, ok := strings.CutPrefix(line, "  kassa ")
		if !ok {
			continue
		}
		synopsis, _, _ := strings.Cut(words, "  ") // then what it does
		var cmd []string
		for _, w := range strings.Fields(synopsis) {
			if !regexp.MustCompile(`^[a-z]+$`).MatchString(w) {
				break
			}
			cmd = append(cmd, w)
		}
		cmds = append(cmds, strings.Join(cmd, " "))
	}
	if len(cmds) < 5 {
		t.Fatalf("kassa help lists only %d commands: %q", len(cmds), cmds)
	}
	return cmds
}

// TestDocumentedCommandsExist: a kassa command the docs run (kassa store
// check, in code blocks and inline code) is one kassa help lists, and the
// package comment of cmd/kassa (go doc) lists each command help does.
func TestDocumentedCommandsExist(t *testing.T) {
	cmds := commands(t)
	word := regexp.MustCompile(`^[a-z]+$`)
	checked := 0
	for _, doc := range docFiles(t) {
		text := readDoc(t, doc)
		for _, line := range append(codeLines(text), inlineCode(text)...) {
			for _, m := range invocation.FindAllStringSubmatch(line, -1) {
				args := strings.Fields(m[1])
				if len(args) == 0 || !word.MatchString(args[0]) {
					continue // kassa alone, a flag, a path: no command
				}
				checked++
				cmd := args[0]
				if len(args) > 1 && !slices.Contains(cmds, cmd) {
					cmd += " " + args[1]
				}
				if !slices.Contains(cmds, cmd) {
					t.Errorf("%s: %q runs kassa %s, which is no command of kassa (kassa help): correct the doc", doc, strings.TrimSpace(m[0]), cmd)
				}
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d kassa commands found in README.md and docs/*.md: the way the docs write them has changed; update this test", checked)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for line := range strings.Lines(f.Doc.Text()) {
		if rest, ok := strings.CutPrefix(line, "\tkassa "); ok {
			listed = append(listed, rest)
		}
	}
	for _, cmd := range cmds {
		if !slices.ContainsFunc(listed, func(l string) bool { return strings.HasPrefix(l, cmd+" ") || strings.TrimSpace(l) == cmd }) {
			t.Errorf("the package comment of cmd/kassa (main.go) does not list kassa %s, which kassa help does: add a line for it", cmd)
		}
	}
	for _, l := range listed {
		if !slices.ContainsFunc(cmds, func(cmd string) bool { return strings.HasPrefix(l, cmd+" ") }) {
			t.Errorf("the package comment of cmd/kassa (main.go) lists kassa %s, which is no command of kassa help", strings.TrimSpace(l))
		}
	}
}
