// Command ledgermap measures the structure of one Go package (by default
// the ledger package) and prints a short plain-text report:
//
//   - fields and methods: the number of fields of one struct type (-type,
//     default Ledger; a line "a, b, c T" is three fields, an embedded field
//     one) and the number of methods declared with a value or pointer
//     receiver of that type;
//   - files: the package's files, and the strongly connected components of
//     the graph "file A uses a name declared in file B" (A != B), where a
//     use is an identifier or selector in A that go/types resolves to a
//     package-level func, type, var or const, a method or a struct field
//     of the same package declared in B. It prints the size of the largest
//     component and every component of more than one file;
//   - walk: a static depth-first walk of the in-package call graph from a
//     start function (-from, default onJob: a method of the type or a plain
//     function of the package; repeat the flag or give a comma list for
//     several walks). Calls are taken in the order their text starts (an
//     outer call before the calls in its arguments), including calls inside
//     function literals of a body. Only calls that go/types resolves to a
//     function or method declared with a body in the package are followed;
//     a call of a function or method of a package below the package's
//     directory (ledger/machine for the ledger) counts as a stop into the
//     file that declares it (machine/steps.go) but is not followed; calls
//     through function values, interface methods and calls into other
//     packages are neither followed nor counted. A function's body is
//     expanded the first time it is reached, and every call reached counts
//     as one stop. files is the number of distinct files reached (the
//     start's included); returns counts the stops whose callee is declared
//     in a file the walk had already visited and that is not the caller's
//     own file.
//
// Files named *_test.go and files excluded by build constraints are
// ignored. The package is parsed with go/parser and type-checked with
// go/types; its imports are read from export data that `go list -export`
// reports, so the go command must be able to build them.
//
// Run it from the module root:
//
//	go run ./hack/ledgermap [-dir ledger] [-type Ledger] [-from onJob,apply]
package main
