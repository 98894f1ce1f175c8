package operator

import (
	"bytes"
	"context"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

var api = controllertest.NewAPIServer(envtest.Options{CRDs: testapi.CRDs()}, testapi.AddToScheme)

func TestMain(m *testing.M) { api.Main(m) }

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	return testapi.NewScheme()
}

// pages is a ResourceManager of Widgets: a ConfigMap of each Widget's data.
type pages struct{}

func (pages) OwnedTypes() []client.Object { return []client.Object{&corev1.ConfigMap{}} }

func (pages) AddResources(_ context.Context, w *testapi.Widget, b *controller.Graph) error {
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-pages"}, Data: w.Spec.Data})
	return nil
}

// testOptions are Options for a test's manager on env, its cache limited to ns, no endpoint bound.
func testOptions(t *testing.T, cfg *rest.Config, ns string) Options {
	return Options{
		Name: "hello", Version: "v0.0.1-test", Scheme: newScheme(t), RESTConfig: cfg, MetricsBindAddress: "0",
		ManagerOptions: func(o *ctrl.Options) {
			o.Cache.DefaultNamespaces = map[string]cache.Config{ns: {}}
			o.Controller.SkipNameValidation = ptr.To(true) // a controller of one name per test
		},
	}
}

// TestRun_ReconcilesAnOwnerAndStopsOnCancel: Run starts a manager that reconciles an owner to
// Ready (its child applied with Options.ControllerOptions' field manager, Options.Version in its
// status), and returns nil once its context is canceled, leaving no goroutine behind.
func TestRun_ReconcilesAnOwnerAndStopsOnCancel(t *testing.T) {
	env := api.Env(t)
	ns := env.Namespace(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		// The API client's idle keep-alive connections close on their own timer.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	opts := testOptions(t, env.Config, ns)
	opts.ControllerOptions = []controller.Options{{FieldManager: "pages-test"}}
	go func() {
		done <- Run(ctx, []controller.Component{controller.For("pages", pages{})}, opts)
	}()
	w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site"},
		Spec: testapi.WidgetSpec{Data: map[string]string{"index.html": "hello"}}}
	if err := env.Client.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the Widget is Ready", 2*time.Minute, func(ctx context.Context) bool {
		select {
		case err := <-done:
			t.Fatalf("Run returned before the Widget was Ready: %v", err)
		default:
		}
		return env.Client.Get(ctx, client.ObjectKeyFromObject(w), w) == nil &&
			meta.IsStatusConditionTrue(w.Status.Conditions, kdagv1alpha1.ConditionReady)
	})
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "site-pages"}, cm); err != nil {
		t.Fatalf("the Widget's ConfigMap: %v", err)
	}
	if cm.Data["index.html"] != "hello" {
		t.Errorf("ConfigMap data %v, want the Widget's", cm.Data)
	}
	managers := map[string]bool{}
	for _, f := range cm.ManagedFields {
		managers[f.Manager] = true
	}
	if !managers["pages-test"] {
		t.Errorf("the ConfigMap's field managers %v lack Options.ControllerOptions' pages-test", managers)
	}
	if w.Status.OperatorVersion != "v0.0.1-test" {
		t.Errorf("status.operatorVersion = %q, want Options.Version", w.Status.OperatorVersion)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel: %v, want nil", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Run did not return after its context was canceled")
	}
}

// TestRun_BadOptions: options that cannot work stop Run before it connects to anything (the
// RESTConfig points nowhere), with an error that names what to fix.
func TestRun_BadOptions(t *testing.T) {
	nowhere := &rest.Config{Host: "https://127.0.0.1:1"}
	comps := []controller.Component{controller.For("pages", pages{})}
	valid := func() Options {
		return Options{Name: "hello", Scheme: newScheme(t), RESTConfig: nowhere, MetricsBindAddress: "0"}
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Options)
		comps []controller.Component
		want  []string
	}{
		{"no name", func(o *Options) { o.Name = "" }, comps, []string{"Options.Name is empty"}},
		{"no scheme", func(o *Options) { o.Scheme = nil }, comps, []string{"Options.Scheme is nil", "clientgoscheme.AddToScheme"}},
		{"no component", func(*Options) {}, nil, []string{"no components", "controller.For"}},
		{"negative concurrency", func(o *Options) { o.Concurrency = -1 }, comps, []string{"--concurrency=-1"}},
		{"concurrency of an unknown controller", func(o *Options) { o.ControllerConcurrency = map[string]int{"page": 2} },
			comps, []string{`controller "page"`, "components: pages"}},
		{"negative per-controller concurrency", func(o *Options) { o.ControllerConcurrency = map[string]int{"pages": -2} },
			comps, []string{"--pages-concurrency=-2"}},
		{"an invalid shard", func(o *Options) { o.Sharding.Shard = "Shard_A" }, comps, []string{"--shard", "not a valid shard name"}},
		{"dynamic shards other than auto", func(o *Options) { o.Sharding.Shards = "3" }, comps, []string{`the only value is "auto"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := valid()
			tc.edit(&o)
			err := Run(t.Context(), tc.comps, o)
			if err == nil {
				t.Fatal("Run accepted the options")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestRun_MissingRBACNamesTheRulesToAdd: a manager whose ClusterRole lacks rules its component
// needs does not start; the error names each missing rule as a marker, and no granted one.
func TestRun_MissingRBACNamesTheRulesToAdd(t *testing.T) {
	env := api.Env(t)
	ns := env.Namespace(t)
	name := "operator-" + ns
	cfg, err := env.User(name)
	if err != nil {
		t.Fatal(err)
	}
	// Everything Rules says, less delete on ConfigMaps and the Widgets' finalizers.
	need, err := Rules(newScheme(t), env.Client.RESTMapper(), controller.For("pages", pages{}))
	if err != nil {
		t.Fatal(err)
	}
	var granted []rbacv1.PolicyRule
	for _, r := range need {
		switch r.Resources[0] {
		case "configmaps":
			r.Verbs = []string{"get", "list", "watch", "create", "update", "patch"}
		case "widgets/finalizers":
			continue
		}
		granted = append(granted, r)
	}
	for _, obj := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: granted},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}},
	} {
		if err := env.Client.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
	}
	err = Run(t.Context(), []controller.Component{controller.For("pages", pages{})}, testOptions(t, cfg, ns))
	if err == nil {
		t.Fatal("Run started a manager that lacks RBAC rules")
	}
	for _, want := range []string{
		`+kubebuilder:rbac:groups="",resources=configmaps,verbs=delete`,
		"+kubebuilder:rbac:groups=testing.kdag.dev,resources=widgets/finalizers,verbs=update",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name the missing rule %s", err, want)
		}
	}
	if strings.Count(err.Error(), "+kubebuilder:rbac:") != 2 {
		t.Errorf("error %q names other rules than the two missing", err)
	}
}

// TestCommand: Main's command line: -h, a bad flag, --version, and the plan subcommand's usage
// error, with their exit statuses; a flag's value reaches Run.
func TestCommand(t *testing.T) {
	comps := []controller.Component{controller.For("pages", pages{})}
	noContext := func() context.Context { t.Fatal("the command needed a context"); return nil }
	for _, tc := range []struct {
		name       string
		args       []string
		wantStatus int
		wantOut    string // in stdout
		wantErr    string // in stderr
	}{
		{"help", []string{"-h"}, 0, "", "Usage of hello"},
		{"a bad flag", []string{"--no-such-flag"}, 2, "", "flag provided but not defined: -no-such-flag"},
		{"version", []string{"--version"}, 0, "hello v1.2.3\n", ""},
		{"plan without a file", []string{"plan", "-o", "text"}, 2, "", "-f is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			ctx := noContext
			if len(tc.args) > 0 && tc.args[0] == "plan" {
				ctx = t.Context
			}
			got := command(append([]string{"hello"}, tc.args...), &stdout, &stderr, ctx, comps,
				Options{Name: "hello", Version: "v1.2.3", Scheme: newScheme(t)})
			if got != tc.wantStatus {
				t.Errorf("exit status %d, want %d; stderr:\n%s", got, tc.wantStatus, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantOut) {
				t.Errorf("stdout %q, want %q", stdout.String(), tc.wantOut)
			}
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.wantErr)
			}
		})
	}
	t.Run("a flag's value reaches Run", func(t *testing.T) {
		var stderr bytes.Buffer
		got := command([]string{"hello", "--pages-concurrency=-3", "--metrics-bind-address=0"}, &bytes.Buffer{}, &stderr,
			t.Context, comps, Options{Name: "hello", Scheme: newScheme(t)})
		if got != 1 || !strings.Contains(stderr.String(), "--pages-concurrency=-3") {
			t.Errorf("exit status %d, stderr %q: want 1 and the flag named", got, stderr.String())
		}
	})
}

// TestBindFlags_Sharding: the sharding and leader election flags, static and dynamic, and their
// mistakes, which stop the manager before it connects to anything, naming the flag to fix.
func TestBindFlags_Sharding(t *testing.T) {
	type want struct {
		shard, electionID, namespace string
		elect, auto, everyReplica    bool
	}
	comps := []controller.Component{controller.For("pages", pages{})}
	for _, tc := range []struct {
		name string
		args []string
		want want
		err  string // "": no error
	}{
		{name: "unsharded", want: want{electionID: "kdag.kdag.dev"}},
		{name: "a static shard", args: []string{"--shard=a", "--leader-elect"}, want: want{shard: "a", elect: true, electionID: "a.kdag.kdag.dev"}},
		{name: "dynamic shards: the replica's shard, the assigner's election, the Lease namespace",
			args: []string{"--shards=auto", "--shard-id=kdag-0", "--leader-election-namespace=ops"},
			want: want{shard: "kdag-0", elect: true, auto: true, everyReplica: true, electionID: "assigner.kdag.kdag.dev", namespace: "ops"}},
		{name: "--shards=auto and --shard", args: []string{"--shards=auto", "--shard=a", "--shard-id=x", "--leader-election-namespace=ops"}, err: "exclude each other"},
		{name: "--shards other than auto", args: []string{"--shards=3"}, err: `the only value is "auto"`},
		{name: "--shard-id without --shards=auto", args: []string{"--shard-id=x"}, err: "--shard-id needs --shards=auto"},
		{name: "an invalid --shard-id", args: []string{"--shards=auto", "--shard-id=Kdag_0", "--leader-election-namespace=ops"}, err: "--shard-id"},
		{name: "a Lease duration in fractions of seconds", args: []string{"--shards=auto", "--shard-id=x", "--leader-election-namespace=ops",
			"--shard-lease-duration=1500ms"}, err: "--shard-lease-duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("kdag", flag.ContinueOnError)
			opts := Options{Name: "kdag", Scheme: newScheme(t)}
			opts.BindFlags(fs, comps)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			o, err := opts.complete(comps)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			mo, err := o.Sharding.ManagerOptions(ctrl.Options{})
			if err != nil {
				t.Fatal(err)
			}
			everyReplica := mo.Controller.NeedLeaderElection != nil && !*mo.Controller.NeedLeaderElection
			got := want{shard: o.Sharding.Name(), electionID: mo.LeaderElectionID, elect: mo.LeaderElection, auto: o.Sharding.Auto(),
				everyReplica: everyReplica, namespace: o.Sharding.Namespace}
			if tc.want.namespace == "" {
				got.namespace = "" // the pod's, when the test runs in one
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestBindFlags_Concurrency: --concurrency and --NAME-concurrency, alone and together, give each
// component its number of owners reconciled at once; Options' own values are the defaults.
func TestBindFlags_Concurrency(t *testing.T) {
	comps := []controller.Component{controller.For("a", pages{}), controller.For("b", pages{})}
	for _, tc := range []struct {
		name string
		opts Options
		args []string
		want map[string]int // per component; 0: kdag's default
	}{
		{"none", Options{}, nil, map[string]int{"a": 0, "b": 0}},
		{"--concurrency for all", Options{}, []string{"--concurrency=3"}, map[string]int{"a": 3, "b": 3}},
		{"--a-concurrency over --concurrency", Options{}, []string{"--concurrency=3", "--a-concurrency=7"}, map[string]int{"a": 7, "b": 3}},
		{"Options' values as defaults, a flag over them", Options{Concurrency: 2, ControllerConcurrency: map[string]int{"b": 5}},
			[]string{"--a-concurrency=1"}, map[string]int{"a": 1, "b": 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			opts := tc.opts
			opts.Name, opts.Scheme = "x", newScheme(t)
			opts.BindFlags(fs, comps)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			o, err := opts.complete(comps)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range comps {
				n := o.ControllerConcurrency[c.Name()]
				if n == 0 {
					n = o.Concurrency
				}
				if n != tc.want[c.Name()] {
					t.Errorf("component %s: %d owners at once, want %d", c.Name(), n, tc.want[c.Name()])
				}
			}
		})
	}
}

// TestBindFlags_LeaseNamespace: the Leases' namespace, which the check of unserved shards reads,
// is --leader-election-namespace, else the pod's.
func TestBindFlags_LeaseNamespace(t *testing.T) {
	comps := []controller.Component{controller.For("pages", pages{})}
	namespaceOf := func(args ...string) string {
		fs := flag.NewFlagSet("kdag", flag.ContinueOnError)
		opts := Options{Name: "kdag", Scheme: newScheme(t)}
		opts.BindFlags(fs, comps)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		o, err := opts.complete(comps)
		if err != nil {
			t.Fatal(err)
		}
		return o.Sharding.Namespace
	}
	if got := namespaceOf("--leader-election-namespace=ops"); got != "ops" {
		t.Errorf("Namespace = %q, want ops", got)
	}
	want := ""
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil { // in a pod
		want = strings.TrimSpace(string(b))
	}
	if got := namespaceOf(); got != want {
		t.Errorf("Namespace without a flag = %q, want %q (the pod's namespace, or none outside a pod)", got, want)
	}
}
