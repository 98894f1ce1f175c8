package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	t.Setenv(envJaegerURL, "")
	for _, tc := range []struct {
		args []string
		want options
	}{
		{[]string{"tree", "gitea/demo"}, options{command: "tree", typ: "gitea", name: "demo", output: "tree", depth: 3}},
		{[]string{"tree", "gt", "demo", "-n", "prod", "-o", "mermaid"},
			options{command: "tree", typ: "gt", name: "demo", namespace: "prod", output: "mermaid", depth: 3}},
		{[]string{"--kubeconfig", "/k", "--context", "c", "tree", "giteas.gitea.kdag.dev/demo", "--depth", "0", "--output=dot"},
			options{command: "tree", kubeconfig: "/k", context: "c", typ: "giteas.gitea.kdag.dev", name: "demo", output: "dot", depth: 0}},
		// trace: -o url by default, the Jaeger URL without its trailing slash.
		{[]string{"trace", "gitea/demo", "--jaeger-url", "http://127.0.0.1:16686/"},
			options{command: "trace", typ: "gitea", name: "demo", output: "url", depth: 3, jaegerURL: "http://127.0.0.1:16686"}},
		{[]string{"trace", "gt", "demo", "-n", "prod", "--jaeger-url=https://jaeger.example.com/ui"},
			options{command: "trace", typ: "gt", name: "demo", namespace: "prod", output: "url", depth: 3, jaegerURL: "https://jaeger.example.com/ui"}},
		// -o id needs no Jaeger URL.
		{[]string{"trace", "gitea/demo", "-o", "id"}, options{command: "trace", typ: "gitea", name: "demo", output: "id", depth: 3}},
		// --version needs no command.
		{[]string{"--version"}, options{depth: 3, printVersion: true}},
	} {
		got, help, err := parseArgs(tc.args, &bytes.Buffer{})
		if err != nil || help || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseArgs(%q) = %+v, %v, %v; want %+v", tc.args, got, help, err, tc.want)
		}
	}
	for args, want := range map[string]string{
		"":                           "missing command: want tree or trace",
		"describe gitea/demo":        `unknown command "describe"`,
		"tree":                       "tree takes one object",
		"tree gitea":                 "tree takes one object",
		"tree gitea/demo extra":      "tree takes one object",
		"tree gitea/":                "tree takes TYPE/NAME",
		"tree a/b/c":                 "tree takes one object",
		"tree gitea/demo -o yaml":    `unknown output format "yaml"`,
		"tree gitea/demo --depth=-1": "--depth must not be negative",
		"tree gitea/demo --bogus":    "unknown flag: --bogus",
		"tree gitea/demo -o url":     `unknown output format "url" for tree`,
		"trace":                      "trace takes one object",
		"trace gitea/":               "trace takes TYPE/NAME",
		"trace gitea/demo -o dot":    `unknown output format "dot" for trace: want url or id`,
		"trace gitea/demo":           "trace needs the Jaeger UI's address: pass --jaeger-url (e.g. --jaeger-url http://127.0.0.1:16686) or set KDAG_JAEGER_URL; or print the trace ID alone with -o id",
		"trace gitea/demo --jaeger-url 127.0.0.1:16686": `Jaeger URL "127.0.0.1:16686" (--jaeger-url or KDAG_JAEGER_URL) is not an http(s) base URL`,
		"trace gitea/demo --jaeger-url http://j/?x=1":   "is not an http(s) base URL",
		"trace gitea/demo --jaeger-url ftp://j.example": "is not an http(s) base URL",
	} {
		_, _, err := parseArgs(strings.Fields(args), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseArgs(%q): err = %v, want %q", args, err, want)
		}
	}
}

// TestParseArgs_JaegerURLFromEnv: KDAG_JAEGER_URL is --jaeger-url's default; the flag wins.
func TestParseArgs_JaegerURLFromEnv(t *testing.T) {
	t.Setenv(envJaegerURL, "http://jaeger.example.com:16686/")
	for args, want := range map[string]string{
		"trace gitea/demo": "http://jaeger.example.com:16686",
		"trace gitea/demo --jaeger-url http://other:16686": "http://other:16686",
	} {
		opts, _, err := parseArgs(strings.Fields(args), &bytes.Buffer{})
		if err != nil || opts.jaegerURL != want {
			t.Errorf("parseArgs(%q): Jaeger URL %q, %v; want %q", args, opts.jaegerURL, err, want)
		}
	}
	t.Setenv(envJaegerURL, "not a url")
	if _, _, err := parseArgs([]string{"trace", "gitea/demo"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `Jaeger URL "not a url"`) {
		t.Errorf("a bad %s: err = %v", envJaegerURL, err)
	}
}

func TestRun_ExitCodes(t *testing.T) {
	t.Setenv(envJaegerURL, "")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "kubectl kdag tree TYPE/NAME") {
		t.Errorf("--help: code %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"--version"}, &out, &errOut); code != 0 || out.String() != "kubectl-kdag "+version+"\n" {
		t.Errorf("--version: code %d, stdout %q, want %q", code, out.String(), "kubectl-kdag "+version+"\n")
	}
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"tree"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "error: tree takes one object") {
		t.Errorf("usage error: code %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	missing := filepath.Join(t.TempDir(), "missing")
	if code := run(context.Background(), []string{"tree", "gitea/demo", "--kubeconfig", missing}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "error: load kubeconfig") {
		t.Errorf("missing kubeconfig: code %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"trace", "gitea/demo"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "error: trace needs the Jaeger UI's address") {
		t.Errorf("trace without a Jaeger URL: code %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"trace", "gitea/demo", "-o", "id", "--kubeconfig", missing}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "error: load kubeconfig") {
		t.Errorf("trace, missing kubeconfig: code %d, stderr %q", code, errOut.String())
	}
	if out.Len() > 0 {
		t.Errorf("stdout %q, want nothing", out.String())
	}
}

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443"}
- name: d
  cluster: {server: "https://127.0.0.2:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: prod
  context: {cluster: c, user: u, namespace: prod}
- name: other
  context: {cluster: d, user: u}
current-context: prod
`

func TestClientConfig_NamespaceAndContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", path)
	for _, tc := range []struct {
		opts             options
		wantHost, wantNS string
	}{
		{options{}, "https://127.0.0.1:6443", "prod"},                              // $KUBECONFIG, current context
		{options{kubeconfig: path, namespace: "x"}, "https://127.0.0.1:6443", "x"}, // -n wins
		{options{context: "other"}, "https://127.0.0.2:6443", "default"},           // --context, no namespace
	} {
		cfg, ns, err := clientConfig(tc.opts)
		if err != nil {
			t.Errorf("%+v: %v", tc.opts, err)
			continue
		}
		if cfg.Host != tc.wantHost || ns != tc.wantNS {
			t.Errorf("%+v: host %s namespace %s, want %s %s", tc.opts, cfg.Host, ns, tc.wantHost, tc.wantNS)
		}
	}
}
