package conformance

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Formats are the report's formats, the first the default.
var Formats = []string{"text", "json", "junit", "markdown"}

// FilesDir is the directory, next to the report, where the requests of
// the failures are written for their curl commands.
const FilesDir = "conformance-files"

// WriteFiles writes, under dir/FilesDir, the body of each failure's
// request (and the files and strings it served by URL), and sets each
// failure's Curl to send that request again, naming the files by paths
// relative to dir. Nothing is written when no case failed.
func (r *Report) WriteFiles(dir string) error {
	for i := range r.Cases {
		c := &r.Cases[i]
		if c.Status != Failed || c.ex == nil || c.ex.url == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, FilesDir), 0o755); err != nil {
			return fmt.Errorf("writing the failures' requests: %w", err)
		}
		base := strings.ReplaceAll(c.ID, "/", ".")
		body := filepath.ToSlash(filepath.Join(FilesDir, base+".json"))
		if err := os.WriteFile(filepath.Join(dir, body), c.ex.body, 0o644); err != nil {
			return fmt.Errorf("writing the failures' requests: %w", err)
		}
		var served []string
		for _, d := range c.ex.served {
			name := filepath.ToSlash(filepath.Join(FilesDir, base+"."+urlName(d.name)))
			if err := os.WriteFile(filepath.Join(dir, name), d.b, 0o644); err != nil {
				return fmt.Errorf("writing the failures' requests: %w", err)
			}
			served = append(served, name)
		}
		c.Curl = curl(c.ex, body, served)
	}
	return nil
}

// curl is the command that sends ex again with its body from the file
// body; served names the files the request named by URL, which the run
// served while it lasted.
func curl(ex *exchange, body string, served []string) string {
	var b strings.Builder
	b.WriteString("curl -sS -X POST -H 'Content-Type: application/json'")
	keys := make([]string, 0, len(ex.header))
	for k := range ex.header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range ex.header[k] {
			b.WriteString(" -H " + shellQuote(k+": "+v))
		}
	}
	b.WriteString(" --data-binary @" + shellQuote(body) + " " + shellQuote(ex.url))
	if len(served) > 0 {
		b.WriteString("  # the job names by URL what the run served, now in " + strings.Join(served, ", ") + ": serve it and edit the URL")
	}
	return b.String()
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Write writes the report in format (text, json, junit or markdown).
func (r *Report) Write(w io.Writer, format string) error {
	switch format {
	case "", "text":
		return r.writeText(w)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "junit":
		return r.writeJUnit(w)
	case "markdown":
		return r.writeMarkdown(w)
	}
	return startErr("--format %q is not one of %s", format, strings.Join(Formats, ", "))
}

// summaryLine is the summary of the report in one line.
func (r *Report) summaryLine() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped in %.1fs", r.Summary.Passed, r.Summary.Failed, r.Summary.Skipped, float64(r.DurationMS)/1000)
}

func (r *Report) writeText(w io.Writer) error {
	ew := &errWriter{w: w}
	for _, c := range r.Cases {
		switch c.Status {
		case Passed:
			ew.printf("pass  %s (%d ms)\n", c.ID, c.DurationMS)
		case Skipped:
			ew.printf("skip  %s: %s\n", c.ID, c.Reason)
		default:
			ew.printf("FAIL  %s (%d ms): %s\n", c.ID, c.DurationMS, c.Reason)
			if c.Curl != "" {
				ew.printf("      %s\n", c.Curl)
			}
		}
	}
	ew.printf("%s: %s\n", r.App, r.summaryLine())
	return ew.err
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// The JUnit XML of a report, as CI systems read it.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	ClassName string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure"`
	Skipped   *junitMessage `xml:"skipped"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func seconds(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }

func (r *Report) writeJUnit(w io.Writer) error {
	suite := junitSuite{Name: "servicegate conformance " + r.App, Tests: len(r.Cases), Failures: r.Summary.Failed,
		Skipped: r.Summary.Skipped, Time: seconds(r.DurationMS)}
	for _, c := range r.Cases {
		jc := junitCase{ClassName: c.Kind + "/" + c.Module, Name: c.Job + "/" + c.Case, Time: seconds(c.DurationMS)}
		switch c.Status {
		case Failed:
			text := c.Reason
			if c.Curl != "" {
				text += "\n\n" + c.Curl
			}
			jc.Failure = &junitMessage{Message: c.Reason, Text: text}
		case Skipped:
			jc.Skipped = &junitMessage{Message: c.Reason}
		}
		suite.Cases = append(suite.Cases, jc)
	}
	doc := junitSuites{Name: "servicegate conformance", Tests: len(r.Cases), Failures: r.Summary.Failed,
		Skipped: r.Summary.Skipped, Time: seconds(r.DurationMS), Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// writeMarkdown writes a summary table (a row per module) and a section
// per failure, for a pull request's comment.
func (r *Report) writeMarkdown(w io.Writer) error {
	ew := &errWriter{w: w}
	verdict := "every case passed"
	if r.Failed() {
		verdict = fmt.Sprintf("%d of %d cases failed", r.Summary.Failed, len(r.Cases))
	}
	ew.printf("## Conformance of %s: %s\n\n", mdCode(r.App), verdict)
	ew.printf("%s; descriptor %s.\n\n", r.summaryLine(), mdCode(r.Descriptor))
	ew.printf("| Kind | Module | Passed | Failed | Skipped |\n|---|---|---:|---:|---:|\n")
	type row struct{ kind, module string }
	var rows []row
	counts := map[row]*Summary{}
	for _, c := range r.Cases {
		k := row{c.Kind, c.Module}
		s := counts[k]
		if s == nil {
			s = &Summary{}
			counts[k] = s
			rows = append(rows, k)
		}
		switch c.Status {
		case Passed:
			s.Passed++
		case Failed:
			s.Failed++
		default:
			s.Skipped++
		}
	}
	for _, k := range rows {
		s := counts[k]
		ew.printf("| %s | %s | %d | %d | %d |\n", k.kind, mdCode(k.module), s.Passed, s.Failed, s.Skipped)
	}
	for _, c := range r.Cases {
		if c.Status != Failed {
			continue
		}
		ew.printf("\n### %s\n\n%s\n", mdCode(c.ID), mdText(c.Reason))
		if c.Curl != "" {
			ew.printf("\n```sh\n%s\n```\n", c.Curl)
		}
	}
	return ew.err
}

// mdCode is s as inline code.
func mdCode(s string) string {
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// mdText is s with the characters Markdown would read as markup escaped.
func mdText(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "<", "&lt;", "[", `\[`, "|", `\|`, "#", `\#`)
	return r.Replace(s)
}

// The exit statuses of the command.
const (
	ExitPassed     = 0 // every case passed (skipped ones allowed)
	ExitFailed     = 1 // at least one case failed
	ExitNotStarted = 2 // the run could not start
)

// Command is caddy service-app conformance with its flags read: the run's
// options, and what to do with its report.
type Command struct {
	Options
	// Format is the report's format, one of Formats ("" is text).
	Format string
	// Output is the report's file; empty writes it on stdout. The
	// failures' requests are written next to it (see WriteFiles).
	Output string
	// List prints the case ids and runs nothing.
	List bool
}

// Main runs the command and returns its exit status: ExitPassed,
// ExitFailed or ExitNotStarted. The report goes to stdout or Output, why
// the run could not start to stderr.
func Main(ctx context.Context, c Command, stdout, stderr io.Writer) int {
	notStarted := func(err error) int {
		fmt.Fprintf(stderr, "caddy service-app conformance: %v\n", err)
		return ExitNotStarted
	}
	if c.Format != "" && !slices.Contains(Formats, c.Format) {
		return notStarted(fmt.Errorf("--format %q is not one of %s", c.Format, strings.Join(Formats, ", ")))
	}
	if c.List {
		ids, err := List(ctx, c.Options)
		if err != nil {
			return notStarted(err)
		}
		for _, id := range ids {
			fmt.Fprintln(stdout, id)
		}
		return ExitPassed
	}
	rep, err := Run(ctx, c.Options)
	if err != nil {
		return notStarted(err)
	}
	dir, out := ".", stdout
	if c.Output != "" {
		dir = filepath.Dir(c.Output)
		f, err := os.Create(c.Output)
		if err != nil {
			return notStarted(fmt.Errorf("--output: %w", err))
		}
		defer f.Close()
		out = f
	}
	if err := rep.WriteFiles(dir); err != nil {
		fmt.Fprintf(stderr, "caddy service-app conformance: %v\n", err)
	}
	if err := rep.Write(out, c.Format); err != nil {
		fmt.Fprintf(stderr, "caddy service-app conformance: writing the report: %v\n", err)
	}
	if c.Output != "" {
		fmt.Fprintf(stdout, "%s: %s; the report is in %s\n", rep.App, rep.summaryLine(), c.Output)
	}
	if rep.Failed() {
		return ExitFailed
	}
	return ExitPassed
}
