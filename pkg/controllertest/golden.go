package controllertest

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pkg/errors"

	"github.com/kdag-dev/kdag/pkg/plan"
)

// update is the -update flag of every test binary that imports this package: AssertPlan rewrites
// its golden files instead of comparing. A test package must not declare a flag of that name too
// (the flag package panics on the second one).
var update = flag.Bool("update", false, "rewrite the golden files in testdata instead of comparing (controllertest.AssertPlan)")

// AssertPlan compares p's text rendering (plan.Plan.WriteText: one block per node with its
// dependencies, options and object as YAML, Secret values redacted) with testdata/<name>.golden
// in the test's package directory. With -update it writes the file instead. On a difference it
// fails t with the lines that differ, (-want +got), and the command, runnable from the module root, that
// rewrites this test's golden file once the change is checked.
func AssertPlan(t testing.TB, p *plan.Plan, name string) {
	t.Helper()
	var got bytes.Buffer
	if err := p.WriteText(&got); err != nil {
		t.Fatalf("render plan %s: %v", name, err)
	}
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden plan: %v; create it with\n\t%s", err, updateCommand(t))
	}
	if diff := Diff(string(want), got.String()); diff != "" {
		t.Errorf("plan differs from %s %s\nif the change is intended, rewrite the file with\n\t%s", path, diff, updateCommand(t))
	}
}

// Diff returns the line diff of got against want, "(-want +got)" as go-cmp prints it (the lines
// that differ with a few around them; its exact spacing is not stable, so match it loosely), or
// "" when they are equal.
func Diff(want, got string) string {
	if want == got {
		return ""
	}
	return "(-want +got):\n" + cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n"))
}

// updateCommand is the go test command, relative to the module root, that reruns t with -update.
func updateCommand(t testing.TB) string {
	pkg := "."
	if wd, err := os.Getwd(); err == nil {
		if root, err := moduleRoot(wd); err == nil {
			if rel, err := filepath.Rel(root, wd); err == nil && rel != "." {
				pkg = "./" + filepath.ToSlash(rel) + "/"
			}
		}
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return "go test " + pkg + " -run '" + strings.Join(parts, "/") + "' -update"
}

// moduleRoot returns the closest directory at or above dir that holds a go.mod.
func moduleRoot(dir string) (string, error) {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.Errorf("no go.mod at or above %s", dir)
		}
		d = parent
	}
}
