package conformance

import (
	"crypto/rand"
	"errors"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// sourceFile is a file given with --file, in one module's format.
type sourceFile struct {
	path    string
	name    string
	content []byte
}

// readFiles reads the --file arguments and the sources given by their
// bytes, and gives each custom-file-format module its file: by the module
// key (a glob) before "=", else by the modules' signaturePatterns. A
// later file for the same module replaces an earlier one.
func (p *plan) readFiles(args []string, sources []Source) (map[string]*sourceFile, error) {
	files := make(map[string]*sourceFile)
	give := func(keys []string, f *sourceFile, what string) error {
		if len(f.content) > MaxInline {
			return startErr("%s is %d bytes, over the 5 MB a job may carry", what, len(f.content))
		}
		if keys == nil {
			keys = p.matchingModules(f)
			if len(keys) == 0 {
				return startErr("%s matches the signaturePatterns of no custom-file-format module: name its module, --file <module key>=%s", what, f.path)
			}
		}
		for _, k := range keys {
			files[k] = f
		}
		return nil
	}
	for _, arg := range args {
		keys, file, err := p.fileModules(arg)
		if err != nil {
			return nil, err
		}
		content, err := os.ReadFile(file)
		if err != nil {
			return nil, startErr("--file %s could not be read: %v", file, errors.Unwrap(err))
		}
		if err := give(keys, &sourceFile{path: file, name: filepath.Base(file), content: content}, "--file "+file); err != nil {
			return nil, err
		}
	}
	for _, src := range sources {
		var keys []string
		if src.Module != "" {
			var err error
			if keys, _, err = p.fileModules(src.Module + "=" + src.Name); err != nil {
				return nil, err
			}
		}
		f := &sourceFile{path: src.Name, name: filepath.Base(src.Name), content: src.Content}
		if err := give(keys, f, "the file "+src.Name); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// fileModules splits a --file argument into the keys of the modules it
// names (nil when it names none: the file's patterns choose) and the
// path.
func (p *plan) fileModules(arg string) ([]string, string, error) {
	glob, file, ok := strings.Cut(arg, "=")
	if !ok {
		return nil, arg, nil
	}
	if _, err := path.Match(glob, ""); err != nil {
		return nil, arg, nil // not a glob: a path with "=" in it
	}
	var keys []string
	for _, f := range p.desc.FileFormats {
		if m, _ := path.Match(glob, f.Key); m {
			keys = append(keys, f.Key)
		}
	}
	if len(keys) > 0 {
		return keys, file, nil
	}
	if _, err := os.Stat(arg); err == nil {
		return nil, arg, nil
	}
	var declared []string
	for _, f := range p.desc.FileFormats {
		declared = append(declared, f.Key)
	}
	if len(declared) == 0 {
		return nil, "", startErr("--file %s names the module %q, and the descriptor declares no custom-file-format module", arg, glob)
	}
	return nil, "", startErr("--file %s names the module %q, which is none of the custom-file-format modules the descriptor declares (%s)", arg, glob, strings.Join(declared, ", "))
}

// matchingModules are the custom-file-format modules whose
// signaturePatterns match f: every pattern a module gives matches (the
// file name, the content), and it gives at least one.
func (p *plan) matchingModules(f *sourceFile) []string {
	var keys []string
	for _, m := range p.desc.FileFormats {
		sp := m.SignaturePatterns
		if sp.FileName == "" && sp.FileContent == "" {
			continue
		}
		if sp.FileName != "" && !matches(sp.FileName, []byte(f.name)) {
			continue
		}
		if sp.FileContent != "" && !matches(sp.FileContent, f.content) {
			continue
		}
		keys = append(keys, m.Key)
	}
	return keys
}

// matches reports whether the pattern (which the descriptor's reader
// compiled already) matches b.
func matches(pattern string, b []byte) bool {
	re, err := regexp.Compile(pattern)
	return err == nil && re.Match(b)
}

// server serves, on loopback, the files and strings the run sends by URL
// (file.contentUrl, stringsUrl), each at an unguessable address.
type server struct {
	srv  *http.Server
	base string
	mu   sync.Mutex
	docs map[string][]byte
}

func newServer() (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{base: "http://" + ln.Addr().String(), docs: make(map[string][]byte)}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// put serves b under name and returns its address.
func (s *server) put(name string, b []byte) string {
	p := "/" + rand.Text() + "/" + urlName(name)
	s.mu.Lock()
	s.docs[p] = b
	s.mu.Unlock()
	return s.base + p
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	b, ok := s.docs[r.URL.Path]
	s.mu.Unlock()
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(b)
}

func (s *server) close() { _ = s.srv.Close() }

// urlName is name with only the characters a URL path keeps as they are.
func urlName(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, name)
}
