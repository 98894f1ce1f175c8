package input

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// TestSecrets_NeverLeak runs the reference operator, traced to an in-memory exporter and logging
// at its most verbose level, on two Giteas: one with an external database and an administrator
// whose Secrets hold known values, one with a managed database whose passwords and keys the
// operator generates; and on a PostgreSQL that refuses a foreign credentials Secret holding a
// known value. Once both Giteas are Ready, none of the known values, nor the generated ones read
// back from the cluster, plain or base64, appears in a log line, an event, a span (name,
// attribute, event, status, link, resource), any field of an object other than a Secret (status
// included), or the output of `kdag plan` run on a file holding the Secrets and the Giteas.
func TestSecrets_NeverLeak(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	exp := tracetest.NewInMemoryExporter()
	shutdownTracing, err := tracing.Setup(ctx, tracing.WithExporter(exp), tracing.WithSyncer(), tracing.WithSampler(sdktrace.AlwaysSample()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shutdownTracing(context.Background()) })

	ns := local.Namespace(t)
	known := map[string]string{
		"external database password": "kdag-sentinel-db-" + rand.Text(),
		"administrator password":     "kdag-sentinel-admin-" + rand.Text(),
		"refused Secret's password":  "kdag-sentinel-refused-" + rand.Text(),
	}
	userSecrets := func() []*corev1.Secret {
		return []*corev1.Secret{
			{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leak-db"}, Type: corev1.SecretTypeOpaque, StringData: map[string]string{
				"host": "db.example.com", "port": "5432", "user": "gitea", "database": "gitea", "password": known["external database password"]}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leak-admin"}, Type: corev1.SecretTypeOpaque, StringData: map[string]string{
				"username": "root", "email": "root@example.com", "password": known["administrator password"]}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refused-credentials"}, Type: corev1.SecretTypeOpaque, StringData: map[string]string{
				"password": known["refused Secret's password"]}},
		}
	}
	owners := func() []client.Object {
		return []client.Object{
			owner("Gitea", ns, "leak-external", map[string]any{"database": externalDB("leak-db"), "cache": map[string]any{"enabled": false},
				"admin": map[string]any{"secretRef": map[string]any{"name": "leak-admin"}}}),
			sampleGitea(t, ns, "gitea.yaml"), // "demo": managed database, generated passwords
			owner("PostgreSQL", ns, "refused", map[string]any{}),
		}
	}
	for _, s := range userSecrets() {
		if err := cl.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	op := startOperator(t, []string{ns})
	for _, o := range owners() {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, "Gitea", ns, "leak-external")
	waitReady(t, "Gitea", ns, "demo")
	refused := reconcileCase{name: "PostgreSQL refused refuses the foreign Secret", kind: "PostgreSQL", owner: "refused",
		condition: kdagv1alpha1.ConditionReconciling, reason: kdagv1alpha1.ReasonNodeFailed, want: []string{"Secret " + ns + "/refused-credentials exists"}}
	poll.Until(t, refused.name, readyTimeout, func(ctx context.Context) string { return refused.check(ctx, ns) })

	// The generated values, as the cluster holds them.
	generated := map[string]string{}
	for _, ref := range []struct{ secret, key string }{
		{"demo-postgresql-credentials", giteav1alpha1.DatabaseSecretPasswordKey},
		{"demo-secrets", "secret-key"}, {"demo-secrets", "internal-token"},
		{"leak-external-secrets", "secret-key"}, {"leak-external-secrets", "internal-token"},
	} {
		s := &corev1.Secret{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.secret}, s); err != nil {
			t.Fatal(err)
		}
		v := string(s.Data[ref.key])
		if len(v) < 16 {
			t.Fatalf("Secret %s key %s = %q: want a generated value", ref.secret, ref.key, v)
		}
		generated[ref.secret+"/"+ref.key] = v
	}
	op.stop() // every log line and span of the operator is written (spans are exported as they end)
	spans := exp.GetSpans()
	if err := shutdownTracing(ctx); err != nil { // resets the exporter
		t.Fatal(err)
	}

	values := map[string]string{}
	for what, v := range known {
		values[what] = v
	}
	for what, v := range generated {
		values["generated "+what] = v
	}
	s := newSecretSearch(values)

	// The search finds what it looks for: every value is in its Secret as the API serves it.
	secretsJSON := marshalAll(t, ns, &corev1.SecretList{})
	if missing := s.missingFrom(secretsJSON); len(missing) > 0 {
		t.Fatalf("the search does not find %v in the Secrets that hold them: it would find no leak either", missing)
	}

	surfaces := map[string][]string{
		"log lines": strings.Split(strings.TrimSpace(logs.String()), "\n"),
		"events":    eventTexts(t, ns),
		"spans":     spanTexts(spans),
		"objects (every field, status included; Secrets excepted)": objectTexts(t, ns),
		"plan output": planOutputs(t, ns, userSecrets(), owners()),
	}
	for surface, texts := range surfaces {
		if len(texts) == 0 || len(texts) == 1 && texts[0] == "" {
			t.Errorf("no %s to search: the capture is broken", surface)
			continue
		}
		if !strings.Contains(strings.Join(texts, "\n"), ns) && surface != "plan output" {
			t.Errorf("the %s never mention namespace %s: the capture missed the test's operator", surface, ns)
		}
		found := 0
		for i, text := range texts {
			for _, what := range s.find(text) {
				found++
				t.Errorf("%s #%d holds the %s: %s", surface, i, what, oneLine(text))
			}
		}
		t.Logf("%d %s searched for %d secret values (plain and base64): %d found", len(texts), surface, len(values), found)
	}
}

// secretSearch looks for secret values, plain and base64-encoded.
type secretSearch struct {
	needles map[string]string // needle -> what it is
}

func newSecretSearch(values map[string]string) secretSearch {
	s := secretSearch{needles: map[string]string{}}
	for what, v := range values {
		s.needles[v] = what
		s.needles[base64.StdEncoding.EncodeToString([]byte(v))] = what + " (base64)"
		s.needles[base64.RawStdEncoding.EncodeToString([]byte(v))] = what + " (base64, unpadded)"
	}
	return s
}

// find returns what text holds.
func (s secretSearch) find(text string) []string {
	var out []string
	for needle, what := range s.needles {
		if strings.Contains(text, needle) {
			out = append(out, what)
		}
	}
	return out
}

// missingFrom returns the values none of whose forms text holds.
func (s secretSearch) missingFrom(text string) []string {
	found := map[string]bool{}
	for _, what := range s.find(text) {
		found[strings.TrimSuffix(strings.TrimSuffix(what, " (base64, unpadded)"), " (base64)")] = true
	}
	var missing []string
	for _, what := range s.needles {
		if base := strings.TrimSuffix(strings.TrimSuffix(what, " (base64, unpadded)"), " (base64)"); !found[base] {
			missing = append(missing, base)
			found[base] = true
		}
	}
	return missing
}

// marshalAll lists the objects of list in ns and returns them as JSON.
func marshalAll(t *testing.T, ns string, list client.ObjectList) string {
	t.Helper()
	if err := cl.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// eventTexts returns every Event of ns (events.k8s.io and core), each as JSON: reason, note,
// annotations, the objects it is about.
func eventTexts(t *testing.T, ns string) []string {
	t.Helper()
	list, err := events(t.Context(), ns)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list {
		raw, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(raw))
	}
	core := &corev1.EventList{}
	if err := cl.List(t.Context(), core, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range core.Items {
		raw, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(raw))
	}
	return out
}

// spanTexts renders every recorded span: name, status, attributes, events with their
// attributes, links with their attributes, resource and instrumentation scope.
func spanTexts(spans tracetest.SpanStubs) []string {
	out := make([]string, 0, len(spans))
	for _, s := range spans {
		var b strings.Builder
		fmt.Fprintf(&b, "span %q status %s %q scope %s", s.Name, s.Status.Code, s.Status.Description, s.InstrumentationScope.Name)
		for _, a := range s.Attributes {
			fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.String())
		}
		for _, e := range s.Events {
			fmt.Fprintf(&b, " event %q", e.Name)
			for _, a := range e.Attributes {
				fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.String())
			}
		}
		for _, l := range s.Links {
			fmt.Fprintf(&b, " link %s", l.SpanContext.SpanID())
			for _, a := range l.Attributes {
				fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.String())
			}
		}
		if s.Resource != nil {
			for _, a := range s.Resource.Attributes() {
				fmt.Fprintf(&b, " resource %s=%s", a.Key, a.Value.String())
			}
		}
		out = append(out, b.String())
	}
	return out
}

// objectTexts returns, as JSON, every object in ns of the kinds the operator creates or
// reconciles, except Secrets: owners, children, workloads, pods, claims, Services, ConfigMaps.
func objectTexts(t *testing.T, ns string) []string {
	t.Helper()
	lists := []client.ObjectList{
		&giteav1alpha1.GiteaList{}, &giteav1alpha1.PostgreSQLList{}, &giteav1alpha1.ValkeyList{}, &giteav1alpha1.GiteaServerList{},
		&appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &appsv1.ReplicaSetList{}, &batchv1.JobList{}, &corev1.PodList{},
		&corev1.ServiceList{}, &corev1.PersistentVolumeClaimList{}, &corev1.ConfigMapList{},
	}
	var out []string
	for _, l := range lists {
		if err := cl.List(t.Context(), l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			raw, err := json.Marshal(item)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(raw))
		}
	}
	return out
}

// planOutputs writes the user's Secrets and the Giteas to a file, as a user would keep them, and
// returns the output of `kdag plan -f FILE -o FORMAT` for every format, from the binary built
// from this repository.
func planOutputs(t *testing.T, ns string, secrets []*corev1.Secret, owners []client.Object) []string {
	t.Helper()
	dir := t.TempDir()
	var in bytes.Buffer
	for _, o := range append(toClientObjects(secrets), owners...) {
		raw, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var withKind map[string]any
		if err := json.Unmarshal(raw, &withKind); err != nil {
			t.Fatal(err)
		}
		if _, ok := o.(*corev1.Secret); ok {
			withKind["apiVersion"], withKind["kind"] = "v1", "Secret"
		}
		doc, err := json.Marshal(withKind)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&in, "---\n%s\n", doc)
	}
	input := filepath.Join(dir, "gitea.yaml")
	if err := os.WriteFile(input, in.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if !strings.Contains(in.String(), s.StringData["password"]) {
			t.Fatalf("the plan input lacks Secret %s's password: the search of the plan output would prove nothing", s.Name)
		}
	}
	bin := filepath.Join(dir, "kdag")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var outputs []string
	for _, format := range []string{"text", "yaml", "mermaid", "dot"} {
		cmd := exec.CommandContext(ctx, bin, "plan", "-f", input, "-o", format, "-n", ns)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kdag plan -o %s: %v\n%s", format, err, stderr.String())
		}
		if !strings.Contains(stdout.String(), "leak-external") {
			t.Fatalf("kdag plan -o %s does not render Gitea leak-external:\n%s", format, stdout.String())
		}
		outputs = append(outputs, stdout.String()+stderr.String())
	}
	return outputs
}

func toClientObjects(secrets []*corev1.Secret) []client.Object {
	out := make([]client.Object, len(secrets))
	for i, s := range secrets {
		out[i] = s
	}
	return out
}
