package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kdag-dev/kdag/pkg/testing/cluster"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

var (
	local *cluster.Cluster
	cs    *kubernetes.Clientset
)

func TestMain(m *testing.M) {
	ctx := context.Background()
	var err error
	local, err = cluster.Start(ctx, cluster.Options{Name: "kdag-e2e-cluster", Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cs = kubernetes.NewForConfigOrDie(local.Config)
	code := m.Run()
	if err := local.Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func TestCluster_NodesReady(t *testing.T) {
	nodes, err := cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) < 2 {
		t.Fatalf("got %d nodes, want at least 2", len(nodes.Items))
	}
}

func TestCluster_DeploymentBecomesAvailable(t *testing.T) {
	ns := local.Namespace(t)
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "deployment web available with 3 replicas", time.Minute, func(ctx context.Context) string {
		got, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		for _, c := range got.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue && got.Status.AvailableReplicas == 3 {
				return ""
			}
		}
		return fmt.Sprintf("%d available replicas, conditions %v", got.Status.AvailableReplicas, got.Status.Conditions)
	})
}

func TestCluster_JobCompletes(t *testing.T) {
	ns := local.Namespace(t)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "once"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "once", Image: "busybox:1.36"}},
		}}},
	}
	if _, err := cs.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "job once complete", time.Minute, func(ctx context.Context) string {
		got, err := cs.BatchV1().Jobs(ns).Get(ctx, "once", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		for _, c := range got.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return ""
			}
		}
		return fmt.Sprintf("conditions %v", got.Status.Conditions)
	})
}

func TestCluster_PersistentVolumeClaimBinds(t *testing.T) {
	ns := local.Namespace(t)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(t.Context(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "claim data bound", time.Minute, func(ctx context.Context) string {
		got, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if got.Status.Phase != corev1.ClaimBound {
			return "phase " + string(got.Status.Phase)
		}
		return ""
	})
}

func TestCluster_GarbageCollectsDependents(t *testing.T) {
	ns := local.Namespace(t)
	owner, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "owner"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "dependent",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(t.Context(), "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "dependent garbage-collected", time.Minute, func(ctx context.Context) bool {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "dependent", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

func TestCluster_SaveState(t *testing.T) {
	ns := local.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "saved"}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	local.SaveState(t, ns, dir, "configmaps")

	cases := []struct {
		file, want string
	}{
		{"namespace.yaml", "name: saved"},
		{"persistentvolumes.yaml", "kind: List"},
		{"kube-controller-manager.log", "Generated self-signed cert"},
		{"kube-scheduler.log", "Generated self-signed cert"},
		{"kwok-controller.log", "kwok"},
	}
	for _, c := range cases {
		data, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		if !strings.Contains(string(data), c.want) {
			t.Errorf("%s (%d bytes) does not contain %q; it begins %q", c.file, len(data), c.want, data[:min(len(data), 400)])
		}
	}
}
