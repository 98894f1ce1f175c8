package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	"github.com/kdag-dev/kdag/pkg/shard"
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

// TestRun_InvalidShard: a --shard that cannot be a label value and a Lease name stops the
// manager before it connects to anything, saying which flag is wrong.
func TestRun_InvalidShard(t *testing.T) {
	for _, name := range []string{"Shard_A", "a.b", strings.Repeat("a", 64)} {
		err := run(options{sharding: shard.Options{Shard: name}})
		if err == nil || !strings.Contains(err.Error(), "--shard") || !strings.Contains(err.Error(), "not a valid shard name") {
			t.Errorf("run with --shard=%s: error = %v, want one naming --shard and the invalid name", name, err)
		}
	}
}

// shardingOf parses args with the manager's flags and returns the manager options the sharding
// flags make, as run does.
func shardingOf(t *testing.T, args ...string) (shard.Options, ctrl.Options, error) {
	t.Helper()
	fs := flag.NewFlagSet("kdag", flag.ContinueOnError)
	var opts options
	opts.bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	s := opts.sharding
	s.LeaderElect, s.Namespace, s.LeaderElectionID = opts.leaderElect, opts.leaderElectNS, leaderElectionID
	if err := s.Complete(); err != nil {
		return s, ctrl.Options{}, err
	}
	mo, err := s.ManagerOptions(ctrl.Options{})
	return s, mo, err
}

// TestOptions_Sharding: the sharding flags, static and dynamic, and their mistakes, which stop the
// manager before it connects to anything, naming the flag to fix.
func TestOptions_Sharding(t *testing.T) {
	type want struct {
		shard, electionID, namespace string
		elect, auto, everyReplica    bool
	}
	for _, tc := range []struct {
		name string
		args []string
		want want
		err  string // "": no error
	}{
		{name: "unsharded", want: want{electionID: "kdag.kdag.dev"}},
		{name: "a static shard", args: []string{"--shard=a", "--leader-elect"}, want: want{shard: "a", elect: true, electionID: "a.kdag.kdag.dev"}},
		{name: "dynamic shards: the replica's shard, the assigner's election, the Lease namespace",
			args: []string{"--shards=auto", "--shard-id=kdag-0", "--leader-election-namespace=ops"},
			want: want{shard: "kdag-0", elect: true, auto: true, everyReplica: true, electionID: "assigner.kdag.kdag.dev", namespace: "ops"}},
		{name: "--shards=auto and --shard", args: []string{"--shards=auto", "--shard=a", "--shard-id=x", "--leader-election-namespace=ops"}, err: "exclude each other"},
		{name: "--shards other than auto", args: []string{"--shards=3"}, err: `the only value is "auto"`},
		{name: "--shard-id without --shards=auto", args: []string{"--shard-id=x"}, err: "--shard-id needs --shards=auto"},
		{name: "an invalid --shard-id", args: []string{"--shards=auto", "--shard-id=Kdag_0", "--leader-election-namespace=ops"}, err: "--shard-id"},
		{name: "a Lease duration in fractions of seconds", args: []string{"--shards=auto", "--shard-id=x", "--leader-election-namespace=ops",
			"--shard-lease-duration=1500ms"}, err: "--shard-lease-duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, mo, err := shardingOf(t, tc.args...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			everyReplica := mo.Controller.NeedLeaderElection != nil && !*mo.Controller.NeedLeaderElection
			got := want{shard: s.Name(), electionID: mo.LeaderElectionID, elect: mo.LeaderElection, auto: s.Auto(),
				everyReplica: everyReplica, namespace: s.Namespace}
			if tc.want.namespace == "" {
				got.namespace = "" // the pod's, when the test runs in one
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestSharding_LeaseNamespace: the Leases' namespace, which the check of unserved shards reads,
// is --leader-election-namespace, else the pod's.
func TestSharding_LeaseNamespace(t *testing.T) {
	if s, _, err := shardingOf(t, "--leader-election-namespace=ops"); err != nil || s.Namespace != "ops" {
		t.Errorf("Namespace = %q (%v), want ops", s.Namespace, err)
	}
	want := ""
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil { // in a pod
		want = strings.TrimSpace(string(b))
	}
	if s, _, err := shardingOf(t); err != nil || s.Namespace != want {
		t.Errorf("Namespace without a flag = %q (%v), want %q (the pod's namespace, or none outside a pod)", s.Namespace, err, want)
	}
}
