package main

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestSnippets_AreCompiledCode checks that every Go snippet of the README (```go blocks) and of
// every doc.go (tab-indented comment lines) is code that compiles: each paragraph of a snippet
// (lines between blank lines, leading white space ignored) must appear as consecutive lines of a
// Go file of the module (a one-line snippet: inside a line), which `go build` and `go vet` compile. A snippet edited in the docs only,
// or code changed under a snippet, fails here with the snippet's place.
func TestSnippets_AreCompiledCode(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "*.go").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var code []string
	for _, f := range strings.Fields(string(out)) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		code = append(code, "\n"+normalize(string(b))+"\n")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	snippets := readmeSnippets(string(readme))
	docs, err := filepath.Glob("pkg/*/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("pkg/*/*/doc.go")
	for _, d := range append(docs, more...) {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		snippets = append(snippets, docSnippets(d, string(b))...)
	}
	if len(snippets) < 4 {
		t.Fatalf("found %d snippets; the README's tutorial alone has three", len(snippets))
	}
	for _, s := range snippets {
		if !s.goCode {
			if strings.HasPrefix(s.where, "README.md") {
				t.Errorf("%s: this go block does not parse as Go; pseudo-code cannot be compiled:\n%s", s.where, s.text)
			}
			continue // a table or a listing in a doc comment, not code
		}
		found := false
		for _, c := range code {
			// One line may be part of a longer one (a registration inside a call).
			if strings.Contains(c, "\n"+s.text+"\n") || !strings.Contains(s.text, "\n") && strings.Contains(c, s.text) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: this snippet is not in any Go file of the module, so nothing compiles it:\n%s", s.where, s.text)
		}
	}
}

// snippet is a paragraph of a code block: where the block starts, its text, and whether the
// whole block parses as Go.
type snippet struct {
	where, text string
	goCode      bool
}

// readmeSnippets returns the paragraphs of the ```go blocks of a Markdown text.
func readmeSnippets(md string) []snippet {
	var out []snippet
	var block []string
	in, start := false, 0
	for i, line := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```go":
			in, start, block = true, i+2, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			out = append(out, paragraphs("README.md:"+strconv.Itoa(start), block)...)
		case in:
			block = append(block, line)
		}
	}
	return out
}

// docSnippets returns the paragraphs of the code blocks (comment lines indented with a tab) of a
// Go file's comments.
func docSnippets(name, src string) []snippet {
	var out []snippet
	var block []string
	start := 0
	flush := func() {
		if len(block) > 0 {
			out = append(out, paragraphs(name+":"+strconv.Itoa(start), block)...)
		}
		block = nil
	}
	for i, line := range strings.Split(src, "\n") {
		switch {
		case strings.HasPrefix(line, "//\t"):
			if block == nil {
				start = i + 1
			}
			block = append(block, strings.TrimPrefix(line, "//\t"))
		case line == "//" && block != nil:
			block = append(block, "")
		default:
			flush()
		}
	}
	flush()
	return out
}

// isGo reports whether text parses as a Go file, declarations or statements. Pseudo-code
// ("{ ... }") does not: a README go block must, a doc comment's block that does not is taken for
// a table.
func isGo(text string) bool {
	fset := token.NewFileSet()
	if _, err := parser.ParseFile(fset, "", text, 0); err == nil {
		return true
	}
	if _, err := parser.ParseFile(fset, "", "package p\n"+text, 0); err == nil {
		return true
	}
	_, err := parser.ParseFile(fset, "", "package p\nfunc _() {\n"+text+"\n}", 0)
	return err == nil
}

// paragraphs splits block at blank lines into normalized snippets.
func paragraphs(where string, block []string) []snippet {
	var out []snippet
	goCode := isGo(strings.Join(block, "\n"))
	for _, p := range strings.Split(normalize(strings.Join(block, "\n")), "\n\n") {
		if p = strings.Trim(p, "\n"); p != "" {
			out = append(out, snippet{where: where, text: p, goCode: goCode})
		}
	}
	return out
}

// normalize trims each line's leading and trailing white space.
func normalize(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, "\n")
}

// TestDocs_RelativeLinksResolve checks that every relative Markdown link of README.md and docs/
// ([text](path), [ref]: path) names a file or folder the repository holds: a reader of a fresh
// clone must be able to follow it. Web links and in-page anchors are not checked.
func TestDocs_RelativeLinksResolve(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "README.md")
	inline := regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	reference := regexp.MustCompile(`(?m)^\s*\[[^\]]+\]:\s*(\S+)`)
	codeBlock := regexp.MustCompile("(?s)```.*?```")
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := codeBlock.ReplaceAllString(string(b), "")
		var targets []string
		for _, m := range inline.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		for _, m := range reference.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, _, _ := strings.Cut(target, "#")
			resolved := filepath.Join(filepath.Dir(f), path)
			checked++
			if _, err := os.Stat(resolved); err != nil {
				t.Errorf("%s links %q, which is not in the repository (%s)", f, target, resolved)
				continue
			}
			if rel, err := filepath.Rel(".", resolved); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links %q, outside the repository", f, target)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("checked %d relative links; the README alone has more: is the pattern broken?", checked)
	}
}
