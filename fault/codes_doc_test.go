package fault

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestErrorCodesDocumented keeps docs/errors.md and the code in step: every
// code the module's non-test source can put in an error is listed there,
// and every code listed there is one the source can emit. The codes are
// read from the syntax, not from text: the string literals that reach the
// Code field of an Error (through New, NotFoundf, Conflictf, InvalidCode and
// any other function that passes a parameter on to them), the Code of the
// server's problem document and the error of its OAuth answer.
func TestErrorCodesDocumented(t *testing.T) {
	root := filepath.Join("..")
	emitted, problems := emittedCodes(t, root)
	for _, p := range problems {
		t.Error(p)
	}
	documented := documentedCodes(t, filepath.Join(root, "docs", "errors.md"))
	for _, c := range sortedKeys(emitted) {
		if !documented[c] {
			t.Errorf("code %q (emitted at %s) is not in docs/errors.md: add a row to its table, or name it among the embedder codes after the table",
				c, strings.Join(emitted[c], ", "))
		}
	}
	for _, c := range sortedKeys(documented) {
		if _, ok := emitted[c]; !ok {
			t.Errorf("docs/errors.md lists code %q, which no non-test source emits: remove it from docs/errors.md, or fix the code that should emit it", c)
		}
	}
}

// builtCodes are the codes put together at run time, by the source text of
// the expression that builds them; each entry says which codes it yields.
// The guard fails on any other code expression it cannot read as a
// constant, so that this list stays short and exact.
var builtCodes = map[string]func(t *testing.T, root string) []string{
	// A session's state refuses a change (session.requireState,
	// Ledger.ApproveSession). "session_created" is never built: the only
	// operation refused to a created session is Complete, which the
	// library calls on the session of an authorization token, and a token
	// is minted for a session as it becomes authorized.
	`"session_" + string(st)`: func(t *testing.T, root string) []string {
		var codes []string
		for _, st := range stringConsts(t, filepath.Join(root, "session"), "State") {
			if st != "created" {
				codes = append(codes, "session_"+st)
			}
		}
		if len(codes) == 0 {
			t.Errorf("no session.State constants found in session/: the builtCodes entry for session states needs updating")
		}
		return codes
	},
}

// codeSink names where a code is written: a field of a composite literal
// of a type, by key or by position.
type codeSink struct {
	pkg, typ, field string
	index           int
}

var codeSinks = []codeSink{
	{pkg: "fault", typ: "Error", field: "Code", index: 1},
	{pkg: "server", typ: "Problem", field: "Code", index: 4},
	{pkg: "server", typ: "oauthError", field: "Error", index: 0},
}

type goFile struct {
	rel   string // slash-separated path from the module root
	pkg   string // slash-separated directory from the module root: "" is the root package
	f     *ast.File
	names map[string]string // import name → directory from the module root, for the module's own packages
}

type funcParam struct {
	pkg, recv, name string // recv is "" for a function; any receiver type otherwise
	index           int
}

func emittedCodes(t *testing.T, root string) (map[string][]string, []string) {
	t.Helper()
	modPath := modulePath(t, filepath.Join(root, "go.mod"))
	fset := token.NewFileSet()
	var files []*goFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		gf := &goFile{rel: filepath.ToSlash(rel), f: f, names: map[string]string{}}
		gf.pkg = path.Dir(gf.rel)
		if gf.pkg == "." {
			gf.pkg = ""
		}
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			var dir string
			switch {
			case ip == modPath:
				dir = ""
			case strings.HasPrefix(ip, modPath+"/"):
				dir = strings.TrimPrefix(ip, modPath+"/")
			default:
				continue
			}
			name := path.Base(ip)
			if ip == modPath {
				name = "kassa"
			}
			if im.Name != nil {
				name = im.Name.Name
			}
			gf.names[name] = dir
		}
		files = append(files, gf)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	emitted := map[string][]string{}
	var problems []string
	seen := map[funcParam]bool{}
	var queue []funcParam
	src := func(e ast.Expr) string {
		var b strings.Builder
		printer.Fprint(&b, fset, e)
		return b.String()
	}
	// take reads one code expression at pos in gf, within the function
	// stack fns (innermost last).
	take := func(gf *goFile, fns []ast.Node, e ast.Expr) {
		pos := fset.Position(e.Pos())
		where := fmt.Sprintf("%s:%d", gf.rel, pos.Line)
		switch e := e.(type) {
		case *ast.BasicLit:
			if c, err := strconv.Unquote(e.Value); err == nil && e.Kind == token.STRING {
				emitted[c] = append(emitted[c], where)
				return
			}
		case *ast.SelectorExpr:
			if e.Sel.Name == "Code" {
				return // passes on the code of an error made elsewhere
			}
		case *ast.Ident:
			if len(fns) > 0 {
				if fd, ok := fns[len(fns)-1].(*ast.FuncDecl); ok {
					if i := paramIndex(fd.Type, e.Name); i >= 0 {
						fp := funcParam{pkg: gf.pkg, name: fd.Name.Name, index: i}
						if fd.Recv != nil {
							fp.recv = "*"
						}
						if !seen[fp] {
							seen[fp] = true
							queue = append(queue, fp)
						}
						return
					}
				}
			}
			if v, ok := constValue(files, gf.pkg, e.Name); ok {
				emitted[v] = append(emitted[v], where)
				return
			}
		}
		if build, ok := builtCodes[src(e)]; ok {
			for _, c := range build(t, root) {
				emitted[c] = append(emitted[c], where)
			}
			return
		}
		problems = append(problems, fmt.Sprintf("%s: cannot tell which error code the expression `%s` is: use a string literal or a constant, or add the expression to builtCodes in fault/codes_doc_test.go with the codes it yields", where, src(e)))
	}
	// walk visits every node of every file with the stack of enclosing functions.
	walk := func(visit func(gf *goFile, fns []ast.Node, n ast.Node)) {
		for _, gf := range files {
			var fns []ast.Node
			var stack []ast.Node
			ast.Inspect(gf.f, func(n ast.Node) bool {
				if n == nil {
					top := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					if len(fns) > 0 && fns[len(fns)-1] == top {
						fns = fns[:len(fns)-1]
					}
					return true
				}
				stack = append(stack, n)
				switch n.(type) {
				case *ast.FuncDecl, *ast.FuncLit:
					fns = append(fns, n)
				}
				visit(gf, fns, n)
				return true
			})
		}
	}

	walk(func(gf *goFile, fns []ast.Node, n ast.Node) {
		cl, ok := n.(*ast.CompositeLit)
		if !ok {
			return
		}
		for _, s := range codeSinks {
			if !namesType(gf, cl.Type, s.pkg, s.typ) {
				continue
			}
			for i, el := range cl.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					if k, ok := kv.Key.(*ast.Ident); ok && k.Name == s.field {
						take(gf, fns, kv.Value)
					}
				} else if i == s.index {
					take(gf, fns, el)
				}
			}
		}
	})
	// A function that passes a parameter on as a code makes that argument
	// of each of its calls a code too.
	for len(queue) > 0 {
		fp := queue[0]
		queue = queue[1:]
		walk(func(gf *goFile, fns []ast.Node, n ast.Node) {
			call, ok := n.(*ast.CallExpr)
			if !ok || !calls_(gf, call.Fun, fp) {
				return
			}
			if fp.index < len(call.Args) {
				take(gf, fns, call.Args[fp.index])
			}
		})
	}
	return emitted, problems
}

// calls_ reports whether fun, in gf, names the function of fp. A method is
// matched by its name alone, which may take in a call of another type's
// method of that name: a code too many, never one too few.
func calls_(gf *goFile, fun ast.Expr, fp funcParam) bool {
	switch fun := fun.(type) {
	case *ast.Ident:
		return fp.recv == "" && gf.pkg == fp.pkg && fun.Name == fp.name
	case *ast.SelectorExpr:
		if fun.Sel.Name != fp.name {
			return false
		}
		if x, ok := fun.X.(*ast.Ident); ok {
			if dir, ok := gf.names[x.Name]; ok {
				return fp.recv == "" && dir == fp.pkg
			}
		}
		return fp.recv != "" && (gf.pkg == fp.pkg || ast.IsExported(fp.name))
	case *ast.IndexExpr: // a generic function's instance
		return calls_(gf, fun.X, fp)
	case *ast.IndexListExpr:
		return calls_(gf, fun.X, fp)
	}
	return false
}

// namesType reports whether the type expression e, in gf, is pkg.typ (or a
// pointer to it).
func namesType(gf *goFile, e ast.Expr, pkg, typ string) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return gf.pkg == pkg && e.Name == typ
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		if !ok || e.Sel.Name != typ {
			return false
		}
		dir, ok := gf.names[x.Name]
		return ok && dir == pkg
	case *ast.StarExpr:
		return namesType(gf, e.X, pkg, typ)
	}
	return false
}

// paramIndex is the position of the parameter called name in ft, or -1.
func paramIndex(ft *ast.FuncType, name string) int {
	i := 0
	for _, f := range ft.Params.List {
		if len(f.Names) == 0 {
			i++
			continue
		}
		for _, n := range f.Names {
			if n.Name == name {
				return i
			}
			i++
		}
	}
	return -1
}

// constValue is the value of the package-level string constant name in
// package pkg.
func constValue(files []*goFile, pkg, name string) (string, bool) {
	for _, gf := range files {
		if gf.pkg != pkg {
			continue
		}
		for _, d := range gf.f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if n.Name != name || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, err := strconv.Unquote(lit.Value)
						return v, err == nil
					}
				}
			}
		}
	}
	return "", false
}

// stringConsts are the values of the string constants of type typ declared
// in the package in dir.
func stringConsts(t *testing.T, dir, typ string) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typ {
					continue
				}
				for _, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						out = append(out, s)
					}
				}
			}
		}
	}
	return out
}

func modulePath(t *testing.T, goMod string) string {
	t.Helper()
	b, err := os.ReadFile(goMod)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "module "); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}

// notCodes are backquoted snake_case words of docs/errors.md's paragraphs
// after the table that name something other than a code.
var notCodes = map[string]string{
	"grant_type": "the OAuth token request's form parameter",
}

var (
	codeToken = regexp.MustCompile("`([a-z]+(?:_[a-z]+)*)`")
	tableRow  = regexp.MustCompile(`^\|\s*\d{3}\s*\|([^|]*)\|`)
)

// documentedCodes are the codes docs/errors.md lists: those in the code
// column of its table, and the backquoted snake_case words of the
// paragraphs after the table (the OAuth errors, the embedder codes).
func documentedCodes(t *testing.T, name string) map[string]bool {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	codes := map[string]bool{}
	inTable, afterTable := false, false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := tableRow.FindStringSubmatch(line); m != nil {
			inTable = true
			for _, c := range codeToken.FindAllStringSubmatch(m[1], -1) {
				codes[c[1]] = true
			}
			continue
		}
		if inTable && !strings.HasPrefix(line, "|") {
			afterTable = true
		}
		if afterTable {
			for _, c := range codeToken.FindAllStringSubmatch(line, -1) {
				if _, ok := notCodes[c[1]]; !ok {
					codes[c[1]] = true
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(codes) == 0 {
		t.Fatalf("found no codes in %s: its table of codes (| status | code | when |) has moved; update documentedCodes", name)
	}
	return codes
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
