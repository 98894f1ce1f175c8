package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	crds "github.com/kdag-dev/kdag/config/crd"
	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/controllers/gitea"
	"github.com/kdag-dev/kdag/controllers/giteaserver"
	"github.com/kdag-dev/kdag/controllers/postgresql"
	"github.com/kdag-dev/kdag/controllers/valkey"
	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
)

// The operator's next version, as the fleet plan test simulates it: it renders differently from
// the current one (controllers.Components) in three ways.
//
//   - Valkey gets a new default setting, lazyfree-lazy-eviction yes: every cache's ConfigMap is
//     updated, and its Deployment with it (the ConfigMap's content hash on its pod template).
//   - Valkey gets a new object, the ConfigMap NAME-acl: created, or Refused where an object of
//     that name that is not the operator's exists.
//   - The database's volume gets StorageClass "standard" by default where the Gitea names none:
//     the claim is updated (a claim without a class may get one), the StatefulSet, whose volume
//     claim template is immutable, is a Recreate (by kdag, propagation Orphan).
type nextValkey struct{ valkey.ResourceManager }

func (r nextValkey) AddResources(ctx context.Context, v *giteav1alpha1.Valkey, b *controller.Graph) error {
	v = v.DeepCopy()
	if _, set := v.Spec.Config["lazyfree-lazy-eviction"]; !set {
		if v.Spec.Config == nil {
			v.Spec.Config = map[string]giteav1alpha1.ValkeyConfigValue{}
		}
		v.Spec.Config["lazyfree-lazy-eviction"] = "yes"
	}
	if err := r.ResourceManager.AddResources(ctx, v, b); err != nil {
		return err
	}
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: v.Name + "-acl"}, Data: map[string]string{"users.acl": "user default on nopass ~* +@all"}})
	return nil
}

type nextPostgreSQL struct{ postgresql.ResourceManager }

func (r nextPostgreSQL) AddResources(ctx context.Context, pg *giteav1alpha1.PostgreSQL, b *controller.Graph) error {
	if pg.Spec.Storage.StorageClassName == nil {
		pg = pg.DeepCopy()
		pg.Spec.Storage.StorageClassName = ptr.To("standard")
	}
	return r.ResourceManager.AddResources(ctx, pg, b)
}

func nextComponents() []controller.Component {
	return []controller.Component{
		controller.For("gitea", gitea.ResourceManager{}, gitea.ChildReadiness()),
		controller.For("postgresql", nextPostgreSQL{}),
		controller.For("valkey", nextValkey{}),
		controller.For("giteaserver", giteaserver.ResourceManager{}),
	}
}

// fleetGitea is the i-th Gitea of the fleet: every tenth has no cache, every fifth names its
// database's StorageClass, the odd ones are labelled tier=prod, the even ones tier=dev. (Giteas
// 3, 13 and 23 find a ConfigMap NAME-valkey-acl of someone else's.)
func fleetGitea(ns string, i int) *giteav1alpha1.Gitea {
	g := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("g-%02d", i),
		Labels: map[string]string{"tier": []string{"dev", "prod"}[i%2]}}}
	g.Spec.Cache = giteav1alpha1.CacheSpec{Enabled: ptr.To(i%10 != 0)}
	// (With the version set: a zero CacheSpec is left out of the request, omitzero, and the
	// API server's default, enabled, would apply.)
	if i%5 == 0 {
		g.Spec.Database.Managed = &giteav1alpha1.ManagedDatabaseSpec{Storage: giteav1alpha1.StorageSpec{StorageClassName: ptr.To("fast")}}
	}
	return g
}

// TestRunPlan_LiveFleet is the fleet plan of the next operator version over 50 Giteas that the
// current one applied: the summary counts the owners per action as the changes of fleetGitea
// and next* make them, names every Recreate and Refused object, lists the fields that change
// most, exits 1, and every request it makes is a read or a dry run.
func TestRunPlan_LiveFleet(t *testing.T) {
	env := api.Env(t)
	ctx := t.Context()
	const ns, n = "plan-fleet", 50
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	current := map[schema.GroupKind]controller.Component{}
	for _, c := range controllers.Components(nil) {
		gvk, err := apiutil.GVKForObject(c.NewOwner(), env.Scheme)
		if err != nil {
			t.Fatal(err)
		}
		current[gvk.GroupKind()] = c
	}
	start := time.Now()
	for i := range n {
		g := fleetGitea(ns, i)
		if err := env.Client.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
		if err := deployTree(ctx, env, current, g); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{3, 13, 23} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("g-%02d-valkey-acl", i)}}
		if err := env.Client.Create(ctx, cm, client.FieldOwner("someone")); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d Giteas applied by the current operator in %s", n, time.Since(start).Round(time.Millisecond))
	cfg := rest.CopyConfig(env.Config)
	rec := &requestLog{}
	cfg.Wrap(rec.wrap)
	opts := plan.Options{Scheme: scheme, Components: nextComponents(), CRDs: crds.Bases, RESTConfig: cfg}

	var out bytes.Buffer
	start = time.Now()
	err := plan.Run(ctx, []string{"--live", "--all", "-n", ns}, &out, opts)
	t.Logf("fleet plan of %d Giteas in %s", n, time.Since(start).Round(time.Millisecond))
	if got := plan.ExitCode(err); got != 1 {
		t.Fatalf("plan --live --all = %v (exit %d), want 1 (changes)\n%s", err, got, out.String())
	}
	text := out.String()
	t.Logf("plan --live --all -n %s:\n%s", ns, text)
	// 45 Giteas have a cache: 42 get its new ConfigMap, 3 find someone else's (Refused); each
	// updates its ConfigMap and Deployment. 40 name no StorageClass: each updates its claim and
	// re-creates its StatefulSet. The 5 without cache that name a class do not change.
	for _, want := range []string{
		"50 owners planned: 5 unchanged, 45 changed, 0 failed\n",
		"Create    42      42\n", "Update    45      130\n", "Recreate  40      40\n", "Refused   3       3\n",
		"ConfigMap data[valkey.conf]", "Recreate (40):\n", "Refused (3):\n",
		"  Gitea plan-fleet/g-01: StatefulSet plan-fleet/g-01-postgresql: spec.volumeClaimTemplates is immutable",
		"  Gitea plan-fleet/g-13: ConfigMap plan-fleet/g-13-valkey-acl: ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	for _, unchanged := range []string{"g-00", "g-10", "g-20", "g-30", "g-40"} {
		if strings.Contains(text, "/"+unchanged+":") || strings.Contains(text, "/"+unchanged+"-") {
			t.Errorf("summary names %s, which does not change", unchanged)
		}
	}
	if strings.Contains(text, "Unchanged  ") {
		t.Errorf("summary has per-owner details without --details")
	}
	rec.assertReadsAndDryRuns(t)

	// With details, a label selector: the 25 prod Giteas (odd numbers), each that changes in
	// full, the child owners under their own names.
	out.Reset()
	err = plan.Run(ctx, []string{"--live", "--all", "-n", ns, "-l", "tier=prod", "--details"}, &out, opts)
	if got := plan.ExitCode(err); got != 1 {
		t.Fatalf("plan --live --all -l tier=prod --details = %v (exit %d), want 1\n%s", err, got, out.String())
	}
	text = out.String()
	for _, want := range []string{
		"25 owners planned: 0 unchanged, 25 changed, 0 failed\n",
		"Gitea plan-fleet/g-01\n  Unchanged  PostgreSQL plan-fleet/g-01-postgresql\n",
		"Valkey plan-fleet/g-01-valkey\n  Update     ConfigMap plan-fleet/g-01-valkey-config\n",
		"+    lazyfree-lazy-eviction yes",
		"  Create     ConfigMap plan-fleet/g-01-valkey-acl\n",
		"  Refused    ConfigMap plan-fleet/g-13-valkey-acl\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "plan-fleet/g-02") {
		t.Errorf("-l tier=prod planned g-02, a dev Gitea")
	}
	rec.assertReadsAndDryRuns(t)
}

// requestLog records the requests of a client: method, path and query.
type requestLog struct {
	mu       sync.Mutex
	requests []string
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.requests = append(l.requests, req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery)
		l.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// assertReadsAndDryRuns fails t unless every request so far was a GET (a read or a list) or
// carried dryRun=All, and there were some of each; it then forgets them.
func (l *requestLog) assertReadsAndDryRuns(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	reads, dryRuns := 0, 0
	for _, r := range l.requests {
		method, rest, _ := strings.Cut(r, " ")
		switch {
		case method == http.MethodGet:
			reads++
		case slices.Contains([]string{http.MethodPost, http.MethodPut, http.MethodPatch}, method) && strings.Contains(rest, "dryRun=All"):
			dryRuns++
		default:
			t.Errorf("request neither a read nor a dry run: %s", r)
		}
	}
	if reads == 0 || dryRuns == 0 {
		t.Errorf("%d reads and %d dry runs, want both", reads, dryRuns)
	}
	t.Logf("%d requests: %d reads, %d dry runs", len(l.requests), reads, dryRuns)
	l.requests = nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// deployTree applies owner's graph as a reconcile of components does (plan.Plan.Render,
// the apply engine; readiness is not waited for), then, depth first, the graph of each child
// owner it applied.
func deployTree(ctx context.Context, env *envtest.Environment, components map[schema.GroupKind]controller.Component, owner client.Object) error {
	gvk, err := apiutil.GVKForObject(owner, env.Scheme)
	if err != nil {
		return err
	}
	comp := components[gvk.GroupKind()]
	p, err := comp.Plan(ctx, owner, env.Scheme, env.Client.RESTMapper())
	if err != nil {
		return err
	}
	engine, err := apply.New(env.Client, env.Client, nil, apply.Options{FieldManager: comp.FieldManager()})
	if err != nil {
		return err
	}
	ao := apply.Owner{Object: owner, Kind: gvk.Kind, Controller: comp.Name()}
	read := func(id graph.NodeID, gvk schema.GroupVersionKind) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.Name}, u); err != nil {
			return nil
		}
		return u
	}
	byID := map[graph.NodeID]schema.GroupVersionKind{}
	for _, n := range p.Nodes {
		byID[n.ID] = n.GVK
	}
	nodes, err := p.Render(ao, env.Scheme, func(id graph.NodeID) *unstructured.Unstructured { return read(id, byID[id]) })
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Reference {
			continue
		}
		if _, err := engine.Apply(ctx, ao, n.Desired, nil, apply.Policy{CreateOnly: n.CreateOnly, Adopt: n.Adopt, Keep: n.Keep}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		if _, ok := components[n.GVK.GroupKind()]; !ok {
			continue
		}
		child, err := env.Scheme.New(n.GVK)
		if err != nil {
			return err
		}
		co := child.(client.Object)
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: n.ID.Namespace, Name: n.ID.Name}, co); err != nil {
			return err
		}
		co.GetObjectKind().SetGroupVersionKind(n.GVK)
		if err := deployTree(ctx, env, components, co); err != nil {
			return err
		}
	}
	return nil
}
