package kassa_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// These tests keep every name README.md and docs/*.md give the module
// true: the tests, benchmarks, fuzz targets and examples they name (and
// the go test command lines that run them), the repository paths and
// links, the Go identifiers in inline code (`storage.WaitEnded`,
// `Options.AuthorizationRetention`) and the PostgreSQL migrations by
// number. kassa's flags and KASSA_ variables are held by
// cmd/kassa/docs_test.go, kassa-load's by cmd/kassa-load/docs_test.go.
//
// The rule for past builds (docs/benchmarks.md measures many): a name a
// later commit renamed or removed is written as it is now, or it is kept
// and followed by "(at <commit>)", the commit that still had it, e.g.
// `BenchmarkOld` (at 5a51e0a), and such a reference is not checked. Anything
// else the docs name that the module does not have is a stale reference:
// correct the doc.

// historical matches the marker that exempts the reference just before it.
var historical = regexp.MustCompile(`^\)?,?\s*\(at [0-9a-f]{7,40}\b`)

// docText is one document: its path from the module root and its text.
type docText struct {
	name, text string
}

func readDocs(t *testing.T) []docText {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	names = append([]string{"README.md"}, names...)
	var docs []docText
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, docText{filepath.ToSlash(n), string(b)})
	}
	return docs
}

var (
	refFence  = regexp.MustCompile("(?ms)^ {0,3}```[^\n]*\n(.*?)^ {0,3}```[^\n]*$")
	refSpan   = regexp.MustCompile("`([^`\n]+(?:\n[^`\n]+)*)`")
	refLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	refTestFn = regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z_][A-Za-z0-9_]*|\bExample(?:_[A-Za-z0-9_]+|[A-Z][A-Za-z0-9_]*)?\b`)
)

// codeSpan is a piece of code the docs show: an inline span, or a line
// of a fenced or indented block, and what follows it on its line.
type codeSpan struct {
	doc, text, after string
	line             int
}

func (s codeSpan) historical() bool { return historical.MatchString(s.after) }

// codeSpans are the inline code spans of a document (outside fenced
// blocks, a span broken over lines joined with a space) and the lines of
// its code blocks, a line ending in a backslash joined with the next.
func codeSpans(d docText) []codeSpan {
	var spans []codeSpan
	lineAt := func(off int) int { return 1 + strings.Count(d.text[:off], "\n") }
	blocked := make([]bool, len(d.text))
	for _, m := range refFence.FindAllStringSubmatchIndex(d.text, -1) {
		for i := m[0]; i < m[1]; i++ {
			blocked[i] = true
		}
		for i, l := range strings.Split(strings.ReplaceAll(d.text[m[2]:m[3]], "\\\n", " "), "\n") {
			spans = append(spans, codeSpan{doc: d.name, text: l, line: lineAt(m[2]) + i})
		}
	}
	// Indented blocks: a paragraph whose lines all start with four spaces,
	// after a blank line.
	off := 0
	for para := range strings.SplitSeq(d.text, "\n\n") {
		start := off
		off += len(para) + 2
		if !strings.HasPrefix(para, "    ") || blocked[start] {
			continue
		}
		for i, l := range strings.Split(strings.ReplaceAll(para, "\\\n", " "), "\n") {
			spans = append(spans, codeSpan{doc: d.name, text: strings.TrimSpace(l), line: lineAt(start) + i})
		}
		for i := start; i < start+len(para); i++ {
			blocked[i] = true
		}
	}
	// Inline spans in the text with its blocks blanked, so that a backtick
	// in a block pairs with none outside it.
	masked := []byte(d.text)
	for i, b := range blocked {
		if b && masked[i] != '\n' {
			masked[i] = ' '
		}
	}
	for _, m := range refSpan.FindAllSubmatchIndex(masked, -1) {
		if strings.Contains(d.text[m[0]:m[1]], "\n\n") {
			continue
		}
		end := strings.IndexByte(d.text[m[1]:], '\n')
		if end < 0 {
			end = len(d.text) - m[1]
		}
		spans = append(spans, codeSpan{
			doc:   d.name,
			text:  strings.Join(strings.Fields(d.text[m[2]:m[3]]), " "),
			after: d.text[m[1] : m[1]+end],
			line:  lineAt(m[0]),
		})
	}
	return spans
}

// prose is a document's text outside code blocks (inline code kept).
func prose(d docText) string {
	return refFence.ReplaceAllString(d.text, "")
}

// goDecls is what the module's Go files declare.
type goDecls struct {
	// testFuncs: the Test, Benchmark, Fuzz and Example functions of each
	// package directory ("." for the module root).
	testFuncs map[string][]string
	// top: each package name's top-level identifiers (a package of test
	// files only, package x_test, is not among them).
	top map[string]map[string]bool
	// members: each type name's methods, fields and the JSON names of its
	// fields, whatever package declares it; embedded: the types a type
	// embeds.
	members  map[string]map[string]bool
	embedded map[string][]string
	// files: every file and directory of the module, by slash path; bases:
	// the base names of its files.
	files map[string]bool
	bases map[string]bool
}

// loadedDecls is the module's declarations, read once for all the tests.
var loadedDecls = sync.OnceValues(func() (*goDecls, error) {
	g := &goDecls{
		testFuncs: map[string][]string{},
		top:       map[string]map[string]bool{},
		members:   map[string]map[string]bool{},
		embedded:  map[string][]string{},
		files:     map[string]bool{},
		bases:     map[string]bool{},
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != "." && (name == ".git" || name == "node_modules") {
			return filepath.SkipDir
		}
		p = filepath.ToSlash(p)
		g.files[p] = true
		if d.IsDir() {
			return nil
		}
		g.bases[name] = true
		if !strings.HasSuffix(name, ".go") || strings.Contains(p, "testdata/") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		g.add(path.Dir(p), strings.HasSuffix(name, "_test.go"), f)
		return nil
	})
	return g, err
})

func loadDecls(t *testing.T) *goDecls {
	t.Helper()
	g, err := loadedDecls()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *goDecls) add(dir string, isTest bool, f *ast.File) {
	pkg := f.Name.Name
	external := strings.HasSuffix(pkg, "_test")
	if pkg == "main" {
		pkg = "main " + dir // no name the docs write as a package
	}
	if !external && g.top[pkg] == nil {
		g.top[pkg] = map[string]bool{}
	}
	member := func(typ, name string) {
		if g.members[typ] == nil {
			g.members[typ] = map[string]bool{}
		}
		g.members[typ][name] = true
	}
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			name := decl.Name.Name
			if decl.Recv == nil {
				if isTest && refTestFn.MatchString(name) && refTestFn.FindString(name) == name {
					g.testFuncs[dir] = append(g.testFuncs[dir], name)
				}
				if !external {
					g.top[pkg][name] = true
				}
				continue
			}
			typ := decl.Recv.List[0].Type
			for {
				switch x := typ.(type) {
				case *ast.StarExpr:
					typ = x.X
					continue
				case *ast.IndexExpr:
					typ = x.X
					continue
				case *ast.IndexListExpr:
					typ = x.X
					continue
				}
				break
			}
			if id, ok := typ.(*ast.Ident); ok {
				member(id.Name, name)
			}
		case *ast.GenDecl:
			for _, spec := range decl.Specs {
				switch spec := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range spec.Names {
						if !external {
							g.top[pkg][n.Name] = true
						}
					}
				case *ast.TypeSpec:
					if !external {
						g.top[pkg][spec.Name.Name] = true
					}
					member(spec.Name.Name, "") // a type, with or without members
					var fields *ast.FieldList
					switch ty := spec.Type.(type) {
					case *ast.StructType:
						fields = ty.Fields
					case *ast.InterfaceType:
						fields = ty.Methods
					}
					if fields == nil {
						continue
					}
					for _, fl := range fields.List {
						for _, n := range fl.Names {
							member(spec.Name.Name, n.Name)
						}
						if len(fl.Names) == 0 { // embedded
							e := fl.Type
							if s, ok := e.(*ast.StarExpr); ok {
								e = s.X
							}
							switch e := e.(type) {
							case *ast.Ident:
								g.embedded[spec.Name.Name] = append(g.embedded[spec.Name.Name], e.Name)
								member(spec.Name.Name, e.Name)
							case *ast.SelectorExpr:
								g.embedded[spec.Name.Name] = append(g.embedded[spec.Name.Name], e.Sel.Name)
								member(spec.Name.Name, e.Sel.Name)
							}
						}
						if fl.Tag != nil {
							if tag, err := strconv.Unquote(fl.Tag.Value); err == nil {
								if js, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ","); js != "" && js != "-" {
									member(spec.Name.Name, js)
								}
							}
						}
					}
				}
			}
		}
	}
}

// hasMember reports whether some type typ of the module has name, its
// own or through a type it embeds.
func (g *goDecls) hasMember(typ, name string, seen map[string]bool) bool {
	if g.members[typ][name] {
		return true
	}
	if seen[typ] {
		return false
	}
	seen[typ] = true
	for _, e := range g.embedded[typ] {
		if g.hasMember(e, name, seen) {
			return true
		}
	}
	return false
}

// TestDocumentedTestsExist: every Test, Benchmark, Fuzz and Example
// function README.md and docs/*.md name (the top-level name of
// BenchmarkCommit/store/16writers) is one a _test.go file of the module
// declares.
func TestDocumentedTestsExist(t *testing.T) {
	g := loadDecls(t)
	all := map[string]bool{}
	for _, fns := range g.testFuncs {
		for _, fn := range fns {
			all[fn] = true
		}
	}
	checked := 0
	for _, d := range readDocs(t) {
		text := d.text
		for _, m := range refTestFn.FindAllStringIndex(text, -1) {
			name := text[m[0]:m[1]]
			if name == "Example" && !strings.HasPrefix(text[m[1]:], "$") && !strings.HasPrefix(text[m[1]:], "_") {
				continue // the word, not the function (unless in a -run pattern)
			}
			if rest := text[m[1]:]; historical.MatchString(strings.TrimLeft(rest, "`/"+"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")) {
				continue
			}
			checked++
			if !all[name] {
				t.Errorf("%s:%d names %s, which no _test.go file of the module declares: write the name it has now, or mark the reference (at <commit>) as of a past build", d.name, 1+strings.Count(text[:m[0]], "\n"), name)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d test, benchmark and fuzz names found in the docs: the way they are written has changed; update this test", checked)
	}
}

var (
	goTestCmd   = regexp.MustCompile(`\bgo test\b(.*)`)
	testBinFlag = regexp.MustCompile(`(?:^|\s)-test\.(run|bench)[ =]('[^']*'|"[^"]*"|\S+)`)
)

// TestDocumentedGoTestCommands: a go test command line in the docs runs
// something: the pattern of its -run (-bench) matches, at its top level, a
// test, fuzz target or example (a benchmark) in each package it names.
// A -test.run or -test.bench of a test binary must match one in some
// package.
func TestDocumentedGoTestCommands(t *testing.T) {
	g := loadDecls(t)
	checked := 0
	matches := func(pattern, flag string, dirs []string) bool {
		top, _, _ := strings.Cut(pattern, "/")
		re, err := regexp.Compile(top)
		if err != nil {
			return false
		}
		for _, dir := range dirs {
			for _, fn := range g.testFuncs[dir] {
				if (flag == "bench") == strings.HasPrefix(fn, "Benchmark") && re.MatchString(fn) {
					return true
				}
			}
		}
		return false
	}
	var allDirs []string
	for dir := range g.testFuncs {
		allDirs = append(allDirs, dir)
	}
	for _, d := range readDocs(t) {
		for _, s := range codeSpans(d) {
			if s.historical() {
				continue
			}
			for _, m := range testBinFlag.FindAllStringSubmatch(s.text, -1) {
				p := strings.Trim(m[2], `'"`)
				if p == "^$" || p == "." {
					continue
				}
				checked++
				if !matches(p, m[1], allDirs) {
					t.Errorf("%s:%d: -test.%s %s in %q matches no %s of the module: correct the doc", s.doc, s.line, m[1], p, s.text, kindOf(m[1]))
				}
			}
			cmd := goTestCmd.FindStringSubmatch(s.text)
			if cmd == nil {
				continue
			}
			args := strings.Fields(cmd[1])
			if i := slices.IndexFunc(args, func(a string) bool {
				return strings.HasPrefix(a, "#") || a == "&&" || a == "|" || a == ";" || strings.HasSuffix(a, ")")
			}); i >= 0 {
				args = args[:i]
			}
			var dirs []string
			patterns := map[string]string{}
			for i := 0; i < len(args); i++ {
				a := args[i]
				switch {
				case (a == "-run" || a == "-bench") && i+1 < len(args):
					patterns[a[1:]] = strings.Trim(args[i+1], `'"`)
					i++
				case strings.HasPrefix(a, "-run=") || strings.HasPrefix(a, "-bench="):
					k, v, _ := strings.Cut(a[1:], "=")
					patterns[k] = strings.Trim(v, `'"`)
				case strings.HasPrefix(a, "-"):
					if slices.Contains([]string{"-count", "-benchtime", "-o", "-cpuprofile", "-memprofile", "-timeout", "-fuzztime", "-fuzz", "-p", "-parallel"}, a) {
						i++
					}
				case a == "." || strings.HasPrefix(a, "./"):
					dir := strings.TrimSuffix(strings.TrimPrefix(a, "./"), "/")
					if dir == "" {
						dir = "."
					}
					if strings.HasSuffix(dir, "...") {
						dirs = append(dirs, "...")
						continue
					}
					if !g.files[dir] {
						t.Errorf("%s:%d: %q names package ./%s, which is no directory of the module", s.doc, s.line, s.text, dir)
					}
					dirs = append(dirs, dir)
				}
			}
			if len(dirs) == 0 {
				dirs = []string{"."}
			}
			for flag, p := range patterns {
				if p == "^$" || p == "." || p == "" {
					continue
				}
				for _, dir := range dirs {
					checked++
					in := []string{dir}
					if dir == "..." {
						in = allDirs
					}
					if !matches(p, flag, in) {
						t.Errorf("%s:%d: -%s %s in %q matches no %s in ./%s: correct the pattern or the package", s.doc, s.line, flag, p, s.text, kindOf(flag), dir)
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d go test patterns found in the docs: the way they are written has changed; update this test", checked)
	}
}

func kindOf(flag string) string {
	if flag == "bench" {
		return "benchmark"
	}
	return "test, fuzz target or example"
}

// TestDocumentedPathsExist: every repository path the docs name is there:
// the target of a relative link (and its #anchor, a heading of the linked
// document); an inline code span or code word that starts with one of the
// module's top-level directories (`storage/postgres/turns.go`,
// `./cmd/kassa`, `.ci/run`), where a glob must match something; and a
// bare file name of Go source or markdown (`gate.go`), which some file of
// the module has.
func TestDocumentedPathsExist(t *testing.T) {
	g := loadDecls(t)
	topDirs := map[string]bool{}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	// A directory .gitignore names at the top (`/kassa-data/`, the
	// server's default data, made by a run) is none of the module's: the
	// docs name paths under it that a run makes, which a fresh clone has not.
	ignored := map[string]bool{}
	if b, err := os.ReadFile(".gitignore"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(strings.TrimSpace(l), "/"); ok && strings.HasSuffix(name, "/") {
				ignored[strings.TrimSuffix(name, "/")] = true
			}
		}
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != ".git" && !ignored[e.Name()] {
			topDirs[e.Name()] = true
		}
	}
	anchors := map[string]map[string]bool{}
	docs := readDocs(t)
	for _, d := range docs {
		anchors[d.name] = headingAnchors(d.text)
	}
	checked := 0
	for _, d := range docs {
		for _, m := range refLink.FindAllStringSubmatchIndex(prose(d), -1) {
			text := prose(d)
			target := text[m[2]:m[3]]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			doc := d.name
			if file != "" {
				doc = path.Clean(path.Join(path.Dir(d.name), file))
				checked++
				if !g.files[doc] {
					t.Errorf("%s links to %s, which is no file of the module (%s)", d.name, target, doc)
					continue
				}
			}
			if anchor != "" {
				checked++
				if a, ok := anchors[doc]; ok && !a[anchor] {
					t.Errorf("%s links to %s, but %s has no heading whose anchor is #%s", d.name, target, doc, anchor)
				}
			}
		}
		for _, s := range codeSpans(d) {
			if s.historical() {
				continue
			}
			words := []string{s.text}
			if strings.ContainsAny(s.text, " \t") {
				words = strings.Fields(s.text)
			}
			for _, w := range words {
				p, ok := repoPath(w, topDirs)
				if !ok {
					continue
				}
				checked++
				switch {
				case strings.Contains(p, "/"):
					if strings.ContainsAny(p, "*?[") {
						if ms, _ := filepath.Glob(filepath.FromSlash(p)); len(ms) == 0 {
							t.Errorf("%s:%d names %s, which matches no file of the module", s.doc, s.line, w)
						}
					} else if !g.files[p] {
						t.Errorf("%s:%d names %s, which is no file or directory of the module: write the path it has now", s.doc, s.line, w)
					}
				case !g.bases[p]:
					t.Errorf("%s:%d names %s, which no file of the module is called: write the name it has now", s.doc, s.line, w)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d paths found in the docs: the way they are written has changed; update this test", checked)
	}
}

var pathWord = regexp.MustCompile(`^[A-Za-z0-9_.*-]+(?:/[A-Za-z0-9_.*{}-]*)*$`)

// repoPath is the repository path word names (without ./, a trailing
// slash, /..., a :line or punctuation around it), and whether it is one:
// a path under a top-level directory of the module, or the bare name of
// a .go or .md file.
func repoPath(w string, topDirs map[string]bool) (string, bool) {
	w = strings.Trim(w, `"'(),;`)
	w = strings.TrimPrefix(w, "./")
	if i := strings.LastIndexByte(w, ':'); i > 0 && strings.Trim(w[i+1:], "0123456789") == "" {
		w = w[:i]
	}
	w = strings.TrimSuffix(strings.TrimSuffix(w, "/..."), "/")
	if w == "" || !pathWord.MatchString(w) || strings.Contains(w, "{") {
		return "", false
	}
	first, _, hasSlash := strings.Cut(w, "/")
	if hasSlash {
		return w, topDirs[first]
	}
	return w, strings.HasSuffix(w, ".go") || strings.HasSuffix(w, ".md")
}

var atxHeading = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t#]*$`)

// headingAnchors are the anchors GitHub gives the headings of a markdown
// document: lower case, punctuation other than - and _ dropped, spaces
// as -, a repeated one numbered -1, -2, ….
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	for _, m := range atxHeading.FindAllStringSubmatch(refFence.ReplaceAllString(text, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(strings.ReplaceAll(m[1], "`", "")) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		for n, try := 1, a; ; n++ {
			if !anchors[try] {
				anchors[try] = true
				break
			}
			try = a + "-" + strconv.Itoa(n)
		}
	}
	return anchors
}

var goIdent = regexp.MustCompile(`^\(?\*?([A-Za-z_][A-Za-z0-9_]*)\)?\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?(?:\(\))?$`)

// TestDocumentedIdentifiersExist: an inline code span that names a Go
// identifier of the module is true to it: pkg.Name (`order.Verify`) is
// declared in a package pkg of the module, pkg.Type.Member
// (`server.Config.StoreTimeout`) and Type.Member (`Ledger.ApproveSession`,
// for a type the module declares) are a method, field or field's JSON name
// of that type. pkg.name in lower case is left alone: the docs write
// event types and topics so (`order.partialRefund`).
func TestDocumentedIdentifiersExist(t *testing.T) {
	g := loadDecls(t)
	checked := 0
	for _, d := range readDocs(t) {
		for _, s := range codeSpans(d) {
			m := goIdent.FindStringSubmatch(s.text)
			if m == nil || s.historical() {
				continue
			}
			x, y, z := m[1], m[2], m[3]
			switch top, isPkg := g.top[x]; {
			case isPkg:
				if !unicode.IsUpper(rune(y[0])) {
					continue
				}
				checked++
				if !top[y] {
					t.Errorf("%s:%d: `%s`: package %s declares no %s: write the name it has now", s.doc, s.line, s.text, x, y)
					continue
				}
				if z != "" && !g.hasMember(y, z, map[string]bool{}) {
					t.Errorf("%s:%d: `%s`: %s.%s has no method or field %s: write the name it has now", s.doc, s.line, s.text, x, y, z)
				}
			case unicode.IsUpper(rune(x[0])) && g.members[x] != nil:
				checked++
				if !g.hasMember(x, y, map[string]bool{}) || z != "" && !g.hasMember(y, z, map[string]bool{}) && !g.hasMember(x, z, map[string]bool{}) {
					t.Errorf("%s:%d: `%s`: no type %s of the module has that method or field: write the name it has now", s.doc, s.line, s.text, x)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d Go identifiers found in the docs: the way they are written has changed; update this test", checked)
	}
}

var migrationRef = regexp.MustCompile(`(?i)\bmigrations? ((?:\d+(?:–\d+)?(?:,? and |, | or |,? ))*\d+(?:–\d+)?)`)

// TestDocumentedMigrationsExist: a PostgreSQL migration the docs name by
// number ("migration 13", "migrations 8–10") is one
// storage/postgres/migrations has.
func TestDocumentedMigrationsExist(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("storage", "postgres", "migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no storage/postgres/migrations/*.sql: %v", err)
	}
	have := map[int]bool{}
	for _, f := range files {
		n, err := strconv.Atoi(strings.SplitN(filepath.Base(f), "_", 2)[0])
		if err != nil {
			t.Fatalf("%s: no number: %v", f, err)
		}
		have[n] = true
	}
	checked := 0
	for _, d := range readDocs(t) {
		for _, m := range migrationRef.FindAllStringSubmatch(d.text, -1) {
			for _, num := range regexp.MustCompile(`\d+`).FindAllString(m[1], -1) {
				n, _ := strconv.Atoi(num)
				checked++
				if !have[n] {
					t.Errorf("%s: %q names migration %d, which storage/postgres/migrations does not have", d.name, m[0], n)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d migration numbers found in the docs: the way they are written has changed; update this test", checked)
	}
}
