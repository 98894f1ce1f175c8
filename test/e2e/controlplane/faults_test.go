package controlplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/localcluster"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

const (
	// componentDown is how long a killed kube-apiserver or etcd stays down.
	componentDown = 5 * time.Second
	// cut is how long the operator is cut off the API server.
	cut = 30 * time.Second
	// convergeTimeout bounds the fleet's first deploy and its recovery after a fault.
	convergeTimeout = 10 * time.Minute
)

// TestFault_APIServerKilledDuringFirstDeploy: kube-apiserver is SIGKILLed while the fleet's first
// deploy is half done, stays down componentDown and is started again.
func TestFault_APIServerKilledDuringFirstDeploy(t *testing.T) {
	faultDuringFirstDeploy(t, "kube-apiserver killed", func(t *testing.T, _ *link) string {
		return outage(t, localcluster.ComponentKubeAPIServer)
	})
}

// TestFault_EtcdKilledDuringFirstDeploy: etcd is SIGKILLed while the fleet's first deploy is
// half done, stays down componentDown and is started again; kube-apiserver keeps running.
func TestFault_EtcdKilledDuringFirstDeploy(t *testing.T) {
	faultDuringFirstDeploy(t, "etcd killed", func(t *testing.T, _ *link) string {
		return outage(t, localcluster.ComponentEtcd)
	})
}

// outage kills component, keeps it down componentDown and starts it again (Cluster.Outage), and
// checks that it runs as a new process beside the other components, as before.
func outage(t *testing.T, component string) string {
	t.Helper()
	before, err := local.Components()
	if err != nil {
		t.Fatal(err)
	}
	took, err := local.Outage(t.Context(), componentDown, component)
	if err != nil {
		t.Fatal(err)
	}
	after, err := local.Components()
	if err != nil {
		t.Fatal(err)
	}
	if after[component] == 0 || after[component] == before[component] {
		t.Fatalf("%s: pid %d before the outage, %d after: want a new process", component, before[component], after[component])
	}
	for name := range before {
		if after[name] == 0 {
			t.Errorf("%s ran before the outage of %s, not after it", name, component)
		}
	}
	return fmt.Sprintf("down %s, restarted and serving in %s", componentDown, took.Round(100*time.Millisecond))
}

// TestFault_NetworkCutDuringFirstDeploy: the operator's connections to the API server are reset
// and new ones refused for cut while the fleet's first deploy is half done.
func TestFault_NetworkCutDuringFirstDeploy(t *testing.T) {
	faultDuringFirstDeploy(t, "network cut", func(t *testing.T, l *link) string {
		if err := l.proxy.Cut(); err != nil {
			t.Fatal(err)
		}
		sleep(t.Context(), cut)
		if err := l.proxy.Restore(); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("operator cut off for %s", cut)
	})
}

// faultDuringFirstDeploy creates the fleet under one operator process, waits until half its
// generated Secrets exist (fewer than all Giteas Ready), snapshots the claims and generated
// Secrets, runs fault (which returns once the fault is over, with a description), and checks
// that the fleet converges, nothing kept was lost or re-created, and the operator goes idle.
func faultDuringFirstDeploy(t *testing.T, name string, fault func(*testing.T, *link) string) {
	ns := local.Namespace(t)
	dir := logDir(t, ns)
	l := newLink(t, dir)
	g := watchKept(t, ns)
	op := startOperator(t, l, dir, "operator")

	created := time.Now()
	createFleet(t, ns, giteas)
	poll.Until(t, "the first deploy half done", convergeTimeout, func(ctx context.Context) string {
		n, err := generatedSecrets(ctx, ns)
		if err != nil {
			return err.Error()
		}
		if n < giteas { // each Gitea has two: the database's credentials, the server's keys
			return fmt.Sprintf("%d generated Secrets", n)
		}
		return ""
	})
	before := snapshot(t, ns)
	ready, _, _, err := fleet(t.Context(), ns)
	if err != nil {
		t.Fatal(err)
	}
	if ready == giteas {
		t.Fatalf("all %d Giteas Ready before the fault: not in the middle of their first deploy", giteas)
	}
	faultStart := time.Now()
	what := fault(t, l)
	faultEnd := time.Now()

	readyAt := waitFleetReady(t, ns, giteas, convergeTimeout)
	idle, steps := settle(t, op, giteas)
	compared := compareKept(t, before, snapshot(t, ns))
	g.check(t)
	teardown := deleteFleet(t, ns)
	t.Logf("FAULT %s: %d Giteas; at the fault (%s after creation) %d of them Ready, %d claims and generated Secrets; %s; "+
		"all Ready %s after the fault ended (%s after it began, %s after creation); reconciles per %s from then: %v, idle (at most %.0f in %s) %s after; "+
		"claims and generated Secrets: %d compared with the snapshot, none deleted, re-created or changed; namespace deleted in %s",
		name, giteas, faultStart.Sub(created).Round(100*time.Millisecond), ready, len(before), what,
		readyAt.Sub(faultEnd).Round(100*time.Millisecond), readyAt.Sub(faultStart).Round(100*time.Millisecond),
		readyAt.Sub(created).Round(100*time.Millisecond), sampleStep, steps, idleMax(giteas), idleWindow, idle.Round(time.Second), compared,
		teardown.Round(100*time.Millisecond))
}

// TestFault_OperatorKilledDuringRecreate grows every database's storage (10Gi to 20Gi on an
// expandable StorageClass): kdag raises each claim's request and re-creates its StatefulSet
// (the claim template is immutable: delete with propagation Orphan, then create). The operator
// is SIGKILLed once a quarter of the StatefulSets were deleted, at a moment when at least one is
// deleted and not yet created again; a new operator process finishes. Every StatefulSet is
// re-created with the new template, every database pod is the same (same UID: orphaned and
// adopted, not restarted), and no claim or generated Secret is deleted, re-created or changed.
func TestFault_OperatorKilledDuringRecreate(t *testing.T) {
	ns := local.Namespace(t)
	dir := logDir(t, ns)
	l := newLink(t, dir)
	first := startOperator(t, l, dir, "operator-1")
	created := time.Now()
	createFleet(t, ns, giteas)
	deployed := waitFleetReady(t, ns, giteas, convergeTimeout).Sub(created)

	oldSets := statefulSets(t, ns)
	if len(oldSets) != giteas {
		t.Fatalf("%d StatefulSets in %s, want one per Gitea (%d)", len(oldSets), ns, giteas)
	}
	oldPods := map[string]types.UID{}
	for name := range oldSets {
		pod := &corev1.Pod{}
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name + "-0"}, pod); err != nil {
			t.Fatal(err)
		}
		oldPods[pod.Name] = pod.UID
	}
	before := snapshot(t, ns)
	g := watchKept(t, ns)

	grown := resource.MustParse("20Gi")
	eg, ctx := errgroup.WithContext(t.Context())
	eg.SetLimit(8)
	for i := range giteas {
		eg.Go(func() error {
			gt := &giteav1alpha1.Gitea{}
			gt.Namespace, gt.Name = ns, giteaName(i)
			return cl.Patch(ctx, gt, client.RawPatch(types.MergePatchType,
				[]byte(`{"spec":{"database":{"managed":{"storage":{"size":"20Gi"}}}}}`)))
		})
	}
	if err := eg.Wait(); err != nil {
		t.Fatalf("grow the databases' storage: %v", err)
	}
	changed := time.Now()

	// Kill once a quarter of the StatefulSets were deleted and one is gone or going right now.
	var deleted, inFlight int
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
		deleted, inFlight = recreateProgress(ctx, ns, oldSets)
		if deleted == giteas && inFlight == 0 {
			return false, fmt.Errorf("every StatefulSet re-created before the operator could be killed in the middle")
		}
		return deleted >= max(1, giteas/4) && inFlight > 0, nil
	})
	if err != nil {
		t.Fatalf("waiting for the Recreate in flight: %v (deleted %d, in flight %d)", err, deleted, inFlight)
	}
	first.kill()
	killed := time.Now()
	deleted, inFlight = recreateProgress(t.Context(), ns, oldSets)
	if inFlight == 0 {
		t.Logf("note: the Recreate in flight when the kill was decided finished before the process died")
	}

	second := startOperator(t, l, dir, "operator-2")
	poll.Until(t, "every StatefulSet re-created with the grown claim template, every claim grown", convergeTimeout,
		func(ctx context.Context) string {
			sets := &appsv1.StatefulSetList{}
			if err := cl.List(ctx, sets, client.InNamespace(ns)); err != nil {
				return err.Error()
			}
			done := 0
			for _, s := range sets.Items {
				if s.DeletionTimestamp == nil && s.UID != oldSets[s.Name] && len(s.Spec.VolumeClaimTemplates) == 1 &&
					s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().Cmp(grown) == 0 {
					done++
				}
			}
			claims := &corev1.PersistentVolumeClaimList{}
			if err := cl.List(ctx, claims, client.InNamespace(ns)); err != nil {
				return err.Error()
			}
			grownClaims := 0
			for _, c := range claims.Items {
				if c.Spec.Resources.Requests.Storage().Cmp(grown) == 0 {
					grownClaims++
				}
			}
			if done < giteas || grownClaims < giteas {
				return fmt.Sprintf("%d of %d StatefulSets re-created, %d database claims grown", done, giteas, grownClaims)
			}
			return ""
		})
	readyAt := waitFleetReady(t, ns, giteas, convergeTimeout)
	idle, steps := settle(t, second, giteas)
	for name, uid := range oldPods {
		pod := &corev1.Pod{}
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			t.Errorf("database pod %s: %v", name, err)
		} else if pod.UID != uid {
			t.Errorf("database pod %s: UID %s, was %s: the database was restarted", name, pod.UID, uid)
		}
	}
	compared := compareKept(t, before, snapshot(t, ns))
	g.check(t)
	teardown := deleteFleet(t, ns)
	t.Logf("FAULT operator killed during Recreate: %d Giteas (first deploy, no fault: all Ready in %s); killed %s after the change, with %d of %d StatefulSets deleted, "+
		"%d of them deleted and not yet created again; a new operator made every StatefulSet re-created and every Gitea Ready "+
		"%s after the kill; reconciles per %s from then: %v, idle (at most %.0f in %s) %s after; database pods kept: %d; "+
		"claims and generated Secrets: %d compared with the snapshot, none deleted, re-created or changed; namespace deleted in %s",
		giteas, deployed.Round(100*time.Millisecond), killed.Sub(changed).Round(100*time.Millisecond), deleted, giteas, inFlight,
		readyAt.Sub(killed).Round(100*time.Millisecond), sampleStep, steps, idleMax(giteas), idleWindow, idle.Round(time.Second),
		len(oldPods), compared, teardown.Round(100*time.Millisecond))
}

// statefulSets returns the UIDs of the StatefulSets of ns by name.
func statefulSets(t *testing.T, ns string) map[string]types.UID {
	t.Helper()
	list := &appsv1.StatefulSetList{}
	if err := cl.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, s := range list.Items {
		out[s.Name] = s.UID
	}
	return out
}

// recreateProgress counts the StatefulSets of old that were deleted (gone, being deleted, or
// there with a new UID) and those in flight: gone or being deleted, not created again yet.
func recreateProgress(ctx context.Context, ns string, old map[string]types.UID) (deleted, inFlight int) {
	list := &appsv1.StatefulSetList{}
	if err := cl.List(ctx, list, client.InNamespace(ns)); err != nil {
		return 0, 0
	}
	now := map[string]*appsv1.StatefulSet{}
	for i := range list.Items {
		now[list.Items[i].Name] = &list.Items[i]
	}
	for name, uid := range old {
		s, ok := now[name]
		switch {
		case !ok || s.DeletionTimestamp != nil:
			deleted++
			inFlight++
		case s.UID != uid:
			deleted++
		}
	}
	return deleted, inFlight
}
