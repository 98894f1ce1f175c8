package input

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/postgresql"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

// readyTimeout bounds the waits for owners to become Ready or to show their message.
const readyTimeout = 3 * time.Minute

// admissionCase is an owner the API server must refuse with want in its error.
type admissionCase struct {
	name  string
	setup []*unstructured.Unstructured // created (or updated) first; must be accepted
	obj   *unstructured.Unstructured   // created, or updated when setup created it
	opts  []client.CreateOption
	want  string
}

// reconcileCase is an owner the API server accepts and the operator refuses: the owner of kind
// named owner gets condition (Stalled or Reconciling) True with reason and every want in its
// message, and is not Ready.
type reconcileCase struct {
	name      string
	kind      string
	owner     string
	condition string
	reason    string
	want      []string
}

func owner(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(giteav1alpha1.GroupVersion.String())
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// manyKeys returns a map of n keys with value v.
func manyKeys(n int, v string) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[fmt.Sprintf("example.com/key-%03d", i)] = v
	}
	return m
}

// externalDB is the spec.database of a Gitea whose database is given by the Secret named name.
func externalDB(name string) map[string]any {
	return map[string]any{"type": "external", "external": map[string]any{"secretRef": map[string]any{"name": name}}}
}

// TestBadInput_CorpusRefusedWhileValidOwnerBecomesReady creates, in one namespace the operator
// watches, the sample Gitea and a corpus of invalid and hostile owners: every file of
// config/samples/invalid, and the cases below (huge values, names at and over the length limits,
// references to missing Secrets, owners whose derived objects collide, an owner in a namespace
// being deleted). Each bad owner gets its clear message (refused at admission, or Stalled or
// Reconciling with the reason), no reconcile panics, and the sample becomes Ready meanwhile.
// Creating the missing Secrets afterwards lets the owners that waited for them become Ready.
func TestBadInput_CorpusRefusedWhileValidOwnerBecomesReady(t *testing.T) {
	ns := local.Namespace(t)
	terminating := terminatingNamespace(t)
	startOperator(t, []string{ns, terminating}, controller.Options{ReferenceNamespaces: []string{ns, terminating}})
	ctx := t.Context()

	// The valid owners, reconciled at the same time as the bad ones.
	valid := []*unstructured.Unstructured{
		sampleGitea(t, ns, "gitea.yaml"),
		owner("PostgreSQL", ns, "p"+strings.Repeat("x", postgresql.MaxNameLength-1), map[string]any{}), // the longest valid name
	}
	// The Secrets and the first owner of a name collision that the bad owners need.
	prereqs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "external-db"}, StringData: map[string]string{
			"host": "db.example.com", "port": "5432", "user": "gitea", "password": "not-a-secret", "database": "gitea"}},
		owner("Valkey", ns, "clash", map[string]any{}),
	}
	created := time.Now()
	for _, o := range append(prereqs, toObjects(valid)...) {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}

	deleteWhenPopulated(t, terminating)
	admission := append(invalidSamples(t, ns), admissionCases(ns, terminating)...)
	reconciled, bad := reconcileCases(ns)
	for _, o := range bad {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatalf("the API server refused %s %s, which only the operator can judge: %v", o.GetKind(), o.GetName(), err)
		}
	}
	// Admission cases run while the operator works on the others.
	for _, c := range admission {
		err := createCase(ctx, c)
		switch {
		case err == nil:
			t.Errorf("admission %s: accepted; want refused with %q", c.name, c.want)
		case !strings.Contains(err.Error(), c.want):
			t.Errorf("admission %s: error does not contain %q:\n%v", c.name, c.want, err)
		default:
			t.Logf("admission %s: %s", c.name, oneLine(err.Error()))
		}
	}

	// The name collision: Gitea "clash" comes once Valkey "clash" has its ConfigMap, so that the
	// Gitea's server is the one that finds "clash-config" taken.
	poll.Until(t, "Valkey clash has its ConfigMap", readyTimeout, func(ctx context.Context) string {
		return presentWithLabel(ctx, &corev1.ConfigMap{}, ns, "clash-config", kdagv1alpha1.LabelController, "valkey")
	})
	clashConfig := &corev1.ConfigMap{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "clash-config"}, clashConfig); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, owner("Gitea", ns, "clash", map[string]any{"database": externalDB("external-db"), "cache": map[string]any{"enabled": false}})); err != nil {
		t.Fatal(err)
	}
	reconciled = append(reconciled, reconcileCase{
		name: "derived names collide with another owner's objects", kind: "Gitea", owner: "clash",
		condition: kdagv1alpha1.ConditionReconciling, reason: kdagv1alpha1.ReasonWaiting,
		want: []string{"waiting for GiteaServer " + ns + "/clash (ConfigMap " + ns + "/clash-config exists and belongs to another owner", "rename one of them"},
	})

	for _, v := range valid {
		waitReady(t, v.GetKind(), ns, v.GetName())
	}
	t.Logf("valid owners Ready %s after their creation, with the corpus around them", time.Since(created).Round(100*time.Millisecond))
	for _, c := range reconciled {
		poll.Until(t, c.name, readyTimeout, func(ctx context.Context) string { return c.check(ctx, ns) })
		if cond, err := conditionOf(ctx, c.kind, ns, c.owner, c.condition); err == nil {
			t.Logf("%s: %s %s %s=True %s: %s", c.name, c.kind, shorten(c.owner), c.condition, cond.Reason, cond.Message)
		}
	}

	// The owner that collided changed nothing of the first owner's: same ConfigMap, still Ready.
	after := &corev1.ConfigMap{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "clash-config"}, after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != clashConfig.ResourceVersion {
		t.Errorf("ConfigMap clash-config of Valkey clash was written by the colliding owner (resourceVersion %s, then %s)",
			clashConfig.ResourceVersion, after.ResourceVersion)
	}
	waitReady(t, "Valkey", ns, "clash")

	checkTerminatingNamespace(t, terminating)

	// A missing Secret is waited for, not terminal: once created, the owners become Ready.
	for _, name := range []string{"absent-db", "absent-admin"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{
			"host": "db.example.com", "port": "5432", "user": "gitea", "password": "not-a-secret", "database": "gitea",
			"username": "root", "email": "root@example.com"}}
		if err := cl.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, "Gitea", ns, "missing-db-secret")
	waitReady(t, "Gitea", ns, "missing-admin-secret")

	if strings.Contains(logs.String(), "Observed a panic") {
		t.Error("a reconcile panicked: see the log for \"Observed a panic\"")
	}
	t.Logf("corpus: %d refused at admission, %d refused by the operator, %d valid owners Ready",
		len(admission), len(reconciled), len(valid))
	if n := len(admission) + len(reconciled); n < 20 {
		t.Errorf("corpus of %d bad owners, want at least 20", n)
	}
}

// admissionCases are the owners the API server refuses that config/samples/invalid does not
// hold: huge values, giant maps, names over the limit, malformed types and fields, and an owner in
// a namespace being deleted.
func admissionCases(ns, terminating string) []admissionCase {
	gitea := func(name string, spec map[string]any) *unstructured.Unstructured {
		return owner("Gitea", ns, name, spec)
	}
	env := func(value string) map[string]any {
		return map[string]any{"extraEnv": []any{map[string]any{"name": "BLOB", "value": value}}}
	}
	hugeAnnotation := gitea("huge-metadata-annotation", map[string]any{})
	hugeAnnotation.SetAnnotations(map[string]string{"example.com/blob": strings.Repeat("a", 300<<10)})
	manyEnv := make([]any, 101)
	for i := range manyEnv {
		manyEnv[i] = map[string]any{"name": fmt.Sprintf("VAR_%03d", i), "value": "x"}
	}
	return []admissionCase{
		{name: "name over 253 characters", obj: gitea("g"+strings.Repeat("x", 253), map[string]any{}),
			want: "must be no more than 253 characters"},
		{name: "name with capitals", obj: gitea("Demo", map[string]any{}), want: "a lowercase RFC 1123 subdomain"},
		{name: "1 MiB extraEnv value", obj: gitea("huge-env", env(strings.Repeat("v", 1<<20))),
			want: "extraEnv values must be at most 4096 characters"},
		{name: "2 MiB podAnnotations value", obj: gitea("huge-pod-annotation", map[string]any{
			"podAnnotations": map[string]any{"example.com/blob": strings.Repeat("a", 2<<20)}}),
			want: "podAnnotations values must be at most 4096 characters"},
		{name: "1 MiB Valkey config value (a ConfigMap holds 1 MiB)", obj: owner("Valkey", ns, "huge-config", map[string]any{
			"config": map[string]any{"maxmemory": strings.Repeat("9", 1<<20)}}),
			want: "spec.config.maxmemory: Too long: may not be more than 1024 bytes"},
		{name: "pod annotations over 256 KiB in total", obj: gitea("heavy-annotations", map[string]any{
			"podAnnotations": map[string]any{"example.com/a": strings.Repeat("a", 200<<10), "example.com/b": strings.Repeat("b", 100<<10)}}),
			want: "podAnnotations values must be at most 4096 characters"},
		{name: "Valkey config value with a newline (injects a directive)", obj: owner("Valkey", ns, "config-newline", map[string]any{
			"config": map[string]any{"maxmemory": "64mb\nrequirepass x"}}),
			want: "spec.config.maxmemory in body should match"},
		{name: "Valkey config sets a key the operator owns in upper case", obj: owner("Valkey", ns, "config-bind", map[string]any{
			"config": map[string]any{"BIND": "0.0.0.0"}}),
			want: "config must not set port, bind, dir, daemonize, save or appendonly (in any case)"},
		{name: "external database Secret named like the generated one", obj: gitea("named-like-generated", map[string]any{
			"database": externalDB("named-like-generated-secrets")}),
			want: "must not name <name>-secrets"},
		{name: "limits below requests", obj: gitea("limits-below", map[string]any{"resources": map[string]any{
			"requests": map[string]any{"memory": "512Mi"}, "limits": map[string]any{"memory": "256Mi"}}}),
			want: "limits must not be below resources.requests"},
		{name: "4 MiB request", obj: gitea("huge-request", env(strings.Repeat("v", 4<<20))),
			want: "Request entity too large: limit is 3145728"},
		{name: "300 KiB metadata annotation", obj: hugeAnnotation, want: "metadata.annotations: Too long: may not be more than 262144 bytes"},
		{name: "giant nodeSelector map", obj: gitea("giant-node-selector", map[string]any{"nodeSelector": manyKeys(5000, "x")}),
			want: "spec.nodeSelector: Too many: 5000: must have at most 64 items"},
		{name: "giant podAnnotations map", obj: gitea("giant-pod-annotations", map[string]any{"podAnnotations": manyKeys(65, "x")}),
			want: "spec.podAnnotations: Too many: 65: must have at most 64 items"},
		{name: "nodeSelector value longer than a label value", obj: gitea("long-node-selector", map[string]any{
			"nodeSelector": map[string]any{"example.com/zone": strings.Repeat("z", 64)}}),
			want: "nodeSelector values are node label values: at most 63 characters"},
		{name: "101 extraEnv entries", obj: gitea("many-env", map[string]any{"extraEnv": manyEnv}),
			want: "spec.extraEnv: Too many: 101: must have at most 100 items"},
		{name: "giant Valkey config map", obj: owner("Valkey", ns, "giant-config", map[string]any{"config": manyKeys(65, "1")}),
			want: "spec.config: Too many: 65: must have at most 64 items"},
		{name: "Valkey config sets a key the operator owns", obj: owner("Valkey", ns, "config-port", map[string]any{"config": map[string]any{"port": "6380"}}),
			want: "config must not set port, bind, dir, daemonize, save or appendonly (in any case): the operator owns them"},
		{name: "PostgreSQL database name not an identifier", obj: owner("PostgreSQL", ns, "bad-database", map[string]any{"database": "Gitea-DB; DROP"}),
			want: `spec.database in body should match '^[a-z_][a-z0-9_]*$'`},
		{name: "GiteaServer migration timeout under a minute", obj: owner("GiteaServer", ns, "short-timeout", map[string]any{
			"version": "1.27.3", "database": map[string]any{"secretRef": map[string]any{"name": "external-db"}}, "migrationTimeout": "30s"}),
			want: "migrationTimeout must be at least 1m"},
		{name: "replicas of the wrong type", obj: gitea("replicas-string", map[string]any{"replicas": "three"}),
			want: "spec.replicas in body must be of type integer"},
		{name: "unknown field (strict field validation, as kubectl sends)", obj: gitea("unknown-field", map[string]any{"replica": int64(2)}),
			opts: []client.CreateOption{client.FieldValidation("Strict")}, want: `unknown field "spec.replica"`},
		{name: "owner in a namespace being deleted", obj: owner("Gitea", terminating, "late", map[string]any{}),
			want: "unable to create new content in namespace " + terminating + " because it is being terminated"},
	}
}

// reconcileCases are the owners the API server accepts and the operator refuses, and the
// objects to create for them.
func reconcileCases(ns string) ([]reconcileCase, []*unstructured.Unstructured) {
	longPG := "p" + strings.Repeat("x", postgresql.MaxNameLength)
	longGitea := "g" + strings.Repeat("x", 41) // managed database: 41 is the longest (see test/e2e/gitea)
	longestName := "g" + strings.Repeat("x", 252)
	noCache := map[string]any{"enabled": false}
	cases := []reconcileCase{
		{name: "PostgreSQL name one over the limit", kind: "PostgreSQL", owner: longPG, condition: kdagv1alpha1.ConditionStalled, reason: kdagv1alpha1.ReasonInvalid,
			want: []string{fmt.Sprintf("StatefulSet %q: must be no more than %d characters", longPG, postgresql.MaxNameLength), "use a shorter name"}},
		{name: "Gitea name one over the limit", kind: "Gitea", owner: longGitea, condition: kdagv1alpha1.ConditionStalled, reason: kdagv1alpha1.ReasonInvalid,
			want: []string{fmt.Sprintf("StatefulSet %q: must be no more than 52 characters", longGitea+"-postgresql"), "use a shorter name"}},
		{name: "Gitea name of 253 characters (the API server's limit)", kind: "Gitea", owner: longestName, condition: kdagv1alpha1.ConditionStalled, reason: kdagv1alpha1.ReasonInvalid,
			want: []string{`-http" (258 characters): must be no more than 63 characters`, "use a shorter name"}},
		{name: "Gitea name with a dot", kind: "Gitea", owner: "dotted.name", condition: kdagv1alpha1.ConditionStalled, reason: kdagv1alpha1.ReasonInvalid,
			want: []string{`"dotted.name-http": a DNS-1035 label`, "use a shorter name of lowercase letters, digits and '-'"}},
		{name: "external database Secret missing", kind: "Gitea", owner: "missing-db-secret", condition: kdagv1alpha1.ConditionReconciling, reason: kdagv1alpha1.ReasonWaiting,
			want: []string{"waiting for GiteaServer " + ns + "/missing-db-secret (waiting for Secret " + ns + "/absent-db (it does not exist yet: create it))"}},
		{name: "administrator Secret missing", kind: "Gitea", owner: "missing-admin-secret", condition: kdagv1alpha1.ConditionReconciling, reason: kdagv1alpha1.ReasonWaiting,
			want: []string{"waiting for Secret " + ns + "/absent-admin (it does not exist yet: create it)"}},
	}
	objs := []*unstructured.Unstructured{
		owner("PostgreSQL", ns, longPG, map[string]any{}),
		owner("Gitea", ns, longGitea, map[string]any{}),
		owner("Gitea", ns, longestName, map[string]any{}),
		owner("Gitea", ns, "dotted.name", map[string]any{"database": externalDB("external-db"), "cache": noCache}),
		owner("Gitea", ns, "missing-db-secret", map[string]any{"database": externalDB("absent-db"), "cache": noCache}),
		owner("Gitea", ns, "missing-admin-secret", map[string]any{"database": externalDB("external-db"), "cache": noCache,
			"admin": map[string]any{"secretRef": map[string]any{"name": "absent-admin"}}}),
	}
	return cases, objs
}

// check returns "" when the case's owner shows its message, or what it shows instead.
func (c reconcileCase) check(ctx context.Context, ns string) string {
	cond, err := conditionOf(ctx, c.kind, ns, c.owner, c.condition)
	if err != nil {
		return err.Error()
	}
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != c.reason {
		return fmt.Sprintf("%s condition %+v, want True with reason %s", c.condition, cond, c.reason)
	}
	for _, w := range c.want {
		if !strings.Contains(cond.Message, w) {
			return fmt.Sprintf("%s message %q lacks %q", c.condition, cond.Message, w)
		}
	}
	if ready, err := conditionOf(ctx, c.kind, ns, c.owner, kdagv1alpha1.ConditionReady); err != nil || ready == nil || ready.Status != metav1.ConditionFalse {
		return fmt.Sprintf("Ready condition %+v (%v), want False", ready, err)
	}
	return ""
}

// conditionOf returns the condition typ of the owner of kind named name in ns, nil when it has
// none, for its current generation only.
func conditionOf(ctx context.Context, kind, ns, name, typ string) (*metav1.Condition, error) {
	st, generation, err := readStatus(ctx, kind, ns, name)
	if err != nil || st.ObservedGeneration != generation {
		return nil, err
	}
	return meta.FindStatusCondition(st.Conditions, typ), nil
}

// readStatus returns kdag's status block of the owner of kind named name in ns, and the owner's
// generation.
func readStatus(ctx context.Context, kind, ns, name string) (*kdagv1alpha1.Status, int64, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(giteav1alpha1.GroupVersion.WithKind(kind))
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return nil, 0, err
	}
	st := &kdagv1alpha1.Status{}
	raw, _, _ := unstructured.NestedMap(u.Object, "status")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, st); err != nil {
		return nil, 0, err
	}
	return st, u.GetGeneration(), nil
}

// statusOf is readStatus that fails the test on an error.
func statusOf(t *testing.T, kind, ns, name string) *kdagv1alpha1.Status {
	t.Helper()
	st, _, err := readStatus(t.Context(), kind, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitReady waits until the owner of kind named name in ns is Ready for its generation.
func waitReady(t *testing.T, kind, ns, name string) {
	t.Helper()
	poll.Until(t, kind+" "+shorten(name)+" Ready", readyTimeout, func(ctx context.Context) string {
		c, err := conditionOf(ctx, kind, ns, name, kdagv1alpha1.ConditionReady)
		switch {
		case err != nil:
			return err.Error()
		case c == nil || c.Status != metav1.ConditionTrue:
			return fmt.Sprintf("Ready condition %+v", c)
		}
		return ""
	})
}

// createCase creates the case's set-up documents (created, or updated when they exist) and then
// its object, created or, when a set-up document made it, updated; it returns the last error.
func createCase(ctx context.Context, c admissionCase) error {
	for i, s := range c.setup {
		if err := createOrUpdate(ctx, s.DeepCopy()); err != nil {
			return fmt.Errorf("set-up document %d must be accepted: %w", i+1, err)
		}
	}
	obj := c.obj.DeepCopy()
	if len(c.setup) > 0 {
		return createOrUpdate(ctx, obj)
	}
	return cl.Create(ctx, obj, c.opts...)
}

func createOrUpdate(ctx context.Context, obj *unstructured.Unstructured) error {
	err := cl.Create(ctx, obj.DeepCopy())
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The operator writes the object's status meanwhile, which changes its resourceVersion: retry
	// a conflict, so that the answer is the admission's.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(obj.GroupVersionKind())
		if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
			return err
		}
		update := obj.DeepCopy()
		update.SetResourceVersion(live.GetResourceVersion())
		return cl.Update(ctx, update)
	})
}

// invalidSamples turns every file of config/samples/invalid into an admission case (see the
// README there: all documents but the last are set-up steps, the first line is the expectation).
func invalidSamples(t *testing.T, ns string) []admissionCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "config", "samples", "invalid", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("%d invalid samples, want at least 8", len(files))
	}
	var cases []admissionCase
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(raw), "\n")
		want, ok := strings.CutPrefix(first, "# expect: ")
		if !ok {
			t.Fatalf("%s: first line %q is not \"# expect: <text>\"", f, first)
		}
		docs, err := yamlObjects(raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, d := range docs {
			d.SetNamespace(ns)
		}
		cases = append(cases, admissionCase{
			name: "sample " + filepath.Base(f), setup: docs[:len(docs)-1], obj: docs[len(docs)-1], want: strings.TrimSpace(want),
		})
	}
	return cases
}

// sampleGitea reads the Gitea of config/samples/<file> into ns.
func sampleGitea(t *testing.T, ns, file string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "samples", file))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := yamlObjects(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d.GetKind() == giteav1alpha1.GiteaKind {
			d.SetNamespace(ns)
			return d
		}
	}
	t.Fatalf("%s has no Gitea", file)
	return nil
}

// yamlObjects decodes the non-empty documents of a YAML stream.
func yamlObjects(raw []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func toObjects(us []*unstructured.Unstructured) []client.Object {
	out := make([]client.Object, len(us))
	for i, u := range us {
		out[i] = u
	}
	return out
}

// presentWithLabel returns "" when obj named name exists in ns with label key=value.
func presentWithLabel(ctx context.Context, obj client.Object, ns, name, key, value string) string {
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		return err.Error()
	}
	if got := obj.GetLabels()[key]; got != value {
		return fmt.Sprintf("label %s=%q, want %q", key, got, value)
	}
	return ""
}

// terminatingNamespace creates a namespace holding a Valkey that the operator (started later)
// reconciles, then deletes the namespace while a finalizer of the test's holds it in
// Terminating; the test's cleanup releases it.
func terminatingNamespace(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	const hold = "kdag.dev/reliability-hold"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "terminating-", Finalizers: []string{hold}}}
	if err := cl.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		live := &corev1.Namespace{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(ns), live); err != nil {
			return
		}
		live.Finalizers = nil
		if err := cl.Update(ctx, live); err != nil {
			t.Errorf("release namespace %s: %v", ns.Name, err)
		}
	})
	if err := cl.Create(ctx, owner("Valkey", ns.Name, "doomed", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// deleteWhenPopulated deletes the namespace once the operator has created the Valkey's objects.
func deleteWhenPopulated(t *testing.T, ns string) {
	t.Helper()
	poll.Until(t, "Valkey doomed has its ConfigMap", readyTimeout, func(ctx context.Context) string {
		return presentWithLabel(ctx, &corev1.ConfigMap{}, ns, "doomed-config", kdagv1alpha1.LabelController, "valkey")
	})
	if err := cl.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
}

// checkTerminatingNamespace checks that the Valkey of the deleted namespace and everything kdag
// created for it go away with the namespace: the operator does not fight the deletion.
func checkTerminatingNamespace(t *testing.T, ns string) {
	t.Helper()
	poll.Until(t, "the namespace's content deleted", readyTimeout, func(ctx context.Context) string {
		var left []string
		for _, o := range []client.Object{
			owner("Valkey", ns, "doomed", nil), &corev1.ConfigMap{}, &corev1.Service{},
		} {
			name := "doomed"
			if _, ok := o.(*corev1.ConfigMap); ok {
				name = "doomed-config"
			}
			err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)
			if !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%T %s (%v)", o, name, err))
			}
		}
		sort.Strings(left)
		return strings.Join(left, ", ")
	})
	live := &corev1.Namespace{}
	if err := cl.Get(t.Context(), client.ObjectKey{Name: ns}, live); err != nil || live.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("namespace %s: phase %q (%v), want Terminating (held by the test's finalizer)", ns, live.Status.Phase, err)
	}
}

// shorten keeps long generated names readable in messages.
func shorten(name string) string {
	if len(name) > 24 {
		return fmt.Sprintf("%s...(%d characters)", name[:12], len(name))
	}
	return name
}
