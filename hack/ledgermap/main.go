package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// fromList collects the -from flag: it may be repeated and each value may
// be a comma-separated list of start functions.
type fromList []string

func (f *fromList) String() string { return strings.Join(*f, ",") }

func (f *fromList) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*f = append(*f, name)
		}
	}
	return nil
}

// trace, when set, is where the walks print each call they make.
var trace io.Writer

// syncOnly has the walks leave out the bodies of function literals: the
// work an event hands to a goroutine, a timer or a callback.
var syncOnly bool

func main() {
	dir := flag.String("dir", "ledger", "the directory of the package to measure")
	typeName := flag.String("type", "Ledger", "the struct type whose fields and methods are counted")
	var froms fromList
	flag.BoolVar(&syncOnly, "sync", false, "walk only what runs before the start function returns: no function literal's body")
	traceOn := flag.Bool("trace", false, "print to stderr each use of a name declared in another file, and each call of the walks, indented by depth")
	flag.Var(&froms, "from", "start function of a call walk: a method of -type or a function of the package (repeatable, or a comma list; default onJob)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: go run ./hack/ledgermap [-dir DIR] [-type NAME] [-from NAME[,NAME...]]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if len(froms) == 0 {
		froms = fromList{"onJob"}
	}
	pkg, err := load(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ledgermap:", err)
		os.Exit(1)
	}
	if len(pkg.typeErrors) > 0 {
		fmt.Fprintf(os.Stderr, "ledgermap: warning: %d type errors, counts may be incomplete; first: %v\n", len(pkg.typeErrors), pkg.typeErrors[0])
	}
	if *traceOn {
		trace = os.Stderr
	}
	rep, err := measure(pkg, *typeName, froms)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ledgermap:", err)
		os.Exit(1)
	}
	rep.write(os.Stdout)
}

// pkgInfo is one parsed and type-checked package.
type pkgInfo struct {
	fset       *token.FileSet
	files      []*ast.File
	names      []string // base file names, parallel to files
	dir        string   // the package's directory, absolute
	pkg        *types.Package
	info       *types.Info
	typeErrors []error
}

// load parses the non-test Go files of dir that match the current build
// context and type-checks them, reading imported packages from the export
// data the go command builds for them.
func load(dir string) (*pkgInfo, error) {
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	p := &pkgInfo{fset: token.NewFileSet(), dir: abs}
	imports := map[string]bool{}
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(p.fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, f)
		p.names = append(p.names, name)
		for _, spec := range f.Imports {
			path := strings.Trim(spec.Path.Value, "`\"")
			if path != "unsafe" && path != "C" {
				imports[path] = true
			}
		}
	}
	exports, err := exportFiles(dir, imports)
	if err != nil {
		return nil, err
	}
	lookup := func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(file)
	}
	p.info = &types.Info{
		Types:      map[ast.Expr]types.TypeAndValue{},
		Defs:       map[*ast.Ident]types.Object{},
		Uses:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}
	conf := types.Config{
		Importer: importer.ForCompiler(p.fset, "gc", lookup),
		Sizes:    types.SizesFor("gc", runtime.GOARCH),
		Error:    func(err error) { p.typeErrors = append(p.typeErrors, err) },
	}
	// With conf.Error set the checker goes on after an error; the errors
	// are kept in p.typeErrors.
	p.pkg, _ = conf.Check(bp.Name, p.fset, p.files, p.info)
	if p.pkg == nil {
		return nil, errors.New("type-checking produced no package")
	}
	return p, nil
}

// exportFiles runs `go list -export -deps` in dir for the given import
// paths and returns the export data file of each package they depend on.
func exportFiles(dir string, imports map[string]bool) (map[string]string, error) {
	exports := map[string]string{}
	if len(imports) == 0 {
		return exports, nil
	}
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}
	for path := range imports {
		args = append(args, path)
	}
	sort.Strings(args[5:])
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export: %v\n%s", err, stderr.Bytes())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, file, ok := strings.Cut(sc.Text(), "\t")
		if ok {
			exports[path] = file
		}
	}
	return exports, sc.Err()
}

// report is what ledgermap prints.
type report struct {
	pkgName  string
	files    int
	typeName string
	fields   int
	methods  int
	largest  int
	sccs     [][]string // components of more than one file, largest first
	walks    []walk
}

// walk is the result of one call walk.
type walk struct {
	from    string
	stops   int
	files   int
	returns int
}

func (r *report) write(w io.Writer) {
	fmt.Fprintf(w, "package %s: %d files (tests excluded)\n", r.pkgName, r.files)
	fmt.Fprintf(w, "type %s: %d fields, %d methods\n", r.typeName, r.fields, r.methods)
	fmt.Fprintf(w, "largest strongly connected component: %d files\n", r.largest)
	for _, c := range r.sccs {
		fmt.Fprintf(w, "scc %d: %s\n", len(c), strings.Join(c, " "))
	}
	for _, wk := range r.walks {
		fmt.Fprintf(w, "walk from %s: %d stops, %d files, %d returns to a file already left\n", wk.from, wk.stops, wk.files, wk.returns)
	}
}

// measure computes the report for the type named typeName and a walk from
// each of froms.
func measure(p *pkgInfo, typeName string, froms []string) (*report, error) {
	r := &report{pkgName: p.pkg.Name(), files: len(p.files), typeName: typeName}

	tn, ok := p.pkg.Scope().Lookup(typeName).(*types.TypeName)
	if !ok {
		return nil, fmt.Errorf("package %s has no type %s", p.pkg.Name(), typeName)
	}
	named, ok := tn.Type().(*types.Named)
	if !ok {
		return nil, fmt.Errorf("%s is not a defined type", typeName)
	}
	st, ok := named.Underlying().(*types.Struct)
	if !ok {
		return nil, fmt.Errorf("%s is not a struct type", typeName)
	}
	r.fields = st.NumFields()
	r.methods = named.NumMethods()

	graph := p.fileGraph()
	for _, c := range sccs(len(p.files), graph) {
		if len(c) > r.largest {
			r.largest = len(c)
		}
		if len(c) > 1 {
			names := make([]string, len(c))
			for i, f := range c {
				names[i] = p.names[f]
			}
			sort.Strings(names)
			r.sccs = append(r.sccs, names)
		}
	}
	sort.SliceStable(r.sccs, func(i, j int) bool {
		if len(r.sccs[i]) != len(r.sccs[j]) {
			return len(r.sccs[i]) > len(r.sccs[j])
		}
		return r.sccs[i][0] < r.sccs[j][0]
	})

	for _, from := range froms {
		w, err := p.walk(named, from)
		if err != nil {
			return nil, err
		}
		r.walks = append(r.walks, w)
	}
	return r, nil
}

// declaredName reports whether obj is a package-level func, type, var or
// const, a method or a struct field of p's package, and returns the
// object that declares it (the generic origin of an instantiated method or
// field).
func (p *pkgInfo) declaredName(obj types.Object) (types.Object, bool) {
	if obj == nil || obj.Pkg() != p.pkg {
		return nil, false
	}
	switch o := obj.(type) {
	case *types.Func:
		return o.Origin(), true // package-level function or method
	case *types.Var:
		if o.IsField() {
			return o.Origin(), true
		}
		return o, o.Parent() == p.pkg.Scope()
	case *types.TypeName, *types.Const:
		return o, o.Parent() == p.pkg.Scope()
	}
	return nil, false
}

// fileGraph returns, for each file, the set of other files that declare a
// name it uses.
func (p *pkgInfo) fileGraph() []map[int]bool {
	graph := make([]map[int]bool, len(p.files))
	for i := range graph {
		graph[i] = map[int]bool{}
	}
	fileOf := map[*token.File]int{}
	for i, f := range p.files {
		fileOf[p.fset.File(f.FileStart)] = i
	}
	for id, obj := range p.info.Uses {
		decl, ok := p.declaredName(obj)
		if !ok {
			continue
		}
		from, ok1 := fileOf[p.fset.File(id.Pos())]
		to, ok2 := fileOf[p.fset.File(decl.Pos())]
		if ok1 && ok2 && from != to {
			graph[from][to] = true
			if trace != nil {
				fmt.Fprintf(trace, "uses %s -> %s: %s\n", p.names[from], p.names[to], decl.Name())
			}
		}
	}
	return graph
}

// sccs returns the strongly connected components of the graph on nodes
// 0..n-1 (Tarjan's algorithm).
func sccs(n int, graph []map[int]bool) [][]int {
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	next := 0
	var connect func(v int)
	connect = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		succ := make([]int, 0, len(graph[v]))
		for w := range graph[v] {
			succ = append(succ, w)
		}
		sort.Ints(succ)
		for _, w := range succ {
			if index[w] < 0 {
				connect(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var c []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				c = append(c, w)
				if w == v {
					break
				}
			}
			out = append(out, c)
		}
	}
	for v := 0; v < n; v++ {
		if index[v] < 0 {
			connect(v)
		}
	}
	return out
}

// funcDecl is a function or method declared with a body in the package.
type funcDecl struct {
	decl *ast.FuncDecl
	file int
}

// funcDecls maps each function and method of the package that has a body
// to its declaration.
func (p *pkgInfo) funcDecls() map[*types.Func]funcDecl {
	decls := map[*types.Func]funcDecl{}
	for i, f := range p.files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if fn, ok := p.info.Defs[fd.Name].(*types.Func); ok {
				decls[fn] = funcDecl{decl: fd, file: i}
			}
		}
	}
	return decls
}

// startFunc finds the start of a walk: a method of named called name, or
// else a package-level function called name.
func (p *pkgInfo) startFunc(named *types.Named, name string) (*types.Func, error) {
	for i := 0; i < named.NumMethods(); i++ {
		if m := named.Method(i); m.Name() == name {
			return m, nil
		}
	}
	if fn, ok := p.pkg.Scope().Lookup(name).(*types.Func); ok {
		return fn, nil
	}
	return nil, fmt.Errorf("no method %s.%s and no function %s in package %s", named.Obj().Name(), name, name, p.pkg.Name())
}

// calledFunc is the function or method call calls statically, or nil for
// a call through a function value or a field, a conversion or a builtin.
func (p *pkgInfo) calledFunc(call *ast.CallExpr) *types.Func {
	fun := ast.Unparen(call.Fun)
	switch f := fun.(type) { // explicit instantiation f[T](...)
	case *ast.IndexExpr:
		fun = ast.Unparen(f.X)
	case *ast.IndexListExpr:
		fun = ast.Unparen(f.X)
	}
	var obj types.Object
	switch f := fun.(type) {
	case *ast.Ident:
		obj = p.info.Uses[f]
	case *ast.SelectorExpr:
		if sel, ok := p.info.Selections[f]; ok {
			if sel.Kind() == types.FieldVal {
				return nil // a field of function type
			}
			obj = sel.Obj()
		} else {
			obj = p.info.Uses[f.Sel] // a qualified identifier pkg.F
		}
	}
	fn, _ := obj.(*types.Func)
	return fn
}

// callee returns the function or method declared in the package that call
// calls statically, or nil for a call through a function value, an
// interface method, a function of another package, a conversion or a
// builtin.
func (p *pkgInfo) callee(call *ast.CallExpr, decls map[*types.Func]funcDecl) *types.Func {
	fn := p.calledFunc(call)
	if fn == nil || fn.Pkg() != p.pkg {
		return nil
	}
	fn = fn.Origin()
	if _, ok := decls[fn]; !ok {
		return nil // an interface method, or a function without a body
	}
	return fn
}

// subpackageCallee returns, for a call of a function or method declared
// in a package below the measured one's directory (ledger/machine for
// the ledger), the file that declares it, relative to the directory
// (machine/steps.go), and the function; "" for any other call. Such a
// call counts as a stop but is not followed: the subpackage's own calls
// are its own.
func (p *pkgInfo) subpackageCallee(call *ast.CallExpr) (string, *types.Func) {
	fn := p.calledFunc(call)
	if fn == nil || fn.Pkg() == nil || fn.Pkg() == p.pkg {
		return "", nil
	}
	rel, err := filepath.Rel(p.dir, p.fset.Position(fn.Pos()).Filename)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") || filepath.IsAbs(rel) {
		return "", nil
	}
	return filepath.ToSlash(rel), fn
}

// walk walks the call graph depth-first from the start function called
// from, taking the calls of each body in the order their text starts.
func (p *pkgInfo) walk(named *types.Named, from string) (walk, error) {
	start, err := p.startFunc(named, from)
	if err != nil {
		return walk{}, err
	}
	decls := p.funcDecls()
	if _, ok := decls[start]; !ok {
		return walk{}, fmt.Errorf("%s has no body in package %s", from, p.pkg.Name())
	}
	w := walk{from: from}
	expanded := map[*types.Func]bool{}
	visited := map[string]bool{}
	depth := 0
	var expand func(fn *types.Func)
	expand = func(fn *types.Func) {
		d := decls[fn]
		expanded[fn] = true
		visited[p.names[d.file]] = true
		ast.Inspect(d.decl.Body, func(n ast.Node) bool {
			if _, lit := n.(*ast.FuncLit); lit && syncOnly {
				return false
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			callee := p.callee(call, decls)
			var to string
			switch {
			case callee != nil:
				to = p.names[decls[callee].file]
			default:
				sub, name := p.subpackageCallee(call)
				if sub == "" {
					return true
				}
				to, callee = sub, name
			}
			w.stops++
			back := to != p.names[d.file] && visited[to]
			if back {
				w.returns++
			}
			visited[to] = true
			if trace != nil {
				mark := ""
				if back {
					mark = " (back)"
				}
				fmt.Fprintf(trace, "%s%s -> %s %s%s\n", strings.Repeat("  ", depth), fn.Name(), callee.Name(), to, mark)
			}
			if _, ok := decls[callee]; ok && !expanded[callee] {
				depth++
				expand(callee)
				depth--
			}
			return true
		})
	}
	expand(start)
	w.files = len(visited)
	return w, nil
}
