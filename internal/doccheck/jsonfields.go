package doccheck

import (
	"fmt"
	"regexp"
	"strings"
)

// JSONFields renders the JSON config of a Caddy module as Markdown: its
// module ID, then one table of the module's own fields and one of each
// struct of the package it holds that is not a module itself, each field
// with its JSON name, Go type and the first sentence of its doc comment.
func JSONFields(modules []Module, id string) (string, error) {
	isModule := map[string]bool{}
	var m *Module
	for i := range modules {
		isModule[modules[i].Type] = true
		if modules[i].ID == id {
			m = &modules[i]
		}
	}
	if m == nil {
		return "", fmt.Errorf("no module %s", id)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Module ID `%s` (Go type `%s`).\n", m.ID, m.Type)
	var order []string
	byType := map[string][]Field{}
	for _, f := range m.Fields {
		if f.Type != m.Type && isModule[f.Type] {
			continue // another module's fields: on its own page
		}
		if _, ok := byType[f.Type]; !ok {
			order = append(order, f.Type)
		}
		byType[f.Type] = append(byType[f.Type], f)
	}
	for _, typ := range order {
		if typ != m.Type {
			fmt.Fprintf(&b, "\n`%s`:\n", typ)
		}
		b.WriteString("\n| field | type | meaning |\n|---|---|---|\n")
		for _, f := range byType[typ] {
			name := f.JSON
			if name == "" {
				name = f.Name
			}
			fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", name, f.GoType, cell(firstSentence(f.Doc)))
		}
	}
	return b.String(), nil
}

var spaces = regexp.MustCompile(`\s+`)

// firstSentence is the doc comment's first sentence, on one line.
func firstSentence(doc string) string {
	doc = strings.TrimSpace(spaces.ReplaceAllString(doc, " "))
	for i := 0; i+1 < len(doc); i++ {
		if doc[i] == '.' && doc[i+1] == ' ' && !strings.HasSuffix(doc[:i], "e.g") && !strings.HasSuffix(doc[:i], "i.e") {
			return doc[:i+1]
		}
	}
	return doc
}

func cell(text string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(text)
}
