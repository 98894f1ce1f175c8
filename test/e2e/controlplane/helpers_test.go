package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/latency"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

// operatorProc is one process of the reference operator's binary.
type operatorProc struct {
	cmd     *exec.Cmd
	done    chan struct{}
	log     string
	metrics string // URL of its metrics endpoint
}

// link is the network between the operator and the API server: a loopback TCP proxy that the
// test can cut, and a kubeconfig file that points at it.
type link struct {
	proxy      *latency.Proxy
	kubeconfig string
}

// newLink starts a proxy to the cluster's API server and writes a kubeconfig for it into dir.
// The proxy is closed when the test ends.
func newLink(t *testing.T, dir string) *link {
	t.Helper()
	p, err := latency.Start(local.Config.Host, latency.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	kc, err := clientcmd.Load(local.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		c.Server = "https://" + p.Addr()
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return &link{proxy: p, kubeconfig: path}
}

// ownerResources are the reference operator's owners by kubectl's names, for Cluster.SaveState.
var ownerResources = []string{
	"giteas.gitea.kdag.dev", "postgresqls.gitea.kdag.dev", "giteaservers.gitea.kdag.dev", "valkeys.gitea.kdag.dev",
}

// logDir returns a directory for the operators' logs, kept and named in the test log when the
// test fails; a failed test also leaves there the cluster's state for namespace ns and its
// controllers' logs (Cluster.SaveState), which a CI run's deleted cluster no longer has.
func logDir(t *testing.T, ns string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kdag-e2e-controlplane-"+t.Name()+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			local.SaveState(t, ns, dir, ownerResources...)
		}
		if t.Failed() || os.Getenv("E2E_KEEP_LOGS") != "" {
			t.Logf("the operators' logs and kubeconfig are in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

// startOperator runs the operator binary with l's kubeconfig, its metrics on a free loopback port,
// logging to <dir>/<name>.log. The test's cleanup kills it.
func startOperator(t *testing.T, l *link, dir, name string) *operatorProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	o := &operatorProc{log: filepath.Join(dir, name+".log"), done: make(chan struct{}), metrics: "http://" + addr + "/metrics"}
	f, err := os.Create(o.log)
	if err != nil {
		t.Fatal(err)
	}
	o.cmd = exec.Command(operator, "--metrics-bind-address="+addr, "--health-probe-bind-address=0",
		"--zap-encoder=json", "--zap-time-encoding=rfc3339nano", "--zap-log-level=debug")
	o.cmd.Env = append(os.Environ(), "KUBECONFIG="+l.kubeconfig)
	o.cmd.Stdout, o.cmd.Stderr = f, f
	o.cmd.SysProcAttr = dieWithParent()
	if err := o.cmd.Start(); err != nil {
		t.Fatalf("start operator %s: %v", name, err)
	}
	go func() {
		_ = o.cmd.Wait()
		f.Close()
		close(o.done)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			o.dump()
		}
		o.kill()
	})
	poll.Until(t, "operator "+name+" serves its metrics", time.Minute, func(ctx context.Context) string {
		if _, err := o.reconciles(ctx); err != nil {
			return err.Error()
		}
		return ""
	})
	return o
}

// kill stops the operator at once (SIGKILL: nothing finished, nothing released) and waits for it.
// dump makes a running operator write every goroutine's stack to its log and exit (SIGQUIT,
// Go's default handling), to show what a stuck reconcile waits for; it waits up to 10 s.
func (o *operatorProc) dump() {
	select {
	case <-o.done:
		return
	default:
	}
	// Its work queues first: what waits in them, and how long the longest reconcile runs.
	if resp, err := scrapeClient.Get(o.metrics); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if f, err := os.OpenFile(o.log, os.O_APPEND|os.O_WRONLY, 0); err == nil {
			for line := range strings.SplitSeq(string(body), "\n") {
				if strings.HasPrefix(line, "workqueue_") || strings.HasPrefix(line, "controller_runtime_active_workers") {
					fmt.Fprintln(f, "metric:", line)
				}
			}
			f.Close()
		}
	}
	if o.cmd.Process.Signal(syscall.SIGQUIT) == nil {
		select {
		case <-o.done:
		case <-time.After(10 * time.Second):
		}
	}
}

func (o *operatorProc) kill() {
	_ = o.cmd.Process.Kill()
	<-o.done
}

// scrapeClient keeps no connection open between scrapes: none outlives the test (goleak).
var scrapeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// reconciles returns the operator's controller_runtime_reconcile_total, summed over its
// controllers and results.
func (o *operatorProc) reconciles(ctx context.Context) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.metrics, nil)
	if err != nil {
		return 0, err
	}
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", o.metrics, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", o.metrics, err)
	}
	var sum float64
	if f := families["controller_runtime_reconcile_total"]; f != nil {
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum, nil
}

// idleWindow and idleMax define idle: at most idleMax reconciles, all controllers together, in
// idleWindow. A Ready fleet with nothing changing needs none; a storm is a reconcile per owner
// every few seconds.
const (
	idleWindow = 15 * time.Second
	idleBound  = time.Minute
	sampleStep = 5 * time.Second
)

// idleMax is the reconciles allowed in idleWindow for a fleet of n Giteas (4 owners each): one
// per 20 owners, at least 2.
func idleMax(n int) float64 { return float64(max(2, 4*n/20)) }

// settle samples o's reconcile count every sampleStep from now (the fleet just converged) until
// idleWindow adds at most idleMax(n) reconciles, and returns how long after now that window ended
// and the reconciles of each step. It fails the test when the operator is not idle within
// idleBound.
func settle(t *testing.T, o *operatorProc, n int) (time.Duration, []float64) {
	t.Helper()
	start := time.Now()
	var counts []float64
	perWindow := int(idleWindow / sampleStep)
	for {
		c, err := o.reconciles(t.Context())
		if err != nil {
			t.Fatalf("scrape the operator's metrics: %v", err)
		}
		counts = append(counts, c)
		if k := len(counts) - 1; k >= perWindow && counts[k]-counts[k-perWindow] <= idleMax(n) {
			return time.Since(start), deltas(counts)
		}
		if time.Since(start) > idleBound+idleWindow {
			t.Fatalf("reconcile storm: the operator did not go idle (at most %.0f reconciles in %s) within %s of convergence; "+
				"reconciles per %s: %v", idleMax(n), idleWindow, idleBound, sampleStep, deltas(counts))
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(sampleStep):
		}
	}
}

func deltas(counts []float64) []float64 {
	out := make([]float64, 0, len(counts))
	for i := 1; i < len(counts); i++ {
		out = append(out, counts[i]-counts[i-1])
	}
	return out
}

// giteaName is the name of the i-th Gitea of a fleet.
func giteaName(i int) string { return fmt.Sprintf("g%03d", i) }

// createFleet creates n Giteas in ns, each with its database on the expandable StorageClass
// (10Gi) and every other field defaulted.
func createFleet(t *testing.T, ns string, n int) {
	t.Helper()
	g, ctx := errgroup.WithContext(t.Context())
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			gt := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: giteaName(i)}}
			gt.Spec.Database.Managed = &giteav1alpha1.ManagedDatabaseSpec{Storage: giteav1alpha1.StorageSpec{
				Size: resource.MustParse("10Gi"), StorageClassName: ptr.To(expandableClass)}}
			return cl.Create(ctx, gt)
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("create Giteas: %v", err)
	}
}

// fleet counts the Giteas of ns that are Ready for their generation and returns up to three
// reasons why others are not.
func fleet(ctx context.Context, ns string) (ready, total int, why []string, err error) {
	list := &giteav1alpha1.GiteaList{}
	if err := cl.List(ctx, list, client.InNamespace(ns)); err != nil {
		return 0, 0, nil, err
	}
	for _, g := range list.Items {
		st := g.Status.Status
		c := meta.FindStatusCondition(st.Conditions, kdagv1alpha1.ConditionReady)
		if st.ObservedGeneration == g.Generation && c != nil && c.Status == metav1.ConditionTrue {
			ready++
			continue
		}
		if len(why) < 3 {
			why = append(why, fmt.Sprintf("%s: observedGeneration %d of %d, Ready %+v", g.Name, st.ObservedGeneration, g.Generation, c))
		}
	}
	return ready, len(list.Items), why, nil
}

// waitFleetReady waits until the n Giteas of ns are Ready for their generation and returns when
// that was seen.
func waitFleetReady(t *testing.T, ns string, n int, timeout time.Duration) time.Time {
	t.Helper()
	defer func() {
		if t.Failed() {
			logNotReady(t, ns)
		}
	}()
	poll.Until(t, fmt.Sprintf("%d Giteas in %s Ready", n, ns), timeout, func(ctx context.Context) string {
		ready, total, why, err := fleet(ctx, ns)
		switch {
		case err != nil:
			return err.Error()
		case total != n:
			return fmt.Sprintf("%d Giteas, want %d", total, n)
		case ready < n:
			return fmt.Sprintf("%d of %d Ready; %s", ready, n, strings.Join(why, "; "))
		}
		return ""
	})
	return time.Now()
}

// logNotReady logs, to explain a fleet that did not become Ready, every kdag owner of ns that is
// not Ready for its generation (Giteas and their components) and every StatefulSet, Deployment
// and claim of ns that is not plainly settled, as the API server holds them now.
func logNotReady(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	owners := []client.ObjectList{&giteav1alpha1.GiteaList{}, &giteav1alpha1.PostgreSQLList{}, &giteav1alpha1.GiteaServerList{}, &giteav1alpha1.ValkeyList{}}
	for _, list := range owners {
		if err := cl.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Logf("list %T: %v", list, err)
			continue
		}
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			st := kdagStatus(obj)
			if st == nil {
				return nil
			}
			c := meta.FindStatusCondition(st.Conditions, kdagv1alpha1.ConditionReady)
			if st.ObservedGeneration == obj.GetGeneration() && c != nil && c.Status == metav1.ConditionTrue {
				return nil
			}
			t.Logf("not Ready: %T %s (uid %s, rv %s): observedGeneration %d of %d, Ready %+v, waitingFor %+v",
				obj, obj.GetName(), obj.GetUID(), obj.GetResourceVersion(), st.ObservedGeneration, obj.GetGeneration(), c, st.WaitingFor)
			return nil
		})
	}
	sets := &appsv1.StatefulSetList{}
	if err := cl.List(ctx, sets, client.InNamespace(ns)); err == nil {
		for _, s := range sets.Items {
			st := s.Status
			if s.DeletionTimestamp == nil && st.ObservedGeneration == s.Generation && st.ReadyReplicas == ptr.Deref(s.Spec.Replicas, 1) &&
				st.UpdatedReplicas == st.Replicas && st.CurrentRevision == st.UpdateRevision {
				continue
			}
			t.Logf("StatefulSet %s (uid %s, rv %s, deleting %v): generation %d, status %+v", s.Name, s.UID, s.ResourceVersion, s.DeletionTimestamp, s.Generation, st)
		}
	}
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods, client.InNamespace(ns)); err == nil {
		for _, p := range pods.Items {
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
			}
			if !ready || p.DeletionTimestamp != nil {
				t.Logf("Pod %s (uid %s, owners %v, labels %v, deleting %v): phase %s, ready %v", p.Name, p.UID, p.OwnerReferences, p.Labels, p.DeletionTimestamp, p.Status.Phase, ready)
			}
		}
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if err := cl.List(ctx, claims, client.InNamespace(ns)); err == nil {
		for _, c := range claims.Items {
			if c.Status.Phase != corev1.ClaimBound || c.DeletionTimestamp != nil {
				t.Logf("claim %s (deleting %v): phase %s", c.Name, c.DeletionTimestamp, c.Status.Phase)
			}
		}
	}
}

// kdagStatus returns the kdag status block of one of the reference operator's owners.
func kdagStatus(obj client.Object) *kdagv1alpha1.Status {
	switch o := obj.(type) {
	case *giteav1alpha1.Gitea:
		return &o.Status.Status
	case *giteav1alpha1.PostgreSQL:
		return &o.Status.Status
	case *giteav1alpha1.GiteaServer:
		return &o.Status.Status
	case *giteav1alpha1.Valkey:
		return &o.Status.Status
	}
	return nil
}

// deleteFleet deletes namespace ns while the test's operator still runs and waits until it is
// gone: the owners' teardown (kdag's finalizers) is done by this test's operator, not left to the
// next test's, whose reconciles and recovery it would weigh on. It returns how long that took.
func deleteFleet(t *testing.T, ns string) time.Duration {
	t.Helper()
	start := time.Now()
	if err := cl.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	poll.Until(t, "namespace "+ns+" deleted", convergeTimeout, func(ctx context.Context) string {
		err := cl.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		ready, total, _, _ := fleet(ctx, ns)
		return fmt.Sprintf("still there (%v), %d Giteas left, %d of them Ready", err, total, ready)
	})
	return time.Since(start)
}

// generatedSecrets counts the Secrets of ns that kdag wrote (its controller label).
func generatedSecrets(ctx context.Context, ns string) (int, error) {
	list := &corev1.SecretList{}
	err := cl.List(ctx, list, client.InNamespace(ns), client.HasLabels{kdagv1alpha1.LabelController})
	return len(list.Items), err
}

// kept is what must survive a fault: a claim's or generated Secret's identity and data.
type kept struct {
	uid  types.UID
	data map[string][]byte // a Secret's data; a claim's bound volume under "volumeName"
}

// snapshot returns the claims and kdag-written Secrets of ns, keyed "Kind/name".
func snapshot(t *testing.T, ns string) map[string]kept {
	t.Helper()
	out := map[string]kept{}
	secrets := &corev1.SecretList{}
	if err := cl.List(t.Context(), secrets, client.InNamespace(ns), client.HasLabels{kdagv1alpha1.LabelController}); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		out["Secret/"+s.Name] = kept{uid: s.UID, data: s.Data}
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if err := cl.List(t.Context(), claims, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		out["PersistentVolumeClaim/"+c.Name] = kept{uid: c.UID, data: map[string][]byte{"volumeName": []byte(c.Spec.VolumeName)}}
	}
	return out
}

// compareKept fails the test for every object of before that is gone from after, has another UID
// or other data (a claim that was not bound yet may have bound since). It never prints a
// Secret's values. It returns how many objects were compared.
func compareKept(t *testing.T, before, after map[string]kept) int {
	t.Helper()
	keys := make([]string, 0, len(before))
	for k := range before {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b := before[k]
		a, ok := after[k]
		switch {
		case !ok:
			t.Errorf("%s: gone after the fault", k)
		case a.uid != b.uid:
			t.Errorf("%s: re-created (UID %s, was %s)", k, a.uid, b.uid)
		case strings.HasPrefix(k, "PersistentVolumeClaim/") && len(b.data["volumeName"]) == 0:
			// Not bound at the snapshot: any volume will do.
		case !sameData(a.data, b.data):
			t.Errorf("%s: data changed", k)
		}
	}
	return len(keys)
}

func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// guard watches the claims and kdag-written Secrets of a namespace from the test's own client,
// across API server restarts (a watch ended is resumed from the last version seen; a version too
// old to resume is replaced by a list compared with what was seen), and keeps every deletion,
// re-creation (a name seen with two UIDs) and change of a Secret's data.
type guard struct {
	mu       sync.Mutex
	uids     map[string]types.UID
	data     map[string]map[string][]byte
	problems []string
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// watchKept starts a guard on ns; it stops when the test ends, or at check.
func watchKept(t *testing.T, ns string) *guard {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &guard{uids: map[string]types.UID{}, data: map[string]map[string][]byte{}, cancel: cancel}
	cs := local.Clientset()
	sel := metav1.ListOptions{LabelSelector: kdagv1alpha1.LabelController}
	g.wg.Go(func() {
		g.follow(ctx, "Secret", func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = sel.LabelSelector
			return cs.CoreV1().Secrets(ns).Watch(ctx, opts)
		}, func(ctx context.Context) ([]metav1.Object, string, error) {
			l, err := cs.CoreV1().Secrets(ns).List(ctx, sel)
			if err != nil {
				return nil, "", err
			}
			out := make([]metav1.Object, len(l.Items))
			for i := range l.Items {
				out[i] = &l.Items[i]
			}
			return out, l.ResourceVersion, nil
		})
	})
	g.wg.Go(func() {
		g.follow(ctx, "PersistentVolumeClaim", func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().PersistentVolumeClaims(ns).Watch(ctx, opts)
		}, func(ctx context.Context) ([]metav1.Object, string, error) {
			l, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, "", err
			}
			out := make([]metav1.Object, len(l.Items))
			for i := range l.Items {
				out[i] = &l.Items[i]
			}
			return out, l.ResourceVersion, nil
		})
	})
	t.Cleanup(g.stop)
	return g
}

func (g *guard) stop() {
	g.cancel()
	g.wg.Wait()
}

// check stops the guard and fails the test for every problem it saw.
func (g *guard) check(t *testing.T) {
	t.Helper()
	g.stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.problems {
		t.Error(p)
	}
}

// follow lists then watches one kind until ctx ends.
func (g *guard) follow(ctx context.Context, kind string,
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	listFn func(context.Context) ([]metav1.Object, string, error),
) {
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			items, listRV, err := listFn(ctx)
			if err != nil {
				sleep(ctx, 200*time.Millisecond)
				continue
			}
			g.relisted(kind, items)
			rv = listRV
		}
		w, err := watchFn(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = ""
			}
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if s, ok := ev.Object.(*metav1.Status); ok && (s.Code == 410 || s.Reason == metav1.StatusReasonExpired || s.Reason == metav1.StatusReasonGone) {
					rv = ""
				}
				break
			}
			obj, ok := ev.Object.(metav1.Object)
			if !ok {
				continue
			}
			rv = obj.GetResourceVersion()
			switch ev.Type {
			case watch.Added, watch.Modified:
				g.seen(kind, obj)
			case watch.Deleted:
				g.problem("%s/%s: deleted (UID %s)", kind, obj.GetName(), obj.GetUID())
			}
		}
		w.Stop()
	}
}

func (g *guard) seen(kind string, obj metav1.Object) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := kind + "/" + obj.GetName()
	if uid, ok := g.uids[key]; ok && uid != obj.GetUID() {
		g.problems = append(g.problems, fmt.Sprintf("%s: re-created (UID %s, was %s)", key, obj.GetUID(), uid))
	}
	g.uids[key] = obj.GetUID()
	if s, ok := obj.(*corev1.Secret); ok {
		if old, ok := g.data[key]; ok && !sameData(old, s.Data) {
			g.problems = append(g.problems, key+": data changed")
		}
		g.data[key] = s.Data
	}
}

// relisted compares a list with what was seen: a name seen before and missing was deleted.
func (g *guard) relisted(kind string, items []metav1.Object) {
	present := map[string]bool{}
	for _, it := range items {
		present[kind+"/"+it.GetName()] = true
		g.seen(kind, it)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for key := range g.uids {
		if strings.HasPrefix(key, kind+"/") && !present[key] {
			g.problems = append(g.problems, key+": deleted (missing from a list)")
			delete(g.uids, key)
		}
	}
}

func (g *guard) problem(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.problems = append(g.problems, fmt.Sprintf(format, args...))
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
