// calib's coverage report for Go (calib/executors/native/coverage_go.py): built with x's coverage build
// (alone: none of x's code is in it) and run in the build sandbox, as
//
//	report <build> <copies>
//
// <build>/function.go is x's file as built, <build>/cov/function.go the copy `go tool cover` made of it,
// whose variable calibCover holds the block table (Pos: start line, end line, start column | end column << 16
// per block; NumStmt); <copies>/p*/cover.counts are the copies of the counters the harness sent, one per
// input (little-endian uint32s, one per block), written by a process that ran x: they are only read here.
// A statement of a function of function.go (go/ast: every statement but blocks, empty statements, labels,
// and case and select clauses themselves) belongs to the block whose span [start, end) holds its first
// character; it ran in a copy where that block's counter is above zero. Prints one JSON object,
//
//	{"blocks": 7, "copies": 2, "funcs": [{"name": "Push", "recv": "Stack", "start": 3, "end": 9, "lines": [4, 5, 6], "reached": [[4, 5], [4, 6]]}]}
//
// with, for each top-level function, every line on which one of its statements in a block starts
// ("lines"), and for each copy directory in order (p0000, p0001, ...; an empty list where a directory has no
// copy) those of the lines on which a statement ran ("reached"). A copy of the wrong size, or a block table
// it cannot read, ends it with a message on stderr and exit status 1.
package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

type block struct{ line0, col0, line1, col1 int }

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// ints reads the composite literal `key: [...]T{...}` of calibCover's value.
func ints(value *ast.CompositeLit, key string) []uint64 {
	for _, elt := range value.Elts {
		kv, ok := elt.(*ast.KeyValueExpr)
		if id, isID := kv.Key.(*ast.Ident); !ok || !isID || id.Name != key {
			continue
		}
		lit, ok := kv.Value.(*ast.CompositeLit)
		if !ok {
			break
		}
		out := make([]uint64, 0, len(lit.Elts))
		for _, e := range lit.Elts {
			b, ok := e.(*ast.BasicLit)
			if !ok {
				fail("calibCover.%s: not a number", key)
			}
			n, err := strconv.ParseUint(b.Value, 0, 32)
			if err != nil {
				fail("calibCover.%s: %v", key, err)
			}
			out = append(out, n)
		}
		return out
	}
	fail("calibCover has no %s", key)
	return nil
}

func blocks(path string) []block {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		fail("cannot parse the cover tool's output: %v", err)
	}
	var value *ast.CompositeLit
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if len(v.Names) == 1 && v.Names[0].Name == "calibCover" && len(v.Values) == 1 {
				value, _ = v.Values[0].(*ast.CompositeLit)
			}
		}
	}
	if value == nil {
		fail("the cover tool's output has no calibCover")
	}
	pos, stmts := ints(value, "Pos"), ints(value, "NumStmt")
	if len(pos) != 3*len(stmts) {
		fail("calibCover: %d positions for %d blocks", len(pos), len(stmts))
	}
	out := make([]block, len(stmts))
	for k := range out {
		out[k] = block{int(pos[3*k]), int(pos[3*k+2] & 0xFFFF), int(pos[3*k+1]), int(pos[3*k+2] >> 16)}
	}
	return out
}

func before(l0, c0, l1, c1 int) bool { return l0 < l1 || (l0 == l1 && c0 < c1) }

type fn struct {
	Name    string  `json:"name"`
	Recv    string  `json:"recv"`
	Start   int     `json:"start"`
	End     int     `json:"end"`
	Lines   []int   `json:"lines"`
	Reached [][]int `json:"reached"`
}

func recvName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

func main() {
	if len(os.Args) != 3 {
		fail("usage: report <build> <copies>")
	}
	table := blocks(filepath.Join(os.Args[1], "cov", "function.go"))
	dirs, _ := filepath.Glob(filepath.Join(os.Args[2], "p*")) // p0000, p0001, ...: in copy order
	ran := make([][]bool, len(dirs))                          // per copy, per block
	copies := 0
	for c, d := range dirs {
		ran[c] = make([]bool, len(table))
		data, err := os.ReadFile(filepath.Join(d, "cover.counts"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			fail("%s: %v", filepath.Base(d), err)
		}
		if len(data) != 4*len(table) {
			fail("the copy of the counters in %s has %d bytes; the build has %d counters (%d bytes)",
				filepath.Base(d), len(data), len(table), 4*len(table))
		}
		copies++
		for k := range table {
			ran[c][k] = binary.LittleEndian.Uint32(data[4*k:]) > 0
		}
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(os.Args[1], "function.go"), nil, parser.SkipObjectResolution)
	if err != nil {
		fail("cannot parse function.go: %v", err)
	}
	funcs := []fn{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		one := fn{Name: fd.Name.Name, Start: fset.Position(fd.Pos()).Line, End: fset.Position(fd.End()).Line,
			Lines: []int{}, Reached: make([][]int, len(dirs))}
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			one.Recv = recvName(fd.Recv.List[0].Type)
		}
		lines := map[int]bool{} // executable
		reached := make([]map[int]bool, len(dirs))
		for c := range reached {
			reached[c] = map[int]bool{}
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch n.(type) {
			case *ast.BlockStmt, *ast.EmptyStmt, *ast.LabeledStmt, *ast.CaseClause, *ast.CommClause:
				return true
			case ast.Stmt:
			default:
				return true
			}
			p := fset.Position(n.Pos())
			for k, b := range table {
				if !before(p.Line, p.Column, b.line0, b.col0) && before(p.Line, p.Column, b.line1, b.col1) {
					lines[p.Line] = true
					for c := range dirs {
						if ran[c][k] {
							reached[c][p.Line] = true
						}
					}
					break
				}
			}
			return true
		})
		one.Lines = sorted(lines)
		for c := range dirs {
			one.Reached[c] = sorted(reached[c])
		}
		funcs = append(funcs, one)
	}
	out, _ := json.Marshal(map[string]any{"blocks": len(table), "copies": copies, "funcs": funcs})
	os.Stdout.Write(append(out, '\n'))
}

func sorted(set map[int]bool) []int {
	out := make([]int, 0, len(set))
	for line := range set {
		out = append(out, line)
	}
	sort.Ints(out)
	return out
}
