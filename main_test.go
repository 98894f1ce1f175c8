package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/pkg/operator"
)

const redacted = "<generated when created; never printed>"

// TestRunPlan_Samples renders every valid sample as `kdag plan` does, without a cluster.
func TestRunPlan_Samples(t *testing.T) {
	samples, err := filepath.Glob("config/samples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The owners each sample becomes: the Gitea, then the children its graph creates.
	want := map[string][]string{
		"gitea.yaml": {
			"Gitea default/demo", "PostgreSQL default/demo-postgresql", "Valkey default/demo-valkey", "GiteaServer default/demo",
		},
		"gitea_external_database.yaml": {
			"Gitea default/external-db", "Valkey default/external-db-valkey", "GiteaServer default/external-db",
		},
		"gitea_full.yaml": {
			"Gitea default/full", "PostgreSQL default/full-postgresql", "Valkey default/full-valkey", "GiteaServer default/full",
		},
	}
	tested := 0
	for _, sample := range samples {
		base := filepath.Base(sample)
		if base == "kustomization.yaml" {
			continue
		}
		titles, ok := want[base]
		if !ok {
			t.Errorf("sample %s has no expectation in this test: add its owners", sample)
			continue
		}
		tested++
		t.Run(base, func(t *testing.T) {
			var mermaid bytes.Buffer
			if err := runPlan([]string{"-f", sample, "-o", "mermaid"}, &mermaid); err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Count(mermaid.String(), "flowchart TD"), len(titles); got != want {
				t.Errorf("%d flowcharts, want %d (one per owner):\n%s", got, want, mermaid.String())
			}
			var gotTitles []string
			for _, line := range strings.Split(mermaid.String(), "\n") {
				if title, ok := strings.CutPrefix(line, "%% "); ok {
					gotTitles = append(gotTitles, title)
				}
			}
			if strings.Join(gotTitles, "; ") != strings.Join(titles, "; ") {
				t.Errorf("owners %q, want %q", gotTitles, titles)
			}
			if strings.Contains(base, "external") && strings.Contains(mermaid.String(), "PostgreSQL") {
				t.Error("an external database must not get a PostgreSQL")
			}

			var out bytes.Buffer
			if err := runPlan([]string{"-f", sample, "-o", "yaml"}, &out); err != nil {
				t.Fatal(err)
			}
			secrets := 0
			for _, doc := range strings.Split(out.String(), "\n---\n") {
				obj := map[string]any{}
				if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
					t.Fatalf("output is not YAML: %v\n%s", err, doc)
				}
				if obj["kind"] != "Secret" {
					continue
				}
				secrets++
				for _, field := range []string{"data", "stringData"} {
					values, _ := obj[field].(map[string]any)
					for k, v := range values {
						if v != redacted {
							t.Errorf("Secret %v %s.%s = %q, want the placeholder", obj["metadata"], field, k, v)
						}
					}
				}
			}
			// The GiteaServer's generated Secret, and the PostgreSQL's credentials when managed;
			// plus a reference (name only, no data) for each Secret the server reads: the
			// database's, and the administrator's and the Ingress certificate's in the full
			// sample.
			wantSecrets := 2 + 1
			if strings.Contains(base, "external") {
				wantSecrets = 1 + 1
			}
			if strings.Contains(base, "full") {
				wantSecrets += 2
			}
			if secrets != wantSecrets {
				t.Errorf("%d Secrets in the yaml output, want %d", secrets, wantSecrets)
			}
			// The user's Secrets in the sample are not owners: never rendered.
			if strings.Contains(out.String(), "change-me") {
				t.Error("the yaml output contains the sample Secret's password")
			}
			// The child GiteaServer is defaulted with its CRD schema: migrationTimeout 10m.
			if !strings.Contains(out.String(), "activeDeadlineSeconds: 600") {
				t.Error("the migration Job has no 600 s deadline: the GiteaServer was not defaulted")
			}
		})
	}
	if tested != len(want) {
		t.Errorf("tested %d samples, want %d: a sample is missing", tested, len(want))
	}
}

func TestRunPlan_Errors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no file", []string{"-o", "text"}, "-f is required"},
		{"unknown format", []string{"-f", "config/samples/gitea.yaml", "-o", "json"}, `unknown output "json"`},
		{"no owner in the file", []string{"-f", "config/samples/kustomization.yaml"}, "holds no object"},
		{"missing file", []string{"-f", "config/samples/absent.yaml"}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := runPlan(tc.args, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("runPlan(%v) = %v, want an error with %q", tc.args, err, tc.wantErr)
			}
		})
	}
}

func TestRunPlan_Text(t *testing.T) {
	var out bytes.Buffer
	if err := runPlan([]string{"-f", "config/samples/gitea.yaml", "-n", "team-a"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"Gitea team-a/demo",
		"  GiteaServer team-a/demo  (after PostgreSQL team-a/demo-postgresql, Valkey team-a/demo-valkey)",
		"  Secret team-a/demo-postgresql-credentials  (reference: must exist, never written; keys database, host, password, port, user)",
		"  Job team-a/demo-migrate-1-27-3  (after Secret team-a/demo-postgresql-credentials (inferred), Secret team-a/demo-secrets (inferred), ConfigMap team-a/demo-config (inferred); create-only)",
		"  Deployment team-a/demo  (after Job team-a/demo-migrate-1-27-3 (order only), Secret team-a/demo-postgresql-credentials (inferred), Secret team-a/demo-secrets (inferred), ConfigMap team-a/demo-config (inferred), PersistentVolumeClaim team-a/demo-data (inferred))",
	} {
		if !strings.Contains(out.String(), line+"\n") {
			t.Errorf("text output lacks %q:\n%s", line, out.String())
		}
	}
}

// TestManager_Flags: the manager's command line is the one it always had: each flag by name,
// with its default, and a --NAME-concurrency per controller.
func TestManager_Flags(t *testing.T) {
	fs := flag.NewFlagSet("kdag", flag.ContinueOnError)
	opts := options()
	opts.BindFlags(fs, controllers.Components(nil))
	for name, def := range map[string]string{
		"metrics-bind-address": ":8080", "health-probe-bind-address": ":8081", "leader-elect": "false",
		"leader-election-namespace": "", "shard": "", "shards": "", "shard-id": "", "shard-lease-duration": "15s",
		"concurrency": "0", "gitea-concurrency": "0", "postgresql-concurrency": "0", "valkey-concurrency": "0",
		"giteaserver-concurrency": "0", "version": "false", "zap-log-level": "", "zap-encoder": "", "zap-devel": "false",
	} {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("no --%s flag", name)
			continue
		}
		if def != "" && f.DefValue != def {
			t.Errorf("--%s defaults to %q, want %q", name, f.DefValue, def)
		}
	}
}

// runPlan is `kdag plan ARGS`, writing to out.
func runPlan(args []string, out io.Writer) error {
	return operator.Plan(context.Background(), args, out, controllers.Components(nil), options())
}
