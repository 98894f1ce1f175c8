package gitea

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

// dataGroups are each component's data and the keys that open it: kept or deleted as one.
var dataGroups = map[string][]client.Object{
	"database": {
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: dbSecret}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: dbClaim}},
	},
	"server": {
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-secrets"}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "demo-data"}},
	},
}

// keptState says how obj is held: "kept" (no controller owner reference, kdag's keep
// annotation), "owned" (a controller owner reference, no keep annotation), or what is off.
func keptState(ctx context.Context, ns string, obj client.Object) string {
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: obj.GetName()}, obj); err != nil {
		return err.Error()
	}
	ref := metav1.GetControllerOf(obj)
	keep := obj.GetAnnotations()[kdagv1alpha1.AnnotationResourcePolicy] == kdagv1alpha1.ResourcePolicyKeep
	switch {
	case ref == nil && keep:
		return "kept"
	case ref != nil && !keep:
		return "owned"
	}
	return fmt.Sprintf("controller %v, keep annotation %v", ref, keep)
}

// TestLifecycle_DeletionPolicySwitchKeepsDataAndKeysTogether: a Gitea created with
// storage.deletionPolicy Delete, switched to Retain, back to Delete and to Retain again: after each
// switch each component's claim and the generated keys that open it are held alike (kept, or
// owned and deleted with their owner), never the claim kept and its key left to the garbage
// collector. Deleted under Retain and applied again, the Gitea is Ready on the same claims and
// keys (before the one-call apply engine, the key was deleted and the new Gitea Stalled
// DataKeyMissing for good).
func TestLifecycle_DeletionPolicySwitchKeepsDataAndKeysTogether(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	setPolicy := func(g *giteav1alpha1.Gitea, p giteav1alpha1.StorageDeletionPolicy) {
		g.Spec.Storage.DeletionPolicy = p
		g.Spec.Database.Managed = &giteav1alpha1.ManagedDatabaseSpec{Storage: giteav1alpha1.StorageSpec{DeletionPolicy: p}}
	}
	g := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}}
	setPolicy(g, giteav1alpha1.StorageDelete)
	if err := cl.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(g)
	waitGiteaReady(t, key, readyTimeout)
	uids := map[string]string{}
	for _, policy := range []giteav1alpha1.StorageDeletionPolicy{giteav1alpha1.StorageDelete, giteav1alpha1.StorageRetain,
		giteav1alpha1.StorageDelete, giteav1alpha1.StorageRetain} {
		cur := get(t, ns, key.Name, &giteav1alpha1.Gitea{})
		setPolicy(cur, policy)
		if err := cl.Update(t.Context(), cur); err != nil {
			t.Fatal(err)
		}
		want := "owned"
		if policy == giteav1alpha1.StorageRetain {
			want = "kept"
		}
		for group, objs := range dataGroups {
			for _, obj := range objs {
				poll.Until(t, fmt.Sprintf("%s: %T %s is %s under %s", group, obj, obj.GetName(), want, policy), readyTimeout,
					func(ctx context.Context) string {
						if got := keptState(ctx, ns, obj); got != want {
							return got
						}
						return ""
					})
				if uid, seen := uids[obj.GetName()]; seen && uid != string(obj.GetUID()) {
					t.Fatalf("%s was re-created on a deletion policy switch", obj.GetName())
				}
				uids[obj.GetName()] = string(obj.GetUID())
			}
		}
		waitGiteaReady(t, key, readyTimeout)
	}

	if err := cl.Delete(t.Context(), get(t, ns, key.Name, &giteav1alpha1.Gitea{})); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the Gitea and its children are gone", readyTimeout, func(ctx context.Context) string {
		return present(ctx, ns, &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Name: key.Name}},
			&giteav1alpha1.PostgreSQL{ObjectMeta: metav1.ObjectMeta{Name: "demo-postgresql"}},
			&giteav1alpha1.GiteaServer{ObjectMeta: metav1.ObjectMeta{Name: "demo"}})
	})
	again := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}}
	setPolicy(again, giteav1alpha1.StorageRetain)
	if err := cl.Create(t.Context(), again); err != nil {
		t.Fatal(err)
	}
	waitGiteaReady(t, key, readyTimeout)
	for _, objs := range dataGroups {
		for _, obj := range objs {
			if got := get(t, ns, obj.GetName(), obj); string(got.GetUID()) != uids[obj.GetName()] {
				t.Errorf("%s was re-created (UID %s, was %s): its data or the key that opens it was lost", obj.GetName(), got.GetUID(), uids[obj.GetName()])
			}
		}
	}
}

// TestLifecycle_UserKeptSecretSurvivesForegroundDeletion: a user annotates a generated Secret
// kdag.dev/keep: "true" under deletionPolicy Delete; kdag drops its owner reference, so a
// foreground deletion of the Gitea (the garbage collector deleting dependents first) leaves it.
func TestLifecycle_UserKeptSecretSurvivesForegroundDeletion(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	g := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}}
	g.Spec.Storage.DeletionPolicy = giteav1alpha1.StorageDelete
	g.Spec.Database.Managed = &giteav1alpha1.ManagedDatabaseSpec{Storage: giteav1alpha1.StorageSpec{DeletionPolicy: giteav1alpha1.StorageDelete}}
	if err := cl.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(g)
	waitGiteaReady(t, key, readyTimeout)
	secret := get(t, ns, "demo-secrets", &corev1.Secret{})
	mergePatch(t, secret, `{"metadata":{"annotations":{"kdag.dev/keep":"true"}}}`)
	poll.Until(t, "the kept Secret loses its owner reference", readyTimeout, func(ctx context.Context) string {
		s := &corev1.Secret{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(secret), s); err != nil {
			return err.Error()
		}
		if len(s.OwnerReferences) > 0 {
			return fmt.Sprintf("owner references %v", s.OwnerReferences)
		}
		return ""
	})

	if err := cl.Delete(t.Context(), get(t, ns, key.Name, &giteav1alpha1.Gitea{}), client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the Gitea and its server are gone", readyTimeout, func(ctx context.Context) string {
		return present(ctx, ns, &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Name: key.Name}},
			&giteav1alpha1.GiteaServer{ObjectMeta: metav1.ObjectMeta{Name: "demo"}})
	})
	kept := &corev1.Secret{}
	if err := cl.Get(t.Context(), client.ObjectKeyFromObject(secret), kept); apierrors.IsNotFound(err) {
		t.Fatal("the Secret the user kept was deleted with its owner")
	} else if err != nil {
		t.Fatal(err)
	}
	if kept.UID != secret.UID || kept.Annotations[kdagv1alpha1.AnnotationKeep] != "true" {
		t.Errorf("kept Secret UID %s (was %s), annotations %v", kept.UID, secret.UID, kept.Annotations)
	}
}

// waitForFirstConsumerClass is an expandable StorageClass of the local cluster's hostPath
// provisioner that binds a claim only once a pod that mounts it is scheduled (kind's, GKE's and
// EBS's default binding mode).
const waitForFirstConsumerClass = "kdag-e2e-wait-for-consumer"

// TestLifecycle_PendingDatabaseClaimGrowsOnceBound: the database's claim is still Pending (its
// class binds it only once the database pod is scheduled, and every node is tainted so that it
// cannot be) when the user grows spec.storage.size. The Gitea waits, never Stalled, the
// PostgreSQL naming the claim; the StatefulSet is re-created with the new claim template all the
// same; once the taint goes the pod is scheduled, the claim binds, then grows, and the Gitea is
// Ready. (Before the one-call apply engine, the Pending claim's refusal was taken for an
// immutable field: Stalled, and the StatefulSet never got the edit.)
func TestLifecycle_PendingDatabaseClaimGrowsOnceBound(t *testing.T) {
	ctx := t.Context()
	class := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: waitForFirstConsumerClass}, Provisioner: "kubernetes.io/host-path",
		AllowVolumeExpansion: ptr.To(true), VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if err := cl.Create(ctx, class); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	taintNodes(t, "kdag-e2e/hold")
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	g := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}}
	g.Spec.Database.Managed = &giteav1alpha1.ManagedDatabaseSpec{Storage: giteav1alpha1.StorageSpec{
		Size: resource.MustParse("10Gi"), StorageClassName: ptr.To(waitForFirstConsumerClass)}}
	if err := cl.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	const claimName, stsName = "data-demo-postgresql-0", "demo-postgresql"
	claim := &corev1.PersistentVolumeClaim{}
	poll.Until(t, "the database claim exists, Pending", readyTimeout, func(ctx context.Context) string {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: claimName}, claim); err != nil {
			return err.Error()
		}
		if claim.Status.Phase != corev1.ClaimPending {
			return "claim is " + string(claim.Status.Phase)
		}
		return ""
	})
	// The claim comes first, its StatefulSet after it.
	oldSTS := &appsv1.StatefulSet{}
	poll.Until(t, "the StatefulSet exists", readyTimeout, func(ctx context.Context) string {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: stsName}, oldSTS); err != nil {
			return err.Error()
		}
		return ""
	})

	if b, err := local.Kubectl(ctx, "-n", ns, "patch", "gitea", "demo", "--type", "merge",
		"-p", `{"spec":{"database":{"managed":{"storage":{"size":"20Gi"}}}}}`); err != nil {
		t.Fatalf("kubectl patch: %v\n%s", err, b)
	}
	pg := &giteav1alpha1.PostgreSQL{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-postgresql"}}
	poll.Until(t, "the StatefulSet is re-created with the new claim template while the claim is Pending", readyTimeout, func(ctx context.Context) string {
		sts := &appsv1.StatefulSet{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: stsName}, sts); err != nil {
			return err.Error()
		}
		if sts.UID == oldSTS.UID {
			return "not re-created yet"
		}
		if got := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("20Gi")) != 0 {
			return "claim template requests " + got.String()
		}
		return ""
	})
	poll.Until(t, "the PostgreSQL waits for its claim to bind, not Stalled", readyTimeout, func(ctx context.Context) string {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pg), pg); err != nil {
			return err.Error()
		}
		if c := condition(&pg.Status.Status, kdagv1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
			t.Fatalf("PostgreSQL Stalled while its claim is Pending: %s", c.Message)
		}
		if c := condition(&pg.Status.Status, kdagv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse ||
			!strings.Contains(c.Message, claimName) || !strings.Contains(c.Message, "once it is bound") {
			return fmt.Sprintf("Ready condition %+v", c)
		}
		return ""
	})

	untaintNodes(t, "kdag-e2e/hold")
	poll.Until(t, "the claim binds, then grows", readyTimeout, func(ctx context.Context) string {
		c := &corev1.PersistentVolumeClaim{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: claimName}, c); err != nil {
			return err.Error()
		}
		if got := c.Spec.Resources.Requests[corev1.ResourceStorage]; c.Status.Phase != corev1.ClaimBound || got.Cmp(resource.MustParse("20Gi")) != 0 {
			return fmt.Sprintf("claim %s, requests %s", c.Status.Phase, got.String())
		}
		if c.UID != claim.UID {
			return "the claim was replaced"
		}
		return ""
	})
	waitGiteaReady(t, client.ObjectKeyFromObject(g), readyTimeout)
}

// taintNodes taints every node key=true:NoSchedule (new pods cannot be scheduled); the taint is
// removed when the test ends, if untaintNodes did not remove it before.
func taintNodes(t *testing.T, key string) {
	t.Helper()
	t.Cleanup(func() { untaintNodes(t, key) })
	nodes := &corev1.NodeList{}
	if err := cl.List(t.Context(), nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		if err := cl.Update(t.Context(), &n); err != nil {
			t.Fatal(err)
		}
	}
}

// untaintNodes removes the taint key from every node.
func untaintNodes(t *testing.T, key string) {
	nodes := &corev1.NodeList{}
	if err := cl.List(context.Background(), nodes); err != nil {
		t.Errorf("list nodes: %v", err)
		return
	}
	for _, n := range nodes.Items {
		taints := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(tn corev1.Taint) bool { return tn.Key == key })
		if len(taints) == len(n.Spec.Taints) {
			continue
		}
		n.Spec.Taints = taints
		if err := cl.Update(context.Background(), &n); err != nil {
			t.Errorf("untaint node %s: %v", n.Name, err)
		}
	}
}
