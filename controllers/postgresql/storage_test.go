package postgresql

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
)

// TestStorageGrowth grows a running PostgreSQL's spec.storage.size (issue 14) on a real API
// server. With a StorageClass that allows volume expansion, kdag raises the claim's request and
// re-creates the StatefulSet (whose claim template the API server does not let change) with
// propagation Orphan, so its pod keeps running; without, the PostgreSQL is Stalled with reason
// VolumeExpansionForbidden and nothing is touched: the claim keeps its size, the StatefulSet
// its UID. envtest runs no garbage collector: the test removes the "orphan" finalizer as it
// would once the pods are orphaned.
func TestStorageGrowth(t *testing.T) {
	for _, tc := range []struct {
		name       string
		expandable *bool
	}{
		{"expandable class: claim grows, StatefulSet re-created", ptr.To(true)},
		{"class without allowVolumeExpansion: Stalled, nothing written", nil},
		{"class with allowVolumeExpansion false: Stalled, nothing written", ptr.To(false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := controllertest.Start(t, api, controller.For("postgresql", ResourceManager{}))
			ctx := t.Context()
			class := &storagev1.StorageClass{
				ObjectMeta:           metav1.ObjectMeta{Name: "growth-" + h.Namespace},
				Provisioner:          "example.com/fake",
				AllowVolumeExpansion: tc.expandable,
			}
			pg := onClass(t, h, class)
			h.Create(pg)
			claim := controllertest.Named[corev1.PersistentVolumeClaim](DataClaimName(pg.Name))
			sts := controllertest.Named[appsv1.StatefulSet](pg.Name)
			h.MarkReady(claim)
			h.MarkReady(sts)
			h.WaitReady(pg)
			h.Get(sts)
			oldUID := sts.UID

			patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"storage":{"size":"20Gi"}}}`))
			if err := h.Client.Patch(ctx, pg, patch); err != nil {
				t.Fatal(err)
			}
			want := resource.MustParse("20Gi")

			if tc.expandable == nil || !*tc.expandable {
				stalled := h.WaitCondition(pg, kdagv1alpha1.ConditionStalled, metav1.ConditionTrue)
				if stalled.Reason != kdagv1alpha1.ReasonVolumeExpansionForbidden ||
					!strings.Contains(stalled.Message, "PersistentVolumeClaim "+h.Namespace+"/"+claim.Name) ||
					!strings.Contains(stalled.Message, "allowVolumeExpansion: true") {
					t.Errorf("Stalled = %s: %q, want %s naming the claim and allowVolumeExpansion", stalled.Reason, stalled.Message,
						kdagv1alpha1.ReasonVolumeExpansionForbidden)
				}
				if ready := h.WaitCondition(pg, kdagv1alpha1.ConditionReady, metav1.ConditionFalse); ready.Reason != kdagv1alpha1.ReasonVolumeExpansionForbidden {
					t.Errorf("Ready=False reason %s, want %s", ready.Reason, kdagv1alpha1.ReasonVolumeExpansionForbidden)
				}
				h.Get(claim)
				h.Get(sts)
				if got := claim.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(want) == 0 {
					t.Errorf("claim requests %s: the API server let it grow on a class without volume expansion?", got.String())
				}
				if sts.UID != oldUID || sts.DeletionTimestamp != nil {
					t.Errorf("StatefulSet UID %s (was %s) deleting %v: it must not be re-created while its claim cannot grow",
						sts.UID, oldUID, sts.DeletionTimestamp)
				}
				return
			}

			waitRecreatedWithOrphan(t, h, sts, oldUID)
			h.MarkReady(sts)
			h.WaitReady(pg)
			h.Get(claim)
			h.Get(sts)
			if got := claim.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(want) != 0 {
				t.Errorf("claim requests %s, want %s", got.String(), want.String())
			}
			if got := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(want) != 0 {
				t.Errorf("StatefulSet claim template requests %s, want %s", got.String(), want.String())
			}
		})
	}
}

// TestDataClaim_AdoptedFromEarlierVersions: before the data claim was kdag's, the StatefulSet
// controller made it from its template, with the StatefulSet as its controller under the Delete
// retention policy and with no owner under Retain. Either way kdag adopts that claim, the
// same one (its data), and the PostgreSQL becomes Ready with it as the claim's only controller.
func TestDataClaim_AdoptedFromEarlierVersions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy giteav1alpha1.StorageDeletionPolicy
	}{
		{"Retain: no owner", giteav1alpha1.StorageRetain},
		{"Delete: the StatefulSet is its controller", giteav1alpha1.StorageDelete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := controllertest.Start(t, api, controller.For("postgresql", ResourceManager{}))
			pg := defaulted(func(pg *giteav1alpha1.PostgreSQL) {
				pg.Namespace, pg.UID = "", ""
				pg.Spec.Storage.DeletionPolicy = tc.policy
			})
			// The claim as the StatefulSet controller of an earlier operator version made it.
			old := dataClaim(pg)
			old.Labels = map[string]string{"app.kubernetes.io/name": "postgresql"}
			if tc.policy == giteav1alpha1.StorageDelete {
				old.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: pg.Name,
					UID: "8a2a6a5e-0000-4000-8000-000000000001", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
			}
			h.Create(old)
			// Its credentials, handed over (the key that opens the data: without it kdag would
			// rightly refuse to generate a new one over the existing claim, DataKeyMissing).
			creds := credentialsSecret(pg)
			creds.Annotations = map[string]string{kdagv1alpha1.AnnotationAdopt: "PostgreSQL/" + pg.Name}
			h.Create(creds)
			h.Create(pg)
			claim := controllertest.Named[corev1.PersistentVolumeClaim](DataClaimName(pg.Name))
			h.MarkReady(claim)
			h.MarkReady(controllertest.Named[appsv1.StatefulSet](pg.Name))
			h.WaitReady(pg)
			h.Get(claim)
			if claim.UID != old.UID {
				t.Errorf("claim UID %s, was %s: the data claim was replaced", claim.UID, old.UID)
			}
			if claim.Labels[kdagv1alpha1.LabelOwnerUID] != string(pg.UID) {
				t.Errorf("claim labels %v, want kdag's for the PostgreSQL %s", claim.Labels, pg.UID)
			}
			switch refs := claim.OwnerReferences; {
			case tc.policy == giteav1alpha1.StorageRetain && len(refs) != 0:
				t.Errorf("claim owner references %+v, want none: with Retain it is kept (no owner reference)", refs)
			case tc.policy == giteav1alpha1.StorageDelete && (len(refs) != 1 || refs[0].UID != pg.UID || !ptr.Deref(refs[0].Controller, false)):
				t.Errorf("claim owner references %+v, want the PostgreSQL %s as the only controller", refs, pg.UID)
			}
		})
	}
}

// TestStorageGrowth_PendingClaimWaitsThenGrows grows a PostgreSQL whose data claim is still
// Pending (a WaitForFirstConsumer class binds it only once the database's pod is scheduled):
// the PostgreSQL is not Stalled but waits, naming the claim; the StatefulSet gets the edit (it is
// re-created with the new claim template, so its pod can start and bind the claim); once the
// claim is bound it grows and the PostgreSQL is Ready.
func TestStorageGrowth_PendingClaimWaitsThenGrows(t *testing.T) {
	h := controllertest.Start(t, api, controller.For("postgresql", ResourceManager{}))
	ctx := t.Context()
	class := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "pending-" + h.Namespace}, Provisioner: "example.com/fake",
		AllowVolumeExpansion: ptr.To(true), VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	pg := onClass(t, h, class)
	h.Create(pg)
	claim := controllertest.Named[corev1.PersistentVolumeClaim](DataClaimName(pg.Name))
	sts := controllertest.Named[appsv1.StatefulSet](pg.Name)
	h.MarkReady(sts)
	h.WaitReady(pg) // a Pending claim counts as ready
	h.Get(sts)
	oldUID := sts.UID

	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"storage":{"size":"20Gi"}}}`))
	if err := h.Client.Patch(ctx, pg, patch); err != nil {
		t.Fatal(err)
	}
	waitRecreatedWithOrphan(t, h, sts, oldUID)
	ready := h.WaitCondition(pg, kdagv1alpha1.ConditionReady, metav1.ConditionFalse)
	if !strings.Contains(ready.Message, claim.Name) || !strings.Contains(ready.Message, "once it is bound") {
		t.Errorf("Ready=False: %q, want it to name the claim growing once bound", ready.Message)
	}
	h.Get(pg)
	if c := apimeta.FindStatusCondition(pg.Status.Conditions, kdagv1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		t.Fatalf("Stalled while the claim is only Pending: %s", c.Message)
	}
	h.Get(claim)
	if got := claim.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("20Gi")) == 0 {
		t.Fatal("the Pending claim's request changed: the API server refuses that before it binds")
	}

	h.MarkReady(claim) // bound
	h.MarkReady(sts)
	h.WaitReady(pg)
	h.Get(claim)
	if got := claim.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("20Gi")) != 0 {
		t.Errorf("claim requests %s once bound, want 20Gi", got.String())
	}
}

// onClass creates class for the test (deleted when the test ends) and returns the defaulted
// sample PostgreSQL with its storage on it, not created yet.
func onClass(t *testing.T, h *controllertest.Harness, class *storagev1.StorageClass) *giteav1alpha1.PostgreSQL {
	t.Helper()
	if err := h.Client.Create(t.Context(), class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Client.Delete(context.Background(), class) })
	return defaulted(func(pg *giteav1alpha1.PostgreSQL) {
		pg.Namespace, pg.UID = "", ""
		pg.Spec.Storage.StorageClassName = ptr.To(class.Name)
	})
}

// waitRecreatedWithOrphan waits until the StatefulSet sts is deleted (with the orphan finalizer:
// propagation Orphan keeps its pod) and created again with another UID than oldUID. envtest runs
// no garbage collector: it does the collector's part, removing the orphan finalizer once set.
func waitRecreatedWithOrphan(t *testing.T, h *controllertest.Harness, sts *appsv1.StatefulSet, oldUID types.UID) {
	t.Helper()
	h.Eventually("the StatefulSet is re-created", func(ctx context.Context) (bool, error) {
		cur := &appsv1.StatefulSet{}
		if err := h.Client.Get(ctx, client.ObjectKeyFromObject(sts), cur); client.IgnoreNotFound(err) != nil {
			return false, err
		} else if err != nil {
			return false, nil
		}
		if cur.DeletionTimestamp != nil {
			if !slices.Contains(cur.Finalizers, metav1.FinalizerOrphanDependents) {
				t.Errorf("StatefulSet deleted with finalizers %v, want %s: propagation Orphan keeps the pod", cur.Finalizers, metav1.FinalizerOrphanDependents)
			}
			cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == metav1.FinalizerOrphanDependents })
			return false, client.IgnoreNotFound(h.Client.Update(ctx, cur))
		}
		return cur.UID != oldUID, nil
	})
}
