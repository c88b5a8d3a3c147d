package failpoint

import (
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// importPath is this package's import path.
const importPath = "github.com/raftmq/raftmq/internal/failpoint"

// srcFile is one parsed non-test Go file of the module.
type srcFile struct {
	path string
	dir  string
	f    *ast.File
	// build: "mutant" (compiled only with the tag), "nomutant" (only
	// without it) or "" (in both builds: a product file).
	build string
}

// buildOf classifies a file by its //go:build line: whether it is
// compiled with the mutant tag, without it, or in both builds. Other tags
// take this machine's values.
func buildOf(f *ast.File) string {
	for _, g := range f.Comments {
		if g.Pos() > f.Package {
			break
		}
		for _, c := range g.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			expr, err := constraint.Parse(c.Text)
			if err != nil {
				return ""
			}
			eval := func(mutant bool) bool {
				return expr.Eval(func(tag string) bool {
					switch tag {
					case "mutant":
						return mutant
					case runtime.GOOS, runtime.GOARCH, "unix", "gc":
						return true
					}
					return strings.HasPrefix(tag, "go1.")
				})
			}
			switch on, off := eval(true), eval(false); {
			case on && !off:
				return "mutant"
			case off && !on:
				return "nomutant"
			}
		}
	}
	return ""
}

// parseTree parses the non-test Go files under root, skipping testdata,
// hidden directories and this package.
func parseTree(t *testing.T, fset *token.FileSet, root string) []srcFile {
	t.Helper()
	var out []srcFile
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if filepath.ToSlash(path) == filepath.ToSlash(filepath.Join(root, "internal", "failpoint")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		out = append(out, srcFile{path: path, dir: filepath.Dir(path), f: f, build: buildOf(f)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkHooks returns every breach of the failpoint rules in files:
//
//   - a product file (in both builds) names this package only as a type
//     (Set), for Parse, Names and ErrNotBuilt, and in hooks;
//   - a hook is an if statement without init or else whose condition
//     starts with failpoint.On(set, failpoint.Point) or failpoint.Built
//     (the rest of an && chain naming nothing of this package) and whose
//     body is one statement calling a function declared in a file built
//     only with the mutant tag, in the same directory; or one whose
//     condition starts with !failpoint.Built and whose body is one return
//     (the default build's refusal);
//   - a failpoints_nomutant.go file holds only stubs whose body is one
//     panic;
//   - no struct type has an exported field named Unsafe*.
//
// It also returns the number of hooks it found.
func checkHooks(fset *token.FileSet, files []srcFile) (problems []string, hooks int) {
	// The functions and methods of mutant-only files, by directory.
	tagged := map[string]map[string]bool{}
	for _, sf := range files {
		if sf.build != "mutant" {
			continue
		}
		for _, d := range sf.f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				if tagged[sf.dir] == nil {
					tagged[sf.dir] = map[string]bool{}
				}
				tagged[sf.dir][fd.Name.Name] = true
			}
		}
	}
	report := func(n ast.Node, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), fmt.Sprintf(format, args...)))
	}
	for _, sf := range files {
		ast.Inspect(sf.f, func(n ast.Node) bool {
			st, ok := n.(*ast.StructType)
			if !ok {
				return true
			}
			for _, fl := range st.Fields.List {
				for _, name := range fl.Names {
					if name.IsExported() && strings.HasPrefix(name.Name, "Unsafe") {
						report(name, "exported field %s: a known-bad behaviour is a failpoint (internal/failpoint), not an option", name.Name)
					}
				}
			}
			return true
		})
		if sf.build == "nomutant" && filepath.Base(sf.path) == "failpoints_nomutant.go" {
			for _, d := range sf.f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && !isPanic(fd.Body) {
					report(fd, "stub %s does more than panic", fd.Name.Name)
				}
			}
		}
		if sf.build != "" {
			continue
		}
		name := importName(sf.f)
		if name == "" {
			continue
		}
		// Selectors of this package that a hook accounts for.
		seen := map[*ast.SelectorExpr]bool{}
		ast.Inspect(sf.f, func(n ast.Node) bool {
			is, ok := n.(*ast.IfStmt)
			if !ok {
				return true
			}
			lead, rest := leading(is.Cond)
			kind := hookKind(lead, name)
			if kind == "" {
				return true
			}
			hooks++
			markSelectors(lead, name, seen)
			for _, r := range rest {
				if mentions(r, name) {
					report(r, "a hook's condition names %s after its lead", name)
					markSelectors(r, name, seen)
				}
			}
			switch {
			case is.Init != nil || is.Else != nil:
				report(is, "a hook has an init statement or an else branch")
			case len(is.Body.List) != 1:
				report(is, "a hook's body is %d statements, not one call into a mutant-only file", len(is.Body.List))
			case kind == "refuse":
				if _, ok := is.Body.List[0].(*ast.ReturnStmt); !ok {
					report(is, "the body of an if !%s.Built is not a return", name)
				}
			case !callsTagged(is.Body.List[0], tagged[sf.dir]):
				report(is.Body.List[0], "a hook's body does not call into a file built only with -tags mutant (inline bad behaviour?)")
			}
			return true
		})
		ast.Inspect(sf.f, func(n ast.Node) bool {
			se, ok := n.(*ast.SelectorExpr)
			if !ok || seen[se] {
				return true
			}
			if id, ok := se.X.(*ast.Ident); ok && id.Name == name {
				switch se.Sel.Name {
				case "Set", "Parse", "Names", "ErrNotBuilt":
				default:
					report(se, "%s.%s outside a hook's condition", name, se.Sel.Name)
				}
			}
			return true
		})
	}
	return problems, hooks
}

// importName is the name file f imports this package under ("" if none).
func importName(f *ast.File) string {
	for _, is := range f.Imports {
		if p, _ := strconv.Unquote(is.Path.Value); p == importPath {
			if is.Name != nil {
				return is.Name.Name
			}
			return "failpoint"
		}
	}
	return ""
}

// leading splits an && chain into its first operand and the others.
func leading(e ast.Expr) (ast.Expr, []ast.Expr) {
	for {
		p, ok := e.(*ast.ParenExpr)
		if !ok {
			break
		}
		e = p.X
	}
	if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.LAND {
		lead, rest := leading(b.X)
		return lead, append(rest, b.Y)
	}
	return e, nil
}

// hookKind says what kind of hook a condition's lead makes: "on"
// (failpoint.On(x, failpoint.P)), "built" (failpoint.Built), "refuse"
// (!failpoint.Built) or "" (not a hook).
func hookKind(lead ast.Expr, name string) string {
	switch e := lead.(type) {
	case *ast.CallExpr:
		if isSel(e.Fun, name, "On") && len(e.Args) == 2 && !mentions(e.Args[0], name) {
			if se, ok := e.Args[1].(*ast.SelectorExpr); ok && isSel(se, name, se.Sel.Name) {
				return "on"
			}
		}
	case *ast.SelectorExpr:
		if isSel(e, name, "Built") {
			return "built"
		}
	case *ast.UnaryExpr:
		if e.Op == token.NOT && isSel(e.X, name, "Built") {
			return "refuse"
		}
	}
	return ""
}

func isSel(e ast.Expr, pkg, sel string) bool {
	se, ok := e.(*ast.SelectorExpr)
	if !ok || se.Sel.Name != sel {
		return false
	}
	id, ok := se.X.(*ast.Ident)
	return ok && id.Name == pkg
}

// mentions reports whether e refers to package name.
func mentions(e ast.Node, name string) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if se, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := se.X.(*ast.Ident); ok && id.Name == name {
				found = true
			}
		}
		return !found
	})
	return found
}

func markSelectors(e ast.Node, name string, seen map[*ast.SelectorExpr]bool) {
	ast.Inspect(e, func(n ast.Node) bool {
		if se, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := se.X.(*ast.Ident); ok && id.Name == name {
				seen[se] = true
			}
		}
		return true
	})
}

// callsTagged reports whether statement s calls a function of tagged and
// holds no function literal.
func callsTagged(s ast.Stmt, tagged map[string]bool) bool {
	calls, lit := false, false
	ast.Inspect(s, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			lit = true
		case *ast.CallExpr:
			switch fn := n.Fun.(type) {
			case *ast.Ident:
				calls = calls || tagged[fn.Name]
			case *ast.SelectorExpr:
				calls = calls || tagged[fn.Sel.Name]
			}
		}
		return true
	})
	return calls && !lit
}

// isPanic reports whether body is one call of panic.
func isPanic(body *ast.BlockStmt) bool {
	if body == nil || len(body.List) != 1 {
		return false
	}
	es, ok := body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	c, ok := es.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	id, ok := c.Fun.(*ast.Ident)
	return ok && id.Name == "panic"
}

// The product's files reach the failpoints only through hooks whose bad
// behaviour lives in files built only with -tags mutant, and no option
// type carries an Unsafe* field.
func TestHooksOnly(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skipf("not in the module's tree: %v", err)
	}
	fset := token.NewFileSet()
	files := parseTree(t, fset, root)
	problems, hooks := checkHooks(fset, files)
	for _, p := range problems {
		t.Error(p)
	}
	// Every failpoint has at least one hook, and the fault endpoint its
	// own: a tree where the walk finds fewer is not being checked.
	if hooks < int(count) {
		t.Errorf("found %d hooks for %d failpoints", hooks, count)
	}
	t.Logf("%d files, %d hooks", len(files), hooks)
}

// The checker flags what it must: inline bad behaviour, a hook with an
// else branch or two statements, a stray use of the registry, a stub that
// does more than panic and an Unsafe* option; it passes the hook forms.
func TestHooksCheckerCatches(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tagged.go", "//go:build mutant\n\npackage p\n\nfunc bad() bool { return true }\n")
	write("failpoints_nomutant.go", "//go:build !mutant\n\npackage p\n\nfunc bad() bool { panic(1) }\nfunc worse() bool { return false }\n")
	write("p.go", `package p

import (
	"errors"

	"github.com/raftmq/raftmq/internal/failpoint"
)

type Options struct {
	UnsafeSkip bool
	Failpoints failpoint.Set
}

func good(o Options, x bool) (bool, error) {
	if !failpoint.Built && o.Failpoints.Any() {
		return false, failpoint.ErrNotBuilt
	}
	if failpoint.On(o.Failpoints, failpoint.NoDedupe) {
		x = bad()
	}
	if failpoint.Built && x {
		return bad(), nil
	}
	return x, errors.New("")
}

func inline(o Options, x bool) bool {
	if failpoint.On(o.Failpoints, failpoint.NoDedupe) {
		x = false
	}
	if failpoint.On(o.Failpoints, failpoint.NoDedupe) {
		x = bad()
	} else {
		x = true
	}
	if failpoint.On(o.Failpoints, failpoint.NoDedupe) {
		x = bad()
		x = !x
	}
	if x && failpoint.On(o.Failpoints, failpoint.NoDedupe) {
		x = bad()
	}
	if failpoint.On(o.Failpoints, failpoint.NoDedupe) && failpoint.Built {
		x = bad()
	}
	return x || failpoint.Built
}
`)
	var files []srcFile
	fset := token.NewFileSet()
	for _, name := range []string{"tagged.go", "failpoints_nomutant.go", "p.go"} {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, srcFile{path: filepath.Join(dir, name), dir: dir, f: f, build: buildOf(f)})
	}
	if got := []string{files[0].build, files[1].build, files[2].build}; !slices.Equal(got, []string{"mutant", "nomutant", ""}) {
		t.Fatalf("builds: %q", got)
	}
	problems, hooks := checkHooks(fset, files)
	want := []string{
		"p.go:10:2: exported field UnsafeSkip",
		"failpoints_nomutant.go:6:1: stub worse",
		"p.go:29:3: a hook's body does not call", // x = false
		"p.go:31:2: a hook has an init statement or an else branch",
		"p.go:36:2: a hook's body is 2 statements",
		"p.go:43:55: a hook's condition names failpoint after its lead",
		"p.go:40:10: failpoint.On outside a hook's condition", // x && On(...)
		"p.go:40:37: failpoint.NoDedupe outside a hook's condition",
		"p.go:46:14: failpoint.Built outside a hook's condition",
	}
	if hooks != 7 {
		t.Errorf("found %d hooks, want 7", hooks)
	}
	for _, w := range want {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, w) }) {
			t.Errorf("not reported: %s", w)
		}
	}
	if len(problems) != len(want) {
		t.Errorf("%d problems, want %d:\n%s", len(problems), len(want), strings.Join(problems, "\n"))
	}
}
