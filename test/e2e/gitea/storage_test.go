package gitea

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	crds "github.com/kdag-dev/kdag/config/crd"
	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

// expandableClass is a StorageClass of the local cluster's hostPath provisioner that allows
// volume expansion (the default class does not).
const expandableClass = "kdag-e2e-expandable"

// TestStorage_DatabaseVolumeGrows is issue 14's acceptance test: a user grows the sample's
// database storage with `kubectl patch`. The live plan first shows the claim's Update and the
// StatefulSet's Recreate (its claim template is immutable); once the operator applies it, the
// claim asks for the new size, the StatefulSet exists again, re-created, with the same pod
// running (same UID: it was orphaned, not deleted, and the new StatefulSet adopted it), and the
// Gitea is Ready again.
func TestStorage_DatabaseVolumeGrows(t *testing.T) {
	ctx := t.Context()
	class := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: expandableClass},
		Provisioner:          "kubernetes.io/host-path",
		AllowVolumeExpansion: ptr.To(true),
	}
	if err := cl.Create(ctx, class); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	manifest := func(size string) string {
		return fmt.Sprintf(`apiVersion: gitea.kdag.dev/v1alpha1
kind: Gitea
metadata: {name: demo, namespace: %s}
spec:
  database:
    managed:
      storage: {size: %s, storageClassName: %s}
`, ns, size, expandableClass)
	}
	g := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}}
	g.Spec.Database.Managed = &giteav1alpha1.ManagedDatabaseSpec{Storage: giteav1alpha1.StorageSpec{
		Size: resource.MustParse("10Gi"), StorageClassName: ptr.To(expandableClass)}}
	if err := cl.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	waitGiteaReady(t, client.ObjectKeyFromObject(g), readyTimeout)
	const claimName, stsName, podName = "data-demo-postgresql-0", "demo-postgresql", "demo-postgresql-0"
	claim := get(t, ns, claimName, &corev1.PersistentVolumeClaim{})
	if claim.Status.Phase != corev1.ClaimBound {
		t.Fatalf("claim %s is %s, want Bound (the hostPath provisioner of class %s)", claimName, claim.Status.Phase, expandableClass)
	}
	oldSTS := get(t, ns, stsName, &appsv1.StatefulSet{})
	oldPod := get(t, ns, podName, &corev1.Pod{})

	// The plan of the change, before it is made: nothing is written.
	file := filepath.Join(t.TempDir(), "gitea.yaml")
	if err := os.WriteFile(file, []byte(manifest("20Gi")), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := plan.Run(ctx, []string{"--live", "-f", file}, &out, plan.Options{
		Scheme: scheme, Components: controllers.Components(nil), CRDs: crds.Bases, RESTConfig: local.Config,
	})
	if !errors.Is(err, plan.ErrChanges) {
		t.Fatalf("plan --live -f = %v, want ErrChanges\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		"Update     PostgreSQL " + ns + "/demo-postgresql\n",
		"Update     PersistentVolumeClaim " + ns + "/" + claimName + "\n",
		"-      storage: 10Gi\n", "+      storage: 20Gi\n",
		"Recreate   StatefulSet " + ns + "/" + stsName + "\n",
		"is immutable: kdag deletes the object (propagation Orphan) and creates it again",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the live plan lacks %q:\n%s", want, text)
		}
	}
	if get(t, ns, claimName, &corev1.PersistentVolumeClaim{}).ResourceVersion != claim.ResourceVersion ||
		get(t, ns, stsName, &appsv1.StatefulSet{}).ResourceVersion != oldSTS.ResourceVersion {
		t.Error("the live plan changed the claim or the StatefulSet")
	}
	t.Logf("plan --live -f:\n%s", text)

	// The change, as a user makes it.
	if b, err := local.Kubectl(ctx, "-n", ns, "patch", "gitea", "demo", "--type", "merge",
		"-p", `{"spec":{"database":{"managed":{"storage":{"size":"20Gi"}}}}}`); err != nil {
		t.Fatalf("kubectl patch: %v\n%s", err, b)
	}
	want := resource.MustParse("20Gi")
	poll.Until(t, "claim grown, StatefulSet re-created with the same pod", readyTimeout, func(ctx context.Context) string {
		c := &corev1.PersistentVolumeClaim{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: claimName}, c); err != nil {
			return err.Error()
		}
		if got := c.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(want) != 0 {
			return "claim requests " + got.String()
		}
		sts := &appsv1.StatefulSet{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: stsName}, sts); err != nil {
			return err.Error()
		}
		if sts.UID == oldSTS.UID {
			return "StatefulSet not re-created yet"
		}
		if got := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(want) != 0 {
			return "StatefulSet's claim template requests " + got.String()
		}
		return ""
	})
	waitGiteaReady(t, client.ObjectKeyFromObject(g), readyTimeout)
	pod := get(t, ns, podName, &corev1.Pod{})
	sts := get(t, ns, stsName, &appsv1.StatefulSet{})
	if pod.UID != oldPod.UID {
		t.Errorf("pod %s UID %s, was %s: growing the volume restarted the database", podName, pod.UID, oldPod.UID)
	}
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != sts.UID {
		t.Errorf("pod %s controller %+v, want the new StatefulSet %s (adopted)", podName, ref, sts.UID)
	}
	if c := get(t, ns, claimName, &corev1.PersistentVolumeClaim{}); c.UID != claim.UID {
		t.Errorf("claim %s UID %s, was %s: the data claim was replaced", claimName, c.UID, claim.UID)
	}
	pg := get(t, ns, "demo-postgresql", &giteav1alpha1.PostgreSQL{})
	if got := pg.Spec.Storage.Size; got.Cmp(want) != 0 {
		t.Errorf("PostgreSQL storage.size %s, want %s", got.String(), want.String())
	}
}
