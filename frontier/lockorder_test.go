package frontier

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// lockRank is the lock order of the package doc ("Locks"): a goroutine that holds a
// Frontier mutex takes only mutexes of a higher rank. historyMu is a leaf.
var lockRank = map[string]int{
	"partitionOpMu": 1,
	"addMu":         2,
	"hostRecMu":     3,
	"retryScanMu":   4,
	"mu":            5,
	"bloomMu":       6,
	"bloomFillMu":   7,
	"historyMu":     8,
}

// TestLockOrder reads the package's source and checks that every Lock or RLock of a
// Frontier mutex (f.<name>.Lock()), and every call of a Frontier or importer method that
// takes one, happens while only mutexes of a lower rank are held. It follows each
// function's statements (branches that return, break or continue do not leak their
// unlocks into the code after them), runs function literals where they appear (Badger's
// View and Update call them at once) and skips go statements and deferred calls.
func TestLockOrder(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var srcs [][2]string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, [2]string{name, string(b)})
	}
	for _, v := range checkLockOrder(t, srcs...) {
		t.Error(v)
	}
}

// TestLockOrderCheckerFindsViolations holds the checker to code that breaks the order,
// directly and through a call, and to code that follows it.
func TestLockOrderCheckerFindsViolations(t *testing.T) {
	src := `package frontier
func (f *Frontier) direct() {
	f.mu.Lock()
	f.addMu.Lock()
	f.addMu.Unlock()
	f.mu.Unlock()
}
func (f *Frontier) takesHostRec() { f.hostRecMu.Lock(); defer f.hostRecMu.Unlock() }
func (f *Frontier) viaCall() {
	f.retryScanMu.Lock()
	defer f.retryScanMu.Unlock()
	f.takesHostRec()
}
func (f *Frontier) fine() {
	f.addMu.Lock()
	defer f.addMu.Unlock()
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		f.takesHostRec() // nothing but addMu held here
		return
	}
	f.mu.Unlock()
	f.db.View(func() error { f.mu.Lock(); f.mu.Unlock(); return nil })
}
func (f *Frontier) afterEarlyReturn() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.takesHostRec() // mu still held on this path
	f.mu.Unlock()
}
`
	got := checkLockOrder(t, [2]string{"example.go", src})
	want := []string{"direct: addMu taken while holding mu", "viaCall: takesHostRec (takes hostRecMu) while holding retryScanMu",
		"afterEarlyReturn: takesHostRec (takes hostRecMu) while holding mu"}
	if len(got) != len(want) {
		t.Fatalf("violations %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("violation %q, want one with %q", got[i], want[i])
		}
	}
}

// checkLockOrder returns the lock-order violations in the Go sources srcs (file name and
// text, one package).
func checkLockOrder(t *testing.T, srcs ...[2]string) []string {
	t.Helper()
	c := &lockChecker{fset: token.NewFileSet(), funcs: map[string]*ast.FuncDecl{}, sums: map[string][]string{}}
	var decls []*ast.FuncDecl
	for _, src := range srcs {
		file, err := parser.ParseFile(c.fset, src[0], src[1], 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				decls = append(decls, fd)
				if k := funcKey(fd); k != "" {
					c.funcs[k] = fd
				}
			}
		}
	}
	for _, fd := range decls {
		c.fn = fd.Name.Name
		c.stmts(fd.Body.List, nil)
	}
	return c.errs
}

type lockChecker struct {
	fset  *token.FileSet
	funcs map[string]*ast.FuncDecl // "Frontier.Add", "importer.apply"
	sums  map[string][]string      // the Frontier mutexes a method takes (lockSummary)
	fn    string                   // the function being checked
	errs  []string
}

// funcKey names a method of *Frontier or *importer ("Frontier.Add"); "" for others.
func funcKey(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) != 1 {
		return ""
	}
	typ := fd.Recv.List[0].Type
	if st, ok := typ.(*ast.StarExpr); ok {
		typ = st.X
	}
	id, ok := typ.(*ast.Ident)
	if !ok || (id.Name != "Frontier" && id.Name != "importer") {
		return ""
	}
	return id.Name + "." + fd.Name.Name
}

// lockOp recognizes f.<mutex>.Lock/RLock (lock true) and Unlock/RUnlock (lock false).
func lockOp(call *ast.CallExpr) (name string, lock, ok bool) {
	sel, isSel := call.Fun.(*ast.SelectorExpr)
	if !isSel {
		return "", false, false
	}
	switch sel.Sel.Name {
	case "Lock", "RLock":
		lock = true
	case "Unlock", "RUnlock":
	default:
		return "", false, false
	}
	inner, isSel := sel.X.(*ast.SelectorExpr)
	if !isSel {
		return "", false, false
	}
	if id, isID := inner.X.(*ast.Ident); !isID || id.Name != "f" {
		return "", false, false
	}
	if _, known := lockRank[inner.Sel.Name]; !known {
		return "", false, false
	}
	return inner.Sel.Name, lock, true
}

// callee names the Frontier or importer method a call calls (f.x() or im.x()), if any.
func (c *lockChecker) callee(call *ast.CallExpr) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	k := ""
	switch id.Name {
	case "f":
		k = "Frontier." + sel.Sel.Name
	case "im":
		k = "importer." + sel.Sel.Name
	}
	if c.funcs[k] == nil {
		return ""
	}
	return k
}

// lockSummary is the set of Frontier mutexes a method takes, itself or through the
// methods it calls, that it does not first release: a method called with mu held that
// unlocks mu before it locks it again (refill) does not count as taking mu.
func (c *lockChecker) lockSummary(k string) []string {
	if s, ok := c.sums[k]; ok {
		return s
	}
	c.sums[k] = nil // recursion: a method calling itself adds nothing
	first := map[string]bool{}
	var takes []string
	ast.Inspect(c.funcs[k].Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			return false
		case *ast.CallExpr:
			if name, lock, ok := lockOp(n); ok {
				if _, seen := first[name]; !seen {
					first[name] = lock
					if lock {
						takes = append(takes, name)
					}
				}
			} else if ck := c.callee(n); ck != "" {
				for _, name := range c.lockSummary(ck) {
					if _, seen := first[name]; !seen {
						first[name] = true
						takes = append(takes, name)
					}
				}
			}
		}
		return true
	})
	c.sums[k] = takes
	return takes
}

func (c *lockChecker) violation(pos token.Pos, format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf("%s: %s: ", c.fset.Position(pos), c.fn)+fmt.Sprintf(format, args...))
}

// take checks that name may be taken while held are held.
func (c *lockChecker) take(pos token.Pos, what, name string, held []string) {
	for _, h := range held {
		if lockRank[h] >= lockRank[name] {
			c.violation(pos, "%s while holding %s", what, h)
		}
	}
}

// stmts follows a statement list from the held mutexes; it returns those held after it
// and whether it ends in a return, break, continue or goto (then its changes do not
// reach the statements after the enclosing branch).
func (c *lockChecker) stmts(list []ast.Stmt, held []string) ([]string, bool) {
	for _, s := range list {
		var ends bool
		held, ends = c.stmt(s, held)
		if ends {
			return held, true
		}
	}
	return held, false
}

func (c *lockChecker) stmt(s ast.Stmt, held []string) ([]string, bool) {
	switch s := s.(type) {
	case *ast.BlockStmt:
		return c.stmts(s.List, held)
	case *ast.LabeledStmt:
		return c.stmt(s.Stmt, held)
	case *ast.IfStmt:
		if s.Init != nil {
			held, _ = c.stmt(s.Init, held)
		}
		held = c.expr(s.Cond, held)
		h1, e1 := c.stmts(s.Body.List, slices.Clone(held))
		h2, e2 := held, false
		if s.Else != nil {
			h2, e2 = c.stmt(s.Else, slices.Clone(held))
		}
		return joinBranches([][]string{h1, h2}, []bool{e1, e2})
	case *ast.ForStmt:
		if s.Init != nil {
			held, _ = c.stmt(s.Init, held)
		}
		if s.Cond != nil {
			held = c.expr(s.Cond, held)
		}
		h, _ := c.stmts(s.Body.List, slices.Clone(held))
		return union(held, h), false
	case *ast.RangeStmt:
		held = c.expr(s.X, held)
		h, _ := c.stmts(s.Body.List, slices.Clone(held))
		return union(held, h), false
	case *ast.SwitchStmt, *ast.TypeSwitchStmt, *ast.SelectStmt:
		return c.clauses(s, held)
	case *ast.ReturnStmt:
		for _, r := range s.Results {
			held = c.expr(r, held)
		}
		return held, true
	case *ast.BranchStmt:
		return held, true
	case *ast.GoStmt, *ast.DeferStmt:
		return held, false
	default:
		return c.expr(s, held), false
	}
}

// clauses follows the cases of a switch or select, each from the held mutexes.
func (c *lockChecker) clauses(s ast.Stmt, held []string) ([]string, bool) {
	var body *ast.BlockStmt
	switch s := s.(type) {
	case *ast.SwitchStmt:
		if s.Init != nil {
			held, _ = c.stmt(s.Init, held)
		}
		if s.Tag != nil {
			held = c.expr(s.Tag, held)
		}
		body = s.Body
	case *ast.TypeSwitchStmt:
		held, _ = c.stmt(s.Assign, held)
		body = s.Body
	case *ast.SelectStmt:
		body = s.Body
	}
	var hs [][]string
	var ends []bool
	hasDefault := false
	for _, cl := range body.List {
		var list []ast.Stmt
		switch cl := cl.(type) {
		case *ast.CaseClause:
			hasDefault = hasDefault || cl.List == nil
			list = cl.Body
		case *ast.CommClause:
			hasDefault = hasDefault || cl.Comm == nil
			list = cl.Body
		}
		h, e := c.stmts(list, slices.Clone(held))
		hs, ends = append(hs, h), append(ends, e)
	}
	if !hasDefault {
		hs, ends = append(hs, held), append(ends, false)
	}
	return joinBranches(hs, ends)
}

// joinBranches is what is held after branches: the union of those that fall through.
func joinBranches(hs [][]string, ends []bool) ([]string, bool) {
	var out []string
	all := true
	for i, h := range hs {
		if !ends[i] {
			out, all = union(out, h), false
		}
	}
	return out, all
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// expr follows the calls in an expression or simple statement, in source order; a
// function literal's body runs where it appears.
func (c *lockChecker) expr(n ast.Node, held []string) []string {
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			held, _ = c.stmts(n.Body.List, held)
			return false
		case *ast.CallExpr:
			if name, lock, ok := lockOp(n); ok {
				if lock {
					c.take(n.Pos(), name+" taken", name, held)
					held = union(held, []string{name})
				} else {
					held = slices.DeleteFunc(slices.Clone(held), func(h string) bool { return h == name })
				}
			} else if k := c.callee(n); k != "" {
				for _, name := range c.lockSummary(k) {
					c.take(n.Pos(), fmt.Sprintf("%s (takes %s)", strings.TrimPrefix(strings.TrimPrefix(k, "Frontier."), "importer."), name), name, held)
				}
			}
		}
		return true
	})
	return held
}
