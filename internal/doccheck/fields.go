package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
)

// Field is one exported field of a Caddy module's config, as the JSON
// config names it.
type Field struct {
	// Type is the Go type the field is declared in.
	Type string
	// Name is the Go name of the field.
	Name string
	// JSON is its name in the JSON config ("" when it has no json tag).
	JSON string
	// GoType is the field's type as written in the source.
	GoType string
	// Doc is the field's doc comment ("" when it has none).
	Doc string
	// Pos is where the field is declared.
	Pos token.Position
}

// Module is a Caddy module declared in a package: the type with a
// CaddyModule method, its module ID and its config fields.
type Module struct {
	// Type is the Go name of the module's type.
	Type string
	// ID is the module ID its CaddyModule method returns, when it is a
	// string literal.
	ID string
	// Doc is the type's doc comment.
	Doc string
	// Fields are the exported fields of the type and of the struct types
	// of the same package it holds, in declaration order.
	Fields []Field
}

// ModulesOf parses the non-test Go files of the directory dir and returns
// every Caddy module declared there, sorted by module ID.
func ModulesOf(dir string) ([]Module, error) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	structs := map[string]*ast.StructType{}
	docs := map[string]string{}
	ids := map[string]string{}
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok {
						continue
					}
					if st, ok := ts.Type.(*ast.StructType); ok {
						structs[ts.Name.Name] = st
						doc := ts.Doc
						if doc == nil {
							doc = d.Doc
						}
						docs[ts.Name.Name] = doc.Text()
					}
				}
			case *ast.FuncDecl:
				if d.Name.Name != "CaddyModule" || d.Recv == nil || len(d.Recv.List) != 1 {
					continue
				}
				recv := typeName(d.Recv.List[0].Type)
				ids[recv] = moduleID(d.Body)
			}
		}
	}
	var modules []Module
	for typ, id := range ids {
		m := Module{Type: typ, ID: id, Doc: docs[typ]}
		seen := map[string]bool{}
		var walk func(name string)
		walk = func(name string) {
			st, ok := structs[name]
			if !ok || seen[name] {
				return
			}
			seen[name] = true
			var nested []string
			for _, fl := range st.Fields.List {
				doc := fl.Doc.Text()
				if doc == "" {
					doc = fl.Comment.Text()
				}
				jsonName := ""
				if fl.Tag != nil {
					tag := reflect.StructTag(strings.Trim(fl.Tag.Value, "`"))
					jsonName, _, _ = strings.Cut(tag.Get("json"), ",")
				}
				if jsonName == "-" {
					continue
				}
				for _, n := range fl.Names {
					if !n.IsExported() {
						continue
					}
					m.Fields = append(m.Fields, Field{
						Type: name, Name: n.Name, JSON: jsonName, GoType: exprString(fl.Type),
						Doc: doc, Pos: fset.Position(n.Pos()),
					})
				}
				if len(fl.Names) == 0 { // embedded
					nested = append(nested, typeName(fl.Type))
					continue
				}
				if ast.IsExported(fl.Names[0].Name) {
					nested = append(nested, typeName(fl.Type))
				}
			}
			for _, n := range nested {
				walk(n)
			}
		}
		walk(typ)
		modules = append(modules, m)
	}
	sort.Slice(modules, func(i, j int) bool { return modules[i].ID < modules[j].ID })
	return modules, nil
}

// typeName is the name of the package-local type an expression names,
// through pointers, slices and map values.
func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.ArrayType:
		return typeName(t.Elt)
	case *ast.MapType:
		return typeName(t.Value)
	}
	return ""
}

// moduleID finds the ID: "…" of the ModuleInfo a CaddyModule method returns.
func moduleID(body *ast.BlockStmt) string {
	id := ""
	ast.Inspect(body, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok {
			return true
		}
		if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "ID" {
			if lit, ok := kv.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				id = strings.Trim(lit.Value, "\"")
			}
		}
		return true
	})
	return id
}

func exprString(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return "*" + exprString(t.X)
	case *ast.ArrayType:
		return "[]" + exprString(t.Elt)
	case *ast.MapType:
		return "map[" + exprString(t.Key) + "]" + exprString(t.Value)
	case *ast.SelectorExpr:
		return exprString(t.X) + "." + t.Sel.Name
	case *ast.InterfaceType:
		return "any"
	}
	return "?"
}
