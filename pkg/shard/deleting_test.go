package shard

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestReplicas_DeletedOwnerOfDeadShard: a Widget assigned to a replica that is gone (no member
// Lease), holding kdag's finalizer, is deleted while no replica runs, so it stays Terminating.
// Once a replica starts, its assigner relabels the Widget for it, and its controller tears the
// Widget down: the finalizer goes and the Widget is gone.
func TestReplicas_DeletedOwnerOfDeadShard(t *testing.T) {
	env := api.Env(t)
	ns := env.Namespace(t)
	w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: "doomed", Finalizers: []string{kdagv1alpha1.Finalizer},
		Labels:      map[string]string{kdagv1alpha1.LabelShard: "r-gone"},
		Annotations: map[string]string{kdagv1alpha1.AnnotationShardAssigned: "r-gone"},
	}}
	if err := env.Client.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // a failed run leaves no Terminating Widget behind
		w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed"}}
		_ = env.Client.Patch(context.Background(), w, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	act := &activity{times: map[string]map[string][]time.Time{}, held: map[string]chan struct{}{}, holding: make(chan string, 1)}
	startReplica(t, env, ns, "r1", act)
	poll.Until(t, "Widget doomed torn down and gone", 30*time.Second, func(ctx context.Context) string {
		got := &testapi.Widget{}
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "doomed"}, got)
		switch {
		case apierrors.IsNotFound(err):
			return ""
		case err != nil:
			return err.Error()
		}
		return fmt.Sprintf("still there: shard %q, finalizers %v", got.Labels[kdagv1alpha1.LabelShard], got.Finalizers)
	})
}
