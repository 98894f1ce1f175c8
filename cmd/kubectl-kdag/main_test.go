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
	for _, tc := range []struct {
		args []string
		want options
	}{
		{[]string{"tree", "gitea/demo"}, options{typ: "gitea", name: "demo", output: "tree", depth: 3}},
		{[]string{"tree", "gt", "demo", "-n", "prod", "-o", "mermaid"},
			options{typ: "gt", name: "demo", namespace: "prod", output: "mermaid", depth: 3}},
		{[]string{"--kubeconfig", "/k", "--context", "c", "tree", "giteas.gitea.kdag.dev/demo", "--depth", "0", "--output=dot"},
			options{kubeconfig: "/k", context: "c", typ: "giteas.gitea.kdag.dev", name: "demo", output: "dot", depth: 0}},
		// --version needs no command.
		{[]string{"--version"}, options{output: "tree", depth: 3, printVersion: true}},
	} {
		got, help, err := parseArgs(tc.args, &bytes.Buffer{})
		if err != nil || help || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseArgs(%q) = %+v, %v, %v; want %+v", tc.args, got, help, err, tc.want)
		}
	}
	for args, want := range map[string]string{
		"":                           "missing command",
		"describe gitea/demo":        `unknown command "describe"`,
		"tree":                       "tree takes one object",
		"tree gitea":                 "tree takes one object",
		"tree gitea/demo extra":      "tree takes one object",
		"tree gitea/":                "tree takes TYPE/NAME",
		"tree a/b/c":                 "tree takes one object",
		"tree gitea/demo -o yaml":    `unknown output format "yaml"`,
		"tree gitea/demo --depth=-1": "--depth must not be negative",
		"tree gitea/demo --bogus":    "unknown flag: --bogus",
	} {
		_, _, err := parseArgs(strings.Fields(args), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseArgs(%q): err = %v, want %q", args, err, want)
		}
	}
}

func TestRun_ExitCodes(t *testing.T) {
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
