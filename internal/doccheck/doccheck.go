// Package doccheck reads servicegate's documentation (README.md and the
// pages under docs/) the way a reader's tools do: its fenced blocks, its
// links and the anchors GitHub gives its headings. Its tests hold the
// documentation to what servicegate does: every Caddyfile adapts, every
// link resolves, every config field has a doc comment.
package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// Block is one fenced code block of a page.
type Block struct {
	// Lang is the first word of the fence's info string (caddy, caddy-d, console, …).
	Lang string
	// Line is the line of the opening fence, counted from 1.
	Line int
	// Text is what stands between the fences, each line ending in a newline.
	Text string
}

// Blocks returns the fenced code blocks of a Markdown page, in order.
func Blocks(page string) []Block {
	var blocks []Block
	var cur *Block
	var body strings.Builder
	for i, line := range strings.Split(page, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			info := strings.Fields(strings.TrimPrefix(trimmed, "```"))
			cur = &Block{Line: i + 1}
			if len(info) > 0 {
				cur.Lang = info[0]
			}
			body.Reset()
		case cur != nil && trimmed == "```":
			cur.Text = body.String()
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	return blocks
}

// Link is one inline link of a page, outside code.
type Link struct {
	// Target is what stands between the parentheses.
	Target string
	// Line is the line the link is on, counted from 1.
	Line int
}

var (
	inlineCode = regexp.MustCompile("`[^`]*`")
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
)

// Links returns the inline links of a Markdown page, outside code blocks
// and inline code.
func Links(page string) []Link {
	var links []Link
	inFence := false
	for i, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			links = append(links, Link{Target: m[1], Line: i + 1})
		}
	}
	return links
}

var (
	mdLink     = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	htmlAnchor = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)
)

// Anchors returns the anchors GitHub gives a page: one per heading (its
// text in lower case, without punctuation, spaces made hyphens, a repeat
// numbered -1, -2, …) and one per <a id="…"> or <a name="…">.
func Anchors(page string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimLeft(line, "#")
		if text == "" || text[0] != ' ' {
			continue
		}
		slug := Slug(text)
		if n := seen[slug]; n > 0 {
			seen[slug]++
			slug = slug + "-" + itoa(n)
		} else {
			seen[slug] = 1
		}
		anchors[slug] = true
	}
	return anchors
}

// Slug is GitHub's anchor of a heading's text: links reduced to their
// text, then lower case, every character but letters, digits, spaces,
// hyphens and underscores dropped, and spaces made hyphens.
func Slug(heading string) string {
	heading = mdLink.ReplaceAllString(strings.TrimSpace(heading), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// Pages returns README.md and every Markdown page under docs/, relative
// to the repository's root, sorted.
func Pages(root string) ([]string, error) {
	pages := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			pages = append(pages, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(pages[1:])
	return pages, err
}
