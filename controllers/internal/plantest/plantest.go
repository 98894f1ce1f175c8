// Package plantest compares a component's plan with a golden file, for the components' tests.
package plantest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kdag-dev/kdag/pkg/controller"
)

// AssertGolden compares the plan's text rendering (controller.Plan.WriteText) with
// testdata/<name>.golden; with update it rewrites the file instead.
func AssertGolden(t testing.TB, name string, p *controller.Plan, update bool) {
	t.Helper()
	var got bytes.Buffer
	if err := p.WriteText(&got); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name+".golden")
	if update {
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
		t.Fatalf("%v (go test -run %s -update creates it)", err, t.Name())
	}
	if diff := FirstDifference(string(want), got.String()); diff != "" {
		t.Errorf("plan differs from %s (check the change, then go test -run '%s' -update):\n%s", path, t.Name(), diff)
	}
}

// FirstDifference describes the first line where got differs from want, or returns "".
func FirstDifference(want, got string) string {
	if want == got {
		return ""
	}
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl || i >= len(w) || i >= len(g) {
			return fmt.Sprintf("line %d:\n  want: %q\n  got:  %q", i+1, wl, gl)
		}
	}
	return "same lines, different bytes"
}
