package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Message is an answer servicegate writes to a client: an HTTP status and
// the message of its {"error":{"message":…}} body, as the source writes
// them side by side (a refusal's status and its text in one call or
// composite literal).
type Message struct {
	// Status is the HTTP status answered.
	Status int
	// Text is the message; … stands for a part computed at run time.
	Text string
	// Package is the directory of the package that answers it, from the
	// repository's root.
	Package string
	// Func is the function that answers it.
	Func string
}

// statusCodes maps the names of net/http's status constants to their codes.
var statusCodes = func() map[string]int {
	m := map[string]int{}
	for code := 100; code < 600; code++ {
		if text := http.StatusText(code); text != "" {
			name := "Status" + strings.NewReplacer(" ", "", "-", "", "'", "").Replace(text)
			m[name] = code
		}
	}
	// The constants whose names are not their status text run together.
	m["StatusRequestEntityTooLarge"] = http.StatusRequestEntityTooLarge
	m["StatusRequestURITooLong"] = http.StatusRequestURITooLong
	m["StatusRequestedRangeNotSatisfiable"] = http.StatusRequestedRangeNotSatisfiable
	m["StatusTeapot"] = http.StatusTeapot
	m["StatusMisdirectedRequest"] = http.StatusMisdirectedRequest
	m["StatusUnprocessableEntity"] = http.StatusUnprocessableEntity
	m["StatusHTTPVersionNotSupported"] = http.StatusHTTPVersionNotSupported
	m["StatusNonAuthoritativeInfo"] = http.StatusNonAuthoritativeInfo
	return m
}()

// Messages finds the answers of the non-test Go files of the packages
// under root (examples, benchmarks and test data left out): every call or
// composite literal that passes an http.Status… constant and a message
// that reads as a sentence (a capital letter first, a full stop last).
func Messages(root string) ([]Message, error) {
	var out []Message
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "examples" || rel == "bench" || rel == "docs" || strings.HasSuffix(rel, "test") && rel != "contract"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		for _, decl := range f.Decls {
			var body ast.Node
			name := ""
			switch d := decl.(type) {
			case *ast.FuncDecl:
				body, name = d.Body, d.Name.Name
			case *ast.GenDecl:
				body = d
				if len(d.Specs) > 0 {
					if vs, ok := d.Specs[0].(*ast.ValueSpec); ok && len(vs.Names) > 0 {
						name = vs.Names[0].Name
					}
				}
			}
			if body == nil || name == "" {
				continue
			}
			ast.Inspect(body, func(n ast.Node) bool {
				if vs, ok := n.(*ast.ValueSpec); ok {
					for i, id := range vs.Names {
						if i >= len(vs.Values) || !strings.Contains(strings.ToLower(id.Name), "message") {
							continue
						}
						if text, ok := sentence(vs.Values[i]); ok && !seen["0"+text] {
							seen["0"+text] = true
							out = append(out, Message{Text: text, Package: pkg, Func: id.Name})
						}
					}
					return true
				}
				var args []ast.Expr
				switch e := n.(type) {
				case *ast.CallExpr:
					args = e.Args
				case *ast.CompositeLit:
					for _, el := range e.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							args = append(args, kv.Value)
						} else {
							args = append(args, el)
						}
					}
				default:
					return true
				}
				status := 0
				for _, a := range args {
					if sel, ok := a.(*ast.SelectorExpr); ok {
						if x, ok := sel.X.(*ast.Ident); ok && x.Name == "http" {
							status = statusCodes[sel.Sel.Name]
						}
					}
					if id, ok := a.(*ast.Ident); ok && id.Name == "status" && refusing(n) {
						status = -1 // decided at run time
					}
				}
				if status == -1 {
					status = 0
				} else if status < 400 {
					return true
				}
				for _, a := range args {
					text, ok := sentence(a)
					if !ok {
						continue
					}
					key := strconv.Itoa(status) + text
					if seen[key] {
						continue
					}
					seen[key] = true
					out = append(out, Message{Status: status, Text: text, Package: pkg, Func: name})
				}
				return true
			})
		}
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Package != out[j].Package {
			return out[i].Package < out[j].Package
		}
		if out[i].Status != out[j].Status {
			return out[i].Status < out[j].Status
		}
		return out[i].Text < out[j].Text
	})
	return out, err
}

// refusing says whether a node is a call of a function whose name says it
// refuses (refuse, Refuse, h.refuse, …).
func refusing(n ast.Node) bool {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return false
	}
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return strings.Contains(strings.ToLower(f.Name), "refuse")
	case *ast.SelectorExpr:
		return strings.Contains(strings.ToLower(f.Sel.Name), "refuse")
	}
	return false
}

// sentence renders a message argument: string literals and their
// concatenations (a computed part as …), errors.New and fmt.Errorf of one,
// when the whole reads as a sentence.
func sentence(e ast.Expr) (string, bool) {
	text, lit := render(e)
	text = strings.TrimSpace(text)
	if !lit || len(text) < 12 || !strings.ContainsAny(text[:1], "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		return "", false
	}
	if !strings.HasSuffix(text, ".") && !strings.HasSuffix(text, "…") && !strings.HasSuffix(text, ".)") {
		return "", false
	}
	return text, true
}

// render writes an expression as a message: literal text as it is, any
// other part as …; lit says whether any literal text was found.
func render(e ast.Expr) (string, bool) {
	switch v := e.(type) {
	case *ast.BasicLit:
		if v.Kind != token.STRING {
			return "…", false
		}
		s, err := strconv.Unquote(v.Value)
		if err != nil {
			return "…", false
		}
		for _, verb := range []string{"%s", "%q", "%d", "%v", "%w"} {
			s = strings.ReplaceAll(s, verb, "…")
		}
		return s, true
	case *ast.BinaryExpr:
		if v.Op != token.ADD {
			return "…", false
		}
		l, a := render(v.X)
		r, b := render(v.Y)
		return strings.ReplaceAll(l+r, "……", "…"), a || b
	case *ast.CallExpr:
		if sel, ok := v.Fun.(*ast.SelectorExpr); ok && len(v.Args) > 0 {
			if x, ok := sel.X.(*ast.Ident); ok && (x.Name == "errors" && sel.Sel.Name == "New" || x.Name == "fmt" && (sel.Sel.Name == "Errorf" || sel.Sel.Name == "Sprintf")) {
				return render(v.Args[0])
			}
		}
		return "…", false
	case *ast.ParenExpr:
		return render(v.X)
	}
	return "…", false
}

// directiveOf names what answers the messages of a package, for a reader.
var directiveOf = map[string]string{
	"approute":      "[`service_app`](service_app.md)",
	"caddymodule":   "[`service_webhook`](service_webhook.md) `queue`",
	"contract":      "[`service_limits`](service_limits.md) `contract`, `inline`",
	"emulator":      "[`service_emulator`](service_emulator.md) (the emulator's own answers)",
	"health":        "[`service_app`](service_app.md) `health`",
	"installations": "[`service_app`](service_app.md#installations) `installations`",
	"modulecall":    "[`service_limits`](service_limits.md)",
	"oauth":         "[`service_oauth`](service_oauth.md), `service_app` `sign_in`",
	"subscription":  "[`service_subscription`](service_subscription.md)",
	"token":         "[`service_auth`](service_auth.md)",
	"webhook":       "[`service_webhook`](service_webhook.md)",
}

// MessagesTable renders the messages as Markdown: one table per package,
// headed by what answers them, each row a status and a message.
func MessagesTable(ms []Message) string {
	var b strings.Builder
	pkg := ""
	for _, m := range ms {
		if m.Package != pkg {
			pkg = m.Package
			who := directiveOf[pkg]
			if who == "" {
				who = "`" + pkg + "`"
			}
			b.WriteString("\n### " + strings.ReplaceAll(pkg, "/", " ") + "\n\nAnswered by " + who + ":\n\n| status | message |\n|---|---|\n")
		}
		status := strconv.Itoa(m.Status)
		if m.Status == 0 {
			status = "see above"
		}
		b.WriteString("| " + status + " | " + cell(m.Text) + " |\n")
	}
	return b.String()
}
