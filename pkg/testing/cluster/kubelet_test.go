package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kdag-dev/kdag/pkg/testing/cluster"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

// TestWaitsForKubelet: which pods' next change is the kubelet's.
func TestWaitsForKubelet(t *testing.T) {
	now := metav1.Now()
	ready := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	notReady := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	job := []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "1", Controller: ptr.To(true)}}
	rs := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "r", UID: "2", Controller: ptr.To(true)}}
	for _, tc := range []struct {
		name  string
		node  string
		phase corev1.PodPhase
		conds []corev1.PodCondition
		owner []metav1.OwnerReference
		gone  bool
		want  bool
	}{
		{name: "unscheduled", phase: corev1.PodPending, want: false},
		{name: "scheduled, Pending", node: "n", phase: corev1.PodPending, want: true},
		{name: "scheduled, no phase yet", node: "n", want: true},
		{name: "Running, not Ready", node: "n", phase: corev1.PodRunning, conds: notReady, want: true},
		{name: "Running and Ready", node: "n", phase: corev1.PodRunning, conds: ready, owner: rs, want: false},
		{name: "a Job's, Running and Ready", node: "n", phase: corev1.PodRunning, conds: ready, owner: job, want: true},
		{name: "a Job's, Succeeded", node: "n", phase: corev1.PodSucceeded, owner: job, want: false},
		{name: "Failed", node: "n", phase: corev1.PodFailed, want: false},
		{name: "being deleted", node: "n", phase: corev1.PodRunning, conds: ready, gone: true, want: true},
		{name: "unscheduled, being deleted", phase: corev1.PodPending, gone: true, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{OwnerReferences: tc.owner},
				Spec:       corev1.PodSpec{NodeName: tc.node},
				Status:     corev1.PodStatus{Phase: tc.phase, Conditions: tc.conds},
			}
			if tc.gone {
				p.DeletionTimestamp = &now
			}
			if got := cluster.WaitsForKubelet(p); got != tc.want {
				t.Errorf("WaitsForKubelet = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestKubeletRetry_PodKwokLeftHalfWay: an admission policy refuses kwok's status write of a pod,
// as a down etcd does; kwok does not retry it, and the pod stays Pending on its node after the
// policy is gone. With a KubeletRetry running it becomes Running and Ready; without one it stays
// Pending (the control case, which shows that the retry is what moves it).
func TestKubeletRetry_PodKwokLeftHalfWay(t *testing.T) {
	nodes, err := cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v, %v", nodes, err)
	}
	node := nodes.Items[0].Name
	for _, retry := range []bool{false, true} {
		t.Run(fmt.Sprintf("retry=%v", retry), func(t *testing.T) {
			ns := local.Namespace(t)
			refuseStatusWrites(t, ns)
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}},
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
			}
			if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// kwok's write is refused: the pod stays Pending.
			time.Sleep(3 * time.Second)
			if p, err := cs.CoreV1().Pods(ns).Get(t.Context(), "held", metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodPending {
				t.Fatalf("pod held while its status writes are refused: %v, phase %v", err, p.Status.Phase)
			}
			allowStatusWrites(t, ns)
			if retry {
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				k := &cluster.KubeletRetry{Client: cs, Interval: 500 * time.Millisecond, Stuck: 2 * time.Second}
				wg.Go(func() { k.Run(ctx) })
				defer func() { cancel(); wg.Wait() }()
			}
			phase := func(ctx context.Context) string {
				p, err := cs.CoreV1().Pods(ns).Get(ctx, "held", metav1.GetOptions{})
				if err != nil {
					return err.Error()
				}
				if p.Status.Phase != corev1.PodRunning {
					return "phase " + string(p.Status.Phase)
				}
				return ""
			}
			if !retry {
				// Longer than the retry needs below, far shorter than kwok's next look.
				time.Sleep(10 * time.Second)
				if got := phase(t.Context()); got == "" {
					t.Fatalf("the pod ran with no retry: kwok retried its refused write itself; the retry is not needed")
				}
				return
			}
			poll.Until(t, "the held pod Running", 30*time.Second, phase)
			if p, err := cs.CoreV1().Pods(ns).Get(t.Context(), "held", metav1.GetOptions{}); err != nil || p.Annotations[cluster.AnnotationKubeletRetry] == "" {
				t.Errorf("the held pod has no %s annotation (%v): something other than the retry moved it", cluster.AnnotationKubeletRetry, err)
			}
		})
	}
}

// refusal is the message of refuseStatusWrites' policy.
const refusal = "kdag e2e: pod status writes refused"

// refuseStatusWrites makes the API server refuse every write of a pod's status in ns (a
// ValidatingAdmissionPolicy, no webhook) and waits until it does.
func refuseStatusWrites(t *testing.T, ns string) {
	t.Helper()
	name := "kdag-e2e-refuse-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/status"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: refusal}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	ar := cs.AdmissionregistrationV1()
	if _, err := ar.ValidatingAdmissionPolicies().Create(t.Context(), policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := ar.ValidatingAdmissionPolicyBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// The policy takes effect a moment after it is created: probe with a pod of no node (kwok
	// leaves it alone), whose status write is refused once it does.
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}, NodeSelector: map[string]string{"kdag-e2e/none": "x"}}}
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "pod status writes refused in "+ns, 30*time.Second, func(ctx context.Context) string {
		err := probeStatusWrite(ctx, ns)
		if err == nil || !strings.Contains(err.Error(), refusal) {
			return fmt.Sprintf("a status write was not refused by the policy: %v", err) // a conflict is not the policy
		}
		return ""
	})
}

// allowStatusWrites removes refuseStatusWrites' binding and waits until pod status writes in ns
// are allowed again.
func allowStatusWrites(t *testing.T, ns string) {
	t.Helper()
	name := "kdag-e2e-refuse-" + ns
	_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	poll.Until(t, "pod status writes allowed in "+ns, 30*time.Second, func(ctx context.Context) string {
		if err := probeStatusWrite(ctx, ns); err != nil {
			return err.Error()
		}
		return ""
	})
}

// probeStatusWrite makes a dry-run write of the status of the pod "probe" in ns and returns the
// API server's answer.
func probeStatusWrite(ctx context.Context, ns string) error {
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "probe", metav1.GetOptions{})
	if err != nil {
		return err
	}
	p.Status.Message = time.Now().String()
	_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}
