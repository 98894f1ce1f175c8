package apply_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kdag-dev/kdag/pkg/apply"
)

// TestVolumeExpansionForbidden tells the PersistentVolumeClaimResize admission's refusal of a
// StorageClass without volume expansion (only an administrator helps) from the other refusals
// of a claim's apply, which a retry or the owner's spec can fix. The wordings are the API
// server's (k8s.io/kubernetes plugin/pkg/admission/storage/persistentvolume/resize, RBAC's
// authorizer); TestStorageGrowth in controllers/postgresql gets the real one from kube-apiserver.
func TestVolumeExpansionForbidden(t *testing.T) {
	claims := schema.GroupResource{Resource: "persistentvolumeclaims"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"class does not allow expansion", apierrors.NewForbidden(claims, "data",
			errors.New("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize")), true},
		{"wrapped", errors.Wrap(apierrors.NewForbidden(claims, "data",
			errors.New("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize")), "apply"), true},
		{"claim not bound yet: passes once bound", apierrors.NewForbidden(claims, "data",
			errors.New("Only bound persistent volume claims can be expanded")), false},
		{"RBAC", apierrors.NewForbidden(claims, "data",
			errors.New(`User "system:serviceaccount:kdag:kdag" cannot patch resource "persistentvolumeclaims"`)), false},
		{"validation", apierrors.NewInvalid(schema.GroupKind{Kind: "PersistentVolumeClaim"}, "data",
			field.ErrorList{field.Forbidden(field.NewPath("spec"), "spec is immutable after creation")}), false},
		{"other error", errors.New("connection refused"), false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := apply.VolumeExpansionForbidden(tc.err); got != tc.want {
				t.Errorf("VolumeExpansionForbidden(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	err := &apply.VolumeExpansionError{Object: "PersistentVolumeClaim ns/data", Err: errors.New("forbidden")}
	if msg := err.Error(); msg != "PersistentVolumeClaim ns/data: cannot grow, its StorageClass does not allow volume expansion: "+
		"set allowVolumeExpansion: true on the StorageClass (the claim keeps its size and data until then)" {
		t.Errorf("Error() = %q", msg)
	}
}

// TestEngine_GrowthRefusedBeforeTheAPIServerSawTheClass: a claim's growth that the API server
// refuses because its StorageClass does not allow volume expansion is a VolumeExpansionError (the
// owner is Stalled until an administrator allows it), unless the engine's client (the manager's
// cache) already sees the class allowing it: then the administrator's change woke the owner
// before the API server's admission saw it, and the error is a plain one, retried. Found in
// TestLifecycle_ExpansionStallRecheckedOnStorageClassChange, which timed out once in CI-like load:
// the retry came 5 minutes later, on the Stalled recheck.
func TestEngine_GrowthRefusedBeforeTheAPIServerSawTheClass(t *testing.T) {
	for _, tc := range []struct {
		name         string
		cacheAllows  bool // what the engine's client reads of the class
		wantStalled  bool // a *VolumeExpansionError
		wantRetrying bool // the error says kdag retries
	}{
		{name: "the class forbids expansion", cacheAllows: false, wantStalled: true},
		{name: "the class allows it, the API server has not seen it yet", cacheAllows: true, wantRetrying: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "fixed-"}, Provisioner: "example.com/none"}
			if err := env.Client.Create(t.Context(), class); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) })
			f := newEngineWith(t, func(c client.WithWatch) client.WithWatch {
				return interceptor.NewClient(c, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if err := c.Get(ctx, key, obj, opts...); err != nil {
						return err
					}
					if sc, ok := obj.(*storagev1.StorageClass); ok && tc.cacheAllows {
						sc.AllowVolumeExpansion = ptr.To(true)
					}
					return nil
				}})
			})
			claim := func(size string) *corev1.PersistentVolumeClaim {
				return &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: corev1.PersistentVolumeClaimSpec{
						StorageClassName: ptr.To(class.Name),
						AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
					},
				}
			}
			if _, _, err := f.apply(claim("1Gi"), apply.Policy{}); err != nil {
				t.Fatal(err)
			}
			bound := f.live(claim("1Gi")).(*corev1.PersistentVolumeClaim)
			bound.Status.Phase = corev1.ClaimBound
			if err := env.Client.Status().Update(t.Context(), bound); err != nil {
				t.Fatal(err)
			}
			_, _, err := f.apply(claim("2Gi"), apply.Policy{})
			var stalled *apply.VolumeExpansionError
			switch {
			case err == nil:
				t.Fatal("the growth was accepted: the class allows expansion on the API server")
			case errors.As(err, &stalled) != tc.wantStalled:
				t.Errorf("error %v: VolumeExpansionError %v, want %v", err, !tc.wantStalled, tc.wantStalled)
			case strings.Contains(err.Error(), "kdag retries") != tc.wantRetrying:
				t.Errorf("error %q: says kdag retries %v, want %v", err, !tc.wantRetrying, tc.wantRetrying)
			}
			if got := f.live(claim("1Gi")).(*corev1.PersistentVolumeClaim).Spec.Resources.Requests.Storage(); got.Cmp(resource.MustParse("1Gi")) != 0 {
				t.Errorf("claim asks for %s after the refused growth, want 1Gi", got)
			}
		})
	}
}
