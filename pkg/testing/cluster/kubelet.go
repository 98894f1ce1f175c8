package cluster

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// AnnotationKubeletRetry is the pod annotation whose change makes kwok's fake kubelet look at a
// pod again (KubeletRetry); its value is the time of the retry, RFC 3339.
const AnnotationKubeletRetry = "kdag.dev/e2e-kubelet-retry"

// KubeletRetry makes up for a difference between kwok's fake kubelet and a real one. kwok plays
// a pod's next stage (scheduled → Running and Ready; a Job's pod → Succeeded; a deleted pod →
// gone) once, on the pod's event; when the API server answers that write with an error kwok does
// not retry (a 500 while etcd is down, a client-side timeout under load), the pod stays where it
// is until its next change: a Job that never completes, a StatefulSet that never becomes Ready,
// for minutes or for good. A real kubelet keeps syncing its pods.
//
// Every interval, KubeletRetry lists the cluster's pods and changes the annotation
// AnnotationKubeletRetry of each pod that waits for the kubelet (WaitsForKubelet) and has not
// changed for stuck, which brings kwok back to it; it writes one line to log per retry. It
// returns when ctx ends. Pods that wait for anything else (a node, a claim, a Job controller)
// are left alone.
type KubeletRetry struct {
	Client   kubernetes.Interface
	Interval time.Duration // default 5 s
	Stuck    time.Duration // default 15 s
	Log      io.Writer     // default io.Discard
}

// Run retries until ctx ends.
func (k *KubeletRetry) Run(ctx context.Context) {
	interval, stuck, log := k.Interval, k.Stuck, k.Log
	if interval <= 0 {
		interval = 5 * time.Second
	}
	if stuck <= 0 {
		stuck = 15 * time.Second
	}
	if log == nil {
		log = io.Discard
	}
	type seen struct {
		resourceVersion string
		since           time.Time
	}
	last := map[types.UID]seen{}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pods, err := k.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			continue // the API server may be down on purpose: the next tick tries again
		}
		now := time.Now()
		next := make(map[types.UID]seen, len(pods.Items))
		for i := range pods.Items {
			p := &pods.Items[i]
			if !WaitsForKubelet(p) {
				continue
			}
			s, ok := last[p.UID]
			if !ok || s.resourceVersion != p.ResourceVersion {
				s = seen{resourceVersion: p.ResourceVersion, since: now}
			}
			if now.Sub(s.since) >= stuck {
				patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, AnnotationKubeletRetry, now.UTC().Format(time.RFC3339Nano))
				if _, err := k.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err == nil {
					fmt.Fprintf(log, "==> kwok left pod %s/%s %s for %s: retried\n", p.Namespace, p.Name, kubeletState(p), now.Sub(s.since).Round(time.Second))
				}
				s.since = now
			}
			next[p.UID] = s
		}
		last = next
	}
}

// WaitsForKubelet reports whether the next change of pod p is the kubelet's: it is on a node and
// is being deleted, Pending, Running and not Ready, or a Job's pod that is Running (kwok completes
// those at once).
func WaitsForKubelet(p *corev1.Pod) bool {
	if p.Spec.NodeName == "" {
		return false // the scheduler's, or a claim's
	}
	switch {
	case p.DeletionTimestamp != nil:
		return true
	case p.Status.Phase == corev1.PodPending || p.Status.Phase == "":
		return true
	case p.Status.Phase != corev1.PodRunning:
		return false // Succeeded or Failed: done
	case !podReady(p):
		return true
	}
	ref := metav1.GetControllerOfNoCopy(p)
	return ref != nil && ref.Kind == "Job" && ref.APIVersion == "batch/v1"
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// kubeletState says where the pod is, for the log line.
func kubeletState(p *corev1.Pod) string {
	switch {
	case p.DeletionTimestamp != nil:
		return "being deleted"
	case p.Status.Phase == corev1.PodRunning && podReady(p):
		return "Running (a Job's pod, not completed)"
	case p.Status.Phase == corev1.PodRunning:
		return "Running, not Ready"
	}
	return string(p.Status.Phase)
}

// startKubeletRetry runs a KubeletRetry against c, logging to log, until the returned stop is
// called; stop waits for it to return.
func (c *Cluster) startKubeletRetry(log io.Writer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	k := &KubeletRetry{Client: c.Clientset(), Log: log}
	wg.Go(func() { k.Run(ctx) })
	return func() {
		cancel()
		wg.Wait()
	}
}
