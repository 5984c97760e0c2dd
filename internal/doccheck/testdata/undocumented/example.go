package undocumented

import "github.com/caddyserver/caddy/v2"

// Example is a module of known shape for the doc comment check.
type Example struct {
	// Documented has a comment.
	Documented string `json:"documented,omitempty"`
	Bare       string `json:"bare,omitempty"`
	Trailing   int    `json:"trailing,omitempty"` // a comment after the field counts
	Nested     *Inner `json:"nested,omitempty"`   // holds Inner, whose fields are checked too
	Ignored    string `json:"-"`
	unexported string
}

// Inner is held by Example.
type Inner struct {
	Deep bool `json:"deep,omitempty"`
}

// CaddyModule returns the module's information.
func (Example) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.example", New: func() caddy.Module { return new(Example) }}
}
