package main

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// mainPackages returns the import paths and directories of the module's main packages (the
// manager, cmd/..., hack/...), as `go list` finds them.
func mainPackages(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}} {{.Dir}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			pkgs[f[0]] = f[1]
		}
	}
	// The manager, kubectl-kdag, and the demo, devcluster and release commands at least.
	if len(pkgs) < 5 {
		t.Fatalf("go list found %d main packages, want at least 5: %v", len(pkgs), pkgs)
	}
	return pkgs
}

// TestMainPackages_LinkNoTestSupport checks that no command links a test-support package: the
// testing package, controller-runtime's envtest (whose client/config import registers a global
// --kubeconfig flag at init), or kdag's pkg/testing/... . `make demo` once died of exactly that:
// the demo linked the test kit's local cluster, which imported envtest.
func TestMainPackages_LinkNoTestSupport(t *testing.T) {
	forbidden := func(dep string) bool {
		return dep == "testing" || dep == "sigs.k8s.io/controller-runtime/pkg/envtest" ||
			strings.HasPrefix(dep, "github.com/kdag-dev/kdag/pkg/testing/")
	}
	for pkg := range mainPackages(t) {
		t.Run(pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", pkg).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", pkg, err)
			}
			for _, dep := range strings.Fields(string(out)) {
				if forbidden(dep) {
					t.Errorf("%s links %s; a command must not link test support (`go mod why`-like: go list -deps %s)", pkg, dep, pkg)
				}
			}
		})
	}
}

// TestManager_EmbedsCARoots: the manager links Mozilla's CA roots as crypto/x509's fallback
// (golang.org/x/crypto/x509roots/fallback), since the image `make image` builds has no CA bundle
// and an OTLP exporter over TLS needs one.
func TestManager_EmbedsCARoots(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps .: %v", err)
	}
	const roots = "golang.org/x/crypto/x509roots/fallback"
	if !slices.Contains(strings.Fields(string(out)), roots) {
		t.Errorf("the manager does not link %s: an image without a CA bundle could not verify any TLS server", roots)
	}
}

// globalFlagAPI are the names of package flag that act on the process-global flag.CommandLine.
var globalFlagAPI = map[string]bool{
	"CommandLine": true, "Parse": true, "Parsed": true, "Args": true, "Arg": true, "NArg": true, "NFlag": true,
	"Usage": true, "PrintDefaults": true, "Set": true, "Lookup": true, "Visit": true, "VisitAll": true,
	"Var": true, "Func": true, "BoolFunc": true, "TextVar": true,
	"String": true, "StringVar": true, "Bool": true, "BoolVar": true, "Int": true, "IntVar": true,
	"Int64": true, "Int64Var": true, "Uint": true, "UintVar": true, "Uint64": true, "Uint64Var": true,
	"Float64": true, "Float64Var": true, "Duration": true, "DurationVar": true,
}

// TestMainPackages_OwnFlagSet checks that no command parses the process-global flag set, where an
// imported package can register a name at init (controller-runtime's client/config registers
// "kubeconfig" there): each command parses a flag.FlagSet (or pflag set) of its own, as kubectl and
// the Kubernetes components do.
func TestMainPackages_OwnFlagSet(t *testing.T) {
	for pkg, dir := range mainPackages(t) {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			flagName := ""
			for _, imp := range f.Imports {
				if imp.Path.Value == `"flag"` {
					flagName = "flag"
					if imp.Name != nil {
						flagName = imp.Name.Name
					}
				}
			}
			if flagName == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == flagName && globalFlagAPI[sel.Sel.Name] {
					t.Errorf("%s (%s): flag.%s uses the process-global flag set; parse a flag.NewFlagSet of the command's own",
						fset.Position(sel.Pos()), pkg, sel.Sel.Name)
				}
				return true
			})
		}
	}
}

// TestMainPackages_Help builds every command and runs it with -h: each must print its usage and
// exit 0. A flag redefined at init (two packages registering one name on a global set) panics
// before main runs, which fails here instead of in front of a user.
func TestMainPackages_Help(t *testing.T) {
	bin := t.TempDir()
	pkgs := mainPackages(t)
	args := []string{"build", "-o", bin + "/"}
	for pkg := range pkgs {
		args = append(args, pkg)
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for pkg := range pkgs {
		t.Run(pkg, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, filepath.Base(pkg)), "-h")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			if err != nil || strings.Contains(out.String(), "panic:") {
				t.Fatalf("%s -h: %v\n%s", filepath.Base(pkg), err, out.String())
			}
			if !strings.Contains(strings.ToLower(out.String()), "usage") && !strings.Contains(out.String(), "-h, --help") {
				t.Errorf("%s -h printed no usage:\n%s", filepath.Base(pkg), out.String())
			}
		})
	}
}
