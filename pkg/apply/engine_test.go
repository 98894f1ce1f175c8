package apply_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/resources/schemas"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/leak"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// The engine is used here as an author would use it without the Controller: apply.Desired to
// prepare an object, Engine.Apply with the live object read from the API server.

var (
	env    *envtest.Environment
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(testapi.AddToScheme(scheme))
	os.Exit(leak.Check(func() int {
		return envtest.Main(m, &env, envtest.Options{CRDs: testapi.CRDs(), Scheme: scheme})
	}))
}

const fieldManager = "kdag-apply-test"

// engineFixture is an Engine whose writes are counted, and an owner Widget in a fresh namespace.
type engineFixture struct {
	t      *testing.T
	ns     string
	engine *apply.Engine
	owner  apply.Owner
	writes *atomic.Int64
	// schemaReads counts the engine's reads of the API server's OpenAPI documents.
	schemaReads *atomic.Int64
}

type countSchemaReads struct {
	next  http.RoundTripper
	reads *atomic.Int64
}

func (c countSchemaReads) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.Path, "/openapi/") {
		c.reads.Add(1)
	}
	return c.next.RoundTrip(r)
}

type countWrites struct {
	next   http.RoundTripper
	writes *atomic.Int64
}

func (c countWrites) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && !strings.Contains(r.URL.Path, "selfsubject") {
		c.writes.Add(1)
	}
	return c.next.RoundTrip(r)
}

func newEngine(t *testing.T) *engineFixture { return newEngineWith(t, nil) }

// newEngineWith is newEngine with the engine's client passed through wrap first (nil: as it is).
func newEngineWith(t *testing.T, wrap func(client.WithWatch) client.WithWatch) *engineFixture {
	t.Helper()
	f := &engineFixture{t: t, ns: env.Namespace(t), writes: &atomic.Int64{}, schemaReads: &atomic.Int64{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countWrites{next: rt, writes: f.writes} })
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		c = wrap(c)
	}
	schemaCfg := rest.CopyConfig(env.Config)
	schemaCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countSchemaReads{next: rt, reads: f.schemaReads} })
	httpClient, err := rest.HTTPClientFor(schemaCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(httpClient.CloseIdleConnections)
	provider, err := schemas.NewProviderForConfig(schemaCfg, httpClient, schemas.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f.engine, err = apply.New(c, env.Client, provider, apply.Options{FieldManager: fieldManager}); err != nil {
		t.Fatal(err)
	}
	w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "owner"}}
	if err := env.Client.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	f.owner = apply.Owner{Object: w, Kind: "Widget", Controller: "widgets"}
	return f
}

// desired prepares obj for the fixture's owner.
func (f *engineFixture) desired(obj client.Object, o apply.DesiredOptions) *unstructured.Unstructured {
	f.t.Helper()
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		f.t.Fatal(err)
	}
	u, err := apply.Desired(f.owner, obj, gvk, scheme, o)
	if err != nil {
		f.t.Fatal(err)
	}
	return u
}

// live reads obj's current state from the API server, nil when it does not exist.
func (f *engineFixture) live(obj client.Object) client.Object {
	f.t.Helper()
	got := obj.DeepCopyObject().(client.Object)
	err := env.Client.Get(f.t.Context(), client.ObjectKey{Namespace: f.ns, Name: obj.GetName()}, got)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return got
}

// apply runs Engine.Apply of obj with the live object, and returns the change and how many
// writes it made.
func (f *engineFixture) apply(obj client.Object, p apply.Policy) (apply.Change, int64, error) {
	f.t.Helper()
	obj.SetNamespace(f.ns)
	before := f.writes.Load()
	ch, err := f.engine.Apply(f.t.Context(), f.owner, f.desired(obj, apply.DesiredOptions{}), f.live(obj), p)
	return ch, f.writes.Load() - before, err
}

func configMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: data}
}

// TestEngine_CreateSkipRepairUpdate (issue 19 item 2): the engine without a Controller creates,
// skips an unchanged object with no write, repairs another writer's change and says which field,
// and applies a changed desired state.
func TestEngine_CreateSkipRepairUpdate(t *testing.T) {
	f := newEngine(t)
	steps := []struct {
		name        string
		before      func() // another writer's change, before the apply
		data        map[string]string
		want        apply.Action
		wantWrites  int64
		wantDrifted []string
	}{
		{name: "absent: created", data: map[string]string{"k": "v"}, want: apply.Created, wantWrites: 1},
		{name: "unchanged: skipped without a write", data: map[string]string{"k": "v"}, want: apply.Skipped},
		{name: "changed by another writer: repaired", data: map[string]string{"k": "v"}, want: apply.Applied, wantWrites: 1,
			before: func() {
				cm := f.live(configMap(nil)).(*corev1.ConfigMap)
				cm.Data["k"] = "edited"
				if err := env.Client.Update(t.Context(), cm, client.FieldOwner("kubectl-edit")); err != nil {
					t.Fatal(err)
				}
			},
			wantDrifted: []string{".data.k"}},
		{name: "desired state changed: applied", data: map[string]string{"k": "v2"}, want: apply.Applied, wantWrites: 1},
		{name: "unchanged again: skipped", data: map[string]string{"k": "v2"}, want: apply.Skipped},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		ch, writes, err := f.apply(configMap(s.data), apply.Policy{})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if ch.Action != s.want || writes != s.wantWrites || !slices.Equal(ch.Drifted, s.wantDrifted) {
			t.Errorf("%s: %s with %d writes, drifted %v; want %s with %d, drifted %v",
				s.name, ch.Action, writes, ch.Drifted, s.want, s.wantWrites, s.wantDrifted)
		}
		live := f.live(configMap(nil)).(*corev1.ConfigMap)
		if live.Data["k"] != s.data["k"] || !metav1.IsControlledBy(live, f.owner.Object) ||
			live.Labels[kdagv1alpha1.LabelOwnerUID] != string(f.owner.Object.GetUID()) {
			t.Errorf("%s: live %v labels %v owners %v, want data %v, kdag's labels and the owner reference",
				s.name, live.Data, live.Labels, live.OwnerReferences, s.data)
		}
	}
}

// TestEngine_ExistingObjectNotTheOwners (issue 19 item 2, with adopt + create-only in
// combination): an object the owner did not create is refused unless the policy or the object's
// kdag.dev/adopt annotation lets the owner adopt it; adopting a create-only object never changes
// its data.
func TestEngine_ExistingObjectNotTheOwners(t *testing.T) {
	for _, tc := range []struct {
		name      string
		existing  *corev1.Secret
		policy    apply.Policy
		want      apply.Action
		wantData  string // the live object's data after the apply
		wantOwner bool
	}{
		{name: "refused", existing: secret("users", nil), want: apply.Refused, wantData: "users"},
		{name: "adopted by policy", existing: secret("users", nil), policy: apply.Policy{Adopt: true},
			want: apply.Adopted, wantData: "desired", wantOwner: true},
		{name: "adopted by policy, create-only: data kept", existing: secret("users", nil), policy: apply.Policy{Adopt: true, CreateOnly: true},
			want: apply.Adopted, wantData: "users", wantOwner: true},
		{name: "adopted by annotation", existing: secret("users", map[string]string{kdagv1alpha1.AnnotationAdopt: "Widget/owner"}),
			want: apply.Adopted, wantData: "desired", wantOwner: true},
		{name: "annotation naming another owner: refused", existing: secret("users", map[string]string{kdagv1alpha1.AnnotationAdopt: "Widget/other"}),
			want: apply.Refused, wantData: "users"},
		{name: "create-only, not the owner's, no adoption: refused", existing: secret("users", nil), policy: apply.Policy{CreateOnly: true},
			want: apply.Refused, wantData: "users"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEngine(t)
			tc.existing.Namespace = f.ns
			if err := env.Client.Create(t.Context(), tc.existing); err != nil {
				t.Fatal(err)
			}
			ch, _, err := f.apply(secret("desired", nil), tc.policy)
			var refusal *apply.AdoptionError
			switch {
			case tc.want == apply.Refused && !errors.As(err, &refusal):
				t.Fatalf("Apply = %s, %v; want an *AdoptionError", ch.Action, err)
			case tc.want == apply.Refused && (refusal.Annotation != "Widget/owner" || !strings.Contains(err.Error(), "Secret "+f.ns+"/pw")):
				t.Errorf("refusal %q (annotation %q): want it to name the Secret and the annotation Widget/owner", err, refusal.Annotation)
			case tc.want != apply.Refused && err != nil:
				t.Fatal(err)
			}
			if ch.Action != tc.want {
				t.Errorf("action = %s, want %s", ch.Action, tc.want)
			}
			live := f.live(secret("", nil)).(*corev1.Secret)
			if got := string(live.Data["password"]); got != tc.wantData {
				t.Errorf("password = %q, want %q", got, tc.wantData)
			}
			if metav1.IsControlledBy(live, f.owner.Object) != tc.wantOwner {
				t.Errorf("owner references %v, want the owner's: %v", live.OwnerReferences, tc.wantOwner)
			}
		})
	}
}

func secret(password string, annotations map[string]string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "pw", Annotations: annotations},
		Data:       map[string][]byte{"password": []byte(password)},
	}
}

// TestEngine_CreateOnlyIsWrittenOnce: a create-only object is created, then never rewritten
// when its desired content changes (a generated password stays the one in use).
func TestEngine_CreateOnlyIsWrittenOnce(t *testing.T) {
	f := newEngine(t)
	if ch, _, err := f.apply(secret("first", nil), apply.Policy{CreateOnly: true}); err != nil || ch.Action != apply.Created {
		t.Fatalf("first apply = %s, %v; want created", ch.Action, err)
	}
	ch, writes, err := f.apply(secret("second", nil), apply.Policy{CreateOnly: true})
	if err != nil || ch.Action != apply.Skipped || writes != 0 {
		t.Errorf("apply of new content = %s with %d writes, %v; want skipped without a write", ch.Action, writes, err)
	}
	if got := string(f.live(secret("", nil)).(*corev1.Secret).Data["password"]); got != "first" {
		t.Errorf("password = %q, want the first one", got)
	}
}

// TestEngine_OrphanAndDelete: Orphan releases a kept object (no kdag labels, no owner reference,
// the adopt annotation naming the owner, data untouched); Delete removes an object and is quiet
// when it is already gone.
func TestEngine_OrphanAndDelete(t *testing.T) {
	f := newEngine(t)
	cm := configMap(map[string]string{"k": "v"})
	cm.Namespace = f.ns
	if _, err := f.engine.Apply(t.Context(), f.owner, f.desired(cm, apply.DesiredOptions{Keep: true}), nil, apply.Policy{}); err != nil {
		t.Fatal(err)
	}
	live := f.live(cm)
	if len(live.GetOwnerReferences()) != 0 || !apply.Kept(live) {
		t.Fatalf("kept object: owner references %v, annotations %v; want none and the keep policy", live.GetOwnerReferences(), live.GetAnnotations())
	}
	if err := f.engine.Orphan(t.Context(), f.owner, live); err != nil {
		t.Fatal(err)
	}
	orphan := f.live(cm).(*corev1.ConfigMap)
	if _, labelled := orphan.Labels[kdagv1alpha1.LabelOwnerUID]; labelled || orphan.Annotations[kdagv1alpha1.AnnotationAdopt] != "Widget/owner" || orphan.Data["k"] != "v" {
		t.Errorf("orphan labels %v annotations %v data %v: want no owner label, adopt Widget/owner, the data kept", orphan.Labels, orphan.Annotations, orphan.Data)
	}
	if f.engine.Owns(f.owner, orphan) {
		t.Error("the engine still owns the orphan")
	}
	if err := f.engine.Delete(t.Context(), orphan); err != nil {
		t.Fatal(err)
	}
	if f.live(cm) != nil {
		t.Error("deleted object still exists")
	}
	if err := f.engine.Delete(context.Background(), orphan); err != nil {
		t.Errorf("delete of an object already gone = %v, want nil", err)
	}
}

// TestEngine_DriftReport (issue 14): with Policy.Drift DriftReport another writer's change is
// returned as Reported with its fields and never written; the same drift again is a Repeat, a
// new field is not; a change of the desired state is still applied (and repairs the drift).
func TestEngine_DriftReport(t *testing.T) {
	f := newEngine(t)
	edit := func(key, value string) func() {
		return func() {
			cm := f.live(configMap(nil)).(*corev1.ConfigMap)
			cm.Data[key] = value
			if err := env.Client.Update(t.Context(), cm, client.FieldOwner("kubectl-edit")); err != nil {
				t.Fatal(err)
			}
		}
	}
	report := apply.Policy{Drift: apply.DriftReport}
	for _, s := range []struct {
		name        string
		before      func()
		data        map[string]string
		want        apply.Action
		wantWrites  int64
		wantDrifted []string
		wantRepeat  bool
		wantLive    string // live data["k"] afterwards
	}{
		{name: "absent: created", data: map[string]string{"k": "v", "j": "v"}, want: apply.Created, wantWrites: 1, wantLive: "v"},
		{name: "changed by another writer: reported", before: edit("k", "edited"), data: map[string]string{"k": "v", "j": "v"},
			want: apply.Reported, wantDrifted: []string{".data.k"}, wantLive: "edited"},
		{name: "same drift again: a repeat", data: map[string]string{"k": "v", "j": "v"},
			want: apply.Reported, wantDrifted: []string{".data.k"}, wantRepeat: true, wantLive: "edited"},
		{name: "another field drifts: not a repeat", before: edit("j", "edited"), data: map[string]string{"k": "v", "j": "v"},
			want: apply.Reported, wantDrifted: []string{".data.j", ".data.k"}, wantLive: "edited"},
		{name: "desired state changed: applied", data: map[string]string{"k": "v2", "j": "v"}, want: apply.Applied, wantWrites: 1,
			wantDrifted: []string{".data.j", ".data.k"}, wantLive: "v2"},
		{name: "unchanged: skipped", data: map[string]string{"k": "v2", "j": "v"}, want: apply.Skipped, wantLive: "v2"},
	} {
		if s.before != nil {
			s.before()
		}
		ch, writes, err := f.apply(configMap(s.data), report)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if ch.Action != s.want || writes != s.wantWrites || !slices.Equal(ch.Drifted, s.wantDrifted) || ch.Repeat != s.wantRepeat {
			t.Errorf("%s: %s with %d writes, drifted %v, repeat %v; want %s with %d, drifted %v, repeat %v",
				s.name, ch.Action, writes, ch.Drifted, ch.Repeat, s.want, s.wantWrites, s.wantDrifted, s.wantRepeat)
		}
		if got := f.live(configMap(nil)).(*corev1.ConfigMap).Data["k"]; got != s.wantLive {
			t.Errorf("%s: live k = %q, want %q", s.name, got, s.wantLive)
		}
	}
}

// TestEngine_CreateReturnsTheStoredObject: a create returns the API server's response, typed for
// the kinds whose readiness needs no conversion (a ConfigMap, a Secret) and unstructured for the
// others (a Service), with the stored object's UID, resourceVersion and content; and the engine
// remembers the object as verified at that resourceVersion, so the next apply of the same desired
// state skips it without a write.
func TestEngine_CreateReturnsTheStoredObject(t *testing.T) {
	tests := []struct {
		name  string
		obj   func() client.Object
		typed bool
	}{
		{name: "ConfigMap: typed", typed: true, obj: func() client.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "created-cm"}, Data: map[string]string{"k": "v"}}
		}},
		{name: "Secret: typed", typed: true, obj: func() client.Object {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "created-secret"}, Data: map[string][]byte{"k": []byte("v")}}
		}},
		{name: "Service: unstructured", obj: func() client.Object {
			return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "created-svc"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		}},
	}
	f := newEngine(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, writes, err := f.apply(tt.obj(), apply.Policy{})
			if err != nil || ch.Action != apply.Created || writes != 1 {
				t.Fatalf("create: %s with %d writes, error %v; want created with 1 write", ch.Action, writes, err)
			}
			if _, isU := ch.Object.(*unstructured.Unstructured); isU == tt.typed {
				t.Errorf("create returned a %T, want typed %v", ch.Object, tt.typed)
			}
			live := f.live(tt.obj())
			if ch.Object.GetUID() != live.GetUID() || ch.Object.GetResourceVersion() != live.GetResourceVersion() ||
				ch.Object.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash] == "" ||
				!metav1.IsControlledBy(ch.Object, f.owner.Object) {
				t.Errorf("create returned uid %s, resourceVersion %s, annotations %v, owners %v; the API server holds %s, %s",
					ch.Object.GetUID(), ch.Object.GetResourceVersion(), ch.Object.GetAnnotations(), ch.Object.GetOwnerReferences(),
					live.GetUID(), live.GetResourceVersion())
			}
			again, writes, err := f.apply(tt.obj(), apply.Policy{})
			if err != nil || again.Action != apply.Skipped || writes != 0 {
				t.Errorf("the same desired state again: %s with %d writes, error %v; want skipped without a write", again.Action, writes, err)
			}
		})
	}
}

// TestEngine_OthersChangesNeedNoSchema: an object kdag applied that others changed since, only in
// fields that are not kdag's (another writer's label, as a controller's status would), is
// skipped without a write and without reading the API server's OpenAPI schema, since kdag's
// Apply entry is the one verified. A field kdag applied that another writer then removed (no
// foreign entry shows it) changes that entry: the check reads the schema, finds the field and
// repairs it. Both for a kind whose create response is decoded typed and for one kept
// unstructured.
func TestEngine_OthersChangesNeedNoSchema(t *testing.T) {
	tests := []struct {
		name string
		obj  func() client.Object
	}{
		{name: "ConfigMap: typed", obj: func() client.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "others-cm", Labels: map[string]string{"app": "web"}},
				Data: map[string]string{"k": "v"}}
		}},
		{name: "Service: unstructured", obj: func() client.Object {
			return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "others-svc", Labels: map[string]string{"app": "web"}},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newEngine(t) // its own schema provider: nothing fetched before
			if ch, _, err := f.apply(tt.obj(), apply.Policy{}); err != nil || ch.Action != apply.Created {
				t.Fatalf("create: %s, error %v", ch.Action, err)
			}
			// Another writer adds a label of its own: a new resourceVersion, kdag's fields untouched.
			live := f.live(tt.obj())
			patch := client.MergeFrom(live.DeepCopyObject().(client.Object))
			labels := live.GetLabels()
			labels["team"] = "payments"
			live.SetLabels(labels)
			if err := env.Client.Patch(t.Context(), live, patch, client.FieldOwner("kubectl-label")); err != nil {
				t.Fatal(err)
			}
			reads := f.schemaReads.Load()
			ch, writes, err := f.apply(tt.obj(), apply.Policy{})
			if err != nil || ch.Action != apply.Skipped || writes != 0 {
				t.Errorf("after another writer's label: %s with %d writes, error %v; want skipped without a write", ch.Action, writes, err)
			}
			if n := f.schemaReads.Load() - reads; n != 0 {
				t.Errorf("after another writer's label: %d reads of the OpenAPI schema, want 0 (kdag's Apply entry is the one verified)", n)
			}
			// Another writer removes the label kdag applied, with an update: no foreign entry says so.
			live = f.live(tt.obj())
			labels = live.GetLabels()
			delete(labels, "app")
			live.SetLabels(labels)
			if err := env.Client.Update(t.Context(), live, client.FieldOwner("kubectl-edit")); err != nil {
				t.Fatal(err)
			}
			ch, writes, err = f.apply(tt.obj(), apply.Policy{})
			if err != nil || ch.Action != apply.Applied || writes != 1 || !slices.Equal(ch.Drifted, []string{".metadata.labels.app"}) {
				t.Errorf("after another writer removed kdag's label: %s with %d writes, drifted %v, error %v; want applied with 1 write, drifted [.metadata.labels.app]",
					ch.Action, writes, ch.Drifted, err)
			}
			if got := f.live(tt.obj()).GetLabels()["app"]; got != "web" {
				t.Errorf("label app is %q after the repair, want web", got)
			}
		})
	}
}
