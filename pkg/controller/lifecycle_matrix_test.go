package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// The node-lifecycle combination test: every node option, and every pair of them that can
// co-occur (28 policies), against the live states an object can be in and the events that happen to it, with
// the invariants of docs/design.md ("Node lifecycle") checked after each event. One owner per
// case, one ConfigMap node "<owner>-obj" whose options are the owner's spec.components.

// matrixOptions are the node options of the matrix. ProtectsData is CreateOnly's (the data-safety
// tests cover it); a user's keep is a live state below.
var matrixOptions = []string{"create-only", "keep", "adopt", "recreate", "report", "ignore", "finished"}

// matrixPolicies returns the node policies: none, each option, and every pair of options that can
// co-occur (CreateOnly + Recreate is refused by the Graph).
func matrixPolicies() [][]string {
	out := [][]string{{}}
	for i, a := range matrixOptions {
		out = append(out, []string{a})
		for _, b := range matrixOptions[i+1:] {
			if a == "create-only" && b == "recreate" {
				continue
			}
			out = append(out, []string{a, b})
		}
	}
	return out
}

// matrixStates are the live states the object is brought into before the event.
var matrixStates = []string{"absent", "ours", "user-kept", "foreign-controller", "unowned-labelled", "terminating", "immutable-pending", "switched"}

// matrixEvents are what happens then.
var matrixEvents = []string{"spec-change", "pruned", "keep-switched", "owner-deleted"}

// matrixRM renders the node "<owner>-obj" from the owner: data from spec.data, options from
// spec.components ("gone": the node left the graph). An immutable ConfigMap (the API server
// refuses any data change) with "recreate", so that a data change needs a re-creation.
type matrixRM struct{}

func (matrixRM) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}}
}

func (matrixRM) AddResources(_ context.Context, w *testapi.Widget, b *controller.Graph) error {
	has := func(o string) bool { return slices.Contains(w.Spec.Components, o) }
	if has("gone") {
		return nil
	}
	var opts []controller.NodeOption
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-obj"}, Data: w.Spec.Data}
	for _, o := range w.Spec.Components {
		switch o {
		case "create-only":
			opts = append(opts, controller.CreateOnly())
		case "keep":
			opts = append(opts, controller.Keep())
		case "adopt":
			opts = append(opts, controller.Adopt())
		case "recreate":
			opts = append(opts, controller.Recreate(metav1.DeletePropagationBackground))
			cm.Immutable = ptr.To(true)
		case "report":
			opts = append(opts, controller.OnDrift(controller.DriftReport))
		case "ignore":
			opts = append(opts, controller.IgnoreFields("data.ignored"))
		case "finished":
			opts = append(opts, controller.Finished())
		case "immutable":
			cm.Immutable = ptr.To(true)
		}
	}
	b.Add(cm, opts...)
	return nil
}

// matrixCase is one policy × state × event.
type matrixCase struct {
	policy      []string
	state       string
	event       string
	propagation metav1.DeletionPropagation // of owner-deleted
}

func (c matrixCase) name() string {
	p := strings.Join(c.policy, "+")
	if p == "" {
		p = "default"
	}
	return p + "/" + c.state + "/" + c.event
}

func (c matrixCase) has(o string) bool { return slices.Contains(c.policy, o) }

// TestLifecycle_Combinations runs every case of the matrix on envtest, several owners at once in
// one manager, and checks the invariants after the event:
//   - a kept object (Keep, a user's keep) exists and carries no controller owner reference to
//     the owner, after any event, owner deletion and prune included;
//   - an object of the owner's in the graph has kdag's labels, the owner's controller owner
//     reference exactly when it is not kept, kdag's keep annotation exactly when the node keeps it;
//   - a create-only object's data is never rewritten;
//   - an object that is not the owner's (another controller's, or unowned with kdag's labels)
//     is never written unless the node may adopt it;
//   - Ready=True only when the node's object is as wanted and nothing that left the graph exists.
func TestLifecycle_Combinations(t *testing.T) {
	if testing.Short() {
		t.Skip("the combination test runs about 900 cases: not with -short")
	}
	f := newFixture(t, matrixRM{})
	var cases []matrixCase
	props := []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan}
	for _, p := range matrixPolicies() {
		for _, s := range matrixStates {
			for _, e := range matrixEvents {
				cases = append(cases, matrixCase{policy: p, state: s, event: e, propagation: props[len(cases)%len(props)]})
			}
		}
	}
	sem := make(chan struct{}, 6)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for i, c := range cases {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if errs := runMatrixCase(f, fmt.Sprintf("m%d", i), c); len(errs) > 0 {
				mu.Lock()
				failures = append(failures, c.name()+": "+strings.Join(errs, "; "))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(failures)
	for _, msg := range failures {
		t.Error(msg)
	}
	t.Logf("%d cases, %d failed", len(cases), len(failures))
}

// matrixRun is one case's owner and what the checks need.
type matrixRun struct {
	f     *fixture
	c     matrixCase
	owner string
	obj   string
	errs  []string
	first *corev1.ConfigMap // the object when the owner first settled with it
	uid   string            // the owner's UID
}

func (r *matrixRun) fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// runMatrixCase runs case c with owner name; it returns the broken invariants.
func runMatrixCase(f *fixture, name string, c matrixCase) []string {
	r := &matrixRun{f: f, c: c, owner: name, obj: name + "-obj"}
	ctx := context.Background()
	components := slices.Clone(c.policy)
	if c.state == "switched" {
		components = nil // created under the default policy, switched to c.policy below
	}
	switch c.state {
	case "foreign-controller":
		other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name + "-other"}}
		r.must(f.cl.Create(ctx, other))
		r.must(f.cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: r.obj,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: other.Name, UID: other.UID, Controller: ptr.To(true)}}},
			Data: map[string]string{"v": "foreign"}}, client.FieldOwner("other-controller")))
	}
	w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: testapi.WidgetSpec{Components: components, Data: map[string]string{"v": "1", "ignored": "1"}}}
	r.must(f.cl.Create(ctx, w))
	r.uid = string(w.UID)
	if c.state == "unowned-labelled" {
		r.must(f.cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: r.obj,
			Labels: map[string]string{kdagv1alpha1.LabelOwnerUID: r.uid, kdagv1alpha1.LabelManagedBy: "kdag", kdagv1alpha1.LabelController: f.name}},
			Data: map[string]string{"v": "user"}}, client.FieldOwner("user")))
	}
	if len(r.errs) > 0 {
		return r.errs
	}
	r.settle()
	r.first = r.object()

	switch c.state {
	case "user-kept":
		r.patchObject(func(o *corev1.ConfigMap) { setAnn(o, kdagv1alpha1.AnnotationKeep, "true") })
		r.settle()
	case "terminating":
		r.patchObject(func(o *corev1.ConfigMap) { o.Finalizers = append(o.Finalizers, "test.kdag.dev/hold") })
		if cm := r.object(); cm != nil {
			r.must(f.cl.Delete(ctx, cm))
		}
		r.settle()
		r.checkNotReadyWhileTerminating()
		r.patchObject(func(o *corev1.ConfigMap) { o.Finalizers = nil })
		r.settle()
		r.first = r.object()
	case "switched":
		r.updateOwner(func(w *testapi.Widget) { w.Spec.Components = slices.Clone(c.policy) })
		r.settle()
	case "immutable-pending":
		// The object is made immutable, then the owner asks another value: a change the API
		// server refuses is pending (re-created under Recreate, Stalled otherwise).
		r.updateOwner(func(w *testapi.Widget) { w.Spec.Components = append(w.Spec.Components, "immutable") })
		r.settle()
		r.updateOwner(func(w *testapi.Widget) { w.Spec.Data = map[string]string{"v": "0", "ignored": "1"} })
		r.settle()
	}
	r.check("before " + c.event)

	switch c.event {
	case "spec-change":
		r.updateOwner(func(w *testapi.Widget) { w.Spec.Data = map[string]string{"v": "2", "ignored": "2"} })
		r.settle()
		r.check("after spec change")
	case "pruned":
		r.updateOwner(func(w *testapi.Widget) { w.Spec.Components = append(w.Spec.Components, "gone") })
		r.settle()
		r.checkPruned()
	case "keep-switched":
		r.updateOwner(func(w *testapi.Widget) {
			if i := slices.Index(w.Spec.Components, "keep"); i >= 0 {
				w.Spec.Components = slices.Delete(w.Spec.Components, i, i+1)
			} else {
				w.Spec.Components = append(w.Spec.Components, "keep")
			}
		})
		r.c.policy = r.currentPolicy()
		r.settle()
		r.check("after keep switched")
	case "owner-deleted":
		r.checkOwnerDeleted()
	}
	return r.errs
}

func (r *matrixRun) must(err error) {
	if err != nil {
		r.fail("%v", err)
	}
}

func setAnn(o client.Object, k, v string) {
	ann := o.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[k] = v
	o.SetAnnotations(ann)
}

// currentPolicy reads the owner's components (its node policy).
func (r *matrixRun) currentPolicy() []string {
	w := &testapi.Widget{}
	r.must(r.f.cl.Get(context.Background(), client.ObjectKey{Namespace: r.f.ns, Name: r.owner}, w))
	return slices.DeleteFunc(slices.Clone(w.Spec.Components), func(s string) bool { return s == "gone" || s == "immutable" })
}

func (r *matrixRun) object() *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	err := r.f.cl.Get(context.Background(), client.ObjectKey{Namespace: r.f.ns, Name: r.obj}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	r.must(err)
	return cm
}

func (r *matrixRun) currentOwner() *testapi.Widget {
	w := &testapi.Widget{}
	err := r.f.cl.Get(context.Background(), client.ObjectKey{Namespace: r.f.ns, Name: r.owner}, w)
	if apierrors.IsNotFound(err) {
		return nil
	}
	r.must(err)
	return w
}

func (r *matrixRun) patchObject(mutate func(*corev1.ConfigMap)) {
	cm := r.object()
	if cm == nil {
		return
	}
	mutate(cm)
	r.must(r.f.cl.Update(context.Background(), cm, client.FieldOwner("user")))
}

func (r *matrixRun) updateOwner(mutate func(*testapi.Widget)) {
	w := r.currentOwner()
	if w == nil {
		return
	}
	mutate(w)
	r.must(r.f.cl.Update(context.Background(), w))
}

// settle reconciles the owner until two reconciles in a row leave the owner and its object as
// they were (same resourceVersions, read from the API server) and neither asks to come back
// within matrixSoon (an object re-created once the old one has been gone long enough, a
// finalizer just added): the cache caught up and nothing is left to write.
func (r *matrixRun) settle() {
	version := func() string {
		v := ""
		if w := r.currentOwner(); w != nil {
			v += w.ResourceVersion
		}
		if cm := r.object(); cm != nil {
			v += "/" + cm.ResourceVersion
		}
		return v
	}
	last, same := "", 0
	err := wait.PollUntilContextTimeout(context.Background(), 150*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		res, _ := r.f.reconcileResult(r.owner)
		switch v := version(); {
		case res.RequeueAfter > 0 && res.RequeueAfter <= matrixSoon:
			last, same = "", 0
		case v == last:
			same++
		default:
			last, same = v, 0
		}
		return same >= 2, nil
	})
	if err != nil {
		r.fail("did not settle within 30s")
	}
}

// matrixSoon is how soon a reconcile that asks to come back has work left: the apply engine's
// wait before it creates an object again after a Recreate (apply.Options.RecreateSettle's
// default) and shorter requeues.
const matrixSoon = 3 * time.Second

// kept reports whether the node keeps the object, by its policy or a user's annotation.
func (r *matrixRun) kept(cm *corev1.ConfigMap) bool {
	return r.c.has("keep") || cm.Annotations[kdagv1alpha1.AnnotationKeep] == "true"
}

// ours reports whether the case's object may be the owner's: not another's unless adopted.
func (r *matrixRun) adoptable() bool {
	if r.c.state == "foreign-controller" && r.c.has("finished") {
		// A Finished node whose object the cache does not hold (an object without kdag's labels)
		// is done: it creates nothing, so it adopts nothing either.
		return false
	}
	return r.c.state != "foreign-controller" && r.c.state != "unowned-labelled" || r.c.has("adopt")
}

func (r *matrixRun) ready() bool {
	w := r.currentOwner()
	return w != nil && isTrue(w.Status.Status, kdagv1alpha1.ConditionReady)
}

// check verifies the invariants of an object in the graph.
func (r *matrixRun) check(when string) {
	cm := r.object()
	if !r.adoptable() {
		// Refused: untouched, and the owner not Ready. (A Finished node creates nothing: an
		// object of its name that is not the owner's is none of its business, and no reason
		// not to be Ready.)
		if cm == nil || cm.Labels[kdagv1alpha1.LabelOwnerUID] != "" && r.c.state == "foreign-controller" || len(cm.ManagedFields) > 1 {
			r.fail("%s: an object that is not the owner's was changed: %v", when, cm)
		}
		if r.ready() && !r.c.has("finished") {
			r.fail("%s: Ready=True while the node's object is refused", when)
		}
		return
	}
	if cm == nil {
		if r.c.has("finished") {
			return // a Finished node's object, once gone (or never there), is not created
		}
		r.fail("%s: the node's object does not exist", when)
		return
	}
	if cm.DeletionTimestamp != nil {
		r.fail("%s: the node's object is being deleted", when)
		return
	}
	kept := r.kept(cm)
	ref := metav1.GetControllerOf(cm)
	if kept && ref != nil {
		r.fail("%s: kept object has controller owner reference %s", when, ref.Name)
	}
	if !kept && (ref == nil || string(ref.UID) != r.uid) {
		r.fail("%s: object not kept but its controller owner reference is %v", when, ref)
	}
	if cm.Labels[kdagv1alpha1.LabelOwnerUID] != r.uid {
		r.fail("%s: labels %v lack the owner's", when, cm.Labels)
	}
	if hasKeep := cm.Annotations[kdagv1alpha1.AnnotationResourcePolicy] == kdagv1alpha1.ResourcePolicyKeep; hasKeep != r.c.has("keep") {
		r.fail("%s: kdag.dev/resource-policy keep %v, want %v", when, hasKeep, r.c.has("keep"))
	}
	if r.c.has("create-only") && r.first != nil && cm.UID == r.first.UID && cm.Data["v"] != r.first.Data["v"] {
		r.fail("%s: create-only data rewritten: %v -> %v", when, r.first.Data, cm.Data)
	}
	want := r.currentOwner().Spec.Data["v"]
	if !r.c.has("create-only") && cm.Data["v"] != want && r.ready() {
		r.fail("%s: Ready=True while the object holds v=%s and the spec asks %s", when, cm.Data["v"], want)
	}
	immutableBlocked := r.c.has("recreate") && kept && cm.Data["v"] != want
	if r.ready() && immutableBlocked {
		r.fail("%s: Ready=True while a kept object's immutable change waits", when)
	}
	if immutableBlocked && (r.first == nil || cm.UID != r.first.UID) && r.c.state == "user-kept" {
		r.fail("%s: a kept object was re-created", when)
	}
}

// checkNotReadyWhileTerminating: the node's object is being deleted (held by a finalizer).
func (r *matrixRun) checkNotReadyWhileTerminating() {
	if cm := r.object(); cm != nil && cm.DeletionTimestamp != nil && r.ready() {
		r.fail("terminating: Ready=True while the node's object is being deleted")
	}
}

// checkPruned: the node left the graph: a kept object is orphaned (exists, no owner reference,
// no owner label), any other is deleted; the owner is Ready only when nothing remains.
func (r *matrixRun) checkPruned() {
	cm := r.object()
	switch {
	case !r.adoptable():
		if cm == nil {
			r.fail("pruned: an object that was never the owner's was deleted")
		}
	case cm == nil:
	case r.kept(cm):
		if metav1.GetControllerOf(cm) != nil || cm.Labels[kdagv1alpha1.LabelOwnerUID] != "" {
			r.fail("pruned: kept object not orphaned: refs %v labels %v", cm.OwnerReferences, cm.Labels)
		}
	default:
		if cm.DeletionTimestamp == nil {
			r.fail("pruned: object still there, not kept")
		} else if r.ready() {
			r.fail("pruned: Ready=True while the pruned object still exists")
		}
	}
}

// checkOwnerDeleted deletes the owner with the case's propagation and checks that kdag's part
// (its teardown, when it holds a finalizer) keeps every kept object, with no owner reference.
func (r *matrixRun) checkOwnerDeleted() {
	before := r.object()
	w := r.currentOwner()
	if w == nil {
		return
	}
	r.must(r.f.cl.Delete(context.Background(), w, client.PropagationPolicy(r.c.propagation)))
	err := wait.PollUntilContextTimeout(context.Background(), 150*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_ = r.f.reconcile(r.owner)
		o := r.currentOwner()
		return o == nil || !slices.Contains(o.Finalizers, kdagv1alpha1.Finalizer), nil
	})
	if err != nil {
		r.fail("owner deleted (%s): kdag's teardown did not finish within 30s", r.c.propagation)
		return
	}
	if before == nil || !r.adoptable() {
		return
	}
	cm := r.object()
	if r.kept(before) {
		switch {
		case cm == nil:
			r.fail("owner deleted (%s): kept object deleted", r.c.propagation)
		case metav1.GetControllerOf(cm) != nil:
			r.fail("owner deleted (%s): kept object keeps a controller owner reference: the garbage collector would delete it", r.c.propagation)
		}
	}
}
